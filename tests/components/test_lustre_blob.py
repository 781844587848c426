"""Lustre tied to Blob, on a stack that opts in (the tie is off by default: Azure's blob integration needs account
keys, which gb300 keeps off): the filesystem imports datasets from a prefix of the checkpoints container and exports
checkpoints to it continuously, with the roles and the private path Azure documents; the tie is fixed at creation,
so changing it on a deployed filesystem is a storage-data-loss error; the export's reads count in sizing."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from gb300 import cli
from gb300.facts import roles, sizing
from gb300.findings import Level
from gb300.plan import PlanResult, run_plan
from gb300.resources import DeployedResource, ResourceRecord
from gb300.rules.data_loss import data_loss
from gb300.tags import STORAGE_PURPOSE, STORAGE_PURPOSE_DATA
from tests.support.state import write_stack_export

AMLFS = "azure-native:storagecache:AmlFilesystem"
EXPORT = "azure-native:storagecache:AutoExportJob"
ACCOUNT = "azure-native:storage:StorageAccount"
CONTAINER = "azure-native:storage:BlobContainer"
ASSIGNMENT = "azure-native:authorization:RoleAssignment"


def _of(plan: PlanResult, typ: str) -> list[ResourceRecord]:
    return [r for r in plan.resources if r.type == typ]


def _data_account(plan: PlanResult) -> ResourceRecord:
    """The cluster's data account (the node payloads have an account of their own)."""
    (account,) = [
        r for r in _of(plan, ACCOUNT) if (r.inputs.get("tags") or {}).get(STORAGE_PURPOSE) == STORAGE_PURPOSE_DATA
    ]
    return account


def _container(plan: PlanResult, name: str) -> ResourceRecord:
    return next(r for r in _of(plan, CONTAINER) if r.inputs["containerName"] == name)


def _tie(tied_plan: PlanResult) -> dict[str, Any]:
    return tied_plan.config.storage.lustre.blob_integration.model_dump(by_alias=True)  # type: ignore[union-attr]


def test_the_reference_stack_does_not_tie(reference_plan: PlanResult, tied_plan: PlanResult) -> None:
    """Without an opt-in the filesystem has no hsm settings, no auto-export job, no logging container and no grant to
    the Lustre service, and the account keeps shared keys off; the same stack opting in gets them, with shared keys
    on the data account alone and still no key-signed azure-native storage:Blob."""
    (fs,) = _of(reference_plan, AMLFS)
    account = _data_account(reference_plan)
    assert "hsm" not in fs.inputs
    assert not _of(reference_plan, EXPORT)
    assert "lustre-logging" not in {c.inputs["containerName"] for c in _of(reference_plan, CONTAINER)}
    assert _tie(tied_plan)["servicePrincipalId"] not in {
        a.inputs["principalId"] for a in _of(reference_plan, ASSIGNMENT)
    }
    assert account.inputs["allowSharedKeyAccess"] is False
    (tied_fs,) = _of(tied_plan, AMLFS)
    tied_account = _data_account(tied_plan)
    assert "hsm" in tied_fs.inputs
    assert len(_of(tied_plan, EXPORT)) == 1
    assert tied_account.inputs["allowSharedKeyAccess"] is True
    others = [r for r in _of(tied_plan, ACCOUNT) if r.urn != tied_account.urn]
    assert others  # the node payload account keeps keys off even on a tied stack
    assert [r.inputs["allowSharedKeyAccess"] for r in others] == [False] * len(others)
    assert not [r for r in tied_plan.resources if r.type == "azure-native:storage:Blob"]


def test_filesystem_imports_from_and_logs_to_the_accounts_containers(tied_plan: PlanResult) -> None:
    """hsm.settings name the checkpoints container, a logging container of its own and the datasets prefix."""
    (fs,) = _of(tied_plan, AMLFS)
    tie = _tie(tied_plan)
    assert fs.inputs["hsm"] == {
        "settings": {
            "container": _container(tied_plan, tie["container"]).id,
            "loggingContainer": _container(tied_plan, tie["loggingContainer"]).id,
            "importPrefix": tie["importPrefix"],
        }
    }
    assert tie["loggingContainer"] != tie["container"]


