"""Resources registered by type token (ArmResource) reach the engine exactly as their typed classes would send them."""

from __future__ import annotations

import importlib
import inspect
import json
import re
import subprocess
import sys
from typing import Any

import pulumi
import pytest
from pulumi import _types
from pulumi_azure_native import monitor, resources

from gb300.components.arm_resource import TYPE, ArmResource
from gb300.plan import PlanResult, runner
from gb300.plan.mocks import RecordingMonitor


class _VersionRecorder(RecordingMonitor):
    versions: dict[str, str] = {}  # noqa: RUF012 - filled per test by the class under test

    def RegisterResource(self, request: Any) -> Any:  # noqa: N802 - the gRPC method name
        _VersionRecorder.versions[request.name] = request.version
        return super().RegisterResource(request)


def test_provider_version_is_pinned_like_the_typed_classes(monkeypatch: pytest.MonkeyPatch) -> None:
    """An ArmResource asks the engine for the same azure-native provider version a typed class asks for."""
    monkeypatch.setattr(runner, "RecordingMonitor", _VersionRecorder)
    _VersionRecorder.versions = {}

    def program() -> None:
        resources.ResourceGroup("typed", resource_group_name="rg", location="eastus2")
        inputs = {"resourceProviderNamespace": "Microsoft.Compute", "resourceType": "virtualMachineScaleSets"}
        ArmResource("generic", inputs)

    runner.register("dev", {}, program=program)
    versions = _VersionRecorder.versions
    assert versions["generic"]
    assert versions["generic"] == versions["typed"]


def test_rack_log_association_is_what_the_typed_class_registers(dev_plan: PlanResult) -> None:
    """A rack's data collection rule association has the URN, parent and inputs the typed class gives it."""
    rec = next(r for r in dev_plan.resources if r.name == "dev-train-0001-logs")
    assert rec.parent is not None
    parent_type, parent_name = rec.parent.split("::")[-2].split("$")[-1], rec.parent.split("::")[-1]
    i: dict[str, Any] = rec.inputs

    def typed() -> None:
        owner = pulumi.ComponentResource(parent_type, parent_name)
        monitor.DataCollectionRuleAssociation(
            rec.name,
            association_name=i["associationName"],
            data_collection_rule_id=i["dataCollectionRuleId"],
            resource_uri=i["resourceUri"],
            opts=pulumi.ResourceOptions(parent=owner),
        )
        owner.register_outputs({})

    expected = next(r for r in runner.register("dev", {}, program=typed) if r.name == rec.name)
    assert (rec.type, rec.urn, rec.parent) == (expected.type, expected.urn, expected.parent)
    assert json.dumps(rec.inputs, sort_keys=True) == json.dumps(expected.inputs, sort_keys=True)


def test_planning_computes_no_version_alias(monkeypatch: pytest.MonkeyPatch, dev_raw: dict[str, Any]) -> None:
    """The program registers its azure-native resources (network, monitor, storage, ...) without the typed classes'
    per-API-version alias lists: the SDK computes no alias URN while planning the dev stack."""
    import pulumi.resource as sdk_resource  # noqa: PLC0415

    collapsed: list[Any] = []
    original = sdk_resource.collapse_alias_to_urn

    def counting(*args: Any, **kwargs: Any) -> Any:
        collapsed.append(args[0])
        return original(*args, **kwargs)

    monkeypatch.setattr(sdk_resource, "collapse_alias_to_urn", counting)
    records = runner.register("dev", dev_raw)
    assert any(r.type == "azure-native:network:VirtualNetwork" for r in records)  # its typed class has 60 aliases
    assert collapsed == []


