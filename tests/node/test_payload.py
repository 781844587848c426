"""The node payload and the small custom data that fetches it (docs/node-payload.md).

The payload is deterministic and content-addressed; the custom data carries the payload's URL, name and the
cluster's public key but not its sha256, so a payload change leaves it (and the rollout tag) unchanged; and a node
whose payload is tampered with, unsigned, signed for another payload, older than the one it runs, missing or
briefly unavailable stops with a status that names it, or retries to success (sandbox, with the stand-in IMDS and
payload account, and the real openssl verifying signatures).
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import io
import json
import subprocess
import tarfile
from pathlib import Path

import pytest
import yaml

from gb300 import config
from gb300 import tags as gb300_tags
from gb300.config import stacks as gb300_stacks
from gb300.errors import ConfigError
from gb300.node import context as node_context
from gb300.node import custom_data as nodes
from gb300.node import imds_guard, manifest, registry, sources
from gb300.node import steps as node_steps
from gb300.node.bundle import bundle_for
from gb300.node.pack import pack_custom_data, pack_payload
from gb300.node.payload import (
    ACCOUNT_PLACEHOLDER,
    FETCH_PAYLOAD,
    PAYLOAD_ENV,
    PAYLOAD_UPDATE,
)
from tests.support import node_e2e, signing
from tests.support.sandbox import Sandbox
from tests.support.tools import CLOUD_INIT_MISSING, require_tool

CONTAINER = "gb300-node-payload"
ACCOUNT = "devpl0123abcd"


@pytest.fixture(scope="module")
def dev() -> config.StackConfig:
    """The shipped dev stack's config, with the tests' payload signing key."""
    return config.parse(signing.with_test_key(config.load_stack_file(gb300_stacks.stack_file("dev"))))


def _with(cfg: config.StackConfig, **health: object) -> config.StackConfig:
    return cfg.model_copy(update={"health": cfg.health.model_copy(update=health)})


def test_payload_is_the_same_bytes_every_time(dev: config.StackConfig) -> None:
    """Built twice from the same config, a role's payload is byte for byte the same archive, named by its sha256."""
    first = nodes.render(gb300_tags.ROLE_GPU_NODE, dev, dev.gpu_pools[0]).payload
    second = nodes.render(gb300_tags.ROLE_GPU_NODE, dev, dev.gpu_pools[0]).payload
    assert first.archive == second.archive
    assert first.sha256 == hashlib.sha256(first.archive).hexdigest()
    assert first.blob_name == f"{first.sha256}.tar.gz"


def test_payload_entries_are_sorted_root_owned_and_timeless(dev: config.StackConfig) -> None:
    """The archive lists its files in path order, owned by root (0:0), with time 0, under a gzip header of time 0."""
    payload = nodes.render(gb300_tags.ROLE_HEAD, dev).payload
    assert payload.archive[4:8] == b"\0\0\0\0"  # gzip MTIME
    with tarfile.open(fileobj=io.BytesIO(payload.archive), mode="r:gz") as tar:
        members = tar.getmembers()
    names = [m.name for m in members]
    assert names == sorted(names)
    assert "usr/local/lib/gb300/lib.sh" in names
    assert all((m.uid, m.gid, m.uname, m.gname, m.mtime) == (0, 0, "root", "root", 0) for m in members)
    assert all(m.isfile() and not m.name.startswith("/") and ".." not in m.name.split("/") for m in members)


def test_payload_holds_exactly_the_full_cloud_configs_files(dev: config.StackConfig) -> None:
    """Every file the full cloud-config places is in the payload with its content and mode, and nothing else."""
    payload = nodes.render(gb300_tags.ROLE_GPU_NODE, dev, dev.gpu_pools[0]).payload
    full = yaml.safe_load(payload.cloud_config)
    with tarfile.open(fileobj=io.BytesIO(payload.archive), mode="r:gz") as tar:
        got = {}
        for member in tar.getmembers():
            handle = tar.extractfile(member)
            assert handle is not None
            got["/" + member.name] = (handle.read().decode(), f"{member.mode:04o}")
    assert got == {f["path"]: (f["content"], f["permissions"]) for f in full["write_files"]}


