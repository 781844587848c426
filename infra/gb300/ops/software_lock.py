"""Fill checksums.yaml: download what nodes would refuse, pin its sha256 or its signing keys' fingerprints.

This is the one step that needs the Internet, and it runs on a maintainer's machine, never on a node: a
node only ever compares what it downloads against these pins. ``gb300 software lock`` is a lock-file
workflow (like ``pip-compile --generate-hashes``): what it pins is what the vendor served at that moment,
so the resulting diff of checksums.yaml is reviewed like any other pin before it merges.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
import shutil
import subprocess
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import yaml

from gb300.facts import software
from gb300.facts.software import SoftwareSet, load_checksums
from gb300.io import writer

__all__ = ["Gap", "LockResult", "gaps", "image_gaps", "key_fingerprints", "lock", "resolve_digest", "write_checksums"]

Opener = Callable[[str, float], IO[bytes]]
Fetch = Callable[[urllib.request.Request, float], Any]
"""Sends a prepared request (a registry's API needs headers); returns a response with ``read()`` and ``headers``."""
_MANIFEST_TYPES = ", ".join(
    (
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.docker.distribution.manifest.v2+json",
    )
)
_IMAGE = re.compile(r"^(?P<registry>[a-z0-9.-]+(?::[0-9]+)?)/(?P<repository>[a-z0-9._/-]+):(?P<tag>[A-Za-z0-9._-]+)\Z")
_CHALLENGE = re.compile(r'(\w+)="([^"]*)"')
Progress = Callable[[str], None]
MAX_BYTES = 4 * 1024**3  # the largest download a lock will hash (DOCA/HPC-X bundles are about 1 GiB)
MAX_MANIFEST = 4 * 1024**2  # an image manifest or index is a few KiB
_CHUNK = 1024 * 1024
_FIRST_SECTION = re.compile(r"^files:", re.MULTILINE)  # the header comment is everything before it


@dataclass(frozen=True, order=True)
class Gap:
    """A URL nodes would refuse: ``kind`` is ``file`` (needs a sha256) or ``key`` (needs fingerprints)."""

    url: str
    kind: str  # or ``image``: a container image tag (``url`` is registry/repository:tag) that needs its digest
    owner: str  # the component (file), repository (key) or service (image) that downloads it


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


def image_gaps(images: Mapping[str, str], checksums: software.Checksums | None = None) -> list[Gap]:
    """The container images (service -> registry/repository:tag) whose manifest digest is not pinned."""
    pins = checksums or load_checksums()
    return sorted(
        Gap(url=image, kind="image", owner=owner) for owner, image in images.items() if not pins.digest(image)
    )


class HttpsOnlyRedirects(urllib.request.HTTPRedirectHandler):
    """urllib's redirect handling, refusing a redirect to anything but ``https://`` before it is followed: a
    downgrade to ``http://`` would let an on-path attacker's bytes be pinned as verified (issue 48)."""

    def redirect_request(  # noqa: PLR0917 - urllib's signature
        self,
        req: urllib.request.Request,
        fp: IO[bytes],
        code: int,
        msg: str,
        headers: Any,
        newurl: str,
    ) -> urllib.request.Request | None:
        if urllib.parse.urlsplit(newurl).scheme.lower() != "https":
            raise urllib.error.URLError(f"{req.full_url} redirects to {newurl}, which is not https; not followed")
        return super().redirect_request(req, fp, code, msg, headers, newurl)


_OPENER = urllib.request.build_opener(HttpsOnlyRedirects())
"""urllib's default handlers with :class:`HttpsOnlyRedirects` in place of its redirect handler."""


def default_fetch(request: urllib.request.Request, timeout: float) -> Any:
    return _OPENER.open(request, timeout=timeout)


def _bearer_token(challenge: str, fetch: Fetch, timeout: float) -> str:
    """An anonymous pull token from the registry's token service (the 401's WWW-Authenticate: Bearer realm=...)."""
    if not challenge.lower().startswith("bearer "):
        raise OSError(f"the registry asks for {challenge.split(' ', 1)[0] or 'nothing'} authentication, not a token")
    params = dict(_CHALLENGE.findall(challenge))
    realm = params.pop("realm", "")
    if not realm.startswith("https://"):
        raise OSError(f"the registry's token realm is not an https URL (got {realm!r})")
    query = urllib.parse.urlencode(params)
    url = f"{realm}?{query}" if query else realm
    request = urllib.request.Request(url, headers={"User-Agent": "gb300-software-lock"})  # noqa: S310 - https only
    with fetch(request, timeout) as response:
        body = json.loads(response.read())
    token = body.get("token") or body.get("access_token")
    if not isinstance(token, str) or not token:
        raise OSError("the registry's token service answered without a token")
    return token


def resolve_digest(image: str, *, fetch: Fetch | None = None, timeout: float = 60.0) -> str:
    """The manifest digest (``sha256:...``) ``registry/repository:tag`` points at now, from the registry's API.

    The digest is the sha256 of the manifest bytes served (what ``docker pull image@digest`` checks); a
    ``Docker-Content-Digest`` header that disagrees is an error. Anonymous bearer tokens are fetched as the
    registry asks (nvcr.io does). Raises OSError (or ValueError for a reference that is not ``registry/repo:tag``).
    """
    match = _IMAGE.match(image)
    if match is None:
        raise ValueError(f"not a registry/repository:tag image reference (got {image!r})")
    send = fetch or default_fetch
    url = f"https://{match['registry']}/v2/{match['repository']}/manifests/{match['tag']}"
    headers = {"Accept": _MANIFEST_TYPES, "User-Agent": "gb300-software-lock"}
    try:
        response = send(urllib.request.Request(url, headers=headers), timeout)
    except urllib.error.HTTPError as exc:
        if exc.code != 401:
            raise
        token = _bearer_token(exc.headers.get("WWW-Authenticate", ""), send, timeout)
        response = send(urllib.request.Request(url, headers={**headers, "Authorization": f"Bearer {token}"}), timeout)
    with response:
        body = response.read(MAX_MANIFEST + 1)
        announced = response.headers.get("Docker-Content-Digest")
    if len(body) > MAX_MANIFEST:
        raise OSError(f"the manifest is larger than {MAX_MANIFEST} bytes")
    digest = "sha256:" + hashlib.sha256(body).hexdigest()
    if announced and announced != digest:
        raise OSError(f"the registry announces {announced} but served a manifest whose sha256 is {digest}")
    return digest


def default_open(url: str, timeout: float) -> IO[bytes]:
    request = urllib.request.Request(url, headers={"User-Agent": "gb300-software-lock"})  # noqa: S310 - https only
    response: IO[bytes] = _OPENER.open(request, timeout=timeout)
    return response


def _download(url: str, dest: Path, opener: Opener, timeout: float) -> tuple[str, int, str]:
    """Stream ``url`` to ``dest``; the sha256, the size and the URL the bytes came from after redirects. Raises
    OSError (urllib errors are OSErrors), also when that URL is not https."""
    digest, size = hashlib.sha256(), 0
    with opener(url, timeout) as response, dest.open("wb") as out:
        final = str(getattr(response, "url", None) or url)
        if urllib.parse.urlsplit(final).scheme.lower() != "https":
            raise OSError(f"served from {final}, which is not https; not pinned")
        while chunk := response.read(_CHUNK):
            size += len(chunk)
            if size > MAX_BYTES:
                raise OSError(f"larger than {MAX_BYTES // 1024**3} GiB; pin it by hand")
            digest.update(chunk)
            out.write(chunk)
    return digest.hexdigest(), size, final


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
    fetch: Fetch | None = None,
    images: dict[str, dict[str, Any]] | None = None,
    commits: dict[str, dict[str, Any]] | None = None,
    ls_remote: LsRemote | None = None,
) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]], LockResult]:
    """Download each gap and pin it; returns (files, keys) entries for checksums.yaml and what happened.

    An ``image`` gap is resolved to its manifest digest through the registry's API (``fetch``) and its entry
    goes into ``images`` (a dict the caller passes and writes). A ``commit`` gap (``<repository>@<tag>``) is
    resolved with ``git ls-remote`` to the commit the tag names and goes into ``commits``. A failed download, a
    key file with no key or an image the registry does not resolve is reported in ``LockResult.failed`` and not
    pinned; the others are still pinned.
    """
    gpg_path = gpg or shutil.which("gpg")
    stamp = (today or dt.datetime.now(dt.UTC).date()).isoformat()
    files: dict[str, dict[str, Any]] = {}
    keys: dict[str, dict[str, Any]] = {}
    result = LockResult(pinned=[], failed=[])
    with tempfile.TemporaryDirectory(prefix="gb300-lock-") as scratch:
        for index, gap in enumerate(todo, start=1):
            progress(f"[{index}/{len(todo)}] {gap.owner}: fetching {gap.url}")
            if gap.kind == "image":
                try:
                    digest = resolve_digest(gap.url, fetch=fetch, timeout=timeout)
                except (OSError, ValueError) as exc:
                    code = f"HTTP {exc.code} {exc.reason}" if isinstance(exc, urllib.error.HTTPError) else exc
                    result.failed.append(f"{gap.owner}: {gap.url}: cannot resolve its digest ({code})")
                    continue
                if images is not None:
                    images[gap.url] = {
                        "digest": digest,
                        "status": "verified",
                        "source": f"gb300 software lock, resolved {stamp}",
                    }
                result.pinned.append(f"{gap.owner}: {gap.url}: {digest}")
                continue
            if gap.kind == "commit":
                _lock_commit(gap, ls_remote or default_ls_remote, timeout, result, commits, stamp)
                continue
            if not gap.url.startswith("https://"):
                result.failed.append(f"{gap.owner}: {gap.url}: only https:// URLs are pinned")
                continue
            if gap.kind == "key" and gpg_path is None:
                result.failed.append(f"{gap.owner}: {gap.url}: gpg is needed to read a signing key (apt install gpg)")
                continue
            dest = Path(scratch) / f"download-{index}"
            try:
                digest, size, final = _download(gap.url, dest, opener or default_open, timeout)
            except (OSError, ValueError) as exc:  # urllib's URLError/HTTPError and timeouts are OSErrors
                if isinstance(exc, urllib.error.HTTPError):
                    reason: object = f"HTTP {exc.code} {exc.reason}"
                else:
                    reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
                result.failed.append(f"{gap.owner}: {gap.url}: download failed ({reason})")
                continue
            source = f"gb300 software lock, fetched {stamp}" + (f" from {final}" if final != gap.url else "")
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


