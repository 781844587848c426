"""The tag contract: every Azure tag key gb300 writes or reads, and the builders of the tag sets it writes.

Tags are an interface between parts that share no code: the components write them, the rules, the plan summary,
``gb300 rollout`` and ``gb300 status`` read them back from the plan or the deployed state, and the node scripts
read them from the instance metadata service (``cloud-init/scripts/gb300-imds-tag``). Every key is spelled here
and only here (tests/test_tags.py checks the node scripts and templates against :data:`NODE_READS`); everything
else imports the names.

There is no zone tag: a zone is a property of the resources (``zones``), read from there.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

V = TypeVar("V")

PREFIX = "gb300-"
"""Every tag key gb300 invents starts so (``managed-by`` is the one other key it writes); gb300:cluster.tags may use
none of them."""

# On every resource (gb300:cluster.tags plus these two).
CLUSTER = "gb300-cluster"
"""The cluster's name, on every resource gb300 declares (a default of ``gb300:policy.requiredTags``)."""
MANAGED_BY = "managed-by"
"""``gb300`` on every resource gb300 declares."""
MANAGED_BY_VALUE = "gb300"

# On the nodes: what they are.
POOL = "gb300-pool"
"""The GPU or CPU pool of a scale set (and of a GPU pool's interconnect group and blocks)."""
RACK = "gb300-rack"
"""A rack scale set's rack number (1-based, as in its name ``...-r0001``)."""
ROLE = "gb300-role"
"""The role of a VM that is not in a GPU pool (:data:`ROLE_HEAD`), of a CPU pool's scale set
(:data:`ROLE_CPU_NODE`) or of the head's state disk."""
ROLE_GPU_NODE = "gpu-node"
"""The GPU nodes' role, every pool's (their scale sets carry no :data:`ROLE` tag; the plan summary names them so)."""
ROLE_HEAD = "head"
"""The head node's role: Slurm's controller and the login node."""
ROLE_LOGIN = "login"
"""The login nodes' role (gb300:login): CPU VMs where users sign in, apart from the controller."""
ROLE_CPU_NODE = "cpu-node"
"""The CPU pools' nodes' role (gb300:cpuPools): Slurm dynamic nodes without GPUs or InfiniBand; like the GPU nodes,
their scale sets carry :data:`POOL` and, unlike a GPU pool's, :data:`ROLE`."""
POOL_ROLES = (ROLE_GPU_NODE, ROLE_CPU_NODE)
"""The roles whose nodes belong to a pool (a scale set of their own, a payload per pool)."""
ROLES = (ROLE_GPU_NODE, ROLE_HEAD, ROLE_LOGIN, ROLE_CPU_NODE)
"""The node roles, GPU nodes first: the one home of their names. Each has its custom data and its cloud-config
fragment, ``cloud-init/roles/<role>.yaml`` (tests/test_role_names.py holds the fragments, the node registry and
every module to these names)."""
ROLE_HEAD_STATE = "head-state"
"""The head's state disk (no node role)."""
CUSTOM_DATA_HASH = "gb300-custom-data-sha256"
"""The sha256 of the custom data a node boots with; a changed hash is a node to reimage or replace."""

# On the nodes: values that exist only after deployment, read by the node scripts from IMDS. Custom data never
# carries them, so it holds no secret and does not change when a generated name does.
KEYVAULT = "gb300-keyvault"
NODE_CLIENT_ID = "gb300-node-client-id"
LUSTRE_MGS = "gb300-lustre-mgs"
BLOB_ACCOUNT = "gb300-blob-account"
PROM_WRITE = "gb300-prom-write"

NODE_READS: Mapping[str, str] = {
    KEYVAULT: "the Key Vault holding the munge key (gb300-munge-key)",
    LUSTRE_MGS: "the Lustre filesystem's MGS address (72-lustre)",
    BLOB_ACCOUNT: "the storage account's name (74-blobfuse2)",
    NODE_CLIENT_ID: "the node identity's client id, a GUID (fetch-payload, 74-blobfuse2, 87-prometheus-agent)",
    PROM_WRITE: "the Prometheus remote-write URL of the collection rule (87-prometheus-agent)",
}
"""Tags the node scripts read from IMDS (tag -> what it holds and which step reads it)."""
HEAL_CLIENT_ID = "gb300-heal-client-id"
"""On the head only, with gb300:remediation.enabled: the remediation identity's client id, a GUID, which
``gb300-heal`` signs in with (docs/self-healing.md#permissions)."""

# On the Lustre filesystem: gb300:storage.checkpoint, where rule lustre-checkpoint-throughput reads it.
CHECKPOINT_PARAMETERS = "gb300-checkpoint-parameters"
CHECKPOINT_MINUTES = "gb300-checkpoint-minutes"
CHECKPOINT_BYTES_PER_PARAMETER = "gb300-checkpoint-bytes-per-parameter"
CHECKPOINT_INTERVAL_MINUTES = "gb300-checkpoint-interval-minutes"

# On storage accounts: what the account holds, read by rule storage-no-public-access. An account without it is
# treated as holding data.
STORAGE_PURPOSE = "gb300-storage-purpose"
STORAGE_PURPOSE_DATA = "data"
"""The cluster's data account: datasets and checkpoints (never reachable from the Internet)."""
STORAGE_PURPOSE_NODE_PAYLOAD = "node-payload"
"""An account holding only signed node payloads, no data and no secrets (docs/node-payload.md)."""

