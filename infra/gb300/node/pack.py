"""The two packers of a role's bundle (:mod:`gb300.node.bundle`): the node payload and the small custom data.

Both are pure functions of the bundle. :func:`pack_payload` packs every file as one deterministic ``.tar.gz``
(entries sorted by path, owner root (0:0), modification time 0, a gzip header with no name and time 0), so the same
bundle always gives the same bytes and sha256; ``gb300 payload publish`` stores it content-addressed, with a
manifest signed by the cluster's key (:mod:`gb300.node.manifest`). :func:`pack_custom_data` writes the small
cloud-config that fetches it (:mod:`gb300.node.payload`), gzip-compressed and base64-encoded as Azure takes it
(under Azure's 64 KB custom data limit); its sha256 is the custom data hash tag. :func:`cloud_config` is the
full cloud-config the payload's files come from (``write_files`` and ``runcmd``): the golden files hold it, and
a context without a stack (the bootstrap's own tests) boots it whole (:func:`pack_full`).
"""

from __future__ import annotations

import base64
import functools
import gzip
import hashlib
import io
import tarfile
from dataclasses import dataclass, field
from typing import Any

import yaml

from gb300 import tags
from gb300.errors import BootstrapError
from gb300.node import paths
from gb300.node.bundle import Bundle
from gb300.node.file import NodeFile
from gb300.node.payload import ACCOUNT_PLACEHOLDER
from gb300.node.steps import code_only

__all__ = [
    "AZURE_CUSTOM_DATA_LIMIT",
    "CUSTOM_DATA_HASH_TAG",
    "CustomData",
    "Payload",
    "cloud_config",
    "pack_custom_data",
    "pack_full",
    "pack_payload",
    "pack_text",
]

AZURE_CUSTOM_DATA_LIMIT = 65_536
"""Azure's limit on base64 custom data, in bytes (azure-compute-docs virtual-machines/custom-data.md)."""
CUSTOM_DATA_HASH_TAG = tags.CUSTOM_DATA_HASH
"""The scale set tag that carries :attr:`CustomData.sha256`; a differing value means reimage."""
_HEADER = "#cloud-config\n"
_MTIME = 0

# libyaml's emitter when PyYAML has it (its wheels do): the same text as the pure-Python one, in a fraction of the
# time (the two roles' cloud-config were a tenth of a 1,388-rack plan's own CPU; docs/scale.md).
_SAFE_DUMPER: type[Any] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _LiteralDumper(_SAFE_DUMPER):  # type: ignore[misc]
    """A SafeDumper (libyaml's emitter) that writes multi-line strings as literal blocks, so goldens read like files."""


