"""Which configuration options a Slurm release accepts, and a check of rendered files against them.

The lists live in ``data/slurm_options.yaml``, read from each release's own sources (``scripts/slurm-options``).
:func:`problems` reads ``slurm.conf`` and ``topology.conf`` text the way Slurm's parser sees it (keys without
regard to case, ``NodeName``/``PartitionName``/``NodeSet`` lines with their own keys) and names every option,
plugin or parameter word the release does not know. A line such as ``#TopologyPlugin=topology/block`` counts
too: gb300-topology-refresh uncomments it once a block exists.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from gb300.node.resources import DATA_DIR, load_yaml_mapping
from gb300.slurm.config import SlurmConfigError

__all__ = ["OPTIONS_FILE", "ReleaseOptions", "knows_metrics", "load", "problems", "release_of"]

OPTIONS_FILE: Path = DATA_DIR / "slurm_options.yaml"
_RELEASE = re.compile(r"^(?:\d+:)?(\d{2})\.(\d{2})(?:[.-]|$)")
_SWITCHABLE = re.compile(r"^#([A-Za-z]+=\S+)\s*$")  # an option written commented out, for a script to switch on
_LINE_KEYS = {"nodename": "node_line", "partitionname": "partition_line", "nodeset": "nodeset_line"}
_VALUE_SETS = {"topologyplugin": "topology_plugins", "switchtype": "switch_types"}
_WORD_LISTS = {"topologyparam": "topology_params", "slurmctldparameters": "slurmctld_parameters"}


@dataclass(frozen=True)
class ReleaseOptions:
    """One release's option lists (lower-cased for lookup), with the tag they were read from."""

    release: str
    tag: str
    lists: Mapping[str, frozenset[str]]

    def knows(self, kind: str, word: str) -> bool:
        return word.lower() in self.lists[kind]


def release_of(version: str) -> str:
    """The release (``25.11``) of a Slurm package version (``25.11.5``, ``23.11.4-1.2ubuntu5``)."""
    match = _RELEASE.match(version)
    if match is None:
        raise SlurmConfigError(f"'version' must start with a Slurm release such as 25.11 (got {version!r})")
    return f"{match[1]}.{match[2]}"


def knows_metrics(version: str) -> bool:
    """Whether Slurm ``version`` accepts ``MetricsType`` (https://slurm.schedmd.com/metrics.html: 25.11+): from its
    option list, or for a release without one, whether it is no older than the first listed release that knows it."""
    release = release_of(version)
    known = _catalog()
    if release in known:
        return known[release].knows("slurm_conf", "MetricsType")
    first = [r for r, opts in known.items() if opts.knows("slurm_conf", "MetricsType")]
    number = tuple(int(p) for p in release.split("."))
    return bool(first) and number >= min(tuple(int(p) for p in r.split(".")) for r in first)


@functools.cache
def _catalog() -> dict[str, ReleaseOptions]:
    return load()


def load(path: Path | None = None) -> dict[str, ReleaseOptions]:
    """Release -> its options, from slurm_options.yaml (or ``path``)."""
    raw = load_yaml_mapping(path or OPTIONS_FILE)
    releases: dict[str, ReleaseOptions] = {}
    for release, body in (raw.get("releases") or {}).items():
        lists = {
            key: frozenset(str(word).lower() for word in value)
            for key, value in body.items()
            if isinstance(value, list)
        }
        releases[str(release)] = ReleaseOptions(str(release), str(body["tag"]), lists)
    return releases


def _pairs(line: str) -> list[tuple[str, str]]:
    return [(key, value) for key, _, value in (token.partition("=") for token in line.split())]


def _check_pair(opts: ReleaseOptions, where: str, key: str, value: str) -> list[str]:
    lower = key.lower()
    found: list[str] = []
    if lower in _VALUE_SETS and not opts.knows(_VALUE_SETS[lower], value):
        found.append(f"{where}: {key}={value}: Slurm {opts.release} has no such plugin")
    if lower in _WORD_LISTS:
        for word in (w.split("=", 1)[0] for w in value.split(",") if w):
            if not opts.knows(_WORD_LISTS[lower], word):
                found.append(f"{where}: {key}={value}: Slurm {opts.release} does not know {word!r}")
    return found


def _slurm_conf(opts: ReleaseOptions, name: str, text: str) -> list[str]:
    found: list[str] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        switchable = _SWITCHABLE.match(raw.strip())
        line = switchable[1] if switchable else raw.split("#", 1)[0].strip()
        if not line:
            continue
        where = f"{name} line {number}"
        pairs = _pairs(line)
        first = pairs[0][0]
        if not opts.knows("slurm_conf", first):
            found.append(f"{where}: {first} is not a slurm.conf option in Slurm {opts.release}")
            continue
        sub_kind = _LINE_KEYS.get(first.lower())
        rest = pairs[1:]
        if sub_kind is None and rest:
            found.append(f"{where}: one option per line expected (got {line!r})")
        for key, _ in rest:
            if sub_kind is not None and not opts.knows(sub_kind, key):
                found.append(f"{where}: {key} is not a key of a {first} line in Slurm {opts.release}")
        found.extend(_check_pair(opts, where, first, pairs[0][1]))
    return found


def _topology_conf(opts: ReleaseOptions, name: str, text: str) -> list[str]:
    found: list[str] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        for key, _ in _pairs(line):
            if not opts.knows("topology_conf_block", key):
                found.append(f"{name} line {number}: {key} is not a topology/block option in Slurm {opts.release}")
    return found


def problems(files: Mapping[str, str], version: str, path: Path | None = None) -> list[str]:
    """Every option in ``files`` (name -> text; slurm.conf, topology.conf) that Slurm ``version`` does not accept.

    A release with no option list is one problem: nothing can be checked for it.
    """
    release = release_of(version)
    known = load(path)
    if release not in known:
        return [
            f"Slurm {version}: no option list for release {release} in data/slurm_options.yaml "
            f"(known: {', '.join(sorted(known))}); add it with scripts/slurm-options"
        ]
    opts = known[release]
    found: list[str] = []
    for name, text in files.items():
        if name == "slurm.conf":
            found.extend(_slurm_conf(opts, name, text))
        elif name == "topology.conf":
            found.extend(_topology_conf(opts, name, text))
    return found
