"""What a head with ``gb300:remediation.enabled`` carries in its node payload (docs/self-healing.md#on-the-head).

* The loop's code: the modules of :data:`MODULES` under ``/opt/gb300/heal/python/gb300/`` and
  ``examples/nccl-eval.py`` under ``/opt/gb300/heal/examples/`` (the loop judges rack runs with it), so
  ``gb300.paths.REPO_ROOT`` is ``/opt/gb300/heal`` there. The payload is signed, so this code is the cluster's.
* ``/opt/gb300/heal/requirements.txt``: the Azure SDK's closure from ``data/heal-python.yaml``, every file hashed;
  ``gb300-heal-setup`` installs it into a venv with ``--require-hashes``.
* ``/etc/gb300/heal.json`` (:func:`config_json`): the cluster, its racks' scale set names, the rendered policy
  (:func:`gb300.heal.policy.to_json`: data/remediation.yaml with the stack's ``gb300:remediation``), the NCCL
  thresholds of the racks' SKU, and the service's intervals. No secret: the subscription, resource group and the
  remediation identity's client id come from IMDS at run time.
* ``/usr/local/sbin/gb300-heal`` and the units ``gb300-heal.service`` (oneshot) and ``gb300-heal.timer``.

A GPU node carries ``gb300-heal-publish`` and its units (:func:`gpu_files`): the gate's verdict in its Slurm record.
"""

from __future__ import annotations

import json
import re
import shlex
from typing import Any

from gb300.config import StackConfig
from gb300.facts import catalog
from gb300.facts.loader import data
from gb300.facts.software import load_software
from gb300.heal import policy as heal_policy
from gb300.node import paths as node_paths
from gb300.node.boot_context import ExtraFile
from gb300.paths import CLOUD_INIT_DIR, PACKAGE_DIR, REPO_ROOT
from gb300.slurm.health import health_env_for

HOME = node_paths.HEAL_HOME
UNIT_DIR = node_paths.UNIT_STAGING
SBIN = node_paths.SBIN
MODULES: tuple[str, ...] = (
    "__init__.py",
    "errors.py",
    "paths.py",
    "heal/__init__.py",
    "heal/azure_calls.py",
    "heal/evidence.py",
    "heal/head.py",
    "heal/loop.py",
    "heal/policy.py",
    "heal/ports.py",
    "heal/state.py",
    "node/__init__.py",
    "node/paths.py",
    "slurm/__init__.py",
    "slurm/client.py",
    "slurm/hostlist.py",
    "slurm/topology.py",
    "tags.py",
)
"""The gb300 modules the head's service imports (a test runs it with these alone on its path)."""
UNITS = ("gb300-heal.service", "gb300-heal.timer")
GPU_UNITS = ("gb300-heal-publish.service", "gb300-heal-publish.timer")


def enabled(cfg: StackConfig) -> bool:
    return cfg.remediation.enabled


def requirements_text() -> str:
    """requirements.txt for ``pip install --require-hashes``: every pin with every file's sha256."""
    raw = data("heal-python.yaml")
    lines = ["# gb300 heal: rendered from infra/gb300/data/heal-python.yaml; install with --require-hashes --no-deps"]
    for package in raw["packages"]:
        hashes = " ".join(f"--hash=sha256:{f['sha256']}" for f in package["files"])
        lines.append(f"{package['name']}=={package['version']} {hashes}")
    return "\n".join(lines) + "\n"


def rack_names(cfg: StackConfig) -> list[str]:
    """Every rack scale set in service, by pool then number (gb300.components.gpu_pool.rack_name)."""
    from gb300.components.gpu_pool import rack_name  # noqa: PLC0415 - the one home of rack names (imports pulumi)

    return [
        rack_name(cfg.cluster.name, pool.name, index)
        for pool in cfg.gpu_pools
        for index in range(1, pool.racks + 1)
        if index not in pool.retired_racks
    ]


