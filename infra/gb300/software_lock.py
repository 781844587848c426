"""Fill checksums.yaml: download what nodes would refuse, pin its sha256 or its signing keys' fingerprints.

This is the one step that needs the Internet, and it runs on a maintainer's machine, never on a node: a
node only ever compares what it downloads against these pins. ``gb300 software lock`` is a lock-file
workflow (like ``pip-compile --generate-hashes``): what it pins is what the vendor served at that moment,
so the resulting diff of checksums.yaml is reviewed like any other pin before it merges.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
import shutil
import subprocess
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import yaml

from gb300.bootstrap import software
from gb300.bootstrap.software import SoftwareSet, load_checksums

__all__ = ["Gap", "LockResult", "gaps", "key_fingerprints", "lock", "write_checksums"]

Opener = Callable[[str, float], IO[bytes]]
Progress = Callable[[str], None]
MAX_BYTES = 4 * 1024**3  # the largest download a lock will hash (DOCA/HPC-X bundles are about 1 GiB)
_CHUNK = 1024 * 1024
_FIRST_SECTION = re.compile(r"^files:", re.MULTILINE)  # the header comment is everything before it


@dataclass(frozen=True, order=True)
class Gap:
    """A URL nodes would refuse: ``kind`` is ``file`` (needs a sha256) or ``key`` (needs fingerprints)."""

    url: str
    kind: str
    owner: str  # the component (file) or repository (key) that downloads it


@dataclass
class LockResult:
    """What a lock run pinned and what it could not, one line each."""

    pinned: list[str]
    failed: list[str]


def gaps(sets: Iterable[SoftwareSet]) -> list[Gap]:
    """Every URL some software set downloads without a pin, once each, sorted by URL."""
    found: dict[str, Gap] = {}
    for each in sets:
        for kind, owner, url in each.unpinned():
            found.setdefault(url, Gap(url=url, kind=kind, owner=owner))
    return sorted(found.values())


def default_open(url: str, timeout: float) -> IO[bytes]:
    request = urllib.request.Request(url, headers={"User-Agent": "gb300-software-lock"})  # noqa: S310 - https only
    response: IO[bytes] = urllib.request.urlopen(request, timeout=timeout)  # noqa: S310 - https only
    return response


def _download(url: str, dest: Path, opener: Opener, timeout: float) -> tuple[str, int]:
    """Stream ``url`` to ``dest``; the sha256 and size. Raises OSError (urllib errors are OSErrors)."""
    digest, size = hashlib.sha256(), 0
    with opener(url, timeout) as response, dest.open("wb") as out:
        while chunk := response.read(_CHUNK):
            size += len(chunk)
            if size > MAX_BYTES:
                raise OSError(f"larger than {MAX_BYTES // 1024**3} GiB; pin it by hand")
            digest.update(chunk)
            out.write(chunk)
    return digest.hexdigest(), size


def key_fingerprints(path: Path, gpg: str = "gpg") -> tuple[str, ...]:
    """The fingerprints of the primary keys in the OpenPGP key file ``path``, read with gpg (not imported)."""
    with tempfile.TemporaryDirectory(prefix="gb300-gpg-") as home:
        proc = subprocess.run(
            [gpg, "--batch", "--no-tty", "--homedir", home, "--with-colons", "--show-keys", str(path)],
            capture_output=True,
            text=True,
            check=False,
        )
    prints: list[str] = []
    primary = False
    for line in proc.stdout.splitlines():
        fields = line.split(":")
        if fields[0] == "pub":
            primary = True
        elif fields[0] == "fpr" and primary and len(fields) > 9:
            prints.append(fields[9].upper())
            primary = False
    return tuple(prints)


def lock(
    todo: Sequence[Gap],
    *,
    opener: Opener | None = None,
    timeout: float = 60.0,
    progress: Progress = lambda line: None,
    gpg: str | None = None,
    today: dt.date | None = None,
) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]], LockResult]:
    """Download each gap and pin it; returns (files, keys) entries for checksums.yaml and what happened.

    A failed download or a key file with no key is reported in ``LockResult.failed`` and not pinned; the
    others are still pinned.
    """
    gpg_path = gpg or shutil.which("gpg")
    stamp = (today or dt.datetime.now(dt.UTC).date()).isoformat()
    files: dict[str, dict[str, Any]] = {}
    keys: dict[str, dict[str, Any]] = {}
    result = LockResult(pinned=[], failed=[])
    with tempfile.TemporaryDirectory(prefix="gb300-lock-") as scratch:
        for index, gap in enumerate(todo, start=1):
            progress(f"[{index}/{len(todo)}] {gap.owner}: fetching {gap.url}")
            if not gap.url.startswith("https://"):
                result.failed.append(f"{gap.owner}: {gap.url}: only https:// URLs are pinned")
                continue
            if gap.kind == "key" and gpg_path is None:
                result.failed.append(f"{gap.owner}: {gap.url}: gpg is needed to read a signing key (apt install gpg)")
                continue
            dest = Path(scratch) / f"download-{index}"
            try:
                digest, size = _download(gap.url, dest, opener or default_open, timeout)
            except (OSError, ValueError) as exc:  # urllib's URLError/HTTPError and timeouts are OSErrors
                if isinstance(exc, urllib.error.HTTPError):
                    reason: object = f"HTTP {exc.code} {exc.reason}"
                else:
                    reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
                result.failed.append(f"{gap.owner}: {gap.url}: download failed ({reason})")
                continue
            source = f"gb300 software lock, fetched {stamp}"
            if gap.kind == "file":
                files[gap.url] = {"sha256": digest, "status": "verified", "source": source}
                result.pinned.append(f"{gap.owner}: {gap.url}: sha256 {digest} ({size:,} bytes)")
                continue
            prints = key_fingerprints(dest, gpg_path or "gpg")
            if not prints:
                result.failed.append(f"{gap.owner}: {gap.url}: the file holds no OpenPGP public key")
                continue
            keys[gap.url] = {"fingerprints": list(prints), "status": "verified", "source": source}
            result.pinned.append(f"{gap.owner}: {gap.url}: key {', '.join(prints)}")
    return files, keys, result


class _Dumper(yaml.SafeDumper):
    """Block style, long notes folded, no anchors: checksums.yaml stays readable in a diff."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _str_representer(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    style = ">" if len(data) > 80 and "\n" not in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_Dumper.add_representer(str, _str_representer)


