"""The payload signing key and the uploader's refusals: `gb300 payload keygen`, a stack without a key, a key
that is not the stack's, payloads that are not the program's, a role that never arrives; and no storage account
in any plan accepts shared keys."""

from __future__ import annotations

import copy
import io
import stat
from pathlib import Path
from typing import Any

import pytest
import requests

from gb300 import cli, config
from gb300.node import manifest
from gb300.ops import payload_publish
from gb300.plan import PlanResult, run_plan
from tests.rules.test_rules_stacks import BAD_STACK
from tests.support import fake_arm, signing

ACCOUNT = "azure-native:storage:StorageAccount"


def test_no_storage_account_in_any_plan_allows_shared_keys(
    reference_plan: PlanResult, dev_plan: PlanResult, dev_raw: dict[str, Any]
) -> None:
    """Every storage account of the reference, dev and test stacks (a stack without data storage, the rules'
    bad stack) sets allowSharedKeyAccess false, and no plan declares azure-native's storage:Blob (which signs
    with the account key)."""
    bare = copy.deepcopy(dev_raw)
    bare["storage"] = {"nodePayload": dev_raw["storage"]["nodePayload"]}
    plans = [reference_plan, dev_plan, run_plan("bare", bare), run_plan("bad", copy.deepcopy(BAD_STACK))]
    for plan in plans:
        accounts = [r for r in plan.resources if r.type == ACCOUNT]
        assert len(accounts) == 2, plan.stack  # the data account and the payload account
        assert [a.inputs.get("allowSharedKeyAccess") for a in accounts] == [False, False], plan.stack
        assert not [r for r in plan.resources if r.type == "azure-native:storage:Blob"], plan.stack


