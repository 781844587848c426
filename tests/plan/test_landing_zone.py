"""The landing-zone example (stacks/Pulumi.landingzone.yaml, docs/landing-zone.md): gb300 uses the hub's VNet, firewall,
DNS zones and workspaces and declares none of its own; moving a deployed stack into an existing VNet is refused."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pulumi
import pytest

from gb300 import cli, config, paths
from gb300.config import stacks as gb300_stacks
from gb300.errors import ConfigError
from gb300.findings import Level
from gb300.plan import PlanResult, run_plan
from gb300.program import first_login_outputs
from gb300.resources import ResourceRecord
from gb300.rules import destroy
from tests.support.state import write_stack_export

HUB_ZONES = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/hub-dns-rg/providers/Microsoft.Network/"
MONITOR = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/hub-monitor-rg/providers/"
LOGS = f"{MONITOR}Microsoft.OperationalInsights/workspaces/hub-logs"
AMW = f"{MONITOR}Microsoft.Monitor/accounts/hub-prometheus"
SPOKE = (
    "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/spoke-gpu-rg/providers/"
    "Microsoft.Network/virtualNetworks/spoke-gpu-vnet"
)


@pytest.fixture(scope="module")
def lz_raw() -> dict[str, Any]:
    """The gb300 namespace of the landing-zone example."""
    return config.load_stack_file(gb300_stacks.stack_file("landingzone"))


@pytest.fixture(scope="module")
def lz_plan(lz_raw: dict[str, Any]) -> PlanResult:
    """The landing-zone example planned once."""
    return run_plan("landingzone", copy.deepcopy(lz_raw))


def _of(plan: PlanResult, kind: str) -> list[ResourceRecord]:
    return [r for r in plan.resources if r.type == f"azure-native:{kind}"]


@pytest.mark.parametrize(
    "kind",
    [
        "network:VirtualNetwork",
        "network:NatGateway",
        "network:PublicIPAddress",
        "network:BastionHost",
        "privatedns:PrivateZone",
        "privatedns:VirtualNetworkLink",
        "operationalinsights:Workspace",
        "monitor:AzureMonitorWorkspace",
    ],
)
def test_landing_zone_declares_none_of_the_hubs_pieces(lz_plan: PlanResult, kind: str) -> None:
    """No VNet, NAT gateway (nor its addresses), Bastion, private DNS zone or link, or workspace of gb300's own."""
    assert _of(lz_plan, kind) == []


def test_landing_zone_plans_without_errors(lz_plan: PlanResult) -> None:
    """The example plans clean: no rule mistakes the hub's pieces for missing ones."""
    assert [f.message for f in lz_plan.findings if f.level == Level.ERROR] == []


def test_every_subnet_is_a_child_of_the_existing_vnet(lz_plan: PlanResult) -> None:
    """Each subnet is declared in the spoke VNet's resource group and name, inside the carved space."""
    subnets = _of(lz_plan, "network:Subnet")
    assert {s.inputs["subnetName"] for s in subnets} == {"gpu", "head", "storage", "endpoints"}
    for s in subnets:
        assert (s.inputs["resourceGroupName"], s.inputs["virtualNetworkName"]) == ("spoke-gpu-rg", "spoke-gpu-vnet")
        assert s.id is not None
        assert s.id.startswith(SPOKE.replace("00000000-0000-0000-0000-000000000000", s.id.split("/")[2]) + "/subnets/")
        assert s.inputs["addressPrefix"].startswith("10.60.")


def test_route_table_sends_everything_to_the_firewall(lz_plan: PlanResult) -> None:
    """One route table, 0.0.0.0/0 -> the firewall's address, on the GPU, head and storage subnets only."""
    (table,) = _of(lz_plan, "network:RouteTable")
    assert table.inputs["routes"] == [
        {
            "name": "default-via-firewall",
            "addressPrefix": "0.0.0.0/0",
            "nextHopType": "VirtualAppliance",
            "nextHopIpAddress": "10.0.0.4",
        }
    ]
    routed = {s.inputs["subnetName"] for s in _of(lz_plan, "network:Subnet") if "routeTable" in s.inputs}
    assert routed == {"gpu", "head", "storage"}
    for s in _of(lz_plan, "network:Subnet"):
        assert "natGateway" not in s.inputs
        assert s.inputs.get("routeTable", {}).get("id") in (None, table.id)


