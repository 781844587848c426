"""Per-SKU health thresholds (``data/health.yaml``) rendered for the nodes as ``/etc/gb300/health.env``.

The node health gate (``cloud-init/slurm/gb300-health-check``) and the rack NCCL evaluator
(``examples/nccl-eval.py``) read that file; they never hard-code a number. Hardware counts come from the
SKU catalog (``skus.yaml``); this module adds what health needs on top.
"""

from __future__ import annotations

import functools
import shlex
from dataclasses import dataclass
from typing import Any, Literal

import yaml

from gb300 import catalog
from gb300.paths import DATA_DIR

ImexMode = Literal["per-job", "static"]


@dataclass(frozen=True)
class Threshold:
    """A measured value's expectation: below ``warn`` is logged, below ``report_to_azure`` is reported."""

    expected: float
    warn: float
    report_to_azure: float
    status: str
    source: str
    message_bytes: int | None = None


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
    xid_ignore: tuple[int, ...]
    nccl_rack: Threshold | None = None
    nccl_cross_rack: Threshold | None = None
    gemm_tflops_per_gpu: Threshold | None = None


@functools.cache
def _data() -> dict[str, Any]:
    with (DATA_DIR / "health.yaml").open(encoding="utf-8") as handle:
        data: dict[str, Any] = yaml.safe_load(handle)
    return data


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
    return HealthSpec(
        vm_size=vm_size,
        gpus=gpus,
        ib_ports=ib_ports,
        ib_rate_gbps=ib_rate_gbps,
        ib_rate_status=ib_rate_status,
        ib_rate_accepted_gbps=tuple(int(rate) for rate in accepted),
        dcgm_level_boot=int(defaults["dcgmDiagLevel"]["boot"]),
        dcgm_level_periodic=int(defaults["dcgmDiagLevel"]["periodic"]),
        xid_ignore=tuple(int(x) for x in defaults["xidIgnore"]["value"]),
        nccl_rack=_threshold(nccl.get("rack")),
        nccl_cross_rack=_threshold(nccl.get("crossRack")),
        gemm_tflops_per_gpu=_threshold(entry.get("gemmTflopsPerGpu")),
    )


def _words(values: tuple[int, ...]) -> str:
    return " ".join(str(v) for v in values)


def render_health_env(
    spec: HealthSpec,
    *,
    nvme_mount: str,
    mounts: tuple[str, ...],
    imex_mode: ImexMode = "per-job",
    lustre: bool = False,
) -> str:
    """The shell-sourceable ``/etc/gb300/health.env`` for nodes of ``spec.vm_size`` (KEY='value' lines).

    ``lustre``: the cluster mounts Azure Managed Lustre, so the running kernel must have the lustre module too.
    """
    values: dict[str, str] = {
        "GB300_VM_SIZE": spec.vm_size,
        "GB300_EXPECTED_GPUS": str(spec.gpus),
        "GB300_EXPECTED_IB_PORTS": str(spec.ib_ports),
        "GB300_IB_RATE_CATALOG_GBPS": str(spec.ib_rate_gbps or ""),
        "GB300_IB_RATE_CATALOG_STATUS": spec.ib_rate_status,
        "GB300_IB_RATE_ACCEPTED_GBPS": _words(spec.ib_rate_accepted_gbps),
        "GB300_DCGM_DIAG_LEVEL_BOOT": str(spec.dcgm_level_boot),
        "GB300_DCGM_DIAG_LEVEL_PERIODIC": str(spec.dcgm_level_periodic),
        "GB300_XID_IGNORE": _words(spec.xid_ignore),
        "GB300_NVME_MOUNT": nvme_mount,
        # Exactly the mounts the stack configures on the node (gb300.node_context.health_mounts); may be empty.
        "GB300_MOUNTS": " ".join(mounts),
        "GB300_IMEX_MODE": imex_mode,
        "GB300_KERNEL_MODULES": " ".join(("nvidia", "nvidia_peermem", *(("lustre",) if lustre else ()))),
    }
    for key, threshold in (("RACK", spec.nccl_rack), ("XRACK", spec.nccl_cross_rack)):
        if threshold is not None:
            values[f"GB300_NCCL_{key}_EXPECTED_GBPS"] = f"{threshold.expected:g}"
            values[f"GB300_NCCL_{key}_WARN_GBPS"] = f"{threshold.warn:g}"
            values[f"GB300_NCCL_{key}_REPORT_GBPS"] = f"{threshold.report_to_azure:g}"
            values[f"GB300_NCCL_{key}_BYTES"] = str(threshold.message_bytes or "")
    header = f"# gb300 health expectations for {spec.vm_size}, rendered from data/health.yaml and skus.yaml\n"
    return header + "".join(f"{key}={shlex.quote(value)}\n" for key, value in values.items())


def health_env_for(
    vm_size: str,
    *,
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
    return render_health_env(spec, nvme_mount=nvme_mount, mounts=mounts, imex_mode=imex_mode, lustre=lustre)
