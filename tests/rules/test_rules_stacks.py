"""Every rule against whole stacks: silent on the reference stack, firing on stacks (or, where config cannot
express the mistake, on the reference stack's own resources) that violate it."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gb300 import cli, rules
from gb300.components import compute_package
from gb300.config import PolicySettings
from gb300.findings import Level
from gb300.plan import PlanResult, run_plan
from gb300.resources import ResourceRecord
from tests.support import signing
from tests.support.policy_support import TAGS, account, lustre, with_inputs

# Mistakes a stack file can make, one plan for all of them (planning costs seconds).
BAD_STACK: dict[str, Any] = {
    "cluster": {"name": "bad", "location": "eastus2", "zone": "1", "tags": {"env": "test"}},
    "access": {
        "sshPublicKey": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDuptD3soyOcGeTftsws1pF9pLvy/fYHdTEGGBbeVuI6 ops@example",
        "sshSourceRanges": ["0.0.0.0/0"],
        "loginPublicIp": True,
    },
    "network": {"addressSpace": "172.16.0.0/24"},
    "gpuPools": [
        {"name": "train", "racks": 1, "image": "microsoft-dsvm:ubuntu-hpc:2404:latest"},
        {"name": "h100", "vmSize": "Standard_ND96isr_H100_v5", "racks": 120},
    ],
    "policy": {"quota": "tests/fixtures/quota/eastus2-too-little.json"},
    "storage": {"nodePayload": {"signingPublicKey": signing.public_key()}},
}
# rule id -> a word its finding on BAD_STACK must contain.
FROM_CONFIG = {
    "vnet-avoids-rdma-range": "172.16.0.0/16",
    "subnet-fits-pool": "must have room",
    "ib-fabric-within-limits": "at most 100 VMs",
    "image-arch-matches-sku": "must boot arm64",
    "no-ssh-from-internet": "0.0.0.0/0",
    "no-public-ip-on-nodes": "login node",
    "required-tags": "missing owner",
    "quota-sufficient": "limit 0",
}


@pytest.fixture(scope="module")
def bad_plan() -> PlanResult:
    """BAD_STACK planned once for this module."""
    return run_plan("bad", copy.deepcopy(BAD_STACK))


def _broken(reference_plan: PlanResult) -> list[ResourceRecord]:
    """The reference stack's resources with the mistakes only hand-written resources can make."""
    out = []
    for rec in reference_plan.resources:
        if rec.name == "ref-train-r0002" and rec.type == compute_package.SCALE_SET_TOKEN:
            inputs = copy.deepcopy(rec.inputs)
            inputs["sku"]["capacity"] = 17
            inputs["provisioningState"] = "Succeeded"  # read-only in Azure's model
            profile = inputs["virtualMachineProfile"]
            profile["osProfile"]["customData"] = "A" * 65_537
            profile["networkProfile"]["interconnectGroupProfile"]["interconnectGroup"]["id"] = (
                "/subscriptions/s/other-ig"
            )
            nic = profile["networkProfile"]["networkInterfaceConfigurations"][0]
            nic["ipConfigurations"][0]["publicIPAddressConfiguration"] = {"name": "pip"}
            rec = with_inputs(rec, **inputs)  # noqa: PLW2901 - the one rack broken on purpose
        if rec.type == "azure-native:network:NatGateway":
            rec = with_inputs(rec, publicIpAddresses=rec.inputs["publicIpAddresses"][:1])  # noqa: PLW2901 - one IP for 1,153 nodes
        if rec.type == "azure-native:network:Subnet" and rec.inputs["subnetName"] == "storage":
            first = rec.inputs["addressPrefix"].split("/")[0]
            rec = with_inputs(rec, addressPrefix=f"{first}/28", natGateway=None)  # noqa: PLW2901 - too small for 128 TiB of Lustre, and no way out
        out.append(rec)
    checkpoint = {"gb300-checkpoint-parameters": "1e12", "gb300-checkpoint-minutes": "5"}
    slow = lustre("AMLFS-Durable-Premium-500", 8, tags={**TAGS, **checkpoint})
    return [*out, lustre("AMLFS-Durable-Premium-500", 130, zones=["3"]), slow, account(minimumTlsVersion="TLS1_0")]


FROM_RESOURCES = {
    "gpu-pool-rack-aligned": "multiple of 18",
    "ib-fabric-within-limits": "isolated InfiniBand fabrics",
    "custom-data-size": "65,536",
    "no-public-ip-on-nodes": "GPU nodes",
    "lustre-capacity-valid": "multiple of 4",
    "zone-consistent": "zone",
    "lustre-root-squash": "rootSquashSettings.mode",
    "storage-no-public-access": "TLS1_2",
    "blob-soft-delete": "no blob service properties",
    "lustre-checkpoint-throughput": "capacityTiB to at least 108",
    "lustre-subnet-egress": "gb300:network.natGateway",
    "nat-egress-capacity": "needs 6 public IPs",
    "lustre-subnet-size": "Azure documents /24 or larger",
    "arm-body-matches-sdk": "properties.provisioningState: read-only key",
}


