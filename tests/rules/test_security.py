"""Security rules (SSH exposure, public IPs on nodes), as tables of resources -> findings."""

from __future__ import annotations

from typing import Any

import pytest

from gb300.config import PolicySettings
from gb300.facts import storage_facts
from gb300.resources import ResourceRecord
from tests.support.policy_support import TAGS, assert_findings, levels, nsg, record, run, scale_set, ssh_rule

# Azure reads a bare 0.0.0.0 source as "any"; S104 flags it as a bind address, which it is not here.
BARE_ZERO = "0.0.0.0"  # noqa: S104


@pytest.mark.parametrize(
    ("resources", "expected"),
    [
        pytest.param([nsg(ssh_rule("203.0.113.0/24"))], [], id="compliant-restricted"),
        pytest.param([nsg(ssh_rule("Internet"))], ["error"], id="internet"),
        pytest.param([nsg(ssh_rule("0.0.0.0/0"))], ["error"], id="anywhere"),
        pytest.param([nsg(ssh_rule("*"))], ["error"], id="star"),
        pytest.param([nsg(ssh_rule("Any"))], ["error"], id="any"),
        pytest.param([nsg(ssh_rule("*", destinationPortRange="20-25"))], ["error"], id="port-range"),
        pytest.param(
            [nsg(ssh_rule("*", destinationPortRange=None, destinationPortRanges=["443", "22"]))],
            ["error"],
            id="port-list",
        ),
        pytest.param(
            [nsg(ssh_rule(None, sourceAddressPrefixes=["10.0.0.0/8", "0.0.0.0/0"]))], ["error"], id="source-list"
        ),
        pytest.param([nsg(ssh_rule(BARE_ZERO))], ["error"], id="bare-zero-is-any"),
        pytest.param([nsg(ssh_rule("Internet", destinationPortRange=22))], ["error"], id="port-as-number"),
        pytest.param(
            [nsg(ssh_rule("Internet", destinationPortRange=None, destinationPortRanges=[443, 22]))],
            ["error"],
            id="port-list-of-numbers",
        ),
        pytest.param([nsg(ssh_rule("Internet", destinationPortRange=2222))], [], id="other-port-as-number"),
        pytest.param([nsg(ssh_rule("AzureMonitor"))], ["error"], id="azure-monitor-on-ssh"),
        pytest.param([nsg(ssh_rule("*", access="Deny"))], [], id="deny"),
        pytest.param([nsg(ssh_rule("*", direction="Outbound"))], [], id="outbound"),
        pytest.param([nsg(ssh_rule("*", destinationPortRange="443"))], [], id="other-port"),
        pytest.param([nsg(ssh_rule("*", protocol="Udp"))], [], id="udp"),
        pytest.param([nsg()], [], id="property-absent"),
        pytest.param(
            [record("azure-native:network:SecurityRule", "r", {"securityRuleName": "r", **ssh_rule("Internet")})],
            ["error"],
            id="standalone-rule",
        ),
        pytest.param([nsg(ssh_rule("Internet"), ssh_rule("*"))], ["error", "error"], id="several"),
    ],
)
def test_no_ssh_from_internet(resources: list[ResourceRecord], expected: list[str]) -> None:
    """An NSG rule admitting port 22 from the Internet is an error pointing at sshSourceRanges."""
    found = run("no-ssh-from-internet", resources)
    assert levels(found) == expected
    assert all("gb300:access.sshSourceRanges" in f.message for f in found)


def _login(public: bool = True) -> ResourceRecord:
    ipconfig: dict[str, Any] = {"name": "ipconfig", "subnet": {"id": "x"}}
    if public:
        ipconfig["publicIPAddress"] = {
            "id": "/subscriptions/s/resourceGroups/r/providers/Microsoft.Network/publicIPAddresses/p"
        }
    return record(
        "azure-native:network:NetworkInterface",
        "t-head-nic",
        {"location": "eastus2", "tags": {**TAGS, "gb300-role": "head"}, "ipConfigurations": [ipconfig]},
    )


