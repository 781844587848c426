"""gb300.io.writer: the one writer of files gb300 creates; no symlink followed, nothing left beside the target."""

from __future__ import annotations

import ast
import os
import stat
from pathlib import Path

import pytest

from gb300.errors import UsageError
from gb300.io import writer
from gb300.paths import PACKAGE_DIR

# Modules that write a file some other way, and why that is not a file gb300 hands to a user.
WRITES_ELSEWHERE = {
    "io/writer.py": "the writer itself",
    "cli.py": "points stdout at /dev/null once its reader went away",
    "node/pack.py": "a tar archive in memory (tarfile over BytesIO)",
    "ops/software_lock.py": "downloads into its own TemporaryDirectory to hash them",
    "heal/state.py": "the head's own state under /var/lib/gb300, written by a temporary file and os.replace",
    "heal/head_host.py": "the head service's log on the head node (appended)",
    "heal/head_slurm.py": "the head service's topology view under /var/lib/gb300 on the head node",
    "heal/ports.py": "the head service's decision records on the head node (appended, one JSON line each)",
}


WRITE_FLAGS = {"O_WRONLY", "O_RDWR", "O_CREAT", "O_APPEND", "O_TRUNC"}


def _os_open_writes(node: ast.Call) -> bool:
    """An os.open call opens for writing unless its flags name O_RDONLY and none of the flags that write."""
    flags = {n.attr for n in ast.walk(node.args[1]) if isinstance(n, ast.Attribute)} if len(node.args) > 1 else set()
    return "O_RDONLY" not in flags or bool(flags & WRITE_FLAGS)


def _writes(tree: ast.AST) -> list[int]:
    """Lines that write a file: write_text/write_bytes, os.open but for reading, or open()/Path.open() with a w,
    a or x mode."""
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        os_open = isinstance(func, ast.Attribute) and name == "open" and getattr(func.value, "id", "") == "os"
        os_open = os_open and _os_open_writes(node)
        if name in {"write_text", "write_bytes"} or os_open:
            lines.append(node.lineno)
        elif name == "open":
            modes = [a for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            modes += [k.value for k in node.keywords if k.arg == "mode" and isinstance(k.value, ast.Constant)]
            if any(isinstance(m.value, str) and set(m.value) & set("wax") for m in modes):
                lines.append(node.lineno)
    return lines


def test_gb300_writes_files_only_through_the_writer() -> None:
    """No module of gb300 writes a file itself but those listed with their reason: every file it hands a user
    goes through gb300.io.writer."""
    found = {}
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        rel = path.relative_to(PACKAGE_DIR).as_posix()
        lines = _writes(ast.parse(path.read_text(encoding="utf-8")))
        if lines and rel not in WRITES_ELSEWHERE:
            found[rel] = lines
    assert found == {}, "write these through gb300.io.writer"
    assert all((PACKAGE_DIR / rel).exists() for rel in WRITES_ELSEWHERE)


def test_create_new_refuses_a_symlink_even_a_dangling_one(tmp_path: Path) -> None:
    """A symlink at the name is refused and what it points at is neither created nor changed."""
    target, victim = tmp_path / "new.yaml", tmp_path / "victim"
    target.symlink_to(victim)
    with pytest.raises(UsageError, match="exists; gb300 never overwrites it"):
        writer.create_new(target, "x", mode=0o644)
    assert not victim.exists()
    victim.write_text("mine")
    with pytest.raises(UsageError):
        writer.create_new(target, "x", mode=0o644)
    assert victim.read_text() == "mine"


@pytest.mark.parametrize("mode", [0o600, 0o644, 0o755])
def test_the_stated_mode_is_the_files_mode_whatever_the_umask(tmp_path: Path, mode: int) -> None:
    """create_new and replace give the file exactly the mode asked for, even under a umask of 077."""
    old = os.umask(0o077)
    try:
        writer.create_new(tmp_path / "a", b"x", mode=mode)
        writer.replace(tmp_path / "b", "y", mode=mode)
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "a").stat().st_mode) == mode
    assert stat.S_IMODE((tmp_path / "b").stat().st_mode) == mode


def test_replace_replaces_a_symlink_itself_and_leaves_nothing_beside_it(tmp_path: Path) -> None:
    """Replacing a name that is a symlink puts a regular file there; the file it pointed at keeps its text; no
    temporary file is left in the directory."""
    victim, target = tmp_path / "victim", tmp_path / "out.json"
    victim.write_text("mine")
    target.symlink_to(victim)
    writer.replace(target, "{}\n", mode=0o644)
    assert victim.read_text() == "mine"
    assert not target.is_symlink()
    assert target.read_text() == "{}\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json", "victim"]


def test_a_failed_check_or_stream_keeps_the_old_file(tmp_path: Path) -> None:
    """When the check refuses the new text, or the streaming block raises, the target keeps its old content and
    no temporary file is left."""
    target = tmp_path / "checksums.yaml"
    target.write_text("old")

    def refuse(path: Path) -> None:
        raise UsageError(f"{path.name}: not what the loader takes")

    with pytest.raises(UsageError):
        writer.replace(target, "new", mode=0o644, check=refuse)

    def stream() -> None:
        with writer.replacing(target, mode=0o644) as handle:
            handle.write("half")
            raise RuntimeError("the plan failed halfway")

    with pytest.raises(RuntimeError):
        stream()
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["checksums.yaml"]


def test_a_directory_or_a_missing_folder_is_one_usage_error(tmp_path: Path) -> None:
    """A directory at the target, or a folder that does not exist, is a UsageError naming the flag and path."""
    with pytest.raises(UsageError, match=f"^--json {tmp_path}: is a directory"):
        writer.replace(tmp_path, "x", mode=0o644, label="--json")
    with pytest.raises(UsageError, match="cannot be written"):
        writer.replace(tmp_path / "no" / "x.json", "x", mode=0o644, label="--json")
