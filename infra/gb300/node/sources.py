"""The named functions the node registry's rows refer to: content (``kind: content``), name lists (``each``) and
conditions (``when``), each a plain function of the :class:`~gb300.node.target.Target`.

A row names them by string (:class:`gb300.node.row.Row` holds no code); each table is checked against the rows by
tests/node/test_registry.py. Content functions return a file's text only: none of them names a node path.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from gb300 import tags as gb300_tags
from gb300.errors import BootstrapError
from gb300.heal import deploy as heal_deploy
from gb300.node import files as node_files
from gb300.node import hooks as node_hooks
from gb300.node import imds_guard, payload
from gb300.node import steps as node_steps
from gb300.node.target import Target
from gb300.paths import CLOUD_INIT_DIR
from gb300.slurm import config as slurm_config
from gb300.slurm import files as slurm_files

Content = Callable[[Target, str], str]
Names = Callable[[Target], Sequence[str]]
Condition = Callable[[Target], bool]

SLURM_HEAD_TOOLS = ("gb300-slurm-install", "gb300-topology-refresh")
"""The head's tools (``gb300-slurm-install`` is no step: the steps call it to install Slurm at the pinned version)."""
SLURM_LOGIN_TOOLS = ("gb300-slurm-install",)
"""The login nodes' tools: Slurm's commands and sackd come from ``gb300-slurm-install``, as on the other roles."""
SLURM_GPU_TOOLS = (
    "gb300-slurm-install",
    "gb300-health-check",
    "gb300-imex-prolog",
    "gb300-imex-epilog",
    "gb300-enroot-dirs",  # called by the IMEX prolog and epilog and by gb300-pyxis-setup
    "gb300-dcgm-job-map",  # called by the IMEX prolog and epilog: the DCGM exporter's job label per GPU
    "gb300-pam-adopt",  # called by gb300-slurmd-setup: ssh only for users with a job here
    "gb300-fabric-publish",
    "gb300-scheduled-events",  # drains before Azure maintenance (IMDS Scheduled Events), resumes after
)
SLURM_CPU_TOOLS = (
    "gb300-slurm-install",
    "gb300-health-check",  # slurm.conf's HealthCheckProgram on every node; a CPU node's health.env skips GPU checks
    "gb300-imex-prolog",  # slurm.conf's Prolog and Epilog on every node; without IMEX (health.env) they run hooks only
    "gb300-imex-epilog",
    "gb300-enroot-dirs",
    "gb300-pam-adopt",
    "gb300-scheduled-events",
)
"""A CPU pool node's tools: a GPU node's, without the fabric publisher and the DCGM job map (no GPU)."""
SLURM_HEAD_UNITS = ("gb300-topology-refresh.service", "gb300-topology-refresh.timer")
SLURM_GPU_UNITS = ("gb300-health-boot.service", "gb300-fabric-publish.service", "gb300-scheduled-events.service")
SLURM_CPU_UNITS = ("gb300-health-boot.service", "gb300-scheduled-events.service")
TOPOLOGY_GENERATOR = ("__init__.py", "hostlist.py", "topology.py", "stale.py")
"""gb300's own modules the head's ``gb300-topology-refresh`` runs (under :data:`gb300.node.paths.SLURM_LIB`)."""


def _recipes(t: Target) -> list[str]:
    """The build recipes (cloud-init/build/) of the ``install: source`` components; each must exist."""
    names = []
    for comp in t.node.software.components:
        if comp.install != "source" or comp.recipe is None:
            continue
        source = CLOUD_INIT_DIR / "build" / f"{comp.recipe}.sh"
        if not source.is_file():
            msg = f"versions.yaml components.{comp.name}.recipe: no build recipe {source} (got {comp.recipe!r})"
            raise BootstrapError(msg)
        names.append(comp.recipe)
    return names


def _fixed(names: tuple[str, ...]) -> Names:
    return lambda _t: names


