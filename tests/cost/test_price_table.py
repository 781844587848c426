"""The shipped price table: every price has a source and a status, unknown means no value, and every size the
catalog knows has a meter the plan can price (or list as unknown)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from gb300 import cli
from gb300.cost import prices
from gb300.facts import catalog
from gb300.facts.loader import data

TABLE = data("prices.yaml")


def test_the_table_names_its_source_and_date() -> None:
    """The table says where its prices come from, when they were read, and their currency."""
    assert TABLE["source"].startswith("https://")
    assert TABLE["retrieved"]
    assert TABLE["currency"] == "USD"


@pytest.mark.parametrize("meter", sorted(TABLE["meters"]))
def test_every_price_is_sourced_and_unknown_means_no_value(meter: str) -> None:
    """A price has a status and a source; `unknown` carries no value (never a guess), any other status one."""
    row = TABLE["meters"][meter]
    price = row["price"]
    assert price["status"] in {"verified", "unverified", "unknown"}
    assert price["source"].strip()
    assert (price["value"] is None) == (price["status"] == "unknown")
    assert row["per"]["unit"] in {"instance", "GiB", "TiB"}
    assert row["per"]["period"] in {"hour", "month"}
    assert row["live"]["serviceName"]


@pytest.mark.parametrize("size", sorted(catalog.load().skus))
def test_every_catalog_size_has_a_meter(size: str) -> None:
    """A stack may choose any size of the catalog: each has a meter, so its VMs are priced or listed as unknown."""
    assert f"vm/{size}" in prices.meters()


@pytest.mark.parametrize(
    ("storage", "size", "tier"),
    [
        ("Premium_LRS", 64, "P6"),
        ("Premium_LRS", 65, "P10"),
        ("Premium_LRS", 256, "P15"),
        ("StandardSSD_LRS", 128, "E10"),
    ],
)
def test_disks_bill_by_the_tier_they_round_up_to(storage: str, size: int, tier: str) -> None:
    """A disk bills as the smallest tier at least as large as it (data/prices.yaml diskTiers)."""
    assert prices.disk_tier(storage, size) == tier


def test_a_price_file_alias_bomb_is_refused_at_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A 475-byte --prices file of nested YAML aliases (it drove memory past 1.6 GiB, then exit 2 with an empty
    reason) is exit 2 within seconds, one line naming the file, the key path and the first anchor."""
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 10)]
    bomb = tmp_path / "prices.yaml"
    bomb.write_text("\n".join(lines) + "\nmeters: *a9\n", encoding="utf-8")
    started = time.perf_counter()
    code = cli.main(["plan", "--stack", "dev", "--prices", str(bomb)])
    assert time.perf_counter() - started < 5
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err == [f"{bomb}: a0: sets the YAML anchor &a0 (line 1); write the values out"]
