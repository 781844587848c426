"""Nodes' downloads stay on https: cloud-init/lib/gb300-lib.sh's fetch_verified, run by bash with the real curl
against a local https server (a throwaway CA) that redirects to plain http, where bytes with the pinned sha256
wait. Issue 48's third attack: an on-path attacker's clear-text bytes must never pass the pin."""

from __future__ import annotations

import hashlib
import http.server
import ssl
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from gb300.paths import REPO_ROOT
from tests.support.netns import make_ca
from tests.support.tools import require_tool

PAYLOAD = b"bytes anyone on the path could have written"


class _Handler(http.server.BaseHTTPRequestHandler):
    target = ""

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        if self.path == "/clear.deb":
            self.send_response(200)
            self.send_header("Content-Length", str(len(PAYLOAD)))
            self.end_headers()
            self.wfile.write(PAYLOAD)
            return
        self.send_response(302)
        self.send_header("Location", self.target)
        self.send_header("Content-Length", "0")
        self.end_headers()


def _serve(server: http.server.ThreadingHTTPServer) -> None:
    threading.Thread(target=server.serve_forever, daemon=True).start()


@pytest.fixture
def downgrade(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """An https URL on localhost that redirects to the same bytes over http, and the CA bundle that trusts it."""
    (tmp_path / "tls").mkdir()
    ca, cert, key = make_ca(tmp_path / "tls", ["localhost"])
    plain = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    secure = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    secure.socket = context.wrap_socket(secure.socket, server_side=True)
    _Handler.target = f"http://localhost:{plain.server_address[1]}/clear.deb"
    _serve(plain)
    _serve(secure)
    try:
        yield f"https://localhost:{secure.server_address[1]}/enroot.deb", ca
    finally:
        for server in (plain, secure):
            server.shutdown()
            server.server_close()


def _fetch(url: str, ca: Path, root: Path) -> subprocess.CompletedProcess[str]:
    sha = hashlib.sha256(PAYLOAD).hexdigest()
    script = f'. "{REPO_ROOT}/cloud-init/lib/gb300-lib.sh"\nfetch_verified "$1" "$2" "$3"\n'
    return subprocess.run(
        ["bash", "-c", script, "fetch", url, sha, str(root / "downloads" / "enroot.deb")],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "GB300_ROOT": str(root), "CURL_CA_BUNDLE": str(ca), "HOME": str(root)},
    )


def test_a_redirect_to_http_is_not_followed_even_when_the_bytes_match_the_pin(
    downgrade: tuple[str, Path], tmp_path: Path
) -> None:
    """The https URL redirects to http:// serving bytes whose sha256 is the pin: curl refuses the redirect
    (--proto-redir =https), the step fails naming the URL, and nothing is downloaded."""
    require_tool("curl", "curl is missing: apt-get install curl")
    url, ca = downgrade
    root = tmp_path / "node"
    done = _fetch(url, ca, root)
    assert done.returncode != 0
    assert f"download failed: {url}" in done.stdout + done.stderr
    assert not list((root / "downloads").glob("enroot.deb*"))


def test_without_the_protocol_rule_the_same_redirect_would_pass_the_pin(
    downgrade: tuple[str, Path], tmp_path: Path
) -> None:
    """The same fetch with the curl line stripped of --proto-redir =https downloads the clear-text bytes and they
    pass the pin: the protocol rule, not the checksum, is what stops this attack."""
    require_tool("curl", "curl is missing: apt-get install curl")
    url, ca = downgrade
    lib = (REPO_ROOT / "cloud-init" / "lib" / "gb300-lib.sh").read_text(encoding="utf-8")
    assert lib.count("--proto =https --proto-redir =https") >= 1
    weak = tmp_path / "weak-lib.sh"
    weak.write_text(lib.replace("--proto =https --proto-redir =https", ""), encoding="utf-8")
    root = tmp_path / "node"
    sha = hashlib.sha256(PAYLOAD).hexdigest()
    dest = root / "downloads" / "enroot.deb"
    script = f'. "{weak}"\nfetch_verified "$1" "$2" "$3"\n'
    done = subprocess.run(
        ["bash", "-c", script, "fetch", url, sha, str(dest)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "GB300_ROOT": str(root), "CURL_CA_BUNDLE": str(ca), "HOME": str(root)},
    )
    assert done.returncode == 0, done.stderr
    assert dest.read_bytes() == PAYLOAD
