"""Malformed and hostile input: each case exits 2 with one line on stderr, within seconds, never a traceback."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from gb300 import cli, config
from gb300.commands import plan as plan_command
from gb300.errors import ConfigError

SECONDS = 10.0  # "within seconds": the alias bomb used to take over a minute and gigabytes


def _plan(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    started = time.perf_counter()
    code = cli.main(["plan", *argv])
    assert time.perf_counter() - started < SECONDS
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, err.strip().splitlines()


def _stack_text(dev_raw: dict[str, Any]) -> str:
    return yaml.safe_dump({"config": {f"gb300:{k}": v for k, v in dev_raw.items()}}, sort_keys=False)


def _bomb(levels: int = 9) -> str:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, levels + 1)]
    return "\n".join(lines) + "\n"


def _cases(dev: str) -> dict[str, tuple[bytes, str]]:
    """name -> (file bytes, what the one line must say)."""
    cluster_again = "  gb300:cluster:\n    name: other\n    location: westus3\n"
    return {
        "latin-1": (dev.replace("ops@example", "opérateur").encode("latin-1"), "is not UTF-8 text (byte 0xe9 on line"),
        "binary": (b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 4, "is binary, not text (a NUL byte on line 1)"),
        "duplicate-cluster": (
            (dev + cluster_again).encode(),
            "gives key 'gb300:cluster' twice in one mapping (lines 2 and",
        ),
        "alias-bomb": ((_bomb() + dev + "  gb300:software: *a9\n").encode(), "a0: sets the YAML anchor &a0 (line 1)"),
        "recursive-alias": (
            (dev + "  gb300:software: &loop {a: *loop}\n").encode(),
            "config.gb300:software: sets the YAML anchor &loop",
        ),
        "too-deep": ((dev + "  gb300:software: " + "[" * 500 + "]" * 500 + "\n").encode(), "more than 64 levels deep"),
        "too-big": ((dev + "#" + "x" * 256 * 1024 + "\n").encode(), "is larger than 256 KiB"),
        "not-yaml": ((dev + "  gb300:software: [unclosed\n").encode(), "is not valid YAML at line"),
    }


@pytest.mark.parametrize(
    "case",
    ["latin-1", "binary", "duplicate-cluster", "alias-bomb", "recursive-alias", "too-deep", "too-big", "not-yaml"],
)
def test_malformed_stack_file_is_one_line_exit_two(
    case: str, tmp_path: Path, dev_raw: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    """A stack file that is not small, UTF-8, duplicate-free, bomb-free YAML exits 2 with one line naming it."""
    data, expected = _cases(_stack_text(dev_raw))[case]
    path = tmp_path / "Pulumi.bad.yaml"
    path.write_bytes(data)
    code, err = _plan(["--stack-file", str(path)], capsys)
    assert code == 2
    assert len(err) == 1, err
    assert err[0].startswith(f"{path}: ")
    assert expected in err[0]


def test_duplicate_key_names_both_lines(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A key given twice names both lines, also deep inside the gb300 namespace."""
    path = tmp_path / "Pulumi.dup.yaml"
    path.write_text("config:\n  gb300:cluster:\n    name: a\n    location: eastus2\n    name: b\n", encoding="utf-8")
    code, err = _plan(["--stack-file", str(path)], capsys)
    assert (code, err) == (
        2,
        [
            f"{path}: config.gb300:cluster: gives key 'name' twice in one mapping (lines 3 and 5); YAML keys are "
            "unique and the second would silently replace the first. Keep one"
        ],
    )


