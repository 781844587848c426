"""The CrossGuard policy pack: every rule is a policy, it loads under the analyzer protocol, and it gives
``gb300 plan``'s verdict on the same resources with the same settings."""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from typing import Any

import pytest
from google.protobuf import json_format
from pulumi_policy import (
    EnforcementLevel,
    PolicyCustomTimeouts,
    PolicyProviderResource,
    PolicyResource,
    PolicyResourceOptions,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.deserialize import deserialize_properties
from pulumi_policy.proxy import UNKNOWN_STRING_VALUE, unknown_checking_proxy

from gb300 import policy_pack, rules
from gb300.azure import inventory
from gb300.components import compute_package
from gb300.config import PolicySettings
from gb300.findings import Finding
from gb300.plan import PlanResult
from gb300.resources import ResourceRecord
from tests.support.files import FIXTURES
from tests.support.policy_support import account, lustre, struct, with_inputs

PROVIDER = PolicyProviderResource(
    "pulumi:providers:azure-native",
    unknown_checking_proxy({"version": "3.29.0"}),
    "urn:pulumi:reference::gb300::pulumi:providers:azure-native::default",
    "default",
)


def policy_resource(rec: ResourceRecord, inputs: dict[str, Any] | None = None) -> PolicyResource:
    """A resource as the analyzer builds it from the engine's gRPC message (Struct -> deserialize -> proxy)."""
    props = unknown_checking_proxy(deserialize_properties(json_format.MessageToDict(struct(inputs or rec.inputs))))
    opts = PolicyResourceOptions(rec.protect, [], None, [], PolicyCustomTimeouts(0, 0, 0), [], rec.parent)
    return PolicyResource(rec.type, props, rec.urn, rec.name, opts, PROVIDER, None, [], {})


def _NO_CONFIG() -> None:  # noqa: N802 - a constant-like source: the stack config is not read
    return None


def _args(records: Sequence[ResourceRecord], config: dict[str, Any] | None = None) -> StackValidationArgs:
    return StackValidationArgs([policy_resource(r) for r in records], config or {}, {})


def _pack_verdict(
    records: Sequence[ResourceRecord], settings: PolicySettings, config: dict[str, Any] | None = None
) -> tuple[list[tuple[str, str | None, str]], list[tuple[str, str | None, str]]]:
    """(mandatory violations, advisory violations) as (policy, urn, message), from the validate functions."""
    mandatory: list[tuple[str, str | None, str]] = []
    advisory: list[tuple[str, str | None, str]] = []
    args = _args(records, config)
    for policy in policy_pack.policies(
        lambda: settings, _NO_CONFIG
    ):  # resources only: config rules are in the engine tests
        if not isinstance(policy, StackValidationPolicy):
            continue  # the inputs recorder reports nothing
        sink = advisory if policy.enforcement_level == EnforcementLevel.ADVISORY else mandatory
        policy.validate(args, lambda message, urn=None, name=policy.name, sink=sink: sink.append((name, urn, message)))
    return sorted(mandatory, key=str), sorted(advisory, key=str)


def _as_violation(f: Finding, policy: str) -> tuple[str, str | None, str]:
    message, urn = policy_pack.violation(f, advisory=policy == policy_pack.ADVISORIES)
    return (policy, urn, message)


def _plan_verdict(
    records: Sequence[ResourceRecord], settings: PolicySettings
) -> tuple[list[tuple[str, str | None, str]], list[tuple[str, str | None, str]]]:
    findings = rules.evaluate(records, settings)
    fails = rules.failing(findings, settings)
    rest = [f for f in findings if f not in fails]
    return (
        sorted((_as_violation(f, f.rule) for f in fails), key=str),
        sorted((_as_violation(f, policy_pack.ADVISORIES) for f in rest), key=str),
    )


@pytest.fixture(scope="module")
def violating(reference_plan: PlanResult) -> list[ResourceRecord]:
    """The reference stack's resources with violations config cannot express: a partial rack, a split fabric,
    a public IP on a GPU node, a too-big custom data, Lustre and a storage account declared badly."""
    out: list[ResourceRecord] = []
    first = True
    for rec in reference_plan.resources:
        if rec.name == "ref-train-r0001" and rec.type == compute_package.SCALE_SET_TOKEN:
            inputs = copy.deepcopy(rec.inputs)
            inputs["sku"]["capacity"] = 20
            profile = inputs["virtualMachineProfile"]
            other = {"interconnectGroup": {"id": "/subscriptions/x/other-ig"}}
            profile["networkProfile"]["interconnectGroupProfile"] = other
            profile["osProfile"]["customData"] = "A" * 70_000
            nic = profile["networkProfile"]["networkInterfaceConfigurations"][0]
            nic["ipConfigurations"][0]["publicIPAddressConfiguration"] = {"name": "pip"}
            rec = with_inputs(rec, **inputs)  # noqa: PLW2901 - replace the one rack being broken
            first = False
        out.append(rec)
    assert not first
    return [*out, lustre("AMLFS-Durable-Premium-125", 20, zones=["2"]), account(allowSharedKeyAccess=True)]


def test_every_rule_is_a_policy_of_the_pack() -> None:
    """Each resource and config rule of the registry is a mandatory stack policy, plus the advisory policy and the
    inputs recorder; the state rules are not (a pack is not handed the deployed state)."""
    policies = {p.name: p for p in policy_pack.policies(PolicySettings)}
    assert set(policies) == {*rules.RULES, *rules.CONFIG_RULES, policy_pack.ADVISORIES, policy_pack.INPUTS_POLICY}
    assert not rules.STATE_RULES & set(policies)
    for rule_id in {*rules.RULES, *rules.CONFIG_RULES}:
        assert policies[rule_id].enforcement_level == EnforcementLevel.MANDATORY
        assert policies[rule_id].description
    assert policies[policy_pack.ADVISORIES].enforcement_level == EnforcementLevel.ADVISORY
    assert policies["quota-sufficient"].config_schema is not None


def test_reference_stack_passes_the_pack(reference_plan: PlanResult) -> None:
    """On the reference stack's resources the pack reports no mandatory violation, only advisory notes: the quota
    note and the node payload account's public endpoint, and none about account keys (no account allows them)."""
    mandatory, advisory = _pack_verdict(reference_plan.resources, PolicySettings())
    assert mandatory == []
    assert {a[0] for a in advisory} == {policy_pack.ADVISORIES}
    notes = [a[2] for a in advisory]
    assert any("quota not checked" in n for n in notes)
    assert any("holds only signed node payloads" in n for n in notes)
    assert not [n for n in notes if "allowSharedKeyAccess" in n]


def test_tied_stack_passes_the_pack_with_a_note(reference_plan: PlanResult, tied_plan: PlanResult) -> None:
    """A stack tying Lustre to Blob passes too, with one note more than the reference's: the tied account allows
    account keys, which Azure's blob integration requires."""
    mandatory, advisory = _pack_verdict(tied_plan.resources, PolicySettings())
    assert mandatory == []
    assert {a[0] for a in advisory} == {policy_pack.ADVISORIES}
    untied = {a[2] for a in _pack_verdict(reference_plan.resources, PolicySettings())[1]}
    (extra,) = [a[2] for a in advisory if a[2] not in untied]
    assert "allowSharedKeyAccess is true because the Lustre filesystem is tied to it" in extra


@pytest.mark.parametrize(
    "settings",
    [
        pytest.param(PolicySettings(), id="default"),
        pytest.param(PolicySettings(failOn="warning"), id="fail-on-warning"),
        pytest.param(PolicySettings(failOn="info"), id="fail-on-info"),
        pytest.param(PolicySettings(suppress=["custom-data-size", "zone-consistent"]), id="suppress"),
        pytest.param(PolicySettings(requiredTags=["owner", "costCenter", "team"]), id="required-tags"),
    ],
)
def test_same_verdict_as_the_plan(violating: list[ResourceRecord], settings: PolicySettings) -> None:
    """The pack's mandatory violations are exactly the plan's failing findings, and its advisories the rest."""
    mandatory, advisory = _pack_verdict(violating, settings)
    plan = _plan_verdict(violating, settings)
    notes = [a for a in advisory if a[2].startswith("[suppressed")]
    assert (mandatory, [a for a in advisory if a not in notes]) == plan
    assert plan[0] or settings.suppress  # the violating stack fails under every setting tried
    for rule_id in settings.suppressed:  # a suppression is never silent in the pack either
        assert any(f"gb300:policy.suppress: rule {rule_id} does not run" in n[2] for n in notes)


def test_violating_resources_fire_each_rule_in_the_pack(violating: list[ResourceRecord]) -> None:
    """Each rule broken by the violating resources fails its own policy in the pack."""
    mandatory, _ = _pack_verdict(violating, PolicySettings())
    assert {m[0] for m in mandatory} >= {
        "gpu-pool-rack-aligned",
        "ib-fabric-within-limits",
        "no-public-ip-on-nodes",
        "custom-data-size",
        "lustre-capacity-valid",
        "zone-consistent",
        "storage-no-public-access",
    }


def test_unknown_preview_values_do_not_break_rules(reference_plan: PlanResult) -> None:
    """Values a preview cannot know yet (ids) reach the rules as absent: no crash, no false finding."""
    records = []
    for rec in reference_plan.resources:
        inputs = copy.deepcopy(rec.inputs)
        if inventory.is_scale_set(rec):
            profile = inputs["virtualMachineProfile"]["networkProfile"]
            profile["interconnectGroupProfile"]["interconnectGroup"]["id"] = UNKNOWN_STRING_VALUE
            ipc = profile["networkInterfaceConfigurations"][0]["ipConfigurations"][0]
            ipc["subnet"]["id"] = UNKNOWN_STRING_VALUE
        records.append(policy_resource(rec, inputs))
    failures: list[str] = []
    for policy in policy_pack.policies(PolicySettings, _NO_CONFIG):
        if not isinstance(policy, StackValidationPolicy):
            continue
        if policy.enforcement_level == EnforcementLevel.MANDATORY:
            policy.validate(StackValidationArgs(records, {}, {}), lambda message, urn=None: failures.append(message))
    assert failures == []


def test_pack_config_sets_the_quota_source(reference_plan: PlanResult) -> None:
    """`--policy-pack-config {"quota-sufficient": {"quota": FILE}}` makes the pack check quota as the plan would."""
    too_little = str(FIXTURES / "quota" / "eastus2-too-little.json")
    mandatory, _ = _pack_verdict(reference_plan.resources, PolicySettings(), {"quota": too_little})
    assert [m[0] for m in mandatory] == ["quota-sufficient", "quota-sufficient"]
    assert any("requested 147,456 vCPUs, in use 2,304, limit 100,000" in m[2] for m in mandatory)


def test_stack_settings_come_from_the_stack_config() -> None:
    """The pack reads gb300:policy from the stack configuration the engine passes it (JSON text per key)."""
    values = {"gb300:policy": json.dumps({"failOn": "warning", "suppress": ["required-tags"]}), "gb300:cluster": "{}"}
    settings = policy_pack.stack_settings(values)
    assert settings.fail_on == "warning"
    assert settings.suppressed == {"required-tags"}
    assert policy_pack.stack_settings({}) == PolicySettings()
