"""Rules never raise: any property of any resource may be missing, None, or of the wrong type."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest

from gb300 import rules
from gb300.azure.quota import QuotaSnapshot, RegionQuota, Usage
from gb300.config import PolicySettings
from gb300.resources import ResourceRecord
from tests.support.policy_support import account, lustre, nsg, record, scale_set, ssh_rule, subnet, vnet

ODD: list[Any] = [None, 0, -1, 2.5, True, "", "x", [], [None], {}, {"id": None}, [[]]]


def _samples() -> list[ResourceRecord]:
    head_vm = record(
        "azure-native:compute:VirtualMachine",
        "vm",
        {
            "location": "eastus2",
            "hardwareProfile": {"vmSize": "Standard_D16ds_v5"},
            "osProfile": {"customData": "abc"},
            "storageProfile": {
                "imageReference": {"publisher": "canonical", "offer": "ubuntu-24_04-lts", "sku": "server"}
            },
            "networkProfile": {
                "networkInterfaceConfigurations": [{"ipConfigurations": [{"publicIPAddressConfiguration": {}}]}]
            },
            "tags": {"owner": "x"},
        },
    )
    nic = record(
        "azure-native:network:NetworkInterface",
        "nic",
        {"location": "eastus2", "ipConfigurations": [{"publicIPAddress": {"id": "p"}}]},
    )
    return [
        vnet(["172.16.0.0/16"]),
        subnet("gpu", "10.40.0.0/29"),
        scale_set(public_ip=True),
        nsg(ssh_rule("*")),
        record("azure-native:network:SecurityRule", "sr", ssh_rule("*")),
        head_vm,
        nic,
        lustre(),
        account(),
    ]


def _mutations(rec: ResourceRecord) -> Iterator[ResourceRecord]:
    """The record with each input, at every depth, replaced by each odd value in turn."""

    def paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
        if isinstance(value, dict):
            for key, inner in value.items():
                yield (*prefix, key)
                yield from paths(inner, (*prefix, key))
        elif isinstance(value, list):
            for i, inner in enumerate(value):
                yield (*prefix, i)
                yield from paths(inner, (*prefix, i))

    for path in paths(rec.inputs):
        for odd in ODD:
            inputs = copy.deepcopy(rec.inputs)
            target: Any = inputs
            for step in path[:-1]:
                target = target[step]
            target[path[-1]] = odd
            yield ResourceRecord(rec.urn, rec.type, rec.name, rec.parent, rec.protect, rec.id, inputs)


SNAPSHOT = QuotaSnapshot("odd", {"eastus2": RegionQuota("eastus2", (Usage("cores", "cores", 0, 0),), offers={})})


@pytest.mark.parametrize("rule_id", sorted(rules.RULES))
def test_rules_never_raise_on_odd_input(rule_id: str) -> None:
    """Every rule survives every property of every sample resource being None, empty or the wrong type."""
    samples = _samples()
    rule = rules.RULES[rule_id]
    policy = PolicySettings()
    for quota in (None, SNAPSHOT):
        ctx = rules.RuleContext(policy=policy, quota=quota)
        for i, sample in enumerate(samples):
            for mutated in _mutations(sample):
                resources = [*samples[:i], mutated, *samples[i + 1 :]]
                list(rule(resources, ctx))  # must not raise
