"""Stored blobs survive a deleting job or a stack edit: soft delete, versioning, protected containers."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gb300 import cli, config
from gb300.errors import ConfigError
from gb300.findings import Level
from gb300.node import files as node_files
from gb300.plan import PlanResult
from gb300.plan.runner import register
from gb300.resources import UNKNOWN, DeployedResource, ResourceRecord
from gb300.rules.data_loss import data_loss
from tests.support.policy_support import account, record, run

CONTAINER = "azure-native:storage:BlobContainer"
SERVICE = "azure-native:storage:BlobServiceProperties"
ACCOUNT = "azure-native:storage:StorageAccount"
POLICY = "azure-native:storage:ManagementPolicy"


def _data(r: ResourceRecord) -> bool:
    """Of the data account's component, not the node payload account's (which has soft delete but no versioning:
    its payloads are made again by every publish)."""
    return "NodePayloads" not in (r.parent or "")


def test_payload_account_keeps_deleted_blobs(reference_plan: PlanResult) -> None:
    """The node payload account has blob and container soft delete too (a deleted payload is recoverable)."""
    (service,) = [r for r in reference_plan.resources if r.type == SERVICE and not _data(r)]
    days = reference_plan.config.storage.blob.soft_delete_days  # type: ignore[union-attr]
    assert service.inputs["deleteRetentionPolicy"] == {"enabled": True, "days": days}
    assert service.inputs["containerDeleteRetentionPolicy"] == {"enabled": True, "days": days}


def test_reference_plan_keeps_deleted_and_overwritten_blobs(reference_plan: PlanResult) -> None:
    """The reference account has blob and container soft delete and versioning, on a flat namespace."""
    (service,) = [r for r in reference_plan.resources if r.type == SERVICE and _data(r)]
    days = reference_plan.config.storage.blob.soft_delete_days  # type: ignore[union-attr]
    assert service.inputs["deleteRetentionPolicy"] == {"enabled": True, "days": days}
    assert service.inputs["containerDeleteRetentionPolicy"] == {"enabled": True, "days": days}
    assert service.inputs["isVersioningEnabled"] is True
    (account,) = [r for r in reference_plan.resources if r.type == ACCOUNT and _data(r)]
    assert account.inputs["isHnsEnabled"] is False
    assert service.inputs["blobServicesName"] == "default"


def _version_expiry(records: list[ResourceRecord]) -> dict[str, Any]:
    """The one lifecycle policy's account name and its only rule."""
    (policy,) = [r for r in records if r.type == POLICY]
    (rule,) = policy.inputs["policy"]["rules"]
    return {"account": policy.inputs["accountName"], "name": policy.inputs["managementPolicyName"], "rule": rule}


def test_reference_plan_deletes_previous_versions_after_7_days(reference_plan: PlanResult) -> None:
    """The checkpoint account's lifecycle policy deletes previous blob versions older than 7 days."""
    (account,) = [r for r in reference_plan.resources if r.type == ACCOUNT and _data(r)]
    assert _version_expiry(reference_plan.resources) == {
        "account": account.inputs["accountName"],
        "name": "default",
        "rule": {
            "name": "version-delete-after-days",
            "type": "Lifecycle",
            "enabled": True,
            "definition": {
                "filters": {"blobTypes": ["blockBlob"]},
                "actions": {"version": {"delete": {"daysAfterCreationGreaterThan": 7}}},
            },
        },
    }


def test_previous_version_retention_follows_the_stack(reference_raw: dict[str, Any]) -> None:
    """gb300:storage.blob.previousVersionRetentionDays: 30 makes the rule delete versions older than 30 days."""
    raw = copy.deepcopy(reference_raw)
    raw["storage"]["blob"]["previousVersionRetentionDays"] = 30
    rule = _version_expiry(register("reference", raw))["rule"]
    assert rule["definition"]["actions"]["version"]["delete"] == {"daysAfterCreationGreaterThan": 30}


