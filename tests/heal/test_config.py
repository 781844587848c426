"""``gb300:remediation``: off by default, rails defaulting to data/remediation.yaml, bad values one line each."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gb300.config.messages import parse
from gb300.errors import ConfigError
from gb300.facts.loader import data
from gb300.heal import policy


def test_off_by_default_with_the_data_files_rails(reference_raw: dict[str, Any]) -> None:
    """A stack that says nothing gets no loop, and the rails of data/remediation.yaml."""
    settings = parse(reference_raw).remediation
    rails = data("remediation.yaml")["rails"]
    assert settings.enabled is False
    assert (settings.max_nodes_per_rack, settings.max_racks, settings.halt_share) == (
        rails["maxNodesPerRack"],
        rails["maxRacks"],
        rails["haltShare"],
    )


def test_stack_values_reach_the_policy(reference_raw: dict[str, Any]) -> None:
    """What the stack sets is what the loop compares against."""
    raw = copy.deepcopy(reference_raw)
    raw["remediation"] = {"enabled": True, "maxNodesPerRack": 1, "haltShare": 0.2, "requeueJobs": True}
    loaded = policy.load(parse(raw).remediation)
    assert (loaded.max_nodes_per_rack, loaded.halt_share, loaded.requeue_jobs) == (1, 0.2, True)


@pytest.mark.parametrize(
    ("value", "line"),
    [
        ({"maxNodesPerRack": 0}, "gb300:remediation.maxNodesPerRack: must be at least 1 (got 0)"),
        ({"haltShare": 1.5}, "gb300:remediation.haltShare: must be at most 1.0 (got 1.5)"),
        ({"maxRack": 2}, "gb300:remediation.maxRack: is not a known key; did you mean 'maxRacks'?"),
    ],
)
def test_bad_values_name_their_key(reference_raw: dict[str, Any], value: dict[str, Any], line: str) -> None:
    """Each bad remediation value is reported on one line with its full key path."""
    raw = copy.deepcopy(reference_raw)
    raw["remediation"] = value
    with pytest.raises(ConfigError) as caught:
        parse(raw)
    assert line in [str(p) for p in caught.value.problems]
