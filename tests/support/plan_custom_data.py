"""Find each role's custom data in a plan, decoded: what Azure would receive (base64 of gzip of the cloud-config),
and the node payloads the plan would upload (the blobs' file assets).

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
import tarfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from gb300.plan import PlanResult


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


def payloads(plan: PlanResult) -> dict[str, bytes]:
    """Blob name -> the bytes ``pulumi up`` would upload: each node payload blob's file asset, as the plan has it."""
    found = {}
    for resource in plan.resources:
        if resource.type != "azure-native:storage:Blob":
            continue
        source = resource.inputs.get("source")
        if not isinstance(source, Mapping) or not isinstance(source.get("path"), str):
            raise AssertionError(f"{resource.name}: a blob without a file asset")
        data = Path(source["path"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == source["hash"], f"{resource.name}: the file changed since the plan"
        found[str(resource.inputs["blobName"])] = data
    return found


def payload_of(plan: PlanResult, role: str) -> tuple[str, bytes]:
    """The blob name and bytes of the payload ``role``'s custom data fetches (its GB300_PAYLOAD_BLOB)."""
    doc = yaml.safe_load(cloud_config(plan, role))
    [env] = [f["content"] for f in doc["write_files"] if f["path"] == "/etc/gb300/payload.env"]
    [name] = [line.split("=", 1)[1] for line in env.splitlines() if line.startswith("GB300_PAYLOAD_BLOB=")]
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
