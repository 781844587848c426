"""Per-SKU health thresholds (``data/health.yaml``) rendered for the nodes as ``/etc/gb300/health.env``.

The node health gate (``cloud-init/slurm/gb300-health-check``) and the rack NCCL evaluator
(``examples/nccl-eval.py``) read that file; they never hard-code a number. Hardware counts come from the
SKU catalog (``skus.yaml``); this module adds what health needs on top.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Any, Literal

from gb300.errors import DataError
from gb300.facts import catalog
from gb300.facts.loader import data
from gb300.io import quoting
from gb300.slurm.config import SlurmConfigError

ImexMode = Literal["per-job", "static", "none"]
"""How the IMEX prolog runs: a daemon per job, one for the node's life, or none at all (a CPU node)."""


@dataclass(frozen=True)
class Threshold:
    """A measured value's expectation: below ``warn`` is logged, below ``report_to_azure`` is reported."""

    expected: float
    warn: float
    report_to_azure: float
    status: str
    source: str
    message_bytes: int | None = None


CheckClass = Literal["hard", "soft"]
RunMode = Literal["boot", "periodic", "epilog"]
RUN_MODES: tuple[RunMode, ...] = ("boot", "periodic", "epilog")


@dataclass(frozen=True)
class CheckSpec:
    """One check of the gate: ``hard`` drains on one failure, ``soft`` after consecutive ones; where it runs."""

    name: str
    check_class: CheckClass
    runs: tuple[RunMode, ...]


@dataclass(frozen=True)
class FieldWatch:
    """A DCGM field compared the way Azure's health agent compares it (``gt``, ``ne``, ``in``, ``bitmask``)."""

    check: str
    field: str
    field_id: int
    comparison: Literal["gt", "ne", "in", "bitmask"]
    threshold: tuple[str, ...]

    def encoded(self) -> str:
        """``check:fieldId:eval:threshold[,threshold...]`` as the gate reads it from health.env."""
        return f"{self.check}:{self.field_id}:{self.comparison}:{','.join(self.threshold)}"


@dataclass(frozen=True)
class HealthSpec:
    """Everything the health gate compares against for one VM size."""

    vm_size: str
    gpus: int
    ib_ports: int
    ib_rate_gbps: int | None
    ib_rate_status: str
    ib_rate_accepted_gbps: tuple[int, ...]
    dcgm_level_boot: int
    dcgm_level_periodic: int
    dcgm_level_epilog: int
    xid_warning: tuple[int, ...]
    checks: tuple[CheckSpec, ...]
    xid_teardown: tuple[int, ...]
    xid_teardown_window_s: int
    fabric_health: tuple[tuple[str, str], ...]
    field_watches: tuple[FieldWatch, ...]
    ib_link_downed_count: int
    ib_link_downed_window_s: int
    gemm_binary: str
    gemm_seconds: int
    command_timeout_s: dict[str, int]
    dcgm_diag_timeout_s: dict[str, int]
    nccl_rack: Threshold | None = None
    nccl_cross_rack: Threshold | None = None
    gemm_tflops_per_gpu: Threshold | None = None


@functools.cache
def _data() -> dict[str, Any]:
    return data("health.yaml")


def never_drain_xids(warning: list[Any] | None = None) -> tuple[int, ...]:
    """The XIDs the gate logs and never drains for: Azure's health agent's warnings (``data/health.yaml``
    ``xidWarning``) and every XID of NVIDIA's catalog buckets that need no action on the machine
    (``data/remediation.yaml`` ``evidence.xid.neverDrain``), which the head's loop never repairs either."""
    if warning is None:
        warning = data("health.yaml")["defaults"]["xidWarning"]["value"]
    xid = data("remediation.yaml")["evidence"]["xid"]
    buckets = xid["neverDrain"]["value"]
    codes = {int(x) for x in warning} | {int(c) for bucket in buckets for c in xid["catalog"][bucket]}
    return tuple(sorted(codes))


