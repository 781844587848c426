"""The human summary ``gb300 plan`` prints."""

from __future__ import annotations

from gb300.findings import Level
from gb300.plan import glance
from gb300.plan.runner import PlanResult


def _n(value: int) -> str:
    return f"{value:,}"


def _count(value: int, word: str) -> str:
    """``1 rack``, ``64 racks``: never "1 racks"."""
    return f"{value:,} {word}" if value == 1 else f"{value:,} {word}s"


def text(result: PlanResult, *, stack_file: str) -> str:
    """A readable summary: pools, quota, subnets, resources by type, custom data and findings."""
    s = result.summary
    zone = f" zone {s['zone']}" if s["zone"] else ""
    lines = [
        f"gb300 plan: stack {result.stack} ({stack_file})",
        f"cluster {s['cluster']} in {s['location']}{zone}",
        "",
        "Compute",
    ]
    for name, pool in s["pools"].items():
        lines.append(
            f"  pool {name:<10} {pool['vmSize']:<30} {_count(pool['racks'], 'rack'):>11} "
            f"{_count(pool['vms'], 'VM'):>10} {_count(pool['gpus'], 'GPU'):>11}  "
            f"({_count(pool['scaleSets'], 'scale set')})"
        )
    lines.append(
        f"  {'total':<15} {'':<30} {_count(s['racks'], 'rack'):>11} {_count(s['vms'], 'VM'):>10} "
        f"{_count(s['gpus'], 'GPU'):>11}"
    )
    lines += ["", "vCPU quota needed (per family)"]
    lines += [f"  {family:<40} {_n(count):>10}" for family, count in s["vcpus"].items()]
    lines += ["", *glance.subnet_lines(s["subnets"])]
    if "access" in s:
        lines += ["", *glance.access_lines(s["access"])]
    if "storage" in s:
        lines += ["", *glance.storage_lines(s["storage"])]
    if s["customDataBytes"]:
        payload = s.get("nodePayloadBytes", {})
        lines += ["", "Custom data (base64, Azure's limit is 65,536 bytes) and the node payload it fetches (gzip)"]
        lines += [
            f"  {role:<20} {_n(size):>7} bytes custom data"
            + (f", {_n(payload[role]):>7} bytes payload" if role in payload else "")
            for role, size in s["customDataBytes"].items()
        ]
    if "needsReimage" in s:
        lines += ["", "Reimage needed after `pulumi up` (bootstrap changed since the deployed state)"]
        lines += [f"  {group:<20} {_n(count):>7} scale sets/VMs" for group, count in s["needsReimage"].items()]
        if not s["needsReimage"]:
            lines.append("  none: every deployed node already has this bootstrap")
    if "changes" in s:
        lines += ["", *glance.change_lines(s["changes"])]
    lines += ["", *glance.resource_lines(s["resourcesByType"])]
    lines.append("")
    lines += suppressed_lines(result)
    if not result.findings:
        lines.append("Findings: none")
    else:
        counts = {lvl: sum(1 for f in result.findings if f.level == lvl) for lvl in Level}
        lines.append(
            "Findings: " + ", ".join(f"{counts[lvl]} {lvl.label}" for lvl in sorted(Level, reverse=True) if counts[lvl])
        )
        lines += [f"  {f.level.label:<7} {f.rule}: {f.message}\n          at {f.resource}" for f in result.findings]
    return "\n".join(lines)


def suppressed_lines(result: PlanResult) -> list[str]:
    """The rules ``gb300:policy.suppress`` switched off, with the reason and what each hides (never silent)."""
    if not result.suppressed:
        return []
    lines = [f"Suppressed rules (gb300:policy.suppress): {len(result.suppressed)}"]
    for s in result.suppressed:
        why = f"reason: {s.reason}" if s.reason else "no reason given"
        lines.append(f"  {s.rule}: {why}; hides {len(s.hidden)} finding(s)")
        lines += [f"    {f.level.label:<7} {f.message}\n            at {f.resource}" for f in s.hidden]
    lines.append("")
    return lines
