"""The policy pack under the Pulumi engine's contract, driven over its gRPC protocol as `pulumi preview` drives it.

The engine (pulumi/pulumi ``pkg/resource/deploy/step_generator.go``) calls ``Analyze`` once per registered
resource with its inputs, then ``AnalyzeStack`` once with every resource's *outputs*. In a preview of a new
stack those outputs are what each provider foresees: azure-native answers with the keys of the resource's
response schema (computed ones unknown); a provider without preview support (Pulumi's Python dynamic
provider) answers with the inputs (``pkg/resource/plugin/provider_plugin.go``, ``Create`` with ``Preview``).
Ids of resources not created yet are unknown everywhere. These tests build exactly that and compare what the
pack reports with what ``gb300 plan`` reports: both evaluate the one rule registry.

Each pack is a real process (tests/support/policy_process.py), sent ``ConfigureStack`` before any other call as
the engine sends it. How the engine itself starts the pack and drives it is run for real by
tests/engine/test_policy_pack_preview.py and tests/engine/test_dev_stack.py (docs/engine-contract.md); these tests
are the fast check of the pack's protocol against the plan, finding by finding.
"""

from __future__ import annotations

import contextlib
import copy
import importlib
import json
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import empty_pb2
from pulumi.runtime.proto import analyzer_pb2, analyzer_pb2_grpc
from pulumi_policy.proxy import UNKNOWN_STRING_VALUE

from gb300 import config, policy_pack, rules
from gb300.config import PolicySettings
from gb300.findings import Finding, Level
from gb300.plan import PlanResult, run_plan
from gb300.plan.mocks import SUBSCRIPTION_ID
from gb300.resources import ResourceRecord
from tests.support import policy_process
from tests.support.files import FIXTURES
from tests.support.policy_support import struct, with_inputs

TOO_LITTLE = FIXTURES / "quota" / "eastus2-too-little.json"
X86_IMAGE = "canonical:ubuntu-24_04-lts:server:latest"
PENDING_ID = f"/subscriptions/{SUBSCRIPTION_ID}/resourceGroups/"  # every id the first deploy has yet to create


