"""The human summary ``gb300 plan`` prints."""

from __future__ import annotations

import os
import shutil
import sys
import textwrap
from collections.abc import Mapping
from typing import Any

from gb300.azure import credential as azure_credential
from gb300.findings import Finding, Level
from gb300.ops import ci_summary
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
    ]
    impact = ci_summary.impact_line(s)  # the pull request comment prints the same line
    if impact is not None:
        lines += fit(f"Against the deployed state: {impact}")
    lines += ["", "Compute"]
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
    if "azureSubscription" in s:
        lines.append(subscription_line(s["azureSubscription"]))
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
    if s.get("hooks"):
        lines += ["", *glance.hook_lines(s["hooks"])]
    if "needsReimage" in s:
        lines += ["", "Rollout needed after `pulumi up` (gb300 rollout: bootstrap changed since the deployed state)"]
        lines += [f"  {group:<20} {_n(count):>7} scale sets/VMs" for group, count in s["needsReimage"].items()]
        if not s["needsReimage"]:
            lines.append(
                "  none: no deployed scale set's model changes (which VMs still run an old one is Azure's to say: "
                "gb300 status)"
            )
    if "changes" in s:
        replaced = (s.get("destroys") or {}).get("replaced") or []
        lines += ["", *glance.change_lines(s["changes"], impact, replaced)]
    if "cost" in s:
        lines += ["", *cost_lines(s["cost"])]
    lines += ["", *glance.resource_lines(s["resourcesByType"])]
    lines.append("")
    lines += suppressed_lines(result)
    lines += finding_lines(result.findings)
    return "\n".join(lines)


def finding_lines(findings: list[Finding]) -> list[str]:
    """The findings' counts by level, one line per shared cause, then each finding where it was found."""
    if not findings:
        return ["Findings: none"]
    counts = {lvl: sum(1 for f in findings if f.level == lvl) for lvl in Level}
    lines = [
        "Findings: " + ", ".join(f"{counts[lvl]} {lvl.label}" for lvl in sorted(Level, reverse=True) if counts[lvl])
    ]
    summary = finding_groups(findings)
    if summary:
        lines += [*summary, "  each finding:"]
    lines += [f"  {f.level.label:<7} {f.rule}: {f.message}\n          at {f.resource}" for f in findings]
    return lines


def subscription_line(asked: Mapping[str, Any] | None) -> str:
    """Gone live: which subscription Azure's answers (quota, images, Lustre) came from."""
    if asked:
        return f"  live answers from Azure subscription {asked['id']} (from {asked['from']})"
    return f"  live answers: no subscription id ({azure_credential.SUBSCRIPTION_HINT})"


GROUP_AT = 3  # this many findings of one rule, level and cause are summarised in one line before the details


def _cause(f: Finding) -> str:
    """A finding's message with its own resource's name taken out: the racks a pool rename deletes share one."""
    name = f.resource.rsplit("::", 1)[-1]
    return f.message.replace(name, "<name>") if name else f.message


def finding_groups(findings: list[Finding]) -> list[str]:
    """One line per cause that at least GROUP_AT findings share (rule, level and message but the resource's name):
    the count, the first sentence of the message and the first names; the details follow in the full list."""
    groups: dict[tuple[str, Level, str], list[Finding]] = {}
    for f in findings:
        groups.setdefault((f.rule, f.level, _cause(f)), []).append(f)
    lines = []
    for (rule, level, cause), found in groups.items():
        if len(found) < GROUP_AT:
            continue
        names = [f.resource.rsplit("::", 1)[-1] for f in found]
        shown = ", ".join(names[:3]) + (f", ... ({len(names) - 3:,} more)" if len(names) > 3 else "")
        first = cause.split(". ", 1)[0].rstrip(".")
        lines += fit(f"  {level.label:<7} {rule} x{len(found):,}: {first}. <name>: {shown}")
    return lines


def fit(line: str, width: int | None = None) -> list[str]:
    """A summary line wrapped to the terminal's width (``shutil.get_terminal_size``, at least 40 columns), its
    continuation indented under its first word; a line that fits comes back as it is. Printed to no terminal (a
    pipe, a file, a CI log: read by grep and by scripts) and with no ``COLUMNS`` set, lines are not wrapped."""
    if width is None and "COLUMNS" not in os.environ and not sys.stdout.isatty():
        return [line]
    width = max(40, width or shutil.get_terminal_size().columns)
    if len(line) <= width:
        return [line]
    indent = " " * (len(line) - len(line.lstrip()) + 4)
    return textwrap.wrap(line, width, subsequent_indent=indent, break_on_hyphens=False) or [line]


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