def test_every_rule_is_exercised_by_a_violating_stack() -> None:
    """Together, the violating stack file and the broken resources break every rule in RULES."""
    assert set(FROM_CONFIG) | set(FROM_RESOURCES) == set(rules.RULES)


@pytest.mark.parametrize("rule_id", sorted(rules.RULES))
def test_reference_stack_is_silent(reference_plan: PlanResult, rule_id: str) -> None:
    """No rule warns or errs on the reference stack; notes (quota without a source) are info only."""
    found = [f for f in reference_plan.findings if f.rule == rule_id]
    assert all(f.level == Level.INFO for f in found), found


@pytest.mark.parametrize(("rule_id", "word"), sorted(FROM_CONFIG.items()))
def test_rule_fires_on_violating_stack_file(bad_plan: PlanResult, rule_id: str, word: str) -> None:
    """A stack file that breaks the rule gets a finding of it, warning or worse, that says what is wrong."""
    found = [f for f in bad_plan.findings if f.rule == rule_id and f.level >= Level.WARNING]
    assert found
    assert any(word in f.message for f in found), [f.message for f in found]


@pytest.mark.parametrize(("rule_id", "word"), sorted(FROM_RESOURCES.items()))
def test_rule_fires_on_violating_resources(reference_plan: PlanResult, rule_id: str, word: str) -> None:
    """Resources broken in ways config cannot express still get an error or warning of the rule."""
    found = [f for f in rules.evaluate(_broken(reference_plan), PolicySettings()) if f.rule == rule_id]
    assert any(f.level >= Level.WARNING and word in f.message for f in found), [f.message for f in found]


def test_address_space_too_small_is_a_finding_not_a_config_error(bad_plan: PlanResult) -> None:
    """A /24 address space plans (no exit-2 config error) and subnet-fits-pool reports every subnet problem."""
    messages = [f.message for f in bad_plan.findings if f.rule == "subnet-fits-pool"]
    assert any("storage: must lie inside" in m for m in messages)
    assert any("must have room for 138 VMs" in m for m in messages)


def test_suppress_and_fail_on_reach_the_rules(bad_plan: PlanResult) -> None:
    """gb300:policy.suppress drops a rule's findings; failOn: warning makes a warning fail the plan."""
    resources = bad_plan.resources
    quiet = PolicySettings(suppress=["required-tags", "image-arch-matches-sku"])
    assert not {f.rule for f in rules.evaluate(resources, quiet)} & {"required-tags", "image-arch-matches-sku"}
    warnings_only = [f for f in rules.evaluate(resources, PolicySettings()) if f.level == Level.WARNING]
    assert warnings_only
    assert rules.failing(warnings_only, PolicySettings(failOn="warning")) == warnings_only
    assert rules.failing(warnings_only, PolicySettings()) == []


def test_cli_fails_on_warnings_only_when_asked(write_stack: Any, dev_raw: dict[str, Any]) -> None:
    """A stack whose only problem is a missing owner tag passes by default and fails with failOn: warning."""
    raw = copy.deepcopy(dev_raw)
    raw["cluster"]["tags"] = {"env": "dev"}
    assert cli.main(["plan", "--stack-file", str(write_stack(raw, "notag")), "--quiet"]) == 0
    raw["policy"] = {"failOn": "warning"}
    assert cli.main(["plan", "--stack-file", str(write_stack(raw, "strict")), "--quiet"]) == 1


def test_suppressing_an_unknown_rule_is_a_config_error(
    write_stack: Any, dev_raw: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    """A typo in gb300:policy.suppress exits 2 naming the entry and the closest rule id, rather than doing nothing."""
    raw = copy.deepcopy(dev_raw)
    raw["policy"] = {"suppress": ["required-tags", "no-ssh-from-internt"]}
    assert cli.main(["plan", "--stack-file", str(write_stack(raw, "typo"))]) == 2
    err = capsys.readouterr().err
    assert (
        "gb300:policy.suppress[1]: is not a rule id (got 'no-ssh-from-internt'); did you mean 'no-ssh-from-internet'?"
        in err
    )


@pytest.mark.parametrize(
    ("ranges", "expected"),
    [pytest.param([], ["error"], id="no-ranges"), pytest.param(["203.0.113.0/24"], [], id="restricted")],
)
def test_login_public_ip_needs_ssh_source_ranges(
    dev_raw: dict[str, Any], ranges: list[str], expected: list[str]
) -> None:
    """loginPublicIp is an error without sshSourceRanges (the Bastion subnet does not count), fine with them."""
    raw = copy.deepcopy(dev_raw)
    raw["access"] = {**raw["access"], "loginPublicIp": True, "sshSourceRanges": ranges}
    found = [f for f in run_plan("login", raw).findings if f.rule == "no-public-ip-on-nodes"]
    assert [f.level.label for f in found] == expected
