"""Node bootstrap time in the cloud-init sandbox (``tests/sandbox.py``), when the repository has one.

Runs the GPU node's custom data, taken from the plan the benchmark just made (what Azure would receive), on a
sandboxed VM of Azure's Ubuntu-HPC GB image: first the fast path (the image already has everything, so nothing is
installed), then the idempotent re-run. The sandbox's stand-ins for system commands (nvidia-smi, apt-get,
systemctl, ...) are small Python programs; their cost is measured and subtracted, leaving the scripts' own work.
Waits are off in the sandbox (``GB300_IB_WAIT_SECONDS=0``).
"""

from __future__ import annotations

import base64
import gzip
import json
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


def _standin_cost(box: Any) -> float:
    """Median seconds of one stand-in call (a harmless `logger`), in the sandbox's environment."""
    logger = box.bin / "logger"
    samples = []
    for _ in range(STANDIN_SAMPLES):
        started = time.perf_counter()
        subprocess.run([str(logger), "-t", "gb300-bench", "probe"], env=box.env(), capture_output=True, check=False)
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def measure(repo: Path, plan_file: Path, tmp: Path) -> dict[str, Any]:
    """Fast path and re-run times, or a status saying why they could not be taken."""
    if not (repo / "tests" / "sandbox.py").exists():
        return {"status": "not available (tests/sandbox.py is not in this checkout)"}
    cloud_config = _custom_data(plan_file, "gpu-node") if plan_file.exists() else None
    if cloud_config is None or "runcmd" not in cloud_config:
        return {"status": "not available (the plan's gpu-node custom data has no runcmd: bootstrap not wired in)"}
    sys.path.insert(0, str(repo / "tests"))
    try:
        import sandbox  # noqa: PLC0415

        box = sandbox.Sandbox(tmp / "node", cloud_config, sandbox.hpc_image_machine())
        first = box.run()
        calls_first = len(box.calls())
        again = box.run()
        calls_again = len(box.calls()) - calls_first
        per_call = _standin_cost(box)
    except Exception as exc:  # noqa: BLE001 - a changed sandbox API must not sink the plan numbers
        return {"status": f"failed ({type(exc).__name__}: {exc})"}
    finally:
        sys.path.remove(str(repo / "tests"))
    own_first = first.seconds - calls_first * per_call
    own_again = again.seconds - calls_again * per_call
    return {
        "status": "measured" if first.ok and again.ok else "measured, but a step failed",
        "fast_path_s": round(first.seconds, 2),
        "fast_path_standin_calls": calls_first,
        "fast_path_own_s": round(own_first, 2),
        "rerun_s": round(again.seconds, 2),
        "rerun_standin_calls": calls_again,
        "rerun_own_s": round(own_again, 2),
        "standin_call_s": round(per_call, 4),
        "target": f"own work <= {TARGET_S} s",
        "met": max(own_first, own_again) <= TARGET_S,
    }