def test_custom_data_stays_the_same_when_the_payload_changes(dev: config.StackConfig) -> None:
    """A change that reaches only the payload's files (the health gate's setting) changes the payload, not the
    custom data nor its hash (the rollout tag): the custom data names the payload, never its sha256."""
    pool = dev.gpu_pools[0]
    before = nodes.render(gb300_tags.ROLE_GPU_NODE, dev, pool)
    changed = nodes.render(
        gb300_tags.ROLE_GPU_NODE, _with(dev, soft_failures_to_drain=dev.health.soft_failures_to_drain + 1), pool
    )
    assert changed.payload.sha256 != before.payload.sha256
    assert changed.cloud_config == before.cloud_config
    assert changed.sha256 == before.sha256
    assert before.payload.sha256 not in before.cloud_config


def test_custom_data_carries_the_payload_url_name_and_public_key(dev: config.StackConfig) -> None:
    """payload.env names the payload account's container (the account's name put in at deploy time), the payload,
    the cluster and the stack's public key; the hash is of the text with the placeholder, so the plan and the
    deployed tag agree whatever the subscription."""
    data = nodes.render(gb300_tags.ROLE_GPU_NODE, dev, dev.gpu_pools[0])
    doc = yaml.safe_load(data.cloud_config)
    [env] = [f["content"] for f in doc["write_files"] if f["path"] == PAYLOAD_ENV]
    values = dict(line.split("=", 1) for line in env.splitlines() if "=" in line and not line.startswith("#"))
    assert values["GB300_PAYLOAD_URL"] == f"https://{ACCOUNT_PLACEHOLDER}.blob.core.windows.net/{CONTAINER}"
    assert values["GB300_PAYLOAD_NAME"] == f"gpu-{dev.gpu_pools[0].name}"
    assert values["GB300_PAYLOAD_CLUSTER"] == dev.cluster.name
    assert values["GB300_PAYLOAD_PUBLIC_KEY"] == signing.public_key()
    sent = gzip.decompress(__import__("base64").b64decode(data.for_account(ACCOUNT))).decode()
    assert f"GB300_PAYLOAD_URL=https://{ACCOUNT}.blob.core.windows.net/{CONTAINER}" in sent
    assert sent == data.cloud_config.replace(ACCOUNT_PLACEHOLDER, ACCOUNT)
    assert hashlib.sha256(data.cloud_config.encode()).hexdigest() == data.sha256


def test_a_stack_without_a_signing_key_is_refused_naming_the_key(dev: config.StackConfig) -> None:
    """No public key, no custom data: the error names the key and the command that makes one."""
    settings = dev.storage.node_payload.model_copy(update={"signing_public_key": None})
    cfg = dev.model_copy(update={"storage": dev.storage.model_copy(update={"node_payload": settings})})
    with pytest.raises(ConfigError) as caught:
        nodes.render(gb300_tags.ROLE_HEAD, cfg)
    [problem] = caught.value.problems
    assert problem.path == "gb300:storage.nodePayload.signingPublicKey"
    assert "gb300 payload keygen" in problem.message


def test_custom_data_hash_changes_when_only_the_custom_data_changes(dev: config.StackConfig) -> None:
    """A change to the custom data alone (how often the payload is asked for) changes its hash, not the payload."""
    ctx = node_context.build(dev, gb300_tags.ROLE_HEAD)
    node = dataclasses.replace(ctx.node, payload_attempts=ctx.node.payload_attempts + 1)
    before = pack_custom_data(bundle_for(ctx))
    after = pack_custom_data(bundle_for(dataclasses.replace(ctx, node=node)))
    assert after.payload.sha256 == before.payload.sha256
    assert after.sha256 != before.sha256


