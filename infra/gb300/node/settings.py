"""Node settings from data files: node.yaml (IB, NVMe, fabric, tuning) and nccl.yaml (NCCL/UCX env)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gb300 import tags as gb300_tags
from gb300.errors import BootstrapDataError
from gb300.node.resources import DATA_DIR, load_yaml_mapping

__all__ = ["NCCL_FILE", "NODE_FILE", "NcclSettings", "NodeSettings", "load_nccl", "load_node"]

NODE_FILE: Path = DATA_DIR / "node.yaml"
NCCL_FILE: Path = DATA_DIR / "nccl.yaml"


@dataclass(frozen=True)
class NodeSettings:
    """What the node steps check and apply; every value comes from node.yaml."""

    ib_device_prefix: str
    ib_expected_ports: int
    waagent: tuple[tuple[str, str], ...]
    nvme_mount_point: str
    nvme_array_name: str
    nvme_filesystem: str
    nvme_mount_options: str
    nvme_expected_count: int
    nvme_data_model_regex: str
    fabric_expected_gpus: int
    fabric_healthy_state: str
    fabric_healthy_status: str
    modprobe_options: tuple[tuple[str, str], ...]
    sysctl: tuple[tuple[str, str], ...]
    limits: tuple[tuple[str, str, str, str], ...]
    kernel_flavour: str = ""
    """The `uname -r` suffix GPU nodes must run (azure-nvidia)."""
    kernel_cmdline: str = ""
    """Kernel command-line parameters GPU nodes must boot with."""
    kernel_hold: tuple[str, ...] = ()
    """Kernel meta packages held when installed (with the running kernel's own packages)."""
    secret_wait_seconds: int = 0  # keep asking Key Vault while it answers 401/403/404 (secret_fetch)
    secret_retry_delay_seconds: int = 15
    imex_config: tuple[tuple[str, str], ...] = ()
    """Keys set in /etc/nvidia-imex/config.cfg (the IMEX command service)."""
    sysctl_rackscale: tuple[tuple[str, str], ...] = ()
    """sysctl settings for GPU (NVLink rack-scale) nodes only, on top of `sysctl`."""
    systemd_rackscale: tuple[tuple[str, str], ...] = ()
    """systemd manager settings ([Manager] in system.conf.d) for GPU nodes only."""
    step_timeout_seconds: int = 0
    """run-step kills a step that runs longer (``steps.timeout_seconds``); per-step values in ``step_timeouts``."""
    step_timeouts: tuple[tuple[str, str], ...] = ()
    step_retries: int = 0
    """How often run-step tries a step again that failed without a reason of its own (a transient error)."""
    step_backoff_seconds: int = 0
    """The first wait before a retry; it doubles for each further retry."""
    payload_attempts: int = 1
    """How often fetch-payload asks for the node payload before the bootstrap fails (``payload_fetch``)."""
    payload_backoff_seconds: int = 0
    """The first wait between payload attempts; it doubles for each further attempt."""
    step_failure_reannounce_seconds: int = 0
    """How often a failed node logs its failure line again (the log alert's input; docs/lifecycle.md)."""

    def sysctl_for(self, role: str) -> tuple[tuple[str, str], ...]:
        """The sysctl settings a node of `role` gets (GPU nodes add the rack-scale network buffers)."""
        return self.sysctl + (self.sysctl_rackscale if role == gb300_tags.ROLE_GPU_NODE else ())


@dataclass(frozen=True)
class NcclSettings:
    """NCCL/UCX environment for GB racks and the library directories the profile script prepends."""

    env: tuple[tuple[str, str], ...]
    ld_library_path: tuple[str, ...]

    @property
    def nccl_conf(self) -> tuple[tuple[str, str], ...]:
        """The subset /etc/nccl.conf can carry (NCCL reads only NCCL_* keys from it)."""
        return tuple((k, v) for k, v in self.env if k.startswith("NCCL_"))


def _section(raw: dict[str, Any], key: str, path: Path) -> dict[str, Any]:
    value = raw.get(key)
    if not isinstance(value, dict):
        msg = f"{path}: `{key}` must be a mapping (got {value!r})"
        raise BootstrapDataError(msg)
    return value


def _pairs(mapping: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple((str(k), str(v)) for k, v in mapping.items())


def load_node(path: Path = NODE_FILE) -> NodeSettings:
    """Read node.yaml into NodeSettings."""
    raw = load_yaml_mapping(path)
    ib = _section(raw, "infiniband", path)
    nvme = _section(raw, "nvme", path)
    fabric = _section(raw, "fabric", path)
    secret_fetch = _section(raw, "secret_fetch", path)
    try:
        return NodeSettings(
            ib_device_prefix=str(ib["device_prefix"]),
            ib_expected_ports=int(ib["expected_ports"]),
            waagent=_pairs(_section(raw, "waagent", path)["settings"]),
            nvme_mount_point=str(nvme["mount_point"]),
            nvme_array_name=str(nvme["array_name"]),
            nvme_filesystem=str(nvme["filesystem"]),
            nvme_mount_options=str(nvme["mount_options"]),
            nvme_expected_count=int(nvme["expected_count"]),
            nvme_data_model_regex=str(nvme["data_model_regex"]),
            fabric_expected_gpus=int(fabric["expected_gpus"]),
            fabric_healthy_state=str(fabric["healthy_state"]),
            fabric_healthy_status=str(fabric["healthy_status"]),
            modprobe_options=_pairs(_section(raw, "modprobe", path)["options"]),
            sysctl=_pairs(_section(raw, "sysctl", path)["settings"]),
            limits=tuple((str(a), str(b), str(c), str(d)) for a, b, c, d in _section(raw, "limits", path)["entries"]),
            kernel_flavour=str(_section(raw, "kernel", path)["flavour"]),
            kernel_cmdline=str(_section(raw, "kernel", path)["cmdline"]),
            kernel_hold=tuple(str(p) for p in _section(raw, "kernel", path)["hold"]),
            secret_wait_seconds=int(secret_fetch["wait_seconds"]),
            secret_retry_delay_seconds=int(secret_fetch["retry_delay_seconds"]),
            imex_config=_pairs(_section(raw, "imex", path)["config"]),
            sysctl_rackscale=_pairs(_section(raw, "sysctl_rackscale", path)["settings"]),
            systemd_rackscale=_pairs(_section(raw, "systemd_rackscale", path)["manager"]),
            step_timeout_seconds=int(_section(raw, "steps", path)["timeout_seconds"]),
            step_timeouts=_pairs(_section(raw, "steps", path)["timeouts"]),
            step_retries=int(_section(raw, "steps", path)["retries"]),
            step_backoff_seconds=int(_section(raw, "steps", path)["backoff_seconds"]),
            payload_attempts=int(_section(raw, "payload_fetch", path)["attempts"]),
            payload_backoff_seconds=int(_section(raw, "payload_fetch", path)["backoff_seconds"]),
            step_failure_reannounce_seconds=int(_section(raw, "steps", path)["failure_reannounce_seconds"]),
        )
    except (KeyError, TypeError, ValueError) as exc:
        msg = f"{path}: missing or malformed setting ({exc!r})"
        raise BootstrapDataError(msg) from exc


def load_nccl(path: Path = NCCL_FILE) -> NcclSettings:
    """Read nccl.yaml into NcclSettings."""
    raw = load_yaml_mapping(path)
    return NcclSettings(
        env=_pairs(_section(raw, "env", path)),
        ld_library_path=tuple(str(p) for p in raw.get("ld_library_path") or []),
    )
