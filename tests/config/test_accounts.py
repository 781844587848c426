"""``gb300:slurm.accounts``, ``.qos`` and ``.users``: each mistake is one key-path line (exit 2 from the CLI), declared
accounts turn job accounting on, and the example stack that declares them plans clean."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gb300 import cli, config
from gb300.paths import REPO_ROOT
from tests.support.config_errors import error_lines

EXAMPLE = REPO_ROOT / "examples" / "accounts" / "Pulumi.accounts.yaml"
QOS = [{"name": "normal", "priority": 10}, {"name": "high", "priority": 100, "preempt": ["normal"]}]
TEAM_A = {"name": "team_a", "users": ["alice", "bob"], "fairshare": 3, "gpuLimit": 8, "qos": ["normal", "high"],
          "defaultQos": "normal"}  # fmt: skip
TEAM_B = {"name": "team_b", "users": ["carol"]}


def _with(dev_raw: dict[str, Any], slurm: dict[str, Any], head: dict[str, Any] | None = None) -> dict[str, Any]:
    raw = copy.deepcopy(dev_raw)
    raw["slurm"] = slurm
    if head is not None:
        raw["head"] = head
    return raw


@pytest.mark.parametrize(
    ("slurm", "line"),
    [
        ({"qos": QOS, "accounts": [TEAM_A, {"name": "team_a"}]},
         "gb300:slurm.accounts[1].name: duplicates slurm.accounts[0].name (got 'team_a')"),
        ({"qos": [*QOS, {"name": "high"}]},
         "gb300:slurm.qos[2].name: duplicates slurm.qos[1].name (got 'high')"),
        ({"qos": QOS, "accounts": [{**TEAM_A, "name": "Team A"}]},
         "gb300:slurm.accounts[0].name: must be lowercase letters, digits, '_' and '-', starting with a letter "
         "(sacctmgr lowercases account and QoS names) (got 'Team A')"),
        ({"accounts": [{"name": "root"}]},
         "gb300:slurm.accounts[0].name: is Slurm's own root account (got 'root')"),
        ({"qos": QOS, "accounts": [{**TEAM_A, "users": ["alice", "Bob"]}]},
         "gb300:slurm.accounts[0].users[1]: must be a lowercase Linux user name: letters, digits, '_', '.', '@' and "
         "'-', not starting with a digit, '.', '@' or '-' (got 'Bob')"),
        ({"qos": QOS, "accounts": [{**TEAM_A, "entraGroups": ["team-a-group"]}]},
         "gb300:slurm.accounts[0].entraGroups[0]: must be an Entra group object ID, a GUID such as "
         "'00000000-0000-0000-0000-000000000000' (got 'team-a-group')"),
        ({"qos": QOS, "accounts": [{**TEAM_A, "qos": ["normal", "urgent"]}]},
         "gb300:slurm.accounts[0].qos[1]: names a QoS gb300:slurm.qos does not declare (got 'urgent'; declared: "
         "normal, high)"),
        ({"accounts": [{"name": "team_a", "defaultQos": "normal"}]},
         "gb300:slurm.accounts[0].defaultQos: names a QoS gb300:slurm.qos does not declare (got 'normal'; none is "
         "declared)"),
        ({"qos": [QOS[0], {"name": "high", "preempt": ["low"]}]},
         "gb300:slurm.qos[1].preempt[0]: names a QoS gb300:slurm.qos does not declare (got 'low'; declared: normal, "
         "high)"),
        ({"qos": [{"name": "high", "preempt": ["high"]}]},
         "gb300:slurm.qos[0].preempt[0]: names the QoS itself (got 'high')"),
        ({"qos": QOS, "accounts": [{**TEAM_A, "qos": ["high"]}]},
         "gb300:slurm.accounts[0].defaultQos: must be one of the account's qos (high) (got 'normal')"),
        ({"qos": QOS, "accounts": [TEAM_A, TEAM_B], "users": [{"name": "dave", "defaultAccount": "team_a"}]},
         "gb300:slurm.users[0].name: is in no declared account (got 'dave'); add the user to an account's users"),
        ({"qos": QOS, "accounts": [TEAM_A, TEAM_B], "users": [{"name": "alice", "defaultAccount": "team_b"}]},
         "gb300:slurm.users[0].defaultAccount: must be one of 'alice''s accounts (team_a) (got 'team_b')"),
        ({"qos": QOS, "accounts": [TEAM_A], "users": [{"name": "bob", "defaultAccount": "team_a"},
                                                       {"name": "bob", "defaultAccount": "team_a"}]},
         "gb300:slurm.users[1].name: duplicates slurm.users[0].name (got 'bob'); give each user one default account"),
        ({"qos": QOS, "accounts": [TEAM_A, {**TEAM_B, "users": ["alice"]}]},
         "gb300:slurm.users: must give 'alice' a default account: the user is in team_a, team_b"),
        ({"qos": QOS, "accounts": [{**TEAM_A, "gpuLimit": 73}]},
         "gb300:slurm.accounts[0].gpuLimit: must be at most 72, the GPUs of every GPU pool together (got 73); raise "
         "the pools' racks or lower the limit"),
        ({"qos": [{"name": "big", "maxGpusPerUser": 100}]},
         "gb300:slurm.qos[0].maxGpusPerUser: must be at most 72, the GPUs of every GPU pool together (got 100); "
         "raise the pools' racks or lower the limit"),
        ({"partitions": [{"name": "big", "pools": ["train"], "settings": {"AllowQos": "high"}}]},
         "gb300:slurm.partitions[0].settings.AllowQos: needs job accounting, which holds the QoS: declare the QoS in "
         "gb300:slurm.qos (or set gb300:head.slurmdbd: true and create it with sacctmgr)"),
    ],
)  # fmt: skip
def test_an_account_mistake_is_one_key_path_line(dev_raw: dict[str, Any], slurm: dict[str, Any], line: str) -> None:
    """Duplicates, names Slurm would change, a QoS named but not declared, a user's default account that cannot be,
    and a GPU limit above the cluster's GPUs are each one line at their key path."""
    assert error_lines(_with(dev_raw, slurm)) == [line]


