"""The node payload delivered exactly as the deploy job delivers it, and fetched as a node fetches it.

The deploy job: the payload upload's command line is taken from the reference plan's recorded ``local.Command``
and run, in a project directory like the job's checkout, with the job's credential variables (``ARM_USE_OIDC``,
GitHub's ID token request, the signing key secret) in a network namespace where the only endpoints are stand-ins
that behave as Azure does (tests/support/fake_azure.py): GitHub's ID token endpoint, Entra ID's token endpoint,
and the payload account's Blob service, which refuses Shared Key and accepts Entra's bearer tokens once the
deployer's role has propagated (two 403 ``AuthorizationPermissionMismatch`` first). The data account's private
endpoint address is unreachable there, as it is from a hosted runner outside the VNet. Then the simulated nodes
(sandbox) boot from the plan's custom data against what was uploaded: they fetch, verify and run it; a tampered
archive stops the bootstrap naming it.

The node: fetch-payload itself, with the real curl and openssl, in a network namespace with a stand-in IMDS on
169.254.169.254 answering hostile tags and a listener on 10.0.0.5:8080 (issue 28's reproduction): no token reaches
the listener, and a client id that is not a GUID stops the fetch before IMDS is asked for a token.

Both need root (CI has it); they fail without it, never skip.
"""

from __future__ import annotations

import hashlib
import json
import shlex
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from gb300 import paths
from gb300.node import context as node_context
from gb300.node import manifest
from gb300.node import steps as node_steps
from gb300.node.payload import FETCH_PAYLOAD, PAYLOAD_ENV
from gb300.plan import PlanResult
from tests.support import fake_azure, netns, node_e2e, plan_custom_data, signing
from tests.support.sandbox import Sandbox

pytestmark = pytest.mark.slow  # namespaces, TLS stand-ins and sandboxes

TENANT = "11111111-1111-1111-1111-111111111111"
CLIENT = "33333333-3333-3333-3333-333333333333"
NODE_CLIENT = "22222222-2222-2222-2222-222222222222"
DATA_ENDPOINT = "10.40.3.4"  # the data account's private endpoint: an address in the VNet, no route from outside
DENIED_FIRST = 2


