"""Every Azure resource the program declares is an instance of its pulumi-azure-native typed class."""

from __future__ import annotations

import importlib
import inspect
import json
import re
from typing import Any

import pulumi
import pytest
from pulumi import _types
from pulumi_azure_native import resources

from gb300.components.arm_resource import ArmResource
from gb300.plan import PlanResult, runner
from gb300.plan.mocks import RecordingMonitor

# Azure resources still declared by type token (gb300.components.arm_resource), and why. Remove an entry, and
# arm_resource.py with the last one, once its component declares it through the typed class.
STILL_BY_TYPE_TOKEN = {
    "azure-native:network:InterconnectGroup": "components/gpu_pool.py, being rewritten as a rack component",
}


@pytest.fixture(scope="module")
def declared(reference_raw: dict[str, Any], dev_raw: dict[str, Any]) -> dict[str, dict[str, set[type]]]:
    """Per stack: each azure-native type token the program registers -> the Python classes that registered it."""
    original = pulumi.CustomResource.__init__
    seen: dict[str, set[type]] = {}

    def spy(self: pulumi.CustomResource, t: str, *args: Any, **kwargs: Any) -> None:
        if t.startswith("azure-native:"):
            seen.setdefault(t, set()).add(type(self))
        original(self, t, *args, **kwargs)

    by_stack = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pulumi.CustomResource, "__init__", spy)
        for stack, raw in (("reference", reference_raw), ("dev", dev_raw)):
            runner.register(stack, raw)
            by_stack[stack] = dict(seen)
            seen.clear()
    return by_stack


@pytest.mark.parametrize("stack", ["reference", "dev"])
def test_every_azure_resource_is_declared_through_its_typed_class(
    stack: str, declared: dict[str, dict[str, set[type]]]
) -> None:
    """Each azure-native resource of a shipped stack is constructed as the pulumi-azure-native class whose type
    token it registers (``network.Subnet`` for ``azure-native:network:Subnet``), not by type token and dicts."""
    seen = declared[stack]
    typed = {t: classes for t, classes in seen.items() if t not in STILL_BY_TYPE_TOKEN}
    assert len(typed) >= 15  # network, storage, Key Vault, monitoring, the head node ...
    wrong = {
        t: sorted(f"{c.__module__}.{c.__qualname__}" for c in classes)
        for t, classes in typed.items()
        if any(not c.__module__.startswith("pulumi_azure_native.") or pulumi.get_type_token(c) != t for c in classes)
    }
    assert not wrong


def test_the_exceptions_are_still_declared_by_type_token(declared: dict[str, dict[str, set[type]]]) -> None:
    """Each type left on ArmResource is still declared so (a stale exception would let a regression through)."""
    seen = declared["reference"]
    assert {t: seen.get(t) == {ArmResource} for t in STILL_BY_TYPE_TOKEN} == dict.fromkeys(STILL_BY_TYPE_TOKEN, True)


# ---------------------------------------------------------------------------------------------------------
# What is left on ArmResource against its typed class.


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


def test_what_is_left_on_arm_resource_registers_what_its_typed_class_would(reference_plan: PlanResult) -> None:
    """A resource still declared by type token registers exactly the inputs its typed pulumi-azure-native class
    registers from the same values: every key, nested ones included, is one the provider's schema names, and every
    schema default the typed class adds is there."""
    records = [r for r in reference_plan.resources if r.type in STILL_BY_TYPE_TOKEN]
    assert {r.type for r in records} == set(STILL_BY_TYPE_TOKEN)

    def typed() -> None:
        for i, rec in enumerate(records):
            cls = _typed_class(rec.type)
            cls(f"typed-{i}", **_typed_kwargs(cls, rec.inputs, rec.name))

    again = {int(r.name.removeprefix("typed-")): r for r in runner.register("reference", {}, program=typed)}
    differ = [
        f"{rec.name} ({rec.type}): {json.dumps(rec.inputs, sort_keys=True)} != "
        f"{json.dumps(again[i].inputs, sort_keys=True)}"
        for i, rec in enumerate(records)
        if json.dumps(rec.inputs, sort_keys=True) != json.dumps(again[i].inputs, sort_keys=True)
    ]
    assert not differ, "\n".join(differ)


def test_planning_computes_no_version_alias(monkeypatch: pytest.MonkeyPatch, dev_raw: dict[str, Any]) -> None:
    """The program drops the typed classes' per-API-version aliases before the SDK turns them into URNs
    (program.drop_version_aliases): at 1,388 racks they doubled the plan's CPU and memory."""
    import pulumi.resource as sdk_resource  # noqa: PLC0415 - patched where Resource.__init__ looks it up

    collapsed: list[Any] = []
    original = sdk_resource.collapse_alias_to_urn

    def counting(*args: Any, **kwargs: Any) -> Any:
        collapsed.append(args[0])
        return original(*args, **kwargs)

    monkeypatch.setattr(sdk_resource, "collapse_alias_to_urn", counting)
    records = runner.register("dev", dev_raw)
    assert any(r.type == "azure-native:network:VirtualNetwork" for r in records)  # its typed class has 60 aliases
    assert collapsed == []