def _unknown_ids(value: Any) -> Any:
    """Inputs as a first preview sees them: ids of resources not created yet are unknown."""
    if isinstance(value, str) and value.startswith(PENDING_ID):
        return UNKNOWN_STRING_VALUE
    if isinstance(value, dict):
        return {k: _unknown_ids(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unknown_ids(v) for v in value]
    return value


def _output_names(typ: str) -> set[str] | None:
    """The output properties of a typed resource (its SDK class's getters), or None for a type without a class. A
    resource of azure-native's compute 2026-03-01 package is read through the default SDK's class of the same name
    (API 2024-11-01): the outputs a preview computes are its inputs' shape either way."""
    package, _, rest = typ.partition(":")
    module, _, name = rest.rpartition(":")
    if package == "azure-native" or package.startswith("azure-native_"):
        module_name = f"pulumi_azure_native.{module}"
    elif package == "random":
        module_name = "pulumi_random"
    else:
        return None
    cls = getattr(importlib.import_module(module_name), name, None)
    if cls is None:
        return None
    return {
        v.fget._pulumi_name for v in vars(cls).values() if isinstance(v, property) and hasattr(v.fget, "_pulumi_name")
    }


def preview_outputs(rec: ResourceRecord) -> dict[str, Any]:
    """What ``AnalyzeStack`` receives for ``rec`` in a preview that creates it."""
    inputs = _unknown_ids(rec.inputs)
    if rec.type.startswith("pulumi-python:dynamic:"):
        return inputs  # no preview support: the engine hands back the inputs
    names = _output_names(rec.type)
    if names is None:
        return {}  # a component: its registered outputs, which no rule reads
    return {k: inputs.get(k, UNKNOWN_STRING_VALUE) for k in sorted(names)}


@contextlib.contextmanager
def _pack(stack_config: dict[str, str]) -> Iterator[analyzer_pb2_grpc.AnalyzerStub]:
    """A pack process for one preview (:func:`policy_process.pack_process`), with ``stack_config`` as the stack's
    config."""
    with policy_process.pack_process("reference", stack_config) as pack:
        yield pack


@pytest.fixture
def fresh_pack() -> Iterator[analyzer_pb2_grpc.AnalyzerStub]:
    """A new pack process per test, as the engine starts one per preview; the stack sets no gb300:policy."""
    with _pack({}) as pack:
        yield pack


@pytest.fixture(scope="module")
def pack_process() -> Iterator[analyzer_pb2_grpc.AnalyzerStub]:
    """One pack process with a stack config that fails on warnings, shared by the tests that only read from it."""
    with _pack({"gb300:policy": json.dumps({"failOn": "warning"})}) as pack:
        yield pack


def _diagnostics(
    pack: analyzer_pb2_grpc.AnalyzerStub, records: Sequence[ResourceRecord], *, analyze: bool = True
) -> list[Any]:
    """Drive one preview: Analyze per resource (inputs), then AnalyzeStack (outputs); the stack's diagnostics."""
    for rec in records if analyze else ():
        resource = analyzer_pb2.AnalyzerResource(
            type=rec.type, properties=struct(_unknown_ids(rec.inputs)), urn=rec.urn, name=rec.name
        )
        response = pack.Analyze(resource)
        assert [d.message for d in response.diagnostics] == []  # the inputs recorder never reports
    stack = [
        analyzer_pb2.AnalyzerResource(
            type=r.type,
            properties=struct(preview_outputs(r)),
            urn=r.urn,
            name=r.name,
            parent=r.parent or "",
            dependencies=list(r.dependencies),
        )
        for r in records
    ]
    return list(pack.AnalyzeStack(analyzer_pb2.AnalyzeStackRequest(resources=stack)).diagnostics)


def _preview(
    pack: analyzer_pb2_grpc.AnalyzerStub, records: Sequence[ResourceRecord], *, analyze: bool = True
) -> set[str]:
    """The policies that fail one preview."""
    diagnostics = _diagnostics(pack, records, analyze=analyze)
    return {d.policyName for d in diagnostics if d.enforcementLevel == analyzer_pb2.MANDATORY}


_VIOLATION = re.compile(r"\[(?P<level>info|warning|error)\] (?P<text>.*)", re.DOTALL)
_SUPPRESSED = re.compile(r"\[suppressed (?P<level>info|warning|error)\] (?P<rule>[a-z0-9-]+): (?P<text>.*)", re.DOTALL)


def _finding(rule: str, level: str, urn: str, text: str) -> Finding:
    """A finding back from the pack's words: the URN, else the key path the message starts with."""
    resource, message = (urn, text) if urn else text.split(": ", 1)
    return Finding(rule, Level.parse(level), resource, message)


def _pack_findings(diagnostics: Sequence[Any]) -> tuple[list[Finding], dict[str, list[Finding]]]:
    """The findings the pack reported (each rule's policy and the advisory one), and those its suppressions hid."""
    shown: list[Finding] = []
    hidden: dict[str, list[Finding]] = {}
    for d in diagnostics:
        said = d.message.removeprefix(f"{d.description}\n")  # the engine's message leads with the description
        if d.policyName == policy_pack.INPUTS_POLICY or said.startswith("[suppressed] "):
            continue
        note = _SUPPRESSED.fullmatch(said)
        if note:
            finding = _finding(note["rule"], note["level"], d.urn, note["text"])
            hidden.setdefault(finding.rule, []).append(finding)
            continue
        match = _VIOLATION.fullmatch(said)
        assert match, said
        text = match["text"]
        rule = d.policyName
        if rule == policy_pack.ADVISORIES:
            rule, text = text.split(": ", 1)
        shown.append(_finding(rule, match["level"], d.urn, text))
    return sorted(shown), {k: sorted(v) for k, v in hidden.items()}


def _configure_quota(pack: analyzer_pb2_grpc.AnalyzerStub, source: Path) -> None:
    """`--policy-pack-config {"quota-sufficient": {"quota": FILE}}`, as the engine passes it: with the policy's
    own enforcement level filled in (pulumi/pulumi ``pkg/resource/analyzer/config.go`` ReconcilePolicyPackConfig)."""
    config = analyzer_pb2.PolicyConfig(
        enforcementLevel=analyzer_pb2.MANDATORY, properties=struct({"quota": str(source)})
    )
    pack.Configure(analyzer_pb2.ConfigureAnalyzerRequest(policyConfig={"quota-sufficient": config}))


def _broken(raw: dict[str, Any]) -> dict[str, Any]:
    """The reference stack with an x86 image on its GB300 pool."""
    broken = copy.deepcopy(raw)
    broken["gpuPools"][0]["image"] = X86_IMAGE
    return broken


def _plan_errors(raw: dict[str, Any], quota: Path | None = None) -> tuple[list[ResourceRecord], set[str]]:
    """The plan's resources and its error rules over resources (the pack runs those; rules.CONFIG_RULES it cannot)."""
    plan = run_plan("reference", raw, quota=str(quota) if quota else None)
    return plan.resources, {f.rule for f in plan.findings if f.level.label == "error" and f.rule in rules.RULES}


def test_reference_preview_passes_the_pack(
    fresh_pack: analyzer_pb2_grpc.AnalyzerStub, reference_plan: PlanResult
) -> None:
    """Previewed as the engine does, the reference stack fails no policy, as `gb300 plan` reports no error."""
    assert [f for f in reference_plan.findings if f.level.label == "error" and f.rule in rules.RULES] == []
    assert _preview(fresh_pack, reference_plan.resources) == set()


def test_broken_stack_fails_the_preview_with_the_plans_error_rules(
    fresh_pack: analyzer_pb2_grpc.AnalyzerStub, reference_raw: dict[str, Any]
) -> None:
    """An x86 image on the GB300 pool and too little quota fail the same rules in the preview as in the plan."""
    resources, errors = _plan_errors(_broken(reference_raw), quota=TOO_LITTLE)
    assert errors == {"image-arch-matches-sku", "quota-sufficient"}
    _configure_quota(fresh_pack, TOO_LITTLE)
    assert _preview(fresh_pack, resources) == errors


def test_every_record_has_a_preview_shape(reference_plan: Any) -> None:
    """Typed resources preview as their response schema's keys (no name inputs), dynamic ones as their inputs."""
    subnet = next(r for r in reference_plan.resources if r.type == "azure-native:network:Subnet")
    out = preview_outputs(subnet)
    assert "subnetName" not in out
    assert "virtualNetworkName" not in out
    assert out["addressPrefix"] == subnet.inputs["addressPrefix"]
    assert out["provisioningState"] == UNKNOWN_STRING_VALUE


def test_the_pack_keeps_inputs_for_the_stack_rules() -> None:
    """The pack's resource policy records inputs by URN and stack policies read them before outputs."""
    seen = policy_pack.InputsSeen()
    view = policy_pack.PolicyResourceView("urn:x", "azure-native:network:Subnet", "x", {"subnetName": "gpu"})
    seen.record(view)
    assert seen.get("urn:x") == view
    seen.clear()
    assert seen.get("urn:x") is None


def test_scale_sets_are_recognised_from_outputs_alone(
    fresh_pack: analyzer_pb2_grpc.AnalyzerStub, reference_raw: dict[str, Any]
) -> None:
    """Without any Analyze call (a --target run), the scale sets' markers in their outputs still fail the x86 image."""
    resources, errors = _plan_errors(_broken(reference_raw))
    assert "image-arch-matches-sku" in errors
    assert "image-arch-matches-sku" in _preview(fresh_pack, resources, analyze=False)


def test_pack_loads_and_lists_every_rule(pack_process: analyzer_pb2_grpc.AnalyzerStub) -> None:
    """The pack process starts and announces one policy per resource and config rule, plus its own two."""
    info = pack_process.GetAnalyzerInfo(empty_pb2.Empty())
    assert info.name == policy_pack.PACK_NAME
    assert {p.name for p in info.policies} == {
        *(r.id for r in rules.PACK_RULES),
        policy_pack.ADVISORIES,
        policy_pack.INPUTS_POLICY,
    }


def _stack_request(records: Sequence[ResourceRecord]) -> analyzer_pb2.AnalyzeStackRequest:
    return analyzer_pb2.AnalyzeStackRequest(
        resources=[
            analyzer_pb2.AnalyzerResource(type=r.type, properties=struct(r.inputs), urn=r.urn, name=r.name)
            for r in records
        ]
    )


def test_pack_process_applies_stack_settings(
    pack_process: analyzer_pb2_grpc.AnalyzerStub, reference_plan: PlanResult
) -> None:
    """Over gRPC, with failOn: warning from the stack config, a missing tag fails the preview as it fails the plan."""
    records = [
        with_inputs(r, tags={k: v for k, v in (r.inputs.get("tags") or {}).items() if k != "owner"})
        if r.name == "ref-rg"
        else r
        for r in reference_plan.resources
    ]
    response = pack_process.AnalyzeStack(_stack_request(records))
    mandatory = [d for d in response.diagnostics if d.policyName != policy_pack.ADVISORIES]
    assert [d.policyName for d in mandatory] == ["required-tags"]
    assert "missing owner" in mandatory[0].message
    settings = PolicySettings(failOn="warning")
    assert [f.rule for f in rules.failing(rules.evaluate(records, settings), settings)] == ["required-tags"]


def test_pack_process_takes_the_quota_source_from_pack_config(
    fresh_pack: analyzer_pb2_grpc.AnalyzerStub, reference_plan: PlanResult
) -> None:
    """Over gRPC, `--policy-pack-config` naming a usage file makes quota-sufficient fail the preview."""
    _configure_quota(fresh_pack, TOO_LITTLE)
    response = fresh_pack.AnalyzeStack(_stack_request(reference_plan.resources))
    mandatory = [d for d in response.diagnostics if d.policyName != policy_pack.ADVISORIES]
    assert [d.policyName for d in mandatory] == ["quota-sufficient", "quota-sufficient"]
    assert any("requested 147,456 vCPUs, in use 2,304, limit 100,000" in d.message for d in mandatory)


def _broken_with_suppression(raw: dict[str, Any]) -> dict[str, Any]:
    """The broken stack (x86 image, so config rules fire too) with too little quota (gb300:policy.quota, which
    the plan and every policy of the pack read), suppressing a rule that has findings."""
    broken = _broken(raw)
    broken["cluster"]["tags"] = {k: v for k, v in broken["cluster"].get("tags", {}).items() if k != "owner"}
    broken["policy"] = {
        **broken.get("policy", {}),
        "quota": str(TOO_LITTLE),
        "suppress": [{"rule": "required-tags", "reason": "tagged later"}],
    }
    return broken


@pytest.mark.parametrize("case", ["reference", "broken"])
def test_plan_and_pack_report_the_same_findings(
    case: str, reference_raw: dict[str, Any], reference_plan: PlanResult
) -> None:
    """Previewed as the engine does with the stack's own config, the pack reports exactly the plan's findings, at
    the same levels and with the same words, and hides the same findings behind the same suppressions."""
    raw = copy.deepcopy(reference_raw) if case == "reference" else _broken_with_suppression(reference_raw)
    plan = reference_plan if case == "reference" else run_plan("reference", raw)  # the session's plan of the same file
    with _pack(config.to_pulumi_config(raw)) as pack:
        shown, hidden = _pack_findings(_diagnostics(pack, plan.resources))
    assert shown == sorted(plan.findings)
    assert hidden == {s.rule: sorted(s.hidden) for s in plan.suppressed}
    kinds = {rules.BY_ID[f.rule].kind for f in plan.findings}
    if case == "broken":  # the comparison covers resource and config rules, errors, warnings and a suppression
        assert kinds == {rules.Kind.RESOURCE, rules.Kind.CONFIG}
        assert {f.level for f in plan.findings} >= {Level.ERROR, Level.WARNING}
        assert hidden["required-tags"]


def test_an_unexplained_security_suppression_fails_the_program_under_the_engine(dev_raw: dict[str, Any]) -> None:
    """A security rule suppressed without a reason fails `pulumi preview`/`up` (the program) as it fails the plan."""
    from gb300.plan.runner import register  # noqa: PLC0415

    raw = copy.deepcopy(dev_raw)
    raw["policy"] = {"suppress": ["no-ssh-from-internet"]}
    with pytest.raises(Exception, match="suppresses the security rule 'no-ssh-from-internet' without a reason"):
        register("dev", raw)
