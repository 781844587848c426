"""The payload manifest's two parsers, gb300's (Manifest.from_bytes) and the node's (fetch-payload's
manifest_fields), held to their contract on any input with hypothesis: a manifest the uploader would write, or a
refusal (ValueError; no output and a non-zero status), never another exception or a line that could smuggle text."""

from __future__ import annotations

import json
import re
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gb300.node.manifest import Manifest
from gb300.paths import REPO_ROOT

FETCH_PAYLOAD = REPO_ROOT / "cloud-init" / "lib" / "fetch-payload"
FIELDS = ("cluster", "name", "serial", "sha256", "archive", "size")

scalars = st.none() | st.booleans() | st.integers(-5, 10**13) | st.text(max_size=12) | st.floats(allow_nan=False)
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3), max_leaves=6)
manifests = st.fixed_dictionaries(
    {},
    optional={
        "format": st.sampled_from([1, 2, "1", True]),
        "cluster": values,
        "name": values,
        "serial": values,
        "sha256": st.sampled_from(["a" * 64, "A" * 64, "x"]) | values,
        "archive": st.sampled_from([f"archives/{'a' * 64}.tar.gz", "../x"]) | values,
        "size": values,
        "extra": values,
    },
)


def _manifest_fields() -> str:
    """The function as fetch-payload defines it (the script runs at once when sourced)."""
    text = FETCH_PAYLOAD.read_text(encoding="utf-8")
    match = re.search(r"^manifest_fields\(\) \{\n.*?^\}\n", text, flags=re.MULTILINE | re.DOTALL)
    assert match is not None
    return match.group(0)


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=200) | manifests.map(lambda m: json.dumps(m, sort_keys=True).encode()))
def test_from_bytes_gives_a_manifest_in_its_one_form_or_a_value_error(data: bytes) -> None:
    """Any bytes give a Manifest whose serialization is those exact bytes, or a ValueError: never a KeyError or
    TypeError that gb300 payload publish would report as an internal error."""
    try:
        manifest = Manifest.from_bytes(data)
    except ValueError:
        return
    assert manifest.to_bytes() == data


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(doc=manifests)
def test_the_nodes_parser_prints_six_plain_fields_or_nothing(doc: dict[str, Any], tmp_path: Path) -> None:
    """fetch-payload's manifest_fields prints exactly six printable one-word lines (integers where a serial and a
    size go) or nothing with a non-zero status, and writes no file."""
    with tempfile.TemporaryDirectory(dir=tmp_path) as scratch:
        path = Path(scratch) / "manifest.json"
        path.write_text(json.dumps(doc), encoding="ascii")
        done = subprocess.run(
            ["bash", "-c", _manifest_fields() + 'manifest_fields "$1"', "-", str(path)],
            capture_output=True,
            text=True,
            check=False,
            cwd=scratch,
        )
        assert [p.name for p in Path(scratch).iterdir()] == ["manifest.json"]
    lines = done.stdout.splitlines()
    if done.returncode != 0:
        assert lines == [] or len(lines) < len(FIELDS)
        return
    assert len(lines) == len(FIELDS)
    assert all(line.isprintable() and " " not in line for line in lines)
    assert lines[2].lstrip("-").isdigit()
    assert lines[5].lstrip("-").isdigit()
