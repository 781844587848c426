"""The CrossGuard front end: every rule of the registry (:data:`gb300.rules.PACK_RULES`) as a stack policy.

``pulumi preview --policy-pack policies`` runs it. It gives the findings ``gb300 plan`` gives on the same
resources because it evaluates the same registry with the same settings: the resource rules over the resources,
the config rules over the stack's config (which the engine hands the pack as it hands it to the program). Only
the state rules stay with ``gb300 plan --state``: a pack is not handed the deployed state.

* **Settings** come from the stack's own ``gb300:policy`` (``failOn``, ``suppress``, ``requiredTags``,
  ``quota``), which the Pulumi engine hands to policy packs as it hands it to the program. A policy pack
  config file (``--policy-pack-config``) may override the quota source for the ``quota-sufficient`` policy
  (``{"quota-sufficient": {"quota": "live"}}``) and, as for any pack, disable a policy
  (``{"<rule-id>": "disabled"}``, the same as suppressing it).
* **Verdict**: each rule's policy is *mandatory* and reports only the findings at or above ``failOn``, so
  the preview fails exactly when the plan does. Findings below ``failOn`` (the plan prints them too) are
  reported by the *advisory* policy ``gb300-advisories``, which never fails a preview.
* **Suppressions** (``gb300:policy.suppress``) are never silent: ``gb300-advisories`` reports each one with its
  reason and the findings it hides. A security rule suppressed without a reason (or an unknown id) is not
  suppressed at all, and the program itself refuses such a list under ``pulumi preview``/``up``, as
  ``gb300 plan`` does.

**What the rules read.** The engine hands a stack policy each resource's *outputs*; in a preview those are,
for a resource being created, only what its provider can foresee (azure-native: the keys of the response
schema, most of them unknown; a provider without preview support: its inputs). The rules read inputs, as the
plan records them. So the pack also has one resource policy, ``gb300-resource-inputs``, that reports nothing:
the engine calls it (``Analyze``) with every resource's inputs before it plans that resource's step, it keeps
them by URN, and the stack policies read those inputs, falling back to a resource's outputs only when no
inputs were seen for it (a ``--target`` run). The GPU scale sets also carry their marker and ARM body in
their outputs, so they are recognised either way. ``docs/policy-pack.md`` has the whole contract.

Properties a preview cannot know yet (ids of resources not created) reach the rules as
:data:`gb300.resources.UNKNOWN`, so a rule that needs them stays silent rather than failing the preview.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    Policy,
    PolicyConfigSchema,
    PolicyPack,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.proxy import UnknownValueError

from gb300 import config, floors, paths, rules
from gb300.azure import quota
from gb300.config import PolicySettings, StackConfig
from gb300.errors import ConfigError
from gb300.findings import Finding, Level
from gb300.resources import UNKNOWN, Resource

PACK_NAME = "gb300"
ADVISORIES = "gb300-advisories"
INPUTS_POLICY = "gb300-resource-inputs"
QUOTA_RULE = rules.quota.quota_sufficient.id
QUOTA_SCHEMA = PolicyConfigSchema(
    properties={"quota": {"type": "string", "description": "'live' or a saved `az vm list-usage -o json` file"}}
)


@dataclass(frozen=True)
class PolicyResourceView:
    """A policy pack resource in the shape rules read (urn, type, name, inputs)."""

    urn: str
    type: str
    name: str
    inputs: Mapping[str, Any]


def plain(value: Any) -> Any:
    """Policy props as plain data: unknown preview values become UNKNOWN, whole floats become ints."""
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key in value:
            try:
                out[str(key)] = plain(value[key])
            except UnknownValueError:
                out[str(key)] = UNKNOWN
        return out
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        items: list[Any] = []
        for i in range(len(value)):
            try:
                items.append(plain(value[i]))
            except UnknownValueError:
                items.append(UNKNOWN)
        return items
    if isinstance(value, float) and value.is_integer():
        return int(value)
    inner = getattr(value, "value", None)
    if type(value).__name__ == "Secret" and inner is not None:
        return plain(inner)
    return value


class InputsSeen:
    """Each resource's inputs as the engine's per-resource ``Analyze`` calls passed them, by URN.

    The engine starts the pack once per preview or update and calls ``Analyze`` for every resource the program
    registers (possibly in parallel) before the one ``AnalyzeStack`` call at the end.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_urn: dict[str, PolicyResourceView] = {}

    def record(self, view: PolicyResourceView) -> None:
        with self._lock:
            self._by_urn[view.urn] = view

    def get(self, urn: str) -> PolicyResourceView | None:
        with self._lock:
            return self._by_urn.get(urn)

    def clear(self) -> None:
        with self._lock:
            self._by_urn.clear()


