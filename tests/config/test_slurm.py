"""``gb300:slurm`` and ``gb300:gpuPools[].partitionSettings``: each custom Slurm key is checked against the pinned
release's option catalog, refused with a key-path line when gb300 owns it, misspelt, mistyped or deprecated, and
rendered into slurm.conf when it passes."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gb300 import cli, config
from gb300 import tags as gb300_tags
from gb300.node import context as node_context
from gb300.node.bundle import bundle_for
from gb300.paths import REPO_ROOT
from gb300.slurm import config as slurm_config
from tests.support.config_errors import error_lines

EXAMPLE = REPO_ROOT / "examples" / "custom-slurm" / "Pulumi.custom.yaml"


def _with(dev_raw: dict[str, Any], slurm: dict[str, Any], **pool: Any) -> dict[str, Any]:
    raw = copy.deepcopy(dev_raw)
    raw["slurm"] = slurm
    raw["gpuPools"][0].update(pool)
    return raw


@pytest.mark.parametrize(
    ("slurm", "pool", "line"),
    [
        ({"settings": {"SchedulerParamters": "bf_continue"}}, {},
         "gb300:slurm.settings.SchedulerParamters: unknown slurm.conf key in Slurm 25.11; did you mean "
         "SchedulerParameters?"),
        ({"settings": {"SlurmctldHost": "other"}}, {},
         "gb300:slurm.settings.SlurmctldHost: is set by gb300 (the controller is the head node gb300 deploys); set "
         "gb300:head instead"),
        ({"settings": {"TopologyParam": "SwitchAsNodeRank"}}, {},
         "gb300:slurm.settings.TopologyParam: is set by gb300 (gb300-topology-refresh renders topology/block from "
         "the NVLink domains); set gb300:gpuPools instead"),
        ({"settings": {"HealthCheckInterval": 60}}, {},
         "gb300:slurm.settings.HealthCheckInterval: is set by gb300 (the health gate is gb300's gb300-health-check); "
         "set gb300:health instead"),
        ({"settings": {"MaxArraySize": "lots"}}, {},
         "gb300:slurm.settings.MaxArraySize: must be a whole number of at least 0 (got 'lots')"),
        ({"settings": {"SchedulerParameters": "bf_continue bf_window=10"}}, {},
         "gb300:slurm.settings.SchedulerParameters: must be one word without spaces, quotes, backslashes or '#' "
         "(got 'bf_continue bf_window=10')"),
        ({"settings": {"SallocDefaultCommand": "srun"}}, {},
         "gb300:slurm.settings.SallocDefaultCommand: SallocDefaultCommand is deprecated in Slurm 25.11 (since "
         "20.11); use LaunchParameters=use_interactive_step instead"),
        ({}, {"partitionSettings": {"MaxTime": "forever"}},
         "gb300:gpuPools[0].partitionSettings.MaxTime: must be minutes, [days-]hours:minutes[:seconds] or INFINITE "
         "(got 'forever')"),
        ({}, {"partitionSettings": {"Nodes": "x"}},
         "gb300:gpuPools[0].partitionSettings.Nodes: is set by gb300 (gb300 renders a partition's nodes); set "
         "gb300:slurm.partitions[].pools, .feature or .nodes instead"),
        ({"partitions": [{"name": "big", "feature": "train", "settings": {"Hiden": True}}]}, {},
         "gb300:slurm.partitions[0].settings.Hiden: unknown partition key in Slurm 25.11; did you mean Hidden?"),
        ({"partitions": [{"name": "big", "pools": ["train", "eval"]}]}, {},
         "gb300:slurm.partitions[0].pools[1]: names no GPU or CPU pool (got 'eval'; pools: train)"),
        ({"partitions": [{"name": "train", "pools": ["train"]}]}, {},
         "gb300:slurm.partitions[0].name: is GPU pool 'train''s own partition; choose another name"),
        ({"partitions": [{"name": "big", "pools": ["train"], "feature": "train"}]}, {},
         "gb300:slurm.partitions[0]: must choose its nodes by exactly one of pools or feature (got pools, feature)"),
        ({"partitions": [{"name": "big", "nodes": "dev-train-00000[0-1]"}]}, {},
         "gb300:slurm.partitions[0].nodes: is not a known key"),
        ({"partitions": [{"name": "big", "pools": ["train"], "settings": {"AllowQos": "high"}}]}, {},
         "gb300:slurm.partitions[0].settings.AllowQos: needs job accounting, which holds the QoS: declare the QoS in "
         "gb300:slurm.qos (or set gb300:head.slurmdbd: true and create it with sacctmgr)"),
    ],
)  # fmt: skip
def test_a_bad_custom_slurm_key_is_one_key_path_line(
    dev_raw: dict[str, Any], slurm: dict[str, Any], pool: dict[str, Any], line: str
) -> None:
    """Each unknown, owned, mistyped or deprecated key, or a partition naming no pool, is one line at its key path."""
    assert error_lines(_with(dev_raw, slurm, **pool)) == [line]


def test_every_bad_key_is_reported_at_once(dev_raw: dict[str, Any]) -> None:
    """Several bad settings give one line each, in the stack file's order."""
    raw = _with(dev_raw, {"settings": {"SlurmctldHost": "x", "MaxJobCount": "x", "MinJobAge": 5}})
    assert [line.split(":", 2)[1] for line in error_lines(raw)] == [
        "slurm.settings.SlurmctldHost",
        "slurm.settings.MaxJobCount",
    ]


