"""A role's node payload, and the small custom data that fetches it (docs/node-payload.md).

The payload is everything the role's full cloud-config would place with ``write_files`` (every step script,
the step library, templates rendered for the stack, settings), packed as one deterministic ``.tar.gz``: entries
sorted by path, owner root (0:0), modification time 0, and a gzip header with no name and time 0, so the same
inputs always give the same bytes and the same sha256. It is named by that sha256 (``<sha256>.tar.gz``) and
stored once per cluster in the payload container of the cluster's storage account.

The custom data is a small cloud-config: any inline step (one that must run before anything is fetched), then
``fetch-payload`` (IMDS token as root, GET the blob over the private endpoint, sha256 checked before anything
is extracted or run, bounded retries, a status naming the failure), then ``run-step`` for each of the role's
steps in order, exactly as the full cloud-config would run them. The custom data carries the payload's sha256,
so its own hash (the custom data hash tag, ``tags.CUSTOM_DATA_HASH``) changes exactly when the payload or the
custom data does.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import tarfile
from dataclasses import dataclass
from typing import Any

from gb300 import tags
from gb300.errors import BootstrapError
from gb300.node.boot_context import BootstrapContext
from gb300.node.render import (
    RenderedCustomData,
    build_cloud_config,
    dump_cloud_config,
    pack_custom_data,
)
from gb300.node.resources import CLOUD_INIT_DIR
from gb300.node.secrets import find_secret_material

__all__ = [
    "FETCH_PAYLOAD",
    "PAYLOAD_ENV",
    "PAYLOAD_TAG",
    "Payload",
    "SmallCustomData",
    "build_payload",
    "render_small_custom_data",
]

FETCH_PAYLOAD = "/usr/local/lib/gb300/fetch-payload"
"""Where the fetch script lands (inline, from the custom data)."""
PAYLOAD_ENV = "/etc/gb300/payload.env"
"""The payload's blob name, sha256 and retry settings (inline, from the custom data)."""
PAYLOAD_TAG = tags.PAYLOAD_URL
"""The VM tag holding the payload container's URL (a deploy-time value: the account's blob endpoint)."""
_MTIME = 0


@dataclass(frozen=True)
class Payload:
    """One role's payload: the archive's bytes, its sha256 and the blob name it is stored under."""

    role: str
    archive: bytes
    sha256: str
    cloud_config: str
    """The full cloud-config the payload's files come from (what custom data carried before)."""
    steps: tuple[str, ...]
    """The steps ``run-step`` runs, in order (the custom data's runcmd after the fetch)."""
    paths: tuple[str, ...]

    @property
    def blob_name(self) -> str:
        """Content-addressed: two pools with the same payload share one blob."""
        return f"{self.sha256}.tar.gz"

    @property
    def size(self) -> int:
        return len(self.archive)


@dataclass(frozen=True)
class SmallCustomData:
    """The custom data that fetches a payload, and the payload itself."""

    rendered: RenderedCustomData
    payload: Payload


def _tar_gz(entries: list[tuple[str, bytes, int]]) -> bytes:
    """A deterministic gzip'd tar of ``(relative path, content, mode)``: sorted, root-owned, time 0."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for name, content, mode in sorted(entries):
            info = tarfile.TarInfo(name)
            info.size = len(content)
            info.mode = mode
            info.mtime = _MTIME
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            info.type = tarfile.REGTYPE
            tar.addfile(info, io.BytesIO(content))
    return gzip.compress(raw.getvalue(), compresslevel=9, mtime=_MTIME)


def build_payload(ctx: BootstrapContext, config: dict[str, Any] | None = None) -> Payload:
    """``ctx.role``'s payload: the files of its full cloud-config (``config``, else built) as one archive."""
    from gb300.node import steps as node_steps  # noqa: PLC0415 - the registry's providers import this package

    config = build_cloud_config(ctx) if config is None else config
    text = dump_cloud_config(ctx, config)
    found = find_secret_material(text)
    if found:
        msg = (
            f"node payload for role {ctx.role!r} must not carry secrets (found: {', '.join(found)}). "
            "Fetch them at boot with the node's managed identity."
        )
        raise BootstrapError(msg)
    entries = []
    for entry in config["write_files"]:
        path = str(entry["path"])
        if not path.startswith("/") or ".." in path.split("/"):
            msg = f"node payload for role {ctx.role!r}: {path!r} must be an absolute node path without '..'"
            raise BootstrapError(msg)
        entries.append((path.lstrip("/"), str(entry["content"]).encode("utf-8"), int(str(entry["permissions"]), 8)))
    archive = _tar_gz(entries)
    steps = tuple(cmd[1] for cmd in config["runcmd"] if cmd[0] == node_steps.RUN_STEP)
    return Payload(
        role=ctx.role,
        archive=archive,
        sha256=hashlib.sha256(archive).hexdigest(),
        cloud_config=text,
        steps=steps,
        paths=tuple(sorted(e[0] for e in entries)),
    )


def _fetch_script() -> str:
    from gb300.node import steps as node_steps  # noqa: PLC0415

    return node_steps.compact((CLOUD_INIT_DIR / "lib" / "fetch-payload").read_text(encoding="utf-8"))


def _payload_env(ctx: BootstrapContext, payload: Payload) -> str:
    return (
        "# The node payload this custom data fetches (docs/node-payload.md); the container's URL is the VM's\n"
        f"# {PAYLOAD_TAG} tag.\n"
        f"GB300_PAYLOAD_BLOB={payload.blob_name}\n"
        f"GB300_PAYLOAD_SHA256={payload.sha256}\n"
        f"GB300_PAYLOAD_ATTEMPTS={ctx.node.payload_attempts}\n"
        f"GB300_PAYLOAD_BACKOFF_SECONDS={ctx.node.payload_backoff_seconds}\n"
    )


def render_small_custom_data(ctx: BootstrapContext) -> SmallCustomData:
    """``ctx.role``'s payload and the small custom data that fetches, checks and runs it."""
    from gb300.node import steps as node_steps  # noqa: PLC0415

    full = build_cloud_config(ctx)
    payload = build_payload(ctx, full)
    config: dict[str, Any] = {k: v for k, v in full.items() if k not in ("write_files", "runcmd")}
    inline, first = node_steps.inline_for(ctx, node_steps.steps_for(ctx))
    files = [
        *({"path": f.path, "owner": "root:root", "permissions": f.permissions, "content": f.content} for f in inline),
        {"path": FETCH_PAYLOAD, "owner": "root:root", "permissions": "0755", "content": _fetch_script()},
        {"path": PAYLOAD_ENV, "owner": "root:root", "permissions": "0644", "content": _payload_env(ctx, payload)},
    ]
    config["write_files"] = files
    config["runcmd"] = [
        *([command] for command in first),
        [FETCH_PAYLOAD],
        *([node_steps.RUN_STEP, step] for step in payload.steps),
    ]
    header = f"# Fetches node payload {payload.blob_name} ({payload.size} bytes) and runs its steps.\n"
    rendered = pack_custom_data(ctx, dump_cloud_config(ctx, config, note=header))
    return SmallCustomData(rendered, payload)
