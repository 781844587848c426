"""Per-rack resources registered without the typed class's alias list reach the engine unchanged."""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pytest
from pulumi_azure_native import monitor, resources

from gb300.components.arm_resource import ArmResource, drop_version_aliases
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
    """The program registers its typed azure-native resources (network, monitor, storage, ...) without their
    per-API-version alias lists: the SDK computes no alias URN while planning the dev stack."""
    import pulumi.resource as sdk_resource  # noqa: PLC0415

    collapsed: list[Any] = []
    original = sdk_resource.collapse_alias_to_urn

    def counting(*args: Any, **kwargs: Any) -> Any:
        collapsed.append(args[0])
        return original(*args, **kwargs)

    monkeypatch.setattr(sdk_resource, "collapse_alias_to_urn", counting)
    records = runner.register("dev", dev_raw)
    assert any(r.type == "azure-native:network:VirtualNetwork" for r in records)  # a typed class with 60 aliases
    assert collapsed == []


def test_aliases_of_other_providers_stay() -> None:
    """Only azure-native resources lose their aliases; an alias on any other resource reaches the SDK."""
    args = pulumi.ResourceTransformationArgs(
        resource=None,  # type: ignore[arg-type]
        type_="random:index/randomString:RandomString",
        name="x",
        props={},
        opts=pulumi.ResourceOptions(aliases=[pulumi.Alias(name="old")]),
    )
    assert drop_version_aliases(args) is None
    typed = pulumi.ResourceTransformationArgs(
        resource=None,  # type: ignore[arg-type]
        type_="azure-native:network:Subnet",
        name="x",
        props={},
        opts=pulumi.ResourceOptions(aliases=[pulumi.Alias(type_="azure-native:network/v20230201:Subnet")]),
    )
    result = drop_version_aliases(typed)
    assert result is not None
    assert not result.opts.aliases
