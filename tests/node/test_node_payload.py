"""The node payload and the small custom data that fetches it (docs/node-payload.md).

The payload is deterministic and content-addressed; the custom data's hash (the rollout tag) follows the payload
and the custom data both ways; and a node whose payload is tampered with, missing or briefly unavailable stops
with a status that names it, or retries to success (sandbox, with the stand-in IMDS and Blob endpoint).
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

from gb300 import config, paths
from gb300.node import context as node_context
from gb300.node import custom_data as nodes
from gb300.node import imds_guard
from gb300.node import steps as node_steps
from gb300.node.payload import FETCH_PAYLOAD, build_payload, render_small_custom_data
from tests.support import node_e2e
from tests.support.sandbox import Sandbox
from tests.support.tools import CLOUD_INIT_MISSING, require_tool

CONTAINER = "gb300-node-payload"


@pytest.fixture(scope="module")
def dev() -> config.StackConfig:
    """The shipped dev stack's config."""
    return config.parse(config.load_stack_file(paths.stack_file("dev")))


def _with(cfg: config.StackConfig, **health: object) -> config.StackConfig:
    return cfg.model_copy(update={"health": cfg.health.model_copy(update=health)})


def test_payload_is_the_same_bytes_every_time(dev: config.StackConfig) -> None:
    """Built twice from the same config, a role's payload is byte for byte the same archive, named by its sha256."""
    first = nodes.render(nodes.GPU_NODE, dev, dev.gpu_pools[0]).payload
    second = nodes.render(nodes.GPU_NODE, dev, dev.gpu_pools[0]).payload
    assert first.archive == second.archive
    assert first.sha256 == hashlib.sha256(first.archive).hexdigest()
    assert first.blob_name == f"{first.sha256}.tar.gz"


def test_payload_entries_are_sorted_root_owned_and_timeless(dev: config.StackConfig) -> None:
    """The archive lists its files in path order, owned by root (0:0), with time 0, under a gzip header of time 0."""
    payload = nodes.render(nodes.HEAD, dev).payload
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
    payload = nodes.render(nodes.GPU_NODE, dev, dev.gpu_pools[0]).payload
    full = yaml.safe_load(payload.cloud_config)
    with tarfile.open(fileobj=io.BytesIO(payload.archive), mode="r:gz") as tar:
        got = {}
        for member in tar.getmembers():
            handle = tar.extractfile(member)
            assert handle is not None
            got["/" + member.name] = (handle.read().decode(), f"{member.mode:04o}")
    assert got == {f["path"]: (f["content"], f["permissions"]) for f in full["write_files"]}


def test_custom_data_hash_changes_when_the_payload_changes(dev: config.StackConfig) -> None:
    """A change that reaches only the payload's files (the health gate's setting) changes the payload and with it
    the custom data's hash (the rollout tag); the same config gives the same hash."""
    pool = dev.gpu_pools[0]
    before = nodes.render(nodes.GPU_NODE, dev, pool)
    same = nodes.render(nodes.GPU_NODE, dev, pool)
    changed = nodes.render(
        nodes.GPU_NODE, _with(dev, soft_failures_to_drain=dev.health.soft_failures_to_drain + 1), pool
    )
    assert same.sha256 == before.sha256
    assert same.payload.sha256 == before.payload.sha256
    assert changed.payload.sha256 != before.payload.sha256
    assert changed.sha256 != before.sha256
    assert changed.payload.sha256 in changed.cloud_config


def test_custom_data_hash_changes_when_only_the_custom_data_changes(dev: config.StackConfig) -> None:
    """A change to the custom data alone (how often the payload is asked for) changes its hash, not the payload."""
    ctx = node_context.build(dev, nodes.HEAD)
    node = dataclasses.replace(ctx.node, payload_attempts=ctx.node.payload_attempts + 1)
    before = render_small_custom_data(ctx)
    after = render_small_custom_data(dataclasses.replace(ctx, node=node))
    assert after.payload.sha256 == before.payload.sha256
    assert after.rendered.sha256 != before.rendered.sha256


