"""docs/tutorial.md, run as written: each `$ gb300 ...` of its console blocks runs from the repository's root on
examples/day2/ and prints exactly the output the page shows; examples/day2/ is what scripts/make-day2-example
writes."""

from __future__ import annotations

import contextlib
import filecmp
import io
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from gb300 import cli, paths

PAGE = paths.REPO_ROOT / "docs" / "tutorial.md"
EXAMPLES = paths.REPO_ROOT / "examples" / "day2"


def _steps() -> list[tuple[str, str]]:
    """(command, output) for each console block's `$ ` line and the lines after it."""
    found = []
    for block in re.findall(r"```console\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.DOTALL):
        lines = block.splitlines()
        assert lines[0].startswith("$ gb300 "), lines[0]
        assert not [line for line in lines[1:] if line.startswith("$ ")], "one command per block"
        found.append((lines[0][2:], "".join(line + "\n" for line in lines[1:])))
    return found


STEPS = _steps()


def test_the_tutorial_walks_the_five_steps() -> None:
    """Plan against state, the refused change, the retired rack, the rollout dry run, the healing simulation."""
    assert [shlex.split(c)[1:3] for c, _ in STEPS] == [
        ["plan", "--stack"],
        ["plan", "--stack-file"],
        ["plan", "--stack-file"],
        ["rollout", "--stack"],
        ["heal", "simulate"],
    ]


@pytest.mark.parametrize(("command", "expected"), STEPS, ids=[c.split(" --")[0] for c, _ in STEPS])
def test_each_step_prints_what_the_page_shows(
    command: str, expected: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The command, from the repository's root, prints the page's output exactly; the refused change exits 1,
    every other step 0."""
    monkeypatch.chdir(paths.REPO_ROOT)
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        code = cli.main(shlex.split(command)[1:])
    capsys.readouterr()
    assert code == (1 if "destructive" in command else 0)
    assert buffer.getvalue() == expected


def test_the_examples_are_what_the_script_writes(tmp_path: Path) -> None:
    """scripts/make-day2-example, run again, writes examples/day2/ byte for byte (regenerate it when the reference
    stack or the program changes)."""
    script = paths.REPO_ROOT / "scripts" / "make-day2-example"
    subprocess.run([sys.executable, str(script), str(tmp_path)], check=True, capture_output=True)
    written = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    shipped = sorted(p.relative_to(EXAMPLES) for p in EXAMPLES.rglob("*") if p.is_file())
    assert written == shipped
    _, mismatch, errors = filecmp.cmpfiles(tmp_path, EXAMPLES, [str(p) for p in written], shallow=False)
    assert (mismatch, errors) == ([], [])