def _teardown() -> dict[str, Any]:
    """The teardown rule's one home: ``data/remediation.yaml`` ``evidence.xid.teardownBenign`` (the head's loop
    reads the same entry through :mod:`gb300.heal.policy`)."""
    rule: dict[str, Any] = data("remediation.yaml")["evidence"]["xid"]["teardownBenign"]
    return rule


def _threshold(raw: dict[str, Any] | None) -> Threshold | None:
    if raw is None:
        return None
    return Threshold(
        expected=float(raw["expected"]),
        warn=float(raw["warn"]),
        report_to_azure=float(raw["reportToAzure"]),
        status=str(raw.get("status", "verified")),
        source=str(raw.get("source", "")),
        message_bytes=int(raw["messageBytes"]) if "messageBytes" in raw else None,
    )


def _checks(raw: dict[str, Any]) -> tuple[CheckSpec, ...]:
    checks = []
    for name, entry in raw.items():
        check_class = entry["class"]
        if check_class not in ("hard", "soft"):
            raise DataError(f"health.yaml defaults.checks.{name}.class must be hard or soft (got {check_class!r})")
        runs = tuple(entry["runs"])
        unknown = [mode for mode in runs if mode not in RUN_MODES]
        if unknown:
            raise DataError(f"health.yaml defaults.checks.{name}.runs: unknown run modes {unknown!r}")
        checks.append(CheckSpec(name, check_class, runs))
    return tuple(checks)


def _watches(raw: list[dict[str, Any]], checks: tuple[CheckSpec, ...]) -> tuple[FieldWatch, ...]:
    known = {c.name for c in checks}
    watches = []
    for entry in raw:
        if entry["check"] not in known:
            raise DataError(f"health.yaml field watch {entry['check']!r} has no entry in defaults.checks")
        threshold = entry["threshold"]
        values = threshold if isinstance(threshold, list) else [threshold]
        watches.append(
            FieldWatch(
                check=str(entry["check"]),
                field=str(entry["field"]),
                field_id=int(entry["fieldId"]),
                comparison=entry["eval"],
                threshold=tuple(str(v) for v in values),
            )
        )
    return tuple(watches)


def health_spec(
    vm_size: str, *, gpus: int, ib_ports: int, ib_rate_gbps: int | None, ib_rate_status: str = "verified"
) -> HealthSpec:
    """The health expectations of ``vm_size``, given the catalog's hardware facts for it.

    The lead's program passes ``catalog.sku(vm_size)``'s ``gpus``, ``ib_ports`` and ``ib_rate_gbps``
    (value and status). A size without an entry in health.yaml gets the default checks and no
    bandwidth thresholds.
    """
    data = _data()
    defaults = data["defaults"]
    entry: dict[str, Any] = data.get("skus", {}).get(vm_size, {})
    if "sameAs" in entry:
        entry = data["skus"][entry["sameAs"]]
    accepted = entry.get("ibRateAcceptedGbps", {}).get("value")
    if accepted is None:
        accepted = [ib_rate_gbps] if ib_rate_gbps else []
    nccl = entry.get("ncclAllReduceBusBwGBps", {})
    checks = _checks(defaults["checks"])
    return HealthSpec(
        vm_size=vm_size,
        gpus=gpus,
        ib_ports=ib_ports,
        ib_rate_gbps=ib_rate_gbps,
        ib_rate_status=ib_rate_status,
        ib_rate_accepted_gbps=tuple(int(rate) for rate in accepted),
        dcgm_level_boot=int(defaults["dcgmDiagLevel"]["boot"]),
        dcgm_level_periodic=int(defaults["dcgmDiagLevel"]["periodic"]),
        dcgm_level_epilog=int(defaults["epilogDcgmDiagLevel"]["value"]),
        xid_warning=never_drain_xids(defaults["xidWarning"]["value"]),
        checks=checks,
        xid_teardown=tuple(int(x) for x in _teardown()["value"]),
        xid_teardown_window_s=int(_teardown()["withinSecondsOfJobEnd"]),
        fabric_health=tuple((str(k), str(v)) for k, v in defaults["fabricHealth"]["expected"].items()),
        field_watches=_watches(defaults["fieldWatches"]["watches"], checks),
        ib_link_downed_count=int(defaults["ibLinkDowned"]["count"]),
        ib_link_downed_window_s=int(defaults["ibLinkDowned"]["windowSeconds"]),
        gemm_binary=str(defaults["gemm"]["binary"]),
        gemm_seconds=int(defaults["gemm"]["seconds"]),
        command_timeout_s={mode: int(defaults["timeoutSeconds"]["command"][mode]) for mode in RUN_MODES},
        dcgm_diag_timeout_s={mode: int(defaults["timeoutSeconds"]["dcgmDiag"][mode]) for mode in RUN_MODES},
        nccl_rack=_threshold(nccl.get("rack")),
        nccl_cross_rack=_threshold(nccl.get("crossRack")),
        gemm_tflops_per_gpu=_threshold(entry.get("gemmTflopsPerGpu")),
    )


