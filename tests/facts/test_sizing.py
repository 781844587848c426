"""Lustre sizing for checkpoints: the arithmetic, the rounding, the command and the plan's warning."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from gb300 import cli
from gb300.config import PolicySettings
from gb300.facts import sizing
from gb300.findings import Level
from gb300.plan.runner import register
from gb300.policy_pack import PolicyResourceView
from gb300.rules import RULES, RuleContext, evaluate
from gb300.rules.checkpoint import lustre_checkpoint_throughput


@pytest.mark.parametrize(
    ("sku", "params", "minutes", "capacity"),
    [
        ("AMLFS-Durable-Premium-500", 1e12, 5, 108),  # 53,333 MB/s / 500 = 106.7 -> 108 (increment 4)
        ("AMLFS-Durable-Premium-250", 1e12, 5, 216),  # 213.3 -> 216 (increment 8)
        ("AMLFS-Durable-Premium-125", 1e12, 5, 432),  # 426.7 -> 432 (increment 16)
        ("AMLFS-Durable-Premium-40", 1e12, 5, 1344),  # 1,333.3 -> 1,344 (increment 48)
        ("AMLFS-Durable-Premium-500", 1e9, 5, 4),  # 0.1 TiB -> the 4 TiB minimum
        ("AMLFS-Durable-Premium-40", 1e9, 60, 48),  # tiny -> the 48 TiB minimum
        ("AMLFS-Durable-Premium-500", 7.5e11, 5, 80),  # exactly 80.0 TiB stays 80
        ("AMLFS-Durable-Premium-500", 7.5e11, 10, 40),  # exactly 40.0 stays 40
    ],
)
def test_capacity_rounds_up_to_increment_and_minimum(sku: str, params: float, minutes: float, capacity: int) -> None:
    """The capacity is the exact need rounded up to the SKU's increment, and at least its minimum."""
    result = sizing.size(sizing.lustre_skus()[sku], params, minutes)
    assert result.capacity_tib == capacity
    assert result.throughput_mbps >= result.needed_mbps


def test_reference_numbers() -> None:
    """1e12 parameters x 16 bytes in 5 minutes is 53,333 MB/s: 106.7 TiB exactly, 108 TiB on the 500 tier."""
    result = sizing.size(sizing.lustre_skus()["AMLFS-Durable-Premium-500"], 1e12, 5)
    assert result.needed_mbps == pytest.approx(53_333.33, abs=0.01)
    assert result.exact_tib == pytest.approx(106.67, abs=0.01)
    assert result.capacity_tib == 108
    assert not result.over_max


def test_sku_table_is_consistent() -> None:
    """Every SKU's minimum is a whole number of increments, and its name carries its MB/s per TiB."""
    for name, sku in sizing.lustre_skus().items():
        assert sku.min_tib % sku.increment_tib == 0
        assert name.endswith(f"-{sku.mbps_per_tib}")
        assert sku.valid_capacity(sku.min_tib)
        assert not sku.valid_capacity(sku.min_tib + 1)


