"""Values Azure (or the node's filesystem layout) would refuse are refused in config, one line per key path."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gb300 import cli, config
from gb300.facts import catalog
from gb300.plan import PlanResult
from tests.support.config_errors import error_lines

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAABAgMEBQYHCAkKCwwNDg8QERITFBUWFxgZGhscHR4f ops@example"


def _raw(**changes: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "cluster": {"name": "ref", "location": "eastus2", "tags": {"owner": "ml"}},
        "access": {"sshPublicKey": KEY},
        "gpuPools": [{"name": "train", "racks": 1}],
    }
    raw.update(copy.deepcopy(changes))
    return raw


def _cluster(**changes: Any) -> dict[str, Any]:
    return {"name": "ref", "location": "eastus2", **changes}


def _blob(*mounts: str | None, **extra: Any) -> dict[str, Any]:
    names = ["datasets", "checkpoints", "scratch"]
    return {"blob": {"containers": [{"name": names[i], "mountPath": m} for i, m in enumerate(mounts)], **extra}}


LUSTRE = {"sku": "AMLFS-Durable-Premium-500", "capacityTiB": 16}  # not tied to Blob (the tie is opt-in)

BAD = [
    pytest.param(
        _raw(cluster=_cluster(tags={"azure-team": "x"})),
        "gb300:cluster.tags.azure-team: must not start",
        id="tag-azure",
    ),
    pytest.param(
        _raw(cluster=_cluster(tags={"Microsoft.Owner": "x"})),
        "gb300:cluster.tags.Microsoft.Owner: must not",
        id="tag-ms",
    ),
    pytest.param(
        _raw(cluster=_cluster(tags={"windowsVersion": "x"})),
        "gb300:cluster.tags.windowsVersion: must not",
        id="tag-win",
    ),
    pytest.param(
        _raw(cluster=_cluster(tags={f"t{i}": "v" for i in range(51)})),
        "gb300:cluster.tags: must hold at most 36 tags (got 51)",
        id="too-many-tags",
    ),
    pytest.param(_raw(cluster=_cluster(tags={"k" * 129: "v"})), "must be at most 128 characters", id="long-tag-name"),
    pytest.param(_raw(cluster=_cluster(tags={"k": "v" * 257})), "must be at most 256 characters", id="long-tag-value"),
    pytest.param(
        _raw(cluster=_cluster(location="eastus9")), "gb300:cluster.location: is not an Azure region", id="region"
    ),
    pytest.param(_raw(cluster=_cluster(location="westeurop")), "did you mean 'westeurope'?", id="region-typo"),
    pytest.param(
        _raw(network={"addressSpace": "8.8.0.0/16"}), "gb300:network.addressSpace: must be private", id="public"
    ),
    pytest.param(_raw(network={"addressSpace": "0.0.0.0/0"}), "gb300:network.addressSpace: must be private", id="all"),
    pytest.param(
        _raw(storage={"lustre": {**LUSTRE, "mountPath": "/etc/lustre"}}),
        "gb300:storage.lustre.mountPath: must not be in the system tree /etc",
        id="mount-etc",
    ),
    pytest.param(
        _raw(storage=_blob("/root/data")), "containers[0].mountPath: must not be in the system tree /root", id="root"
    ),
    pytest.param(_raw(storage=_blob("/usr/local/data")), "must not be in the system tree /usr", id="mount-usr"),
    pytest.param(_raw(storage=_blob("/boot")), "must not be in the system tree /boot", id="mount-boot"),
    pytest.param(_raw(storage=_blob("/var/lib/gb300")), "must not be in the system tree /var/lib", id="mount-varlib"),
    pytest.param(_raw(storage=_blob("/home")), "not /home itself", id="mount-home"),
    pytest.param(_raw(storage=_blob("/mnt/resource_nvme")), "not /mnt/resource_nvme itself", id="mount-nvme"),
    pytest.param(_raw(storage=_blob("/data/../etc")), "without '..'", id="mount-dotdot"),
    pytest.param(
        _raw(storage=_blob("/data", "/data")),
        "gb300:storage.blob.containers[1].mountPath: overlaps gb300:storage.blob.containers[0].mountPath (/data)",
        id="same-mount",
    ),
    pytest.param(
        _raw(storage={"lustre": {**LUSTRE, "mountPath": "/shared"}, **_blob("/shared/datasets")}),
        "gb300:storage.blob.containers[0].mountPath: overlaps gb300:storage.lustre.mountPath (/shared)",
        id="mount-in-lustre",
    ),
    pytest.param(
        _raw(storage=_blob("/mnt/resource_nvme/blobfuse2/datasets")),
        "gb300:storage.blob.blockCache.diskPath: overlaps gb300:storage.blob.containers[0].mountPath",
        id="cache-over-mount",
    ),
]


@pytest.mark.parametrize(("raw", "expected"), BAD)
def test_azure_and_filesystem_limits_are_refused(raw: dict[str, Any], expected: str) -> None:
    """Each value Azure or the node layout would refuse is one problem line naming its key path."""
    lines = error_lines(raw)
    assert len(lines) == 1, lines
    assert expected in lines[0]


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(_raw(cluster=_cluster(tags={"team": "ml", "notazure": "x"})), id="tags"),
        pytest.param(_raw(network={"addressSpace": "100.64.0.0/16"}), id="rfc6598"),
        pytest.param(_raw(network={"addressSpace": "192.168.0.0/16"}), id="rfc1918"),
        pytest.param(_raw(storage={"lustre": LUSTRE, **_blob("/mnt/blob/datasets", "/mnt/blob/ckpt")}), id="mounts"),
        pytest.param(_raw(cluster=_cluster(location="swedencentral")), id="newer-region"),
    ],
)
def test_values_within_the_limits_pass(raw: dict[str, Any]) -> None:
    """Ordinary tags, private address spaces, separate mounts and current regions parse."""
    config.parse(raw)


def test_gb300_keeps_within_its_tag_reserve(reference_plan: PlanResult) -> None:
    """No planned resource carries more of gb300's own tags than the reserve the config check assumes."""
    reserve = int(catalog.load().limit("gb300TagReserve"))
    user = set(reference_plan.config.cluster.tags)
    own = [
        len([k for k in r.inputs["tags"] if k not in user])
        for r in reference_plan.resources
        if isinstance(r.inputs.get("tags"), dict)
    ]
    assert own
    assert max(own) <= reserve


def test_cli_refuses_a_public_address_space(
    write_stack: Any, dev_raw: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    """gb300 plan exits 2 with one line for a public VNet address space."""
    raw = {**dev_raw, "network": {"addressSpace": "20.0.0.0/16"}}
    assert cli.main(["plan", "--stack-file", str(write_stack(raw)), "--quiet"]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("gb300:")]
    assert err == [
        "gb300:network.addressSpace: must be private: inside 10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16, "
        "100.64.0.0/10 (RFC 1918, RFC 6598) (got '20.0.0.0/16')"
    ]
