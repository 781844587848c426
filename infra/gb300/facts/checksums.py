"""What a node may download, pinned by content: checksums.yaml as typed data.

Each entry is keyed by exactly what a node fetches: a file's sha256 by its URL, a repository signing key's
fingerprints by the key file's URL, a container image's manifest digest by ``registry/repository:tag`` and a git
source's commit id by ``<repository URL>@<tag>``. A URL without an entry resolves to no checksum, and nodes refuse
it. :func:`gb300.facts.software.load_checksums` reads the file; ``gb300 software lock`` writes it
(:mod:`gb300.ops.software_lock`).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gb300.errors import BootstrapDataError
from gb300.facts.loader import string_field

__all__ = ["Checksums", "Pin", "checksums_from"]

_SHA256_RE = re.compile(r"^[0-9a-f]{64}\Z")
_DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}\Z")
_IMAGE_RE = re.compile(r"^[a-z0-9.-]+(:[0-9]+)?/[a-z0-9._/-]+:[A-Za-z0-9._-]+\Z")
_FINGERPRINT_RE = re.compile(r"^[0-9A-F]{40}\Z")
_COMMIT_RE = re.compile(r"^[0-9a-f]{40}\Z")


@dataclass(frozen=True)
class Pin:
    """One checksums.yaml entry: a file's sha256, or the fingerprints a signing key file may hold."""

    url: str
    values: tuple[str, ...]
    status: str
    source: str


@dataclass(frozen=True)
class Checksums:
    """checksums.yaml as typed data: pins keyed by the exact URL a node downloads, and container images'
    manifest digests keyed by `registry/repository:tag`."""

    files: Mapping[str, Pin]
    keys: Mapping[str, Pin]
    images: Mapping[str, Pin] = dataclasses.field(default_factory=dict)
    commits: Mapping[str, Pin] = dataclasses.field(default_factory=dict)

    def commit(self, key: str) -> str | None:
        """The pinned git commit id of `key` (`<repository URL>@<tag>`), or None."""
        pin = self.commits.get(key)
        return pin.values[0] if pin else None

    def digest(self, image: str) -> str | None:
        """The pinned manifest digest (`sha256:...`) of the tagged image `image`, or None."""
        pin = self.images.get(image)
        return pin.values[0] if pin else None

    def image_ref(self, image: str) -> str:
        """What a node pulls: `image@digest` when the digest is pinned (docker checks it), else `image`."""
        digest = self.digest(image)
        return f"{image}@{digest}" if digest else image

    def sha256(self, url: str) -> str | None:
        pin = self.files.get(url)
        return pin.values[0] if pin else None

    def fingerprints(self, url: str) -> tuple[str, ...]:
        pin = self.keys.get(url)
        return pin.values if pin else ()


def _pin(section: str, url: object, raw: object) -> Pin:  # noqa: PLR0912 - one branch per section's shape
    where = f"checksums.yaml {section}.{url}"
    if section == "images":
        if not isinstance(url, str) or not _IMAGE_RE.match(url) or not isinstance(raw, Mapping):
            msg = f"checksums.yaml images: keys must be registry/repository:tag with a mapping (got {url!r})"
            raise BootstrapDataError(msg)
        digest = raw.get("digest")
        if not isinstance(digest, str) or not _DIGEST_RE.match(digest):
            msg = f"{where}.digest: must be sha256: and 64 lowercase hex digits (got {digest!r})"
            raise BootstrapDataError(msg)
        return Pin(
            url=url,
            values=(digest,),
            status=string_field(raw, "status", where),
            source=string_field(raw, "source", where),
        )
    if section == "commits":
        commit = raw.get("commit") if isinstance(raw, Mapping) else None
        if not isinstance(url, str) or not url.startswith("https://") or "@" not in url:
            msg = f"checksums.yaml commits: keys must be <https:// repository URL>@<tag> (got {url!r})"
            raise BootstrapDataError(msg)
        if not isinstance(raw, Mapping) or not isinstance(commit, str) or not _COMMIT_RE.match(commit):
            msg = f"{where}.commit: must be 40 lowercase hex digits (a git commit id) (got {commit!r})"
            raise BootstrapDataError(msg)
        return Pin(
            url=url,
            values=(commit,),
            status=string_field(raw, "status", where),
            source=string_field(raw, "source", where),
        )
    if not isinstance(url, str) or not url.startswith("https://"):
        msg = f"checksums.yaml {section}: keys must be https:// URLs (got {url!r})"
        raise BootstrapDataError(msg)
    if not isinstance(raw, Mapping):
        msg = f"{where}: must be a mapping with status and source (got {raw!r})"
        raise BootstrapDataError(msg)
    if section == "files":
        digest = raw.get("sha256")
        if not isinstance(digest, str) or not _SHA256_RE.match(digest):
            msg = f"{where}.sha256: must be 64 lowercase hex digits (got {digest!r})"
            raise BootstrapDataError(msg)
        values: tuple[str, ...] = (digest,)
    else:
        prints = raw.get("fingerprints")
        if not isinstance(prints, list) or not prints:
            msg = f"{where}.fingerprints: must be a non-empty list (got {prints!r})"
            raise BootstrapDataError(msg)
        values = tuple(str(p).replace(" ", "").upper() for p in prints)
        bad = [p for p in values if not _FINGERPRINT_RE.match(p)]
        if bad:
            msg = f"{where}.fingerprints: must be 40 hex digits each (got {bad[0]!r})"
            raise BootstrapDataError(msg)
    return Pin(
        url=url, values=values, status=string_field(raw, "status", where), source=string_field(raw, "source", where)
    )


def checksums_from(raw: Mapping[str, Any]) -> Checksums:
    """checksums.yaml's document as :class:`Checksums`; raises BootstrapDataError naming the bad entry."""
    unknown = sorted(set(raw) - {"files", "keys", "images", "commits"})
    if unknown:
        msg = f"checksums.yaml: unknown section {unknown[0]!r} (expected files, keys, images and commits)"
        raise BootstrapDataError(msg)
    sections: dict[str, dict[str, Pin]] = {}
    for section in ("files", "keys", "images", "commits"):
        body = raw.get(section) or {}
        if not isinstance(body, Mapping):
            msg = f"checksums.yaml {section}: must be a mapping of URL to entry (got {body!r})"
            raise BootstrapDataError(msg)
        sections[section] = {url: _pin(section, url, entry) for url, entry in body.items()}
    return Checksums(
        files=sections["files"], keys=sections["keys"], images=sections["images"], commits=sections["commits"]
    )
