"""The one writer of files gb300 creates: no symlink followed, an exclusive create or an atomic replace in the
target's own directory, the mode stated by the caller.

* :func:`create_new`: ``O_CREAT | O_EXCL | O_NOFOLLOW``: a file that exists, or a symlink of that name (even a
  dangling one), is refused, never written through. For what gb300 never overwrites: a new stack file, a signing
  key.
* :func:`replace` and :func:`replacing`: the content goes to a fresh temporary file in the target's directory
  (``tempfile.mkstemp``: ``O_EXCL``, a random name, mode 0600), which gets the stated mode and then takes the
  target's name with :func:`os.replace`. A symlink at the target is replaced itself, never followed; a reader sees
  the old file or the new one, never half of one; nothing is left beside the target when writing fails.

Nothing gb300 writes goes through another path (``tests/io/test_writer.py`` reads the package for ``open(..., "w")``,
``write_text`` and ``write_bytes``). A failure is :class:`~gb300.errors.UsageError` naming the target.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

from gb300.errors import UsageError

__all__ = ["create_new", "replace", "replacing"]


def _bytes(content: str | bytes) -> bytes:
    return content.encode("utf-8") if isinstance(content, str) else content


def _named(label: str, path: Path) -> str:
    return f"{label} {path}" if label else str(path)


def _failed(label: str, path: Path, exc: OSError) -> UsageError:
    return UsageError(f"{_named(label, path)}: cannot be written ({exc.strerror or exc})")


def create_new(path: Path, content: str | bytes, *, mode: int, label: str = "", what: str = "it") -> None:
    """Write ``content`` to a new file ``path`` with ``mode``; refuse when anything, a symlink included, has the
    name. ``label`` (``--out``) starts the message, ``what`` (``a signing key``) names what is never overwritten."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags, mode)
    except FileExistsError:
        raise UsageError(
            f"{_named(label, path)}: exists; gb300 never overwrites {what} (choose another path)"
        ) from None
    except OSError as exc:
        raise _failed(label, path, exc) from None
    try:
        os.fchmod(fd, mode)  # the umask narrowed the mode os.open was given
        with os.fdopen(fd, "wb") as handle:
            handle.write(_bytes(content))
    except OSError as exc:
        path.unlink(missing_ok=True)
        raise _failed(label, path, exc) from None


@contextlib.contextmanager
def replacing(path: Path, *, mode: int, label: str = "") -> Iterator[IO[str]]:
    """A text stream whose content replaces ``path`` atomically when the block ends without an exception (a large
    document need not exist as one string). The temporary file is removed when the block fails."""
    if path.is_dir() and not path.is_symlink():
        raise UsageError(f"{_named(label, path)}: is a directory; give a file name")
    try:
        fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise _failed(label, path, exc) from None
    temporary = Path(name)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            yield handle
        temporary.replace(path)
    except OSError as exc:
        temporary.unlink(missing_ok=True)
        raise _failed(label, path, exc) from None
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def replace(
    path: Path, content: str | bytes, *, mode: int, label: str = "", check: Callable[[Path], object] | None = None
) -> None:
    """Replace ``path`` (or create it) with ``content`` and ``mode``, atomically, never following a symlink;
    ``check`` reads the new file before it takes the name (it raises to keep the old one)."""
    if path.is_dir() and not path.is_symlink():
        raise UsageError(f"{_named(label, path)}: is a directory; give a file name")
    try:
        fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise _failed(label, path, exc) from None
    temporary = Path(name)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as handle:
            handle.write(_bytes(content))
        if check is not None:
            check(temporary)
        temporary.replace(path)
    except OSError as exc:
        temporary.unlink(missing_ok=True)
        raise _failed(label, path, exc) from None
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
