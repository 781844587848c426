"""``gb300:remediation``: off by default, rails defaulting to data/remediation.yaml, bad values one line each."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gb300 import cli
from gb300.config.messages import parse
from gb300.errors import ConfigError
from gb300.facts.loader import data
from gb300.heal import policy

ROLE_ID = (
    "/subscriptions/00000000-0000-0000-0000-00000000cafe/providers/Microsoft.Authorization/roleDefinitions/"
    "5d5b6a4e-0c39-4f7e-9d53-2f8a3e1c7b10"
)


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
    raw["remediation"] = {
        "enabled": True,
        "roleDefinitionId": ROLE_ID,
        "maxNodesPerRack": 1,
        "haltShare": 0.2,
        "requeueJobs": True,
    }
    loaded = policy.load(parse(raw).remediation)
    assert (loaded.max_nodes_per_rack, loaded.halt_share, loaded.requeue_jobs) == (1, 0.2, True)


@pytest.mark.parametrize(
    ("value", "line"),
    [
        ({"maxNodesPerRack": 0}, "gb300:remediation.maxNodesPerRack: must be at least 1 (got 0)"),
        ({"haltShare": 1.5}, "gb300:remediation.haltShare: must be at most 1.0 (got 1.5)"),
        ({"maxRack": 2}, "gb300:remediation.maxRack: is not a known key; did you mean 'maxRacks'?"),
        (
            {"roleDefinitionId": "gb300 remediation"},
            "gb300:remediation.roleDefinitionId: must be a role definition id /subscriptions/<guid>/providers/"
            "Microsoft.Authorization/roleDefinitions/<guid> (got 'gb300 remediation')",
        ),
    ],
)
def test_bad_values_name_their_key(reference_raw: dict[str, Any], value: dict[str, Any], line: str) -> None:
    """Each bad remediation value is reported on one line with its full key path."""
    raw = copy.deepcopy(reference_raw)
    raw["remediation"] = value
    with pytest.raises(ConfigError) as caught:
        parse(raw)
    assert line in [str(p) for p in caught.value.problems]


def test_enabled_without_a_role_exits_2_naming_the_key_and_the_command(
    reference_raw: dict[str, Any], write_stack: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """`gb300 plan` of a stack that turns the loop on without the operator's custom role exits 2 with one line
    naming gb300:remediation.roleDefinitionId and the commands that create the role."""
    raw = copy.deepcopy(reference_raw)
    raw["remediation"] = {"enabled": True}
    assert cli.main(["plan", "--stack-file", str(write_stack(raw))]) == 2
    err = capsys.readouterr().err
    [line] = [x for x in err.splitlines() if x.startswith("gb300:remediation")]
    assert line.startswith("gb300:remediation.roleDefinitionId: is required when gb300:remediation.enabled is true")
    assert "gb300 heal role" in line
    assert "az role definition create" in line
