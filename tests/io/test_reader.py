"""gb300.io.reader: the strict reader of files from elsewhere, one line naming the file and the key path."""

from __future__ import annotations

from pathlib import Path

import pytest

from gb300.errors import ConfigError
from gb300.io import reader

SMALL = reader.Kind("test file", 1024 * 1024, "keep it small")


def _refusal(tmp_path: Path, data: bytes, *, json: bool) -> str:
    path = tmp_path / ("f.json" if json else "f.yaml")
    path.write_bytes(data)
    with pytest.raises(ConfigError) as refused:
        (reader.load_json if json else reader.load_yaml)(path, SMALL)
    (line,) = str(refused.value).splitlines()
    assert line.startswith(f"{path}: ")
    return line.removeprefix(f"{path}: ")


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b'{"a": {"b": [1, {"c": 1, "c": 2}]}}', "a.b[1]: gives key 'c' twice in one object"),
        (b'{"a": NaN}', "holds NaN, which is not a JSON number (RFC 8259)"),
        (b'{"a": -Infinity}', "holds -Infinity, which is not a JSON number"),
        (b"[" * 65 + b"]" * 65, "[0][0][0]"),
        (b"[" * 100_000 + b"]" * 100_000, "nests lists and objects more than 64 levels deep"),
        (b'{"a": 1,}', "is not JSON (line 1, column 9: Expecting property name enclosed in double quotes)"),
        (b"x" * (1024 * 1024 + 1), "is larger than 1 MiB; keep it small"),
        (b'{"a": "\xe9"}', "is not UTF-8 text (byte 0xe9 on line 1); save it as UTF-8"),
        (b'{"a":\n "\x00"}', "is binary, not text (a NUL byte on line 2)"),
    ],
    ids=["duplicate", "nan", "infinity", "depth-65", "depth-100k", "trailing-comma", "too-big", "latin-1", "nul"],
)
def test_json_that_is_not_plain_bounded_data_is_one_line(tmp_path: Path, data: bytes, expected: str) -> None:
    """Duplicate keys (with their key path), NaN, deep nesting, syntax, size, encoding and NUL are refused."""
    assert expected in _refusal(tmp_path, data, json=True)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"config:\n  gb300:x:\n    - {a: 1, a: 2}\n", "config.gb300:x[0]: gives key 'a' twice in one mapping"),
        (b"a: &x 1\nb: *x\n", "a: sets the YAML anchor &x (line 1)"),
        (b"a: [1, *y]\n", "a[1]: uses the YAML alias *y (line 1)"),
        (b"a: !!python/object:os.system {}\n", "is not valid YAML at line 1"),
        (b"a: [" + b"[" * 70 + b"]" * 70 + b"]\n", "nests lists and mappings more than 64 levels deep"),
        (b"a: 1\n---\nb: 2\n", "is not valid YAML"),
        (b"a: \xc2\x80\n", "is not valid YAML: special characters are not allowed"),
    ],
    ids=["duplicate", "anchor", "alias", "python-tag", "depth", "two-documents", "c1-control"],
)
def test_yaml_that_is_not_plain_bounded_data_is_one_line(tmp_path: Path, data: bytes, expected: str) -> None:
    """Duplicates, anchors, aliases, tags PyYAML's safe loader lacks, depth and several documents are refused."""
    assert expected in _refusal(tmp_path, data, json=False)


def test_plain_files_read_as_their_data(tmp_path: Path) -> None:
    """A byte-order mark is dropped, merge keys without aliases still work, an empty YAML file is None."""
    (tmp_path / "a.json").write_bytes(b'\xef\xbb\xbf{"a": [1, 2.5, null, "x"]}')
    (tmp_path / "a.yaml").write_text("a:\n  <<: {b: 1}\n  b: 2\n")
    (tmp_path / "empty.yaml").write_text("")
    assert reader.load_json(tmp_path / "a.json", SMALL) == {"a": [1, 2.5, None, "x"]}
    assert reader.load_yaml(tmp_path / "a.yaml", SMALL) == {"a": {"b": 2}}
    assert reader.load_yaml(tmp_path / "empty.yaml", SMALL) is None


def test_a_missing_file_or_a_directory_is_one_line(tmp_path: Path) -> None:
    """What cannot be opened is named with the system's reason."""
    with pytest.raises(ConfigError, match=r"nothing.json: cannot be read \(No such file or directory\)"):
        reader.load_json(tmp_path / "nothing.json", SMALL)
    with pytest.raises(ConfigError, match=r"cannot be read \(Is a directory\)"):
        reader.load_yaml(tmp_path, SMALL)


def test_only_the_cap_is_read_from_an_endless_file() -> None:
    """/dev/zero is refused after reading one byte more than the cap, not read forever."""
    with pytest.raises(ConfigError, match="is larger than 1 MiB"):
        reader.read_text(Path("/dev/zero"), SMALL)
