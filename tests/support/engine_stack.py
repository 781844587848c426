"""A stack of gb300's own program run by the real Pulumi engine (tests/support/pulumi_engine.py), with the
azure-native double (tests/support/azure_native_double), the pulumi-random double and the command double as its
providers, and the payload account on Azurite (tests/support/payload_account.py).

:func:`open_stack` makes, under a directory of its own:

* a scratch copy of the checkout as a user has it (``Pulumi.yaml``, ``infra/``, ``cloud-init/``, ``templates/``,
  ``policies/``, ``.venv`` linked), with an empty ``stacks/``: the stack's settings come from the shipped stack file
  through ``pulumi config set-all --json`` (the format ``pulumi config --json`` writes), with the tests' payload
  signing key in place of the shipped public key (tests/support/signing.py) and ``azure-native:subscriptionId``;
* the engine, logged in to a file backend, with the three plugin doubles beside the CLI;
* ``pulumi stack init``; the double's directory; Azurite with the payload container.

:meth:`EngineStack.pulumi` runs one CLI command in the copy (the program's ``gb300`` imported from the copy's
``infra/``, the deploy job's signing key in the environment) and keeps its output for a failing test's message.
"""

from __future__ import annotations

import copy as copying
import json
import os
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gb300 import config, paths
from gb300.components import node_payload
from gb300.config import stacks as gb300_stacks
from gb300.node import manifest
from gb300.plan import PlanResult, run_plan
from tests.support import payload_account, pulumi_engine, signing
from tests.support.azure_native_double import DIR_ENV, Ledger

COPIED = ("infra", "cloud-init", "templates", "policies")
SUBSCRIPTION = "3d7c8a6e-5b1f-4c2a-9e0d-4f6a7b8c9d01"
DOUBLE = paths.REPO_ROOT / "tests" / "support" / "azure_native_double" / "__main__.py"
RANDOM = paths.REPO_ROOT / "tests" / "support" / "engine_plugins" / "random_provider.py"


def config_json(raw: Mapping[str, Any], extra: Mapping[str, str]) -> str:
    """The stack's settings in the shape ``pulumi config --json`` prints and ``config set-all --json`` reads."""
    out: dict[str, Any] = {}
    for key, value in raw.items():
        if isinstance(value, dict | list):
            out[f"gb300:{key}"] = {"value": json.dumps(value), "objectValue": value, "secret": False}
        else:
            out[f"gb300:{key}"] = {"value": str(value), "secret": False}
    out.update({k: {"value": v, "secret": False} for k, v in extra.items()})
    return json.dumps(out)


@dataclass
class EngineStack:
    """One stack in a scratch copy, its engine, the double's record and the payload account."""

    name: str
    copy: Path
    engine: pulumi_engine.Engine
    ledger: Ledger
    account: payload_account.PayloadAccount
    container: str
    raw: dict[str, Any]
    plan: PlanResult
    env: dict[str, str]

    def pulumi(self, *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
        """``pulumi <args> --stack <name>`` in the copy; never raises on failure."""
        return self.engine.run([*args, "--stack", self.name], cwd=self.copy, timeout=timeout, env=self.env)

    def output(self, proc: subprocess.CompletedProcess[str]) -> str:
        """What a command printed, for an assertion's message: its error lines first, then its end."""
        text = proc.stdout + proc.stderr
        errors = [line for line in text.splitlines() if "error" in line.lower()]
        return "\n".join(errors[:40])[:6000] + "\n...\n" + text[-3000:]

    def export(self) -> dict[str, Any]:
        """``pulumi stack export`` as JSON."""
        proc = self.pulumi("stack", "export")
        assert proc.returncode == 0, self.output(proc)
        exported: dict[str, Any] = json.loads(proc.stdout)
        return exported

    def close(self) -> None:
        self.account.stop()


def preview_steps(proc: subprocess.CompletedProcess[str]) -> dict[str, set[str]]:
    """URN -> the operations ``pulumi preview --json`` plans for it."""
    found: dict[str, set[str]] = {}
    for step in json.loads(proc.stdout).get("steps", []):
        found.setdefault(step["urn"], set()).add(step["op"])
    return found


def declared(urns: set[str]) -> set[str]:
    """The URNs gb300 declares: not the stack itself nor the engine's default providers."""
    return {u for u in urns if "pulumi:pulumi:Stack" not in u and "::default" not in u}


def _scratch_copy(root: Path) -> Path:
    copy = root / "checkout"
    copy.mkdir()
    for name in COPIED:
        shutil.copytree(paths.REPO_ROOT / name, copy / name, ignore=shutil.ignore_patterns("__pycache__", ".venv"))
    shutil.copy2(paths.REPO_ROOT / "Pulumi.yaml", copy / "Pulumi.yaml")
    (copy / "stacks").mkdir()
    (copy / ".venv").symlink_to(paths.REPO_ROOT / ".venv")
    return copy


def open_stack(root: Path, stack: str) -> EngineStack:
    """The stack initialised and configured from its shipped stack file (see the module docstring)."""
    raw = signing.with_test_key(config.load_stack_file(gb300_stacks.stack_file(stack)))
    plan = run_plan(stack, copying.deepcopy(raw))
    cfg = config.parse(copying.deepcopy(raw))
    account = node_payload.payload_account_name(cfg.cluster.name, cfg.cluster.location, SUBSCRIPTION)
    container = cfg.storage.node_payload.container
    copy = _scratch_copy(root)
    engine = pulumi_engine.engine(root / "engine")
    double_dir = root / "azure"
    engine.add_plugin(
        "pulumi-resource-azure-native", DOUBLE, env={"PYTHONPATH": str(paths.REPO_ROOT), DIR_ENV: str(double_dir)}
    )
    engine.add_plugin("pulumi-resource-random", RANDOM)
    served = payload_account.start(root / "payload", account)
    served.create_container(container)
    env = {
        **served.env,
        "PATH": f"{root / 'payload' / 'bin'}{os.pathsep}{engine.env['PATH']}",
        "PYTHONPATH": str(copy / "infra"),
        manifest.SIGNING_KEY_ENV: signing.key_pem(),
    }
    made = EngineStack(stack, copy, engine, Ledger(double_dir), served, container, raw, plan, env)
    init = made.pulumi("stack", "init", "--non-interactive")
    assert init.returncode == 0, made.output(init)
    settings = config_json(raw, {"azure-native:subscriptionId": SUBSCRIPTION})
    configured = made.pulumi("config", "set-all", "--json", settings)
    assert configured.returncode == 0, made.output(configured)
    return made
