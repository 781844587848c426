"""Every command-line option that takes a file: read by the strict reader of files from elsewhere
(:mod:`gb300.io.reader`), or written by the one writer (:mod:`gb300.io.writer`). The options are found by walking
the real argument parser, so a new file option without a row here fails."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path

import pytest

from gb300 import cli
from gb300.io import reader

FILE_METAVARS = {"FILE", "PATH", "DIR", "STATE", "SCENARIO.yaml", "REPORT"}
# Metavars of values that are not files; an argument whose metavar is in neither set fails
# test_every_argument_says_whether_it_takes_a_file, so a file option cannot hide behind a new metavar.
VALUE_METAVARS = {
    "NAME", "N", "CIDR", "REGION", "SIZE", "M", "B", "S", "SECONDS", "URL", "NAME=SHA256", "CMD", "TIME", "ID", "RG",
    "live",
}  # fmt: skip

# (command words, option) -> argv with F standing for the file, which holds a NUL byte (no text file does).
INPUTS: dict[tuple[str, str], list[str]] = {
    ("init", "--ssh-public-key"): ["init", "fileoptions", "--ssh-public-key", "F", "--signing-key", "KEY"],
    ("plan", "--stack-file"): ["plan", "--stack-file", "F"],
    ("plan", "--state"): ["plan", "--stack", "dev", "--state", "F"],
    ("plan", "--quota"): ["plan", "--stack", "dev", "--quota", "F"],
    ("plan", "--prices"): ["plan", "--stack", "dev", "--prices", "F"],
    ("topology", "--nodes"): ["topology", "--nodes", "F", "--block-size", "18"],
    ("topology", "--fabric-dir"): ["topology", "--fabric-dir", "FDIR", "--block-size", "18"],
    ("payload publish", "--stack-file"): ["payload", "publish", "--stack-file", "F", "--account-url", "URL"],
    ("rollout", "--stack-file"): ["rollout", "--dry-run", "--stack-file", "F", "--state", "STATE", "--azure", "live"],
    ("rollout", "--state"): ["rollout", "--dry-run", "--stack", "dev", "--state", "F", "--azure", "live"],
    ("rollout", "--azure"): ["rollout", "--dry-run", "--stack", "dev", "--state", "STATE", "--azure", "F"],
    ("migrate-racks", "--stack-file"): ["migrate-racks", "--stack-file", "F", "--state", "F", "--out", "OUT"],
    ("migrate-racks", "--state"): ["migrate-racks", "--stack", "dev", "--state", "F", "--out", "OUT"],
    ("status", "--state"): ["status", "--state", "F"],
    ("strip-state", "state"): ["strip-state", "F", "--out", "OUT"],
    ("heal simulate", "scenario"): ["heal", "simulate", "F"],
    ("goodput", "--nodes"): [
        "goodput",
        "--nodes",
        "F",
        "--sacct",
        "F",
        "--since",
        "2026-11-01",
        "--until",
        "2026-12-01",
    ],
    ("usage", "--stack-file"): ["usage", "--sacct", "F", "--since", "2026-11-01", "--stack-file", "F"],
    ("usage", "--prices"): ["usage", "--sacct", "F", "--since", "2026-11-01", "--stack", "dev", "--prices", "F"],
}
OUTPUTS = {
    ("init", "--signing-key"): "writer.create_new (0600)",
    ("plan", "--json"): "writer.replacing (0644)",
    ("payload keygen", "--out"): "writer.create_new (0600)",
    ("migrate-racks", "--out"): "writer.replace, one file each (commands.sh 0755)",
    ("strip-state", "--out"): "writer.replace (0600)",
    ("heal simulate", "--json"): "writer.replace (0644)",
    ("heal simulate", "--decisions"): "writer.replace (0644)",
    ("goodput", "--json"): "writer.replace (0644)",
    ("usage", "--json"): "writer.replace (0644)",
}
NOT_HERE: dict[tuple[str, str], str] = {
    ("goodput", "--sacct"): (
        "a month of sacct --json is gigabytes: gb300.ops.sacct_stream reads it one job at a time in bounded memory "
        "(a job over 8 MiB stops the read); what it cannot read is a counted, named problem in the report"
    ),
    ("usage", "--sacct"): (
        "sacct --json read one job at a time by gb300.ops.sacct_stream, as goodput's --sacct (a file, or '-' for a "
        "pipe from the head); no jobs array at all is exit 2 naming it, anything else a counted, named problem"
    ),
    ("goodput", "--heal"): (
        "the decision records are read a line at a time (one JSON line each, any number); a line that is not a "
        "record is a counted, named problem in the report"
    ),
}


def _walk(parser: argparse.ArgumentParser, words: tuple[str, ...] = ()) -> Iterator[tuple[str, argparse.Action]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _walk(sub, (*words, name))
        elif _takes_a_file(action):
            yield " ".join(words), action


def _takes_a_file(action: argparse.Action) -> bool:
    metavar = action.metavar if isinstance(action.metavar, str) else ""
    return action.type is Path or bool(FILE_METAVARS & set(metavar.split("|")))


def _all_arguments(
    parser: argparse.ArgumentParser, words: tuple[str, ...] = ()
) -> Iterator[tuple[str, argparse.Action]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _all_arguments(sub, (*words, name))
        elif action.nargs != 0:
            yield " ".join(words), action


def _unsorted(parser: argparse.ArgumentParser) -> list[str]:
    """Arguments of ``parser`` that take a value without choices, a number type or a known metavar."""
    out = []
    for words, action in _all_arguments(parser):
        metavar = action.metavar if isinstance(action.metavar, str) else None
        typed = action.type is not None and action.type not in {str, Path}
        if action.choices or action.type in {int, float} or (typed and metavar is None):
            continue
        if metavar is None or not set(metavar.split("|")) <= FILE_METAVARS | VALUE_METAVARS:
            out.append(f"{words} {(action.option_strings or [action.dest])[0]} (metavar {metavar!r})")
    return out


def test_every_argument_says_whether_it_takes_a_file() -> None:
    """Every argument that takes a value has choices, a number type, or a metavar known to name a file or a value:
    an option added with a new metavar (`--config CONFIG`, or none at all) fails until it is sorted, so a file
    option cannot escape the rows below by its spelling."""
    assert _unsorted(cli.build_parser()) == []
    assert FILE_METAVARS.isdisjoint(VALUE_METAVARS)
    probe = argparse.ArgumentParser()
    probe.add_argument("--config", metavar="CONFIG")
    probe.add_argument("--input")
    probe.add_argument("--stack", metavar="NAME")
    assert _unsorted(probe) == [" --config (metavar 'CONFIG')", " --input (metavar None)"]


def file_options() -> set[tuple[str, str]]:
    """(command words, option or positional name) of every argument that takes a file, from the real parser."""
    return {(words, (a.option_strings or [a.dest])[0]) for words, a in _walk(cli.build_parser())}


def test_every_file_option_is_read_or_written_by_the_one_reader_or_writer() -> None:
    """The parser's file options are exactly the rows here: a new one must say how it is read or written."""
    found = file_options()
    listed = set(INPUTS) | set(OUTPUTS) | set(NOT_HERE)
    assert not set(INPUTS) & set(OUTPUTS)
    assert found - listed == set(), "file options with no row (read them with gb300.io.reader)"
    assert listed - found == set(), "rows for options the parser no longer has"