def test_checkpoints_are_exported_continuously(tied_plan: PlanResult) -> None:
    """One enabled auto-export job on the filesystem exports everything written under the export prefix."""
    (fs,) = _of(tied_plan, AMLFS)
    (job,) = _of(tied_plan, EXPORT)
    assert job.inputs["amlFilesystemName"] == fs.inputs["amlFilesystemName"]
    assert job.inputs["resourceGroupName"] == fs.inputs["resourceGroupName"]
    assert job.inputs["autoExportPrefixes"] == [_tie(tied_plan)["exportPrefix"]]
    assert job.inputs["adminStatus"] == "Enable"
    assert fs.urn in job.dependencies


def test_lustre_service_gets_azures_two_roles_on_the_account_first(tied_plan: PlanResult) -> None:
    """The HPC Cache Resource Provider holds Storage Account Contributor and Storage Blob Data Contributor on the
    account, and the filesystem is created after both (Azure fails the creation otherwise)."""
    (fs,) = _of(tied_plan, AMLFS)
    account = _data_account(tied_plan)
    principal = _tie(tied_plan)["servicePrincipalId"]
    grants = [a for a in _of(tied_plan, ASSIGNMENT) if a.inputs["principalId"] == principal]
    assert sorted(roles.name_of(a.inputs["roleDefinitionId"]) or "" for a in grants) == [
        "Storage Account Contributor",
        "Storage Blob Data Contributor",
    ]
    for grant in grants:
        assert grant.inputs["scope"] == account.id
        assert grant.inputs["principalType"] == "ServicePrincipal"
        assert grant.urn in fs.dependencies


def test_lustre_reaches_the_locked_down_account_privately(tied_plan: PlanResult) -> None:
    """The account stays closed to the Internet; the filesystem waits for the blob private endpoint and its DNS
    record, in a private zone linked to the VNet the storage subnet is in, so its name resolves to the endpoint."""
    (fs,) = _of(tied_plan, AMLFS)
    account = _data_account(tied_plan)
    assert account.inputs["publicNetworkAccess"] == "Disabled"
    (endpoint,) = [
        r
        for r in _of(tied_plan, "azure-native:network:PrivateEndpoint")
        if r.inputs["privateLinkServiceConnections"][0]["groupIds"] == ["blob"]
        and r.inputs["privateLinkServiceConnections"][0]["privateLinkServiceId"] == account.id
    ]
    group = next(
        r for r in _of(tied_plan, "azure-native:network:PrivateDnsZoneGroup") if endpoint.urn in r.dependencies
    )
    assert {endpoint.urn, group.urn} <= set(fs.dependencies)
    (config,) = group.inputs["privateDnsZoneConfigs"]
    zone = next(r for r in _of(tied_plan, "azure-native:privatedns:PrivateZone") if r.id == config["privateDnsZoneId"])
    assert zone.inputs["privateZoneName"] == "privatelink.blob.core.windows.net"
    link = next(r for r in _of(tied_plan, "azure-native:privatedns:VirtualNetworkLink") if zone.urn in r.dependencies)
    storage_subnet = next(
        r for r in _of(tied_plan, "azure-native:network:Subnet") if r.inputs["subnetName"] == "storage"
    )
    assert fs.inputs["filesystemSubnet"] == storage_subnet.id
    assert storage_subnet.id.startswith(link.inputs["virtualNetwork"]["id"] + "/subnets/")


