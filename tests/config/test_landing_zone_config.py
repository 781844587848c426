"""Landing-zone keys (docs/landing-zone.md): an existing VNet, firewall egress, the hub's DNS zones and workspaces.
Each bad value is one line naming its key."""

from __future__ import annotations

import copy
from typing import Any

import jsonschema
import pytest
import yaml

from gb300 import config
from gb300.config import stacks as gb300_stacks
from tests.support.config_errors import error_lines

SUB = "/subscriptions/00000000-0000-0000-0000-000000000000"
VNET = f"{SUB}/resourceGroups/spoke-rg/providers/Microsoft.Network/virtualNetworks/spoke-vnet"
ZONES = f"{SUB}/resourceGroups/hub-dns-rg/providers/Microsoft.Network/privateDnsZones"
BLOB = f"{ZONES}/privatelink.blob.core.windows.net"
VAULT = f"{ZONES}/privatelink.vaultcore.azure.net"
DFS = f"{ZONES}/privatelink.dfs.core.windows.net"
LOGS = f"{SUB}/resourceGroups/mon-rg/providers/Microsoft.OperationalInsights/workspaces/hub-logs"
AMW = f"{SUB}/resourceGroups/mon-rg/providers/Microsoft.Monitor/accounts/hub-prom"


def landing_zone() -> dict[str, Any]:
    """The gb300 namespace of the shipped landing-zone example."""
    return config.load_stack_file(gb300_stacks.stack_file("landingzone"))


def with_network(**network: Any) -> dict[str, Any]:
    raw = landing_zone()
    raw["network"] = {**raw["network"], **network}
    return raw


BAD: list[tuple[dict[str, Any], str]] = [
    (
        with_network(existingVnetId="/subscriptions/x/resourceGroups/rg"),
        "gb300:network.existingVnetId: must be the id of a virtual network, /subscriptions/<subscription-guid>/"
        "resourceGroups/<group>/providers/Microsoft.Network/virtualNetworks/<name> (got '/subscriptions/x/"
        "resourceGroups/rg')",
    ),
    (
        with_network(existingVnetId=VNET.replace("virtualNetworks", "networkSecurityGroups")),
        "gb300:network.existingVnetId: must be the id of a virtual network",
    ),
    (
        with_network(existingVnetId=VNET + "/subnets/gpu"),
        "gb300:network.existingVnetId: must be the id of a virtual network",
    ),
    (
        with_network(egress={"via": "firewall"}),
        "gb300:network.egress.nextHopIp: is required with egress.via: firewall",
    ),
    (
        with_network(egress={"via": "firewall", "nextHopIp": "10.0.0.256"}),
        "gb300:network.egress.nextHopIp: must be an IPv4 address",
    ),
    (
        with_network(egress={"via": "firewall", "nextHopIp": "8.8.8.8"}),
        "gb300:network.egress.nextHopIp: must be a private address",
    ),
    (
        with_network(egress={"via": "none", "nextHopIp": "10.0.0.4"}),
        "gb300:network.egress.nextHopIp: is only used with egress.via: firewall (got via: none)",
    ),
    (with_network(egress={"via": "proxy"}), "gb300:network.egress.via: "),
    (
        with_network(natGateway=True),
        "gb300:network.natGateway: must not be set together with egress",
    ),
    (
        with_network(privateDnsZones={"blob": VAULT, "vault": VAULT}),
        "gb300:network.privateDnsZones.blob: must be the id of the private DNS zone privatelink.blob.core.windows.net "
        "(got a zone named 'privatelink.vaultcore.azure.net')",
    ),
    (
        with_network(privateDnsZones={"blob": BLOB, "vault": VNET}),
        "gb300:network.privateDnsZones.vault: must be the id of a private DNS zone",
    ),
    (
        with_network(privateDnsZones={"blob": BLOB}),
        "gb300:network.privateDnsZones.vault: is required with gb300:network.existingVnetId: the id of the hub's "
        "privatelink.vaultcore.azure.net zone",
    ),
    (
        with_network(privateDnsZones={"vault": VAULT}),
        "gb300:network.privateDnsZones.blob: is required with gb300:network.existingVnetId",
    ),
]