LsRemote = Callable[[str, str, float], str]
"""(repository URL, tag, timeout) -> ``git ls-remote`` output for the tag and its peeled commit."""


def default_ls_remote(url: str, tag: str, timeout: float) -> str:
    """Ask the repository which commit `tag` names (git ls-remote; no clone)."""
    refs = [f"refs/tags/{tag}", f"refs/tags/{tag}^{{}}"]
    done = subprocess.run(["git", "ls-remote", url, *refs], capture_output=True, text=True, timeout=timeout, check=True)
    return done.stdout


def _lock_commit(  # noqa: PLR0917 - a private step of lock(), called once
    gap: Gap, ls_remote: LsRemote, timeout: float, result: LockResult, out: dict[str, dict[str, Any]] | None, stamp: str
) -> None:
    """Pin the commit `gap`'s tag names (into `out`), or say why not."""
    url, _, tag = gap.url.rpartition("@")
    try:
        listing = ls_remote(url, tag, timeout)
    except (OSError, subprocess.SubprocessError) as exc:
        result.failed.append(f"{gap.owner}: {gap.url}: git ls-remote failed ({exc})")
        return
    refs: dict[str, str] = {}
    for line in listing.splitlines():
        sha, _, ref = line.partition("\t")
        refs[ref.strip()] = sha.strip()
    # An annotated tag names a tag object; its peeled line (^{}) names the commit.
    commit = refs.get(f"refs/tags/{tag}^{{}}") or refs.get(f"refs/tags/{tag}")
    if not commit:
        result.failed.append(f"{gap.owner}: {gap.url}: the repository has no tag {tag}")
        return
    if out is not None:
        out[gap.url] = {"commit": commit, "status": "verified", "source": f"gb300 software lock, git ls-remote {stamp}"}
    result.pinned.append(f"{gap.owner}: {gap.url}: commit {commit}")