def _words(values: tuple[int, ...]) -> str:
    return " ".join(str(v) for v in values)


def render_health_env(
    spec: HealthSpec,
    *,
    soft_failures_to_drain: int,
    nvme_mount: str,
    mounts: tuple[str, ...],
    imex_mode: ImexMode = "per-job",
    lustre: bool = False,
    gpu_modules: bool = True,
) -> str:
    """The shell-sourceable ``/etc/gb300/health.env`` for nodes of ``spec.vm_size`` (KEY='value' lines).

    ``soft_failures_to_drain`` is ``gb300:health.softFailuresToDrain``: how many consecutive failures of a soft
    check drain the node. ``lustre``: the cluster mounts Azure Managed Lustre, so the running kernel must have the
    lustre module too.
    """
    if soft_failures_to_drain < 1:
        raise SlurmConfigError(f"'soft_failures_to_drain' must be at least 1 (got {soft_failures_to_drain!r})")
    values: dict[str, str] = {
        "GB300_VM_SIZE": spec.vm_size,
        "GB300_EXPECTED_GPUS": str(spec.gpus),
        "GB300_EXPECTED_IB_PORTS": str(spec.ib_ports),
        "GB300_IB_RATE_CATALOG_GBPS": str(spec.ib_rate_gbps or ""),
        "GB300_IB_RATE_CATALOG_STATUS": spec.ib_rate_status,
        "GB300_IB_RATE_ACCEPTED_GBPS": _words(spec.ib_rate_accepted_gbps),
        "GB300_DCGM_DIAG_LEVEL_BOOT": str(spec.dcgm_level_boot),
        "GB300_DCGM_DIAG_LEVEL_PERIODIC": str(spec.dcgm_level_periodic),
        "GB300_DCGM_DIAG_LEVEL_EPILOG": str(spec.dcgm_level_epilog),
        "GB300_XID_WARNING": _words(spec.xid_warning),
        # XIDs of a job's teardown: benign within this many seconds of a job's end on the node (remediation.yaml).
        "GB300_XID_TEARDOWN": _words(spec.xid_teardown),
        "GB300_XID_TEARDOWN_WINDOW_S": str(spec.xid_teardown_window_s),
        "GB300_SOFT_CHECKS": " ".join(c.name for c in spec.checks if c.check_class == "soft"),
        # What does not run in each mode (shorter than what does: custom data is size-limited).
        **{
            f"GB300_SKIP_{mode.upper()}": " ".join(c.name for c in spec.checks if mode not in c.runs)
            for mode in RUN_MODES
        },
        "GB300_SOFT_FAILURES_TO_DRAIN": str(soft_failures_to_drain),
        "GB300_FABRIC_HEALTH_EXPECTED": "|".join(f"{key}={value}" for key, value in spec.fabric_health),
        "GB300_FIELD_WATCHES": " ".join(w.encoded() for w in spec.field_watches),
        "GB300_IB_LINK_DOWNED_COUNT": str(spec.ib_link_downed_count),
        "GB300_IB_LINK_DOWNED_WINDOW_S": str(spec.ib_link_downed_window_s),
        "GB300_GEMM_BINARY": spec.gemm_binary,
        "GB300_GEMM_SECONDS": str(spec.gemm_seconds),
        # "<mode>:<command timeout>:<DCGM diagnostic timeout>" words, seconds.
        "GB300_TIMEOUTS": " ".join(
            f"{mode}:{spec.command_timeout_s[mode]}:{spec.dcgm_diag_timeout_s[mode]}" for mode in RUN_MODES
        ),
        "GB300_NVME_MOUNT": nvme_mount,
        # Exactly the mounts the stack configures on the node (gb300.node.context.health_mounts); may be empty.
        "GB300_MOUNTS": " ".join(mounts),
        "GB300_IMEX_MODE": imex_mode,
        "GB300_KERNEL_MODULES": " ".join(
            (*(("nvidia", "nvidia_peermem") if gpu_modules else ()), *(("lustre",) if lustre else ()))
        ),
    }
    for key, threshold in (("RACK", spec.nccl_rack), ("XRACK", spec.nccl_cross_rack)):
        if threshold is not None:
            values[f"GB300_NCCL_{key}_EXPECTED_GBPS"] = f"{threshold.expected:g}"
            values[f"GB300_NCCL_{key}_WARN_GBPS"] = f"{threshold.warn:g}"
            values[f"GB300_NCCL_{key}_REPORT_GBPS"] = f"{threshold.report_to_azure:g}"
            values[f"GB300_NCCL_{key}_BYTES"] = str(threshold.message_bytes or "")
    if spec.gemm_tflops_per_gpu is not None:
        values["GB300_GEMM_WARN_TFLOPS"] = f"{spec.gemm_tflops_per_gpu.warn:g}"
        values["GB300_GEMM_REPORT_TFLOPS"] = f"{spec.gemm_tflops_per_gpu.report_to_azure:g}"
    header = f"# gb300 health expectations for {spec.vm_size}, rendered from data/health.yaml and skus.yaml\n"
    return header + quoting.env_lines(values, "health.env")