def test_an_alias_is_refused_where_it_is_used(tmp_path: Path, dev_raw: dict[str, Any]) -> None:
    """An alias (even to an anchor of ordinary size) is refused naming its key path and line: no file gb300 reads
    needs one, and `pulumi config set` rewrites a stack file without them."""
    text = _stack_text(dev_raw) + "  gb300:policy:\n    <<: {failOn: error}\n    requiredTags: *tags\n"
    path = tmp_path / "Pulumi.anchors.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as refused:
        config.load_stack_file(path)
    line = text.count("\n")
    assert str(refused.value) == (
        f"{path}: config.gb300:policy.requiredTags: uses the YAML alias *tags (line {line}); write the value out"
    )


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        pytest.param([], "it is a JSON array, not an object", id="array"),
        pytest.param({"version": 3, "deployment": []}, "'deployment' must be an object", id="deployment-list"),
        pytest.param({"version": 3, "deployment": {"resources": {"a": 1}}}, "must be a list", id="resources-map"),
        pytest.param({"version": 3, "deployment": {"resources": [{"x": 1}]}}, "resources[0].urn", id="no-urn"),
        pytest.param({"version": 3, "deployment": {"resources": ["urn"]}}, "resources[0] must be an object", id="str"),
        pytest.param({"version": "3"}, "'version' must be one of [1, 2, 3]", id="version-text"),
        pytest.param({"resources": []}, "no 'deployment' object", id="not-an-export"),
        pytest.param(
            {"version": 3, "deployment": {"resources": [{"urn": "urn:pulumi:a::b::t::n", "type": "t", "inputs": []}]}},
            "resources[0].inputs must be an object",
            id="inputs-list",
        ),
    ],
)
def test_state_file_of_the_wrong_shape_is_refused(
    state: Any, expected: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A --state file of the wrong shape exits 2 with one line, instead of comparing against an empty state."""
    path = tmp_path / "state.json"
    path.write_text(json.dumps(state), encoding="utf-8")
    code, err = _plan(["--stack", "dev", "--state", str(path), "--quiet"], capsys)
    assert code == 2
    assert len(err) == 1, err
    assert expected in err[0]


def test_state_file_nested_beyond_reason(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A state file nested a hundred thousand levels deep is refused (exit 2), not a RecursionError."""
    path = tmp_path / "state.json"
    path.write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    code, err = _plan(["--stack", "dev", "--state", str(path)], capsys)
    assert code == 2
    assert len(err) == 1
    assert err[0] == f"{path}: nests lists and objects more than 64 levels deep"


@pytest.mark.parametrize("where", ["directory", "missing-parent"])
def test_json_output_path_is_checked_before_planning(
    where: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--json into a directory or a missing directory exits 2 with one line, before the plan runs."""
    target = tmp_path if where == "directory" else tmp_path / "no" / "plan.json"
    code, err = _plan(["--stack", "dev", "--json", str(target)], capsys)
    assert code == 2
    assert len(err) == 1
    assert ("is a directory" if where == "directory" else "does not exist") in err[0]


def test_internal_error_has_its_own_exit_code(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bug in gb300 exits 3 with one line naming the exception: neither 1 (findings) nor 2 (bad input)."""

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise KeyError("subnets")

    monkeypatch.setattr(plan_command, "run_plan", broken)
    code, err = _plan(["--stack", "dev"], capsys)
    assert code == cli.EXIT_INTERNAL == 3
    problems = [line for line in err if not line.startswith("gb300 plan: validating")]
    assert len(problems) == 1
    assert "internal error (KeyError: 'subnets')" in problems[0]
    assert "GB300_TRACEBACK=1" in problems[0]


def test_traceback_on_request(monkeypatch: pytest.MonkeyPatch) -> None:
    """GB300_TRACEBACK=1 lets a bug's exception through, for a developer's traceback."""
    monkeypatch.setenv(cli.TRACEBACK_ENV, "1")
    monkeypatch.setattr(plan_command, "run_plan", lambda *a, **k: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        cli.main(["plan", "--stack", "dev"])


def test_unreadable_stack_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A stack path that is a directory cannot be read: exit 2, one line."""
    (tmp_path / "Pulumi.dir.yaml").mkdir()
    code, err = _plan(["--stack-file", str(tmp_path / "Pulumi.dir.yaml")], capsys)
    assert code == 2
    assert len(err) == 1
    assert "cannot be read" in err[0]