TOP_ITEMS = 5


def _money(value: float, currency: str, *, sign: bool = False) -> str:
    """An amount with cents, or with four decimals below 10 (a public IP costs half a cent an hour)."""
    digits = 2 if abs(value) >= 10 or value == 0 else 4
    return f"{value:{'+' if sign else ''},.{digits}f} {currency}"


def _qty(quantity: float, unit: str) -> str:
    text = f"{quantity:,.0f}" if float(quantity).is_integer() else f"{quantity:,.2f}"
    return text if unit == "instance" else f"{text} {unit}"


def cost_lines(cost: Mapping[str, Any]) -> list[str]:
    """The plan's cost: the known total per hour and month, the largest items, what is unknown or usage-based, and
    the change against the deployed state."""
    cur = str(cost["currency"])
    terms = [str(cost["source"]), f"{cost['hoursPerMonth']:g} hours a month"]
    if cost.get("discountPercent"):
        terms.append(f"{cost['discountPercent']:g}% off (gb300:cost.discountPercent)")
    if cost.get("reservationTerm"):
        terms.append(f"{cost['reservationTerm']} reservation")
    unknown = cost.get("unknown") or []
    known = f"{_money(cost['hourly'], cur)} per hour, {_money(cost['monthly'], cur)} per month"
    if ci_summary.can_dominate(cost):  # the pull request comment leads with the same words
        total = f"lower bound: {ci_summary.excludes_clause(cost)}; the priced part alone is {known}"
    else:
        total = f"total {known}; " + ci_summary.excludes_clause(cost)
    lines = [f"Cost ({'; '.join(terms)})", *fit(f"  {total}")]
    items = cost.get("items") or []
    if items:
        lines.append(f"  largest items (of {len(items)})")
        width = max(len(str(i["item"])) for i in items[:TOP_ITEMS])
        lines += [
            f"    {i['item']:<{width}} {_qty(i['quantity'], i['unit']):>12} x {i['meter']:<40} "
            f"{_money(i['hourly'], cur):>18}/h {_money(i['monthly'], cur):>22}/month"
            for i in items[:TOP_ITEMS]
        ]
    if unknown:
        lines.append("  unknown prices (not in the total, never counted as zero)")
        lines += [f"    {u['item']}: {_qty(u['quantity'], u['unit'])} x {u['meter']}: {u['why']}" for u in unknown]
    usage = cost.get("usageBased") or []
    if usage:
        lines.append("  usage-based (not in the total)")
        lines += [f"    {u['type']} x{u['count']}: {u['why']}" for u in usage]
    for est in cost.get("usageEstimates") or []:
        lines.append(f"    estimate: {est['quantity']:,} {est['what']}: {est['basis']}")
    change = cost.get("change")
    if change is not None and change.get("hourly") is None:  # never +0.00 when a moved quantity has no price
        lines.append(
            f"  change against the deployed state: unknown: no price for {', '.join(change.get('unknown') or [])} "
            f"(the priced part: {_money(change.get('knownHourly') or 0.0, cur, sign=True)} per hour, "
            f"{_money(change.get('knownMonthly') or 0.0, cur, sign=True)} per month)"
        )
    elif change is not None:
        lines.append(
            f"  change against the deployed state: {_money(change['hourly'], cur, sign=True)} per hour, "
            f"{_money(change['monthly'], cur, sign=True)} per month (deployed: {_money(change['deployedHourly'], cur)} "
            "per hour)"
        )
    for row in (change or {}).get("items") or []:
        moved = f"{_qty(row['before'], row['unit'])} -> {_qty(row['after'], row['unit'])}"
        delta = (
            "price unknown"
            if row["hourly"] is None
            else f"{_money(row['hourly'], cur, sign=True)}/h, {_money(row['monthly'], cur, sign=True)}/month"
        )
        lines.append(f"    {row['item']}: {row['meter']} {moved}: {delta}")
    if change is not None and not change["items"]:
        lines.append("    nothing priced changes")
    return lines
