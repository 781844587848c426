"""Node bootstrap time in the cloud-init sandbox (``tests/sandbox.py``), when the repository has one.

Runs the GPU node's custom data, taken from the plan the benchmark just made (what Azure would receive), on a
sandboxed VM of Azure's Ubuntu-HPC GB image: first the fast path (the image already has everything, so nothing is
installed), then the idempotent re-run. The sandbox's stand-ins for system commands (nvidia-smi, apt-get,
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
from typing import Any

TARGET_S = 5.0
STANDIN_SAMPLES = 15


def _custom_data(plan_file: Path, role: str) -> str | None:
    """The decoded cloud-config of the first scale set of ``role`` in the plan, or None."""
    doc = json.loads(plan_file.read_text(encoding="utf-8"))
    for rec in doc["resources"]:
        props = rec["inputs"].get("properties", rec["inputs"])
        data = props.get("virtualMachineProfile", {}).get("osProfile", {}).get("customData")
        if isinstance(data, str) and rec["inputs"].get("tags", {}).get("gb300-role", "gpu-node") == role:
            body = base64.b64decode(data)
            return (gzip.decompress(body) if body[:2] == b"\x1f\x8b" else body).decode()
    return None


def rendered_sizes() -> dict[str, dict[str, int]]:
    """Per role, the renderer's custom data size (base64 of gzip, what Azure receives) and its base64 size
    without gzip; empty without the bootstrap renderer."""
    try:
        from gb300.bootstrap import BootstrapContext, known_roles, render_custom_data  # noqa: PLC0415
    except ImportError:
        return {}
    out = {}
    try:
        for role in known_roles():
            rendered = render_custom_data(BootstrapContext.for_pool(role=role, cluster_name="ref", pool_name="train"))
            plain_b64 = -(-len(rendered.cloud_config.encode()) // 3) * 4
            out[role] = {"bytes": int(rendered.size_bytes), "uncompressed_base64_bytes": plain_b64}
    except Exception:  # noqa: BLE001 - a changed renderer API must not sink the plan numbers
        return {}
    return out


def _rendered(role: str) -> str | None:
    """The role's cloud-config from the bootstrap renderer (issue 3's API), or None without one."""
    try:
        from gb300.bootstrap import BootstrapContext, render_custom_data  # noqa: PLC0415
    except ImportError:
        return None
    try:
        ctx = BootstrapContext.for_pool(role=role, cluster_name="ref", pool_name="train")
        return str(render_custom_data(ctx).cloud_config)
    except Exception:  # noqa: BLE001 - a changed renderer API must not sink the plan numbers
        return None


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


def measure(repo: Path, plan_file: Path, tmp: Path) -> dict[str, Any]:
    """Fast path and re-run times, or a status saying why they could not be taken."""
    if not (repo / "tests" / "sandbox.py").exists():
        return {"status": "not available (tests/sandbox.py is not in this checkout)"}
    source = "the plan's gpu-node custom data"
    cloud_config = _custom_data(plan_file, "gpu-node") if plan_file.exists() else None
    if cloud_config is None or "runcmd" not in cloud_config:
        source = "gb300.bootstrap's render (the plan's custom data has no runcmd yet)"
        cloud_config = _rendered("gpu-node")
    if cloud_config is None:
        return {"status": "not available (no bootstrap in the plan's custom data, no gb300.bootstrap renderer)"}
    sys.path.insert(0, str(repo / "tests"))
    try:
        import sandbox  # noqa: PLC0415

        box = sandbox.Sandbox(tmp / "node", cloud_config, sandbox.hpc_image_machine())
        first, first_cpu = _timed_run(box)
        calls_first = len(box.calls())
        again, again_cpu = _timed_run(box)
        calls_again = len(box.calls()) - calls_first
        per_call_wall, per_call_cpu = _standin_cost(box)
    except Exception as exc:  # noqa: BLE001 - a changed sandbox API must not sink the plan numbers
        return {"status": f"failed ({type(exc).__name__}: {exc})"}
    finally:
        sys.path.remove(str(repo / "tests"))
    # The scripts' own work: CPU of everything the run started, less the stand-ins' (hardware and apt emulation).
    own_first = first_cpu - calls_first * per_call_cpu
    own_again = again_cpu - calls_again * per_call_cpu
    return {
        "status": "measured" if first.ok and again.ok else "measured, but a step failed",
        "cloud_config_from": source,
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