def test_zero_previous_version_retention_exits_two(
    write_stack: Any, reference_raw: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    """previousVersionRetentionDays: 0 exits 2 with a message at its key path, before anything is planned."""
    raw = copy.deepcopy(reference_raw)
    raw["storage"]["blob"]["previousVersionRetentionDays"] = 0
    assert cli.main(["plan", "--stack-file", str(write_stack(raw)), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "gb300:storage.blob.previousVersionRetentionDays: must be at least 1 (got 0)" in err
    assert "Traceback" not in err


def test_no_lifecycle_policy_without_versioning(reference_raw: dict[str, Any]) -> None:
    """An account without versioning (hierarchical namespace) has no previous versions, and no policy for them."""
    raw = copy.deepcopy(reference_raw)
    raw["storage"]["blob"].update({"hierarchicalNamespace": True, "versioning": False})
    assert not [r for r in register("reference", raw) if r.type == POLICY]


@pytest.mark.parametrize(
    ("tied", "names"),
    [(False, {"datasets", "checkpoints"}), (True, {"datasets", "checkpoints", "lustre-logging"})],
)
def test_reference_containers_are_protected(
    reference_plan: PlanResult, tied_plan: PlanResult, *, tied: bool, names: set[str]
) -> None:
    """Every data container (and, on a stack tying Lustre to Blob, Lustre's logging container) is protected and
    retained, and is created only once soft delete is on (the node payload container holds only payloads the program
    makes again)."""
    plan = tied_plan if tied else reference_plan
    (service,) = [r for r in plan.resources if r.type == SERVICE and _data(r)]
    containers = [r for r in plan.resources if r.type == CONTAINER and "NodePayloads" not in (r.parent or "")]
    assert {c.inputs["containerName"] for c in containers} == names
    for c in containers:
        assert (c.protect, c.retain_on_delete) == (True, True), c.name
        assert "containerName" in c.replace_on_changes
    assert service.urn  # the dependency is on the service resource registered above


def _deployed(plan: PlanResult) -> list[DeployedResource]:
    return [DeployedResource(r.urn, r.type, r.name, r.id, dict(r.inputs)) for r in plan.resources]


@pytest.mark.parametrize(("allow", "level"), [([], Level.ERROR), (["containers"], Level.WARNING)])
def test_removing_a_container_is_data_loss(reference_plan: PlanResult, allow: list[str], level: Level) -> None:
    """A container removed from the stack is a storage-data-loss error, a warning when allowReplace names it."""
    planned = [r for r in reference_plan.resources if not (r.type == CONTAINER and r.name.endswith("checkpoints"))]
    (finding,) = data_loss(planned, _deployed(reference_plan), allow)
    assert finding.level == level
    assert "would delete the blob container and every blob in it" in finding.message


def test_renaming_a_container_is_data_loss(reference_plan: PlanResult) -> None:
    """A changed containerName on a deployed container replaces it: an error naming the change."""
    deployed = _deployed(reference_plan)
    renamed = [
        DeployedResource(d.urn, d.type, d.name, d.id, {**d.inputs, "containerName": "ckpt"})
        if d.type == CONTAINER and d.name.endswith("checkpoints")
        else d
        for d in deployed
    ]
    (finding,) = data_loss(reference_plan.resources, renamed, [])
    assert "containerName: 'ckpt' -> 'checkpoints'" in finding.message


def test_versioning_needs_a_flat_namespace(reference_raw: dict[str, Any]) -> None:
    """Versioning with a hierarchical namespace is refused at its key path (Azure offers no versioning there)."""
    raw = copy.deepcopy(reference_raw)
    raw["storage"]["blob"]["hierarchicalNamespace"] = True
    with pytest.raises(ConfigError) as info:
        config.parse(raw)
    assert str(info.value).startswith("gb300:storage.blob.versioning: needs hierarchicalNamespace: false")
    raw["storage"]["blob"]["versioning"] = False
    assert config.parse(raw).storage.blob.hierarchical_namespace  # type: ignore[union-attr]


@pytest.mark.parametrize(("hns", "kind", "host"), [(False, "block", "blob"), (True, "adls", "dfs")])
def test_blobfuse2_speaks_the_accounts_namespace(
    reference_raw: dict[str, Any], hns: bool, kind: str, host: str
) -> None:
    """Nodes mount a flat account with BlobFuse2's block component, an HNS account with ADLS over dfs."""
    raw = copy.deepcopy(reference_raw)
    raw["storage"]["blob"].update({"hierarchicalNamespace": hns, "versioning": not hns})
    mount = node_files.blobfuse_config(config.parse(raw), "checkpoints")
    assert f"  type: {kind}\n" in mount
    assert f'endpoint: "https://@GB300_BLOB_ACCOUNT@.{host}.core.windows.net"' in mount


def _service(**inputs: Any) -> ResourceRecord:
    body = {"accountName": "tdata", "blobServicesName": "default", **inputs}
    return record(SERVICE, "t-blob-service", {k: v for k, v in body.items() if v is not None})


ON = {"enabled": True, "days": 7}


@pytest.mark.parametrize(
    ("resources", "expected"),
    [
        pytest.param([account(), _service(deleteRetentionPolicy=ON, containerDeleteRetentionPolicy=ON)], [], id="on"),
        pytest.param([account()], ["no blob service properties"], id="no-service"),
        pytest.param(
            [account(), _service(deleteRetentionPolicy=ON)], ["containerDeleteRetentionPolicy.enabled"], id="no-c"
        ),
        pytest.param(
            [account(), _service(deleteRetentionPolicy={"enabled": False}, containerDeleteRetentionPolicy=ON)],
            ["deleteRetentionPolicy.enabled must be true (got False)"],
            id="blob-off",
        ),
        pytest.param(
            [account(), _service(accountName="other", deleteRetentionPolicy=ON, containerDeleteRetentionPolicy=ON)],
            ["no blob service properties"],
            id="other-account",
        ),
        pytest.param(
            [account(), _service(accountName=UNKNOWN, deleteRetentionPolicy=ON, containerDeleteRetentionPolicy=ON)],
            [],
            id="preview-unknown-name",
        ),
    ],
)
def test_blob_soft_delete_rule(resources: list[ResourceRecord], expected: list[str]) -> None:
    """An account without blob and container soft delete is an error naming what is missing."""
    found = run("blob-soft-delete", resources)
    assert len(found) == len(expected)
    for finding, words in zip(found, expected, strict=True):
        assert finding.level == Level.ERROR
        assert words in finding.message
