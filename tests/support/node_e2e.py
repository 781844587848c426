"""One node, end to end: a role's custom data taken from the plan, laid out in the sandbox and run step by step.

:class:`AzureEndpoints` is the stand-in for what a node reaches over HTTP: the instance metadata service (tags,
compute metadata, managed identity tokens), Key Vault (the munge key) and the node's own local exporters. The
sandboxes send their requests to it as a proxy (``http_proxy`` for ``imds-tag``'s urllib, ``state["endpoint"]``
for the curl stand-in), so no request leaves the test. :func:`boot` runs a role's ``runcmd`` in a sandbox that
shares one stand-in Slurm controller (``slurm.json``) with the other nodes of the test.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from gb300.facts.software import load_software
from gb300.slurm.files import SLURM_UID
from tests.support.sandbox import Machine, RunResult, Sandbox, hpc_image_machine

MUNGE_KEY = base64.b64encode(bytes(range(256)) * 4).decode()
TOKEN = "standin-token"  # noqa: S105 - a stand-in bearer token, no secret
BLOB_ACCOUNT = "refst0001"


@dataclass
class Azure:
    """What the stand-in endpoints answer: the VM's tags, its scale set, the vault holding the munge key."""

    tags: dict[str, str] = field(default_factory=dict)
    scale_set: str = "ref-train-r0001"
    vault: str = "kv-gb300-ref"
    # The payload account's Blob endpoint (its name): "<container>/<blob>" -> bytes (what the upload published).
    payload_account: str = ""
    blobs: dict[str, bytes] = field(default_factory=dict)
    # "<container>/<blob>" -> how many more GETs of it answer 503 (a transient failure) before it is served.
    blob_failures: dict[str, int] = field(default_factory=dict)
    blob_requests: list[str] = field(default_factory=list)
    imds_requests: list[str] = field(default_factory=list)

    def answer(self, host: str, path: str, headers: Any) -> tuple[int, str | bytes]:
        """Status and body for a GET of ``host`` + ``path``."""
        if self.payload_account and host == f"{self.payload_account}.blob.core.windows.net":
            return self._blob(path.lstrip("/"), headers)
        local = {
            ("127.0.0.1:9400", "/metrics"): 'DCGM_FI_DEV_GPU_UTIL{gpu="0"} 0\n',
            ("127.0.0.1:9100", "/metrics"): 'node_infiniband_state_id{device="mlx5_ib0",port="1"} 4\n',
            ("127.0.0.1:9090", "/-/ready"): "Prometheus Server is Ready.\n",
        }
        if (host, path) in local:
            return 200, local[host, path]
        if host == "169.254.169.254":
            return self._imds(path, headers)
        if host == f"{self.vault}.vault.azure.net" and path.startswith("/secrets/munge-key"):
            if headers.get("Authorization") != f"Bearer {TOKEN}":
                return 401, "no token"
            return 200, json.dumps({"value": MUNGE_KEY})
        return 404, f"no stand-in for {host}{path}"

    def _blob(self, name: str, headers: Any) -> tuple[int, str | bytes]:
        """Azure Blob's GET Blob: a bearer token (OAuth needs x-ms-version 2017-11-09 or later), then the bytes."""
        self.blob_requests.append(name)
        if headers.get("Authorization") != f"Bearer {TOKEN}":
            return 401, "NoAuthenticationInformation"
        if headers.get("x-ms-version", "") < "2017-11-09":
            return 400, "InvalidHeaderValue: x-ms-version"
        if self.blob_failures.get(name, 0) > 0:
            self.blob_failures[name] -= 1
            return 503, "ServerBusy"
        if name not in self.blobs:
            return 404, "BlobNotFound"
        return 200, self.blobs[name]

    def _imds(self, path: str, headers: Any) -> tuple[int, str]:
        self.imds_requests.append(path)
        if headers.get("Metadata") != "true":
            return 400, "Metadata header missing"
        if path.startswith("/metadata/instance/compute/tagsList"):
            return 200, json.dumps([{"name": k, "value": v} for k, v in self.tags.items()])
        if path.startswith("/metadata/instance/compute/vmScaleSetName"):  # one leaf, asked with format=text
            return 200, self.scale_set
        if path.startswith("/metadata/instance/compute"):
            return 200, json.dumps({"vmScaleSetName": self.scale_set, "tagsList": []})
        if path.startswith("/metadata/identity/oauth2/token"):
            return 200, json.dumps({"access_token": TOKEN, "token_type": "Bearer"})
        return 404, f"no IMDS stand-in for {path}"


