"""Azurite, Microsoft's Azure Storage emulator (npm ``azurite``), as the tests run its Blob service.

``scripts/ensure-test-tools`` installs the exact dependency tree of ``tests/tools/azurite/package-lock.json``
(Azurite 3.35.0: the newest release whose ``engines`` admits Node 20; 3.36 needs Node 21 and 3.37 Node 22) into
``.cache/azurite/<lock digest>``. A test that needs it and finds it missing fails, naming that script: CI has it.

How the tests run it: HTTPS with the test CA's certificate (``--cert``/``--key``), ``--oauth basic`` (a bearer
token's ``aud``, ``iss``, ``nbf``/``exp`` are checked, its signature is not:
``dist/src/blob/authentication/BlobTokenAuthenticator.js`` ``authenticateBasic``), the payload account named by
``AZURITE_ACCOUNTS`` and reached at its production host name ``<account>.blob.core.windows.net`` (Azurite takes
the account from the first label of a host name that is not an IP address:
``dist/src/blob/middlewares/blobStorageContext.middleware.js`` ``extractStoragePartsFromPath``), and
``--skipApiVersionCheck`` (azure-storage-blob sends a newer ``x-ms-version`` than 3.35.0 lists) and
``--disableTelemetry``. 3.35.0 also runs on Debian 12's own Node 18 (``nodejs`` 18.20.4, which
scripts/ensure-test-tools installs where node is missing): it served HTTPS with ``--oauth basic`` there.

What Azurite cannot show: it accepts Shared Key for every account it knows (an account with
``allowSharedKeyAccess: false`` refuses it) and has no role assignments (no 403 while a role propagates); the
stand-in in tests/support/fake_azure.py shows those two.
"""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from gb300 import paths

TOOL_DIR = paths.REPO_ROOT / "tests" / "tools" / "azurite"
LOCK = TOOL_DIR / "package-lock.json"
ACCOUNT_KEY = base64.b64encode(b"gb300-azurite-test-account-key!!" * 2).decode()
"""The emulated account's Shared Key (AZURITE_ACCOUNTS needs one); nothing in the tests signs with it."""


def version() -> str:
    """The Azurite version the lock file pins."""
    lock = json.loads(LOCK.read_text(encoding="utf-8"))
    return str(lock["packages"]["node_modules/azurite"]["version"])


def install_dir() -> Path:
    """Where scripts/ensure-test-tools installs the lock file's tree (the same digest as its ``sha256sum``)."""
    return paths.REPO_ROOT / ".cache" / "azurite" / hashlib.sha256(LOCK.read_bytes()).hexdigest()[:16]


def blob_binary() -> Path:
    """Azurite's Blob service, installed; fails the test (never skips) when it is not."""
    binary = install_dir() / "node_modules" / ".bin" / "azurite-blob"
    if shutil.which("node") is None:
        pytest.fail("node is not installed: scripts/ensure-test-tools installs Debian's nodejs and Azurite")
    if not binary.exists():
        pytest.fail(f"Azurite {version()} is not installed in {install_dir()}: run scripts/ensure-test-tools")
    return binary


def node_version() -> str:
    """The node that runs Azurite (``node --version``)."""
    return subprocess.run(["node", "--version"], capture_output=True, text=True, check=True).stdout.strip()


def blob_argv(*, host: str, port: int, cert: Path, key: Path, location: Path) -> list[str]:
    """Azurite's Blob service on ``host:port`` over HTTPS with bearer tokens; its data in ``location``."""
    return [
        str(blob_binary()),
        "--blobHost",
        host,
        "--blobPort",
        str(port),
        "--cert",
        str(cert),
        "--key",
        str(key),
        "--oauth",
        "basic",
        "--location",
        str(location),
        "--skipApiVersionCheck",
        "--disableTelemetry",  # Azurite reports usage to Application Insights unless told not to
        "--silent",
        "--debug",
        str(location / "debug.log"),
    ]


def accounts(account: str) -> str:
    """``AZURITE_ACCOUNTS`` naming ``account`` (``name:key``)."""
    return f"{account}:{ACCOUNT_KEY}"
