"""Read the ``jobs`` of a ``sacct --json`` file one job at a time, in bounded memory.

``sacct --json`` (data_parser v0.0.42 and v0.0.45: https://slurm.schedmd.com/rest_api.html) writes one object,
``{"jobs": [...], "meta": ..., "errors": [...], "warnings": [...]}``; a month of a large cluster is gigabytes. This
reader finds the ``jobs`` array and decodes one element at a time from a sliding buffer, so a million jobs never
sit in memory at once. A file cut short, a job too large to be one (``MAX_JOB_BYTES``), a ``jobs`` that is not an
array or an element that is not an object end the read or skip the element and are reported in ``problems``, never
raised: the caller counts what it read and names what it could not.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

CHUNK = 1 << 20
MAX_JOB_BYTES = 8 << 20  # a real job record is a few KB; one this large is not a job
_DECODER = json.JSONDecoder()
_WS = " \t\r\n"


@dataclass
class Read:
    """What the read found: problems in words (each names where), how many jobs it read and skipped, and whether
    there was a ``jobs`` array at all."""

    problems: list[str] = field(default_factory=list)
    skipped: int = 0
    jobs: int = 0
    found: bool = False  # the ``jobs`` array was found: the input is sacct --json output, however cut short


class _Buffer:
    """A text window over the file: ``text[pos:]`` is what is not decoded yet."""

    def __init__(self, handle: IO[str]) -> None:
        self.handle = handle
        self.text = ""
        self.pos = 0
        self.offset = 0  # characters consumed before ``text`` (for messages)
        self.eof = False

    def more(self) -> bool:
        """Read another chunk, dropping what is decoded; False at the end of the file."""
        if self.eof:
            return False
        chunk = self.handle.read(CHUNK)
        self.offset += self.pos
        self.text = self.text[self.pos :] + chunk
        self.pos = 0
        self.eof = not chunk
        return bool(chunk)

    def skip_ws(self) -> str:
        """The next character that is not white space ('' at the end of the file)."""
        while True:
            while self.pos < len(self.text) and self.text[self.pos] in _WS:
                self.pos += 1
            if self.pos < len(self.text):
                return self.text[self.pos]
            if not self.more():
                return ""

    def at(self) -> int:
        return self.offset + self.pos


def _find_jobs(buf: _Buffer, read: Read) -> bool:
    """Move to just after the ``[`` of the top-level ``"jobs"`` array; False (with why) when there is none."""
    needle = '"jobs"'
    while True:
        index = buf.text.find(needle, buf.pos)
        if index >= 0:
            buf.pos = index + len(needle)
            break
        buf.pos = max(buf.pos, len(buf.text) - len(needle))
        if not buf.more() or buf.at() > MAX_JOB_BYTES:
            read.problems.append('no "jobs" array near the start of the file: not sacct --json output')
            return False
    if buf.skip_ws() != ":":
        read.problems.append(f'"jobs" at character {buf.at()} is not followed by ":"')
        return False
    buf.pos += 1
    if buf.skip_ws() != "[":
        read.problems.append('"jobs" is not an array')
        return False
    buf.pos += 1
    read.found = True
    return True


def _decode_one(buf: _Buffer, read: Read) -> tuple[bool, Any]:
    """The next element: (True, value), or (False, None) when the read must end (problem recorded)."""
    while True:
        try:
            value, end = _DECODER.raw_decode(buf.text, buf.pos)
        except RecursionError:
            read.problems.append(f"job {read.jobs + read.skipped + 1} is nested too deeply to read: read stopped")
            return False, None
        except ValueError:
            if len(buf.text) - buf.pos > MAX_JOB_BYTES:
                read.problems.append(
                    f"job {read.jobs + read.skipped + 1} at character {buf.at()} is over {MAX_JOB_BYTES:,} "
                    "characters or not JSON: read stopped"
                )
                return False, None
            if buf.more():
                continue
            read.problems.append(
                f"the file ends inside job {read.jobs + read.skipped + 1} (character {buf.at()}): truncated; "
                f"the {read.jobs:,} jobs before it are counted"
            )
            return False, None
        buf.pos = end
        return True, value


def jobs(path: Path, read: Read) -> Iterator[dict[str, Any]]:
    """Each job object of ``path``'s ``jobs`` array, in order; problems go to ``read``."""
    try:
        handle = path.open(encoding="utf-8", errors="replace")
    except OSError as exc:
        read.problems.append(f"{path}: cannot be read ({exc.strerror or exc})")
        return
    with handle:
        yield from jobs_in(handle, read)


def jobs_in(handle: IO[str], read: Read) -> Iterator[dict[str, Any]]:
    """Each job object of the ``jobs`` array read from an open text stream (a file, a pipe from ``sacct``)."""
    buf = _Buffer(handle)
    if not _find_jobs(buf, read):
        return
    if buf.skip_ws() == "]":
        return
    while True:
        ok, value = _decode_one(buf, read)
        if not ok:
            return
        if isinstance(value, dict):
            read.jobs += 1
            yield value
        else:
            read.skipped += 1
            read.problems.append(f"element {read.jobs + read.skipped} of jobs is not an object: skipped")
        sep = buf.skip_ws()
        if sep == ",":
            buf.pos += 1
            buf.skip_ws()
            continue
        if sep != "]":
            what = "the file ends" if sep == "" else f"{sep!r} at character {buf.at()}"
            read.problems.append(f"{what} where a ',' or ']' was due after job {read.jobs + read.skipped}")
        return
