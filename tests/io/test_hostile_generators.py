"""Hostile names fed through every generator of scripts and configuration: the node payloads (cloud-init scripts,
systemd units, env files, Slurm files, all rendered by gb300.node.bundle), slurm.env, topology.conf and the
quoting helper's env files. Each value is refused with one gb300 error naming what it was for, or reaches the
files as quoted data that adds no line. commands.sh has the same test in tests/ops/test_migrate_racks.py
(test_a_state_entry_name_never_becomes_a_command, test_hostile_but_printable_names_are_quoted_words)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gb300 import config
from gb300 import tags as gb300_tags
from gb300.config import stacks
from gb300.errors import Gb300Error
from gb300.io import quoting
from gb300.node import context as node_context
from gb300.node.bundle import bundle_for
from gb300.slurm import files as slurm_files
from gb300.slurm import topology

HOSTILE = {
    "newline": "rack01\ntouch /pwned",
    "carriage-return": "rack01\rtouch /pwned",
    "nul": "rack\x0001",
    "single-quote": "rack'01",
    "double-quote": 'rack"01',
    "command-substitution": "$(touch /pwned)",
    "backticks": "`touch /pwned`",
    "ten-megabytes": "x" * (10 * 1024 * 1024),
}
CONTROL = {"newline", "carriage-return", "nul", "ten-megabytes"}


def _stack() -> config.StackConfig:
    return config.parse(config.load_stack_file(stacks.stack_file("dev")))


def _bundles(cfg: config.StackConfig) -> dict[str, str]:
    """Every file the head and each GPU pool's nodes carry, by role and path."""
    out = {}
    for role, pool in [(gb300_tags.ROLE_HEAD, None), *[(gb300_tags.ROLE_GPU_NODE, p) for p in cfg.gpu_pools]]:
        for f in bundle_for(node_context.build(cfg, role, pool)).files:
            out[f"{role}:{f.path}"] = f.content
    return out


def _with(cfg: config.StackConfig, section: str, **values: Any) -> config.StackConfig:
    if section == "gpuPools":
        return cfg.model_copy(update={"gpu_pools": [cfg.gpu_pools[0].model_copy(update=values)]})
    return cfg.model_copy(update={section: getattr(cfg, section).model_copy(update=values)})


def _slurm_env(value: str) -> dict[str, str]:
    inputs = node_context.boot_inputs(node_context.build(_stack(), gb300_tags.ROLE_HEAD))
    return {"slurm.env": slurm_files.render_slurm_env(dataclasses.replace(inputs, head_hostname=value))}


def _topology(value: str, tmp: Path) -> dict[str, str]:
    fabric = tmp / "fabric"
    fabric.mkdir(exist_ok=True)
    (fabric / "gpu-001.json").write_text(json.dumps({"ClusterUUID": value, "CliqueId": 1}), encoding="utf-8")
    nodes, problems = topology.read_fabric_dir(fabric)
    if problems:
        raise Gb300Error(str(problems[0]))
    return {"topology.conf": topology.build(nodes).render()}


# Every generator, fed the value where a name from the stack or from elsewhere goes; a new one needs a row.
GENERATORS: dict[str, Callable[[str, Path], dict[str, str]]] = {
    "node payloads: gb300:cluster.name": lambda v, _: _bundles(_with(_stack(), "cluster", name=v)),
    "node payloads: gb300:gpuPools[0].name": lambda v, _: _bundles(_with(_stack(), "gpuPools", name=v)),
    "node payloads: gb300:gpuPools[0].image": lambda v, _: _bundles(_with(_stack(), "gpuPools", image=v)),
    "slurm.env: the head's host name": lambda v, _: _slurm_env(v),
    "topology.conf: a fabric file's ClusterUUID": _topology,
    "an env file (quoting.env_lines)": lambda v, _: {"x.env": quoting.env_lines({"GB300_NAME": v}, "x.env")},
}


@pytest.mark.parametrize("value", HOSTILE.values(), ids=HOSTILE.keys())
@pytest.mark.parametrize("generator", GENERATORS, ids=lambda g: g.split(":")[0].replace(" ", "-"))
def test_a_hostile_name_is_refused_or_stays_one_quoted_value(generator: str, value: str, tmp_path: Path) -> None:
    """Newlines, carriage returns, NUL and 10 MB are refused with a gb300 error (exit 2 or 1 class, never a
    traceback) whose message is short and does not hold the value raw; quotes, `$(...)` and backticks are refused too or
    land in the files without adding a line to any of them."""
    benign = GENERATORS[generator](
        "rack01" if "UUID" not in generator else "5e797fc6-0f46-421a-8724-0e102c0f723c", tmp_path
    )
    name = next(k for k in HOSTILE if HOSTILE[k] == value)
    try:
        rendered = GENERATORS[generator](value, tmp_path)
    except (Gb300Error, ValueError) as refused:  # SlurmConfigError is a ValueError: the controller's reader
        message = str(refused)
        assert value not in message or name not in CONTROL, message[:200]
        assert len(message) < 2000, f"{generator}: a {len(message):,}-character refusal"
        return
    assert name not in CONTROL, f"{generator} rendered a value holding {name}"
    for path, text in rendered.items():
        assert text.count("\n") == benign[path].count("\n"), path
