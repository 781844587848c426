"""What gb300 puts on the head and on a GPU node of a stack, and the command lines it starts them with.

:func:`node_bundles` renders the stack's node bundles (:func:`gb300.node.bundle.bundle_for`, the same rows the
custom data and the payload carry): the head's ``/etc/slurm`` files, ``slurm.env`` and ``health.env``, the
health gate, the prolog and epilog, the step scripts. :func:`slurmd_argv` runs the GPU node's own
``gb300-slurmd-setup`` step against a node's layer (``GB300_ROOT``) and reads the slurmd options it wrote into
the systemd drop-in, and :func:`unit_command` turns a unit's ``ExecStart=`` into a foreground command line: the
fixture never retypes either.
"""

from __future__ import annotations

import copy
import functools
import re
import shlex
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gb300 import config
from gb300 import tags as gb300_tags
from gb300.config import stacks
from gb300.node import context as node_context
from gb300.node.bundle import bundle_for
from gb300.node.file import NodeFile
from tests.support.real_slurm import priv

SLURMD_SETUP = "/usr/local/lib/gb300/steps/gb300-slurmd-setup.sh"
DROPIN = "etc/systemd/system/slurmd.service.d/gb300-dynamic.conf"


@dataclass(frozen=True)
class StackFiles:
    """One stack's rendered node files: node path -> file, for the head and for a GPU node of its first pool."""

    cluster: str
    pool: str
    head: dict[str, NodeFile]
    node: dict[str, NodeFile]

    def env(self, role_files: dict[str, NodeFile], path: str) -> dict[str, str]:
        """The variables an env file of ``role_files`` sets (sourced by bash, as the node scripts do)."""
        return source_env(role_files[path].content)

    @property
    def head_hostname(self) -> str:
        return self.env(self.node, "/etc/gb300/slurm.env")["GB300_HEAD_HOSTNAME"]


def _freeze(raw: dict[str, Any]) -> str:
    import json  # noqa: PLC0415

    return json.dumps(raw, sort_keys=True)


def node_bundles(stack: str = "dev", overrides: dict[str, Any] | None = None) -> StackFiles:
    """The head's and a GPU node's files for ``stack`` (a name under stacks/), with ``overrides`` merged into
    its gb300 namespace (``{"head": {"slurmdbd": True}}``, key by key)."""
    return _bundles(stack, _freeze(overrides or {}))


@functools.lru_cache(maxsize=8)
def _bundles(stack: str, frozen: str) -> StackFiles:
    import json  # noqa: PLC0415

    raw = copy.deepcopy(config.load_stack_file(stacks.stack_file(stack)))
    for key, value in json.loads(frozen).items():
        raw[key] = {**raw.get(key, {}), **value} if isinstance(value, dict) else value
    cfg = config.parse(raw)
    pool = cfg.gpu_pools[0]
    head = bundle_for(node_context.build(cfg, gb300_tags.ROLE_HEAD), fetch=False)
    node = bundle_for(node_context.build(cfg, gb300_tags.ROLE_GPU_NODE, pool), fetch=False)
    return StackFiles(
        cluster=cfg.cluster.name,
        pool=pool.name,
        head={f.path: f for f in head.files},
        node={f.path: f for f in node.files},
    )


def source_env(text: str) -> dict[str, str]:
    """The GB300_ variables ``text`` sets when bash sources it."""
    out = subprocess.run(
        ["bash", "-c", 'set -a; eval "$1"; env -0', "_", text], check=True, capture_output=True, text=True
    ).stdout
    return dict(item.split("=", 1) for item in out.split("\0") if item.startswith("GB300_"))


def place(files: dict[str, NodeFile], upper: Path, *, skip: tuple[str, ...] = ()) -> None:
    """Write ``files`` into a host's layer at their node paths, with their permissions (``skip``: path prefixes)."""
    for path, node_file in files.items():
        if path.startswith(skip):
            continue
        target = upper / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(node_file.content)
        target.chmod(int(node_file.permissions, 8) if isinstance(node_file.permissions, str) else node_file.permissions)


