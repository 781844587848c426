"""The Slurm boot inputs a node carries, and the checks of a role's Slurm files (contents only, no node paths).

The Slurm steps (``gb300-munge-key`` .. ``gb300-slurmd-setup``) and the files they use (the tools Slurm, systemd
and the steps call, their units, Slurm's configuration, the topology generator and these boot inputs) are declared
in the node registry (:mod:`gb300.node.registry`), each file a row naming its node path. Inputs the steps read at
boot come from ``slurm.env`` (:func:`render_slurm_env`) and ``health.env``
(:func:`gb300.slurm.health.render_health_env`). No secret is in either: the munge key is fetched from Key Vault
by ``gb300-munge-key`` with the VM's managed identity, and the accounting database (``gb300-slurmdbd-setup``,
when ``GB300_SLURMDBD=1``) authenticates slurmdbd by its unix socket peer.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from gb300.facts.software import AptRepo
from gb300.io import quoting
from gb300.slurm.config import SlurmCluster, SlurmConfigError, SlurmPool

SLURM_UID = 11100
"""uid and gid of the slurm user on every node, as Azure CycleCloud creates it (Azure/cyclecloud-slurm
azure-slurm-install/install.py, slurm.user.uid default 11100): Microsoft's slurm-smd packages create no user,
and slurmctld and slurmd must agree on SlurmUser's uid."""

_VAULT = re.compile(r"^[A-Za-z][A-Za-z0-9-]{1,22}[A-Za-z0-9]\Z")
_POOL = re.compile(r"^[a-z][a-z0-9_]{0,39}\Z")
_NODE_SHAPE = ("pool", "cpus", "sockets", "cores_per_socket", "threads_per_core", "real_memory_mib", "gpus")


@dataclass(frozen=True)
class SlurmBootInputs:
    """What the Slurm steps need to know at boot; rendered to ``/etc/gb300/slurm.env``.

    ``identity_client_id`` is the client id of the user-assigned identity that may read the munge secret
    (role "Key Vault Secrets User"); leave it None to use the VM's system-assigned identity.
    ``slurmdbd`` turns on job accounting on the head node (``GB300_SLURMDBD=1``, ``gb300:head.slurmdbd``);
    it must agree with the cluster's ``accounting_host`` (:func:`check_head` checks).
    ``slurm_version``, ``slurm_apt_version``, ``slurm_packages`` and ``slurm_repo`` are versions.yaml's
    ``slurm`` component and its repository (Microsoft's); ``gb300-slurm-install`` installs and holds them.
    Other versions are pins from the versions data file; None keeps the image's version.
    ``enroot_source`` and ``pyxis_source`` are (repository URL, commit id or None) pairs from versions.yaml and
    checksums.yaml, and ``*_packages`` what their builds need from Ubuntu's archive: the step builds only what
    is pinned. ``install_enroot`` is False on the head: srun there needs the
    pyxis plugin to accept ``--container-image``, but containers only ever start on GPU nodes.
    ``pool``, ``cpus``, ``sockets``, ``cores_per_socket``, ``threads_per_core``, ``real_memory_mib`` and ``gpus``
    are a GPU node's dynamic-node registration (``slurmd -Z --conf "CPUs=.. Sockets=.. CoresPerSocket=..
    ThreadsPerCore=.. RealMemory=.. Gres=gpu:N Feature=<pool>"``): :func:`check_gpu` needs them
    and :meth:`for_pool` copies them from the pool's :class:`~gb300.slurm.config.SlurmPool`; the head leaves
    them None.
    """

    head_hostname: str
    keyvault_name: str | None = None  # None: the node reads its Key Vault tag (gb300.tags.KEYVAULT; made at deploy)
    munge_secret_name: str = "munge-key"  # noqa: S105 - the secret's name, not its value
    secret_wait_seconds: int = 0  # how long to retry 401/403/404 from Key Vault (0: one attempt)
    secret_retry_delay_seconds: int = 15
    identity_client_id: str | None = None
    block_size: int = 18
    slurm_version: str | None = None
    slurm_apt_version: str | None = None
    slurm_packages: tuple[str, ...] = ()
    slurm_repo: AptRepo | None = None
    enroot_version: str | None = None
    enroot_source: tuple[str, str | None] | None = None
    enroot_packages: tuple[str, ...] = ()
    install_enroot: bool = True
    pyxis_version: str | None = None
    pyxis_source: tuple[str, str | None] | None = None
    pyxis_packages: tuple[str, ...] = ()
    slurmdbd: bool = False
    pool: str | None = None
    cpus: int | None = None
    sockets: int | None = None
    cores_per_socket: int | None = None
    threads_per_core: int | None = None
    real_memory_mib: int | None = None
    gpus: int | None = None
    features: tuple[str, ...] = ()  # a CPU node's Feature= list (its pool's name first); a GPU node's is its pool

    def for_pool(self, pool: SlurmPool) -> SlurmBootInputs:
        """These inputs for a node of ``pool``: its name (a CPU pool's features) as the node features, and its node
        shape (no GPUs for a CPU pool)."""
        return dataclasses.replace(
            self,
            pool=pool.name,
            cpus=pool.cpus,
            sockets=pool.sockets,
            cores_per_socket=pool.cores_per_socket,
            threads_per_core=pool.threads_per_core,
            real_memory_mib=pool.memory_mib,
            gpus=pool.gpus_per_node,
            features=pool.features,
        )