def test_every_private_endpoint_joins_the_hub_zone(lz_plan: PlanResult) -> None:
    """Each endpoint's zone group names the hub's zone of its sub-resource: blob for both accounts, vault."""
    groups = _of(lz_plan, "network:PrivateDnsZoneGroup")
    assert len(groups) == len(_of(lz_plan, "network:PrivateEndpoint")) == 3
    expected = {
        "blob": f"{HUB_ZONES}privateDnsZones/privatelink.blob.core.windows.net",
        "vault": f"{HUB_ZONES}privateDnsZones/privatelink.vaultcore.azure.net",
    }
    for group in groups:
        (zone,) = group.inputs["privateDnsZoneConfigs"]
        assert zone["privateDnsZoneId"] == expected[zone["name"]]


def test_telemetry_goes_to_the_hub_workspaces(lz_plan: PlanResult) -> None:
    """The log and metrics collection rules, the alerts and Grafana name the central team's workspaces."""
    rules = {r.name: r.inputs["destinations"] for r in _of(lz_plan, "monitor:DataCollectionRule")}
    assert rules["lz-mon-logs-dcr"] == {"logAnalytics": [{"name": "logs", "workspaceResourceId": LOGS}]}
    assert rules["lz-mon-prom-dcr"] == {"monitoringAccounts": [{"name": "amw", "accountResourceId": AMW}]}
    for table in _of(lz_plan, "operationalinsights:Table"):
        assert (table.inputs["resourceGroupName"], table.inputs["workspaceName"]) == ("hub-monitor-rg", "hub-logs")
        assert table.retain_on_delete  # other clusters may send to the same tables
    (grafana,) = _of(lz_plan, "dashboard:Grafana")
    integrations = grafana.inputs["properties"]["grafanaIntegrations"]["azureMonitorWorkspaceIntegrations"]
    assert integrations == [{"azureMonitorWorkspaceResourceId": AMW}]
    assert all(g.inputs["scopes"] == [AMW] for g in _of(lz_plan, "alertsmanagement:PrometheusRuleGroup"))
    (alert,) = _of(lz_plan, "monitor:ScheduledQueryRule")
    assert alert.inputs["scopes"] == [LOGS]


def test_lustre_behind_the_firewall_is_not_refused(lz_raw: dict[str, Any]) -> None:
    """Lustre's subnet gets out through the firewall route: rule lustre-subnet-egress finds nothing to refuse."""
    raw = copy.deepcopy(lz_raw)
    raw["storage"] = {**raw["storage"], "lustre": {"sku": "AMLFS-Durable-Premium-500", "capacityTiB": 4}}
    plan = run_plan("landingzone", raw)
    assert [f.message for f in plan.findings if f.rule == "lustre-subnet-egress"] == []


def test_moving_a_deployed_stack_into_an_existing_vnet_is_refused(
    write_stack: Any, dev_raw: dict[str, Any], dev_plan: PlanResult, tmp_path: Path
) -> None:
    """Switching the deployed dev stack from its own VNet to an existing one replaces every subnet: exit 1, the GPU
    subnet's error naming its VMs, exactly as any subnet move."""
    state = write_stack_export(tmp_path / "state.json", dev_plan)
    lz = config.load_stack_file(gb300_stacks.stack_file("landingzone"))
    raw = copy.deepcopy(dev_raw)
    raw["network"] = {**raw["network"], **{k: lz["network"][k] for k in ("existingVnetId", "privateDnsZones")}}
    out = tmp_path / "plan.json"
    code = cli.main(["plan", "--stack-file", str(write_stack(raw, "dev")), "--state", str(state), "--json", str(out)])
    assert code == 1
    errors = [
        f["message"]
        for f in json.loads(out.read_text())["findings"]
        if f["rule"] == destroy.RULE_ID and f["level"] == "error"
    ]
    gpu = [m for m in errors if "subnet gpu" in m]
    assert len(gpu) == 1, errors
    assert "replaces (deletes, then creates again) subnet gpu (virtualNetworkName, resourceGroupName changed" in gpu[0]
    assert "18 VMs affected" in gpu[0]