def health_env_for(
    vm_size: str,
    *,
    soft_failures_to_drain: int,
    nvme_mount: str,
    mounts: tuple[str, ...],
    imex_mode: ImexMode = "per-job",
    lustre: bool = False,
) -> str:
    """``/etc/gb300/health.env`` for ``vm_size``, with the hardware facts read from the SKU catalog."""
    sku = catalog.load().sku(vm_size)
    rate = sku.ib_rate_gbps
    spec = health_spec(
        vm_size,
        gpus=sku.gpus,
        ib_ports=sku.ib_ports,
        ib_rate_gbps=int(rate.value) if rate is not None else None,
        ib_rate_status=rate.status if rate is not None else "verified",
    )
    return render_health_env(
        spec,
        soft_failures_to_drain=soft_failures_to_drain,
        nvme_mount=nvme_mount,
        mounts=mounts,
        imex_mode=imex_mode,
        lustre=lustre,
    )


def cpu_health_env(vm_size: str, *, soft_failures_to_drain: int, mounts: tuple[str, ...], lustre: bool) -> str:
    """``/etc/gb300/health.env`` for a CPU pool's node: the same gate, with every check but ``data/health.yaml``
    ``cpuNodeChecks`` skipped in every mode (no GPU, InfiniBand or DCGM check), no IMEX and no NVIDIA module."""
    keep = set(_data()["defaults"]["cpuNodeChecks"]["value"])
    spec = health_spec(vm_size, gpus=0, ib_ports=0, ib_rate_gbps=None)
    checks = tuple(c if c.name in keep else CheckSpec(c.name, c.check_class, ()) for c in spec.checks)
    spec = dataclasses.replace(spec, checks=checks, field_watches=(), gemm_tflops_per_gpu=None)
    return render_health_env(
        spec,
        soft_failures_to_drain=soft_failures_to_drain,
        nvme_mount="",
        mounts=mounts,
        imex_mode="none",
        lustre=lustre,
        gpu_modules=False,
    )