def test_bad_settings_exit_two_without_a_traceback(
    dev_raw: dict[str, Any], write_stack: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """`gb300 plan` of a stack with a misspelt slurm.conf key exits 2 with the key-path line and no traceback."""
    path = write_stack(_with(dev_raw, {"settings": {"SchedulerParamters": "bf_continue"}}))
    assert cli.main(["plan", "--stack-file", str(path)]) == 2
    err = capsys.readouterr().err
    assert "gb300:slurm.settings.SchedulerParamters: unknown slurm.conf key" in err
    assert "Traceback" not in err


def _slurm_conf(raw: dict[str, Any]) -> str:
    return slurm_config.render(node_context.slurm_cluster(config.parse(raw)))["slurm.conf"]


def test_custom_settings_are_rendered_and_replace_gb300s_own_line(dev_raw: dict[str, Any]) -> None:
    """A custom key lands in slurm.conf once; a key gb300 also renders (SchedulerType) keeps only the stack's value."""
    raw = _with(dev_raw, {"settings": {"SchedulerType": "sched/builtin", "MaxArraySize": 10001, "UsePAM": True}})
    lines = _slurm_conf(raw).splitlines()
    assert [line for line in lines if line.startswith("SchedulerType=")] == ["SchedulerType=sched/builtin"]
    assert "MaxArraySize=10001" in lines
    assert "UsePAM=YES" in lines


def test_partitions_are_rendered_with_their_nodes_and_keys(dev_raw: dict[str, Any]) -> None:
    """The pool's partition takes its partitionSettings in place of gb300's values; extra partitions get their node
    set and keys."""
    raw = _with(
        dev_raw,
        {"partitions": [{"name": "debug", "pools": ["train"], "settings": {"MaxTime": 30}},
                        {"name": "big", "feature": "train"}]},
        partitionSettings={"MaxTime": "2-00:00:00", "PriorityTier": 3},
    )  # fmt: skip
    lines = _slurm_conf(raw).splitlines()
    assert "PartitionName=train Nodes=train Default=YES MaxTime=2-00:00:00 State=UP OverSubscribe=EXCLUSIVE "\
           "PriorityTier=3" in lines  # fmt: skip
    assert "PartitionName=debug Nodes=train Default=NO MaxTime=30 State=UP OverSubscribe=EXCLUSIVE" in lines
    assert "Nodeset=big Feature=train" in lines
    assert "PartitionName=big Nodes=big Default=NO MaxTime=INFINITE State=UP OverSubscribe=EXCLUSIVE" in lines


def test_the_example_stack_plans_clean(capsys: pytest.CaptureFixture[str]) -> None:
    """examples/custom-slurm (custom settings, two extra partitions) plans with exit 0."""
    assert cli.main(["plan", "--stack-file", str(EXAMPLE), "--quiet"]) == 0
    assert "plan passes" in capsys.readouterr().out


def test_the_heads_payload_carries_the_custom_settings() -> None:
    """The head's rendered /etc/slurm/slurm.conf (what a reimaged head places again) holds the example's settings and
    partitions: nothing is left to edit by hand."""
    cfg = config.parse(config.load_stack_file(EXAMPLE))
    head = bundle_for(node_context.build(cfg, gb300_tags.ROLE_HEAD), fetch=False)
    [conf] = [f.content for f in head.files if f.path == "/etc/slurm/slurm.conf"]
    lines = conf.splitlines()
    for key, value in cfg.slurm.settings.items():
        assert f"{key}={'YES' if value is True else value}" in lines
    for part in cfg.slurm.partitions:
        assert any(line.startswith(f"PartitionName={part.name} ") for line in lines)
