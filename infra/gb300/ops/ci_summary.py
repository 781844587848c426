"""Render `gb300 plan --json` files as a short Markdown summary for a pull request comment.

CI runs this file directly (`python3 -I infra/gb300/ops/ci_summary.py --stacks '["dev"]' plan-*.json`) in a job
that has not installed the project, so it uses the standard library only (`-I` keeps this directory off
`sys.path`, where a sibling module could shadow a standard one). A stack named in `--stacks`
without a plan file is reported as "no plan": `gb300 plan` stopped before writing one (exit 2, bad
config), and the job log says why.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MARKER = "<!-- gb300-plan -->"
MAX_FINDINGS = 20


@dataclass(frozen=True)
class Finding:
    """One finding as the plan JSON carries it."""

    rule: str
    level: str
    resource: str
    message: str


@dataclass(frozen=True)
class Suppression:
    """A rule the stack's gb300:policy.suppress switched off, why, and how many findings it hides."""

    rule: str
    reason: str
    hidden: int


@dataclass(frozen=True)
class Deployed:
    """What the plan changes in the deployed state (``gb300 plan --state``): adds, destroys, the head replaced,
    racks whose bootstrap changed (to roll out after ``pulumi up``)."""

    adds: tuple[int | None, int | None]  # resources, VMs
    destroys: tuple[int | None, int | None]
    replaced: tuple[str, ...]
    reimage: Mapping[str, int]
    line: str = ""  # impact_line: what the change destroys, in the words the text plan uses too


@dataclass(frozen=True)
class CostDigest:
    """The plan's cost (``summary.cost``): the known totals, how many prices are unknown, and the change."""

    currency: str
    hourly: float
    monthly: float
    unknown: int
    change_hourly: float | None = None
    change_monthly: float | None = None
    changes: tuple[str, ...] = ()
    headline: str = ""  # cost_headline: the known total and what it leaves out
    change_unknown: tuple[str, ...] = ()  # what the change moves whose price is unknown
    change_known_hourly: float | None = None


@dataclass(frozen=True)
class PlanDigest:
    """What the summary shows of one stack's plan."""

    stack: str
    racks: int | None
    vms: int | None
    gpus: int | None
    vcpus: Mapping[str, int]
    findings: tuple[Finding, ...]
    suppressed: tuple[Suppression, ...] = ()
    deployed: Deployed | None = None  # None: planned without the deployed state
    cost: CostDigest | None = None

    def count(self, level: str) -> int:
        """Number of findings at `level` (case-insensitive)."""
        return sum(1 for f in self.findings if f.level.lower() == level)


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _pair(value: Any) -> tuple[int | None, int | None]:
    body: Mapping[str, Any] = value if isinstance(value, Mapping) else {}
    return _int_or_none(body.get("resources")), _int_or_none(body.get("vms"))


def _deployed(summary: Mapping[str, Any]) -> Deployed | None:
    if "destroys" not in summary:
        return None
    reimage_raw = summary.get("needsReimage")
    reimage_map: Mapping[str, Any] = reimage_raw if isinstance(reimage_raw, Mapping) else {}
    reimage = {str(k): v for k, v in reimage_map.items() if isinstance(v, int)}
    replaced_raw = summary.get("replacesVms")
    replaced = tuple(str(v) for v in replaced_raw) if isinstance(replaced_raw, list) else ()
    return Deployed(
        _pair(summary.get("adds")), _pair(summary.get("destroys")), replaced, reimage, impact_line(summary) or ""
    )


def _many(count: int, what: str) -> str:
    """``1 VM``, ``4 rack scale sets``, ``2 x rack scale set (a gb300 0.1 dynamic resource)``."""
    if count == 1:
        return f"1 {what}"
    return f"{count:,} x {what}" if "(" in what else f"{count:,} {what}s"


def _counts(raw: Any) -> list[tuple[str, int]]:
    body: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    return [(str(k), v) for k, v in body.items() if isinstance(v, int) and not isinstance(v, bool) and v > 0]


def _names(raw: Any) -> list[str]:
    return [str(v) for v in raw] if isinstance(raw, list) else []


