"""Every `gb300 ...` command the documentation shows in a fenced block runs here as written (with its files
made in a temporary directory), or is on :data:`CANNOT_RUN` with the reason it cannot.

A command runs in-process through ``cli.main`` and must end as documented: exit 0 or 1 (a plan's verdict), never
2 (a flag, key or file the docs name that does not exist) or 3 (a bug).

``--prices live`` asks the Azure Retail Prices API through azure-core's real pipeline; here its transport is the
fake API of tests/cost/test_prices_live.py (synthetic prices shaped as the API answers), so no test sends a request
off this machine (unanswered, the client's retries and back-off waited about 80 s a command). What that cannot
show: the real API's prices today.
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
import shutil
from pathlib import Path

import pytest

from gb300 import cli, paths
from gb300.config import stacks as gb300_stacks
from gb300.cost import prices
from gb300.plan import PlanResult
from tests.cost.test_prices_live import FakeRetailPrices, live
from tests.support.files import FIXTURES
from tests.support.state import write_stack_export

DOCS = sorted([paths.REPO_ROOT / "README.md", *(paths.REPO_ROOT / "docs").glob("*.md")])
_COMMAND = re.compile(r"^(?:\$ )?(?:\.venv/bin/)?(gb300 [a-z][a-z-]*(?: .*)?)$")

# The commands that cannot run in a test on this machine, and why. Each must still appear in the docs.
CANNOT_RUN: dict[str, str] = {
    "gb300 init mylab --ssh-public-key ~/.ssh/id_ed25519.pub": "writes stacks/Pulumi.mylab.yaml into the checkout "
    "and a key under ~/.gb300; tests/test_init.py runs it in a copy of the project",
    "gb300 init prod --from reference --location westus3 --deployer service-principal": "writes a stack file into "
    "the checkout and a key under ~/.gb300; tests/test_init.py runs these flags in a copy of the project",
    "gb300 plan --stack mylab": "plans the stack gb300 init writes in the tutorial's day 1, which the repository does "
    "not ship; tests/engine/test_day1.py runs the whole day-1 block in a copy of the project",
    "gb300 software lock": "downloads every unpinned file and key from its vendor (needs the Internet); "
    "tests/ops/test_software_lock.py runs it against local servers",
    "gb300 software lock --stack prod": "needs the Internet, and a stack file stacks/Pulumi.prod.yaml the "
    "repository does not ship",
    "gb300 plan --stack reference --quota live": "asks Azure for quota, sizes and images (needs a signed-in "
    "Azure identity); tests/azure/test_quota.py runs it with a fake HTTP transport",
    "gb300 docs": "rewrites docs/configuration.md and docs/cli.md in the checkout; tests/test_generated_docs.py "
    "runs its check",
    "gb300 migrate-racks --stack NAME --state before.json --out migrate": "needs a state written by gb300 0.1 "
    "(racks as dynamic resources); tests/ops/test_migrate_racks.py builds one",
    "gb300 rollout --stack reference --state state.json --azure live --dry-run --concurrency 2": "asks Azure which "
    "racks run an old model (needs a signed-in Azure identity); tests/ops/test_rollout_docs.py walks it with a fake "
    "Azure",
    "gb300 rollout --stack reference --state state.json --azure instances --dry-run": "reads the saved answers of "
    "`az vmss list-instances` of a deployed cluster; tests/ops/test_rollout_docs.py writes and reads them",
    "gb300 plan --stack reference --prices our-prices.yaml": "a price file of the user's own (negotiated prices); "
    "tests/cost runs --prices FILE on a table shaped like it",
    "gb300 heal role --subscription <id> --resource-group <cluster>-rg > roles.json": (
        "a template with placeholders; tests/heal/test_azure.py runs `gb300 heal role` and compares it with the calls"
    ),
    "gb300 rollout --stack reference --state state.json --concurrency 2 --slurm-via 'ssh -o BatchMode=yes "
    "azureuser@ref-head sudo'": "drains racks over ssh to a deployed head and reimages them in Azure",
    "gb300 goodput --nodes nodes.json --sacct sacct.json --heal remediation.log --since 2026-11-01T00:00:00Z "
    "--until 2026-12-01T00:00:00Z [--json report.json]": "reads a month of a deployed cluster's saved node list, "
    "sacct --json and decision records; tests/ops/test_goodput.py runs it on histories shaped like them",
    "gb300 usage --since 2026-11-01T00:00:00Z --until 2026-12-01T00:00:00Z --stack mylab": "runs sacct on a "
    "deployed head, and a stack the repository does not ship; tests/slurm/real/test_usage.py runs sacct through "
    "gb300 usage on real Slurm",
    "gb300 status --state state.json [--rack ref-train-r0002 ...] [--workers 16]": "reads each rack's VMs "
    "from Azure and each node's status with Run Command (a deployed cluster)",
}


def _doc_commands() -> list[tuple[str, str]]:
    """(page, command) for each `gb300 ...` line of a fenced block, continuation lines joined, comments cut."""
    found: list[tuple[str, str]] = []
    for page in DOCS:
        for block in re.findall(r"```[a-z]*\n(.*?)```", page.read_text(encoding="utf-8"), re.DOTALL):
            pending = ""
            for raw in block.splitlines():
                line = raw.strip()
                if pending:
                    pending += " " + line.rstrip("\\").strip()
                else:
                    match = _COMMAND.match(line)
                    if match is None:
                        continue
                    pending = match.group(1).rstrip("\\").strip()
                if line.endswith("\\"):
                    continue
                command = re.split(r"\s+#", pending, maxsplit=1)[0]
                found.append((page.name, " ".join(command.split())))
                pending = ""
    return found


COMMANDS = _doc_commands()


def test_the_docs_show_commands_and_the_list_is_not_stale() -> None:
    """The extraction finds the documented commands, and every CANNOT_RUN entry is still in the docs."""
    shown = {command for _, command in COMMANDS}
    assert len(shown) >= 10
    assert sorted(set(CANNOT_RUN) - shown) == []


def _fabric_file(path: Path) -> None:
    """One rack's NVLink identity per node, as the docs' pdsh line writes it."""
    uuid = "7b1f0c1e-3a5d-4c7e-9f10-2b3c4d5e6f70"
    path.write_text("".join(f"gpu-{i:03d} {uuid} 32766\n" for i in range(1, 19)))


def _argv(command: str, tmp_path: Path) -> tuple[list[str], Path | None]:
    """The argv of a documented command with its files made here, and where `>` sends stdout."""
    text = re.sub(r"\s*\[[^\]]*\]", "", command)  # optional [--flags] of a synopsis
    out: Path | None = None
    if ">" in text:
        text, target = (part.strip() for part in text.split(">", 1))
        out = tmp_path / Path(target).name
    argv = shlex.split(text)[1:]
    stack_copy = tmp_path / "Pulumi.mystack.yaml"
    shutil.copy(gb300_stacks.stack_file("dev"), stack_copy)
    local = {"fabric.txt", "state.json", "usage.json", "plan.json", "report.json", "decisions.jsonl"}  # written here
    return [
        str(stack_copy) if arg == "path/to/Pulumi.mystack.yaml" else str(tmp_path / arg) if arg in local else arg
        for arg in argv
    ], out


@pytest.mark.slow
@pytest.mark.parametrize(("page", "command"), COMMANDS, ids=[f"{p}:{c}" for p, c in COMMANDS])
def test_a_documented_command_runs_as_written(  # noqa: PLR0917 - pytest fixtures
    page: str,
    command: str,
    tmp_path: Path,
    reference_plan: PlanResult,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The command exits 0 or 1 (never 2: a flag, key or file it names does not exist; never 3: a bug)."""
    if command in CANNOT_RUN:
        pytest.skip(f"cannot run here: {CANNOT_RUN[command]}")
    api = FakeRetailPrices()
    monkeypatch.setattr(prices, "live_book", live(api))  # --prices live: the fake API, never the network
    write_stack_export(tmp_path / "state.json", reference_plan)
    _fabric_file(tmp_path / "fabric.txt")
    shutil.copy(FIXTURES / "quota" / "eastus2-enough.json", tmp_path / "usage.json")
    argv, out = _argv(command, tmp_path)
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer) if out is not None else contextlib.nullcontext():
        code = cli.main(argv)
    if out is not None:
        out.write_text(buffer.getvalue())
    err = capsys.readouterr().err
    assert code in {0, 1}, f"{page}: `{command}` exited {code}: {err[-600:]}"
    assert bool(api.seen) == ("--prices live" in command), "only --prices live asks the Retail Prices API"
