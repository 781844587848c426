"""The stack configuration contract: good input parses, bad input names its exact key path."""

from __future__ import annotations

import base64
import copy
import struct
from typing import Any

import jsonschema
import pytest
import yaml

from gb300 import config
from gb300.config import stacks as gb300_stacks
from gb300.errors import ConfigError
from tests.support.config_errors import error_lines

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAABAgMEBQYHCAkKCwwNDg8QERITFBUWFxgZGhscHR4f ops@example"


def _ssh_blob(*fields: bytes) -> str:
    return base64.b64encode(b"".join(struct.pack(">I", len(f)) + f for f in fields)).decode()


SHORT_RSA = f"ssh-rsa {_ssh_blob(b'ssh-rsa', bytes([1, 0, 1]), bytes([0xC3, 0x01]))} ops@example"  # 16-bit modulus


def base() -> dict[str, Any]:
    return {
        "cluster": {"name": "ref", "location": "eastus2", "zone": "1", "tags": {"owner": "ml"}},
        "access": {"sshPublicKey": KEY},
        "network": {"addressSpace": "10.40.0.0/16"},
        "gpuPools": [{"name": "train", "vmSize": "Standard_ND128isr_GB300_v6", "racks": 2}],
    }


def with_(path: str, value: Any) -> dict[str, Any]:
    """``base()`` with ``value`` set at a dotted path (``gpuPools.0.racks``); ``...`` deletes the key."""
    raw = base()
    node: Any = raw
    parts = path.split(".")
    for part in parts[:-1]:
        node = node[int(part)] if part.isdigit() else node.setdefault(part, {})
    last = parts[-1]
    if value is ...:
        del node[last]
    elif last.isdigit():
        node[int(last)] = value
    else:
        node[last] = value
    return raw


GOOD = [
    pytest.param(base(), id="minimal"),
    pytest.param(with_("cluster.zone", 2), id="zone-as-number"),
    pytest.param(with_("cluster.zone", ...), id="no-zone"),
    pytest.param(with_("access.sshSourceRanges", ["203.0.113.0/24"]), id="ssh-ranges"),
    pytest.param(with_("gpuPools.0.image", "canonical:ubuntu-24_04-lts:server-arm64:latest"), id="plain-ubuntu"),
    pytest.param(
        with_(
            "gpuPools.0.image",
            "/subscriptions/0/resourceGroups/img/providers/Microsoft.Compute/galleries/g/images/gb/versions/1.0.0",
        ),
        id="gallery-image",
    ),
    pytest.param(with_("policy", {"failOn": "warning", "suppress": ["required-tags"]}), id="policy"),
    pytest.param({**base(), "software": {"nccl": "2.29.7"}}, id="software-pin"),
]