def _nccl_thresholds(cfg: StackConfig) -> tuple[dict[str, str], int]:
    """The NCCL thresholds (``GB300_NCCL_*``) of the first pool's SKU, and its VMs per NVLink domain."""
    if not cfg.gpu_pools:
        return {}, 18
    pool = cfg.gpu_pools[0]
    text = health_env_for(
        pool.vm_size, soft_failures_to_drain=cfg.health.soft_failures_to_drain, nvme_mount="/", mounts=()
    )
    values = {}
    for line in text.splitlines():
        key, sep, raw = line.partition("=")
        if sep and key.startswith("GB300_NCCL_"):
            parts = shlex.split(raw)
            values[key] = parts[0] if parts else ""
    return values, catalog.load().sku(pool.vm_size).vms_per_nvlink_domain


def config_json(cfg: StackConfig) -> str:
    """``/etc/gb300/heal.json``."""
    service = data("remediation.yaml")["service"]
    policy = heal_policy.load(cfg.remediation)
    thresholds, block_size = _nccl_thresholds(cfg)
    nccl_tests = load_software().component("nccl-tests").detect.removeprefix("file:").rsplit("/", 1)[0]
    doc: dict[str, Any] = {
        "cluster": cfg.cluster.name,
        "racks": rack_names(cfg),
        "blockSize": block_size,
        "pollSeconds": int(service["pollSeconds"]),
        "relistSeconds": int(service["relistSeconds"]),
        "armEndpoint": str(service["armEndpoint"]),
        "policy": heal_policy.to_json(policy),
        "ncclEnv": thresholds,
        "revalidate": {
            "timeoutSeconds": policy.revalidate_timeout_s,
            "bytes": int(thresholds.get("GB300_NCCL_RACK_BYTES", "17179869184")),
            "ncclTests": nccl_tests,
            "env": {str(k): str(v) for k, v in service["ncclEnv"].items()},
        },
    }
    return json.dumps(doc, indent=1, sort_keys=True) + "\n"


def timer_text() -> str:
    """``gb300-heal.timer`` with its interval from ``service.pollSeconds``, the one home of the tick's period."""
    text = (CLOUD_INIT_DIR / "slurm" / "systemd" / "gb300-heal.timer").read_text("utf-8")
    poll = int(data("remediation.yaml")["service"]["pollSeconds"])
    rendered, count = re.subn(r"(?m)^OnUnitInactiveSec=\S+$", f"OnUnitInactiveSec={poll}s", text)
    if count != 1:
        raise ValueError(f"gb300-heal.timer: expected one OnUnitInactiveSec= line, found {count}")
    return rendered


def head_files(cfg: StackConfig) -> list[ExtraFile]:
    """Every file the head carries for the loop (only with ``gb300:remediation.enabled``)."""
    code = [
        ExtraFile(f"{HOME}/python/gb300/{name}", (PACKAGE_DIR / name).read_text(encoding="utf-8")) for name in MODULES
    ]
    code.append(
        ExtraFile(f"{HOME}/examples/nccl-eval.py", (REPO_ROOT / "examples" / "nccl-eval.py").read_text("utf-8"))
    )
    units = [
        ExtraFile(
            f"{UNIT_DIR}/{u}",
            timer_text() if u == "gb300-heal.timer" else (CLOUD_INIT_DIR / "slurm" / "systemd" / u).read_text("utf-8"),
        )
        for u in UNITS
    ]
    return [
        *code,
        ExtraFile(f"{HOME}/requirements.txt", requirements_text()),
        ExtraFile(node_paths.HEAL_CONFIG, config_json(cfg)),
        ExtraFile(f"{SBIN}/gb300-heal", (CLOUD_INIT_DIR / "slurm" / "gb300-heal").read_text("utf-8"), "0755"),
        *units,
    ]


def gpu_files() -> list[ExtraFile]:
    """What a GPU node carries for the loop: the gate verdict publisher and its units."""
    units = [
        ExtraFile(f"{UNIT_DIR}/{u}", (CLOUD_INIT_DIR / "slurm" / "systemd" / u).read_text("utf-8")) for u in GPU_UNITS
    ]
    tool = (CLOUD_INIT_DIR / "slurm" / "gb300-heal-publish").read_text("utf-8")
    return [ExtraFile(f"{SBIN}/gb300-heal-publish", tool, "0755"), *units]