@pytest.mark.parametrize("option", sorted(INPUTS), ids=lambda o: " ".join(o).replace(" ", "-"))
def test_each_input_file_goes_through_the_strict_reader(
    option: tuple[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The command reads the option's file with gb300.io.reader (its size cap, UTF-8, no NUL) and refuses a file
    that is no document with exit 2 on one line naming it, before anything else happens."""
    bad = tmp_path / "fabric" / "gpu-001.json"  # --fabric-dir reads the directory's *.json files
    bad.parent.mkdir()
    bad.write_bytes(b"{\x00\n")
    state = tmp_path / "state.json"
    state.write_text('{"version": 3, "deployment": {"resources": []}}', encoding="utf-8")
    words = {
        "F": str(bad),
        "FDIR": str(bad.parent),
        "KEY": str(tmp_path / "key.pem"),
        "OUT": str(tmp_path / "out"),
        "STATE": str(state),
        "URL": "https://gb300test.blob.core.windows.net",
    }
    read: list[Path] = []
    real = reader.read_text

    def recording(path: Path, kind: reader.Kind) -> str:
        read.append(Path(path))
        return real(path, kind)

    monkeypatch.setattr(reader, "read_text", recording)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    code = cli.main([words.get(w, w) for w in INPUTS[option]])
    err = capsys.readouterr().err.strip().splitlines()
    assert bad in read
    assert code == 2
    assert len(err) == 1, err
    assert str(bad) in err[0]
    assert not (tmp_path / "out").exists()
    assert not (tmp_path / "key.pem").exists()


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (None, "is not a regular file"),
        (b'{"ClusterUUID": "' + b"x" * 70_000 + b'"}', "is larger than 64 KiB"),
        (b'{"ClusterUUID": "a", "ClusterUUID": "b", "CliqueId": 1}', "ClusterUUID"),
        (b"\xff\xfe{}", "is not UTF-8 text"),
        (b'{"ClusterUUID": ', "is not JSON (line 1"),
    ],
    ids=["symlink", "too-large", "duplicate-key", "not-utf8", "not-json"],
)
def test_fabric_dir_files_are_refused_on_one_line_each(
    content: bytes | None, expected: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`gb300 topology --fabric-dir` refuses a symbolic link (to a file outside, such as /etc/shadow), a file over
    the cap, a key given twice, bytes that are not UTF-8 and broken JSON: exit 2, one line naming the file, and
    nothing printed to stdout."""
    fabric = tmp_path / "fabric"
    fabric.mkdir()
    target = fabric / "gpu-001.json"
    if content is None:
        outside = tmp_path / "secret"
        outside.write_text('{"ClusterUUID": "00000000-0000-0000-0000-000000000001", "CliqueId": 1}')
        target.symlink_to(outside)
    else:
        target.write_bytes(content)
    code = cli.main(["topology", "--fabric-dir", str(fabric), "--block-size", "18"])
    out, err = capsys.readouterr()
    assert code == 2
    assert out == ""
    (line,) = err.strip().splitlines()
    assert line.startswith(f"--fabric-dir {target}: ")
    assert expected in line