def test_planning_loads_no_typed_azure_native_module() -> None:
    """A plan runs without loading any of pulumi-azure-native's generated resource modules (each package loads all
    its resource and input types: 70 MiB and 0.75 s of a 1,388-rack plan), only its version helper."""
    code = (
        "import sys\n"
        "from gb300 import config, paths\n"
        "from gb300.plan import runner\n"
        "runner.run_plan('dev', config.load_stack_file(paths.stack_file('dev')))\n"
        "print(' '.join(sorted(m for m in sys.modules if m.startswith('pulumi_azure_native.') and m.count('.') > 1)))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert proc.stdout.split() == []
    assert (
        "pulumi_azure_native._utilities"
        in subprocess.run(
            [sys.executable, "-c", code.replace("m.count('.') > 1", "True")], capture_output=True, text=True, check=True
        ).stdout.split()
    )


# ---------------------------------------------------------------------------------------------------------
# Every azure-native resource against its typed class.

_ARGS_CLASS = re.compile(r"\b(\w+Args)\b(?!Dict)")


def _typed_class(typ: str) -> Any:
    """``azure-native:network:Subnet`` -> ``pulumi_azure_native.network.Subnet``."""
    _, module, name = typ.split(":")
    return getattr(importlib.import_module(f"pulumi_azure_native.{module}"), name)


def _typed_value(module: Any, annotation: Any, value: Any, path: str) -> Any:
    """``value`` as the typed SDK's input type that ``annotation`` names (a nested ``...Args`` class, built from the
    camelCase keys, so an unknown key fails and the class adds its schema defaults), element by element for lists."""
    if isinstance(value, list):
        return [_typed_value(module, annotation, v, f"{path}[{i}]") for i, v in enumerate(value)]
    match = _ARGS_CLASS.search(str(annotation))
    if not isinstance(value, dict) or match is None or runner.ASSET_SIG in value:
        return value
    if "Mapping[str" in str(annotation):  # a map of input types keyed by names the program chooses
        return {k: _typed_value(module, match.group(1), v, f"{path}.{k}") for k, v in value.items()}
    cls = getattr(module, match.group(1))
    to_python = {pulumi_name: py for py, pulumi_name in _types.input_type_py_to_pulumi_names(cls).items()}
    params = inspect.signature(cls.__init__).parameters
    kwargs = {}
    for key, item in value.items():
        if key not in to_python:
            raise KeyError(f"{path}.{key}: {cls.__name__} has no such input")
        kwargs[to_python[key]] = _typed_value(module, params[to_python[key]].annotation, item, f"{path}.{key}")
    return cls(**kwargs)


def _typed_kwargs(cls: Any, inputs: dict[str, Any], where: str) -> dict[str, Any]:
    """Top-level camelCase inputs as the typed class's keyword arguments, nested values as its input types."""
    module = importlib.import_module(cls.__module__.rsplit(".", 1)[0])
    params = {
        p.rstrip("_").replace("_", "").lower(): (p, v.annotation)
        for p, v in inspect.signature(cls._internal_init).parameters.items()
        if p not in {"__self__", "resource_name", "opts", "__props__"}
    }
    kwargs = {}
    for key, value in inputs.items():
        if key.lower() not in params:
            raise KeyError(f"{where}.{key}: {cls.__name__} has no such input")
        param, annotation = params[key.lower()]
        kwargs[param] = _typed_value(module, annotation, value, f"{where}.{key}")
    return kwargs


@pytest.mark.parametrize("stack", ["reference", "dev"])
def test_every_azure_resource_is_what_its_typed_class_registers(
    stack: str, reference_plan: PlanResult, dev_plan: PlanResult
) -> None:
    """Each azure-native resource the program declares by type token (ArmResource) registers exactly the inputs
    its typed pulumi-azure-native class registers from the same values: every key, nested ones included, is one
    the provider's schema names, and every schema default the typed class adds is there."""
    plan = reference_plan if stack == "reference" else dev_plan
    records = [r for r in plan.resources if r.type.startswith("azure-native:") and r.type != TYPE]
    assert len({r.type for r in records}) >= 15  # network, storage, Key Vault, monitoring, the head node ...

    def typed() -> None:
        for i, rec in enumerate(records):
            cls = _typed_class(rec.type)
            cls(f"typed-{i}", **_typed_kwargs(cls, rec.inputs, rec.name))

    again = {int(r.name.removeprefix("typed-")): r for r in runner.register(stack, {}, program=typed)}
    differ = [
        f"{rec.name} ({rec.type}): {json.dumps(rec.inputs, sort_keys=True)} != "
        f"{json.dumps(again[i].inputs, sort_keys=True)}"
        for i, rec in enumerate(records)
        if json.dumps(rec.inputs, sort_keys=True) != json.dumps(again[i].inputs, sort_keys=True)
    ]
    assert not differ, "\n".join(differ)
