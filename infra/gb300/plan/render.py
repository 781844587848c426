"""The human summary ``gb300 plan`` prints."""

from __future__ import annotations

from gb300.findings import Level
from gb300.plan.runner import PlanResult


def _n(value: int) -> str:
    return f"{value:,}"


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
            f"  pool {name:<10} {pool['vmSize']:<30} {_n(pool['racks']):>6} racks {_n(pool['vms']):>8} VMs "
            f"{_n(pool['gpus']):>8} GPUs  ({_n(pool['scaleSets'])} scale sets)"
        )
    lines.append(f"  {'total':<15} {'':<30} {_n(s['racks']):>6} racks {_n(s['vms']):>8} VMs {_n(s['gpus']):>8} GPUs")
    lines += ["", "vCPU quota needed (per family)"]
    lines += [f"  {family:<40} {_n(count):>10}" for family, count in s["vcpus"].items()]
    lines += ["", "Subnets (usable addresses after Azure's reserved ones)"]
    lines += [
        f"  {sub['name']:<20} {sub['prefix']:<18} {_n(sub['used']):>7} used of {_n(sub['usable']):>7}"
        for sub in s["subnets"]
    ]
    if s["customDataBytes"]:
        payload = s.get("nodePayloadBytes", {})
        lines += ["", "Custom data (base64, Azure's limit is 65,536 bytes) and the node payload it fetches (gzip)"]
        lines += [
            f"  {role:<20} {_n(size):>7} bytes custom data"
            + (f", {_n(payload[role]):>7} bytes payload" if role in payload else "")
            for role, size in s["customDataBytes"].items()
        ]
    if "adds" in s and "destroys" in s:
        lines += ["", "Against the deployed state"]
        for what in ("adds", "destroys"):
            count = s[what]
            vms = f", {_n(count['vms'])} VMs" if count.get("vms") else ""
            lines.append(f"  {what:<20} {_n(count['resources']):>7} resources{vms}")
    if "needsReimage" in s:
        lines += ["", "Rollout needed after `pulumi up` (gb300 rollout: bootstrap changed since the deployed state)"]
        lines += [f"  {group:<20} {_n(count):>7} scale sets/VMs" for group, count in s["needsReimage"].items()]
        if not s["needsReimage"]:
            lines.append(
                "  none: no deployed scale set's model changes (which VMs still run an old one is Azure's to say: "
                "gb300 status)"
            )
    lines += ["", f"Resources ({_n(s['resourceCount'])})"]
    width = max((len(typ) for typ in s["resourcesByType"]), default=0)  # the compute package's tokens are long
    lines += [f"  {typ:<{width}} {_n(count):>6}" for typ, count in s["resourcesByType"].items()]
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