@pytest.mark.parametrize(
    ("resources", "expected", "words"),
    [
        pytest.param([scale_set(), _login(public=False)], [], [], id="compliant-private"),
        pytest.param([scale_set(public_ip=True)], ["error"], ["GPU nodes"], id="gpu-public-ip"),
        pytest.param([_login(), nsg(ssh_rule("203.0.113.0/24"))], [], [], id="login-restricted"),
        pytest.param([_login()], ["error"], ["no SSH source ranges"], id="login-unrestricted"),
        pytest.param(
            [_login(), nsg(ssh_rule("10.40.1.0/26"))],
            ["error"],
            ["no public SSH source ranges: SSH is admitted only from 10.40.1.0/26"],
            id="bastion-only",
        ),
        pytest.param([_login(), nsg(ssh_rule("0.0.0.0/0"))], ["error"], ["open to the Internet"], id="login-open"),
        pytest.param([scale_set(), nsg()], [], [], id="property-absent"),
        pytest.param(
            [scale_set(public_ip=True), scale_set("r2", public_ip=True), _login()], ["error"] * 3, [], id="several"
        ),
    ],
)
def test_no_public_ip_on_nodes(resources: list[ResourceRecord], expected: list[str], words: list[str]) -> None:
    """GPU nodes never get a public IP; the login node only with restricted SSH source ranges."""
    found = run("no-public-ip-on-nodes", resources)
    assert_findings(found, expected, words)


def test_public_ip_on_a_gpu_vm() -> None:
    """A typed GPU VM with a public IP configuration in its network profile is an error too."""
    vm = record(
        "azure-native:compute:VirtualMachine",
        "gpu-vm",
        {
            "location": "eastus2",
            "hardwareProfile": {"vmSize": "Standard_ND128isr_GB300_v6"},
            "networkProfile": {
                "networkInterfaceConfigurations": [
                    {"name": "n", "ipConfigurations": [{"name": "i", "publicIPAddressConfiguration": {"name": "p"}}]}
                ]
            },
        },
    )
    assert levels(run("no-public-ip-on-nodes", [vm])) == ["error"]


@pytest.mark.parametrize(
    ("sources", "expected"),
    [
        pytest.param(["0.0.0.0/1", "128.0.0.0/1"], ["error", "error"], id="two-halves"),
        pytest.param(["0.0.0.0/2", "64.0.0.0/2", "128.0.0.0/2", "192.0.0.0/2"], ["error"] * 4, id="four-quarters"),
        pytest.param(["8.0.0.0/7"], ["error"], id="one-wide-range"),
        pytest.param(["203.0.113.0/24", "198.51.100.0/24"], [], id="two-small-ranges"),
        pytest.param(["100.0.0.0/16", "100.1.0.0/16"], ["error", "error"], id="two-16s-exceed-one-16"),
        pytest.param(["100.0.0.0/16"], [], id="exactly-one-16"),
        pytest.param(["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"], [], id="private-only"),
        pytest.param(["AzureCloud"], ["error"], id="public-service-tag"),
        pytest.param(["VirtualNetwork"], [], id="vnet-tag"),
        pytest.param(["2001:db8::/32"], ["error"], id="wide-ipv6"),
        pytest.param(["2001:db8::/56"], [], id="narrow-ipv6"),
    ],
)
def test_ssh_sources_are_united_as_address_sets(sources: list[str], expected: list[str]) -> None:
    """SSH sources are united per NSG (private ranges taken out) and compared with one /16: spelling does not matter."""
    rules_ = [ssh_rule(s, name=f"allow-ssh-{i}", priority=100 + i) for i, s in enumerate(sources)]
    found = run("no-ssh-from-internet", [nsg(*rules_)])
    assert levels(found) == expected
    assert all("more than one /16" in f.message for f in found)


def test_standalone_rules_of_one_nsg_are_united() -> None:
    """Halves spread over an NSG's inline rules and a standalone SecurityRule of the same NSG are one exposure."""
    standalone = record(
        "azure-native:network:SecurityRule",
        "r",
        {"securityRuleName": "r", "networkSecurityGroupName": "t-head-nsg", **ssh_rule("128.0.0.0/1")},
    )
    assert levels(run("no-ssh-from-internet", [nsg(ssh_rule("0.0.0.0/1")), standalone])) == ["error", "error"]


