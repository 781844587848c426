"""Tests of :mod:`gb300.azure.package_schema`, on schema fragments shaped as Pulumi's package schema (synthetic:
the real schema comes from the azure-native plugin in the compute-package CI job)."""

from __future__ import annotations

import base64
import copy
from typing import Any

from gb300.azure import package_schema
from gb300.components import compute_package
from gb300.plan import PlanResult

ANY = {"$ref": "pulumi.json#/Any"}
SCALAR_INPUTS = (
    "resourceGroupName",
    "vmScaleSetName",
    "location",
    "zones",
    "sku",
    "identity",
    "orchestrationMode",
    "singlePlacementGroup",
    "overprovision",
    "platformFaultDomainCount",
    "upgradePolicy",
    "tags",
)
T = f"#/types/{compute_package.PACKAGE_NAME}:{compute_package.MODULE}:"


def _schema(network_profile: dict[str, Any]) -> dict[str, Any]:
    """A synthetic schema: the pinned package, its scale set, and a network profile type with ``network_profile``."""
    return {
        "name": compute_package.PACKAGE_NAME,
        "version": compute_package.PACKAGE_VERSION,
        "parameterization": {
            "baseProvider": {"name": "azure-native", "version": compute_package.BASE_PROVIDER_VERSION},
            "parameter": base64.b64encode(compute_package.PARAMETER.encode()).decode(),
        },
        "resources": {
            compute_package.SCALE_SET_TOKEN: {
                "inputProperties": {
                    **dict.fromkeys(SCALAR_INPUTS, ANY),
                    "virtualMachineProfile": {"$ref": f"{T}VirtualMachineScaleSetVMProfile"},
                }
            }
        },
        "types": {
            f"{T[8:]}VirtualMachineScaleSetVMProfile": {
                "properties": {
                    **dict.fromkeys(
                        (
                            "osProfile",
                            "storageProfile",
                            "securityProfile",
                            "extensionProfile",
                            "scheduledEventsProfile",
                        ),
                        ANY,
                    ),
                    "networkProfile": {"$ref": f"{T}VirtualMachineScaleSetNetworkProfile"},
                }
            },
            f"{T[8:]}VirtualMachineScaleSetNetworkProfile": {"properties": network_profile},
        },
    }


GOOD = {"networkInterfaceConfigurations": {"type": "array", "items": ANY}, "interconnectGroupProfile": ANY}


def test_a_schema_that_defines_every_rack_input_passes(reference_plan: PlanResult) -> None:
    """The reference plan's racks against a schema with every key they use: no problem."""
    records = [r.as_json() for r in reference_plan.resources]
    assert package_schema.problems(_schema(GOOD), records) == []


def test_a_key_the_schema_lacks_is_named_with_its_path(reference_plan: PlanResult) -> None:
    """A plugin whose 2026-03-01 scale set had no interconnectGroupProfile fails every rack, naming the key path."""
    records = [r.as_json() for r in reference_plan.resources]
    found = package_schema.problems(
        _schema({"networkInterfaceConfigurations": GOOD["networkInterfaceConfigurations"]}), records
    )
    assert len(found) == 64
    assert found[0] == (
        "ref-train-r0001: virtualMachineProfile.networkProfile.interconnectGroupProfile: "
        "the schema defines no such input"
    )


def test_pins_that_disagree_with_the_plugin_are_reported(reference_plan: PlanResult) -> None:
    """Another base provider version or parameter in the plugin's schema is a problem naming both values."""
    schema = copy.deepcopy(_schema(GOOD))
    schema["parameterization"]["baseProvider"]["version"] = "3.30.0"
    schema["parameterization"]["parameter"] = "eA=="
    found = package_schema.problems(schema, [r.as_json() for r in reference_plan.resources])
    assert [f.split(":")[0] for f in found] == [
        "schema parameterization.baseProvider.version",
        "schema parameterization.parameter",
    ]
    assert "'3.30.0', gb300 pins '3.29.0'" in found[0]


def test_a_schema_without_the_scale_set_stops_there(reference_plan: PlanResult) -> None:
    """A package without the scale set token (a wrong module or version) says so."""
    schema = _schema(GOOD)
    schema["resources"] = {}
    assert package_schema.problems(schema, []) == [f"schema defines no {compute_package.SCALE_SET_TOKEN}"]