def impact_line(summary: Mapping[str, Any]) -> str | None:
    """What a change destroys, in one line: the VMs destroyed and in what, the machines replaced (the head
    included), the data at risk, and the other resources deleted (a rack's ``-logs`` association), counted apart
    so they never read as machines. None when the plan ran without the deployed state.

    One implementation for both readers: the text plan (``gb300 plan --state``, gb300.plan.render) and this
    pull request comment print this line, from ``summary.destroys`` (gb300.rules.destroy.summary).
    """
    raw = summary.get("destroys")
    if not isinstance(raw, Mapping):
        return None
    vms = _int_or_none(raw.get("vms")) or 0
    replaced = _names(raw.get("replaced")) or _names(summary.get("replacesVms"))
    kinds = _counts(raw.get("kinds"))
    shown = [_many(n, what) for what, n in kinds if not (what == "VM" and n == vms and replaced)]
    line = f"Destroys {_many(vms, 'VM')}" + (f" ({', '.join(shown)})" if shown and vms else "")
    if not vms and kinds:
        line += f" and {', '.join(_many(n, what) for what, n in kinds)}"
    line += f"; replaces {', '.join(replaced)}" if replaced else "; replaces no machine"
    at_risk = _names(raw.get("dataAtRisk"))
    line += f"; data at risk: {', '.join(at_risk)}" if at_risk else "; no data at risk"
    others = _counts(raw.get("others"))
    if others:
        total = sum(n for _, n in others)
        line += f"; also deletes {total:,} other resource(s): " + ", ".join(f"{n:,} {what}" for what, n in others)
    return line + "."


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _money(value: float, currency: str, *, sign: bool = False) -> str:
    digits = 2 if abs(value) >= 10 or value == 0 else 4
    return f"{value:{'+' if sign else ''},.{digits}f} {currency}"


def _qty(value: Any) -> str:
    number = _number(value)
    if number is None:
        return "?"
    return f"{number:,.0f}" if number.is_integer() else f"{number:,.2f}"


def excludes_clause(cost: Mapping[str, Any]) -> str:
    """What a cost total leaves out, in the words the text plan, the plan JSON (``summary.cost.headline``) and this
    comment all use: ``excludes 1,152 Standard_ND128isr_GB300_v6 VMs: price unknown; give it with --prices FILE``.
    """
    rows = [r for r in (cost.get("excludes") or []) if isinstance(r, Mapping)]
    if not rows and cost.get("unknown"):
        rows = [r for r in cost.get("unknown") or [] if isinstance(r, Mapping)]  # an older plan: no labels
    if not rows:
        return "every price known"
    labels = [str(r.get("label") or f"{_qty(r.get('quantity'))} x {r.get('meter')}") for r in rows]
    shown = ", ".join(labels[:4]) + (f" and {len(labels) - 4:,} more" if len(labels) > 4 else "")
    them = "it" if len(labels) == 1 else "them"
    return f"excludes {shown}: price unknown; give {them} with --prices FILE (docs/cost.md)"


def can_dominate(cost: Mapping[str, Any]) -> bool:
    """Whether what the total leaves out can outweigh what it holds: a VM size with no price (a GPU VM costs
    hundreds of times its OS disk), so the total is a lower bound and the headline leads with what is missing."""
    rows = [r for r in (cost.get("excludes") or cost.get("unknown") or []) if isinstance(r, Mapping)]
    return any(str(r.get("meter", "")).startswith("vm/") for r in rows)


def cost_headline(cost: Mapping[str, Any]) -> str:
    """The known monthly total and :func:`excludes_clause`; when an unpriced VM size can dominate, the line leads
    with ``lower bound:`` and what is missing, and the known total follows as ``the priced part``."""
    monthly = _number(cost.get("monthly"))
    known = "-" if monthly is None else _money(monthly, str(cost.get("currency") or ""))
    clause = excludes_clause(cost)
    if can_dominate(cost):
        return f"lower bound: {clause}; the priced part alone is {known} a month"
    if clause != "every price known":
        return f"at least {known} a month; {clause}"
    return f"{known} a month; {clause}"


def cost_digest(raw: Any) -> CostDigest | None:
    """The cost part of a plan's summary, or None when the plan has none (an older gb300)."""
    if not isinstance(raw, Mapping):
        return None
    hourly, monthly = _number(raw.get("hourly")), _number(raw.get("monthly"))
    if hourly is None or monthly is None:
        return None
    currency = str(raw.get("currency") or "")
    unknown = raw.get("unknown")
    change = raw.get("change") if isinstance(raw.get("change"), Mapping) else None
    changes: list[str] = []
    for row in (change or {}).get("items") or []:
        if not isinstance(row, Mapping):
            continue
        delta = _number(row.get("hourly"))
        money = "price unknown" if delta is None else f"{_money(delta, currency, sign=True)} per hour"
        moved = f"{_qty(row.get('before'))} -> {_qty(row.get('after'))}"
        changes.append(f"{row.get('item')}: `{row.get('meter')}` {moved}: {money}")
    return CostDigest(
        currency=currency,
        hourly=hourly,
        monthly=monthly,
        unknown=len(unknown) if isinstance(unknown, list) else 0,
        change_hourly=_number(change.get("hourly")) if change else None,
        change_monthly=_number(change.get("monthly")) if change else None,
        changes=tuple(changes),
        headline=cost_headline(raw),
        change_unknown=tuple(str(u) for u in (change or {}).get("unknown") or []),
        change_known_hourly=_number(change.get("knownHourly")) if change else None,
    )


