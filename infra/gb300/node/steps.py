"""The one registry of what a node runs: every step, per role, in order (its files: :mod:`gb300.node.registry`).

A node's bundle (:mod:`gb300.node.bundle`) is :data:`STEPS` selected for its role and stack (:func:`steps_for`)
and the registry's rows. Each step is declared once, here: its name, its script (a path under ``cloud-init/``),
the roles that run it, the steps it must come after, and a condition on the typed stack config. The list order
is the run order; :func:`steps_for` refuses an order that breaks an ``after`` or does not start with
``00-imds-guard`` and end with ``99-ready``. Every step script lands in one node directory
(:data:`gb300.node.paths.STEP_DIR`, ``<name>.sh``) and runs from ``runcmd`` through ``run-step``.
docs/node-steps.md says how to add a step.

A context built without a stack (the bootstrap's own tests) selects the ``bootstrap`` part only: the other parts
derive their files from the stack config.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from gb300 import paths as gb300_paths
from gb300 import tags as gb300_tags
from gb300.config import StackConfig
from gb300.errors import BootstrapError
from gb300.node import paths
from gb300.node.boot_context import BootstrapContext

Part = Literal["bootstrap", "storage", "monitoring", "slurm"]
Condition = Callable[[StackConfig], bool]

CLOUD_INIT_DIR = gb300_paths.CLOUD_INIT_DIR
"""The tree the step scripts are read from (:mod:`gb300.node.registry` reads it here)."""
STEP_DIR = paths.STEP_DIR
RUN_STEP = paths.RUN_STEP
READY_STEP = "99-ready"
GUARD_STEP = "00-imds-guard"
GPU = (gb300_tags.ROLE_GPU_NODE,)
POOLS = gb300_tags.POOL_ROLES
"""The GPU and CPU pools' nodes: Slurm dynamic nodes."""
HEAD = (gb300_tags.ROLE_HEAD,)
LOGIN = (gb300_tags.ROLE_LOGIN,)
BOTH = gb300_tags.ROLES
"""Every role: the GPU nodes, the head, the login nodes and the CPU nodes (the name is older than the last two)."""
MACHINES = (gb300_tags.ROLE_GPU_NODE, gb300_tags.ROLE_HEAD)
"""The GPU nodes and the head, not the login nodes."""
_NAME = re.compile(r"^([0-9]{2}|gb300)-[a-z0-9][a-z0-9-]*\Z")


@dataclass(frozen=True)
class Step:
    """One ordered node step: a script under cloud-init/, run by ``run-step <name>`` on the roles listed."""

    name: str
    script: str
    roles: tuple[str, ...]
    part: Part
    description: str
    after: tuple[str, ...] = ()
    when: Condition | None = None

    @property
    def node_path(self) -> str:
        """Where the script lands on the node (run-step runs it from there)."""
        return f"{STEP_DIR}/{self.name}.sh"


# Conditions on the typed stack config, shared by the steps and the files (gb300.node.registry).


def on_lustre(cfg: StackConfig) -> bool:
    return cfg.storage.lustre is not None


def on_blob_mounts(cfg: StackConfig) -> bool:
    return cfg.storage.blob is not None and any(c.mount_path for c in cfg.storage.blob.containers)


def on_prometheus(cfg: StackConfig) -> bool:
    return cfg.monitoring.prometheus.enabled


def on_accounts(cfg: StackConfig) -> bool:
    return cfg.slurm.declares_accounts


def on_remediation(cfg: StackConfig) -> bool:
    return cfg.remediation.enabled


def on_storage(cfg: StackConfig) -> bool:
    return on_lustre(cfg) or on_blob_mounts(cfg)


def on_imds_tags(cfg: StackConfig) -> bool:
    return on_storage(cfg) or on_prometheus(cfg)


def on_hooks_before_slurm(cfg: StackConfig) -> bool:
    return any(h.point == "beforeSlurm" for h in cfg.hooks)


def on_hooks_after_gate(cfg: StackConfig) -> bool:
    return any(h.point == "afterHealthGate" for h in cfg.hooks)


