"""gb300.slurm.accounts: the accounts file the head step reads back field by field, the slurm.conf lines that enforce
it, and the head's files and steps with and without declared accounts."""

from __future__ import annotations

import copy
import subprocess
from typing import Any

import pytest

from gb300 import config
from gb300 import tags as gb300_tags
from gb300.io import quoting
from gb300.node import context as node_context
from gb300.node import steps as node_steps
from gb300.node.bundle import bundle_for
from gb300.slurm import accounts as slurm_accounts
from gb300.slurm import config as slurm_config

ACCOUNTS = slurm_accounts.SlurmAccounts(
    qos=(
        slurm_accounts.SlurmQos("normal", 10),
        slurm_accounts.SlurmQos("urgent", 1000, ("normal", "low"), max_wall_hours=30, max_gpus_per_user=72),
        slurm_accounts.SlurmQos("low"),
    ),
    accounts=(slurm_accounts.SlurmAccount("pretrain", 3, 108, ("urgent", "normal"), "normal"),
              slurm_accounts.SlurmAccount("evals")),
    users=(("alice", ("pretrain", "evals"), "pretrain"), ("carol", ("evals",), "evals")),
)  # fmt: skip
SLURM = {
    "qos": [{"name": "normal", "priority": 10}, {"name": "urgent", "priority": 1000, "preempt": ["normal"]}],
    "accounts": [{"name": "pretrain", "users": ["alice"], "gpuLimit": 8, "qos": ["normal", "urgent"]}],
}
STEP = "gb300-slurm-accounts"
FILE = f"/etc/gb300/{slurm_config.ACCOUNTS_FILE}"


def _records(text: str) -> list[list[str]]:
    """The records as bash reads them with the step's own field splitting (empty fields kept)."""
    script = r"""
set -euo pipefail
fields() { local rest=$1; F=(); while [[ "$rest" == *$'\t'* ]]; do F+=("${rest%%$'\t'*}"); rest=${rest#*$'\t'}; done
  F+=("$rest"); }
while IFS= read -r line; do case "$line" in '#'* | '') continue ;; esac; fields "$line"; printf '%s\x1f' "${F[@]}"
  printf '\n'; done
"""
    done = subprocess.run(["bash", "-c", script], input=text, capture_output=True, text=True, check=True)
    return [line.removesuffix("\x1f").split("\x1f") for line in done.stdout.splitlines()]


def test_every_record_reads_back_with_its_empty_fields() -> None:
    """The step's field splitting gives each declared value in its place, an unset limit as an empty field, lists
    sorted, a wall time as sacctmgr prints it."""
    records = _records(slurm_accounts.render_accounts("shared", ACCOUNTS))
    assert records[0] == ["cluster", "shared"]
    assert records[1] == ["qos", "normal", "10", "", "", "", ""]
    assert records[2] == ["qos", "urgent", "1000", "low,normal", "1-06:00:00", "72", ""]
    assert records[4] == ["account", "pretrain", "3", "108", "normal,urgent", "normal"]
    assert records[5] == ["account", "evals", "1", "", "", ""]
    assert records[6:] == [["user", "alice", "evals,pretrain", "pretrain"], ["user", "carol", "evals", "evals"]]


@pytest.mark.parametrize(
    ("hours", "shown"), [(1, "01:00:00"), (23, "23:00:00"), (24, "1-00:00:00"), (49, "2-01:00:00")]
)
def test_wall_times_are_written_as_sacctmgr_prints_them(hours: int, shown: str) -> None:
    """MaxWall in the file matches `sacctmgr -nP show qos format=maxwall` (measured: 1-00:00:00), so an unchanged
    limit is no change."""
    assert slurm_accounts.wall_time(hours) == shown


