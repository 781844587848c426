"""Render a role's cloud-config as data, serialize it with yaml, and pack it as Azure custom data.

The cloud-config is a dict built here: the role fragments' keys, `write_files` (every file and step script
the node registry, `gb300.node.steps`, selects for the role and stack) and `runcmd` (one list-form entry per
step, in registry order, checked there). Only file contents come from templates or Python providers.
The result is gzip-compressed (cloud-init accepts gzip user data) and base64-encoded, and must stay under
Azure's 64 KB custom data limit.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
from dataclasses import dataclass
from typing import Any

import yaml

from gb300 import tags
from gb300.errors import BootstrapError
from gb300.node import steps as node_steps
from gb300.node.boot_context import BootstrapContext
from gb300.node.resources import CLOUD_INIT_DIR
from gb300.node.roles import load_role
from gb300.node.secrets import find_secret_material

__all__ = [
    "AZURE_CUSTOM_DATA_LIMIT",
    "CUSTOM_DATA_HASH_TAG",
    "RenderedCustomData",
    "build_cloud_config",
    "dump_cloud_config",
    "pack_custom_data",
    "render_custom_data",
]

AZURE_CUSTOM_DATA_LIMIT = 65_536
"""Azure's limit on base64 custom data, in bytes (azure-compute-docs virtual-machines/custom-data.md)."""
CUSTOM_DATA_HASH_TAG = tags.CUSTOM_DATA_HASH
"""The scale set tag that carries `RenderedCustomData.sha256`; a differing value means reimage."""
_HEADER = "#cloud-config\n"


@dataclass(frozen=True)
class RenderedCustomData:
    """A role's rendered bootstrap: the cloud-config text and what goes on the scale set."""

    role: str
    cloud_config: str
    custom_data: str
    """base64 of the gzip-compressed cloud-config: the scale set's `customData`."""
    size_bytes: int
    """Length of `custom_data`, the figure Azure's 64 KB limit applies to."""
    sha256: str
    """Hex sha256 of `cloud_config`: put it on the scale set as a tag; a change means reimage."""

    @property
    def short_hash(self) -> str:
        """The first 12 hex digits of `sha256`, short enough for a tag value or a plan line."""
        return self.sha256[:12]


# libyaml's emitter when PyYAML has it (its wheels do): the same text as the pure-Python one, in a fraction of the
# time (the two roles' cloud-config were a tenth of a 1,388-rack plan's own CPU; docs/scale.md).
_SAFE_DUMPER: type[Any] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _LiteralDumper(_SAFE_DUMPER):  # type: ignore[misc]
    """A SafeDumper (libyaml's emitter) that writes multi-line strings as literal blocks, so goldens read like files."""


def _str_presenter(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_LiteralDumper.add_representer(str, _str_presenter)


def _file_entry(path: str, content: str, permissions: str) -> dict[str, Any]:
    return {"path": path, "owner": "root:root", "permissions": permissions, "content": content}


def build_cloud_config(ctx: BootstrapContext) -> dict[str, Any]:
    """The role's cloud-config as a dict (what `render_custom_data` serializes)."""
    common, fragment = load_role(ctx.role, CLOUD_INIT_DIR)
    steps = node_steps.steps_for(ctx)
    config: dict[str, Any] = {}
    config.update(common.cloud_config)
    config.update(fragment.cloud_config)
    write_files = [_file_entry(f.path, f.content, f.permissions) for f in node_steps.files_for(ctx, steps)]
    paths = [entry["path"] for entry in write_files]
    duplicates = sorted({p for p in paths if paths.count(p) > 1})
    if duplicates:
        msg = f"custom data for role {ctx.role!r} places these paths twice: {', '.join(duplicates)}"
        raise BootstrapError(msg)
    config["write_files"] = write_files
    config["runcmd"] = [[node_steps.RUN_STEP, step.name] for step in steps]
    return config


def dump_cloud_config(ctx: BootstrapContext, config: dict[str, Any], note: str = "") -> str:
    """``config`` as cloud-config text: the header, a line naming the role, pool and cluster, then the YAML."""
    body = yaml.dump(config, Dumper=_LiteralDumper, sort_keys=False, width=120, allow_unicode=False)
    return (
        _HEADER
        + f"# gb300 bootstrap for role {ctx.role}, pool {ctx.pool_name}, cluster {ctx.cluster_name}.\n"
        + "# Generated from cloud-init/, templates/ and infra/gb300/data/: edit those, not this.\n"
        + note
        + body
    )


def render_custom_data(ctx: BootstrapContext) -> RenderedCustomData:
    """Render `ctx.role`'s cloud-config for one pool and pack it as Azure custom data.

    Raises BootstrapError when the result carries secret-looking material or exceeds 64 KB.
    """
    return pack_custom_data(ctx, dump_cloud_config(ctx, build_cloud_config(ctx)))


def pack_custom_data(ctx: BootstrapContext, text: str) -> RenderedCustomData:
    """Cloud-config ``text`` of ``ctx.role`` packed as Azure custom data (base64 of gzip, time 0) with its hash.

    Raises BootstrapError when ``text`` carries secret-looking material or the packed form exceeds 64 KB.
    """
    found = find_secret_material(text)
    if found:
        msg = (
            f"custom data for role {ctx.role!r} must not carry secrets (found: {', '.join(found)}). "
            "Fetch them at boot with the node's managed identity."
        )
        raise BootstrapError(msg)
    packed = base64.b64encode(gzip.compress(text.encode("utf-8"), compresslevel=9, mtime=0)).decode("ascii")
    if len(packed) > AZURE_CUSTOM_DATA_LIMIT:
        msg = (
            f"custom data for role {ctx.role!r} must be at most {AZURE_CUSTOM_DATA_LIMIT} bytes of base64 "
            f"(got {len(packed)}). Move content into the image or fetch it at boot."
        )
        raise BootstrapError(msg)
    return RenderedCustomData(
        role=ctx.role,
        cloud_config=text,
        custom_data=packed,
        size_bytes=len(packed),
        sha256=hashlib.sha256(text.encode("utf-8")).hexdigest(),
    )
