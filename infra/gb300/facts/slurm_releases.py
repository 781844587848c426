"""What real Slurm does, release by release, read from ``data/slurm_releases.yaml``.

Where gb300's Slurm code depends on a behaviour that differs between releases (a reason kept after a resume) or
that a stand-in would not show (the NOT_RESPONDING blip after a resume, a reconfigure that starts a new process),
the behaviour is recorded there per release with its source and status; the heal simulator models it from here
and the real-Slurm tests say which release shows what.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from gb300.facts.catalog import Sourced
from gb300.facts.loader import data

__all__ = ["Behaviour", "behaviour", "behaviours", "not_responding_seconds", "ours", "shows"]


@dataclass(frozen=True)
class Behaviour:
    """One recorded behaviour: what it is, and per release (``24.11``) whether it shows, how sure, and where from."""

    name: str
    description: str
    releases: dict[str, Sourced]
    fixed_in: str | None = None
    since: str | None = None


def _behaviour(name: str, raw: dict[str, Any]) -> Behaviour:
    releases = {
        str(release): Sourced(bool(entry["value"]), str(entry["status"]), str(entry["source"]))
        for release, entry in raw["releases"].items()
    }
    fixed = raw.get("fixedIn")
    since = raw.get("since")
    return Behaviour(
        name,
        " ".join(str(raw["description"]).split()),
        releases,
        str(fixed) if fixed else None,
        str(since) if since else None,
    )


@functools.cache
def behaviours() -> dict[str, Behaviour]:
    """Every recorded behaviour by name."""
    return {str(name): _behaviour(str(name), raw) for name, raw in data("slurm_releases.yaml")["behaviours"].items()}


def behaviour(name: str) -> Behaviour:
    return behaviours()[name]


def ours() -> str:
    """The release gb300 pins (versions.yaml ``slurm``), as the file names it."""
    return str(data("slurm_releases.yaml")["ours"])


def shows(name: str, release: str) -> bool:
    """Whether ``release`` (``24.11``) shows the behaviour ``name``; KeyError for a release the file does not list."""
    return bool(behaviour(name).releases[release].value)


def not_responding_seconds() -> float:
    """How long a node reads NOT_RESPONDING with boot time 0 after a resume (notRespondingAfterResume ``seconds``)."""
    return float(data("slurm_releases.yaml")["behaviours"]["notRespondingAfterResume"]["seconds"])