def test_keygen_writes_a_private_key_only_its_owner_reads_and_prints_the_stack_yaml(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The private key is a PEM of mode 0600 in folders keygen made (0700); stdout is the nested stack YAML with its
    public half, which pasted under a stack's config: is what the stack file parses to; a second keygen over the same
    file is refused (exit 2) and leaves it as it was."""
    out = tmp_path / "home" / ".gb300" / "payload.pem"
    assert cli.main(["payload", "keygen", "--out", str(out)]) == 0
    block = capsys.readouterr().out
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    assert [stat.S_IMODE(p.stat().st_mode) for p in (out.parent, out.parent.parent)] == [0o700, 0o700]
    key = manifest.load_private_key(out.read_text(), source=str(out))
    pasted = tmp_path / "Pulumi.pasted.yaml"
    pasted.write_text("config:\n" + block)
    assert config.load_stack_file(pasted) == {
        "storage": {"nodePayload": {"signingPublicKey": manifest.public_key_line(key)}}
    }
    before = out.read_bytes()
    assert cli.main(["payload", "keygen", "--out", str(out)]) == 2
    assert "never overwrites" in capsys.readouterr().err
    assert out.read_bytes() == before


def test_a_stack_without_a_signing_key_exits_2_naming_it(
    write_stack: Any, dev_raw: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    """gb300 plan of a stack with no public key: exit 2, one line naming the key and the command that makes one."""
    raw = copy.deepcopy(dev_raw)
    del raw["storage"]["nodePayload"]["signingPublicKey"]
    assert cli.main(["plan", "--stack-file", str(write_stack(raw)), "--quiet"]) == 2
    [line] = [x for x in capsys.readouterr().err.splitlines() if x.startswith("gb300:")]
    assert line.startswith("gb300:storage.nodePayload.signingPublicKey: is required")
    assert "gb300 payload keygen" in line


@pytest.mark.parametrize("value", ["ssh-ed25519 AAAA", "MCowBQYDK2VwAyEA", "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE"])
def test_a_signing_key_that_is_not_an_ed25519_public_key_is_refused(
    write_stack: Any, dev_raw: dict[str, Any], capsys: pytest.CaptureFixture[str], value: str
) -> None:
    raw = copy.deepcopy(dev_raw)
    raw["storage"]["nodePayload"]["signingPublicKey"] = value
    assert cli.main(["plan", "--stack-file", str(write_stack(raw)), "--quiet"]) == 2
    assert "gb300:storage.nodePayload.signingPublicKey: must be an Ed25519 public key" in capsys.readouterr().err


def _publish(stack: Path, *extra: str) -> list[str]:
    return [
        "payload",
        "publish",
        "--stack-file",
        str(stack),
        "--account-url",
        "https://devpl0123abcd.blob.core.windows.net",
        *extra,
    ]


def _expect(raw: dict[str, Any]) -> list[str]:
    rendered = payload_publish.render(config.parse(raw))
    return [w for r in rendered for w in ("--expect", f"{r.name}={r.payload.sha256}")]


def test_publish_refuses_a_key_that_is_not_the_stacks(
    write_stack: Any, dev_raw: dict[str, Any], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another key in GB300_PAYLOAD_SIGNING_KEY: exit 2 naming both public halves, before any Azure call; no key
    at all: exit 2 naming the variable and where CI keeps it."""
    raw = signing.with_test_key(dev_raw)
    stack = write_stack(raw)
    monkeypatch.setenv(manifest.SIGNING_KEY_ENV, manifest.generate_key()[0].decode())
    assert cli.main(_publish(stack, *_expect(raw))) == 2
    err = capsys.readouterr().err
    assert "is not this stack's payload signing key" in err
    assert signing.public_key() in err
    monkeypatch.delenv(manifest.SIGNING_KEY_ENV)
    assert cli.main(_publish(stack, *_expect(raw))) == 2
    assert "GB300_PAYLOAD_SIGNING_KEY is not set" in capsys.readouterr().err


def test_publish_refuses_payloads_the_program_did_not_declare(
    write_stack: Any, dev_raw: dict[str, Any], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sha256 on the command line that the stack file does not render (another checkout): exit 2 naming the
    payload and both digests."""
    monkeypatch.setenv(manifest.SIGNING_KEY_ENV, signing.key_pem())
    raw = signing.with_test_key(dev_raw)
    expect = _expect(raw)
    expect[1] = expect[1].split("=")[0] + "=" + "0" * 64
    assert cli.main(_publish(write_stack(raw), *expect)) == 2
    assert "payload head: the stack file renders " in capsys.readouterr().err


@pytest.mark.parametrize(
    "url",
    [
        "http://devpl0123abcd.blob.core.windows.net",
        "https://devpl0123abcd.blob.core.windows.net:8443",
        "https://user@devpl0123abcd.blob.core.windows.net",
        "https://10.0.0.5/stolen",
        "https://devpl0123abcd.blob.core.windows.net.evil.example",
    ],
)
def test_publish_takes_only_a_blob_endpoint_url(
    write_stack: Any, dev_raw: dict[str, Any], capsys: pytest.CaptureFixture[str], url: str
) -> None:
    args = ["payload", "publish", "--stack-file", str(write_stack(dev_raw)), "--account-url", url, *_expect(dev_raw)]
    assert cli.main(args) == 2
    assert "--account-url must be https://<account>.blob.core.windows.net" in capsys.readouterr().err


class _Forbidden(fake_arm.FakeHttp):
    """A Blob service whose answer to everything is 403 AuthorizationPermissionMismatch (a grant not arrived)."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[str] = []

    def send(self, request: requests.PreparedRequest, *args: Any, **kwargs: Any) -> requests.Response:
        url = (request.url or "").split("?")[0]
        self.requests.append(f"{request.method} {url} {request.headers['Authorization'][:7]}")
        body = (
            b'<?xml version="1.0" encoding="utf-8"?><Error><Code>AuthorizationPermissionMismatch</Code><Message>This '
            b"request is not authorized to perform this operation using this permission.</Message></Error>"
        )
        headers = {"x-ms-error-code": "AuthorizationPermissionMismatch", "Content-Type": "application/xml"}
        return fake_arm.response(request, 403, body, headers)


def test_a_role_that_never_arrives_fails_after_the_wait_with_a_clear_message() -> None:
    """403 AuthorizationPermissionMismatch is retried with growing waits for the role wait, then fails naming the
    role the deployer needs and the setting that grants it; every request carried a bearer token."""
    transport = _Forbidden()
    client = payload_publish.container_client(
        "https://devpl0123abcd.blob.core.windows.net",
        "gb300-node-payload",
        fake_arm.StaticCredential(),
        transport=fake_arm.transport(transport),
    )
    waits: list[float] = []
    publisher = payload_publish.Publisher(client, role_wait_s=10, sleep=waits.append, out=io.StringIO())
    with pytest.raises(payload_publish.PublishError) as caught:
        publisher.publish("dev", "head", b"x", signing.key())
    assert waits == [1, 2, 4, 8]
    message = str(caught.value)
    assert "403 AuthorizationPermissionMismatch" in message
    assert "Storage Blob Data Contributor" in message
    assert "gb300:storage.nodePayload.deployerPrincipalType" in message
    assert transport.requests
    assert all(r.endswith("Bearer ") for r in transport.requests)


def test_the_upload_runs_after_the_account_container_and_the_deployers_grant(reference_plan: PlanResult) -> None:
    """The upload command waits for the payload container and the deployer's Storage Blob Data Contributor grant
    (which wait for the account), and runs again exactly when a payload's sha256 changes (its triggers)."""
    [command] = [r for r in reference_plan.resources if r.type == "command:local:Command"]
    by_urn = {r.urn: r for r in reference_plan.resources}
    deps = {by_urn[d].name for d in command.dependencies if d in by_urn}
    assert {"ref-payload-container", "ref-payload-deployer"} <= deps
    grant = next(r for r in reference_plan.resources if r.name == "ref-payload-deployer")
    assert grant.inputs["principalType"] == "ServicePrincipal"
    container = next(r for r in reference_plan.resources if r.name == "ref-payload-container")
    assert "ref-payload-account" in {by_urn[d].name for d in container.dependencies if d in by_urn}
    words = command.inputs["create"].split()
    assert command.inputs["triggers"] == [w.split("=", 1)[1] for w in words if "=" in w and len(w.split("=")[1]) == 64]
    assert manifest.SIGNING_KEY_ENV not in str(command.inputs)
    assert "environment" not in command.inputs  # the key comes from the engine's environment, never the state