# The steps, in run order. Add a step here (one entry) and its script under cloud-init/: docs/node-steps.md.
STEPS: tuple[Step, ...] = (
    # First on every role: nothing else runs while a local user other than root can reach IMDS (docs/security.md).
    Step(GUARD_STEP, "scripts/00-imds-guard.sh", BOTH, "bootstrap",
         "close the instance metadata service to local users other than root and the allowed service users, "
         "now and at every boot"),
    Step("00-preflight", "scripts/00-preflight.sh", BOTH, "bootstrap",
         "check the environment files are in place and record the image's facts"),
    Step("10-tuning", "scripts/10-tuning.sh", BOTH, "bootstrap",
         "apply the sysctl settings Azure's HPC image uses (limits are placed as a file)", ("00-preflight",)),
    Step("15-kernel", "scripts/15-kernel.sh", GPU, "bootstrap",
         "boot the Grace kernel (linux-azure-nvidia) with Azure's command line; on plain Ubuntu install it and "
         "reboot once, gb300-resume.service resuming the bootstrap", ("10-tuning",)),
    Step("20-nvidia-driver", "scripts/20-nvidia-driver.sh", GPU, "bootstrap",
         "verify or install the NVIDIA open driver, nvidia_peermem and the persistence daemon", ("15-kernel",)),
    Step("25-doca-ofed", "scripts/25-doca-ofed.sh", GPU, "bootstrap",
         "verify or install DOCA-OFED", ("00-preflight",)),
    Step("30-cuda", "scripts/30-cuda.sh", GPU, "bootstrap",
         "verify or install the CUDA toolkit and runtime", ("20-nvidia-driver",)),
    Step("35-nvidia-imex", "scripts/35-nvidia-imex.sh", GPU, "bootstrap",
         "verify or install nvidia-imex and IMEX channel0", ("20-nvidia-driver",)),
    Step("40-nccl", "scripts/40-nccl.sh", GPU, "bootstrap",
         "verify or install NCCL; build nccl-tests (and the optional sharp plugin) from pinned source when absent; "
         "check the NCCL environment", ("30-cuda", "25-doca-ofed")),
    Step("45-dcgm", "scripts/45-dcgm.sh", GPU, "bootstrap",
         "verify or install DCGM and run its host engine", ("20-nvidia-driver",)),
    Step("50-containers", "scripts/50-containers.sh", GPU, "bootstrap",
         "verify or install the container runtime, nvidia-container-toolkit (CDI), enroot and pyxis",
         ("20-nvidia-driver",)),
    Step("55-hold-packages", "scripts/55-hold-packages.sh", GPU, "bootstrap",
         "hold every pinned package with apt-mark so upgrades cannot drift the stack", ("50-containers",)),
    Step("60-infiniband", "scripts/60-infiniband.sh", GPU, "bootstrap",
         "enable IPoIB through waagent and verify 4 IB ports Active with a full-member pkey", ("25-doca-ofed",)),
    Step("70-nvme-raid", "scripts/70-nvme-raid.sh", GPU, "bootstrap",
         "RAID0 the data NVMe namespaces at /mnt/resource_nvme, persistent across reboot", ("00-preflight",)),
    Step("72-lustre", "scripts/72-lustre.sh", BOTH, "storage",
         "verify the Lustre client and mount Azure Managed Lustre over TCP LNet at gb300:storage.lustre.mountPath",
         ("10-tuning",), on_lustre),
    Step("73-shared-home", "scripts/73-shared-home.sh", BOTH, "storage",
         "bind-mount <Lustre>/home at /home (homes outlive every VM, the head included)", ("72-lustre",), on_lustre),
    # GPU nodes only: the block cache lives on the NVMe RAID, which the head node does not have.
    Step("74-blobfuse2", "scripts/74-blobfuse2.sh", GPU, "storage",
         "mount the configured Blob containers with BlobFuse2 in block-cache mode (cache on the NVMe RAID)",
         ("70-nvme-raid",), on_blob_mounts),
    Step("80-fabric", "scripts/80-fabric.sh", GPU, "bootstrap",
         "read the NVLink fabric identity (ClusterUUID, CliqueId) into /var/lib/gb300/fabric.json",
         ("20-nvidia-driver",)),
    Step("85-dcgm-exporter", "scripts/85-dcgm-exporter.sh", GPU, "monitoring",
         "run the DCGM exporter on 127.0.0.1:9400, attached to nvidia-dcgm's host engine when it runs",
         ("45-dcgm", "80-fabric"), on_prometheus),
    Step("86-node-exporter", "scripts/86-node-exporter.sh", BOTH, "monitoring",
         "run the node exporter (InfiniBand, textfile collectors) and the gb300 node-metrics timer",
         ("85-dcgm-exporter",), on_prometheus),
    Step("87-prometheus-agent", "scripts/87-prometheus-agent.sh", BOTH, "monitoring",
         "run Prometheus in agent mode, remote-writing to the Azure Monitor workspace with the node identity",
         ("86-node-exporter",), on_prometheus),
    Step("gb300-munge-key", "slurm/gb300-munge-key", BOTH, "slurm",
         "fetch the munge key from Key Vault with the VM's managed identity and start munge", ("00-preflight",)),
    Step("gb300-pyxis-setup", "slurm/gb300-pyxis-setup", BOTH, "slurm",
         "install pyxis (and enroot on GPU nodes, data on the NVMe scratch) at the pinned versions",
         ("gb300-munge-key", "70-nvme-raid", "50-containers")),
    # Only with gb300:hooks at that point (docs/customize.md#bootstrap-hooks): the user's scripts, before Slurm starts.
    Step("gb300-hooks-before-slurm", "slurm/gb300-hooks-before-slurm", MACHINES, "slurm",
         "run the gb300:hooks of point beforeSlurm (run-hooks: sha256 checked, timeout, drain or warn)",
         ("gb300-pyxis-setup",), on_hooks_before_slurm),
    Step("gb300-state-disk", "slurm/gb300-state-disk", HEAD, "slurm",
         "mount the head's state disk (LUN 0) and bind slurmctld's state and MariaDB's data from it (docs/day2.md)",
         ("00-preflight",)),
    Step("gb300-slurmdbd-setup", "slurm/gb300-slurmdbd-setup", HEAD, "slurm",
         "with gb300:head.slurmdbd, run MariaDB and slurmdbd on the head before slurmctld",
         ("gb300-munge-key", "gb300-state-disk")),
    Step("gb300-slurmctld-setup", "slurm/gb300-slurmctld-setup", HEAD, "slurm",
         "start slurmctld with gb300's configuration and the topology refresh timer",
         ("gb300-munge-key", "gb300-state-disk", "gb300-slurmdbd-setup")),
    Step("gb300-slurm-accounts", "slurm/gb300-slurm-accounts", HEAD, "slurm",
         "load gb300:slurm.accounts, .qos and .users into slurmdbd with sacctmgr: add what is missing, change what "
         "differs, remove users taken out of an account", ("gb300-slurmctld-setup",), on_accounts),
    # Only with gb300:remediation.enabled: the loop's venv and timer on the head (docs/self-healing.md#on-the-head).
    Step("gb300-heal-setup", "slurm/gb300-heal-setup", HEAD, "slurm",
         "build the remediation loop's venv from hashed pins and start its timer (gb300:remediation.enabled)",
         ("gb300-slurmctld-setup",), on_remediation),
    Step("gb300-slurmd-setup", "slurm/gb300-slurmd-setup", POOLS, "slurm",
         "register slurmd as a dynamic node of its pool after the boot health check, then publish the fabric "
         "identity in its Slurm record",
         ("gb300-munge-key", "gb300-pyxis-setup", "80-fabric", "72-lustre", "74-blobfuse2", "70-nvme-raid")),
    Step("gb300-heal-gate-setup", "slurm/gb300-heal-gate-setup", GPU, "slurm",
         "publish the health gate's verdict in the node's Slurm record for the head's loop, at boot and every "
         "minute (gb300:remediation.enabled)", ("gb300-slurmd-setup",), on_remediation),
    Step("gb300-login-setup", "slurm/gb300-login-setup", LOGIN, "slurm",
         "sackd fetches Slurm's configuration from the controller (configless): the Slurm commands work, no slurmd "
         "runs; per-user limits (user-.slice) and the break-glass key's sshd setting take effect",
         ("gb300-munge-key", "gb300-pyxis-setup", "73-shared-home")),
    Step("gb300-hooks-after-gate", "slurm/gb300-hooks-after-gate", MACHINES, "slurm",
         "run the gb300:hooks of point afterHealthGate once the node is in Slurm (a failure drains it or warns)",
         ("gb300-slurmd-setup", "gb300-slurmctld-setup"), on_hooks_after_gate),
    Step(READY_STEP, "scripts/99-ready.sh", BOTH, "bootstrap",
         "mark the node ready: write /var/lib/gb300/bootstrap.done last"),
)  # fmt: skip


