"""What a head with ``gb300:remediation.enabled`` carries in its node payload (docs/self-healing.md#on-the-head).

* The loop's code: :data:`HEAD_MODULE` and the gb300 modules it imports (:func:`head_modules`, read from the
  source) under ``/opt/gb300/heal/python/gb300/``, and ``examples/nccl-eval.py`` under
  ``/opt/gb300/heal/examples/`` (the loop judges rack runs with it), so ``gb300.paths.REPO_ROOT`` is
  ``/opt/gb300/heal`` there. The payload is signed, so this code is the cluster's.
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

import ast
import json
import re
import shlex
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from gb300.config import StackConfig
from gb300.facts import catalog, slurm_releases
from gb300.facts.loader import data
from gb300.facts.software import load_software
from gb300.heal import policy as heal_policy
from gb300.node import paths as node_paths
from gb300.node.file import NodeFile
from gb300.paths import CLOUD_INIT_DIR, PACKAGE_DIR, REPO_ROOT
from gb300.slurm.health import health_env_for

HOME = node_paths.HEAL_HOME
UNIT_DIR = node_paths.UNIT_STAGING
SBIN = node_paths.SBIN
HEAD_MODULE = "gb300.heal.head"
"""The head service's entry point (``/usr/local/sbin/gb300-heal`` runs it); what it imports is shipped with it."""
UNITS = ("gb300-heal.service", "gb300-heal.timer")
GPU_UNITS = ("gb300-heal-publish.service", "gb300-heal-publish.timer")


def _module_file(name: str) -> str:
    """The file of module ``gb300[.x.y]``, relative to the package directory."""
    parts = name.split(".")[1:]
    package = Path(*parts, "__init__.py")
    return package.as_posix() if (PACKAGE_DIR / package).is_file() else Path(*parts).as_posix() + ".py"


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_statements(body: Sequence[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
    """The imports a module runs when it is imported: its top level, classes, ``if`` and ``try`` blocks included;
    function bodies (lazy imports, run only when called) and ``if TYPE_CHECKING:`` blocks left out."""
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        elif isinstance(node, ast.If) and _type_checking(node.test):
            yield from _import_statements(node.orelse)
        else:
            for field in ("body", "orelse", "finalbody"):
                yield from _import_statements([n for n in getattr(node, field, []) if isinstance(n, ast.stmt)])
            for handler in getattr(node, "handlers", []):
                yield from _import_statements(handler.body)


def _imported(name: str) -> set[str]:
    """The gb300 modules importing ``name`` imports: each enclosing package, and each module its imports name (read
    with :mod:`ast` from the package source, as tests/test_layering.py reads imports)."""
    parts = name.split(".")
    found = {".".join(parts[:i]) for i in range(1, len(parts))}
    tree = ast.parse((PACKAGE_DIR / _module_file(name)).read_text(encoding="utf-8"))
    for node in _import_statements(tree.body):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
            continue
        source = node.module or ""
        for alias in node.names:
            whole = f"{source}.{alias.name}"
            is_module = (PACKAGE_DIR / _module_file(whole)).is_file() if whole.startswith("gb300.") else False
            found.add(whole if is_module else source)
    return {m for m in found if m == "gb300" or m.startswith("gb300.")}


def head_modules(entry: str = HEAD_MODULE) -> tuple[str, ...]:
    """Files (relative to the package directory) of every gb300 module ``entry`` imports, directly or not: what the
    head carries under ``/opt/gb300/heal/python/gb300/`` (a test runs the head with these alone on its path)."""
    seen: set[str] = set()
    todo = [entry]
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(_imported(name) - seen)
    return tuple(sorted(_module_file(m) for m in seen))


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
        # The NOT_RESPONDING blip after a resume: records are read again up to 3 times, one blip apart.
        "slurmReread": {"attempts": 3, "waitSeconds": slurm_releases.not_responding_seconds()},
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


def head_files(cfg: StackConfig) -> list[NodeFile]:
    """Every file the head carries for the loop (only with ``gb300:remediation.enabled``)."""
    code = [
        NodeFile(f"{HOME}/python/gb300/{name}", (PACKAGE_DIR / name).read_text(encoding="utf-8"))
        for name in head_modules()
    ]
    code.append(NodeFile(f"{HOME}/examples/nccl-eval.py", (REPO_ROOT / "examples" / "nccl-eval.py").read_text("utf-8")))
    units = [
        NodeFile(
            f"{UNIT_DIR}/{u}",
            timer_text() if u == "gb300-heal.timer" else (CLOUD_INIT_DIR / "slurm" / "systemd" / u).read_text("utf-8"),
        )
        for u in UNITS
    ]
    return [
        *code,
        NodeFile(f"{HOME}/requirements.txt", requirements_text()),
        NodeFile(node_paths.HEAL_CONFIG, config_json(cfg)),
        NodeFile(f"{SBIN}/gb300-heal", (CLOUD_INIT_DIR / "slurm" / "gb300-heal").read_text("utf-8"), "0755"),
        *units,
    ]


def gpu_files() -> list[NodeFile]:
    """What a GPU node carries for the loop: the gate verdict publisher and its units."""
    units = [
        NodeFile(f"{UNIT_DIR}/{u}", (CLOUD_INIT_DIR / "slurm" / "systemd" / u).read_text("utf-8")) for u in GPU_UNITS
    ]
    tool = (CLOUD_INIT_DIR / "slurm" / "gb300-heal-publish").read_text("utf-8")
    return [NodeFile(f"{SBIN}/gb300-heal-publish", tool, "0755"), *units]
