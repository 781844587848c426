"""The program and the policy pack, each started as the Pulumi engine starts it (tests/support/language_host.py,
with the project rules of tests/support/engine.py).

The program runs unmodified (``infra/__main__.py``) in a subprocess with the language host's interpreter, arguments,
working directory and environment, and registers over gRPC with a monitor that answers as ``gb300 plan``'s mocks;
the policy pack runs from ``policies/`` with its own ``PulumiPolicy.yaml`` venv and is called over gRPC as the
engine calls it. docs/engine-contract.md ("How the program is started", "How the policy pack is started") cites
the engine's files.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import empty_pb2
from pulumi.runtime.proto import analyzer_pb2

from gb300 import config, paths, policy_pack, rules
from gb300.config import PolicySettings
from gb300.config import stacks as gb300_stacks
from gb300.plan import PlanResult
from gb300.plan.runner import _record
from gb300.resources import ResourceRecord
from tests.support import engine, language_host
from tests.support.policy_support import ssh_rule, with_inputs

REPO = paths.REPO_ROOT
HEAD_NSG = "azure-native:network:NetworkSecurityGroup"


# --- Where the engine runs things: read from the project files as the engine reads them ---


def test_the_program_runs_in_infra_with_the_roots_venv() -> None:
    """Pulumi.yaml's `main: infra/` makes infra/ the program's directory and `.` its entry point; the venv is
    resolved against the project root, and the language host's command names it and the project root."""
    project = engine.load_project(REPO)
    assert engine.pwd_main(project.root, project.main) == (REPO / "infra", ".")
    assert language_host.interpreter(project) == REPO / ".venv" / "bin" / "python"
    argv = language_host.program_command(
        project=project, stack="dev", monitor="127.0.0.1:1", engine_address="127.0.0.1:2", pwd=REPO / "infra", entry="."
    )
    assert argv[0] == str(REPO / ".venv" / "bin" / "python")
    assert argv[argv.index("--pwd") + 1] == str(REPO / "infra")
    assert argv[argv.index("--root_directory") + 1] == str(REPO)
    assert argv[-1] == "."


def test_main_that_is_missing_or_a_file() -> None:
    """getPwdMain: a file `main` runs in its directory under its own name; a missing one is refused."""
    assert engine.pwd_main(REPO, "infra/__main__.py") == (REPO / "infra", "__main__.py")
    assert engine.pwd_main(REPO, "") == (REPO, ".")
    with pytest.raises(FileNotFoundError, match="project 'main' could not be read"):
        engine.pwd_main(REPO, "no-such-dir/")


def test_the_pack_runs_with_the_venv_its_own_directory_names() -> None:
    """PulumiPolicy.yaml's `virtualenv: ../.venv` is resolved against policies/ (RunPlugin's root directory), so it
    is the checkout's .venv; resolved against the project root instead it names a directory that does not exist."""
    pack = engine.load_project(paths.POLICIES_DIR, engine.POLICY_PACK_FILE)
    assert language_host.interpreter(pack) == REPO / ".venv" / "bin" / "python"
    assert language_host.interpreter(pack).is_file()
    wrong = dataclasses.replace(pack, root=REPO)
    assert language_host.interpreter(wrong) == REPO.parent / ".venv" / "bin" / "python"
    assert language_host.interpreter(wrong) != language_host.interpreter(pack)
    argv = language_host.policy_command(pack, "127.0.0.1:9")
    assert argv[1:] == ["-u", "-m", "pulumi.policy", "127.0.0.1:9", str(paths.POLICIES_DIR)]


def test_the_venv_is_activated_as_the_language_host_does() -> None:
    """ActivateVirtualEnv: the venv's bin first on PATH, VIRTUAL_ENV set, PYTHONHOME dropped."""
    venv = Path("/x/.venv")
    env = engine.activate_virtualenv({"PATH": "/usr/bin", "PYTHONHOME": "/h", "VIRTUAL_ENV": "/other", "A": "1"}, venv)
    assert env == {"PATH": f"/x/.venv/bin{os.pathsep}/usr/bin", "VIRTUAL_ENV": "/x/.venv", "A": "1"}


