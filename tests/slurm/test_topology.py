"""The topology/block generator (gb300.slurm.topology) and the `gb300 topology` command."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gb300 import cli
from gb300.commands import topology as command
from gb300.slurm.topology import build, parse_lines, read_fabric_dir

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "slurm"


U1 = "5e797fc6-0f46-421a-8724-0e102c0f723c"
U2 = "5e797fc6-0f46-421a-8724-0e102c0f721e"
ZERO = "00000000-0000-0000-0000-000000000000"


def rack(prefix: str, uuid: str, clique: int, count: int = 18, first: int = 1) -> list[str]:
    return [f"{prefix}{i:03d} {uuid} {clique}" for i in range(first, first + count)]


def block_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if not line.startswith("#")]


def partial(hosts: str, count: int, uuid: str, clique: int) -> str:
    return f"excluded {hosts}: partial NVLink domain, {count} of 18 nodes (ClusterUUID={uuid} CliqueId={clique})"


FULL = ["BlockName=block001 Nodes=gpu-[001-018]", "BlockSizes=18"]
BUILD_CASES = {
    "one-full-rack": (
        rack("gpu-r01-", U1, 1),
        ["BlockName=block001 Nodes=gpu-r01-[001-018]", "BlockSizes=18"],
        [],
    ),
    "two-racks-ordered-by-host": (
        rack("gpu-r02-", U2, 2) + rack("gpu-r01-", U1, 1),
        [
            "BlockName=block001 Nodes=gpu-r01-[001-018]",
            "BlockName=block002 Nodes=gpu-r02-[001-018]",
            "BlockSizes=18",
        ],
        [],
    ),
    "partial-rack-is-a-smaller-block": (
        rack("gpu-r01-", U1, 1) + rack("gpu-r02-", U2, 2, count=12),
        ["BlockName=block001 Nodes=gpu-r01-[001-018]", "BlockName=block002 Nodes=gpu-r02-[001-012]", "BlockSizes=18"],
        [],
    ),
    "zero-uuid-leaves-17": (
        [*rack("gpu-", U1, 1, count=17), f"gpu-018 {ZERO} 0"],
        ["BlockName=block001 Nodes=gpu-[001-017]", "BlockSizes=18"],
        ["excluded gpu-018: fabric failure (ClusterUUID all zeros)"],
    ),
    "clique-zero-and-na": (
        [*rack("gpu-", U1, 1), f"gpu-019 {U1} 0", "gpu-020 N/A N/A"],
        FULL,
        [
            "excluded gpu-019: fabric failure (CliqueId 0)",
            "excluded gpu-020: fabric not reported (ClusterUUID or CliqueId N/A)",
        ],
    ),
    "duplicate-conflicting": (
        [*rack("gpu-", U1, 1), f"gpu-001 {U2} 2"],
        ["BlockName=block001 Nodes=gpu-[002-018]", "BlockSizes=18"],
        ["excluded gpu-001: listed twice with different fabric"],
    ),
    "duplicate-identical": ([*rack("gpu-", U1, 1), f"gpu-001 {U1} 1"], FULL, []),
    "uuid-case-insensitive": (
        rack("gpu-", U1, 1, count=9) + rack("gpu-", U1.upper(), 1, count=9, first=10),
        FULL,
        [],
    ),
}


@pytest.mark.parametrize(("lines", "blocks", "excluded"), BUILD_CASES.values(), ids=BUILD_CASES.keys())
def test_build(lines: list[str], blocks: list[str], excluded: list[str]) -> None:
    """Every NVLink domain becomes a block, partial ones too (Slurm 25.05+); fabric failures are excluded."""
    nodes, problems = parse_lines("\n".join(lines))
    assert problems == []
    topology = build(nodes)
    assert block_lines(topology.render()) == blocks
    assert [str(e) for e in topology.excluded] == excluded
    assert topology.populated is bool(blocks)


def test_interleaved_scale_set_names_group_by_fabric() -> None:
    """Hosts whose names interleave two racks are grouped by ClusterUUID/CliqueId, not by name."""
    nodes, _ = parse_lines((FIXTURES / "nodes.two-racks-interleaved.txt").read_text())
    text = build(nodes).render()
    odd = ",".join(f"{i:03d}" for i in range(1, 37, 2))
    assert f"BlockName=block001 Nodes=gpu-[{odd}]" in text
    assert f"# block002: ClusterUUID={U2} CliqueId=32767" in text


def test_render_is_deterministic_and_comments_exclusions() -> None:
    """The same nodes in any order render the same file, with exclusions kept as comments."""
    text = (FIXTURES / "nodes.partial-and-failed.txt").read_text()
    nodes, _ = parse_lines(text)
    shuffled, _ = parse_lines("\n".join(reversed(text.splitlines())))
    assert build(nodes).render() == build(shuffled).render()
    rendered = build(nodes).render()
    assert "# excluded gpu-r03-007: fabric failure (ClusterUUID all zeros)" in rendered
    assert "(partial: 17 of 18 nodes)\nBlockName=block003 Nodes=gpu-r03-[001-006,008-018]" in rendered
    assert "Nodes=gpu-r03-[001-006,008-018]" in rendered


def test_exclude_partial_keeps_the_pre_25_05_behaviour() -> None:
    """With partial blocks off (Slurm before 25.05), a partial domain is a comment, not a block."""
    nodes, _ = parse_lines("\n".join(rack("gpu-r01-", U1, 1) + rack("gpu-r02-", U2, 2, count=12)))
    topology = build(nodes, partial_blocks=False)
    assert block_lines(topology.render()) == ["BlockName=block001 Nodes=gpu-r01-[001-018]", "BlockSizes=18"]
    assert [str(e) for e in topology.excluded] == [partial("gpu-r02-[001-012]", 12, U2, 2)]


def test_no_block_leaves_plugin_note_and_no_block_sizes() -> None:
    """Without any usable fabric identity the file has no BlockSizes and says to keep the plugin off."""
    nodes, _ = parse_lines(f"gpu-001 {ZERO} 0\ngpu-002 N/A N/A")
    rendered = build(nodes).render()
    assert "BlockSizes" not in rendered
    assert "keep TopologyPlugin off" in rendered


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("gpu-001 " + U1, "line 1: expected '<hostname> <ClusterUUID> <CliqueId>'"),
        ("gpu-001 not-a-uuid 1", "line 1: ClusterUUID must be a UUID"),
        (f"gpu-001 {U1} one", "line 1: CliqueId must be a non-negative integer (got 'one')"),
        (f"gpu_001! {U1} 1", "line 1: hostname must be letters, digits"),
    ],
    ids=["two-fields", "bad-uuid", "bad-clique", "bad-hostname"],
)
def test_malformed_lines_are_reported_with_line_numbers(line: str, message: str) -> None:
    """Each malformed line is reported with its number and what was expected."""
    nodes, problems = parse_lines(line)
    assert nodes == []
    [problem] = problems
    assert str(problem).startswith(message)


def test_block_size_comes_from_the_caller() -> None:
    """A smaller block size (another SKU's NVLink domain) changes which domains are complete."""
    nodes, _ = parse_lines("\n".join(rack("gpu-", U1, 1, count=8)))
    assert block_lines(build(nodes, block_size=8).render())[-1] == "BlockSizes=8"


def test_fabric_dir_reads_nested_and_flat_json(tmp_path: Path) -> None:
    """Fabric files may hold the identity at top level or under 'fabric'; broken files are problems."""
    (tmp_path / "gpu-001.json").write_text(json.dumps({"ClusterUUID": U1, "CliqueId": 1}))
    (tmp_path / "gpu-002.json").write_text(json.dumps({"fabric": {"cluster_uuid": U1, "clique_id": "1"}}))
    (tmp_path / "gpu-003.json").write_text("{not json")
    (tmp_path / "gpu-004.json").write_text(json.dumps({"gpus": 4}))
    nodes, problems = read_fabric_dir(tmp_path)
    assert [n.host for n in nodes] == ["gpu-001", "gpu-002"]
    assert [p.where for p in problems] == ["gpu-003.json", "gpu-004.json"]


@pytest.mark.parametrize(
    ("name", "body"),
    [
        ("gpu-001\n.json", {"ClusterUUID": U1, "CliqueId": 1}),
        ("gpu-001.json", {"ClusterUUID": U1 + "\n", "CliqueId": "1\n"}),
    ],
    ids=["newline-in-file-name", "newline-in-identity"],
)
def test_a_fabric_file_cannot_add_a_line_to_topology_conf(tmp_path: Path, name: str, body: dict[str, object]) -> None:
    """A fabric file named `gpu-001<newline>.json` (its host name ends in a newline, which a `$` anchor accepts) or
    an identity ending in one is a problem naming the file, and topology.conf keeps one line per block: slurmctld
    never reads a host name split over two lines."""
    (tmp_path / name).write_text(json.dumps(body))
    for i in range(2, 19):
        (tmp_path / f"gpu-{i:03d}.json").write_text(json.dumps({"ClusterUUID": U1, "CliqueId": 1}))
    nodes, problems = read_fabric_dir(tmp_path)
    assert len(problems) == (1 if "\n" in name else 0)
    text = build(nodes, block_size=18).render()
    assert all(line.startswith(("#", "BlockName=", "BlockSizes=")) for line in text.splitlines()), text
    assert all("\n" not in n.host and "\n" not in n.cluster_uuid for n in nodes)


def parse_cli(*args: str) -> argparse.Namespace:
    """Arguments of `gb300 topology ...` parsed by the command's own parser, as the CLI registers it."""
    parser = argparse.ArgumentParser(prog="gb300")
    command.add_parser(parser.add_subparsers())
    return parser.parse_args(["topology", *args])


CLI_CASES = {
    "valid": (
        ["--nodes", "nodes.partial-and-failed.txt"],
        (0, "BlockName=block002 Nodes=gpu-r02-[001-012]", "excluded gpu-r03-007: fabric failure"),
    ),
    "exclude-partial": (
        ["--nodes", "nodes.partial-and-failed.txt", "--exclude-partial"],
        (
            0,
            "BlockName=block001 Nodes=gpu-r01-[001-018]",
            "excluded gpu-r02-[001-012]: partial NVLink domain",
        ),
    ),
    "unreadable": (
        ["--nodes", "missing.txt"],
        (2, "", "--nodes missing.txt: cannot be read (No such file or directory)"),
    ),
    "malformed": (
        ["--nodes", "ibstat.gb300.healthy.txt"],
        (2, "", "line 1: expected '<hostname> <ClusterUUID> <CliqueId>'"),
    ),
    "bad-block-size": (
        ["--nodes", "nodes.two-racks-interleaved.txt", "--block-size", "0"],
        (2, "", "--block-size: must be at least 1"),
    ),
}


@pytest.mark.parametrize(("argv", "expected"), CLI_CASES.values(), ids=CLI_CASES.keys())
def test_cli_exit_codes_and_streams(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
    expected: tuple[int, str, str],
) -> None:
    """topology.conf goes to stdout and exclusions to stderr (exit 0); bad input exits 2 with no traceback."""
    rc, stdout_has, stderr_has = expected
    monkeypatch.chdir(FIXTURES)
    assert command.run(parse_cli(*argv)) == rc
    out, err = capsys.readouterr()
    assert stdout_has in out
    if rc == 2:
        assert out == ""
    assert stderr_has in err
    assert "Traceback" not in err


def test_cli_malformed_input_reports_every_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Each invalid line gets its own stderr line, then a summary; nothing is written to stdout."""
    nodes = tmp_path / "nodes.txt"
    nodes.write_text(f"gpu-001 {U1} 1\ngpu-002 {U1}\n\ngpu-003 {U1} x\n")
    assert command.run(parse_cli("--nodes", str(nodes))) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == [
        f"line 2: expected '<hostname> <ClusterUUID> <CliqueId>' (got 'gpu-002 {U1}')",
        "line 4: CliqueId must be a non-negative integer (got 'x')",
        "2 invalid input lines; nothing written",
    ]


@pytest.mark.slow
def test_shipped_generator_runs_on_stdlib_alone(tmp_path: Path) -> None:
    """The three shipped modules run as `python3 -m gb300.slurm.topology` without site-packages."""
    lib = tmp_path / "lib" / "gb300" / "slurm"
    lib.mkdir(parents=True)
    for name in ("__init__.py", "hostlist.py", "topology.py"):
        shutil.copy(REPO / "infra/gb300/slurm" / name, lib / name)
    result = subprocess.run(
        [sys.executable, "-S", "-m", "gb300.slurm.topology", "--nodes", "-"],
        input="\n".join(rack("gpu-", U1, 1)),
        env={"PYTHONPATH": str(tmp_path / "lib"), "PATH": os.environ["PATH"]},
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "BlockName=block001 Nodes=gpu-[001-018]" in result.stdout


@pytest.mark.parametrize(
    ("argv", "rc", "stderr_has"),
    [
        (["--nodes", "nodes.two-racks-interleaved.txt", "--vm-size", "Standard_ND128isr_GB300_v6"], 0, ""),
        (["--nodes", "nodes.two-racks-interleaved.txt", "--vm-size", "Standard_Nope"], 2, "not in the SKU catalog"),
    ],
    ids=["catalog-size", "unknown-size"],
)
def test_gb300_cli_runs_topology(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, argv: list[str], rc: int, stderr_has: str
) -> None:
    """`gb300 topology` is registered on the CLI; --vm-size takes the block size from the catalog."""
    monkeypatch.chdir(FIXTURES)
    assert cli.main(["topology", *argv]) == rc
    out, err = capsys.readouterr()
    assert stderr_has in err
    assert ("BlockSizes=18" in out) is (rc == 0)
