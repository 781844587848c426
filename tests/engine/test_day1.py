"""Day 1 as docs/tutorial.md shows it, through the real Pulumi engine: the tutorial's `sh` block (gb300 init to
pulumi up) runs line by line with bash in a scratch copy of the checkout, and `gb300 init`'s "Next:" list is that
block.

The engine is the CLI and Python language host built from source (tests/support/pulumi_engine.py) with the
azure-native, pulumi-random and pulumi-command doubles as the program's providers. What stands in for a user's
machine: ``az`` (a stand-in on ``PATH`` that answers ``az login`` and ``az account show --query id -o tsv`` with a
test subscription: signing in is the one step the test cannot take), ``HOME`` (an SSH key of nobody's, and
``~/.gb300`` for the signing key) and ``PULUMI_BACKEND_URL`` (``pulumi login`` without an argument logs in to it,
a local file backend, instead of Pulumi Cloud), ``PULUMI_SKIP_CONFIRMATIONS`` (the confirmation a user gives
``pulumi up`` at a terminal), and the payload account (Azurite behind a proxy, tests/support/payload_account.py).
Skipped, saying why, where the engine cannot be built (not under CI).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gb300 import config, paths
from gb300.components import node_payload
from gb300.config import stacks
from gb300.node import manifest
from tests.support import ci_files, payload_account, pulumi_engine
from tests.support.azure_native_double import DIR_ENV

pytestmark = pytest.mark.slow
PAGE = paths.REPO_ROOT / "docs" / "tutorial.md"
STACK_UP = paths.REPO_ROOT / ".github" / "workflows" / "stack-up.yml"
COPIED = ("infra", "cloud-init", "templates", "policies", "stacks")
SUBSCRIPTION = "7a1d2c3b-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
OWN_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIADDzJxvaxYSYM901ZPfxr7kcSikvxUfUG9YOOBv67WK me@lab"
DOUBLE = paths.REPO_ROOT / "tests" / "support" / "azure_native_double" / "__main__.py"
RANDOM = paths.REPO_ROOT / "tests" / "support" / "engine_plugins" / "random_provider.py"
AZ = textwrap.dedent(
    f"""\
    #!/bin/sh
    # Stand-in Azure CLI for day 1: az login, and the subscription it selected.
    case "$*" in
      login) echo '[{{"id": "{SUBSCRIPTION}", "isDefault": true}}]' ;;
      "account show --query id -o tsv") echo {SUBSCRIPTION} ;;
      *) exec "$GB300_TEST_AZ_TOKENS" "$@" ;;
    esac
    """
)


def day1_commands() -> list[str]:
    """The lines of the tutorial's day-1 `sh` block."""
    blocks = re.findall(r"```sh\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.DOTALL)
    assert len(blocks) == 1, "docs/tutorial.md has one sh block: day 1"
    return [line for line in blocks[0].splitlines() if line.strip()]


def _scratch_copy(root: Path) -> Path:
    copy = root / "checkout"
    copy.mkdir()
    for name in COPIED:
        shutil.copytree(paths.REPO_ROOT / name, copy / name, ignore=shutil.ignore_patterns("__pycache__", ".venv"))
    shutil.copy2(paths.REPO_ROOT / "Pulumi.yaml", copy / "Pulumi.yaml")
    (copy / ".venv").symlink_to(paths.REPO_ROOT / ".venv")
    return copy


def _user(
    root: Path, engine: pulumi_engine.Engine, copy: Path, account: payload_account.PayloadAccount
) -> dict[str, str]:
    """The environment of a user's shell: HOME with an SSH key, the stand-in az (its tokens from the payload
    account's), gb300 and the engine on PATH, the payload account's proxy; a confirmed ``pulumi up`` (a user
    answers its prompt at a terminal; ``PULUMI_SKIP_CONFIRMATIONS`` answers it here)."""
    home = root / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519.pub").write_text(OWN_KEY + "\n", encoding="utf-8")
    azbin = root / "azbin"
    azbin.mkdir()
    (azbin / "az").write_text(AZ, encoding="utf-8")
    (azbin / "az").chmod(0o755)
    return {
        **engine.env,
        **account.env,
        "GB300_TEST_AZ_TOKENS": str(account.work / "bin" / "az"),
        "PULUMI_SKIP_CONFIRMATIONS": "true",
        "HOME": str(home),
        "PATH": os.pathsep.join([str(azbin), str(paths.REPO_ROOT / ".venv" / "bin"), engine.env["PATH"]]),
        "PULUMI_BACKEND_URL": f"file://{engine.root / 'state'}",
        "PYTHONPATH": str(copy / "infra"),
    }


@pytest.fixture(scope="module")
def walked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Every line of the day-1 block, run in order (stopping at the first failure), the payload account on Azurite
    (the account name the new stack's cluster, region and subscription give)."""
    root = tmp_path_factory.mktemp("day1")
    dev = config.parse(config.load_stack_file(stacks.stack_file("dev")))
    name = node_payload.payload_account_name("mylab", dev.cluster.location, SUBSCRIPTION)
    account = payload_account.start(root / "payload", name)
    account.create_container(dev.storage.node_payload.container)
    engine = pulumi_engine.engine(root / "engine")
    engine.add_plugin(
        "pulumi-resource-azure-native", DOUBLE, env={"PYTHONPATH": str(paths.REPO_ROOT), DIR_ENV: str(root / "azure")}
    )
    engine.add_plugin("pulumi-resource-random", RANDOM)
    copy = _scratch_copy(root)
    env = _user(root, engine, copy, account)
    runs: list[tuple[str, subprocess.CompletedProcess[str]]] = []
    for line in day1_commands():
        proc = subprocess.run(
            ["bash", "-c", line], cwd=copy, env=env, capture_output=True, text=True, timeout=900, check=False
        )
        runs.append((line, proc))
        if proc.returncode != 0:
            break
    yield {
        "runs": runs,
        "copy": copy,
        "home": Path(env["HOME"]),
        "env": env,
        "account": account,
        "container": dev.storage.node_payload.container,
    }
    account.stop()


def _said(run: tuple[str, subprocess.CompletedProcess[str]]) -> str:
    line, proc = run
    return f"$ {line} (exit {proc.returncode})\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"


def test_init_prints_the_tutorials_day1_commands(walked: dict[str, Any]) -> None:
    """`gb300 init`'s "Next:" list is the rest of the tutorial's block, in the same order (the key's path written
    with ~ as the page writes it)."""
    line, proc = walked["runs"][0]
    assert line.startswith("gb300 init ")
    assert proc.returncode == 0, _said(walked["runs"][0])
    printed = proc.stdout.split("Next:\n", 1)[1].splitlines()
    home = str(walked["home"])
    assert [p.strip().replace(home, "~") for p in printed] == day1_commands()[1:]


def test_every_day1_command_succeeds_through_the_engine(walked: dict[str, Any]) -> None:
    """gb300 init, gb300 plan, az login, pulumi login, stack init, the subscription, the policy-pack preview and
    pulumi up with the signing key each exit 0, in the tutorial's order, and up publishes the node payloads."""
    failed = [_said(r) for r in walked["runs"] if r[1].returncode != 0]
    assert failed == []
    assert len(walked["runs"]) == len(day1_commands())
    assert manifest.signature_blob("head") in walked["account"].blobs(walked["container"])


def test_the_preview_runs_the_policy_pack_on_the_new_stack(walked: dict[str, Any]) -> None:
    """The preview ran gb300's pack over the new stack's resources (its racks among them) in the subscription
    az selected, and the stack holds that subscription."""
    [(line, proc)] = [r for r in walked["runs"] if " preview " in r[0]]
    assert "--policy-pack policies" in line
    assert "gb300@v" in proc.stdout, _said((line, proc))
    assert "VirtualMachineScaleSet" in proc.stdout
    stack_file = walked["copy"] / "stacks" / "Pulumi.mylab.yaml"
    assert config.load_stack_file(stack_file)["cluster"]["name"] == "mylab"
    assert f"azure-native:subscriptionId: {SUBSCRIPTION}" in stack_file.read_text(encoding="utf-8")


def test_the_deploy_workflows_preview_job_runs_on_the_new_stack(walked: dict[str, Any]) -> None:
    """The pulumi commands of stack-up.yml's preview job, read from the workflow with their flags (stack select
    --create, preview with the policy pack, --diff, --suppress-outputs, --non-interactive), run on the day-1 stack
    through the same engine and exit 0 with the pack's report."""
    runs = ci_files.job_runs(ci_files.jobs(STACK_UP)["preview"], "pulumi")
    assert [argv[1] for argv in runs] == ["stack", "preview"]
    done = []
    for argv in runs:
        words = [w.replace("$STACK", "mylab") for w in argv]
        proc = subprocess.run(
            words, cwd=walked["copy"], env=walked["env"], capture_output=True, text=True, timeout=900, check=False
        )
        done.append((" ".join(words), proc))
    assert [_said(r) for r in done if r[1].returncode != 0] == []
    assert "gb300@v" in done[-1][1].stdout
