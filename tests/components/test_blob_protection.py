"""Stored blobs survive a deleting job or a stack edit: soft delete, versioning, protected containers."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gb300 import config
from gb300.errors import ConfigError
from gb300.findings import Level
from gb300.node import files as node_files
from gb300.plan import PlanResult, ResourceRecord
from gb300.rules.base import UNKNOWN
from gb300.rules.data_loss import DeployedResource, data_loss
from tests.support.policy_support import account, record, run

CONTAINER = "azure-native:storage:BlobContainer"
SERVICE = "azure-native:storage:BlobServiceProperties"
ACCOUNT = "azure-native:storage:StorageAccount"


def test_reference_plan_keeps_deleted_and_overwritten_blobs(reference_plan: PlanResult) -> None:
    """The reference account has blob and container soft delete and versioning, on a flat namespace."""
    (service,) = [r for r in reference_plan.resources if r.type == SERVICE]
    days = reference_plan.config.storage.blob.soft_delete_days  # type: ignore[union-attr]
    assert service.inputs["deleteRetentionPolicy"] == {"enabled": True, "days": days}
    assert service.inputs["containerDeleteRetentionPolicy"] == {"enabled": True, "days": days}
    assert service.inputs["isVersioningEnabled"] is True
    (account,) = [r for r in reference_plan.resources if r.type == ACCOUNT]
    assert account.inputs["isHnsEnabled"] is False
    assert service.inputs["blobServicesName"] == "default"


def test_reference_containers_are_protected(reference_plan: PlanResult) -> None:
    """Every data container is protected and retained, and is created only once soft delete is on (the node
    payload container holds only payloads the program makes again)."""
    (service,) = [r for r in reference_plan.resources if r.type == SERVICE]
    containers = [r for r in reference_plan.resources if r.type == CONTAINER and "NodePayloads" not in (r.parent or "")]
    assert {c.inputs["containerName"] for c in containers} == {"datasets", "checkpoints"}
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
    files = {f.path: f.content for f in node_files.storage_files(config.parse(raw))}
    mount = files["/etc/gb300/blobfuse2/checkpoints.yaml.in"]
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
