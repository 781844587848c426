"""Stand-ins for the Azure endpoints the payload delivery meets, behaving as Azure does, over HTTPS on one port.

Run as ``python -m tests.support.fake_azure --state DIR --cert PEM --key PEM --payload-host HOST`` inside a network
namespace whose /etc/hosts sends the hosts below to the ``--listen`` address; each request is dispatched by its
Host header:

* the CI's ID token endpoint (``token.actions.githubusercontent.com``, as GitHub's): ``GET /id-token`` with the
  request token as bearer answers ``{"value": <ID token>}``;
* Entra ID (``login.microsoftonline.com``): ``POST /<tenant>/oauth2/v2.0/token`` with that ID token as
  ``client_assertion`` answers an access token for the scope asked; any other assertion is refused (400
  ``invalid_client``). The access token is a JWT with the claims Azure Storage (and Azurite's ``--oauth basic``,
  which the delivery test publishes to) reads: ``aud`` the scope's resource, ``iss``
  ``https://sts.windows.net/<tenant>/``, ``iat``/``nbf``/``exp`` (:func:`access_token`). Its signature is random
  bytes: Azurite checks the claims, not the signature (``BlobTokenAuthenticator.authenticateBasic``), and no
  test here can show Azure's signature check;
* the payload account's Blob service, for what Azurite cannot do: Azurite accepts Shared Key for any account it
  knows (so it cannot show an account with ``allowSharedKeyAccess: false``) and has no role assignments (so it
  cannot show a deployer's role still propagating). This stand-in refuses Shared Key (403
  ``KeyBasedAuthenticationNotPermitted``), answers no credential with 401, a bearer token Entra did not issue with
  401 ``InvalidAuthenticationInfo``, and the first ``--deny-first`` requests with a good token with 403
  ``AuthorizationPermissionMismatch`` (a role assignment not yet propagated). Put Blob stores, Get Blob serves
  (206 for a range), with ``x-ms-error-code`` and Azure's XML error body otherwise. It does not show Azure's Blob
  protocol beyond those two calls: the delivery test publishes to Azurite for that.

Stored blobs land under ``DIR/blobs/<container>/<blob>``; every request is appended to ``DIR/requests.jsonl``
(method, host, path, the kind of credential).

For the node's side (tests/node/test_payload_trust.py): ``--imds-tags FILE`` also serves a stand-in IMDS on
169.254.169.254:80 (the namespace's loopback must carry that address): the tags of FILE (a JSON object) for the
instance's ``tagsList`` and the first ``--accept-token`` as the managed identity's storage token, to requests with
``Metadata: true`` only. Two switches make a hostile Get Blob, for the size bounds: ``--pause-after N`` sends the
first N bytes of a longer body, writes ``DIR/paused`` and waits (up to a minute) for ``DIR/go`` before the rest,
so a test can look at what reached the disk meanwhile; ``--chunked`` sends bodies without a Content-Length
(chunked), which Azure's Get Blob never does: it shows a reader that must bound a body of unknown length itself.
"""

from __future__ import annotations

import argparse
import base64
import json
import secrets
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

ID_TOKEN_HOST = "token.actions.githubusercontent.com"  # noqa: S105 - a host name
ENTRA_HOST = "login.microsoftonline.com"
REQUEST_TOKEN = "gh-request-token"  # noqa: S105 - the stand-in's fixed CI request token
ID_TOKEN = "gh-id-token-for-azure"  # noqa: S105


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def access_token(tenant: str, resource: str, lifetime: int = 3600) -> str:
    """An Entra-shaped access token for ``resource`` (``https://storage.azure.com``): a JWT whose claims are those
    Azure Storage reads (``aud``, ``iss`` on ``sts.windows.net``, ``iat``, ``nbf``, ``exp``, the caller's ``oid``
    and ``tid``), with a random signature (see the module docstring)."""
    now = int(time.time())
    header = {"typ": "JWT", "alg": "RS256", "kid": "gb300-test"}
    claims = {
        "aud": resource,
        "iss": f"https://sts.windows.net/{tenant}/",
        "iat": now - 60,
        "nbf": now - 60,
        "exp": now + lifetime,
        "oid": "44444444-4444-4444-4444-444444444444",
        "tid": tenant,
        "ver": "1.0",
    }
    parts = [_b64url(json.dumps(part, separators=(",", ":")).encode()) for part in (header, claims)]
    return ".".join([*parts, _b64url(secrets.token_bytes(256))])


