"""gb300:storage keys: defaults, and every mistake reported at its exact key path."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gb300 import config
from tests.support.config_errors import error_lines

LUSTRE = {"sku": "AMLFS-Durable-Premium-500", "capacityTiB": 8}
SP = "3c5e9a51-7d2f-4e18-9b0a-2f6d8c41e7a3"
OPT_IN = {"enabled": True, "servicePrincipalId": SP}  # a stack tying Lustre to Blob (off by default)


def test_defaults(reference_raw: dict[str, Any]) -> None:
    """Lustre mounts at /lustre with a Sunday 02:00 window, not tied to Blob; blob has read-only datasets and writable
    checkpoints. A stack that opts in to the tie gets the checkpoints container, datasets imported, checkpoints
    exported and a logging container of its own."""
    raw = copy.deepcopy(reference_raw)
    raw["storage"] = {"lustre": LUSTRE, "blob": {}}
    storage = config.parse(raw).storage
    assert storage.lustre is not None
    assert storage.lustre.mount_path == "/lustre"
    assert (storage.lustre.maintenance_window.day_of_week, storage.lustre.maintenance_window.time_of_day_utc) == (
        "Sunday",
        "02:00",
    )
    assert storage.blob is not None
    assert [(c.name, c.access, c.mount_path) for c in storage.blob.containers] == [
        ("datasets", "read", None),
        ("checkpoints", "readWrite", None),
    ]
    assert storage.allow_replace == []
    assert storage.lustre.blob_integration.enabled is False
    assert storage.lustre_tie is None
    raw["storage"] = {"lustre": {**LUSTRE, "blobIntegration": OPT_IN}, "blob": {}}
    tie = config.parse(raw).storage.lustre_tie
    assert tie is not None
    assert (tie.container, tie.import_prefix, tie.export_prefix, tie.logging_container) == (
        "checkpoints",
        "/datasets",
        "/checkpoints",
        "lustre-logging",
    )


def test_checkpoint_budget(reference_raw: dict[str, Any]) -> None:
    """A checkpoint with only intervalMinutes must be written within the whole interval; '1e12' as text is accepted."""
    raw = copy.deepcopy(reference_raw)
    raw["storage"] = {"lustre": LUSTRE, "checkpoint": {"parameters": "1e12", "intervalMinutes": 30}}
    ckpt = config.parse(raw).storage.checkpoint
    assert ckpt is not None
    assert ckpt.parameters == 1e12
    assert ckpt.budget_minutes == 30


@pytest.mark.parametrize(
    ("storage", "expected"),
    [
        ({"checkpoint": {"parameters": 1e12, "writeMinutes": 5}}, "gb300:storage.checkpoint: needs gb300:storage"),
        ({"lustre": LUSTRE, "checkpoint": {"parameters": 1e12}}, "gb300:storage.checkpoint.writeMinutes: is required"),
        (
            {"lustre": LUSTRE, "checkpoint": {"parameters": 1e12, "writeMinutes": 40, "intervalMinutes": 30}},
            "gb300:storage.checkpoint.writeMinutes: must be at most intervalMinutes (30) (got 40)",
        ),
        ({"lustre": LUSTRE, "checkpoint": {"parameters": 0, "writeMinutes": 5}}, "gb300:storage.checkpoint.parameters"),
        ({"lustre": {**LUSTRE, "mountPath": "/tmp"}}, "gb300:storage.lustre.mountPath: must be a dedicated directory"),
        ({"lustre": {**LUSTRE, "mountPath": "lustre"}}, "gb300:storage.lustre.mountPath: must match"),
        (
            {"lustre": {**LUSTRE, "maintenanceWindow": {"dayOfWeek": "Sun"}}},
            "gb300:storage.lustre.maintenanceWindow.dayOfWeek: must be one of",
        ),
        (
            {"lustre": {**LUSTRE, "maintenanceWindow": {"timeOfDayUTC": "24:00"}}},
            "gb300:storage.lustre.maintenanceWindow.timeOfDayUTC: must match",
        ),
        ({"lustre": {**LUSTRE, "sku": "AMLFS-Durable-Premium-1000"}}, "gb300:storage.lustre.sku: must be one of"),
        (
            {"allowReplace": ["luster"]},
            "gb300:storage.allowReplace[0]: must be one of 'lustre', 'account' or 'containers'",
        ),
        ({"blob": {"accountName": "My-Account"}}, "gb300:storage.blob.accountName: must match"),
        ({"blob": {"containers": []}}, "gb300:storage.blob.containers: must have at least 1 item(s)"),
        ({"blob": {"containers": [{"name": "Data"}]}}, "gb300:storage.blob.containers[0].name: must be 3-63 lowercase"),
        (
            {"blob": {"containers": [{"name": "data"}, {"name": "data"}]}},
            "gb300:storage.blob.containers[1].name: duplicates another container",
        ),
        ({"blob": {"containers": [{"name": "data", "access": "write"}]}}, "gb300:storage.blob.containers[0].access:"),
        ({"blob": {"blockCache": {"memoryMiB": 10}}}, "gb300:storage.blob.blockCache.memoryMiB: must be at least 256"),
        ({"blob": {"cache": {}}}, "gb300:storage.blob.cache: is not a known key"),
        (
            {"lustre": {**LUSTRE, "blobIntegration": {"enabled": True}}, "blob": {}},
            "gb300:storage.lustre.blobIntegration.servicePrincipalId: is required to tie Lustre to Blob",
        ),
        (
            {"lustre": {**LUSTRE, "blobIntegration": {**OPT_IN, "container": "ckpt"}}, "blob": {}},
            "gb300:storage.lustre.blobIntegration.container: must be one of gb300:storage.blob.containers",
        ),
        (
            {"lustre": {**LUSTRE, "blobIntegration": {**OPT_IN, "loggingContainer": "datasets"}}, "blob": {}},
            "gb300:storage.lustre.blobIntegration.loggingContainer: must differ from the data",
        ),
        (
            {"lustre": {**LUSTRE, "blobIntegration": {"servicePrincipalId": "hpc-cache"}}, "blob": {}},
            "gb300:storage.lustre.blobIntegration.servicePrincipalId: must match",
        ),
        (
            {"lustre": {**LUSTRE, "blobIntegration": {"servicePrincipalId": SP, "importPrefix": "datasets"}},
             "blob": {}},
            "gb300:storage.lustre.blobIntegration.importPrefix: must match",
        ),
    ],
)  # fmt: skip
def test_storage_config_errors(reference_raw: dict[str, Any], storage: dict[str, Any], expected: str) -> None:
    """Each invalid gb300:storage value is reported at its key path with what was expected."""
    raw = copy.deepcopy(reference_raw)
    raw["storage"] = storage
    lines = error_lines(raw)
    assert any(line.startswith(expected) for line in lines), lines


def test_the_tie_is_off_without_blob_or_when_disabled(reference_raw: dict[str, Any]) -> None:
    """Lustre without gb300:storage.blob, with blobIntegration.enabled: false, or with tie settings but no opt-in, is
    not tied (no id needed)."""
    raw = copy.deepcopy(reference_raw)
    raw["storage"] = {"lustre": {**LUSTRE, "blobIntegration": {"enabled": True}}}
    assert config.parse(raw).storage.lustre_tie is None
    raw["storage"] = {"lustre": {**LUSTRE, "blobIntegration": {"servicePrincipalId": SP}}, "blob": {}}
    assert config.parse(raw).storage.lustre_tie is None
    raw["storage"] = {"lustre": {**LUSTRE, "blobIntegration": {"enabled": False}}, "blob": {}}
    assert config.parse(raw).storage.lustre_tie is None


def test_a_tie_without_its_service_principal_says_how_to_find_it_and_how_not_to_tie(
    reference_raw: dict[str, Any],
) -> None:
    """An opted-in tie without servicePrincipalId is one line: the key that opted in, the az command that prints the
    id, and that not tying means removing the opt-in (no tie is the default), never setting a key to false."""
    raw = copy.deepcopy(reference_raw)
    raw["storage"] = {"lustre": {**LUSTRE, "blobIntegration": {"enabled": True}}, "blob": {}}
    [line] = error_lines(raw)
    assert line.startswith("gb300:storage.lustre.blobIntegration.servicePrincipalId: is required to tie Lustre")
    assert "(gb300:storage.lustre.blobIntegration.enabled: true)" in line
    assert '`az ad sp list --display-name "HPC Cache Resource Provider" --query "[0].id" -o tsv`' in line
    assert "remove enabled: true (no tie is the default)" in line
    assert "enabled: false" not in line


def test_schema_documents_new_keys() -> None:
    """The stack file JSON Schema knows the storage and monitoring keys (editors complete them)."""
    schema = config.json_schema()
    defs = schema["$defs"]
    assert {"lustre", "blob", "checkpoint", "allowReplace"} <= set(defs["StorageSettings"]["properties"])
    assert {"logs", "prometheus", "grafana", "alerts"} <= set(defs["MonitoringSettings"]["properties"])