def test_size_storage_command(capsys: pytest.CaptureFixture[str]) -> None:
    """gb300 size-storage --params 1e12 --checkpoint-minutes 5 prints 108 TiB on the 500 MB/s tier."""
    assert cli.main(["size-storage", "--params", "1e12", "--checkpoint-minutes", "5"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("AMLFS-Durable-Premium-500"))
    assert row.split()[3] == "108"
    assert "16.0 TB" in out
    assert "53.3 GB/s" in out


def test_size_storage_counts_the_export(capsys: pytest.CaptureFixture[str]) -> None:
    """--export-minutes 30 adds the auto-export's reads (16 TB over 30 minutes, 8.9 GB/s): 62.2 GB/s, 128 TiB."""
    assert cli.main(["size-storage", "--params", "1e12", "--checkpoint-minutes", "5", "--export-minutes", "30"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("AMLFS-Durable-Premium-500"))
    assert row.split()[3] == "128"
    assert "while the auto-export reads the previous one over 30 min -> needs 62.2 GB/s" in out


def test_size_storage_json(capsys: pytest.CaptureFixture[str]) -> None:
    """--json gives one row per SKU with the capacity, and flags capacities over the documented maximum."""
    assert cli.main(["size-storage", "--params", "1e12", "--checkpoint-minutes", "5", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    rows = {r["sku"]: r for r in doc["skus"]}
    assert rows["AMLFS-Durable-Premium-500"]["capacityTiB"] == 108
    assert rows["AMLFS-Durable-Premium-500"]["overMax"] is False
    assert rows["AMLFS-Durable-Premium-250"]["overMax"] is True


@pytest.mark.parametrize("bad", ["0", "-1", "nan", "lots"])
def test_size_storage_rejects_bad_numbers(bad: str) -> None:
    """Non-positive or non-numeric --params is a usage error (exit 2)."""
    with pytest.raises(SystemExit) as exc:
        cli.main(["size-storage", "--params", bad, "--checkpoint-minutes", "5"])
    assert exc.value.code == 2


def test_checkpoint_rule_is_registered() -> None:
    """lustre-checkpoint-throughput is wired into the rules both front ends run."""
    assert lustre_checkpoint_throughput.id in RULES


def _amlfs(capacity: int, tags: dict[str, str], sku: str = "AMLFS-Durable-Premium-500") -> PolicyResourceView:
    return PolicyResourceView(
        urn="urn:pulumi:t::gb300::azure-native:storagecache:AmlFilesystem::fs",
        type="azure-native:storagecache:AmlFilesystem",
        name="fs",
        inputs={"sku": {"name": sku}, "storageCapacityTiB": capacity, "tags": tags},
    )


@pytest.mark.parametrize(
    ("capacity", "tags", "warned"),
    [
        (108, {"gb300-checkpoint-parameters": "1e12", "gb300-checkpoint-minutes": "5"}, False),
        (104, {"gb300-checkpoint-parameters": "1e12", "gb300-checkpoint-minutes": "5"}, True),
        (4, {"gb300-checkpoint-parameters": "1e12", "gb300-checkpoint-minutes": "60"}, True),
        (56, {"gb300-checkpoint-parameters": "1e12", "gb300-checkpoint-minutes": "10"}, False),
        (52, {"gb300-checkpoint-parameters": "1e12", "gb300-checkpoint-minutes": "10"}, True),
        (
            56,
            {
                "gb300-checkpoint-parameters": "1e12",
                "gb300-checkpoint-minutes": "10",
                "gb300-checkpoint-bytes-per-parameter": "18",
            },
            True,
        ),
        (4, {}, False),  # no checkpoint configured: nothing to check
        (4, {"gb300-checkpoint-parameters": "lots", "gb300-checkpoint-minutes": "5"}, False),  # never raises
    ],
)
def test_checkpoint_rule_table(capacity: int, tags: dict[str, str], warned: bool) -> None:
    """The rule warns exactly when the filesystem's throughput cannot write the tagged checkpoint in time."""
    findings = list(lustre_checkpoint_throughput([_amlfs(capacity, tags)], RuleContext()))
    assert bool(findings) is warned
    if warned:
        assert findings[0].level == Level.WARNING
        assert "capacityTiB to at least" in findings[0].message


def test_plan_warns_when_lustre_is_too_small(dev_raw: dict[str, Any]) -> None:
    """gb300:storage.checkpoint reaches the rule through the program: 8 TiB for 1e12 parameters in 5 min warns."""
    raw = copy.deepcopy(dev_raw)
    raw["storage"] = {
        "nodePayload": dev_raw["storage"]["nodePayload"],
        "lustre": {"sku": "AMLFS-Durable-Premium-500", "capacityTiB": 8},
        "checkpoint": {"parameters": "1e12", "writeMinutes": 5},
    }
    (finding,) = [
        f for f in evaluate(register("dev", raw), PolicySettings()) if f.rule == lustre_checkpoint_throughput.id
    ]
    assert "Set capacityTiB to at least 108" in finding.message
    assert "--params 1e12 --checkpoint-minutes 5" in finding.message


def test_reference_stack_keeps_up_with_its_checkpoints(reference_plan: Any) -> None:
    """The reference stack's 128 TiB on the 500 tier writes its 1e12-parameter checkpoint within 5 minutes."""
    assert not [f for f in reference_plan.findings if f.rule == lustre_checkpoint_throughput.id]
