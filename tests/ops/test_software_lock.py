"""``gb300 software lock``: downloads over real HTTP (a local server), pins, and the checksums file it writes."""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import http.server
import json
import os
import shutil
import subprocess
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest
import yaml

from gb300 import cli
from gb300.commands.software import container_images
from gb300.facts.software import CHECKSUMS_FILE, load_checksums, load_software
from gb300.ops import software_lock
from gb300.ops.software_lock import Gap, gaps, image_gaps, key_fingerprints, lock, resolve_digest, write_checksums
from tests.support.files import FIXTURES

KEYS = FIXTURES / "keys"
REPO_KEY_FPR = "C08AF28EE2631D8C289BEAC2E32B5DBF675A3747"  # gpg --show-keys tests/fixtures/keys/repo-signing.asc


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A directory served over HTTP on localhost, and its base URL."""
    root = tmp_path / "www"
    root.mkdir()
    handler = functools.partial(_Quiet, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield root, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


MANIFEST = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": []})
MANIFEST_DIGEST = "sha256:" + hashlib.sha256(MANIFEST.encode()).hexdigest()


class _Registry(http.server.BaseHTTPRequestHandler):
    """A container registry's pull API as nvcr.io serves it: a manifest needs an anonymous bearer token, which
    the token service (the 401's realm) hands out for the repository's pull scope."""

    announced = MANIFEST_DIGEST  # what Docker-Content-Digest says

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        if self.path.startswith("/token?") and "scope=repository%3Anvidia%2Fk8s%2Fdcgm-exporter%3Apull" in self.path:
            self._send(200, json.dumps({"token": "t0k"}).encode(), {"Content-Type": "application/json"})
        elif self.path == "/v2/nvidia/k8s/dcgm-exporter/manifests/4.4.1-4.5.2-ubuntu22.04":
            if self.headers.get("Authorization") != "Bearer t0k":
                challenge = 'Bearer realm="https://nvcr.io/token",scope="repository:nvidia/k8s/dcgm-exporter:pull"'
                self._send(401, b"{}", {"WWW-Authenticate": challenge})
            elif "application/vnd.oci.image.index.v1+json" not in self.headers.get("Accept", ""):
                self._send(406, b"{}", {})
            else:
                headers = {"Content-Type": "application/vnd.oci.image.index.v1+json"}
                self._send(200, MANIFEST.encode(), {**headers, "Docker-Content-Digest": self.announced})
        else:
            self._send(404, b"{}", {})

    def _send(self, code: int, body: bytes, headers: dict[str, str]) -> None:
        self.send_response(code)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def registry() -> Iterator[object]:
    """A local registry and a fetch that sends https://nvcr.io/... to it (real urllib, real HTTP)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Registry)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_address[1]}"

    def fetch(request: urllib.request.Request, timeout: float) -> object:
        request.full_url = request.full_url.replace("https://nvcr.io", base, 1)
        return urllib.request.urlopen(request, timeout=timeout)  # noqa: S310 - localhost test server

    try:
        yield fetch
    finally:
        server.shutdown()
        server.server_close()


DCGM_IMAGE = "nvcr.io/nvidia/k8s/dcgm-exporter:4.4.1-4.5.2-ubuntu22.04"


def test_resolve_digest_follows_the_token_flow_and_hashes_the_manifest(registry: object) -> None:
    """The tag resolves to the sha256 of the manifest served after the anonymous-token handshake."""
    assert resolve_digest(DCGM_IMAGE, fetch=registry) == MANIFEST_DIGEST  # type: ignore[arg-type]


def test_a_registry_announcing_another_digest_is_not_pinned(registry: object, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Docker-Content-Digest header that disagrees with the bytes served is a failure, and nothing is pinned."""
    monkeypatch.setattr(_Registry, "announced", "sha256:" + "0" * 64)
    images: dict[str, dict[str, object]] = {}
    _, _, result = lock([Gap(DCGM_IMAGE, "image", "dcgm-exporter")], fetch=registry, images=images)  # type: ignore[arg-type]
    assert images == {}
    [failed] = result.failed
    assert failed.startswith(
        f"dcgm-exporter: {DCGM_IMAGE}: cannot resolve its digest (the registry announces sha256:000"
    )


def test_the_dcgm_exporter_image_is_a_gap_until_pinned_by_digest() -> None:
    """Nodes pull the exporter by a mutable tag until its digest is pinned; the shipped data lists that gap."""
    assert container_images() == {"dcgm-exporter": DCGM_IMAGE}
    assert image_gaps(container_images()) == [Gap(DCGM_IMAGE, "image", "dcgm-exporter")]


def _routed(base: str) -> object:
    """An opener that sends https://vendor.test/<path> to the local server: real urllib, real HTTP."""

    def open_url(url: str, timeout: float) -> IO[bytes]:
        local = url.replace("https://vendor.test", base, 1)
        response = urllib.request.urlopen(local, timeout=timeout)  # noqa: S310 - localhost test server
        response.url = response.url.replace(base, "https://vendor.test", 1)  # where it came from, as https
        return response  # type: ignore[no-any-return]

    return open_url


def test_lock_pins_the_sha256_of_what_was_served_and_the_fingerprint_of_a_key(served: tuple[Path, str]) -> None:
    """A file's pin is the sha256 of the bytes served; a key's pin is its primary-key fingerprint."""
    root, base = served
    payload = bytes(range(256)) * 5000  # 1.28 MB, more than one read chunk
    (root / "enroot.deb").write_bytes(payload)
    shutil.copy(KEYS / "repo-signing.asc", root / "key.asc")
    todo = [
        Gap("https://vendor.test/enroot.deb", "file", "enroot"),
        Gap("https://vendor.test/key.asc", "key", "cuda-sbsa"),
    ]
    lines: list[str] = []
    files, keys, result = lock(todo, opener=_routed(base), progress=lines.append, today=dt.date(2026, 11, 30))  # type: ignore[arg-type]
    assert files["https://vendor.test/enroot.deb"]["sha256"] == hashlib.sha256(payload).hexdigest()
    assert files["https://vendor.test/enroot.deb"]["source"] == "gb300 software lock, fetched 2026-11-30"
    assert keys["https://vendor.test/key.asc"]["fingerprints"] == [REPO_KEY_FPR]
    assert result.failed == []
    assert lines == [
        "[1/2] enroot: fetching https://vendor.test/enroot.deb",
        "[2/2] cuda-sbsa: fetching https://vendor.test/key.asc",
    ]


def test_lock_reports_what_it_cannot_pin_and_pins_the_rest(served: tuple[Path, str]) -> None:
    """A 404 and a key URL serving no key are reported one line each; the good download is still pinned."""
    root, base = served
    (root / "page.html").write_text("<html>moved</html>")
    (root / "ok.tar.gz").write_bytes(b"source")
    todo = [
        Gap("https://vendor.test/gone.deb", "file", "enroot"),
        Gap("https://vendor.test/page.html", "key", "doca"),
        Gap("https://vendor.test/ok.tar.gz", "file", "pyxis"),
    ]
    files, keys, result = lock(todo, opener=_routed(base))  # type: ignore[arg-type]
    assert list(files) == ["https://vendor.test/ok.tar.gz"]
    assert keys == {}
    assert result.failed == [
        "enroot: https://vendor.test/gone.deb: download failed (HTTP 404 File not found)",
        "doca: https://vendor.test/page.html: the file holds no OpenPGP public key",
    ]


def _with_gaps(tmp_path: Path) -> Path:
    """A copy of checksums.yaml without its commits and without nccl-tests' sha256: gaps of both kinds."""
    raw = yaml.safe_load(CHECKSUMS_FILE.read_text())
    del raw["commits"]
    raw["files"] = {url: pin for url, pin in raw["files"].items() if "nccl-tests" not in url}
    path = tmp_path / "checksums.yaml"
    path.write_text(CHECKSUMS_FILE.read_text().split("files:")[0] + yaml.safe_dump(raw, sort_keys=False))
    return path


def _tagged_repo(root: Path, tag: str) -> tuple[str, str]:
    """A local git repository whose annotated tag `tag` names a commit: (file:// URL, the commit id)."""
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t"}
    env |= {"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    root.mkdir(parents=True)
    for argv in (["init", "-q"], ["commit", "-q", "--allow-empty", "-m", "r"], ["tag", "-a", tag, "-m", tag]):
        subprocess.run(["git", "-C", str(root), *argv], check=True, env=env, capture_output=True)
    head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], check=True, capture_output=True, text=True)
    return f"file://{root}", head.stdout.strip()


def test_lock_pins_the_commit_a_tag_names_with_git(tmp_path: Path) -> None:
    """A commit gap is resolved by `git ls-remote` to the commit under an annotated tag, never the tag object."""
    url, commit = _tagged_repo(tmp_path / "pyxis", "v9.9.9")
    commits: dict[str, dict[str, object]] = {}
    _, _, result = lock(
        [Gap(f"{url}@v9.9.9", "commit", "pyxis"), Gap(f"{url}@v0.0.0", "commit", "pyxis")], commits=commits
    )
    assert commits[f"{url}@v9.9.9"]["commit"] == commit
    assert result.pinned == [f"pyxis: {url}@v9.9.9: commit {commit}"]
    assert result.failed == [f"pyxis: {url}@v0.0.0: the repository has no tag v0.0.0"]


def test_written_pins_reach_the_nodes_and_keep_the_existing_ones(tmp_path: Path) -> None:
    """Merged into a copy of checksums.yaml, new pins close those gaps; old pins and the header are kept."""
    path = _with_gaps(tmp_path)
    before = load_checksums(path)
    open_gaps = gaps([load_software(checksums=path)])
    assert {g.kind for g in open_gaps} == {"file", "commit"}
    files = {g.url: {"sha256": "a" * 64, "status": "verified", "source": "t"} for g in open_gaps if g.kind == "file"}
    keys = {
        g.url: {"fingerprints": [REPO_KEY_FPR], "status": "verified", "source": "t"}
        for g in open_gaps
        if g.kind == "key"
    }
    commits = {
        g.url: {"commit": "c" * 40, "status": "verified", "source": "t"} for g in open_gaps if g.kind == "commit"
    }
    write_checksums(files, keys, path, new_commits=commits)
    after = load_checksums(path)
    assert gaps([load_software(checksums=path)]) == []
    for url, pin in (*before.files.items(), *before.keys.items()):
        assert (after.files.get(url) or after.keys[url]) == pin
    assert path.read_text().startswith(CHECKSUMS_FILE.read_text().split("files:")[0])


def test_the_shipped_checksums_file_is_in_the_form_the_lock_writes(tmp_path: Path) -> None:
    """Rewriting the shipped file with nothing new changes no byte, so a lock's diff shows only new pins."""
    path = tmp_path / "checksums.yaml"
    shutil.copy(CHECKSUMS_FILE, path)
    write_checksums({}, {}, path)
    assert path.read_text() == CHECKSUMS_FILE.read_text()


def test_key_fingerprints_reads_only_primary_keys() -> None:
    """The fixture key has a signing primary key only; a text file has none."""
    assert key_fingerprints(KEYS / "repo-signing.asc") == (REPO_KEY_FPR,)
    assert key_fingerprints(Path(__file__)) == ()


def test_check_lists_every_gap_and_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    """`gb300 software lock --check` needs no network: one line per unpinned URL, exit 1."""
    code = cli.main(["software", "lock", "--check"])
    out = capsys.readouterr().out.splitlines()
    expected = gaps([load_software()]) + image_gaps(container_images())
    assert code == (1 if expected else 0)
    assert len(out) == len(expected)
    for gap, line in zip(expected, out, strict=True):
        assert line.startswith(f"{gap.owner}: no ")
        assert line.endswith(gap.url)


def test_an_unknown_stack_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    """A stack name that has no file is a usage error, not a traceback."""
    assert cli.main(["software", "lock", "--check", "--stack", "nosuch"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["gb300 software: --stack nosuch: no stack file stacks/Pulumi.nosuch.yaml"]


def test_the_cli_pins_every_real_gap_and_then_the_plan_is_quiet(  # noqa: PLR0917 - pytest fixtures
    served: tuple[Path, str],
    registry: object,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    reference_raw: dict[str, object],
) -> None:
    """`gb300 software lock` against (locally served) vendor URLs and registry fills checksums.yaml; `--check`
    then passes, nodes get the pins (the exporter image by digest), and the software-checksums warning is gone."""
    from gb300 import config  # noqa: PLC0415
    from gb300.facts import software  # noqa: PLC0415
    from gb300.node import files as node_files  # noqa: PLC0415
    from gb300.rules import software as software_rule  # noqa: PLC0415

    root, base = served
    copy = _with_gaps(tmp_path)
    monkeypatch.setattr(software, "CHECKSUMS_FILE", copy)
    todo = gaps([load_software()])
    assert todo, "nothing left to pin in the shipped data"
    route: dict[str, str] = {}
    for index, gap in enumerate(todo):
        name = f"gap-{index}"
        if gap.kind == "commit":
            url, tag = gap.url.rsplit("@", 1)
            route[url], route[gap.url] = _tagged_repo(tmp_path / name, tag)
            continue
        if gap.kind == "key":
            shutil.copy(KEYS / "repo-signing.asc", root / name)
        else:
            (root / name).write_bytes(f"payload of {gap.url}".encode())
        route[gap.url] = f"{base}/{name}"
    real_ls_remote = software_lock.default_ls_remote
    monkeypatch.setattr(
        software_lock, "default_ls_remote", lambda url, tag, timeout: real_ls_remote(route[url], tag, timeout)
    )

    def routed(url: str, timeout: float) -> IO[bytes]:
        response = urllib.request.urlopen(route[url], timeout=timeout)  # noqa: S310 - localhost
        response.url = url  # the https URL it stands for
        return response  # type: ignore[no-any-return]

    monkeypatch.setattr(software_lock, "default_open", routed)
    monkeypatch.setattr(software_lock, "default_fetch", registry)
    assert cli.main(["software", "lock", "--stack", "reference"]) == 0
    err = capsys.readouterr().err
    assert f"[{len(todo) + 1}/{len(todo) + 1}]" in err
    assert cli.main(["software", "lock", "--check"]) == 0
    pinned = load_software()
    for gap in todo:
        if gap.kind == "commit":
            [git] = [c.git for c in pinned.components if c.git and c.git.key == gap.url]
            assert git.commit == route[gap.url]
        elif gap.kind == "file":
            [file] = [f for c in pinned.components for f in c.files if f.url == gap.url]
            assert file.sha256 == hashlib.sha256(f"payload of {gap.url}".encode()).hexdigest()
        else:
            [repo] = [r for r in pinned.repos if r.key_url == gap.url]
            assert repo.key_fingerprints == (REPO_KEY_FPR,)
    assert software_rule.findings(config.parse(dict(reference_raw))) == []
    cfg = config.parse(dict(reference_raw))
    env = node_files.monitoring_env(cfg)
    assert f"GB300_DCGM_EXPORTER_IMAGE={DCGM_IMAGE}@{MANIFEST_DIGEST}\n" in env


def test_check_lists_no_doca_gap(capsys: pytest.CaptureFixture[str]) -> None:
    """DOCA comes from the doca-host file Azure pins by sha256, not an online repository whose key no one
    publishes: `--check` lists nothing of DOCA's."""
    cli.main(["software", "lock", "--check"])
    out = capsys.readouterr().out.lower()
    assert "doca" not in out
    assert not [g for g in gaps([load_software()]) if "doca" in (g.url + g.owner).lower()]


class _Downgrading(http.server.BaseHTTPRequestHandler):
    """A vendor whose download redirects to plain http (an on-path attacker's doing, or a careless mirror)."""

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        if self.path == "/clear.deb":
            body = b"bytes anyone on the path could have written"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        self.send_response(302)
        self.send_header("Location", f"http://127.0.0.1:{self.server.server_address[1]}/clear.deb")
        self.send_header("Content-Length", "0")
        self.end_headers()


@pytest.fixture
def downgrading() -> Iterator[str]:
    """A local server redirecting every path but /clear.deb there over http; its base URL."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Downgrading)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_redirect_to_http_is_not_followed(downgrading: str) -> None:
    """The lock's own opener refuses a redirect to http:// before following it, naming both URLs."""
    with pytest.raises(urllib.error.URLError) as refused:
        software_lock.default_open(f"{downgrading}/enroot.deb", 5.0)
    assert f"redirects to {downgrading}/clear.deb, which is not https; not followed" in str(refused.value)


def test_bytes_that_came_over_http_are_never_pinned(downgrading: str) -> None:
    """A download that a redirect took to http:// (urllib's plain opener follows it) is reported as failed and
    not pinned as verified; it used to be recorded with status verified."""

    def follows_anything(url: str, timeout: float) -> IO[bytes]:
        response: IO[bytes] = urllib.request.urlopen(  # noqa: S310 - localhost test server
            url.replace("https://vendor.test", downgrading, 1), timeout=timeout
        )
        return response

    files, _, result = lock([Gap("https://vendor.test/enroot.deb", "file", "enroot")], opener=follows_anything)
    assert files == {}
    assert result.pinned == []
    assert result.failed == [
        f"enroot: https://vendor.test/enroot.deb: download failed (served from {downgrading}/clear.deb, which is "
        "not https; not pinned)"
    ]


def test_the_lock_records_where_a_redirect_took_it(served: tuple[Path, str]) -> None:
    """A download served from another https URL after a redirect is pinned with that URL in its source."""
    root, base = served
    (root / "enroot.deb").write_bytes(b"payload")

    def moved(url: str, timeout: float) -> IO[bytes]:
        response = urllib.request.urlopen(f"{base}/enroot.deb", timeout=timeout)  # noqa: S310 - localhost
        response.url = "https://cdn.vendor.test/enroot.deb"  # where the redirects ended
        return response  # type: ignore[no-any-return]

    files, _, _ = lock(
        [Gap("https://vendor.test/enroot.deb", "file", "enroot")], opener=moved, today=dt.date(2026, 12, 5)
    )
    assert files["https://vendor.test/enroot.deb"]["source"] == (
        "gb300 software lock, fetched 2026-12-05 from https://cdn.vendor.test/enroot.deb"
    )
