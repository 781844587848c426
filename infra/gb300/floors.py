"""The oldest Pulumi SDK, CLI and pulumi-azure-native gb300 works with (``data/floors.yaml``), checked at start-up.

The program (:func:`gb300.program.main`), the policy pack (:func:`gb300.policy_pack.build_pack`) and the CLI
(:func:`gb300.cli.main`) call :func:`package_problems` before anything else: an installed package below its floor
is one line naming the package, the installed version and the floor (the program raises ``pulumi.RunError``, the
pack exits with the line, the CLI exits 2), never a traceback from deep inside the SDK. ``gb300 migrate-racks``
checks a Pulumi CLI on ``PATH`` against the CLI floor with :func:`cli_check`.

Only the standard library and gb300's data loader: this runs before the SDK is trusted.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from importlib import metadata

from gb300.errors import DataError, UsageError
from gb300.facts.loader import data

FIX = "`make setup` (or `pip install -c constraints.txt -e .`) installs the pinned versions"
_RELEASE = re.compile(r"v?(\d+(?:\.\d+)*)")


@dataclass(frozen=True)
class Floor:
    """One floor of ``data/floors.yaml``: the package (or CLI), its oldest usable release and what needs it."""

    name: str
    floor: str
    needs: str


def release(text: str) -> tuple[int, ...] | None:
    """The release numbers of a version (``v3.251.0`` and ``3.272.0.dev1`` -> ``(3, 251, 0)``), None if there
    are none; trailing zeros do not count (``3.20`` is ``3.20.0``)."""
    found = _RELEASE.match(text.strip())
    if found is None:
        return None
    numbers = [int(n) for n in found.group(1).split(".")]
    while len(numbers) > 1 and numbers[-1] == 0:
        numbers.pop()
    return tuple(numbers)


def _floor(name: str, entry: object) -> Floor:
    if not isinstance(entry, dict) or release(str(entry.get("floor", ""))) is None:
        msg = f"data/floors.yaml: {name} needs a `floor` version and `needs` (got {entry!r})"
        raise DataError(msg)
    return Floor(name, str(entry["floor"]), str(entry.get("needs", "")))


def package_floors() -> tuple[Floor, ...]:
    """The Python packages' floors, in file order."""
    return tuple(_floor(name, entry) for name, entry in data("floors.yaml")["packages"].items())


def cli_floor() -> Floor:
    """The Pulumi CLI's floor."""
    return _floor("pulumi CLI", data("floors.yaml")["cli"]["pulumi"])


def below(installed: str, floor: str) -> bool:
    """Whether ``installed`` is an older release than ``floor`` (an unreadable version counts as older)."""
    have, need = release(installed), release(floor)
    return have is None or need is None or have < need


def package_problems() -> list[str]:
    """One line per installed package below its floor (or not installed), naming the installed version and the
    floor; empty when every floor holds. Versions come from :func:`importlib.metadata.version`."""
    problems = []
    for entry in package_floors():
        try:
            installed = metadata.version(entry.name)
        except metadata.PackageNotFoundError:
            problems.append(f"{entry.name} is not installed; gb300 needs {entry.name}>={entry.floor}: {FIX}")
            continue
        if below(installed, entry.floor):
            problems.append(
                f"{entry.name} {installed} is installed; gb300 needs {entry.name}>={entry.floor} ({entry.needs}): {FIX}"
            )
    return problems


def require_packages() -> None:
    """Raise :class:`UsageError` (the CLI's exit 2) with one line per package below its floor."""
    too_old = package_problems()
    if too_old:
        raise UsageError("\n".join(too_old))


def cli_version(pulumi: str) -> str | None:
    """What ``pulumi version`` prints (``v3.272.0``), or None when it cannot be run or prints nothing."""
    try:
        done = subprocess.run([pulumi, "version"], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    words = done.stdout.split()
    return words[0] if done.returncode == 0 and words else None


def cli_check() -> str:
    """One line on the Pulumi CLI on ``PATH`` against its floor; a CLI below it raises :class:`UsageError`."""
    entry = cli_floor()
    pulumi = shutil.which("pulumi")
    if pulumi is None:
        return f"no Pulumi CLI on PATH here: commands.sh needs pulumi v{entry.floor} or later ({entry.needs})"
    found = cli_version(pulumi)
    if found is None:
        return f"'{pulumi} version' gave no version: commands.sh needs pulumi v{entry.floor} or later ({entry.needs})"
    if below(found, entry.floor):
        msg = (
            f"the Pulumi CLI on PATH ({pulumi}) is {found}; commands.sh needs v{entry.floor} or later ({entry.needs}): "
            "upgrade it (https://www.pulumi.com/docs/install/) before running it"
        )
        raise UsageError(msg)
    return f"Pulumi CLI {found} on PATH: at or above v{entry.floor}, which commands.sh needs ({entry.needs})"