def _deployed(plan: PlanResult, **inputs: Any) -> list[DeployedResource]:
    """The plan's filesystem as deployed, with some inputs as they were then (None: absent)."""
    (fs,) = _of(plan, AMLFS)
    old = {k: v for k, v in {**fs.inputs, **inputs}.items() if v is not None}
    return [DeployedResource(fs.urn, fs.type, fs.name, fs.id, old)]


@pytest.mark.parametrize(
    ("deployed_hsm", "words", "keep"),
    [
        pytest.param(
            None,
            "hsm: not tied to Blob -> tied to container 'checkpoints'",
            "remove gb300:storage.lustre.blobIntegration.enabled: true (no tie is the default)",
            id="adding-the-tie",
        ),
        pytest.param(
            {"settings": {"container": "/x/containers/checkpoints", "loggingContainer": "/x/l", "importPrefix": "/"}},
            "hsm: tied to container 'checkpoints' (import '/') -> tied to container 'checkpoints' (import '/datasets')",
            "set gb300:storage.lustre.blobIntegration.enabled: true with the deployed container and prefixes",
            id="changing-the-import-prefix",
        ),
    ],
)
def test_changing_the_tie_of_a_deployed_filesystem_is_an_error(
    tied_plan: PlanResult, deployed_hsm: Any, words: str, keep: str
) -> None:
    """A deployed filesystem keeps its tie: adding or changing it would replace it, an error naming the key that
    keeps the deployed filesystem as it is, and the migration."""
    (finding,) = data_loss(tied_plan.resources, _deployed(tied_plan, hsm=deployed_hsm), [])
    assert finding.level == Level.ERROR
    assert words in finding.message
    assert f"to keep the deployed one as it is, {keep}; or migrate" in finding.message
    assert "docs/storage.md#tying-a-deployed-filesystem-to-blob" in finding.message


def test_state_with_an_untied_filesystem_fails_the_plan(
    tmp_path: Path, write_stack: Any, tied_raw: dict[str, Any], tied_plan: PlanResult
) -> None:
    """gb300 plan --state of a tied stack against its filesystem deployed without the tie exits 1 with
    storage-data-loss."""
    state = write_stack_export(
        tmp_path / "state.json", tied_plan, inputs=lambda r: {k: v for k, v in r.inputs.items() if k != "hsm"}
    )
    out = tmp_path / "plan.json"
    stack = write_stack(tied_raw, name="reference")
    assert cli.main(["plan", "--stack-file", str(stack), "--state", str(state), "--json", str(out), "--quiet"]) == 1
    errors = [f for f in json.loads(out.read_text())["findings"] if f["level"] == "error"]
    assert {f["rule"] for f in errors} == {"storage-data-loss"}
    assert "not tied to Blob" in errors[0]["message"]


@pytest.mark.parametrize(("tied", "warned"), [(True, True), (False, False)])
def test_sizing_counts_the_exports_reads(tied_raw: dict[str, Any], *, tied: bool, warned: bool) -> None:
    """112 TiB of the 500 tier (56 GB/s) writes 16 TB in 5 minutes (53.3 GB/s) but not while the export reads the
    previous checkpoint over the 30-minute interval (8.9 GB/s more): tied, lustre-checkpoint-throughput warns."""
    raw = copy.deepcopy(tied_raw)
    raw["storage"]["lustre"]["capacityTiB"] = 112
    raw["storage"]["lustre"]["blobIntegration"]["enabled"] = tied
    found = [f for f in run_plan("reference", raw).findings if f.rule == "lustre-checkpoint-throughput"]
    assert bool(found) == warned
    if warned:
        assert "the auto-export reads to copy the previous checkpoint to Blob over 30 minutes" in found[0].message
        ckpt = raw["storage"]["checkpoint"]
        size = ckpt["parameters"] * float(sizing.bytes_per_parameter().value)
        need = size / (ckpt["writeMinutes"] * 60) + size / (ckpt["intervalMinutes"] * 60)
        assert f"needs {need / 1e9:,.1f} GB/s" in found[0].message
