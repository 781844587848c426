"""Node bootstrap time in the cloud-init sandbox (``tests/support/sandbox.py``), when the repository has one.

Runs the GPU node's custom data, taken from the plan the benchmark just made (what Azure would receive), with
the node payload that plan uploads laid out as the custom data's fetch would lay it out, on a sandboxed VM of
Azure's Ubuntu-HPC GB image: first the fast path (the image already has everything, so nothing is installed),
then the idempotent re-run. The sandbox's stand-ins for system commands (nvidia-smi, apt-get,
systemctl, ...) are small Python programs; their CPU cost per call is measured and subtracted from the CPU of
everything the run started (``getrusage(RUSAGE_CHILDREN)``), leaving the scripts' own work. Wall times are given
too, stand-ins included. Waits are off in the sandbox (``GB300_IB_WAIT_SECONDS=0``).
"""

from __future__ import annotations

import base64
import gzip
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import yaml

TARGET_S = 5.0
STEP_RECORDS = "/var/lib/gb300/steps"  # where a node script records that its step completed
READY_STEP = "99-ready"  # the last step: fails while any other step has no completion record
MAX_SKIPPED = 12
STANDIN_SAMPLES = 15


def _decode(data: str) -> str:
    body = base64.b64decode(data)
    return (gzip.decompress(body) if body[:2] == b"\x1f\x8b" else body).decode()


def _dig(data: Any, *path: str) -> Any:
    for step in path:
        data = data.get(step) if isinstance(data, dict) else None
    return data


def custom_data_by_role(plan_file: Path) -> dict[str, str]:
    """Each role's custom data (base64, as Azure receives it) in the plan: scale sets and single VMs."""
    out: dict[str, str] = {}
    for rec in json.loads(plan_file.read_text(encoding="utf-8"))["resources"]:
        inputs, tags = rec["inputs"], rec["inputs"].get("tags") or {}
        in_scale_set = _dig(inputs, "virtualMachineProfile", "osProfile", "customData") or _dig(
            inputs, "properties", "virtualMachineProfile", "osProfile", "customData"
        )
        data = in_scale_set or _dig(inputs, "osProfile", "customData")
        if isinstance(data, str):
            role = str(tags.get("gb300-role", "gpu-node" if in_scale_set else rec["name"]))
            out[role] = max(out.get(role, ""), data, key=len)
    return out


def _whole_node(plan_file: Path, stack_file: Path | None = None) -> str:
    """The GPU node's cloud-config as the node has it once ``fetch-payload`` has run: the custom data with the node
    payload the plan uploads laid out as its files (``tests/support/plan_custom_data.py``), without the fetch
    itself, which needs the storage account (``tests/node/test_payload.py`` tests it)."""
    from tests.support import plan_custom_data  # noqa: PLC0415 - the sandbox's checkout is on sys.path here

    doc_plan = json.loads(plan_file.read_text(encoding="utf-8"))
    records = doc_plan["resources"]
    if stack_file is not None:
        # The plan that wrote ``plan_file`` ran in a process of its own, whose payload files went with it (each
        # process writes them to a private directory it removes at exit): plan the same stack file again here.
        from gb300 import config  # noqa: PLC0415
        from gb300.plan.runner import register  # noqa: PLC0415

        records = [r.as_json() for r in register(doc_plan["stack"], config.load_stack_file(stack_file))]
    plan = SimpleNamespace(
        resources=[SimpleNamespace(**{k: r[k] for k in ("type", "name", "inputs")}) for r in records]
    )
    doc = plan_custom_data.full_cloud_config(plan, "gpu-node")  # type: ignore[arg-type] - reads .resources only
    doc["runcmd"] = [e for e in doc["runcmd"] if not str(e[0]).endswith("/fetch-payload")]
    return "#cloud-config\n" + yaml.safe_dump(doc, sort_keys=False)


