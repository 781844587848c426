"""The policy pack under the Pulumi engine's contract, driven over its gRPC protocol as `pulumi preview` drives it.

The engine (pulumi/pulumi ``pkg/resource/deploy/step_generator.go``) calls ``Analyze`` once per registered
resource with its inputs, then ``AnalyzeStack`` once with every resource's *outputs*. In a preview of a new
stack those outputs are what each provider foresees: azure-native answers with the keys of the resource's
response schema (computed ones unknown); a provider without preview support (Pulumi's Python dynamic
provider) answers with the inputs (``pkg/resource/plugin/provider_plugin.go``, ``Create`` with ``Preview``).
Ids of resources not created yet are unknown everywhere. These tests build exactly that and compare the pack's
failing policies with the error rules ``gb300 plan`` reports.
"""

from __future__ import annotations

import copy
import importlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import struct_pb2
from pulumi.runtime.proto import analyzer_pb2, analyzer_pb2_grpc
from pulumi_policy.proxy import UNKNOWN_STRING_VALUE

from gb300 import paths, policy_pack, rules
from gb300.plan import run_plan
from gb300.plan.mocks import SUBSCRIPTION_ID
from gb300.plan.runner import ResourceRecord
from tests.support.files import FIXTURES

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
    """The output properties of a typed resource (its SDK class's getters), or None for a type without a class."""
    package, _, rest = typ.partition(":")
    module, _, name = rest.rpartition(":")
    if package == "azure-native":
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


def _struct(props: dict[str, Any]) -> struct_pb2.Struct:
    struct = struct_pb2.Struct()
    struct.update(json.loads(json.dumps(props)))
    return struct


def _start_pack(stack_config: dict[str, str]) -> tuple[subprocess.Popen[bytes], grpc.Channel]:
    env = {
        **os.environ,
        "PULUMI_CONFIG": json.dumps(stack_config),
        "PULUMI_PROJECT": "gb300",
        "PULUMI_STACK": "reference",
        "PULUMI_DRY_RUN": "true",
    }
    proc = subprocess.Popen(
        [sys.executable, str(paths.POLICIES_DIR / "__main__.py")],
        cwd=paths.POLICIES_DIR,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None
    port = int(proc.stdout.readline().decode().strip() or "0")
    assert port, proc.stderr.read().decode() if proc.stderr else "no port"
    return proc, grpc.insecure_channel(f"127.0.0.1:{port}")


@pytest.fixture
def fresh_pack() -> Iterator[analyzer_pb2_grpc.AnalyzerStub]:
    """A new pack process per test, as the engine starts one per preview; the stack sets no gb300:policy."""
    proc, channel = _start_pack({})
    try:
        yield analyzer_pb2_grpc.AnalyzerStub(channel)
    finally:
        channel.close()
        proc.terminate()
        proc.wait(timeout=10)


def _preview(
    pack: analyzer_pb2_grpc.AnalyzerStub, records: Sequence[ResourceRecord], *, analyze: bool = True
) -> set[str]:
    """Drive one preview: Analyze per resource (inputs), then AnalyzeStack (outputs); the failing policies."""
    failing: set[str] = set()
    for rec in records if analyze else ():
        resource = analyzer_pb2.AnalyzerResource(
            type=rec.type, properties=_struct(_unknown_ids(rec.inputs)), urn=rec.urn, name=rec.name
        )
        response = pack.Analyze(resource)
        assert [d.message for d in response.diagnostics] == []  # the inputs recorder never reports
    stack = [
        analyzer_pb2.AnalyzerResource(
            type=r.type,
            properties=_struct(preview_outputs(r)),
            urn=r.urn,
            name=r.name,
            parent=r.parent or "",
            dependencies=list(r.dependencies),
        )
        for r in records
    ]
    response = pack.AnalyzeStack(analyzer_pb2.AnalyzeStackRequest(resources=stack))
    for d in response.diagnostics:
        if d.enforcementLevel == analyzer_pb2.MANDATORY:
            failing.add(d.policyName)
    return failing


def _configure_quota(pack: analyzer_pb2_grpc.AnalyzerStub, source: Path) -> None:
    """`--policy-pack-config {"quota-sufficient": {"quota": FILE}}`, as the engine passes it: with the policy's
    own enforcement level filled in (pulumi/pulumi ``pkg/resource/analyzer/config.go`` ReconcilePolicyPackConfig)."""
    config = analyzer_pb2.PolicyConfig(
        enforcementLevel=analyzer_pb2.MANDATORY, properties=_struct({"quota": str(source)})
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
    fresh_pack: analyzer_pb2_grpc.AnalyzerStub, reference_raw: dict[str, Any]
) -> None:
    """Previewed as the engine does, the reference stack fails no policy, as `gb300 plan` reports no error."""
    resources, errors = _plan_errors(copy.deepcopy(reference_raw))
    assert errors == set()
    assert _preview(fresh_pack, resources) == set()


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