BAD = [
    (with_("gpuPools.0.racks", 0), "gb300:gpuPools[0].racks: must be at least 1 (got 0)"),
    (with_("gpuPools.0.racks", "many"), "gb300:gpuPools[0].racks: must be a whole number (got 'many')"),
    (with_("gpuPools.0.racks", 2.5), "gb300:gpuPools[0].racks: must be a whole number (got 2.5)"),
    (with_("gpuPools.0.racks", ...), "gb300:gpuPools[0].racks: is required"),
    (with_("gpuPools", []), "gb300:gpuPools: must have at least 1 item(s) (got 0)"),
    (with_("gpuPools.0.vmSize", "Standard_ND96asr_v4"), "gb300:gpuPools[0].vmSize: is not a GPU size in the catalog"),
    (with_("gpuPools.0.imag", "x"), "gb300:gpuPools[0].imag: is not a known key; did you mean 'image'?"),
    (with_("gpuPools.0.image", "ubuntu"), "gb300:gpuPools[0].image: must be a marketplace URN"),
    (with_("cluster.name", "Ref"), "gb300:cluster.name: must be lowercase letters, digits and single hyphens"),
    (with_("cluster.name", "a-very-long-name"), "gb300:cluster.name: must be at most 12 characters"),
    (with_("cluster.zone", "4"), "gb300:cluster.zone: must be one of '1', '2' or '3' (got '4')"),
    (with_("cluster.tags", {"costCenter": 4242}), "gb300:cluster.tags.costCenter: must be a string (got 4242)"),
    (with_("cluster.location", ...), "gb300:cluster.location: is required"),
    (with_("access.sshPublicKey", ...), "gb300:access.sshPublicKey: is required"),
    (with_("access.sshPublicKey", "hello"), "gb300:access.sshPublicKey: must be an OpenSSH public key"),
    (with_("access.sshPublicKey", "ssh-ed25519 !!!notbase64"), "the key body is not base64"),
    (with_("access.sshPublicKey", "ssh-dss AAAAB3NzaC1kc3M= x"), "Azure accepts ssh-ed25519, ssh-rsa"),
    (with_("access.sshPublicKey", SHORT_RSA), "gb300:access.sshPublicKey: is an RSA key of 16 bits"),
    (
        with_("access.sshPublicKey", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn..."),
        "gb300:access.sshPublicKey: is a private key",
    ),
    (with_("access.adminUsername", "root"), "gb300:access.adminUsername: is reserved by Azure"),
    (with_("access.sshSourceRanges", ["10.0.0.300/24"]), "gb300:access.sshSourceRanges[0]: must be an IPv4 CIDR"),
    (with_("network.addressSpace", "10.40.0.0"), "gb300:network.addressSpace: must give a prefix length"),
    (with_("network.addressSpace", "10.40.0.1/16"), "gb300:network.addressSpace: has host bits set"),
    (with_("network.addressSpace", "banana"), "gb300:network.addressSpace: must be an IPv4 CIDR"),
    (
        with_("storage", {"lustre": {"sku": "AMLFS-Durable-Premium-999", "capacityTiB": 48}}),
        "gb300:storage.lustre.sku: must be one of",
    ),
    (with_("policy", {"failOn": "fatal"}), "gb300:policy.failOn: must be one of 'error', 'warning' or 'info'"),
    ({**base(), "clustr": {}}, "gb300:clustr: is not a known key; did you mean 'cluster'?"),
    ({**base(), "software": {"ncl": "2.29.7"}}, "gb300:software.ncl: unknown component (got 'ncl')"),
    ({**base(), "software": {"nccl": 2.29}}, "gb300:software.nccl: must be a string (got 2.29); quote numbers in YAML"),
    ({**base(), "software": {"nccl": "latest!"}}, "gb300:software.nccl: must be a version string"),
]


@pytest.mark.parametrize("raw", GOOD)
def test_good_config_parses(raw: dict[str, Any]) -> None:
    """A valid namespace becomes a typed config with every pool's VM count derived from the catalog."""
    cfg = config.parse(raw)
    assert cfg.gpu_pools[0].vms == cfg.gpu_pools[0].racks * 18


@pytest.mark.parametrize(("raw", "expected"), BAD, ids=[e for _, e in BAD])
def test_bad_config_names_key_path(raw: dict[str, Any], expected: str) -> None:
    """Each invalid value is reported once, on a line that starts with its full key path."""
    lines = error_lines(raw)
    assert any(line.startswith(expected) or expected in line for line in lines), lines
    assert len(lines) == 1, lines


def test_all_problems_reported_at_once() -> None:
    """Several mistakes give one line each, so a user fixes them in one pass."""
    raw = with_("gpuPools.0.racks", 0)
    raw["cluster"]["name"] = "Bad_Name"
    raw["network"]["addressSpace"] = "nope"
    with pytest.raises(ConfigError) as info:
        config.parse(raw)
    paths_ = sorted(p.path for p in info.value.problems)
    assert paths_ == ["gb300:cluster.name", "gb300:gpuPools[0].racks", "gb300:network.addressSpace"]


def test_duplicate_pool_names_point_at_the_second() -> None:
    """Two pools with one name are refused at the later pool's name."""
    raw = base()
    raw["gpuPools"].append(dict(raw["gpuPools"][0]))
    assert error_lines(raw)[0].startswith("gb300:gpuPools[1].name: duplicates gpuPools[0].name")


def test_stack_file_namespaces() -> None:
    """Keys of other namespaces are ignored and un-prefixed keys belong to the project (gb300)."""
    raw = config.namespace_from_stack_config({"azure-native:location": "x", "cluster": {"a": 1}, "gb300:network": {}})
    assert raw == {"cluster": {"a": 1}, "network": {}}


def test_pulumi_config_round_trip(reference_raw: dict[str, Any]) -> None:
    """The engine's config map (JSON text per key) reads back to the same namespace."""
    assert config.from_pulumi_config(config.to_pulumi_config(reference_raw)) == reference_raw


def test_unreadable_stack_file_is_a_config_error(tmp_path: Any) -> None:
    """Broken YAML is reported against the file, with its line."""
    bad = tmp_path / "Pulumi.x.yaml"
    bad.write_text("config:\n  gb300:cluster: [\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"is not valid YAML at line"):
        config.load_stack_file(bad)


@pytest.mark.parametrize("stack", ["reference", "dev"])
def test_schema_accepts_shipped_stacks(stack: str) -> None:
    """``gb300 schema`` validates the stack files we ship, so editors don't flag them."""
    doc = yaml.safe_load(gb300_stacks.stack_file(stack).read_text(encoding="utf-8"))
    jsonschema.validate(doc, config.json_schema())


def test_schema_rejects_unknown_key() -> None:
    """An editor using the schema flags a misspelt gb300 key."""
    doc = yaml.safe_load(gb300_stacks.stack_file("dev").read_text(encoding="utf-8"))
    bad = copy.deepcopy(doc)
    bad["config"]["gb300:gpuPool"] = []
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, config.json_schema())