def _wanted(roles: tuple[str, ...], part: Part, when: Condition | None, ctx: BootstrapContext) -> bool:
    if ctx.role not in roles:
        return False
    if ctx.stack is None:
        return part == "bootstrap"
    return when is None or when(ctx.stack)


def check_registry(steps: Sequence[Step] | None = None) -> None:
    """Refuse a registry whose names, scripts or ``after`` lists are wrong (raises BootstrapError)."""
    steps = STEPS if steps is None else steps
    seen: set[str] = set()
    names = {s.name for s in steps}
    for step in steps:
        if not _NAME.match(step.name) or step.name in seen:
            msg = f"node step {step.name!r}: names must be unique NN-name or gb300-name"
            raise BootstrapError(msg)
        if not (CLOUD_INIT_DIR / step.script).is_file():
            msg = f"node step {step.name!r}: no script cloud-init/{step.script}"
            raise BootstrapError(msg)
        for dep in step.after:
            if dep not in names:
                msg = f"node step {step.name!r}: runs after {dep!r}, which is no step"
                raise BootstrapError(msg)
            if dep not in seen:
                msg = f"node step {step.name!r} must come after {dep!r} in the registry (it is listed before it)"
                raise BootstrapError(msg)
        seen.add(step.name)


def steps_for(ctx: BootstrapContext, steps: Sequence[Step] | None = None) -> tuple[Step, ...]:
    """The steps ``ctx``'s role runs for its stack, in order; the order is checked, ``00-imds-guard`` first and
    ``99-ready`` last."""
    steps = STEPS if steps is None else steps
    check_registry(steps)
    chosen = tuple(s for s in steps if _wanted(s.roles, s.part, s.when, ctx))
    if not chosen or chosen[0].name != GUARD_STEP:
        msg = f"role {ctx.role!r}: the first step must be {GUARD_STEP} (got {[s.name for s in chosen][:1]})"
        raise BootstrapError(msg)
    if chosen[-1].name != READY_STEP:
        msg = f"role {ctx.role!r}: the last step must be {READY_STEP} (got {[s.name for s in chosen][-1:]})"
        raise BootstrapError(msg)
    return chosen