class _Dumper(yaml.SafeDumper):
    """Block style, long notes folded, no anchors: checksums.yaml stays readable in a diff."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _str_representer(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    style = ">" if len(data) > 80 and "\n" not in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_Dumper.add_representer(str, _str_representer)


def _entry(pin_values: Sequence[str], kind: str, status: str, source: str) -> dict[str, Any]:
    if kind == "images":
        return {"digest": pin_values[0], "status": status, "source": source}
    if kind == "commits":
        return {"commit": pin_values[0], "status": status, "source": source}
    if kind == "files":
        return {"sha256": pin_values[0], "status": status, "source": source}
    return {"fingerprints": list(pin_values), "status": status, "source": source}


def write_checksums(
    new_files: Mapping[str, Mapping[str, Any]],
    new_keys: Mapping[str, Mapping[str, Any]],
    path: Path | None = None,
    new_images: Mapping[str, Mapping[str, Any]] | None = None,
    new_commits: Mapping[str, Mapping[str, Any]] | None = None,
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
    images = {ref: _entry(p.values, "images", p.status, p.source) for ref, p in current.images.items()}
    images.update({ref: dict(v) for ref, v in (new_images or {}).items()})
    sections: dict[str, Any] = {"files": dict(sorted(files.items())), "keys": dict(sorted(keys.items()))}
    if images:
        sections["images"] = dict(sorted(images.items()))
    commits = {key: _entry(p.values, "commits", p.status, p.source) for key, p in current.commits.items()}
    commits.update({key: dict(v) for key, v in (new_commits or {}).items()})
    if commits:
        sections["commits"] = dict(sorted(commits.items()))
    body = yaml.dump(
        sections,
        Dumper=_Dumper,
        sort_keys=False,
        width=110,
        default_flow_style=False,
    )
    # never leave a file the loader would reject: it reads the new file before it takes the name
    writer.replace(path, header + body, mode=0o644, check=load_checksums)
