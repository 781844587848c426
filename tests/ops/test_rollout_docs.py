"""The operator's sequence after `pulumi up`, as docs/rollout.md and docs/day2.md show it, walked command by command:
`pulumi up` (simulated: racks behind on their model), the export, the dry run, the rollout, against a fake ARM and
a stand-in Slurm controller. What cannot run here (Azure, Pulumi, ssh) is simulated, and named below."""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from pathlib import Path

import pytest
import yaml

from gb300 import cli, paths
from gb300.commands import rollout as rollout_cmd
from gb300.heal import fake_arm
from gb300.heal.fake_arm import StaticCredential
from gb300.ops import rollout
from gb300.plan import PlanResult
from gb300.slurm import client as slurm_client
from tests.ops.test_rollout import (
    VMS,
    Clock,
    FakeArm,
    Node,
    SlurmStandIn,
    _hosts,
)
from tests.support.ci_files import PULUMI_CLI, parse_pulumi
from tests.support.fake_arm import SUBSCRIPTION
from tests.support.state import write_stack_export

PAGES = ["rollout.md", "day2.md"]
HEADING = "## After `pulumi up`"
BEHIND = {f"ref-train-r{i:04d}" for i in (2, 5, 9)}  # racks whose VMs `pulumi up` left on the old model
# Not run here, and why: `pulumi up` and `pulumi stack export` need the Pulumi backend and Azure (the test writes the
# export of the reference plan where the command writes it); ssh (the --slurm-via prefix is peeled off and the
# command it carries goes to the stand-in controller).


def _sequence(page: str) -> list[list[str]]:
    text = (paths.REPO_ROOT / "docs" / page).read_text(encoding="utf-8")
    section = text.split(HEADING, 1)[1]
    block = re.search(r"```console\n(.*?)```", section, re.DOTALL)
    assert block is not None, f"docs/{page}: no console block under {HEADING!r}"
    return [shlex.split(line[2:]) for line in block.group(1).splitlines() if line.startswith("$ ")]


def test_both_pages_show_the_same_sequence() -> None:
    """docs/rollout.md and docs/day2.md give the operator one sequence: `pulumi up`, the export, then gb300."""
    sequences = [_sequence(page) for page in PAGES]
    assert sequences[0] == sequences[1]
    assert [argv[:2] for argv in sequences[0]] == [
        ["pulumi", "up"],
        ["pulumi", "stack"],
        ["gb300", "rollout"],
        ["gb300", "rollout"],
    ]


def test_the_cli_reference_names_the_same_sequence() -> None:
    """docs/cli.md (generated from the parser) tells the same order: `pulumi up`, the export, the dry run with
    Azure's answer, then the rollout."""
    text = (paths.REPO_ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    section = text.split("## `gb300 rollout`", 1)[1].split("\n## ", 1)[0]
    steps = ["'pulumi up'", "'pulumi stack export --stack S --file state.json'", "--azure live --dry-run"]
    positions = [section.find(step) for step in steps]
    assert -1 not in positions, steps
    assert positions == sorted(positions)


def _slurm_through(via: Sequence[str], slurm: SlurmStandIn) -> slurm_client.Runner:
    """The --slurm-via prefix as ssh would run it: the remote command is the last word, a shell string."""

    def run(argv: Sequence[str]) -> str:
        assert list(argv[: len(via)]) == list(via), argv
        (remote,) = argv[len(via) :]
        return slurm.run(shlex.split(remote))

    return run


def test_the_documented_sequence_rolls_out_exactly_the_racks_behind(
    reference_plan: PlanResult, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each documented command, in order: the pulumi commands are ones the CLI has, the export lands where the rollout
    reads it, the dry run lists exactly the racks Azure reports behind, and the rollout leaves every VM on the latest
    model and resumed."""
    spec = yaml.safe_load(PULUMI_CLI.read_text(encoding="utf-8"))
    monkeypatch.chdir(paths.REPO_ROOT)  # --stack resolves in the project the operator stands in
    clock = Clock()
    slurm = SlurmStandIn(clock)
    for rack in BEHIND:
        for host in _hosts(rack):
            slurm.nodes[host] = Node({"IDLE"}, boot_time=clock.now() - 86400)
    arm = FakeArm(slurm, {}, BEHIND)
    client_for = rollout.azure_client_factory(
        StaticCredential(), transport=fake_arm.transport(arm), retry_total=0, polling_interval=0
    )
    files: dict[str, Path] = {}
    for argv in _sequence("rollout.md"):
        if argv[0] == "pulumi":
            parsed = parse_pulumi(tuple(argv), spec)
            assert not parsed.problems, (argv, parsed.problems)
            if parsed.command == "stack export":
                path = write_stack_export(
                    tmp_path / str(parsed.flags["--file"]), reference_plan, subscription=SUBSCRIPTION
                )
                files[str(parsed.flags["--file"])] = path
            continue
        written = {name: str(path) for name, path in files.items()}
        args = cli.build_parser().parse_args([written.get(a, a) for a in argv[1:]])
        via = shlex.split(args.slurm_via)
        code = rollout_cmd.run(
            args,
            client_for=client_for,
            slurm_run=_slurm_through(via, slurm),
            sleep=clock.sleep,
            now=clock.now,
        )
        out = capsys.readouterr().out
        assert code == 0, out
        if args.dry_run:
            assert sorted(re.findall(r"ref-train-r\d{4}(?= \()", out)) == sorted(BEHIND)
            assert not [s for s in arm.seen if s.startswith("POST")], "the dry run changed Azure"
        else:
            assert f"rollout: {len(BEHIND)} rack(s) reimaged and resumed" in out
    assert all(all(vms) for vms in arm.runs.values())
    assert all(len(vms) == VMS for vms in arm.runs.values())
    assert all("DRAIN" not in node.states for node in slurm.nodes.values())