def test_source_limit_is_configurable() -> None:
    """gb300:policy.sshSourceLimitPrefix moves the limit: a /20 passes at 16 and fails at 24."""
    resources = [nsg(ssh_rule("198.18.0.0/20"))]
    assert run("no-ssh-from-internet", resources) == []
    strict = PolicySettings(sshSourceLimitPrefix=24)
    (finding,) = run("no-ssh-from-internet", resources, strict)
    assert "4,096 public IPv4 addresses, more than one /24" in finding.message


def test_login_public_ip_behind_two_halves_is_an_error() -> None:
    """A public login IP behind 0.0.0.0/1 plus 128.0.0.0/1 is SSH open to the Internet, not restricted."""
    rules_ = [ssh_rule("0.0.0.0/1"), ssh_rule("128.0.0.0/1", name="allow-ssh-1", priority=101)]
    (finding,) = run("no-public-ip-on-nodes", [_login(), nsg(*rules_)])
    assert "SSH open to the Internet" in finding.message


def test_azure_monitor_rule_is_neither_exposure_nor_restriction() -> None:
    """Lustre's documented any-port rule from AzureMonitor is no SSH exposure, and does not excuse a public login."""
    vnet_subnets = "/subscriptions/s/resourceGroups/r/providers/Microsoft.Network/virtualNetworks/t-vnet/subnets"
    nsgs = "/subscriptions/s/resourceGroups/r/providers/Microsoft.Network/networkSecurityGroups"

    def subnet(name: str) -> ResourceRecord:
        nsg_ref = {"id": f"{nsgs}/t-{name}"}
        inputs = {"subnetName": name, "virtualNetworkName": "t-vnet", "networkSecurityGroup": nsg_ref}
        return record("azure-native:network:Subnet", f"t-{name}", inputs)

    login = _login()
    login.inputs["ipConfigurations"][0]["subnet"] = {"id": f"{vnet_subnets}/head"}
    monitor = _documented_monitor_rule()
    resources = [login, subnet("head"), subnet("storage"), nsg(name="t-head"), nsg(monitor, name="t-storage")]
    assert levels(run("no-public-ip-on-nodes", resources)) == ["error"]
    own = [*resources[:-2], nsg(ssh_rule("203.0.113.0/24"), name="t-head"), resources[-1]]
    assert levels(run("no-public-ip-on-nodes", own)) == []
    assert run("no-ssh-from-internet", resources) == []


def _documented_monitor_rule(**changes: Any) -> dict[str, Any]:
    """The AzureMonitor rule exactly as data/storage.yaml declares it for the Lustre subnet."""
    (documented,) = [r for r in storage_facts.lustre_network_rules() if r["source"] == "AzureMonitor"]
    rule = ssh_rule(
        documented["source"],
        name=documented["name"],
        protocol=documented["protocol"],
        destinationAddressPrefix=documented["destination"],
        destinationPortRange=documented["ports"],
    )
    return {**rule, **changes}


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        pytest.param({}, [], id="as-documented"),
        pytest.param({"destinationPortRange": "22"}, ["error"], id="aimed-at-ssh"),
        pytest.param({"destinationPortRange": 22}, ["error"], id="aimed-at-ssh-as-number"),
        pytest.param({"destinationPortRange": "20-30"}, ["error"], id="range-over-ssh"),
        pytest.param({"destinationAddressPrefix": "*"}, ["error"], id="any-destination"),
        pytest.param(
            {"sourceAddressPrefix": None, "sourceAddressPrefixes": ["AzureMonitor", "AzureCloud"]},
            ["error"],
            id="beside-another-tag",
        ),
    ],
)
def test_azure_monitor_is_exempt_only_in_its_documented_rule(changes: dict[str, Any], expected: list[str]) -> None:
    """AzureMonitor is no SSH exposure only in the exact any-port rule Azure documents for Lustre, never on 22."""
    assert levels(run("no-ssh-from-internet", [nsg(_documented_monitor_rule(**changes))])) == expected


def test_bare_zero_source_behind_a_public_login_is_open() -> None:
    """A bare 0.0.0.0 source is "any" to Azure: a public login IP behind it is SSH open to the Internet."""
    (finding,) = run("no-public-ip-on-nodes", [_login(), nsg(ssh_rule(BARE_ZERO))])
    assert "SSH open to the Internet" in finding.message
    (exposure,) = run("no-ssh-from-internet", [nsg(ssh_rule(BARE_ZERO))])
    assert "(every IPv4 address)" in exposure.message