def test_accounts_with_accounting_turned_off_is_a_key_path_line(dev_raw: dict[str, Any]) -> None:
    """Accounts with gb300:head.slurmdbd explicitly false is refused at that key, saying why."""
    problems = error_lines(_with(dev_raw, {"qos": QOS, "accounts": [TEAM_A]}, head={"slurmdbd": False}))
    assert len(problems) == 1
    assert problems[0].startswith("gb300:head.slurmdbd: is false, but gb300:slurm.accounts needs job accounting")


def test_declared_accounts_turn_accounting_on(dev_raw: dict[str, Any]) -> None:
    """Without gb300:head.slurmdbd, declaring accounts (or only QoS) runs slurmdbd; declaring neither does not."""
    assert config.parse(_with(dev_raw, {"qos": QOS, "accounts": [TEAM_A]})).accounting
    assert config.parse(_with(dev_raw, {"qos": QOS})).accounting
    assert not config.parse(_with(dev_raw, {})).accounting


def test_a_user_of_one_account_defaults_to_it(dev_raw: dict[str, Any]) -> None:
    """A user in one account needs no gb300:slurm.users entry: that account is the default; a given one wins."""
    slurm = {"qos": QOS, "accounts": [TEAM_A, {**TEAM_B, "users": ["carol", "alice"]}],
             "users": [{"name": "alice", "defaultAccount": "team_b"}]}  # fmt: skip
    parsed = config.parse(_with(dev_raw, slurm)).slurm
    assert parsed.default_account("bob") == "team_a"
    assert parsed.default_account("carol") == "team_b"
    assert parsed.default_account("alice") == "team_b"


def test_an_account_mistake_exits_two_without_a_traceback(
    dev_raw: dict[str, Any], write_stack: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """`gb300 plan` of a stack whose account limit exceeds the cluster exits 2 with the key-path line."""
    path = write_stack(_with(dev_raw, {"accounts": [{"name": "team_a", "gpuLimit": 1000}]}))
    assert cli.main(["plan", "--stack-file", str(path)]) == 2
    err = capsys.readouterr().err
    assert "gb300:slurm.accounts[0].gpuLimit: must be at most 72" in err
    assert "Traceback" not in err


def test_the_accounts_example_plans_clean(capsys: pytest.CaptureFixture[str]) -> None:
    """examples/accounts (two accounts, two QoS, a user in both) plans with exit 0."""
    assert cli.main(["plan", "--stack-file", str(EXAMPLE), "--quiet"]) == 0
    assert "plan passes" in capsys.readouterr().out