def digest(plan: Mapping[str, Any], fallback_stack: str) -> PlanDigest:
    """Reduce a plan JSON document to the fields the summary shows; missing fields stay empty."""
    summary_raw = plan.get("summary")
    summary: Mapping[str, Any] = summary_raw if isinstance(summary_raw, Mapping) else {}
    vcpus_raw = summary.get("vcpus")
    vcpus: dict[str, int] = {}
    if isinstance(vcpus_raw, Mapping):
        vcpus = {str(k): v for k, v in vcpus_raw.items() if isinstance(v, int)}
    elif isinstance(vcpus_raw, int):
        vcpus = {"total": vcpus_raw}
    findings_raw = plan.get("findings")
    findings = tuple(
        Finding(
            rule=str(f.get("rule", "")),
            level=str(f.get("level", "")),
            resource=str(f.get("resource", "")),
            message=str(f.get("message", "")),
        )
        for f in (findings_raw if isinstance(findings_raw, list) else [])
        if isinstance(f, Mapping)
    )
    suppressed_raw = plan.get("suppressed")
    suppressed = tuple(
        Suppression(
            rule=str(s.get("rule", "")),
            reason=str(s.get("reason") or "no reason given"),
            hidden=len(s["hidden"]) if isinstance(s.get("hidden"), list) else 0,
        )
        for s in (suppressed_raw if isinstance(suppressed_raw, list) else [])
        if isinstance(s, Mapping)
    )
    return PlanDigest(
        stack=str(plan.get("stack") or fallback_stack),
        racks=_int_or_none(summary.get("racks")),
        vms=_int_or_none(summary.get("vms")),
        gpus=_int_or_none(summary.get("gpus")),
        vcpus=vcpus,
        findings=findings,
        suppressed=suppressed,
        deployed=_deployed(summary),
        cost=cost_digest(summary.get("cost")),
    )