COMPACT_NOTE = "# Documented in the gb300 repository (cloud-init/); comments trimmed for custom data."
"""The line a trimmed script carries after its shebang, in place of its comments."""


def compact(content: str) -> str:
    """A shell script without its header comment block (the lines after the shebang up to the first other line).

    The header documents the script in the repository; custom data has a 64 KB limit and carries the code only,
    with one line saying where the documentation is. ``# shellcheck`` directives are kept.
    """
    lines = content.split("\n")
    if not lines[0].startswith("#!") or "bash" not in lines[0]:
        return content
    end = 1
    while end < len(lines) and lines[end].startswith("#") and not lines[end].startswith("# shellcheck"):
        end += 1
    if end == 1:
        return content
    return "\n".join([lines[0], COMPACT_NOTE, *lines[end:]])


_HEREDOC = re.compile(r"<<(-?)\s*['\"]?([A-Za-z_][A-Za-z0-9_]*)['\"]?")


def _heredoc_end(line: str) -> tuple[str, bool] | None:
    """The terminator of a here-document ``line`` opens (and whether tabs may indent it), or None."""
    match = _HEREDOC.search(line.replace("<<<", "   "))
    return (match.group(2), match.group(1) == "-") if match else None


def code_only(content: str) -> str:
    """A bash script as custom data ships it: the shebang, :data:`COMPACT_NOTE`, ``# shellcheck`` directives and
    every other line but comment lines and blank lines (here-documents are kept whole). Other content is unchanged.

    Custom data is copied into every rack's scale set model and Pulumi's state (issue 48): it carries code only;
    the commented source is in the repository. A comment-like line inside a multi-line quoted string would be
    dropped too: the scripts custom data carries have none (their behaviour tests run the shipped copy).
    """
    lines = content.split("\n")
    if not lines[0].startswith("#!") or "bash" not in lines[0]:
        return content
    kept = [lines[0], COMPACT_NOTE]
    heredoc: tuple[str, bool] | None = None
    for line in lines[1:]:
        if heredoc is not None:
            kept.append(line)
            if (line.lstrip("\t") if heredoc[1] else line) == heredoc[0]:
                heredoc = None
            continue
        bare = line.strip()
        if not bare or line == COMPACT_NOTE or (bare.startswith("#") and not bare.startswith("# shellcheck")):
            continue
        kept.append(line)
        heredoc = _heredoc_end(line)
    return "\n".join(kept) + "\n"