class State:
    def __init__(self, root: Path, payload_host: str, deny_first: int, accept: tuple[str, ...] = ()) -> None:
        self.root = root
        self.payload_host = payload_host
        self.deny_left = deny_first
        self.issued: set[str] = set(accept)  # tokens Entra issued (and any the node's IMDS stand-in hands out)
        self.lock = threading.Lock()
        self.pause_after = 0  # --pause-after: 0 sends every body at once
        self.chunked = False  # --chunked: bodies without a Content-Length

    def log(self, entry: dict[str, str]) -> None:
        with self.lock, (self.root / "requests.jsonl").open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(entry) + "\n")


def _error_xml(code: str) -> bytes:
    return f'<?xml version="1.0" encoding="utf-8"?><Error><Code>{code}</Code><Message>{code}</Message></Error>'.encode()


class Handler(BaseHTTPRequestHandler):
    state: State
    protocol_version = "HTTP/1.1"

    def _send(self, code: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        self.send_response(code)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _storage_error(self, code: int, error: str) -> None:
        self._send(code, _error_xml(error), {"x-ms-error-code": error, "Content-Type": "application/xml"})

    def _body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _auth_kind(self) -> str:
        auth = self.headers.get("Authorization", "")
        return auth.split(" ", 1)[0] if auth else "none"

    def _dispatch(self) -> None:
        host = self.headers.get("Host", "").split(":")[0]
        url = urlsplit(self.path)
        body = self._body() if self.command in ("PUT", "POST") else b""
        self.state.log({"method": self.command, "host": host, "path": url.path, "auth": self._auth_kind()})
        if host == ID_TOKEN_HOST:
            self._id_token(url)
        elif host == ENTRA_HOST:
            self._entra(url, body)
        elif host == self.state.payload_host:
            self._blob(url, body)
        else:
            self._send(404, b"no stand-in for this host")

    do_GET = do_PUT = do_POST = do_HEAD = _dispatch  # noqa: N815 - http.server's method names

    def _id_token(self, url: object) -> None:
        if self.headers.get("Authorization") != f"Bearer {REQUEST_TOKEN}":
            self._send(401, b"{}")
            return
        self._send(200, json.dumps({"value": ID_TOKEN}).encode(), {"Content-Type": "application/json"})

    def _entra(self, url: object, body: bytes) -> None:
        form = parse_qs(body.decode())
        path = urlsplit(self.path).path
        if not path.endswith("/oauth2/v2.0/token"):
            self._send(404, b"{}")
            return
        if form.get("client_assertion", [""])[0] != ID_TOKEN:
            answer = {"error": "invalid_client", "error_description": "AADSTS700024: assertion is not valid"}
            self._send(400, json.dumps(answer).encode(), {"Content-Type": "application/json"})
            return
        tenant = path.strip("/").split("/", 1)[0]
        scope = form.get("scope", ["https://storage.azure.com/.default"])[0].split()[0]
        token = access_token(tenant, scope.removesuffix("/.default"))
        with self.state.lock:
            self.state.issued.add(token)
        answer = {"token_type": "Bearer", "expires_in": 3600, "ext_expires_in": 3600, "access_token": token}
        self._send(200, json.dumps(answer).encode(), {"Content-Type": "application/json"})

    def _blob(self, url: object, body: bytes) -> None:  # noqa: PLR0911 - one answer per case Azure has
        auth = self.headers.get("Authorization", "")
        if auth.startswith("SharedKey "):
            self._storage_error(403, "KeyBasedAuthenticationNotPermitted")
            return
        if not auth.startswith("Bearer "):
            self._storage_error(401, "NoAuthenticationInformation")
            return
        if auth.removeprefix("Bearer ") not in self.state.issued:
            self._storage_error(401, "InvalidAuthenticationInfo")
            return
        with self.state.lock:
            if self.state.deny_left > 0:
                self.state.deny_left -= 1
                deny = True
            else:
                deny = False
        if deny:
            self._storage_error(403, "AuthorizationPermissionMismatch")
            return
        path = urlsplit(self.path).path.lstrip("/")
        if "/" not in path or ".." in path.split("/"):
            self._storage_error(400, "InvalidUri")
            return
        target = self.state.root / "blobs" / path
        headers = {"ETag": '"0x1"', "Last-Modified": "Tue, 01 Dec 2026 00:00:00 GMT", "x-ms-version": "2025-01-05"}
        if self.command == "PUT":
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(body)
            self._send(201, b"", {**headers, "x-ms-request-server-encrypted": "true"})
            return
        if not target.is_file():
            self._storage_error(404, "BlobNotFound")
            return
        data = target.read_bytes()
        headers |= {"x-ms-blob-type": "BlockBlob", "Content-Type": "application/octet-stream", "Accept-Ranges": "bytes"}
        wanted = self.headers.get("x-ms-range") or self.headers.get("Range")
        if wanted and data:
            start, _, end = wanted.removeprefix("bytes=").partition("-")
            first, last = int(start), min(int(end or len(data) - 1), len(data) - 1)
            headers["Content-Range"] = f"bytes {first}-{last}/{len(data)}"
            self._send(206, data[first : last + 1], headers)
            return
        if self.state.chunked or (self.state.pause_after and len(data) > self.state.pause_after):
            self._send_hostile(data, headers)
            return
        self._send(200, data, headers)

    def _send_hostile(self, data: bytes, headers: dict[str, str]) -> None:
        """``data`` as --chunked and --pause-after say: without a length, and/or stopping after the first bytes
        until the test writes DIR/go (the connection closed at the end either way)."""
        self.send_response(200)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Connection", "close")
        self.close_connection = True
        if self.state.chunked:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        cut = self.state.pause_after if self.state.pause_after and len(data) > self.state.pause_after else len(data)
        try:
            for index, part in enumerate((data[:cut], data[cut:])):
                if index == 1 and part:
                    (self.state.root / "paused").write_text("paused\n")
                    deadline = time.monotonic() + 60
                    while not (self.state.root / "go").exists() and time.monotonic() < deadline:
                        time.sleep(0.02)
                for start in range(0, len(part), 65536):
                    piece = part[start : start + 65536]
                    if self.state.chunked:
                        self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
                    else:
                        self.wfile.write(piece)
                self.wfile.flush()
            if self.state.chunked:
                self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
            return  # the reader stopped reading: what a bounded reader does

    def log_message(self, *args: object) -> None:
        return


def serve_imds(tags: dict[str, str], token: str, log: Path) -> None:
    """A stand-in IMDS on 169.254.169.254:80, in a thread: the instance's tags and a storage token (as IMDS
    answers them, to requests with ``Metadata: true``); each request's path is appended to ``log``."""

    class Imds(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            with log.open("a", encoding="utf-8") as handle:
                handle.write(self.path + "\n")
            if self.headers.get("Metadata") != "true":
                self.send_response(400)
                self.end_headers()
                return
            if self.path.startswith("/metadata/instance/compute/tagsList"):
                body = json.dumps([{"name": k, "value": v} for k, v in tags.items()])
            elif self.path.startswith("/metadata/identity/oauth2/token"):
                body = json.dumps({"access_token": token, "token_type": "Bearer"})
            else:
                self.send_response(404)
                self.end_headers()
                return
            self.send_response(200)
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("169.254.169.254", 80), Imds)
    threading.Thread(target=server.serve_forever, daemon=True).start()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--state", type=Path, required=True)
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--payload-host", required=True)
    parser.add_argument("--deny-first", type=int, default=0)
    parser.add_argument("--port", type=int, default=443)
    parser.add_argument("--listen", default="127.0.0.1", help="the address to listen on")
    parser.add_argument("--accept-token", action="append", default=[], help="a bearer token taken as Entra's")
    parser.add_argument("--imds-tags", type=Path, help="also serve IMDS on 169.254.169.254:80 with these tags")
    parser.add_argument("--pause-after", type=int, default=0, help="stop a longer body after N bytes until DIR/go")
    parser.add_argument("--chunked", action="store_true", help="send bodies without a Content-Length")
    args = parser.parse_args()
    Handler.state = State(args.state, args.payload_host, args.deny_first, tuple(args.accept_token))
    Handler.state.pause_after = args.pause_after
    Handler.state.chunked = args.chunked
    if args.imds_tags:
        serve_imds(json.loads(args.imds_tags.read_text()), args.accept_token[0], args.state / "imds.log")
    server = ThreadingHTTPServer((args.listen, args.port), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(args.cert, args.key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    (args.state / "ready").write_text("ready\n")
    server.serve_forever()


if __name__ == "__main__":
    main()
