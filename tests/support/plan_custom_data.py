"""Find each role's custom data in a plan, decoded: what Azure would receive (base64 of gzip of the cloud-config),
and the node payloads the plan's upload command would publish.

The one place that knows where custom data sits in the plan's resources. It searches every resource's inputs
for a ``customData`` string and takes the role from the ``gb300-role`` tag (a GPU pool's ``gb300-pool`` tag
means ``gpu-node``) next to it (a scale set, whether
registered as its own resource type or as a dynamic resource carrying the ARM body; the head's VM), so a change
in how a resource is registered needs a change here only.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import shlex
import tarfile
from collections.abc import Iterator, Mapping
from typing import Any

import yaml

from gb300 import config, paths
from gb300 import tags as gb300_tags
from gb300.node import manifest
from gb300.ops import payload_publish
from gb300.plan import PlanResult
from tests.support import engine


def _walk(value: Any) -> Iterator[Mapping[str, Any]]:
    if isinstance(value, Mapping):
        yield value
        for item in value.values():
            yield from _walk(item)
    elif isinstance(value, list):
        for item in value:
            yield from _walk(item)


def _role(inputs: Mapping[str, Any]) -> str | None:
    for mapping in _walk(inputs):
        tags = mapping.get("tags")
        if isinstance(tags, Mapping) and isinstance(tags.get("gb300-role"), str):
            return str(tags["gb300-role"])
        if isinstance(tags, Mapping) and "gb300-pool" in tags:
            return "gpu-node"  # GPU pools' scale sets carry their pool, not a role
    return None


def encoded_custom_data(plan: PlanResult) -> dict[str, str]:
    """Role -> the base64 custom data the plan sends to Azure (one per role; pools of a role must agree)."""
    found: dict[str, str] = {}
    for resource in plan.resources:
        data = next((m["customData"] for m in _walk(resource.inputs) if isinstance(m.get("customData"), str)), None)
        if data is None:
            continue
        role = _role(resource.inputs)
        if role is None:
            raise AssertionError(f"{resource.name}: custom data without a gb300-role tag")
        found.setdefault(role, data)
    return found


def decode(data: str) -> str:
    """The cloud-config text of base64(gzip(text)) custom data."""
    return gzip.decompress(base64.b64decode(data)).decode("utf-8")


def cloud_config(plan: PlanResult, role: str) -> str:
    """The decoded cloud-config ``role`` boots with in ``plan`` (the small one that fetches the node payload)."""
    return decode(encoded_custom_data(plan)[role])


def publish_inputs(plan: PlanResult) -> dict[str, Any]:
    """The payload upload's ``local.Command`` inputs as the plan records them (``create``, and ``dir`` and
    ``environment`` where set): what the engine hands the command provider."""
    [command] = [r for r in plan.resources if r.type == "command:local:Command"]
    return dict(command.inputs)


def publish_command(plan: PlanResult) -> str:
    """The payload upload's command line, as the plan records the ``local.Command`` (what ``pulumi up`` runs)."""
    return str(publish_inputs(plan)["create"])


def payload_account(plan: PlanResult) -> str:
    """The payload account's name (the storage account tagged as holding node payloads)."""
    [account] = [
        r
        for r in plan.resources
        if r.type == "azure-native:storage:StorageAccount"
        and r.inputs.get("tags", {}).get(gb300_tags.STORAGE_PURPOSE) == gb300_tags.STORAGE_PURPOSE_NODE_PAYLOAD
    ]
    return str(account.inputs["accountName"])


def _rendered(plan: PlanResult, cfg: config.StackConfig | None = None) -> tuple[config.StackConfig, dict[str, bytes]]:
    """The stack the upload command names (or ``cfg``, for a stack whose file is not in the project) and its payloads
    (name -> archive), checked against the command's ``--expect`` digests, as ``gb300 payload publish`` checks them."""
    words = shlex.split(publish_command(plan))
    expect = dict(words[i + 1].split("=", 1) for i, w in enumerate(words) if w == "--expect")
    if cfg is None:
        # Relative to the directory the engine runs the command in (tests/support/engine.py), not the repository.
        pwd = engine.engine_pwd(engine.load_project(paths.REPO_ROOT))
        stack_file = pwd / words[words.index("--stack-file") + 1]
        cfg = config.parse(config.load_stack_file(stack_file))
    rendered = payload_publish.render(cfg)
    payload_publish.check_expected(rendered, expect)
    return cfg, {r.name: r.payload.archive for r in rendered}


def payloads(plan: PlanResult) -> dict[str, bytes]:
    """Payload name -> the archive ``gb300 payload publish`` would upload for the plan."""
    return _rendered(plan)[1]


def published(plan: PlanResult, key: Any, serial: int = 1, cfg: config.StackConfig | None = None) -> dict[str, bytes]:
    """``"<container>/<blob>" -> bytes``: what the upload leaves in the payload container, manifests signed with
    ``key`` (an Ed25519 private key), each payload's archive, manifest and signature. ``cfg``: the planned stack,
    where its file is not the project's ``stacks/Pulumi.<stack>.yaml`` the upload command names."""
    cfg, found = _rendered(plan, cfg)
    container = cfg.storage.node_payload.container
    blobs: dict[str, bytes] = {}
    for name, archive in found.items():
        m = manifest.Manifest(cfg.cluster.name, name, hashlib.sha256(archive).hexdigest(), len(archive), serial)
        data = m.to_bytes()
        blobs[f"{container}/{m.archive}"] = archive
        blobs[f"{container}/{manifest.manifest_blob(name)}"] = data
        blobs[f"{container}/{manifest.signature_blob(name)}"] = key.sign(data)
    return blobs


def payload_env(plan: PlanResult, role: str) -> dict[str, str]:
    """``role``'s /etc/gb300/payload.env, as its custom data places it."""
    doc = yaml.safe_load(cloud_config(plan, role))
    [env] = [f["content"] for f in doc["write_files"] if f["path"] == "/etc/gb300/payload.env"]
    return dict(line.split("=", 1) for line in env.splitlines() if "=" in line and not line.startswith("#"))


def payload_of(plan: PlanResult, role: str) -> tuple[str, bytes]:
    """The name and archive of the payload ``role``'s custom data fetches (its GB300_PAYLOAD_NAME)."""
    name = payload_env(plan, role)["GB300_PAYLOAD_NAME"]
    return name, payloads(plan)[name]


def full_cloud_config(plan: PlanResult, role: str) -> dict[str, Any]:
    """``role``'s node as a whole: the small cloud-config with the payload's files as ``write_files`` (what the
    node has once fetch-payload has laid the payload out)."""
    doc: dict[str, Any] = yaml.safe_load(cloud_config(plan, role))
    _, data = payload_of(plan, role)
    files = []
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        for member in tar.getmembers():
            handle = tar.extractfile(member)
            assert handle is not None
            content = handle.read().decode("utf-8")
            files.append({"path": "/" + member.name, "permissions": f"{member.mode:04o}", "content": content})
    doc["write_files"] = doc["write_files"] + files
    return doc