def test_the_real_exec_script_is_used_where_a_cli_is_installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With a Pulumi CLI's language host on PATH the exec script installed beside it runs the program; without
    one, the harness's stand-in does (and only then)."""
    monkeypatch.setenv("PATH", str(tmp_path))
    assert language_host.language_exec() == language_host.STAND_IN_EXEC
    for name in ("pulumi-language-python", language_host.EXEC_NAME):
        (tmp_path / name).write_text("#!/bin/sh\n", encoding="utf-8")
        (tmp_path / name).chmod(0o755)
    assert language_host.language_exec() == tmp_path / language_host.EXEC_NAME


def test_config_reaches_the_program_as_the_engine_sends_it(write_stack: Any, dev_raw: dict[str, Any]) -> None:
    """Each stack file key `namespace:name`, objects as JSON text; an encrypted value is refused, not guessed."""
    values = engine.engine_config(gb300_stacks.stack_file("dev"))
    assert json.loads(values["gb300:gpuPools"]) == dev_raw["gpuPools"]
    assert config.from_pulumi_config(values) == dev_raw
    raw = copy.deepcopy(dev_raw)
    raw["access"]["sshPublicKey"] = {"secure": "AAABAD"}
    with pytest.raises(ValueError, match="gb300:access holds an encrypted value"):
        engine.engine_config(write_stack(raw))


# --- The program, run as the language host runs it ---


@pytest.fixture(scope="module")
def dev_run() -> language_host.ProgramRun:
    """The dev stack's program, run once through the harness as `pulumi preview` runs it (about 7 s)."""
    return language_host.run_program("dev", engine.engine_config(gb300_stacks.stack_file("dev")))


@pytest.mark.slow
def test_the_program_registers_what_the_plan_records(dev_run: language_host.ProgramRun, dev_plan: PlanResult) -> None:
    """Started as the engine starts it, the unmodified program registers exactly the resources of `gb300 plan`:
    the same URNs and types, with the same inputs and options."""
    assert dev_run.returncode == 0, dev_run.stderr + "\n".join(dev_run.errors())
    assert dev_run.engine_error is None
    assert dev_run.duplicates == []
    assert dev_run.errors() == []
    harness = sorted((_record(r) for r in dev_run.registrations), key=lambda r: r.urn)
    assert [(r.urn, r.type) for r in harness] == [(r.urn, r.type) for r in dev_plan.resources]
    assert len(harness) > 50
    assert [r.as_json() for r in harness] == [r.as_json() for r in dev_plan.resources]


@pytest.mark.slow
def test_the_program_ran_where_and_how_the_engine_runs_it(dev_run: language_host.ProgramRun) -> None:
    """The run's own record: the venv's interpreter, infra/ as cwd and --pwd, the config in PULUMI_CONFIG."""
    assert dev_run.argv[0] == str(REPO / ".venv" / "bin" / "python")
    assert dev_run.cwd == REPO / "infra"
    assert dev_run.env["VIRTUAL_ENV"] == str(REPO / ".venv")
    assert json.loads(dev_run.env["PULUMI_CONFIG"]) == engine.engine_config(gb300_stacks.stack_file("dev"))
    assert dev_run.env["PULUMI_CONFIG_SECRET_KEYS"] == "[]"  # noqa: S105 - an empty list of key names


@pytest.mark.slow
def test_a_bad_config_reaches_the_user_as_the_engine_shows_it(write_stack: Any, dev_raw: dict[str, Any]) -> None:
    """A rack count of 0: the program fails with a RunError naming the key, logged to the engine as one error
    (no traceback), and the language host reports exit status 1; nothing but the stack was registered."""
    raw = copy.deepcopy(dev_raw)
    raw["gpuPools"][0]["racks"] = 0
    run = language_host.run_program("dev", engine.engine_config(write_stack(raw)))
    assert run.returncode == 1
    assert run.engine_error == "program exited with non-zero exit code: 1"
    (error,) = run.errors()
    assert error.startswith("invalid stack configuration:\n")
    assert "gb300:gpuPools[0].racks: must be at least 1 (got 0)" in error
    assert "Traceback" not in error
    assert run.registrations == []