def test_custom_data_fetches_then_runs_every_step(dev: config.StackConfig) -> None:
    """The custom data places only the IMDS guard, the fetch script and its settings (the guard's units and
    gb300-payload-update come with the payload); it closes IMDS, fetches, then runs the payload's steps in the full
    cloud-config's order."""
    data = nodes.render(gb300_tags.ROLE_GPU_NODE, dev, dev.gpu_pools[0])
    doc = yaml.safe_load(data.cloud_config)
    paths_ = [f["path"] for f in doc["write_files"]]
    assert paths_ == [imds_guard.GUARD, FETCH_PAYLOAD, PAYLOAD_ENV]
    later = [imds_guard.UNIT, imds_guard.RECHECK_UNIT, imds_guard.TIMER, PAYLOAD_UPDATE]
    assert {p.lstrip("/") for p in later} <= set(data.payload.paths)
    full = yaml.safe_load(data.payload.cloud_config)
    assert doc["runcmd"] == [[imds_guard.GUARD], [FETCH_PAYLOAD], *full["runcmd"]]
    assert data.size <= 8 * 1024


@pytest.mark.slow
@pytest.mark.parametrize("role", ["head", "gpu-node"])
def test_payload_cloud_config_passes_cloud_init_schema(dev: config.StackConfig, role: str, tmp_path: Path) -> None:
    """The full cloud-config the payload's files come from is still one the real cloud-init accepts."""
    exe = require_tool("cloud-init", CLOUD_INIT_MISSING)
    pool = dev.gpu_pools[0] if role == "gpu-node" else None
    path = tmp_path / f"{role}.yaml"
    path.write_text(pack_payload(bundle_for(node_context.build(dev, role, pool))).cloud_config, encoding="utf-8")
    proc = subprocess.run([exe, "schema", "--config-file", str(path)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


# ---------------------------------------------------------------------------------------------------------------
# Sandbox: the fetch on a node, against the stand-in IMDS and payload account.

TAGS = {"gb300-node-client-id": "22222222-2222-2222-2222-222222222222"}


def _published(
    cfg: config.StackConfig, name: str, archive: bytes, serial: int = 1, key: object = None
) -> dict[str, bytes]:
    """What `gb300 payload publish` leaves for one payload: archive, manifest, signature (the tests' key)."""
    m = manifest.Manifest(cfg.cluster.name, name, hashlib.sha256(archive).hexdigest(), len(archive), serial)
    data = m.to_bytes()
    signer = key if key is not None else signing.key()
    return {
        f"{CONTAINER}/{m.archive}": archive,
        f"{CONTAINER}/{manifest.manifest_blob(name)}": data,
        f"{CONTAINER}/{manifest.signature_blob(name)}": signer.sign(data),  # type: ignore[attr-defined]
    }


def _fetch_only(
    tmp_path: Path,
    dev: config.StackConfig,
    blobs: dict[str, bytes],
    failures: dict[str, int] | None = None,
    tags: dict[str, str] | None = None,
) -> tuple[Sandbox, node_e2e.Azure, nodes.CustomData, list[tuple[str, int]]]:
    """Boot the dev head's custom data (the payload account's name put in) in a sandbox: the IMDS guard,
    fetch-payload and the first step's runcmd entries, with 3 attempts and no wait between them."""
    data = nodes.render(gb300_tags.ROLE_HEAD, dev)
    azure = node_e2e.Azure(
        tags=TAGS if tags is None else tags, blobs=blobs, blob_failures=dict(failures or {}), payload_account=ACCOUNT
    )
    text = data.cloud_config.replace(ACCOUNT_PLACEHOLDER, ACCOUNT)
    box = Sandbox(tmp_path / "node", text, node_e2e.head_machine("dev-head"))
    box.config["runcmd"] = box.config["runcmd"][:3]  # the guard, the fetch and the first step: enough to see
    with node_e2e.endpoints(azure) as url:
        state = box.state() | {"endpoint": url}
        (box.base / "state.json").write_text(json.dumps(state))
        box.extra_env = {"GB300_PAYLOAD_ATTEMPTS": "3", "GB300_PAYLOAD_BACKOFF_SECONDS": "0"}
        result = box.run()
    return box, azure, data, result.returncodes


def _status(box: Sandbox) -> dict[str, str]:
    return dict(line.split(": ", 1) for line in box.read("/var/lib/gb300/status").splitlines())


def _stopped(box: Sandbox, codes: list[tuple[str, int]]) -> str:
    """The failed status's reason, after checking nothing of the payload was laid out and no step ran."""
    status = _status(box)
    assert status["state"] == "failed"
    assert status["step"] == "payload"
    assert not box.path("/usr/local/lib/gb300/lib.sh").exists()
    assert not box.path("/var/lib/gb300/payload.sha256").exists()
    assert codes[1][1] == 1
    assert codes[2][1] != 0
    return status["reason"]


def _tampered(archive: bytes) -> bytes:
    raw = gzip.decompress(archive)
    return gzip.compress(raw.replace(b"set -euo pipefail", b"set -eu pipefail", 1), mtime=0)


@pytest.mark.slow
def test_tampered_archive_stops_the_bootstrap_naming_it(tmp_path: Path, dev: config.StackConfig) -> None:
    """An archive whose bytes differ from the signed manifest's sha256 is never extracted or run: after its
    attempts the status names the mismatch, both hashes and the archive."""
    data = nodes.render(gb300_tags.ROLE_HEAD, dev)
    blobs = _published(dev, "head", data.payload.archive)
    archive = f"{CONTAINER}/{manifest.archive_blob(data.payload.sha256)}"
    tampered = data.payload.archive[:-1] + bytes([data.payload.archive[-1] ^ 1])  # the signed size, other bytes
    blobs[archive] = tampered
    box, azure, _, codes = _fetch_only(tmp_path, dev, blobs)
    reason = _stopped(box, codes)
    got = hashlib.sha256(tampered).hexdigest()
    assert reason.startswith(f"payload sha256 mismatch: expected {data.payload.sha256} got {got}")
    assert "(attempt 3 of 3)" in reason
    assert azure.blob_requests.count(archive) == 3


@pytest.mark.slow
def test_unsigned_payload_stops_the_bootstrap_naming_it(tmp_path: Path, dev: config.StackConfig) -> None:
    """A manifest without its signature is refused: the archive is never asked for."""
    data = nodes.render(gb300_tags.ROLE_HEAD, dev)
    blobs = _published(dev, "head", data.payload.archive)
    del blobs[f"{CONTAINER}/{manifest.signature_blob('head')}"]
    box, azure, _, codes = _fetch_only(tmp_path, dev, blobs)
    reason = _stopped(box, codes)
    url = f"https://{ACCOUNT}.blob.core.windows.net/{CONTAINER}/payloads/head/manifest.json.sig"
    assert reason == f"payload unsigned: HTTP 404 for {url} (attempt 3 of 3)"
    assert not any(r.startswith(f"{CONTAINER}/archives/") for r in azure.blob_requests)


@pytest.mark.slow
@pytest.mark.parametrize("forgery", ["other key", "manifest edited after signing"])
def test_a_bad_signature_stops_the_bootstrap_naming_it(tmp_path: Path, dev: config.StackConfig, forgery: str) -> None:
    """A manifest signed by another key, or edited to name a tampered archive after it was signed, fails the
    signature check: the archive is never fetched."""
    data = nodes.render(gb300_tags.ROLE_HEAD, dev)
    if forgery == "other key":
        other = manifest.load_private_key(manifest.generate_key()[0].decode())
        blobs = _published(dev, "head", data.payload.archive, key=other)
    else:
        blobs = _published(dev, "head", data.payload.archive)
        tampered = _tampered(data.payload.archive)
        forged = manifest.Manifest(dev.cluster.name, "head", hashlib.sha256(tampered).hexdigest(), len(tampered), 2)
        blobs[f"{CONTAINER}/{manifest.manifest_blob('head')}"] = forged.to_bytes()
        blobs[f"{CONTAINER}/{forged.archive}"] = tampered
    box, azure, _, codes = _fetch_only(tmp_path, dev, blobs)
    reason = _stopped(box, codes)
    url = f"https://{ACCOUNT}.blob.core.windows.net/{CONTAINER}/payloads/head/manifest.json"
    assert reason == f"payload signature invalid: {url} is not signed by the cluster's key (attempt 3 of 3)"
    assert not any(r.startswith(f"{CONTAINER}/archives/") for r in azure.blob_requests)


@pytest.mark.slow
def test_a_signed_payload_of_another_name_is_refused(tmp_path: Path, dev: config.StackConfig) -> None:
    """The GPU pool's validly signed manifest served where the head's belongs is refused by its name, at once."""
    data = nodes.render(gb300_tags.ROLE_GPU_NODE, dev, dev.gpu_pools[0])
    gpu = _published(dev, data.name, data.payload.archive)
    blobs = {k.replace(f"/payloads/{data.name}/", "/payloads/head/"): v for k, v in gpu.items()}
    box, _, _, codes = _fetch_only(tmp_path, dev, blobs)
    reason = _stopped(box, codes)
    assert (
        reason == f"payload refused: the signed manifest is payload '{data.name}' of cluster 'dev', not 'head' of 'dev'"
    )


@pytest.mark.slow
def test_missing_payload_stops_the_bootstrap_naming_it(tmp_path: Path, dev: config.StackConfig) -> None:
    """No manifest (404) stops the bootstrap after its attempts, the status naming the URL."""
    box, azure, _, codes = _fetch_only(tmp_path, dev, {})
    reason = _stopped(box, codes)
    url = f"https://{ACCOUNT}.blob.core.windows.net/{CONTAINER}/payloads/head/manifest.json"
    assert reason == f"payload fetch failed: HTTP 404 for {url} (attempt 3 of 3)"
    assert len(azure.blob_requests) == 3


@pytest.mark.slow
def test_transient_fetch_failure_is_retried_to_success(tmp_path: Path, dev: config.StackConfig) -> None:
    """Two 503 answers for the archive, then the payload: the third attempt fetches it, the files are laid out and
    the first step runs; a second run finds the payload in place and asks for nothing."""
    data = nodes.render(gb300_tags.ROLE_HEAD, dev)
    archive = f"{CONTAINER}/{manifest.archive_blob(data.payload.sha256)}"
    blobs = _published(dev, "head", data.payload.archive)
    box, azure, _, codes = _fetch_only(tmp_path, dev, blobs, {archive: 2})
    assert codes == [("gb300-imds-guard", 0), ("fetch-payload", 0), (node_steps.GUARD_STEP, 0)]
    assert azure.blob_requests.count(archive) == 3
    assert box.read("/var/lib/gb300/payload.sha256").strip() == data.payload.sha256
    assert box.read("/var/lib/gb300/payload.serial").strip() == "1"
    assert box.path(f"/var/lib/gb300/steps/{node_steps.GUARD_STEP}.done").is_file()
    assert not box.path("/var/lib/gb300/status").exists()
    asked = len(azure.blob_requests)
    again = subprocess.run(
        [str(box.path(FETCH_PAYLOAD))], env=box.env(), capture_output=True, text=True, check=False, timeout=60
    )
    assert again.returncode == 0, again.stderr
    assert "already in place" in again.stderr
    assert len(azure.blob_requests) == asked


@pytest.mark.slow
def test_a_node_takes_a_newer_payload_in_place_and_refuses_a_rollback(tmp_path: Path, dev: config.StackConfig) -> None:
    """gb300-payload-update on a booted node: a newer signed payload (serial 2) is fetched, checked and laid out
    without new custom data; the old manifest (serial 1) written back is refused, and the node is not marked
    failed (it runs the payload it has)."""
    data = nodes.render(gb300_tags.ROLE_HEAD, dev)
    old = _published(dev, "head", data.payload.archive, serial=1)
    box, _azure, _, codes = _fetch_only(tmp_path, dev, old)
    assert codes[1] == ("fetch-payload", 0)
    newer = nodes.render(gb300_tags.ROLE_HEAD, _with(dev, soft_failures_to_drain=dev.health.soft_failures_to_drain + 1))
    assert newer.cloud_config == data.cloud_config  # no new custom data
    update = [str(box.path(PAYLOAD_UPDATE))]
    for blobs, expect_rc in ((_published(dev, "head", newer.payload.archive, serial=2), 0), (old, 1)):
        azure2 = node_e2e.Azure(tags=TAGS, blobs=blobs, payload_account=ACCOUNT)
        with node_e2e.endpoints(azure2) as url:
            (box.base / "state.json").write_text(json.dumps(box.state() | {"endpoint": url}))
            done = subprocess.run(update, env=box.env(), capture_output=True, text=True, check=False, timeout=60)
        assert done.returncode == expect_rc, done.stderr
    assert "payload rollback refused: manifest serial 1 is older than the payload in place (serial 2)" in done.stderr
    assert box.read("/var/lib/gb300/payload.sha256").strip() == newer.payload.sha256
    assert box.read("/var/lib/gb300/payload.serial").strip() == "2"
    assert not box.path("/var/lib/gb300/status").exists()


@pytest.mark.slow
@pytest.mark.parametrize(
    "client", ["x&resource=https%3A%2F%2Fvault.azure.net", "22222222-2222-2222-2222-222222222222&x=1", "\u2028"]
)
def test_a_client_id_tag_that_is_not_a_guid_is_refused_before_any_token(
    tmp_path: Path, dev: config.StackConfig, client: str
) -> None:
    """The one tag fetch-payload reads must be a GUID: anything else stops the fetch before IMDS is asked for a
    token, and the status shows the value stripped of anything but letters, digits and -._:/."""
    data = nodes.render(gb300_tags.ROLE_HEAD, dev)
    box, azure, _, codes = _fetch_only(
        tmp_path, dev, _published(dev, "head", data.payload.archive), tags={"gb300-node-client-id": client}
    )
    reason = _stopped(box, codes)
    assert reason.startswith("payload refused: tag gb300-node-client-id must be a GUID")
    assert "&" not in reason
    assert not [r for r in azure.imds_requests if "oauth2/token" in r]
    assert azure.blob_requests == []


def test_inline_files_and_first_commands_run_before_the_fetch(
    dev: config.StackConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A registry file marked inline travels in the custom data too, and its `first` command runs before the
    fetch (what a step that must precede any download, such as closing IMDS to other users, needs)."""
    guard = "/usr/local/sbin/gb300-first"

    content = "#!/usr/bin/env bash\nset -euo pipefail\necho first\n"
    monkeypatch.setitem(sources.CONTENT, "first", lambda _t, _n: content)
    row = registry.Row("content", "first", guard, "00-imds-guard", "0755", inline=True, first=True)
    monkeypatch.setattr(registry, "ROWS", (row, *registry.ROWS))
    data = nodes.render(gb300_tags.ROLE_HEAD, dev)
    doc = yaml.safe_load(data.cloud_config)
    assert [f["path"] for f in doc["write_files"]] == [guard, imds_guard.GUARD, FETCH_PAYLOAD, PAYLOAD_ENV]
    assert doc["runcmd"][:3] == [[guard], [imds_guard.GUARD], [FETCH_PAYLOAD]]
    assert "usr/local/sbin/gb300-first" in data.payload.paths