ALL: frozenset[str] = frozenset(
    {
        CLUSTER,
        MANAGED_BY,
        POOL,
        RACK,
        ROLE,
        CUSTOM_DATA_HASH,
        *NODE_READS,
        HEAL_CLIENT_ID,
        CHECKPOINT_PARAMETERS,
        CHECKPOINT_MINUTES,
        CHECKPOINT_BYTES_PER_PARAMETER,
        STORAGE_PURPOSE,
        CHECKPOINT_INTERVAL_MINUTES,
    }
)
"""Every tag key gb300 writes."""

TOOLKIT: frozenset[str] = frozenset({CLUSTER, MANAGED_BY})
"""The tags gb300 sets itself on every resource; a missing one means a resource was declared outside the
components."""


def cluster(user_tags: Mapping[str, str], cluster_name: str) -> dict[str, str]:
    """Tags on every taggable resource: the user's (``gb300:cluster.tags``) plus the toolkit's own."""
    return {**user_tags, CLUSTER: cluster_name, MANAGED_BY: MANAGED_BY_VALUE}


def checkpoint(
    parameters: str, minutes: str, bytes_per_parameter: str | None = None, interval_minutes: str | None = None
) -> dict[str, str]:
    """The tags that carry ``gb300:storage.checkpoint`` onto the Lustre filesystem (values already formatted)."""
    out = {CHECKPOINT_PARAMETERS: parameters, CHECKPOINT_MINUTES: minutes}
    if bytes_per_parameter is not None:
        out[CHECKPOINT_BYTES_PER_PARAMETER] = bytes_per_parameter
    if interval_minutes is not None:
        out[CHECKPOINT_INTERVAL_MINUTES] = interval_minutes
    return out


def node(
    base: Mapping[str, V],
    *,
    keyvault: V,
    node_client_id: V,
    lustre_mgs: V | None = None,
    blob_account: V | None = None,
    prom_write: V | None = None,
) -> dict[str, V]:
    """Tags on every VM and scale set: the cluster's, plus the deploy-time values the node scripts read (IMDS)."""
    out = {**base, KEYVAULT: keyvault, NODE_CLIENT_ID: node_client_id}
    optional = (
        (LUSTRE_MGS, lustre_mgs),
        (BLOB_ACCOUNT, blob_account),
        (PROM_WRITE, prom_write),
    )
    for key, value in optional:
        if value is not None:
            out[key] = value
    return out


def gpu_pool(node_tags: Mapping[str, Any], pool: str, custom_data_sha256: str) -> dict[str, Any]:
    """Tags on a GPU pool's resources: the node tags, the pool and the hash of the custom data its nodes boot."""
    return {**node_tags, POOL: pool, CUSTOM_DATA_HASH: custom_data_sha256}


def cpu_pool(node_tags: Mapping[str, Any], pool: str, custom_data_sha256: str) -> dict[str, Any]:
    """Tags on a CPU pool's scale set: a GPU pool's, and the role (the plan tells its custom data from a GPU node's)."""
    return {**gpu_pool(node_tags, pool, custom_data_sha256), ROLE: ROLE_CPU_NODE}


def rack(pool_tags: Mapping[str, Any], index: int) -> dict[str, Any]:
    """Tags on rack ``index``'s scale set and interconnect block."""
    return {**pool_tags, RACK: str(index)}


def head(node_tags: Mapping[str, Any], custom_data_sha256: str) -> dict[str, Any]:
    """Tags on the head node's VM, NIC and public IP."""
    return {**node_tags, ROLE: ROLE_HEAD, CUSTOM_DATA_HASH: custom_data_sha256}


def login(node_tags: Mapping[str, Any], custom_data_sha256: str) -> dict[str, Any]:
    """Tags on a login node's VM and NIC."""
    return {**node_tags, ROLE: ROLE_LOGIN, CUSTOM_DATA_HASH: custom_data_sha256}


def head_state(node_tags: Mapping[str, Any]) -> dict[str, Any]:
    """Tags on the head node's state disk."""
    return {**node_tags, ROLE: ROLE_HEAD_STATE}


def storage_account(base: Mapping[str, str], purpose: str) -> dict[str, str]:
    """Tags on a storage account: the cluster's plus what it holds (:data:`STORAGE_PURPOSE_DATA`, ...)."""
    return {**base, STORAGE_PURPOSE: purpose}


def _get(tags: Any, key: str) -> str | None:
    value = tags.get(key) if isinstance(tags, Mapping) else None
    return value if isinstance(value, str) and value else None


def pool_of(tags: Any) -> str | None:
    """The GPU pool a resource's tags name, or None (odd input never raises)."""
    return _get(tags, POOL)


def rack_of(tags: Any) -> str | None:
    """The rack number a resource's tags name, as written (``"7"``), or None."""
    return _get(tags, RACK)


def role_of(tags: Any) -> str | None:
    """The role a resource's tags name (:data:`ROLE_HEAD`, :data:`ROLE_HEAD_STATE`), or None."""
    return _get(tags, ROLE)


def custom_data_hash(tags: Any) -> str | None:
    """The custom data hash a node's tags carry, or None."""
    return _get(tags, CUSTOM_DATA_HASH)


def storage_purpose_of(tags: Any) -> str | None:
    """What a storage account's tags say it holds, or None (then it is treated as holding data)."""
    return _get(tags, STORAGE_PURPOSE)
