"""The rack acceptance run judged as ``examples/nccl-eval.py`` judges it: its parser and its thresholds (the rack's
``GB300_NCCL_*`` lines of health.env) decide whether a repaired node's rack passes revalidation.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Mapping
from types import ModuleType

from gb300 import paths
from gb300.errors import DataError


def nccl_eval() -> ModuleType:
    """The rack evaluator shipped in examples/nccl-eval.py (its parser and thresholds judge revalidation)."""
    name = "gb300_nccl_eval"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, paths.REPO_ROOT / "examples" / "nccl-eval.py")
        if spec is None or spec.loader is None:
            raise DataError(f"{paths.REPO_ROOT / 'examples' / 'nccl-eval.py'}: cannot be loaded")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def rack_verdict(output: str, env: Mapping[str, str], rack: str) -> tuple[str, float]:
    """nccl-eval's level (``OK``...) for an all_reduce_perf output of ``rack``, and the bus bandwidth it read (GB/s)."""
    module = nccl_eval()
    size = env.get("GB300_NCCL_RACK_BYTES")
    busbw = module.bus_bandwidth(output, int(size) if size else None)
    verdict = module.judge("rack", rack, busbw, dict(env), ())
    return str(verdict.level), float(busbw)


__all__ = ["nccl_eval", "rack_verdict"]