def _str_presenter(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_LiteralDumper.add_representer(str, _str_presenter)


@dataclass(frozen=True)
class Payload:
    """One role's payload: the archive's bytes, its sha256 and the blob name it is stored under."""

    role: str
    archive: bytes
    sha256: str
    steps: tuple[str, ...]
    """The steps ``run-step`` runs, in order (the custom data's runcmd after the fetch)."""
    paths: tuple[str, ...]
    bundle: Bundle = field(repr=False, compare=False)

    @functools.cached_property
    def cloud_config(self) -> str:
        """The full cloud-config the payload's files come from (what custom data carried before)."""
        return cloud_config(self.bundle)

    @property
    def blob_name(self) -> str:
        """Content-addressed: two pools with the same payload share one blob."""
        return f"{self.sha256}.tar.gz"

    @property
    def size(self) -> int:
        return len(self.archive)


@dataclass(frozen=True)
class CustomData:
    """One role's custom data (base64 of gzip, as Azure takes it) with its hash, and the payload it fetches."""

    role: str
    name: str
    """The payload's name in the payload container (``head``, ``gpu-<pool>``)."""
    cloud_config: str
    base64: str
    """The custom data with the payload account's placeholder (sizes, the plan's custom data checks)."""
    sha256: str
    """Hex sha256 of ``cloud_config``: the custom data hash tag; a change means reimage."""
    payload: Payload

    @property
    def size(self) -> int:
        """Length of ``base64``, the figure Azure's 64 KB limit applies to."""
        return len(self.base64)

    def for_account(self, account: str) -> str:
        """What Azure receives: the custom data with the payload account ``account`` put in."""
        return pack_text(self.cloud_config.replace(ACCOUNT_PLACEHOLDER, account))


def pack_text(text: str) -> str:
    """Cloud-config ``text`` as Azure custom data: base64 of gzip (time 0)."""
    return base64.b64encode(gzip.compress(text.encode("utf-8"), compresslevel=9, mtime=0)).decode("ascii")


def _entry(f: NodeFile) -> dict[str, Any]:
    return {"path": f.path, "owner": "root:root", "permissions": f.permissions, "content": f.content}


def _shipped(f: NodeFile) -> dict[str, Any]:
    """A custom data file: a script's code only (the payload keeps its comments)."""
    return _entry(NodeFile(f.path, code_only(f.content), f.permissions))


def _dump(config: dict[str, Any], header: str) -> str:
    body = yaml.dump(config, Dumper=_LiteralDumper, sort_keys=False, width=120, allow_unicode=False)
    return _HEADER + header + body


def cloud_config(bundle: Bundle) -> str:
    """The full cloud-config: the fragments' keys, every file as ``write_files``, one ``run-step`` per step."""
    config = {
        **bundle.settings,
        "write_files": [_entry(f) for f in bundle.files],
        "runcmd": [[paths.RUN_STEP, step] for step in bundle.steps],
    }
    header = (
        f"# gb300 bootstrap for role {bundle.role}, pool {bundle.pool}, cluster {bundle.cluster}.\n"
        "# Generated from cloud-init/, templates/ and infra/gb300/data/: edit those, not this.\n"
    )
    return _dump(config, header)


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


def pack_payload(bundle: Bundle) -> Payload:
    """The bundle's files as one deterministic archive."""
    entries = [(f.path.lstrip("/"), f.content.encode("utf-8"), int(f.permissions, 8)) for f in bundle.files]
    archive = _tar_gz(entries)
    return Payload(
        role=bundle.role,
        archive=archive,
        sha256=hashlib.sha256(archive).hexdigest(),
        steps=bundle.steps,
        paths=tuple(sorted(e[0] for e in entries)),
        bundle=bundle,
    )


def _packed(bundle: Bundle, text: str, payload: Payload) -> CustomData:
    packed = pack_text(text)
    if len(packed) > AZURE_CUSTOM_DATA_LIMIT:
        msg = (
            f"custom data for role {bundle.role!r} must be at most {AZURE_CUSTOM_DATA_LIMIT} bytes of base64 "
            f"(got {len(packed)}). Move content into the image or fetch it at boot."
        )
        raise BootstrapError(msg)
    sha = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return CustomData(bundle.role, bundle.name, text, packed, sha, payload)


def pack_custom_data(bundle: Bundle, payload: Payload | None = None) -> CustomData:
    """The small custom data: the inline files and the fetch's own (scripts as code only), then the ``first``
    commands, the fetch and ``run-step`` for each step. Raises BootstrapError past 64 KB or for a bundle made
    without its fetch files."""
    if not bundle.fetch:
        raise BootstrapError(f"node payload for role {bundle.role!r}: rendered without its stack config")
    config = {
        **bundle.settings,
        "write_files": [_shipped(f) for f in (*bundle.inline, *bundle.fetch)],
        "runcmd": [
            *([command] for command in bundle.first),
            [paths.FETCH_PAYLOAD],
            *([paths.RUN_STEP, step] for step in bundle.steps),
        ],
    }
    header = (
        f"# gb300 custom data for role {bundle.role}, pool {bundle.pool}, cluster {bundle.cluster}: fetches the "
        f"signed node payload {bundle.name!r} and runs its steps.\n"
    )
    return _packed(bundle, _dump(config, header), payload or pack_payload(bundle))


def pack_full(bundle: Bundle) -> CustomData:
    """The full cloud-config as custom data (no fetch): how a context without a stack boots in the sandbox tests."""
    return _packed(bundle, cloud_config(bundle), pack_payload(bundle))