def uncompressed_sizes(plan_file: Path) -> dict[str, int]:
    """Per role, the base64 size the cloud-config would have without gzip: how much gzip buys."""
    return {role: -(-len(_decode(data).encode()) // 3) * 4 for role, data in custom_data_by_role(plan_file).items()}


def _step_name(entry: list[str]) -> str:
    return next((arg for arg in entry if arg[:2].isdigit() or arg.startswith("gb300-")), " ".join(entry))


def _without(cloud_config: str, names: list[str]) -> str:
    """The cloud-config with the runcmd steps ``names`` left out."""
    doc = yaml.safe_load(cloud_config)
    doc["runcmd"] = [e for e in doc.get("runcmd", []) if _step_name([str(a) for a in e]) not in names]
    return "#cloud-config\n" + yaml.safe_dump(doc, sort_keys=False)


def _feature_steps(cloud_config: str) -> list[str]:
    """Feature steps (``gb300-*``, e.g. Slurm's): they call IMDS and Key Vault, which the sandbox does not answer."""
    entries = yaml.safe_load(cloud_config).get("runcmd", [])
    return [n for n in (_step_name([str(a) for a in e]) for e in entries) if n.startswith("gb300-")]


def _machine(sandbox: Any, skipped: list[str]) -> Any:
    """Azure's HPC image, with completion records for skipped steps so that ``99-ready`` finds every step done."""
    machine = sandbox.hpc_image_machine()
    machine.files |= {f"{STEP_RECORDS}/{name}.done": "" for name in skipped}
    return machine


def _runnable(sandbox: Any, cloud_config: str, tmp: Path) -> list[str]:
    """Steps to skip: feature steps, then each step that fails first in the sandbox, one at a time.

    Steps that read deploy-time values from IMDS (Lustre, blob, metrics endpoints) or talk to services the
    image lacks fail there; the ones after a failure are not run, so they are tried again without it.
    """
    skipped = _feature_steps(cloud_config)
    for attempt in range(MAX_SKIPPED):
        box = sandbox.Sandbox(tmp / f"probe-{attempt}", _without(cloud_config, skipped), _machine(sandbox, skipped))
        failed = [step for step, rc in box.run().returncodes if rc != 0 and step != READY_STEP]
        if not failed:
            break
        skipped.append(failed[0])
    return skipped


def _children_cpu() -> float:
    """CPU seconds (user + system) of every finished child process so far: scripts, tools and stand-ins."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _timed_run(box: Any) -> tuple[Any, float]:
    cpu = _children_cpu()
    result = box.run()
    return result, _children_cpu() - cpu


def _standin_cost(box: Any) -> tuple[float, float]:
    """Median wall seconds and mean CPU seconds of one stand-in call (a harmless `logger`), as the steps run it."""
    logger = box.bin / "logger"
    samples = []
    cpu = _children_cpu()
    for _ in range(STANDIN_SAMPLES):
        started = time.perf_counter()
        subprocess.run([str(logger), "-t", "gb300-bench", "probe"], env=box.env(), capture_output=True, check=False)
        samples.append(time.perf_counter() - started)
    return statistics.median(samples), (_children_cpu() - cpu) / STANDIN_SAMPLES


def measure(repo: Path, plan_file: Path, tmp: Path, stack_file: Path | None = None) -> dict[str, Any]:
    """Fast path and re-run times, or a status saying why they could not be taken."""
    if not (repo / "tests" / "support" / "sandbox.py").exists():
        return {"status": "not available (tests/support/sandbox.py is not in this checkout)"}
    data = custom_data_by_role(plan_file).get("gpu-node") if plan_file.exists() else None
    if data is None or "runcmd" not in _decode(data):
        return {"status": "not available (the plan's gpu-node custom data has no bootstrap)"}
    sys.path.insert(0, str(repo))
    try:
        from tests.support import sandbox  # noqa: PLC0415

        cloud_config = _whole_node(plan_file, stack_file)
        skipped = _runnable(sandbox, cloud_config, tmp)
        box = sandbox.Sandbox(tmp / "node", _without(cloud_config, skipped), _machine(sandbox, skipped))
        first, first_cpu = _timed_run(box)
        failed = [step for step, rc in first.returncodes if rc != 0]
        calls_first = len(box.calls())
        again, again_cpu = _timed_run(box)
        calls_again = len(box.calls()) - calls_first
        per_call_wall, per_call_cpu = _standin_cost(box)
    except Exception as exc:  # noqa: BLE001 - a changed sandbox API must not sink the plan numbers
        return {"status": f"failed ({type(exc).__name__}: {exc})"}
    finally:
        sys.path.remove(str(repo))
    # The scripts' own work: CPU of everything the run started, less the stand-ins' (hardware and apt emulation).
    own_first = first_cpu - calls_first * per_call_cpu
    own_again = again_cpu - calls_again * per_call_cpu
    return {
        "status": "measured" if first.ok and again.ok else f"measured, but steps failed: {', '.join(failed)}",
        "steps": len(first.returncodes),
        "skipped_steps": ", ".join(skipped) or "none",
        "fast_path_wall_s": round(first.seconds, 2),
        "fast_path_cpu_s": round(first_cpu, 2),
        "fast_path_standin_calls": calls_first,
        "fast_path_own_cpu_s": round(own_first, 2),
        "rerun_wall_s": round(again.seconds, 2),
        "rerun_cpu_s": round(again_cpu, 2),
        "rerun_standin_calls": calls_again,
        "rerun_own_cpu_s": round(own_again, 2),
        "standin_call_wall_s": round(per_call_wall, 4),
        "standin_call_cpu_s": round(per_call_cpu, 4),
        "target": f"own work <= {TARGET_S} s",
        "met": max(own_first, own_again) <= TARGET_S,
    }