def _num(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render(digests: Iterable[PlanDigest], expected: Sequence[str] = (), run_url: str = "") -> str:
    """Markdown: one table row per stack, then the error and warning findings (at most MAX_FINDINGS)."""
    by_stack = {d.stack: d for d in digests}
    lines = [MARKER, "### gb300 plan", ""]
    lines += ["| stack | racks | VMs | GPUs | vCPUs by quota family | errors | warnings |"]
    lines += ["|---|---:|---:|---:|---|---:|---:|"]
    for stack in sorted(set(expected) | set(by_stack)):
        d = by_stack.get(stack)
        if d is None:
            lines.append(f"| `{stack}` | no plan: see the job log | | | | | |")
            continue
        vcpus = ", ".join(f"{n:,} {family}" for family, n in sorted(d.vcpus.items())) or "-"
        row = [f"`{stack}`", _num(d.racks), _num(d.vms), _num(d.gpus), vcpus]
        row += [str(d.count("error")), str(d.count("warning"))]
        lines.append("| " + " | ".join(row) + " |")
    lines += _deployed_lines(by_stack, expected)
    lines += _cost_lines(by_stack)
    suppressed = [(d.stack, s) for d in by_stack.values() for s in d.suppressed]
    if suppressed:  # never folded away: a switched-off rule is something a reviewer must see
        lines += ["", f"**Suppressed rules ({len(suppressed)})**, from `gb300:policy.suppress`:", ""]
        lines += ["| stack | rule | reason | findings hidden |", "|---|---|---|---:|"]
        for stack, sup in sorted(suppressed, key=lambda ss: (ss[0], ss[1].rule)):
            lines.append(f"| `{stack}` | `{sup.rule}` | {_cell(sup.reason)} | {sup.hidden} |")
    notable = [(d.stack, f) for d in by_stack.values() for f in d.findings if f.level.lower() in {"error", "warning"}]
    notable.sort(key=lambda sf: (sf[1].level.lower() != "error", sf[0], sf[1].rule))
    if notable:
        lines += ["", f"<details><summary>Errors and warnings ({len(notable)})</summary>", ""]
        lines += ["| stack | level | rule | where | message |", "|---|---|---|---|---|"]
        for stack, f in notable[:MAX_FINDINGS]:
            cells = [f"`{stack}`", f.level.upper(), f"`{f.rule}`", _cell(f.resource), _cell(f.message)]
            lines.append("| " + " | ".join(cells) + " |")
        if len(notable) > MAX_FINDINGS:
            lines.append(f"\n{len(notable) - MAX_FINDINGS} more in the plan artifacts.")
        lines += ["", "</details>"]
    if run_url:
        lines += ["", f"Plans (JSON): {run_url}"]
    return "\n".join(lines) + "\n"


def _counted(pair: tuple[int | None, int | None]) -> str:
    resources, vms = pair
    if resources is None:
        return "-"
    return f"{resources:,} resource(s)" + (f", {vms:,} VM(s)" if vms else "")


def _deployed_lines(by_stack: Mapping[str, PlanDigest], expected: Sequence[str]) -> list[str]:
    """The change against the deployed state, per stack: what a reviewer approves when the pull request merges."""
    title = "**Against the deployed state** (`gb300 plan --state` on the export that the last deploy or drift run"
    lines = ["", f"{title} published with its secrets stripped):", ""]
    lines += ["| stack | adds | destroys | head replaced | racks to roll out after `pulumi up` |"]
    lines += ["|---|---|---|---|---|"]
    for stack in sorted(set(expected) | set(by_stack)):
        d = by_stack.get(stack)
        if d is None:
            continue
        if d.deployed is None:
            why = "not compared: no deployed state (not deployed yet, or no published export)"
            lines.append(f"| `{stack}` | {why} | | | |")
            continue
        dep = d.deployed
        destroys = _counted(dep.destroys)
        if dep.destroys[0]:
            destroys = f"**{destroys}**"
        head = ", ".join(f"**{name}**" for name in dep.replaced) or "no"
        reimage = ", ".join(f"{n:,} in {pool}" for pool, n in sorted(dep.reimage.items())) or "none"
        lines.append(f"| `{stack}` | {_counted(dep.adds)} | {destroys} | {head} | {reimage} |")
    said = [(stack, by_stack[stack].deployed) for stack in sorted(by_stack) if by_stack[stack].deployed]
    lines += [""] + [f"- `{stack}`: {_cell(dep.line)}" for stack, dep in said if dep and dep.line]
    return lines


def _cost_lines(by_stack: Mapping[str, PlanDigest]) -> list[str]:
    """Each stack's known cost per hour and month, the change against the deployed state, and what moved."""
    costed = [(stack, d.cost) for stack, d in sorted(by_stack.items()) if d.cost is not None]
    if not costed:
        return []
    lines = ["", "**Cost** (known prices; an unknown price is listed in the plan, never counted as zero):", ""]
    lines += ["| stack | per hour | per month | change per hour | change per month | unknown prices |"]
    lines += ["|---|---:|---:|---:|---:|---:|"]
    for stack, c in costed:
        if c.change_unknown:  # never +0.00 for a change that moves a quantity without a price
            change_h = change_m = "**unknown**"
        else:
            change_h = "-" if c.change_hourly is None else _money(c.change_hourly, c.currency, sign=True)
            change_m = "-" if c.change_monthly is None else _money(c.change_monthly, c.currency, sign=True)
        cells = [f"`{stack}`", _money(c.hourly, c.currency), _money(c.monthly, c.currency), change_h, change_m]
        lines.append("| " + " | ".join([*cells, str(c.unknown)]) + " |")
    lines.append("")  # a list right after a table is read as one more row by some renderers
    for stack, c in costed:
        lines.append(f"- `{stack}`: {_cell(c.headline)}")
        if c.change_unknown:
            known = "" if c.change_known_hourly is None else _money(c.change_known_hourly, c.currency, sign=True)
            lines.append(
                f"- `{stack}`: the change's cost is unknown: no price for {_cell(', '.join(c.change_unknown))}"
                + (f" (the priced part: {known} per hour)" if known else "")
            )
        lines += [f"- `{stack}`: {_cell(text)}" for text in c.changes]
    return lines


def load(paths: Iterable[Path]) -> list[PlanDigest]:
    """Read plan files; a path that does not exist (an unmatched shell glob) is skipped."""
    digests = []
    for path in paths:
        if not path.is_file():
            continue
        fallback = path.name.removeprefix("plan-").removesuffix(".json")
        digests.append(digest(json.loads(path.read_text(encoding="utf-8")), fallback))
    return digests


def main(argv: Sequence[str] | None = None) -> int:
    """Print the summary of the given plan files to stdout."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("plans", nargs="*", type=Path, help="plan JSON files (gb300 plan --json)")
    parser.add_argument("--stacks", default="[]", help="JSON array of the stacks that should have a plan")
    parser.add_argument("--run-url", default="", help="link to the CI run with the artifacts")
    args = parser.parse_args(argv)
    expected = json.loads(args.stacks)
    if not isinstance(expected, list):
        parser.error(f"'--stacks' must be a JSON array of names (got {args.stacks!r})")
    sys.stdout.write(render(load(args.plans), [str(s) for s in expected], args.run_url))
    return 0


if __name__ == "__main__":
    sys.exit(main())