@contextmanager
def endpoints(azure: Azure) -> Iterator[str]:
    """Serve ``azure`` as an HTTP proxy on localhost; yields its URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            url = urlsplit(self.path)
            status, body = azure.answer(url.netloc or self.headers.get("Host", ""), url.path, self.headers)
            data = body if isinstance(body, bytes) else body.encode()
            self.send_response(status)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


def healthy_machine(hostname: str, address: str) -> Machine:
    """A healthy GB300 VM on the Ubuntu-HPC GB image that also carries the Lustre client, and Microsoft's Slurm
    packages at the pinned version and pyxis as an earlier boot left them (their install paths have tests of
    their own: tests/cloud_init/slurm/test_slurm_install.py)."""
    machine = hpc_image_machine()
    machine.hostname = hostname
    machine.files["/usr/local/lib/slurm/spank_pyxis.so"] = "ELF stand-in\n"
    machine.services["munge"] = {"enabled": True, "active": True}
    machine.modules.append("lustre")
    slurm = load_software().component("slurm")
    for package in (*slurm.packages, "slurm-smd-slurmd", "slurm-smd-slurmctld"):
        machine.packages[package] = f"{slurm.version}-1"
    return machine


def head_machine(hostname: str) -> Machine:
    """The head VM: no GPU stack, but the same stand-ins, and its empty state disk at LUN 0."""
    machine = healthy_machine(hostname, "10.40.1.4")
    machine.modules = []
    machine.files["/dev/disk/azure/scsi1/lun0"] = ""  # the head's state disk (gb300-state-disk formats it)
    return machine


@dataclass
class Node:
    """A booted sandbox node and its first run."""

    box: Sandbox
    run: RunResult

    def status(self) -> dict[str, str]:
        text = self.box.read("/var/lib/gb300/status")
        return dict(line.split(": ", 1) for line in text.splitlines() if ": " in line)


def boot(base: Path, cloud_config: str, machine: Machine, *, endpoint: str, slurm_state: Path, address: str) -> Node:
    """Lay ``cloud_config`` out under ``base`` on ``machine`` and run its runcmd, as cloud-init would."""
    box = Sandbox(base, cloud_config, machine)
    state = box.state()
    state |= {
        "endpoint": endpoint,
        "slurm_state": str(slurm_state),
        "address": address,
        "kernel_modules": ["lustre", "nvidia", "nvidia_peermem"],
    }
    # The image's system users: rsyslog's syslog, the prometheus package's user (the image carries prometheus here).
    state["users"] = {"munge": 110, "slurm": SLURM_UID, "syslog": 104, "prometheus": 113}
    (base / "state.json").write_text(json.dumps(state, indent=1, sort_keys=True))
    box.extra_env = {"http_proxy": endpoint, "no_proxy": "", "GB300_PUBLISH_WAIT": "5"}
    return Node(box, box.run())


def slurm_nodes(slurm_state: Path) -> dict[str, dict[str, str]]:
    """The stand-in controller's node records."""
    nodes: dict[str, dict[str, str]] = json.loads(slurm_state.read_text())["nodes"]
    return nodes


def run_tool(
    box: Sandbox, node_path: str, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run a tool the custom data placed on the node (``/usr/local/sbin/...``) in ``box``, as root would."""
    return subprocess.run(
        [str(box.path(node_path)), *args],
        env={**box.env(), **(env or {})},
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def clone(box: Sandbox, base: Path, hostname: str, address: str, slurm_state: Path) -> Sandbox:
    """A copy of ``box``'s booted disk with its own host name and address, on the controller ``slurm_state``
    (another VM of the same scale set, or the same VM in a test of its own)."""
    shutil.copytree(box.base, base, symlinks=True)
    state = json.loads((base / "state.json").read_text())
    state |= {"hostname": hostname, "address": address, "slurm_state": str(slurm_state)}
    (base / "state.json").write_text(json.dumps(state, indent=1, sort_keys=True))
    twin = Sandbox.__new__(Sandbox)
    twin.base, twin.root, twin.bin = base, base / "root", base / "bin"
    twin.config, twin.extra_env = box.config, dict(box.extra_env)
    with (base / "calls.log").open("w"):
        pass
    return twin