@pulumi.runtime.test
def test_login_command_sends_the_user_to_the_hubs_bastion(lz_raw: dict[str, Any]) -> Any:
    """Without a Bastion of its own, `pulumi stack output loginCommand` is the hub Bastion's `az network bastion ssh`
    line for this head, the hub's names left to fill in, and no bastionName output."""
    head = "/subscriptions/s/resourceGroups/lz-rg/providers/Microsoft.Compute/virtualMachines/lz-head"
    out = first_login_outputs(config.parse(copy.deepcopy(lz_raw)), "lz-rg", None, head)
    assert "bastionName" not in out

    def check(command: str) -> None:
        assert command.startswith("no Bastion of gb300's own (gb300:network.bastion is false): use the hub's Bastion")
        assert (
            "az network bastion ssh --name <hub-bastion> --resource-group <hub-bastion-group> "
            f"--target-resource-id {head}" in command
        )
        assert "--username azureuser" in command

    return pulumi.Output.from_input(out["loginCommand"]).apply(check)


def _grafana_roles(plan: PlanResult) -> dict[str, str]:
    """Grafana identity's role assignments as role name -> scope (the plan's mocks name roles by their id)."""
    out: dict[str, str] = {}
    for r in _of(plan, "authorization:RoleAssignment"):
        if "-grafana-" in r.name:
            out[r.name.rsplit("-grafana-", 1)[1]] = r.inputs["scope"]
    return out


def test_grafana_reads_only_the_clusters_rows_of_the_shared_workspaces(lz_plan: PlanResult) -> None:
    """By default Grafana's identity holds Log Analytics Reader on the cluster's resource group, nothing on either
    hub workspace, and the plan says so in an info finding."""
    roles = _grafana_roles(lz_plan)
    assert set(roles) == {"logs-reader"}
    (group,) = _of(lz_plan, "resources:ResourceGroup")
    assert roles["logs-reader"] == group.id
    assert not any(scope in (LOGS, AMW) for scope in roles.values())
    (finding,) = [f for f in lz_plan.findings if f.rule == "grafana-shared-workspace-read"]
    assert finding.level == Level.INFO
    assert "resource group" in finding.message


def test_shared_workspace_read_is_an_explicit_opt_in_with_a_warning(lz_raw: dict[str, Any]) -> None:
    """`grafana.sharedWorkspaceRead: true` grants the three readers on the hub's workspaces and warns that every
    Grafana user then reads every team's data."""
    raw = copy.deepcopy(lz_raw)
    raw["monitoring"]["grafana"] = {"sharedWorkspaceRead": True}
    plan = run_plan("landingzone", raw)
    assert _grafana_roles(plan) == {"reader": AMW, "data-reader": AMW, "logs-reader": LOGS}
    (finding,) = [f for f in plan.findings if f.rule == "grafana-shared-workspace-read"]
    assert finding.level == Level.WARNING
    assert finding.resource == "gb300:monitoring.grafana.sharedWorkspaceRead"
    assert "every team" in finding.message


def test_the_pages_public_access_claim_holds_for_every_account(lz_plan: PlanResult) -> None:
    """docs/landing-zone.md says the payload and data accounts refuse the public path (public network access is off)
    and the payload account is private by default: every storage account of the plan has public network access
    disabled and a network rule set that denies every address."""
    page = (paths.REPO_ROOT / "docs" / "landing-zone.md").read_text(encoding="utf-8")
    assert "The payload and data storage accounts and the vault** are reached through their private endpoints" in page
    assert "public network access is off" in page
    assert "node payload account is private by default" in page
    accounts = _of(lz_plan, "storage:StorageAccount")
    assert {a.inputs["tags"]["gb300-storage-purpose"] for a in accounts} >= {"node-payload", "data"}
    for account in accounts:
        assert account.inputs["publicNetworkAccess"] == "Disabled", account.name
        rules = account.inputs["networkRuleSet"]
        assert (rules["defaultAction"], rules.get("ipRules", [])) == ("Deny", []), account.name


def test_the_payload_account_opens_only_by_its_key(lz_raw: dict[str, Any]) -> None:
    """`nodePayload.publicAccess: true` opens the landing zone's payload account (and only it); upload source ranges
    without that key are refused at their key path."""
    raw = copy.deepcopy(lz_raw)
    raw["storage"]["nodePayload"]["publicAccess"] = True
    plan = run_plan("landingzone", raw)
    opened = {
        a.inputs["tags"]["gb300-storage-purpose"]
        for a in _of(plan, "storage:StorageAccount")
        if a.inputs["publicNetworkAccess"] == "Enabled"
    }
    assert opened == {"node-payload"}
    raw = copy.deepcopy(lz_raw)
    raw["storage"]["nodePayload"]["uploadSourceRanges"] = ["203.0.113.0/24"]
    with pytest.raises(ConfigError, match=r"storage\.nodePayload\.uploadSourceRanges: needs"):
        config.parse(raw)