def test_custom_data_fetches_then_runs_every_step(dev: config.StackConfig) -> None:
    """The custom data places only the IMDS guard (and its boot unit), the fetch script and its settings; it closes
    IMDS, fetches, then runs the payload's steps in the full cloud-config's order."""
    data = nodes.render(nodes.GPU_NODE, dev, dev.gpu_pools[0])
    doc = yaml.safe_load(data.cloud_config)
    paths_ = [f["path"] for f in doc["write_files"]]
    guard_files = [imds_guard.GUARD, imds_guard.UNIT, imds_guard.RECHECK_UNIT, imds_guard.TIMER]
    assert paths_ == [*guard_files, FETCH_PAYLOAD, "/etc/gb300/payload.env"]
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
    path.write_text(build_payload(node_context.build(dev, role, pool)).cloud_config, encoding="utf-8")
    proc = subprocess.run([exe, "schema", "--config-file", str(path)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


# ---------------------------------------------------------------------------------------------------------------
# Sandbox: the fetch on a node, against the stand-in IMDS and Blob endpoint.


def _fetch_only(
    tmp_path: Path, dev: config.StackConfig, blobs: dict[str, bytes], failures: dict[str, int] | None = None
) -> tuple[Sandbox, node_e2e.Azure, nodes.CustomData, list[tuple[str, int]]]:
    """Boot the dev head's custom data in a sandbox: the IMDS guard, fetch-payload and the first step's runcmd
    entries, with 3 attempts and no wait between them."""
    data = nodes.render(nodes.HEAD, dev)
    tags = {
        "gb300-payload-url": f"https://{node_e2e.BLOB_ACCOUNT}.blob.core.windows.net/{CONTAINER}",
        "gb300-node-client-id": "22222222-2222-2222-2222-222222222222",
    }
    azure = node_e2e.Azure(tags=tags, blobs=blobs, blob_failures=dict(failures or {}))
    box = Sandbox(tmp_path / "node", data.cloud_config, node_e2e.head_machine("dev-head"))
    box.config["runcmd"] = box.config["runcmd"][:3]  # the guard, the fetch and the first step: enough to see
    with node_e2e.endpoints(azure) as url:
        state = box.state() | {"endpoint": url}
        (box.base / "state.json").write_text(json.dumps(state))
        box.extra_env = {"GB300_PAYLOAD_ATTEMPTS": "3", "GB300_PAYLOAD_BACKOFF_SECONDS": "0"}
        result = box.run()
    return box, azure, data, result.returncodes


def _status(box: Sandbox) -> dict[str, str]:
    return dict(line.split(": ", 1) for line in box.read("/var/lib/gb300/status").splitlines())


@pytest.mark.slow
def test_tampered_payload_stops_the_bootstrap_naming_it(tmp_path: Path, dev: config.StackConfig) -> None:
    """A payload whose bytes do not match the custom data's sha256 is never extracted or run: after its attempts
    the status names the mismatch, both hashes and the blob, and no step runs."""
    data = nodes.render(nodes.HEAD, dev)
    raw = gzip.decompress(data.payload.archive)
    tampered = gzip.compress(raw.replace(b"set -euo pipefail", b"set -eu pipefail", 1), mtime=0)
    box, azure, _, codes = _fetch_only(tmp_path, dev, {f"{CONTAINER}/{data.payload.blob_name}": tampered})
    status = _status(box)
    assert status["state"] == "failed"
    assert status["step"] == "payload"
    got = hashlib.sha256(tampered).hexdigest()
    assert status["reason"].startswith(f"payload sha256 mismatch: expected {data.payload.sha256} got {got}")
    assert data.payload.blob_name in status["reason"]
    assert "(attempt 3 of 3)" in status["reason"]
    assert azure.blob_requests == [f"{CONTAINER}/{data.payload.blob_name}"] * 3
    assert not box.path("/usr/local/lib/gb300/lib.sh").exists()
    assert not box.path("/var/lib/gb300/payload.sha256").exists()
    assert codes[1][1] == 1
    assert codes[2][1] != 0


@pytest.mark.slow
def test_missing_payload_stops_the_bootstrap_naming_it(tmp_path: Path, dev: config.StackConfig) -> None:
    """A payload blob that is not there (404) stops the bootstrap after its attempts, the status naming the URL."""
    box, azure, data, codes = _fetch_only(tmp_path, dev, {})
    status = _status(box)
    assert status["step"] == "payload"
    url = f"https://{node_e2e.BLOB_ACCOUNT}.blob.core.windows.net/{CONTAINER}/{data.payload.blob_name}"
    assert status["reason"] == f"payload fetch failed: HTTP 404 for {url} (attempt 3 of 3)"
    assert len(azure.blob_requests) == 3
    assert not box.path("/usr/local/lib/gb300/run-step").exists()
    assert codes[1][1] == 1


@pytest.mark.slow
def test_transient_fetch_failure_is_retried_to_success(tmp_path: Path, dev: config.StackConfig) -> None:
    """Two 503 answers, then the payload: the third attempt fetches it, the files are laid out and the first step
    runs; a second run finds the payload in place and asks for nothing."""
    data = nodes.render(nodes.HEAD, dev)
    name = f"{CONTAINER}/{data.payload.blob_name}"
    box, azure, _, codes = _fetch_only(tmp_path, dev, {name: data.payload.archive}, {name: 2})
    assert codes == [("gb300-imds-guard", 0), ("fetch-payload", 0), (node_steps.GUARD_STEP, 0)]
    assert azure.blob_requests == [name] * 3
    assert box.read("/var/lib/gb300/payload.sha256").strip() == data.payload.sha256
    assert box.path(f"/var/lib/gb300/steps/{node_steps.GUARD_STEP}.done").is_file()
    assert not box.path("/var/lib/gb300/status").exists()
    again = subprocess.run(
        [str(box.path(FETCH_PAYLOAD))], env=box.env(), capture_output=True, text=True, check=False, timeout=60
    )
    assert again.returncode == 0, again.stderr
    assert "already in place" in again.stderr
    assert azure.blob_requests == [name] * 3


def test_inline_files_and_first_commands_run_before_the_fetch(
    dev: config.StackConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A registry file marked inline travels in the custom data too, and its `first` command runs before the
    fetch (what a step that must precede any download, such as closing IMDS to other users, needs)."""
    guard = "/usr/local/sbin/gb300-first"

    def render(_ctx: object, _steps: object) -> list[node_steps.NodeFile]:
        return [node_steps.NodeFile(guard, "#!/usr/bin/env bash\nset -euo pipefail\necho first\n", "0755")]

    entry = node_steps.Files("first", node_steps.BOTH, "bootstrap", render, inline=True, first=guard)
    monkeypatch.setattr(node_steps, "FILES", (entry, *node_steps.FILES))
    data = nodes.render(nodes.HEAD, dev)
    doc = yaml.safe_load(data.cloud_config)
    inline = [guard, imds_guard.GUARD, imds_guard.UNIT, imds_guard.RECHECK_UNIT, imds_guard.TIMER]
    assert [f["path"] for f in doc["write_files"]] == [*inline, FETCH_PAYLOAD, "/etc/gb300/payload.env"]
    assert doc["runcmd"][:3] == [[guard], [imds_guard.GUARD], [FETCH_PAYLOAD]]
    assert "usr/local/sbin/gb300-first" in data.payload.paths