def render_slurm_env(inputs: SlurmBootInputs) -> str:
    """``/etc/gb300/slurm.env``: KEY='value' lines the Slurm steps source; raises SlurmConfigError when invalid."""
    if inputs.keyvault_name is not None and not _VAULT.match(inputs.keyvault_name):
        raise SlurmConfigError(
            f"'keyvault_name' must be a Key Vault name, 3-24 characters (got {inputs.keyvault_name!r})"
        )
    if inputs.block_size < 1:
        raise SlurmConfigError(f"'block_size' must be at least 1 (got {inputs.block_size!r})")
    if inputs.pool is not None and not _POOL.match(inputs.pool):
        raise SlurmConfigError(f"'pool' must be lowercase letters, digits or '_' (got {inputs.pool!r})")
    for name in _NODE_SHAPE[1:]:
        value = getattr(inputs, name)
        least = 0 if name == "gpus" else 1  # a CPU node has none
        if value is not None and value < least:
            raise SlurmConfigError(f"'{name}' must be at least {least} (got {value!r})")
    enroot = inputs.enroot_source if inputs.install_enroot else None
    values = {
        "GB300_HEAD_HOSTNAME": inputs.head_hostname,
        "GB300_KEYVAULT_NAME": inputs.keyvault_name,
        "GB300_MUNGE_SECRET_NAME": inputs.munge_secret_name,
        "GB300_VAULT_WAIT_SECONDS": str(inputs.secret_wait_seconds),
        "GB300_VAULT_RETRY_DELAY_SECONDS": str(inputs.secret_retry_delay_seconds),
        "GB300_IDENTITY_CLIENT_ID": inputs.identity_client_id,
        "GB300_BLOCK_SIZE": str(inputs.block_size),
        # Only when on: GPU nodes and heads without accounting keep the same slurm.env (and custom data hash).
        "GB300_SLURMDBD": "1" if inputs.slurmdbd else None,
        "GB300_SLURM_VERSION": inputs.slurm_version,
        "GB300_SLURM_APT_VERSION": inputs.slurm_apt_version,
        "GB300_SLURM_PACKAGES": " ".join(inputs.slurm_packages) or None,
        "GB300_SLURM_UID": str(SLURM_UID),
        **_repo_env(inputs.slurm_repo),
        "GB300_INSTALL_ENROOT": "1" if inputs.install_enroot else "0",
        "GB300_ENROOT_VERSION": inputs.enroot_version if inputs.install_enroot else None,
        # A commit of "-" where checksums.yaml pins none for the tag (the step builds nothing then).
        "GB300_ENROOT_GIT": enroot[0] if enroot else None,
        "GB300_ENROOT_COMMIT": (enroot[1] or "-") if enroot else None,
        "GB300_ENROOT_PACKAGES": " ".join(inputs.enroot_packages) or None if enroot else None,
        "GB300_PYXIS_VERSION": inputs.pyxis_version,
        "GB300_PYXIS_GIT": inputs.pyxis_source[0] if inputs.pyxis_source else None,
        "GB300_PYXIS_COMMIT": (inputs.pyxis_source[1] or "-") if inputs.pyxis_source else None,
        "GB300_PYXIS_PACKAGES": " ".join(inputs.pyxis_packages) or None,
        "GB300_SLURM_POOL": inputs.pool,
        "GB300_SLURM_CPUS": _text(inputs.cpus),
        "GB300_SLURM_SOCKETS": _text(inputs.sockets),
        "GB300_SLURM_CORES_PER_SOCKET": _text(inputs.cores_per_socket),
        "GB300_SLURM_THREADS_PER_CORE": _text(inputs.threads_per_core),
        "GB300_SLURM_REAL_MEMORY_MIB": _text(inputs.real_memory_mib),
        "GB300_SLURM_GPUS": _text(inputs.gpus),
        "GB300_SLURM_FEATURES": ",".join(inputs.features) or None,
    }
    given = {key: value for key, value in values.items() if value is not None}
    return "# gb300 Slurm boot inputs (no secrets)\n" + quoting.env_lines(given, "slurm.env")


def _repo_env(repo: AptRepo | None) -> dict[str, str | None]:
    """The variables the bootstrap library's ensure_repo reads for ``repo`` (as versions.env has them)."""
    if repo is None:
        return {}
    prefix = repo.env_prefix
    return {
        f"{prefix}_LINE": repo.apt_line,
        f"{prefix}_URL": repo.url,
        f"{prefix}_SUITE": repo.suite,
        f"{prefix}_KEY_URL": repo.key_url,
        f"{prefix}_KEY_FINGERPRINTS": " ".join(repo.key_fingerprints),
    }


def _text(value: int | None) -> str | None:
    return None if value is None else str(value)


def check_head(cluster: SlurmCluster, inputs: SlurmBootInputs) -> None:
    """A head's Slurm files must agree about accounting: raises SlurmConfigError when ``inputs.slurmdbd`` and the
    cluster's ``accounting_host`` disagree."""
    if inputs.slurmdbd != (cluster.accounting_host is not None):
        raise SlurmConfigError(
            f"'slurmdbd' must be {cluster.accounting_host is not None} when the cluster's accounting_host is "
            f"{cluster.accounting_host!r} (got {inputs.slurmdbd!r}). Set both from gb300:head.slurmdbd."
        )


def check_gpu(inputs: SlurmBootInputs) -> None:
    """A pool node's (GPU or CPU) inputs must carry its pool and shape (``inputs.for_pool(pool)``): slurmd registers
    as a dynamic node with them. Raises SlurmConfigError naming the first missing field."""
    missing = [name for name in _NODE_SHAPE if getattr(inputs, name) is None]
    if missing:
        raise SlurmConfigError(
            f"'{missing[0]}' must be set for a pool node (got None). Pass inputs.for_pool(<the node's SlurmPool>)."
        )