@pytest.mark.parametrize(("raw", "expected"), BAD, ids=[e.split(":")[1] + ":" + e[-40:] for _, e in BAD])
def test_bad_landing_zone_value_is_one_line_naming_the_key(raw: dict[str, Any], expected: str) -> None:
    """A malformed id, a firewall without its address, a wrong or missing hub zone: one line, starting at the key."""
    lines = error_lines(raw)
    assert len(lines) == 1, lines
    assert lines[0].startswith(expected), lines[0]


def test_a_dfs_endpoint_needs_the_hub_dfs_zone() -> None:
    """With a hierarchical namespace gb300 creates a dfs endpoint too, so the hub's dfs zone becomes required."""
    raw = landing_zone()
    raw["storage"] = {**raw["storage"], "blob": {"hierarchicalNamespace": True, "versioning": False}}
    assert error_lines(raw) == [
        "gb300:network.privateDnsZones.dfs: is required with gb300:network.existingVnetId: the id of the hub's "
        "privatelink.dfs.core.windows.net zone, which gb300's dfs private endpoint joins (gb300 links no zone of its "
        "own to an existing VNet)"
    ]
    raw["network"]["privateDnsZones"]["dfs"] = DFS
    assert config.parse(raw).network.private_dns_zones.ids()["dfs"] == DFS


@pytest.mark.parametrize(
    ("monitoring", "expected"),
    [
        (
            {"existingLogAnalyticsWorkspaceId": AMW},
            "gb300:monitoring.existingLogAnalyticsWorkspaceId: must be the id of a Log Analytics workspace",
        ),
        (
            {"prometheus": {"existingWorkspaceId": LOGS}},
            "gb300:monitoring.prometheus.existingWorkspaceId: must be the id of an Azure Monitor workspace",
        ),
        (
            {"existingLogAnalyticsWorkspaceId": LOGS, "logs": {"enabled": False}},
            "gb300:monitoring.existingLogAnalyticsWorkspaceId: needs gb300:monitoring.logs.enabled: true",
        ),
        (
            {
                "prometheus": {"enabled": False, "existingWorkspaceId": AMW},
                "grafana": {"enabled": False},
                "alerts": {"enabled": False},
            },
            "gb300:monitoring.prometheus.existingWorkspaceId: needs gb300:monitoring.prometheus.enabled: true",
        ),
    ],
)
def test_bad_workspace_is_one_line_naming_the_key(monitoring: dict[str, Any], expected: str) -> None:
    """A workspace id of the wrong kind, or one that nothing would use, names its key."""
    raw = landing_zone()
    raw["monitoring"] = monitoring
    lines = error_lines(raw)
    assert len(lines) == 1, lines
    assert lines[0].startswith(expected), lines[0]


def test_landing_zone_example_parses_into_the_hub_pieces() -> None:
    """The example's ids come apart into the resource group and name the components use."""
    cfg = config.parse(landing_zone())
    vnet = cfg.network.existing_vnet
    assert vnet is not None
    assert (vnet.resource_group, vnet.name) == ("spoke-gpu-rg", "spoke-gpu-vnet")
    assert cfg.network.egress_via == "firewall"
    assert cfg.network.egress.next_hop_ip == "10.0.0.4"
    assert set(cfg.network.private_dns_zones.ids()) == {"blob", "vault"}
    ws = cfg.monitoring.existing_log_analytics_workspace
    assert ws is not None
    assert (ws.resource_group, ws.name) == ("hub-monitor-rg", "hub-logs")


@pytest.mark.parametrize(("network", "via"), [({}, "nat-gateway"), ({"natGateway": False}, "none")])
def test_egress_without_the_key_follows_nat_gateway(network: dict[str, Any], via: str) -> None:
    """A stack that never heard of egress keeps its NAT gateway, and natGateway: false still means no egress."""
    raw = config.load_stack_file(gb300_stacks.stack_file("dev"))
    raw["network"] = {**raw["network"], **network}
    assert config.parse(raw).network.egress_via == via


def test_schema_accepts_the_landing_zone_example_and_rejects_a_misspelt_key() -> None:
    """Editors using `gb300 schema` accept the example and flag a misspelt landing-zone key."""
    doc = yaml.safe_load(gb300_stacks.stack_file("landingzone").read_text(encoding="utf-8"))
    jsonschema.validate(doc, config.json_schema())
    bad = copy.deepcopy(doc)
    bad["config"]["gb300:network"]["existingVnet"] = VNET
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, config.json_schema())