_STANDIN = """#!/usr/bin/env bash
printf '%s %s\\n' "$(basename "$0")" "$*" >>"$SANDBOX/calls.log"
"""


def slurmd_argv(upper: Path) -> tuple[list[str], list[str]]:
    """Run the node's ``gb300-slurmd-setup`` step (placed under ``upper``) with ``GB300_ROOT=upper``: the slurmd
    options its drop-in sets, as systemd splits them, and the ``systemctl`` calls it made, in order.

    What it installs and enables stays in ``upper`` (the node's layer); ``systemctl``, ``gb300-slurm-install`` and
    ``gb300-pam-adopt`` are recording stand-ins here: the fixture itself starts what the step asked for."""
    with tempfile.TemporaryDirectory(prefix="gb300-slurmd-setup-") as scratch:
        bin_dir = Path(scratch, "bin")
        bin_dir.mkdir()
        for name in ("systemctl", "gb300-slurm-install", "gb300-pam-adopt", "logger"):
            (bin_dir / name).write_text(_STANDIN)
            (bin_dir / name).chmod(0o755)
        env = {
            "PATH": f"{bin_dir}:/usr/sbin:/usr/bin:/sbin:/bin",
            "SANDBOX": scratch,
            "GB300_ROOT": str(upper),
            "GB300_SLURM_INSTALL": str(bin_dir / "gb300-slurm-install"),
            "GB300_PAM_ADOPT": str(bin_dir / "gb300-pam-adopt"),
            "LANG": "C.UTF-8",
        }
        done = subprocess.run(
            ["bash", str(upper / SLURMD_SETUP.lstrip("/"))], env=env, capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"gb300-slurmd-setup exited {done.returncode}: {done.stderr[-2000:]}")
        calls = Path(scratch, "calls.log").read_text().splitlines()
    systemctl = [line.removeprefix("systemctl ") for line in calls if line.startswith("systemctl ")]
    return dropin_options(upper / DROPIN, "SLURMD_OPTIONS"), systemctl


def dropin_options(dropin: Path, variable: str) -> list[str]:
    """The words systemd makes of ``$variable`` set by ``Environment=`` in ``dropin`` (split at whitespace, quotes
    honoured)."""
    for line in dropin.read_text().splitlines():
        if not line.startswith("Environment="):
            continue
        for assignment in shlex.split(line.removeprefix("Environment=")):
            name, _, value = assignment.partition("=")
            if name == variable:
                return shlex.split(value)
    raise RuntimeError(f"{dropin} sets no {variable}")


def unit_command(unit: Path, options: dict[str, list[str]]) -> list[str]:
    """``unit``'s ``ExecStart=`` as a foreground command: ``--systemd`` becomes ``-D`` (no notify socket here),
    ``$VAR`` expands to ``options[VAR]`` (absent: nothing), as systemd splits an unquoted ``$VAR``."""
    [line] = [x for x in readable(unit).splitlines() if x.startswith("ExecStart=")]
    argv: list[str] = []
    for word in shlex.split(line.removeprefix("ExecStart=").lstrip("-@+!")):
        match = re.fullmatch(r"\$\{?([A-Z_]+)\}?", word)
        if match:
            argv.extend(options.get(match.group(1), []))
        else:
            argv.append("-D" if word == "--systemd" else word)
    return argv


def unit_user(unit: Path) -> str | None:
    """The ``User=`` a unit runs as (None: root)."""
    for line in readable(unit).splitlines():
        if line.startswith("User="):
            return line.removeprefix("User=").strip()
    return None


def owner(root: Path, user: str) -> tuple[int, int]:
    """uid and gid of ``user`` in ``root``'s /etc/passwd."""
    for line in readable(root / "etc/passwd").splitlines():
        fields = line.split(":")
        if fields[0] == user:
            return int(fields[2]), int(fields[3])
    raise KeyError(f"{user} is not a user of {root}")


def readable(path: Path) -> str:
    """A file's text; as root where the user may not read it (the cached roots live in root's cache under sudo)."""
    try:
        return path.read_text()
    except PermissionError:
        return priv.read(path)