def _blobs(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def _requests(state: Path) -> list[dict[str, str]]:
    path = state / "requests.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


SHARED_KEY_PROBE = textwrap.dedent(
    """\
    import base64, sys
    from azure.core.exceptions import HttpResponseError
    from azure.storage.blob import BlobClient
    account = sys.argv[1].split(".")[0]
    key = base64.b64encode(b"k" * 64).decode()
    blob = BlobClient(f"https://{sys.argv[1]}", "gb300-node-payload", "probe",
                      credential={"account_name": account, "account_key": key})
    try:
        blob.upload_blob(b"x", overwrite=True)
        print("accepted")
    except HttpResponseError as exc:
        print(exc.status_code, exc.error_code)
    """
)

DELIVERY = textwrap.dedent(
    """\
    set -uo pipefail
    ip link set lo up
    mount --bind "$WORK/hosts" /etc/hosts
    mkdir -p "$WORK/azure"
    PYTHONPATH="$REPO" "$PY" -m tests.support.fake_azure --state "$WORK/azure" --cert "$WORK/server.pem" \\
      --key "$WORK/server.key" --payload-host "$PAYLOAD_HOST" --deny-first "$DENY_FIRST" &
    fake=$!
    trap 'kill $fake' EXIT
    for _ in $(seq 200); do [ -e "$WORK/azure/ready" ] && break; sleep 0.05; done
    # What azure-native's storage:Blob does (Shared Key from ListKeys), against the account: refused.
    "$PY" "$WORK/shared_key.py" "$PAYLOAD_HOST" >"$WORK/shared_key.out" 2>&1
    # The data account's private endpoint, from outside the VNet.
    curl -sS --max-time 5 -o /dev/null "https://$DATA_HOST/" 2>"$WORK/data.err"
    echo $? >"$WORK/data.rc"
    rm -rf "$WORK/azure/blobs" "$WORK/azure/requests.jsonl"
    # The deploy job: the plan's command, in the checkout, with the job's environment.
    cd "$PROJECT"
    /bin/sh -c "$COMMAND" >"$WORK/publish.out" 2>&1
    echo $? >"$WORK/publish.rc"
    """
)


@pytest.fixture(scope="module")
def delivered(signed_reference_plan: PlanResult, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The reference plan's upload command run as the deploy job runs it; what the stand-ins saw and kept."""
    work = tmp_path_factory.mktemp("delivery")
    work.chmod(0o755)
    account = plan_custom_data.payload_account(signed_reference_plan)
    payload_host = f"{account}.blob.core.windows.net"
    data_host = f"{_data_account(signed_reference_plan)}.blob.core.windows.net"
    netns.make_ca(work, [payload_host, fake_azure.ENTRA_HOST, fake_azure.ID_TOKEN_HOST])
    (work / "hosts").write_text(
        f"127.0.0.1 localhost {payload_host} {fake_azure.ENTRA_HOST} {fake_azure.ID_TOKEN_HOST}\n"
        f"{DATA_ENDPOINT} {data_host}\n"
    )
    (work / "shared_key.py").write_text(SHARED_KEY_PROBE)
    # The checkout the deploy job runs in: the project's environment and the stack file the plan was made from.
    project = work / "checkout"
    (project / "stacks").mkdir(parents=True)
    (project / ".venv").symlink_to(paths.REPO_ROOT / ".venv")
    stack = {"config": {f"gb300:{k}": v for k, v in _raw(signed_reference_plan).items()}}
    (project / "stacks" / "Pulumi.reference.yaml").write_text(yaml.safe_dump(stack))
    command = plan_custom_data.publish_command(signed_reference_plan)
    ca = str(work / "ca.pem")
    env = {
        # What the engine's environment holds in the deploy job (deploy.yml): the azure-native provider's OIDC
        # variables, GitHub's ID token request, the signing key secret; the command inherits it.
        "PATH": f"{paths.REPO_ROOT / '.venv' / 'bin'}:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
        "HOME": str(work),
        "ARM_USE_OIDC": "true",
        "ARM_CLIENT_ID": CLIENT,
        "ARM_TENANT_ID": TENANT,
        "ARM_SUBSCRIPTION_ID": "00000000-0000-0000-0000-000000000000",
        "ACTIONS_ID_TOKEN_REQUEST_URL": f"https://{fake_azure.ID_TOKEN_HOST}/id-token?api-version=2.0",
        "ACTIONS_ID_TOKEN_REQUEST_TOKEN": fake_azure.REQUEST_TOKEN,
        manifest.SIGNING_KEY_ENV: signing.key_pem(),
        # The stand-ins' CA, where a real job trusts the public CAs.
        "REQUESTS_CA_BUNDLE": ca,
        "SSL_CERT_FILE": ca,
        "CURL_CA_BUNDLE": ca,
        # The driver's own settings.
        "WORK": str(work),
        "REPO": str(paths.REPO_ROOT),
        "PY": sys.executable,
        "PROJECT": str(project),
        "COMMAND": command,
        "PAYLOAD_HOST": payload_host,
        "DATA_HOST": data_host,
        "DENY_FIRST": str(DENIED_FIRST),
    }
    proc = netns.run(DELIVERY, env, cwd=work)
    if not (work / "publish.rc").exists():
        pytest.fail(f"the delivery could not run (exit {proc.returncode}): {proc.stderr.strip()[-800:]}")
    return {
        "command": command,
        "rc": int((work / "publish.rc").read_text()),
        "output": (work / "publish.out").read_text(),
        "shared_key": (work / "shared_key.out").read_text().strip(),
        "data_rc": int((work / "data.rc").read_text()),
        "requests": _requests(work / "azure"),
        "blobs": _blobs(work / "azure" / "blobs"),
        "account": account,
        "payload_host": payload_host,
    }


def _raw(plan: PlanResult) -> dict[str, Any]:
    from gb300 import config  # noqa: PLC0415

    return signing.with_test_key(config.load_stack_file(paths.stack_file("reference")))


def _data_account(plan: PlanResult) -> str:
    from gb300 import tags  # noqa: PLC0415

    [account] = [
        r
        for r in plan.resources
        if r.type == "azure-native:storage:StorageAccount"
        and r.inputs.get("tags", {}).get(tags.STORAGE_PURPOSE) == tags.STORAGE_PURPOSE_DATA
    ]
    return str(account.inputs["accountName"])


def test_the_deploy_jobs_upload_signs_in_with_oidc_and_publishes_every_payload(
    delivered: dict[str, Any], signed_reference_plan: PlanResult
) -> None:
    """The plan's command, with the job's OIDC variables, gets an ID token from GitHub, trades it with Entra ID,
    waits out the role's propagation (two 403 AuthorizationPermissionMismatch) and publishes each payload: the
    archive, a manifest and a signature that verifies with the stack's public key. Every Blob request carried a
    bearer token; none went to the data account, which is unreachable from there."""
    assert delivered["rc"] == 0, delivered["output"]
    assert delivered["output"].count("AuthorizationPermissionMismatch") == DENIED_FIRST
    words = shlex.split(delivered["command"])
    expect = dict(words[i + 1].split("=", 1) for i, w in enumerate(words) if w == "--expect")
    pools = [p["name"] for p in _raw(signed_reference_plan)["gpuPools"]]
    assert sorted(expect) == sorted(["head", *(f"gpu-{p}" for p in pools)])
    blobs = delivered["blobs"]
    container = "gb300-node-payload"
    for name, sha in expect.items():
        archive = blobs[f"{container}/archives/{sha}.tar.gz"]
        assert hashlib.sha256(archive).hexdigest() == sha
        data = blobs[f"{container}/payloads/{name}/manifest.json"]
        m = manifest.Manifest.from_bytes(data)
        assert (m.cluster, m.name, m.sha256, m.size) == ("ref", name, sha, len(archive))
        assert manifest.verify(signing.public_key(), data, blobs[f"{container}/payloads/{name}/manifest.json.sig"])
    requests = delivered["requests"]
    blob_requests = [r for r in requests if r["host"] == delivered["payload_host"]]
    assert blob_requests
    assert {r["auth"] for r in blob_requests} == {"Bearer"}
    assert any(r["host"] == fake_azure.ID_TOKEN_HOST for r in requests)
    assert any(r["host"] == fake_azure.ENTRA_HOST and r["method"] == "POST" for r in requests)
    assert delivered["data_rc"] != 0  # no route to the private endpoint's address


def test_the_account_refuses_shared_key_as_azure_does(delivered: dict[str, Any]) -> None:
    """What azure-native's storage:Blob sends (Shared Key from ListKeys) is refused by the payload account's
    stand-in, as by Azure for an account with allowSharedKeyAccess false: why the upload uses a token."""
    assert delivered["shared_key"] == "403 KeyBasedAuthenticationNotPermitted"


def _boot(tmp_path: Path, plan: PlanResult, role: str, blobs: dict[str, bytes], account: str) -> Sandbox:
    """``role``'s node from the plan's custom data: the IMDS guard, fetch-payload and the first step it delivered."""
    azure = node_e2e.Azure(tags={"gb300-node-client-id": NODE_CLIENT}, blobs=blobs, payload_account=account)
    box = Sandbox(tmp_path / role, plan_custom_data.cloud_config(plan, role), node_e2e.head_machine("ref-node"))
    box.config["runcmd"] = box.config["runcmd"][:3]
    with node_e2e.endpoints(azure) as url:
        (box.base / "state.json").write_text(json.dumps(box.state() | {"endpoint": url}))
        box.extra_env = {"GB300_PAYLOAD_ATTEMPTS": "2", "GB300_PAYLOAD_BACKOFF_SECONDS": "0"}
        box.last = box.run()  # type: ignore[attr-defined]
    return box


@pytest.mark.parametrize("role", [node_context.HEAD, node_context.GPU_NODE])
def test_nodes_fetch_verify_and_run_what_was_delivered(
    delivered: dict[str, Any], signed_reference_plan: PlanResult, tmp_path: Path, role: str
) -> None:
    """Each role's node, booting from the plan's custom data against what the upload left in the account, takes
    its payload (signature and sha256 checked) and runs the first step it delivered."""
    box = _boot(tmp_path, signed_reference_plan, role, delivered["blobs"], delivered["account"])
    _name, archive = plan_custom_data.payload_of(signed_reference_plan, role)
    assert box.last.returncodes == [  # type: ignore[attr-defined]
        ("gb300-imds-guard", 0),
        ("fetch-payload", 0),
        (node_steps.GUARD_STEP, 0),
    ]
    assert box.read("/var/lib/gb300/payload.sha256").strip() == hashlib.sha256(archive).hexdigest()
    assert box.path(f"/var/lib/gb300/steps/{node_steps.GUARD_STEP}.done").is_file()


def test_a_delivered_payload_tampered_in_the_account_stops_the_bootstrap(
    delivered: dict[str, Any], signed_reference_plan: PlanResult, tmp_path: Path
) -> None:
    """One byte changed in the uploaded archive: the node never extracts it, and its status names the mismatch."""
    _name, archive = plan_custom_data.payload_of(signed_reference_plan, node_context.HEAD)
    sha = hashlib.sha256(archive).hexdigest()
    blobs = dict(delivered["blobs"])
    key = f"gb300-node-payload/archives/{sha}.tar.gz"
    blobs[key] = blobs[key][:-1] + bytes([blobs[key][-1] ^ 1])
    box = _boot(tmp_path, signed_reference_plan, node_context.HEAD, blobs, delivered["account"])
    status = box.read("/var/lib/gb300/status")
    assert "step: payload" in status
    assert f"reason: payload sha256 mismatch: expected {sha} got {hashlib.sha256(blobs[key]).hexdigest()}" in status
    assert not box.path("/usr/local/lib/gb300/lib.sh").exists()


# ---------------------------------------------------------------------------------------------------------------
# The node's fetch, for real, against a hostile tag set (issue 28, item 1).

IMDS = textwrap.dedent(
    """\
    import http.server, json, sys
    tags, log = json.load(open(sys.argv[1])), sys.argv[2]
    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            open(log, "a").write(self.path + "\\n")
            if self.headers.get("Metadata") != "true":
                self.send_response(400); self.end_headers(); return
            if self.path.startswith("/metadata/instance/compute/tagsList"):
                body = json.dumps([{"name": k, "value": v} for k, v in tags.items()])
            elif self.path.startswith("/metadata/identity/oauth2/token"):
                body = json.dumps({"access_token": "imds-storage-token", "token_type": "Bearer"})
            else:
                self.send_response(404); self.end_headers(); return
            self.send_response(200); self.end_headers(); self.wfile.write(body.encode())
        def log_message(self, *a): pass
    http.server.HTTPServer(("169.254.169.254", 80), H).serve_forever()
    """
)
LISTENER = textwrap.dedent(
    """\
    import http.server, sys
    log = sys.argv[1]
    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            open(log, "a").write(f"{self.path} {self.headers.get('Authorization', '')}\\n")
            self.send_response(200); self.end_headers(); self.wfile.write(b"stolen")
        def log_message(self, *a): pass
    http.server.HTTPServer(("10.0.0.5", 8080), H).serve_forever()
    """
)
HOSTILE = textwrap.dedent(
    """\
    set -uo pipefail
    ip link set lo up
    ip addr add 169.254.169.254/32 dev lo
    ip addr add 10.0.0.5/32 dev lo
    mount --bind "$WORK/hosts" /etc/hosts
    mkdir -p "$WORK/azure/blobs"
    cp -r "$WORK/published/." "$WORK/azure/blobs/"
    PYTHONPATH="$REPO" "$PY" -m tests.support.fake_azure --state "$WORK/azure" --cert "$WORK/server.pem" \\
      --key "$WORK/server.key" --payload-host "$PAYLOAD_HOST" --accept-token imds-storage-token &
    pids=$!
    "$PY" "$WORK/listener.py" "$WORK/listener.log" &
    pids="$pids $!"
    for case in $CASES; do
      "$PY" "$WORK/imds.py" "$WORK/$case.tags.json" "$WORK/$case.imds.log" &
      imds=$!
      for _ in $(seq 200); do
        [ -e "$WORK/azure/ready" ] && curl -s -o /dev/null -H Metadata:true http://169.254.169.254/x && break
        sleep 0.05
      done
      GB300_ROOT="$WORK/$case" GB300_PAYLOAD_ATTEMPTS=1 "$WORK/$case/usr/local/lib/gb300/fetch-payload" \\
        >"$WORK/$case.out" 2>&1
      echo $? >"$WORK/$case.rc"
      kill $imds; wait $imds 2>/dev/null
    done
    kill $pids
    """
)
HOSTILE_URL = "http://10.0.0.5:8080/stolen"
CASES = {
    # A tag writer points the payload URL at its listener; the client id is the identity's.
    "url": {"gb300-payload-url": HOSTILE_URL, "gb300-node-client-id": NODE_CLIENT},
    # ... and splices a second resource into the IMDS token query.
    "both": {"gb300-payload-url": HOSTILE_URL, "gb300-node-client-id": "x&resource=https%3A%2F%2Fvault.azure.net"},
}


@pytest.fixture(scope="module")
def hostile(signed_reference_plan: PlanResult, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """fetch-payload from the reference head's custom data, run for each hostile tag set (CASES)."""
    work = tmp_path_factory.mktemp("hostile")
    work.chmod(0o755)
    account = plan_custom_data.payload_account(signed_reference_plan)
    payload_host = f"{account}.blob.core.windows.net"
    netns.make_ca(work, [payload_host])
    (work / "hosts").write_text(f"127.0.0.1 localhost {payload_host}\n")
    for blob, data in plan_custom_data.published(signed_reference_plan, signing.key()).items():
        target = work / "published" / blob
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    (work / "imds.py").write_text(IMDS)
    (work / "listener.py").write_text(LISTENER)
    files = yaml.safe_load(plan_custom_data.cloud_config(signed_reference_plan, node_context.HEAD))["write_files"]
    for case, tags in CASES.items():
        (work / f"{case}.tags.json").write_text(json.dumps(tags))
        for entry in files:
            if entry["path"] in (FETCH_PAYLOAD, PAYLOAD_ENV):
                target = work / case / entry["path"].lstrip("/")
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(entry["content"])
                target.chmod(int(entry["permissions"], 8))
    ca = str(work / "ca.pem")
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
        "HOME": str(work),
        "CURL_CA_BUNDLE": ca,
        "WORK": str(work),
        "REPO": str(paths.REPO_ROOT),
        "PY": sys.executable,
        "PAYLOAD_HOST": payload_host,
        "CASES": " ".join(CASES),
    }
    proc = netns.run(HOSTILE, env, cwd=work)
    if not all((work / f"{case}.rc").exists() for case in CASES):
        pytest.fail(f"the namespace test could not run (exit {proc.returncode}): {proc.stderr.strip()[-800:]}")
    return work


def test_a_tag_naming_another_address_gets_no_token(hostile: Path, signed_reference_plan: PlanResult) -> None:
    """gb300-payload-url pointing at a listener is not read: the node fetches its payload from the custom data's
    account (the listener hears nothing) and asks IMDS for a storage token for its own identity only."""
    assert (hostile / "url.rc").read_text().strip() == "0", (hostile / "url.out").read_text()
    assert not (hostile / "listener.log").exists() or (hostile / "listener.log").read_text() == ""
    _, archive = plan_custom_data.payload_of(signed_reference_plan, node_context.HEAD)
    done = hostile / "url" / "var/lib/gb300/payload.sha256"
    assert done.read_text().strip() == hashlib.sha256(archive).hexdigest()
    tokens = [line for line in (hostile / "url.imds.log").read_text().splitlines() if "oauth2/token" in line]
    assert tokens
    assert all(line.endswith(f"&client_id={NODE_CLIENT}") and line.count("resource=") == 1 for line in tokens)


def test_a_client_id_tag_splicing_a_resource_stops_the_fetch_before_any_token(hostile: Path) -> None:
    """The client id `x&resource=...vault...` is not a GUID: the fetch stops naming the tag, IMDS is never asked
    for a token (for storage or the vault), and the listener hears nothing."""
    assert (hostile / "both.rc").read_text().strip() == "1"
    status = (hostile / "both" / "var/lib/gb300/status").read_text()
    assert "reason: payload refused: tag gb300-node-client-id must be a GUID" in status
    asked = (hostile / "both.imds.log").read_text().splitlines()
    assert asked
    assert not [line for line in asked if "oauth2/token" in line]
    assert not (hostile / "listener.log").exists() or (hostile / "listener.log").read_text() == ""
    assert not (hostile / "both" / "usr/local/lib/gb300/lib.sh").exists()


def test_the_node_never_reads_a_payload_url_tag() -> None:
    """No node script reads gb300-payload-url any more: the tag no longer exists in the tag contract."""
    scripts = Path(node_steps.CLOUD_INIT_DIR).rglob("*")
    assert not [p for p in scripts if p.is_file() and "gb300-payload-url" in p.read_text(errors="replace")]