NAMES: dict[str, Names] = {
    "build-recipes": _recipes,
    "blob-containers": lambda t: node_files.mounted_containers(t.stack),
    "slurm-configs": lambda t: list(t.slurm.configs),
    "slurm-head-tools": _fixed(SLURM_HEAD_TOOLS),
    "slurm-gpu-tools": _fixed(SLURM_GPU_TOOLS),
    "slurm-login-tools": _fixed(SLURM_LOGIN_TOOLS),
    "slurm-head-units": _fixed(SLURM_HEAD_UNITS),
    "slurm-gpu-units": _fixed(SLURM_GPU_UNITS),
    "slurm-cpu-tools": _fixed(SLURM_CPU_TOOLS),
    "slurm-cpu-units": _fixed(SLURM_CPU_UNITS),
    "topology-generator": _fixed(TOPOLOGY_GENERATOR),
    "heal-modules": lambda _t: heal_deploy.head_modules(),
}


def _on(condition: Callable[..., bool]) -> Condition:
    """A condition of :mod:`gb300.node.steps` on the stack, for a row."""
    return lambda t: condition(t.stack)


CONDITIONS: dict[str, Condition] = {
    "stack": lambda t: t.has_stack,
    "storage": _on(node_steps.on_storage),
    "blob-mounts": _on(node_steps.on_blob_mounts),
    "imds-tags": _on(node_steps.on_imds_tags),
    "prometheus": _on(node_steps.on_prometheus),
    "remediation": _on(node_steps.on_remediation),
    "slurmdbd": lambda t: bool(t.slurm.accounting),
    "accounts": lambda t: slurm_config.ACCOUNTS_FILE in t.slurm.accounting,
    "login-pool": lambda t: t.stack.login is not None,
    "no-admin-key": lambda t: t.stack.login is not None and not t.stack.login.admin_key,
}


CONTENT: dict[str, Content] = {
    "imds-guard": lambda t, _n: imds_guard.script(t.node.stack),
    "imds-guard-unit": lambda t, _n: imds_guard.unit(t.node.stack),
    "imds-guard-recheck": lambda t, _n: imds_guard.recheck_unit(t.node.stack),
    "imds-guard-timer": lambda t, _n: imds_guard.timer(t.node.stack),
    "payload-update": lambda _t, _n: payload.update_script(),
    "storage-env": lambda t, _n: node_files.storage_env(t.stack),
    "blobfuse-config": lambda t, n: node_files.blobfuse_config(t.stack, n),
    "blobfuse-unit": lambda t, n: node_files.blobfuse_unit(t.stack, n),
    "blobfuse-env": lambda t, n: node_files.blobfuse_env(t.stack, n),
    "monitoring-env": lambda t, _n: node_files.monitoring_env(t.stack),
    "prometheus-agent": lambda t, _n: node_files.prometheus_agent(
        t.stack,
        t.node.pool_name,
        t.node.role == gb300_tags.ROLE_HEAD,  # the head also scrapes slurmctld
    ),
    "slurm-config": lambda t, n: t.slurm.configs[n],
    "slurmdbd-conf": lambda t, _n: t.slurm.accounting["slurmdbd.conf"],
    "mariadb-slurmdbd": lambda t, _n: t.slurm.accounting["mariadb-slurmdbd.cnf"],
    "slurm-accounts": lambda t, _n: t.slurm.accounting[slurm_config.ACCOUNTS_FILE],
    "slurm-env": lambda t, _n: slurm_files.render_slurm_env(t.slurm.inputs),
    "health-env": lambda t, _n: t.slurm.health_env,
    "heal-requirements": lambda _t, _n: heal_deploy.requirements_text(),
    "heal-config": lambda t, _n: heal_deploy.config_json(t.stack),
    "heal-timer": lambda _t, _n: heal_deploy.timer_text(),
    "login-limits": lambda t, _n: node_files.login_limits(t.stack),
    "break-glass": lambda t, _n: node_files.break_glass(t.stack),
    "hooks-table": lambda t, _n: node_hooks.table(t.stack, t.node.role, t.node.pool_name),
}
