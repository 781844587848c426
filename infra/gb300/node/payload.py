"""A role's node payload, and the small custom data that fetches it (docs/node-payload.md).

The payload is everything the role's full cloud-config would place with ``write_files`` (every step script,
the step library, templates rendered for the stack, settings), packed as one deterministic ``.tar.gz``: entries
sorted by path, owner root (0:0), modification time 0, and a gzip header with no name and time 0, so the same
inputs always give the same bytes and the same sha256. ``gb300 payload publish`` stores it content-addressed in
the payload account, with a manifest signed by the cluster's key (:mod:`gb300.node.manifest`).

The custom data is a small cloud-config: any inline step (one that must run before anything is fetched), then
``fetch-payload`` (manifest and signature, checked with the cluster's public key; the archive's sha256 from the
signed manifest checked before anything is extracted or run; bounded retries; a status naming the failure), then
``run-step`` for each of the role's steps in order, exactly as the full cloud-config would run them. It carries
the payload's base URL, name and public key, never the payload's sha256: a payload change leaves it unchanged,
and a node takes the newer payload in place (``gb300-payload-update``).

The base URL names the payload account, whose name derives from the subscription (known at deploy time only):
the custom data is rendered with :data:`ACCOUNT_PLACEHOLDER` there and :meth:`SmallCustomData.for_account`
puts the name in. Its hash (the custom data hash tag, ``tags.CUSTOM_DATA_HASH``) is of the rendered text with the
placeholder: the one deploy-time value in it is fixed for a deployed stack (subscription, cluster name and region),
so the plan and the deployed tag agree.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import tarfile
from dataclasses import dataclass
from typing import Any

from gb300 import tags as gb300_tags
from gb300.errors import BootstrapError, ConfigError, Problem
from gb300.facts import storage_facts
from gb300.node import manifest
from gb300.node import steps as node_steps
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
    "ACCOUNT_PLACEHOLDER",
    "FETCH_PAYLOAD",
    "PAYLOAD_ENV",
    "PAYLOAD_UPDATE",
    "Payload",
    "SmallCustomData",
    "build_payload",
    "render_small_custom_data",
]

FETCH_PAYLOAD = "/usr/local/lib/gb300/fetch-payload"
"""Where the fetch script lands (inline, from the custom data)."""
PAYLOAD_ENV = "/etc/gb300/payload.env"
"""The payload's base URL, name, cluster, public key, retry settings and read limits (inline, from the custom
data; the limits are ``payload_limits`` in node.yaml)."""
PAYLOAD_UPDATE = "/usr/local/sbin/gb300-payload-update"
"""Takes a newer signed payload in place: the same fetch and checks, forward only (inline, from the custom data)."""
ACCOUNT_PLACEHOLDER = "@GB300_PAYLOAD_ACCOUNT@"
"""Where the payload account's name goes in the rendered custom data (known at deploy time only)."""
SIGNING_KEY_PATH = "gb300:storage.nodePayload.signingPublicKey"
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
    """The custom data with :data:`ACCOUNT_PLACEHOLDER` for the payload account; its sha256 is the hash tag."""
    payload: Payload
    name: str
    """The payload's name in the payload container (``head``, ``gpu-<pool>``)."""

    def for_account(self, account: str) -> str:
        """The custom data Azure receives (base64 of gzip) with the payload account ``account`` put in."""
        return pack_text(self.rendered.cloud_config.replace(ACCOUNT_PLACEHOLDER, account))


def pack_text(text: str) -> str:
    """Cloud-config ``text`` as Azure custom data: base64 of gzip (time 0), as :func:`pack_custom_data` packs it."""
    return base64.b64encode(gzip.compress(text.encode("utf-8"), compresslevel=9, mtime=0)).decode("ascii")


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
    return node_steps.compact((CLOUD_INIT_DIR / "lib" / "fetch-payload").read_text(encoding="utf-8"))


