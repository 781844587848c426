"""The node payload account as ``pulumi up`` reaches it in the engine journeys: Azurite over HTTPS at the account's
production host name, through an HTTP ``CONNECT`` proxy, with bearer tokens from a stand-in ``az``.

The upload (``gb300 payload publish``, run by pulumi-command from the directory the engine chooses) talks to
``https://<account>.blob.core.windows.net``. Rather than a network namespace (tests/engine/test_pulumi_up.py), the
journeys give the engine's environment ``HTTPS_PROXY``: azure-core's requests transport sends every HTTPS request
through the proxy (``trust_env``), which connects each ``CONNECT <account host>:443`` to Azurite and refuses any
other host, so nothing leaves the machine. TLS is end to end, with the account's host name in the certificate of a
test CA the transport trusts (``REQUESTS_CA_BUNDLE``, ``SSL_CERT_FILE``); Azurite reads the account from the
``Host`` header. ``NO_PROXY`` keeps the engine's own gRPC on the loopback off the proxy (Go's proxy rules never
proxy loopback; gRPC Python honours ``no_proxy``).

What this cannot show, beyond what tests/support/azurite.py says of Azurite: name resolution and the network path
to the account (a private endpoint, storage IP rules), which a real deploy job meets and the namespace test keeps.
"""

from __future__ import annotations

import base64
import json
import os
import select
import socket
import ssl
import subprocess
import textwrap
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support import azurite, netns

AZ = textwrap.dedent(
    """\
    #!/usr/bin/env python3
    # Stand-in Azure CLI: `az account get-access-token` answers a JWT with Azure Storage's audience.
    import base64, json, sys, time
    def part(obj):
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()
    now = int(time.time())
    if sys.argv[1:3] != ["account", "get-access-token"]:
        sys.exit("az stand-in: only 'account get-access-token'")
    claims = {"aud": "https://storage.azure.com", "iss": "https://sts.windows.net/TENANT/", "iat": now,
              "nbf": now - 60, "exp": now + 3600, "oid": "OID", "tid": "TENANT"}
    token = part({"alg": "RS256", "typ": "JWT"}) + "." + part(claims) + "." + part({"sig": "unsigned"})
    print(json.dumps({"accessToken": token, "expires_on": now + 3600, "tokenType": "Bearer"}))
    """
)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class ConnectProxy:
    """An HTTP ``CONNECT`` proxy on the loopback that tunnels the one allowed host to a local port."""

    def __init__(self, allowed_host: str, target_port: int) -> None:
        self.allowed = allowed_host
        self.target_port = target_port
        self.tunnels: list[str] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._tunnel, args=(client,), daemon=True).start()

    def _tunnel(self, client: socket.socket) -> None:
        with client:
            head = b""
            while b"\r\n\r\n" not in head and len(head) < 8192:
                chunk = client.recv(1024)
                if not chunk:
                    return
                head += chunk
            words = head.split(b"\r\n", 1)[0].decode().split()
            host = words[1].rsplit(":", 1)[0] if len(words) == 3 and words[0] == "CONNECT" else ""
            self.tunnels.append(host)
            if host != self.allowed:
                client.sendall(b"HTTP/1.1 403 Forbidden\r\n\r\n")
                return
            with socket.create_connection(("127.0.0.1", self.target_port)) as upstream:
                client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                _pipe(client, upstream)

    def close(self) -> None:
        self._listener.close()


def _pipe(a: socket.socket, b: socket.socket) -> None:
    peers = {a: b, b: a}
    while True:
        readable, _, _ = select.select(list(peers), [], [], 60)
        if not readable:
            return
        for sock in readable:
            data = sock.recv(65536)
            if not data:
                return
            peers[sock].sendall(data)


@dataclass
class PayloadAccount:
    """Azurite serving one account, the proxy in front of it, and what the engine's environment needs."""

    account: str
    work: Path
    ca: Path
    proxy: ConnectProxy
    process: subprocess.Popen[bytes]
    env: dict[str, str] = field(default_factory=dict)

    @property
    def host(self) -> str:
        return f"{self.account}.blob.core.windows.net"

    def _service(self) -> Any:
        from azure.core.credentials import AccessToken  # noqa: PLC0415
        from azure.storage.blob import BlobServiceClient  # noqa: PLC0415

        class _Az:
            def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
                out = json.loads(_token())  # what the stand-in az answers
                return AccessToken(out["accessToken"], out["expires_on"])

        return BlobServiceClient(
            f"https://{self.host}",
            credential=_Az(),
            connection_verify=str(self.ca),
            proxies={"https": f"http://127.0.0.1:{self.proxy.port}"},
        )

    def create_container(self, name: str) -> None:
        """Make the container the upload writes to (azure-native would create it in a real deploy)."""
        self._service().create_container(name)

    def blobs(self, container: str) -> dict[str, bytes]:
        """Every blob of the container, by name."""
        box = self._service().get_container_client(container)
        return {b.name: box.download_blob(b.name).readall() for b in box.list_blobs()}

    def stop(self) -> None:
        self.proxy.close()
        self.process.terminate()
        self.process.wait(timeout=30)


def _token() -> str:
    now = int(time.time())

    def part(obj: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()

    claims = {
        "aud": "https://storage.azure.com",
        "iss": "https://sts.windows.net/TENANT/",
        "iat": now,
        "nbf": now - 60,
        "exp": now + 3600,
        "oid": "OID",
        "tid": "TENANT",
    }
    token = part({"alg": "RS256", "typ": "JWT"}) + "." + part(claims) + "." + part({"sig": "unsigned"})
    return json.dumps({"accessToken": token, "expires_on": now + 3600})


def start(work: Path, account: str) -> PayloadAccount:
    """Azurite for ``account`` under ``work``, its proxy, a stand-in ``az`` in ``work/bin``; waits until served."""
    work.mkdir(parents=True, exist_ok=True)
    host = f"{account}.blob.core.windows.net"
    ca, cert, key = netns.make_ca(work, [host])
    port = _free_port()
    (work / "azurite").mkdir(exist_ok=True)
    argv = azurite.blob_argv(host="127.0.0.1", port=port, cert=cert, key=key, location=work / "azurite")
    env = {**os.environ, "AZURITE_ACCOUNTS": azurite.accounts(account)}
    log = (work / "azurite.log").open("wb")
    process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
    context = ssl.create_default_context(cafile=str(ca))
    deadline = time.monotonic() + 60
    while True:
        try:
            with (
                socket.create_connection(("127.0.0.1", port), timeout=2) as raw,
                context.wrap_socket(raw, server_hostname=host),
            ):
                break
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"Azurite did not start: {(work / 'azurite.log').read_text()[-2000:]}") from None
            time.sleep(0.2)
    (work / "bin").mkdir(exist_ok=True)
    (work / "bin" / "az").write_text(AZ, encoding="utf-8")
    (work / "bin" / "az").chmod(0o755)
    proxy = ConnectProxy(host, port)
    proxy_url = f"http://127.0.0.1:{proxy.port}"
    made = PayloadAccount(account, work, ca, proxy, process)
    made.env = {
        "HTTPS_PROXY": proxy_url,
        "https_proxy": proxy_url,
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
        "REQUESTS_CA_BUNDLE": str(ca),
        "SSL_CERT_FILE": str(ca),
    }
    return made