def test_a_control_character_in_any_field_is_refused() -> None:
    """A tab or newline in a value (which would add a field or a record) is refused by the quoting helper."""
    for bad in ("a\tb", "a\nuser\tmallory\troot\troot"):
        hostile = slurm_accounts.SlurmAccounts(accounts=(slurm_accounts.SlurmAccount(bad),))
        with pytest.raises(quoting.UnsafeTextError, match=r"slurm-accounts\.tsv account field"):
            slurm_accounts.render_accounts("shared", hostile)


def test_slurm_conf_enforces_accounts_and_preempts_only_when_a_qos_does() -> None:
    """Declared accounts add enforcement and multifactor priority; PreemptType only with a preempting QoS."""
    keys = dict(slurm_accounts.slurm_conf_lines(ACCOUNTS))
    assert set(keys["AccountingStorageEnforce"].split(",")) == {"associations", "limits", "qos"}
    assert keys["PriorityType"] == "priority/multifactor"
    assert keys["PreemptType"] == "preempt/qos"
    calm = slurm_accounts.SlurmAccounts(qos=(slurm_accounts.SlurmQos("normal"),))
    assert "PreemptType" not in dict(slurm_accounts.slurm_conf_lines(calm))


def _head(dev_raw: dict[str, Any], slurm: dict[str, Any]) -> tuple[dict[str, str], list[str]]:
    raw = copy.deepcopy(dev_raw)
    raw["slurm"] = slurm
    ctx = node_context.build(config.parse(raw), gb300_tags.ROLE_HEAD)
    files = {f.path: f.content for f in bundle_for(ctx, fetch=False).files}
    return files, [s.name for s in node_steps.steps_for(ctx)]


def test_the_head_carries_the_accounts_and_runs_the_step_after_slurmctld(dev_raw: dict[str, Any]) -> None:
    """With accounts the head carries slurmdbd.conf, the accounts file and the step, after slurmctld's setup; its
    slurm.conf enforces them. Without, none of it is there."""
    files, steps = _head(dev_raw, SLURM)
    assert steps.index(STEP) > steps.index("gb300-slurmctld-setup")
    assert "/etc/slurm/slurmdbd.conf" in files
    assert _records(files[FILE])[1][:3] == ["qos", "normal", "10"]
    assert "AccountingStorageEnforce=associations,limits,qos" in files["/etc/slurm/slurm.conf"].splitlines()
    plain_files, plain_steps = _head(dev_raw, {})
    assert STEP not in plain_steps
    assert FILE not in plain_files
    assert "AccountingStorageEnforce" not in plain_files["/etc/slurm/slurm.conf"]


def test_gpus_are_counted_whenever_accounting_is_on(dev_raw: dict[str, Any]) -> None:
    """With accounting on, declared accounts or not, slurm.conf counts GPUs per job (sacct's tres.allocated names
    them for gb300 usage); with accounting off it does not."""
    raw = copy.deepcopy(dev_raw)
    raw["head"] = {**raw.get("head", {}), "slurmdbd": True}
    for stack in (raw, {**raw, "slurm": SLURM}):
        ctx = node_context.build(config.parse(stack), gb300_tags.ROLE_HEAD)
        conf = next(f.content for f in bundle_for(ctx, fetch=False).files if f.path == "/etc/slurm/slurm.conf")
        assert conf.splitlines().count("AccountingStorageTRES=gres/gpu") == 1
    plain, _ = _head(dev_raw, {})
    assert "AccountingStorageTRES" not in plain["/etc/slurm/slurm.conf"]


def test_a_stack_setting_replaces_a_priority_weight(dev_raw: dict[str, Any]) -> None:
    """A PriorityWeight key in gb300:slurm.settings replaces gb300's line (one line, the stack's value)."""
    files, _ = _head(dev_raw, {**SLURM, "settings": {"PriorityWeightAge": 5}})
    lines = files["/etc/slurm/slurm.conf"].splitlines()
    assert [line for line in lines if line.startswith("PriorityWeightAge=")] == ["PriorityWeightAge=5"]