def payload_settings(ctx: BootstrapContext) -> tuple[str, str]:
    """The stack's payload container and public signing key; the key is required (exit 2 naming it)."""
    if ctx.stack is None:
        raise BootstrapError(f"node payload for role {ctx.role!r}: rendered without its stack config")
    settings = ctx.stack.storage.node_payload
    if not settings.signing_public_key:
        raise ConfigError(
            [
                Problem(
                    SIGNING_KEY_PATH,
                    "is required: nodes take only payloads signed by the cluster's key. Make one with "
                    "`gb300 payload keygen --out FILE` and set the public key line it prints "
                    "(docs/node-payload.md#signing)",
                )
            ]
        )
    return settings.container, settings.signing_public_key


def _payload_env(ctx: BootstrapContext, name: str) -> str:
    container, public_key = payload_settings(ctx)
    suffix = storage_facts.blob_endpoint_suffix()
    limits = manifest.limits()
    return (
        "# The node payload this custom data fetches (docs/node-payload.md): the signed manifest\n"
        f"# {manifest.PAYLOAD_PREFIX}/<name>/{manifest.MANIFEST} under the URL, checked with the public key.\n"
        f"GB300_PAYLOAD_URL=https://{ACCOUNT_PLACEHOLDER}.blob.{suffix}/{container}\n"
        f"GB300_PAYLOAD_NAME={name}\n"
        f"GB300_PAYLOAD_CLUSTER={ctx.cluster_name}\n"
        f"GB300_PAYLOAD_PUBLIC_KEY={public_key}\n"
        f"GB300_STORAGE_SUFFIX={suffix}\n"
        f"GB300_PAYLOAD_ATTEMPTS={ctx.node.payload_attempts}\n"
        f"GB300_PAYLOAD_BACKOFF_SECONDS={ctx.node.payload_backoff_seconds}\n"
        f"GB300_PAYLOAD_MANIFEST_MAX_BYTES={limits.manifest_max_bytes}\n"
        f"GB300_PAYLOAD_SIGNATURE_MAX_BYTES={limits.signature_max_bytes}\n"
        f"GB300_PAYLOAD_SERIAL_MAX_DIGITS={limits.serial_max_digits}\n"
    )


def _update_script() -> str:
    return (
        "#!/usr/bin/env bash\n"
        "# gb300-payload-update: take the newest signed payload in place (docs/node-payload.md#updating): the same\n"
        "# fetch and checks as at boot; a manifest older than the payload in place is refused (no rollback).\n"
        "set -euo pipefail\n"
        f'GB300_PAYLOAD_UPDATE=1 exec "${{GB300_ROOT:-}}{FETCH_PAYLOAD}" "$@"\n'
    )


def render_small_custom_data(ctx: BootstrapContext) -> SmallCustomData:
    """``ctx.role``'s payload and the small custom data that fetches, checks and runs it."""
    full = build_cloud_config(ctx)
    payload = build_payload(ctx, full)
    name = manifest.payload_name(ctx.role, None if ctx.role == gb300_tags.ROLE_HEAD else ctx.pool_name)
    config: dict[str, Any] = {k: v for k, v in full.items() if k not in ("write_files", "runcmd")}
    inline, first = node_steps.inline_for(ctx, node_steps.steps_for(ctx))
    files = [
        *({"path": f.path, "owner": "root:root", "permissions": f.permissions, "content": f.content} for f in inline),
        {"path": FETCH_PAYLOAD, "owner": "root:root", "permissions": "0755", "content": _fetch_script()},
        {"path": PAYLOAD_UPDATE, "owner": "root:root", "permissions": "0755", "content": _update_script()},
        {"path": PAYLOAD_ENV, "owner": "root:root", "permissions": "0644", "content": _payload_env(ctx, name)},
    ]
    config["write_files"] = files
    config["runcmd"] = [
        *([command] for command in first),
        [FETCH_PAYLOAD],
        *([node_steps.RUN_STEP, step] for step in payload.steps),
    ]
    header = f"# Fetches the signed node payload {name!r} and runs its steps.\n"
    rendered = pack_custom_data(ctx, dump_cloud_config(ctx, config, note=header))
    return SmallCustomData(rendered, payload, name)
