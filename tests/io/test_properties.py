"""Property-based tests (hypothesis) of the strict reader and the quoting helper: whatever the bytes or the text, no
traceback, only the exit codes 0, 1 and 2, and nothing written outside the target. Example counts are modest so
that the suite stays quick; hypothesis shrinks any failure to a small input."""

from __future__ import annotations

import json
import shlex
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gb300 import cli
from gb300.errors import ConfigError
from gb300.io import quoting, reader

SMALL = reader.Kind("test file", 4096, "keep it small")
QUICK = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

# JSON-shaped values, and YAML-ish text built from YAML's indicators, so that examples reach the parsers' corners.
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
    max_leaves=20,
)
yaml_ish = st.text(alphabet=st.sampled_from(list("ab:-&*!|>'\"{}[],#%@ \n\t\\0.<\x00\u2028é")), max_size=80)


def _one_line_refusal(path: Path, exc: ConfigError) -> None:
    (line,) = str(exc).splitlines()
    assert line.startswith(f"{path}: ")


@QUICK
@given(data=st.binary(max_size=300) | yaml_ish.map(str.encode))
def test_any_bytes_are_data_or_one_line_refusal(data: bytes, tmp_path: Path) -> None:
    """Any bytes read as YAML or JSON give plain data or one ConfigError line naming the file, never another
    exception."""
    with tempfile.TemporaryDirectory(dir=tmp_path) as scratch:
        path = Path(scratch) / "given"
        path.write_bytes(data)
        for load in (reader.load_yaml, reader.load_json):
            try:
                load(path, SMALL)
            except ConfigError as exc:
                _one_line_refusal(path, exc)


@QUICK
@given(value=json_values, twice=st.booleans())
def test_json_documents_read_back_as_written_or_name_the_duplicate(value: Any, twice: bool, tmp_path: Path) -> None:
    """A JSON document the json module writes reads back equal; the same with a key given twice is refused."""
    text = json.dumps({"k": value})
    if twice:
        text = text[:-1] + ', "k": 1}'
    with tempfile.TemporaryDirectory(dir=tmp_path) as scratch:
        path = Path(scratch) / "given.json"
        path.write_text(text, encoding="utf-8")
        if twice:
            with pytest.raises(ConfigError, match="gives key 'k' twice in one object") as refused:
                reader.load_json(path, reader.STATE)
            _one_line_refusal(path, refused.value)
        else:
            assert reader.load_json(path, reader.STATE) == {"k": value}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=200) | json_values.map(lambda v: json.dumps(v).encode()))
def test_strip_state_on_any_file_exits_0_or_2_and_writes_only_its_output(
    data: bytes, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """gb300 strip-state on any bytes exits 0 or 2 (never 3, never a traceback) and writes nothing but --out."""
    with tempfile.TemporaryDirectory(dir=tmp_path) as scratch:
        state, out = Path(scratch) / "state.json", Path(scratch) / "out.json"
        state.write_bytes(data)
        code = cli.main(["strip-state", str(state), "--out", str(out)])
        err = capsys.readouterr().err
        assert code in (0, 2), err
        assert "Traceback" not in err
        assert sorted(p.name for p in Path(scratch).iterdir()) == sorted(
            ["state.json", *(["out.json"] if code == 0 else [])]
        )


@QUICK
@given(value=st.text(max_size=60))
def test_any_text_is_one_shell_word_or_refused(value: str) -> None:
    """Any text is refused (a control character) or becomes a word a POSIX shell splits back to exactly it."""
    refused: quoting.UnsafeTextError | None = None
    try:
        word = quoting.shell_word(value, "a value")
    except quoting.UnsafeTextError as exc:
        refused = exc
    if refused is not None:
        assert "\n" not in str(refused)
        assert "U+" in str(refused)
    else:
        assert shlex.split(word) == [value]
        assert quoting.comment(value, "a value") == value
