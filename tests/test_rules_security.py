"""Security rules (SSH exposure, public IPs on nodes), as tables of resources -> findings."""

from __future__ import annotations

from typing import Any

import pytest

from gb300.plan.runner import ResourceRecord
from policy_support import TAGS, levels, nsg, record, run, scale_set, ssh_rule


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
        pytest.param([_login(), nsg(ssh_rule("10.40.1.0/26"))], ["error"], ["no SSH source ranges"], id="bastion-only"),
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
    assert levels(found) == expected
    text = " ".join(f.message for f in found)
    for word in words:
        assert word in text


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


def test_login_node_counts_only_the_ssh_rules_of_its_own_subnet() -> None:
    """A restricted allow on another subnet's NSG (Lustre's rule from AzureMonitor) does not excuse a public login."""
    vnet_subnets = "/subscriptions/s/resourceGroups/r/providers/Microsoft.Network/virtualNetworks/t-vnet/subnets"
    nsgs = "/subscriptions/s/resourceGroups/r/providers/Microsoft.Network/networkSecurityGroups"

    def subnet(name: str) -> ResourceRecord:
        nsg_ref = {"id": f"{nsgs}/t-{name}"}
        inputs = {"subnetName": name, "virtualNetworkName": "t-vnet", "networkSecurityGroup": nsg_ref}
        return record("azure-native:network:Subnet", f"t-{name}", inputs)

    login = _login()
    login.inputs["ipConfigurations"][0]["subnet"] = {"id": f"{vnet_subnets}/head"}
    monitor = ssh_rule("AzureMonitor", destinationPortRange="*", name="allow-azuremonitor-inbound")
    resources = [login, subnet("head"), subnet("storage"), nsg(name="t-head"), nsg(monitor, name="t-storage")]
    assert levels(run("no-public-ip-on-nodes", resources)) == ["error"]
    own = [*resources[:-2], nsg(ssh_rule("203.0.113.0/24"), name="t-head"), resources[-1]]
    assert levels(run("no-public-ip-on-nodes", own)) == []