@pytest.mark.slow
def test_started_from_the_repository_root_the_program_runs_all_the_same(dev_run: language_host.ProgramRun) -> None:
    """The negative, and what it shows: started in the repository root (not what getPwdMain gives for
    `main: infra/`), the entry point `.` has no __main__.py, yet the program runs: runpy looks `__main__` up on
    sys.path, where the editable install (`make setup`) puts infra/. And the program finds its own files from its
    location (gb300.paths), so it registers the same resources with the same inputs. The working directory matters
    to what a provider runs in it (pulumi-command's `local.Command` without `dir`), not to the program."""
    assert not (REPO / "__main__.py").exists()
    run = language_host.run_program("dev", engine.engine_config(gb300_stacks.stack_file("dev")), pwd=REPO, entry=".")
    assert run.cwd == REPO
    assert run.argv[run.argv.index("--pwd") + 1] == str(REPO)
    assert run.returncode == 0, run.stderr + "\n".join(run.errors())
    here = sorted((_record(r).as_json() for r in run.registrations), key=lambda r: r["urn"])
    there = sorted((_record(r).as_json() for r in dev_run.registrations), key=lambda r: r["urn"])
    assert here == there


# --- The policy pack, started as the engine starts it ---


def resolve_stack(records: list[ResourceRecord]) -> analyzer_pb2.AnalyzeStackRequest:
    return analyzer_pb2.AnalyzeStackRequest(
        resources=[
            language_host.analyzer_resource(r.urn, r.type, r.name, r.inputs, parent=r.parent or "") for r in records
        ]
    )


def _internet_ssh(records: list[ResourceRecord]) -> list[ResourceRecord]:
    """The dev stack with one more rule on its head NSG: SSH from any address."""
    opened = ssh_rule("0.0.0.0/0", name="allow-ssh-anywhere", priority=4000)
    return [
        with_inputs(r, securityRules=[*r.inputs.get("securityRules", []), opened])
        if r.type == HEAD_NSG and r.name.endswith("-head-nsg")
        else r
        for r in records
    ]


def _preview(values: dict[str, str], records: list[ResourceRecord]) -> list[Any]:
    """One preview's policy checks, as the engine makes them: a pack process of its own, `Analyze` with each
    resource's inputs, then one `AnalyzeStack`; the mandatory diagnostics."""
    with language_host.policy_pack("dev", values) as pack:
        assert pack.argv[0] == str(REPO / ".venv" / "bin" / "python")
        assert pack.cwd == paths.POLICIES_DIR
        info = pack.analyzer.GetAnalyzerInfo(empty_pb2.Empty())
        assert info.name == policy_pack.PACK_NAME
        assert "no-ssh-from-internet" in {p.name for p in info.policies}
        for r in records:
            answer = pack.analyzer.Analyze(language_host.analyzer_resource(r.urn, r.type, r.name, r.inputs))
            assert list(answer.diagnostics) == []  # the inputs recorder reports nothing
        stack = pack.analyzer.AnalyzeStack(resolve_stack(records))
    return [d for d in stack.diagnostics if d.enforcementLevel == analyzer_pb2.MANDATORY]


@pytest.mark.slow
def test_the_pack_started_from_its_directory_gives_the_plans_verdict(dev_plan: PlanResult) -> None:
    """From policies/, with PulumiPolicy.yaml's venv and the stack config as the engine hands it, the pack passes
    the dev stack, and fails the stack whose head NSG opens SSH to the internet with exactly the rule the plan's
    rules fail it with, on that NSG."""
    values = engine.engine_config(gb300_stacks.stack_file("dev"))
    bad = _internet_ssh(dev_plan.resources)
    (nsg,) = [r for r in bad if r.name.endswith("-head-nsg")]
    settings = PolicySettings()
    plan_verdict = {f.rule for f in rules.failing(rules.evaluate(bad, settings), settings)}
    assert plan_verdict == {"no-ssh-from-internet"}
    assert not rules.failing(rules.evaluate(dev_plan.resources, settings), settings)
    assert _preview(values, dev_plan.resources) == []
    failed = _preview(values, bad)
    assert {d.policyName for d in failed} == plan_verdict
    assert {d.urn for d in failed} == {nsg.urn}
    assert all("must not allow SSH (port 22) from the Internet" in d.message for d in failed)


@pytest.mark.slow
def test_a_pack_whose_venv_is_missing_does_not_start(tmp_path: Path) -> None:
    """A pack directory whose `virtualenv` names no environment: the engine's command has no interpreter to run,
    so the pack never announces a port (the engine reports it failed to start)."""
    (tmp_path / "PulumiPolicy.yaml").write_text(
        "runtime:\n  name: python\n  options:\n    toolchain: pip\n    virtualenv: ../.venv\n", encoding="utf-8"
    )
    with pytest.raises(FileNotFoundError), language_host.policy_pack("dev", {}, pack_dir=tmp_path):
        pass