SEEN = InputsSeen()


def inputs_recorder(seen: InputsSeen = SEEN) -> Callable[..., None]:
    """The validate function of ``gb300-resource-inputs``: keep the resource's inputs; report nothing."""

    def validate(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
        del report_violation
        seen.record(PolicyResourceView(args.urn, args.resource_type, args.name, plain(args.props)))

    return validate


def views(args: StackValidationArgs, seen: InputsSeen = SEEN) -> list[Resource]:
    """The stack's resources in the shape rules read: the inputs ``Analyze`` saw, else the outputs."""
    out: list[Resource] = []
    for r in args.resources:
        known = seen.get(r.urn)
        if known is not None and known.type == r.resource_type:
            out.append(known)
        else:
            out.append(PolicyResourceView(r.urn, r.resource_type, r.name, plain(r.props)))
    return out


def _engine_config() -> dict[str, str]:
    import pulumi  # noqa: PLC0415 - the engine's config is read at validation time, not import time

    return {**pulumi.runtime.config.get_config_env(), **pulumi.runtime.config.CONFIG.get()}


def stack_settings(values: Mapping[str, str] | None = None) -> PolicySettings:
    """``gb300:policy`` from the stack configuration the engine passes to the pack (defaults when unset)."""
    if values is None:
        values = _engine_config()
    raw = config.from_pulumi_config(values).get("policy")
    if raw is None:
        return PolicySettings()
    try:
        settings = PolicySettings.model_validate(raw)
    except ValueError:
        # The program validates the same key and fails the preview with a message naming it.
        return PolicySettings()
    if rules.unknown_suppressions(settings):
        # A security rule suppressed without a reason (or an unknown id): suppress nothing, so every rule runs.
        return settings.model_copy(update={"suppress": []})
    return settings


_CONFIGS: dict[str, StackConfig | None] = {}


def stack_config(values: Mapping[str, str] | None = None) -> StackConfig | None:
    """The whole stack config, typed, for the config rules; None when it is invalid (the program then fails the
    preview naming each key) or has no ``gb300`` namespace. Parsed once per distinct configuration."""
    if values is None:
        values = _engine_config()
    key = json.dumps(dict(values), sort_keys=True)
    if key not in _CONFIGS:
        raw = config.from_pulumi_config(values)
        try:
            _CONFIGS[key] = config.parse(raw) if raw else None
        except ConfigError:
            _CONFIGS[key] = None
    return _CONFIGS[key]


_SNAPSHOTS: dict[tuple[str, tuple[str, ...]], quota.QuotaSnapshot] = {}


def _snapshot(source: str | None, resources: Sequence[Resource]) -> quota.QuotaSnapshot | None:
    """Azure's quota for the pack, fetched once per source and set of regions (every policy shares it)."""
    if not source:
        return None
    key = (source, tuple(sorted(quota.regions_of(resources))))
    if key not in _SNAPSHOTS:
        _SNAPSHOTS[key] = quota.fetch(source, resources, base=paths.REPO_ROOT)
    return _SNAPSHOTS[key]


SettingsSource = Callable[[], PolicySettings]
ConfigSource = Callable[[], StackConfig | None]


def _context(
    args: StackValidationArgs, resources: Sequence[Resource], settings: PolicySettings, stack: ConfigSource
) -> rules.RuleContext:
    source = str(args.get_config().get("quota") or "") or settings.quota
    # The stack's name, as every URN carries it (urn:pulumi:<stack>::<project>::...): stack-identity reads it.
    names = {r.urn.split(":", 3)[2].split("::", 1)[0] for r in resources if r.urn.startswith("urn:pulumi:")}
    return rules.RuleContext(
        policy=settings,
        quota=_snapshot(source, resources),
        config=stack(),
        stack=names.pop() if len(names) == 1 else None,
    )


def violation(finding: Finding, *, advisory: bool = False) -> tuple[str, str | None]:
    """(message, urn) of a finding as the pack reports it. A rule's own policy names the rule; the advisory
    policy, which reports every rule's findings, writes the rule id after the level."""
    urn = finding.resource if finding.resource.startswith("urn:") else None
    where = "" if urn else f"{finding.resource}: "
    rule = f"{finding.rule}: " if advisory else ""
    return f"[{finding.level.label}] {rule}{where}{finding.message}", urn


def _report(finding: Finding, report_violation: ReportViolation, *, advisory: bool = False) -> None:
    message, urn = violation(finding, advisory=advisory)
    report_violation(message, urn)


def rule_validator(
    rule_id: str, settings: SettingsSource = stack_settings, stack: ConfigSource = stack_config
) -> Callable[..., None]:
    """The validate function of rule ``rule_id``'s policy: it reports the findings that fail the plan."""
    rule = rules.BY_ID[rule_id]

    def validate(args: StackValidationArgs, report_violation: ReportViolation) -> None:
        policy = settings()
        if rule_id in policy.suppressed:
            return
        resources = views(args)
        ctx = _context(args, resources, policy, stack)
        for finding in rules.failing(rules.assess(resources, ctx, rules=[rule]).findings, policy):
            _report(finding, report_violation)

    return validate


def advisory_validator(
    settings: SettingsSource = stack_settings, stack: ConfigSource = stack_config
) -> Callable[..., None]:
    """The validate function of ``gb300-advisories``: every finding below ``failOn``, never failing."""

    def validate(args: StackValidationArgs, report_violation: ReportViolation) -> None:
        policy = settings()
        resources = views(args)
        ctx = _context(args, resources, policy, stack)
        threshold = Level.parse(policy.fail_on)
        reasons = {s.rule: s.reason for s in policy.suppress}
        assessed = rules.assess(resources, ctx, rules=rules.PACK_RULES)
        for rule_id, hidden in assessed.hidden.items():
            _report_suppressed(rule_id, reasons[rule_id], hidden, report_violation)
        for finding in assessed.findings:
            if finding.level < threshold:
                _report(finding, report_violation, advisory=True)

    return validate


def _report_suppressed(
    rule_id: str, reason: str | None, hidden: Sequence[Finding], report_violation: ReportViolation
) -> None:
    """A suppression is never silent: the advisory policy names it, its reason, and what it hides."""
    why = f" (reason: {reason})" if reason else " (no reason given)"
    report_violation(
        f"[suppressed] gb300:policy.suppress: rule {rule_id} does not run{why}; it would report "
        f"{len(hidden)} finding(s)",
        None,
    )
    for finding in hidden:
        urn = finding.resource if finding.resource.startswith("urn:") else None
        report_violation(f"[suppressed {finding.level.label}] {rule_id}: {finding.message}", urn)


def policies(settings: SettingsSource = stack_settings, stack: ConfigSource = stack_config) -> list[Policy]:
    """One mandatory policy per rule id (description: the rule's docstring), the advisory policy, and the
    resource policy that keeps each resource's inputs for them."""
    out: list[Policy] = [
        ResourceValidationPolicy(
            name=INPUTS_POLICY,
            description="keeps each resource's inputs for the gb300 stack policies (reports nothing)",
            enforcement_level=EnforcementLevel.ADVISORY,
            validate=inputs_recorder(),
        )
    ]
    for rule in rules.PACK_RULES:
        out.append(
            StackValidationPolicy(
                name=rule.id,
                description=rule.summary,
                enforcement_level=EnforcementLevel.MANDATORY,
                validate=rule_validator(rule.id, settings, stack),
                config_schema=QUOTA_SCHEMA if rule.id == QUOTA_RULE else None,
            )
        )
    out.append(
        StackValidationPolicy(
            name=ADVISORIES,
            description="gb300 findings below gb300:policy.failOn (shown, never failing the preview)",
            enforcement_level=EnforcementLevel.ADVISORY,
            validate=advisory_validator(settings, stack),
            config_schema=QUOTA_SCHEMA,
        )
    )
    return out


def build_pack() -> PolicyPack:
    """The pack, once the installed Pulumi packages are at or above their floors (``data/floors.yaml``); below
    one, the pack's process exits with one line per package (no traceback), which the engine shows."""
    too_old = floors.package_problems()
    if too_old:
        raise SystemExit("\n".join(too_old))
    return PolicyPack(name=PACK_NAME, policies=policies(), enforcement_level=EnforcementLevel.MANDATORY)