def _entry(pin_values: Sequence[str], kind: str, status: str, source: str) -> dict[str, Any]:
    if kind == "files":
        return {"sha256": pin_values[0], "status": status, "source": source}
    return {"fingerprints": list(pin_values), "status": status, "source": source}


def write_checksums(
    new_files: Mapping[str, Mapping[str, Any]],
    new_keys: Mapping[str, Mapping[str, Any]],
    path: Path | None = None,
) -> None:
    """Merge new entries into checksums.yaml (or ``path``), keeping its header comment and existing pins."""
    path = path or software.CHECKSUMS_FILE
    current = load_checksums(path)
    text = path.read_text(encoding="utf-8")
    first = _FIRST_SECTION.search(text)
    header = text[: first.start()] if first else ""
    files = {url: _entry(p.values, "files", p.status, p.source) for url, p in current.files.items()}
    keys = {url: _entry(p.values, "keys", p.status, p.source) for url, p in current.keys.items()}
    files.update({url: dict(v) for url, v in new_files.items()})
    keys.update({url: dict(v) for url, v in new_keys.items()})
    body = yaml.dump(
        {"files": dict(sorted(files.items())), "keys": dict(sorted(keys.items()))},
        Dumper=_Dumper,
        sort_keys=False,
        width=110,
        default_flow_style=False,
    )
    tmp = path.with_suffix(".yaml.tmp")
    tmp.write_text(header + body, encoding="utf-8")
    load_checksums(tmp)  # never leave a file the loader would reject
    tmp.replace(path)
