"""The settings catalog (data/slurm_options.yaml ``settings:``) per release: deprecations apply from their release
on, and every owned or typed key is one the releases know."""

from __future__ import annotations

import pytest

from gb300.facts import slurm_settings
from gb300.facts.loader import data


def test_a_deprecation_applies_from_its_release_on() -> None:
    """OverSubscribe=EXCLUSIVE is fine on 25.11 and named with Exclusive=NODE on 26.05."""
    settings = {"OverSubscribe": "EXCLUSIVE"}
    assert slurm_settings.problems("partition_line", settings, "25.11") == []
    [(key, message)] = slurm_settings.problems("partition_line", settings, "26.05")
    assert key == "OverSubscribe"
    assert "use Exclusive=NODE instead" in message


@pytest.mark.parametrize("line", slurm_settings.LINES)
def test_catalog_entries_name_keys_the_releases_know(line: str) -> None:
    """Each owned (but wildcards) and typed key is a key of that line in every release of the catalog."""
    raw = data("slurm_options.yaml")
    entries = [*raw["settings"]["owned"][line], *raw["settings"]["types"][line]]
    for release, body in raw["releases"].items():
        known = {key.lower() for key in body[line]}
        missing = [key for key in entries if not key.endswith("*") and key.lower() not in known]
        assert missing in ([], ["Include"]), f"{release} {line}: {missing}"
