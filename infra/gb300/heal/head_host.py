"""The head's own adapters for ``gb300-heal``: where its files are, the lock, the config, the state file, the
decision log, and Azure signed in as the remediation identity (IMDS) (docs/self-healing.md#on-the-head).

Only the standard library and the Azure SDK (imported when a tick talks to Azure) are imported: the head's venv
holds exactly the packages of ``data/heal-python.yaml``.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from gb300 import tags as gb300_tags
from gb300.heal import state as heal_state
from gb300.heal.ports import Sink, file_sink
from gb300.node import paths as node_paths

CLIENT_ID_TAG = gb300_tags.HEAL_CLIENT_ID


def root() -> str:
    """``GB300_ROOT``: the prefix of every path (empty on a node; a scratch directory in tests)."""
    return os.environ.get("GB300_ROOT", "")


def node_path(path: str) -> Path:
    """A node path (:mod:`gb300.node.paths`) under :func:`root`."""
    return Path(root() + path)


def state_store() -> heal_state.FileStore:
    """The loop's state file (:mod:`gb300.heal.state`)."""
    return heal_state.FileStore(node_path(node_paths.HEAL_STATE))


@contextmanager
def locked() -> Iterator[None]:
    """One tick, status change or resume at a time (``flock`` on the lock file)."""
    path = node_path(node_paths.HEAL_LOCK)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def read_config() -> dict[str, Any]:
    """``/etc/gb300/heal.json`` (:func:`gb300.heal.deploy.config_json`)."""
    config: dict[str, Any] = json.loads(node_path(node_paths.HEAL_CONFIG).read_text(encoding="utf-8"))
    return config


def decision_sink() -> Sink:
    """Decision records appended to the head's decision log (shipped to ``Gb300Health_CL``)."""
    path = node_path(node_paths.HEAL_DECISION_LOG)
    path.parent.mkdir(parents=True, exist_ok=True)
    return file_sink(path)


def _imds(path: str) -> Any:
    """A JSON answer of the instance metadata service (``AZURE_POD_IDENTITY_AUTHORITY_HOST`` moves it, as it
    moves azure-identity's managed identity requests)."""
    base = os.environ.get("AZURE_POD_IDENTITY_AUTHORITY_HOST", "http://169.254.169.254").rstrip("/")
    request = urllib.request.Request(f"{base}{path}", headers={"Metadata": "true"})  # noqa: S310 - IMDS over http
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(request, timeout=10) as response:
        return json.loads(response.read().decode())


def compute_clients(arm: str) -> tuple[Callable[[str], Any], str, str]:
    """``subscription -> ComputeManagementClient`` signed in as the remediation identity, and the head's own
    subscription and resource group (the racks' resource group)."""
    from azure.identity import ManagedIdentityCredential  # noqa: PLC0415 - only the tick talks to Azure
    from azure.mgmt.compute import ComputeManagementClient  # noqa: PLC0415

    compute = _imds("/metadata/instance/compute?api-version=2021-02-01")
    tags = {t["name"]: t["value"] for t in compute.get("tagsList") or []}
    client_id = tags.get(CLIENT_ID_TAG, "")
    if not re.fullmatch(r"[0-9a-fA-F-]{36}", client_id):
        raise SystemExit(f"gb300-heal: the head's tag {CLIENT_ID_TAG} must be a GUID (got {client_id!r})")
    credential = ManagedIdentityCredential(client_id=client_id)
    clients: dict[str, Any] = {}

    def client_for(subscription: str) -> Any:
        if subscription not in clients:
            # retry_total=0: the loop retries a refused call itself on a later tick (gb300.heal.case.LATER), so a
            # tick never sleeps out ARM's Retry-After while holding the lock.
            clients[subscription] = ComputeManagementClient(
                credential, subscription, base_url=arm, credential_scopes=[f"{arm}/.default"], retry_total=0
            )
        return clients[subscription]

    return client_for, str(compute["subscriptionId"]), str(compute["resourceGroupName"])


Clients = Callable[[str], tuple[Callable[[str], Any], str, str]]
"""``arm endpoint -> (subscription -> compute client, subscription, resource group)``: :func:`compute_clients`."""

__all__ = [
    "CLIENT_ID_TAG",
    "Clients",
    "compute_clients",
    "decision_sink",
    "locked",
    "node_path",
    "read_config",
    "root",
    "state_store",
]
