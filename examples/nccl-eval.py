#!/usr/bin/env python3
"""Evaluate nccl-tests all_reduce_perf results against gb300's per-SKU thresholds; write a per-rack report.

Used by nccl-rack-check.sbatch; stdlib only, so it runs on any cluster node. Thresholds come from
/etc/gb300/health.env (rendered from gb300's data/health.yaml): for a rack over NVLink (MNNVL) and across
racks over InfiniBand only, ``expected``, ``warn`` (below: WARN) and ``report`` (below: REPORT, open a
case with Azure with the nodes' physical host names).

    nccl-eval.py evaluate --health-env /etc/gb300/health.env --report-dir DIR RESULT...
        RESULT is <kind>:<label>:<file>, kind "rack" or "xrack", e.g. rack:block001:block001.txt
    nccl-eval.py kvp /var/lib/hyperv/.kvp_pool_3    # this VM's physical host name, for Azure reports

Exit 0 when every result is at or above its warn threshold, 1 otherwise, 2 for unreadable input.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+\w+\s+\w+\s+-?\d+\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\S+)")
_AVG = re.compile(r"#\s*Avg bus bandwidth\s*:\s*([\d.]+)")
_KVP_KEY, _KVP_VALUE = 512, 2048


@dataclass(frozen=True)
class Verdict:
    """One measured bus bandwidth against its thresholds."""

    kind: str
    label: str
    busbw_gbps: float
    expected_gbps: float
    warn_gbps: float
    report_gbps: float
    level: str  # OK, WARN or REPORT
    hosts: tuple[str, ...] = ()


def read_env(path: Path) -> dict[str, str]:
    """KEY=value lines of a shell env file (values unquoted as the shell would)."""
    values: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if "=" in line and not line.lstrip().startswith("#"):
            key, _, raw = line.partition("=")
            parts = shlex.split(raw)
            values[key.strip()] = parts[0] if parts else ""
    return values


def bus_bandwidth(text: str, message_bytes: int | None) -> float:
    """Out-of-place bus bandwidth (GB/s) at ``message_bytes``, else nccl-tests' average (ValueError: none)."""
    for line in text.splitlines():
        match = _ROW.match(line)
        if match and message_bytes is not None and int(match.group(1)) == message_bytes:
            return float(match.group(5))
    average = _AVG.search(text)
    if average is None:
        raise ValueError("no all_reduce_perf result (no data row and no 'Avg bus bandwidth')")
    return float(average.group(1))


def judge(kind: str, label: str, busbw: float, env: dict[str, str], hosts: tuple[str, ...] = ()) -> Verdict:
    """Compare one bandwidth with the thresholds of its kind (RACK or XRACK keys in health.env)."""
    key = "RACK" if kind == "rack" else "XRACK"
    expected = float(env[f"GB300_NCCL_{key}_EXPECTED_GBPS"])
    warn = float(env[f"GB300_NCCL_{key}_WARN_GBPS"])
    report = float(env[f"GB300_NCCL_{key}_REPORT_GBPS"])
    level = "OK" if busbw >= warn else "WARN" if busbw >= report else "REPORT"
    return Verdict(kind, label, busbw, expected, warn, report, level, hosts)


def physical_host(kvp: bytes) -> str:
    """The Hyper-V KVP pool's PhysicalHostNameFullyQualified (or PhysicalHostName), or ''."""
    found: dict[str, str] = {}
    size = _KVP_KEY + _KVP_VALUE
    for start in range(0, len(kvp) - size + 1, size):
        key = kvp[start : start + _KVP_KEY].split(b"\0", 1)[0].decode(errors="replace")
        value = kvp[start + _KVP_KEY : start + size].split(b"\0", 1)[0].decode(errors="replace")
        found[key] = value
    return found.get("PhysicalHostNameFullyQualified") or found.get("PhysicalHostName", "")


def _hosts(report_dir: Path, label: str) -> tuple[str, ...]:
    path = report_dir / f"{label}.hosts"
    return tuple(path.read_text(encoding="utf-8").split()) if path.exists() else ()


def evaluate(args: argparse.Namespace) -> int:
    try:
        env = read_env(Path(args.health_env))
    except OSError as error:
        print(f"{args.health_env}: cannot read ({error.strerror})", file=sys.stderr)
        return 2
    report_dir = Path(args.report_dir)
    report_dir.mkdir(parents=True, exist_ok=True)
    verdicts: list[Verdict] = []
    for spec in args.results:
        kind, _, rest = spec.partition(":")
        label, _, file = rest.partition(":")
        if kind not in ("rack", "xrack") or not label or not file:
            print(f"{spec}: must be <rack|xrack>:<label>:<file>", file=sys.stderr)
            return 2
        key = "RACK" if kind == "rack" else "XRACK"
        if f"GB300_NCCL_{key}_WARN_GBPS" not in env:
            print(f"{args.health_env}: no GB300_NCCL_{key}_* thresholds for this SKU", file=sys.stderr)
            return 2
        size = env.get(f"GB300_NCCL_{key}_BYTES")
        try:
            busbw = bus_bandwidth(Path(file).read_text(encoding="utf-8"), int(size) if size else None)
        except (OSError, ValueError) as error:
            print(f"{file}: {getattr(error, 'strerror', None) or error}", file=sys.stderr)
            return 2
        verdicts.append(judge(kind, label, busbw, env, _hosts(report_dir, label)))
    for verdict in verdicts:
        (report_dir / f"{verdict.label}.{verdict.kind}.json").write_text(json.dumps(asdict(verdict), indent=2) + "\n")
        print(
            f"{verdict.level:6} {verdict.kind:5} {verdict.label}: {verdict.busbw_gbps:.1f} GB/s "
            f"(expected ~{verdict.expected_gbps:g}, warn < {verdict.warn_gbps:g}, "
            f"report < {verdict.report_gbps:g})"
        )
        if verdict.level == "REPORT":
            print(f"       report to Azure with the physical hosts in {report_dir}/physical-hosts.txt")
    return 0 if all(v.level == "OK" for v in verdicts) else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    ev = sub.add_parser("evaluate", help="judge results and write the report")
    ev.add_argument("--health-env", default="/etc/gb300/health.env")
    ev.add_argument("--report-dir", required=True)
    ev.add_argument("results", nargs="+", metavar="KIND:LABEL:FILE")
    kvp = sub.add_parser("kvp", help="print this VM's physical host name")
    kvp.add_argument("pool", nargs="?", default="/var/lib/hyperv/.kvp_pool_3")
    args = parser.parse_args(argv)
    if args.command == "kvp":
        try:
            print(physical_host(Path(args.pool).read_bytes()))
        except OSError as error:
            print(f"{args.pool}: cannot read ({error.strerror})", file=sys.stderr)
            return 2
        return 0
    return evaluate(args)


if __name__ == "__main__":
    sys.exit(main())
