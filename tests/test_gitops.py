"""The CI definitions: schema-valid, calling only commands and flags that exist, naming only real stacks,
deploying through gated environments with federated Azure credentials and a single stored secret."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from gb300.cli import build_parser
from tests.support.ci_files import (
    AZURE_PIPELINES,
    GITHUB_ACTIONS,
    GITHUB_WORKFLOWS,
    PULUMI_CLI,
    ROOT,
    SCRIPT_KEYS,
    commands,
    invocations,
    is_literal,
    job_runs,
    job_scripts,
    jobs,
    load,
    parse_pulumi,
    scripts,
    stacks_in_repo,
)

CHECK_JSONSCHEMA = str(Path(sys.executable).parent / "check-jsonschema")
WORKFLOWS = ROOT / ".github" / "workflows"
STACK_UP = "./.github/workflows/stack-up.yml"
FORK_GUARD = "github.repository == vars.GITOPS_REPOSITORY"
SAME_REPO_PR = "github.event.pull_request.head.repo.full_name == github.repository"
ALLOWED_SECRETS = {"PULUMI_ACCESS_TOKEN", "GITHUB_TOKEN", "GB300_PAYLOAD_SIGNING_KEY"}
SIGNING_KEY = "GB300_PAYLOAD_SIGNING_KEY"  # the payload signing key: the deploy step's, nobody else's


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def _check_jsonschema(schema: str, path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    # Builtin schemas ship inside check-jsonschema: no network is used.
    return subprocess.run(
        [CHECK_JSONSCHEMA, "--builtin-schema", schema, "--no-cache", *extra, str(path)],
        capture_output=True,
        text=True,
        check=False,
    )


GITHUB_WORKFLOW_SCHEMA = ("vendor.github-workflows", ())
GITHUB_ACTION_SCHEMA = ("vendor.github-actions", ())
# The Azure Pipelines schema's patterns need ECMAScript regexes in non-unicode mode.
AZURE_PIPELINES_SCHEMA = ("vendor.azure-pipelines", ("--regex-variant", "nonunicode"))
SCHEMAS = [
    *[(p, *GITHUB_WORKFLOW_SCHEMA) for p in GITHUB_WORKFLOWS],
    *[(p, *GITHUB_ACTION_SCHEMA) for p in GITHUB_ACTIONS],
    *[(p, *AZURE_PIPELINES_SCHEMA) for p in AZURE_PIPELINES],
    (ROOT / ".github" / "dependabot.yml", "vendor.dependabot", ()),
]


@pytest.mark.slow
@pytest.mark.parametrize(("path", "schema", "extra"), SCHEMAS, ids=[_rel(p) for p, _, _ in SCHEMAS])
def test_ci_file_matches_its_published_schema(path: Path, schema: str, extra: tuple[str, ...]) -> None:
    """Each workflow, composite action, Dependabot and Azure pipeline file validates against its schema."""
    result = _check_jsonschema(schema, path, *extra)
    assert result.returncode == 0, result.stdout + result.stderr


MISSPELLINGS = {
    # id: (file, (schema, extra arguments), key, misspelling)
    "workflow-step-key": (WORKFLOWS / "pr.yml", GITHUB_WORKFLOW_SCHEMA, "steps:", "stepz:"),
    "workflow-job-key": (WORKFLOWS / "stack-up.yml", GITHUB_WORKFLOW_SCHEMA, "environment:", "enviroment:"),
    "azure-jobs-key": (ROOT / "azure-pipelines.yml", AZURE_PIPELINES_SCHEMA, "jobs:", "jobz:"),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", MISSPELLINGS.values(), ids=MISSPELLINGS.keys())
def test_schema_check_rejects_a_misspelled_key(tmp_path: Path, case: tuple[Any, ...]) -> None:
    """The schema check is not vacuous: a misspelled key in a copy of a real file fails it."""
    path, (schema, extra), old, new = case
    broken = tmp_path / path.name
    broken.write_text(path.read_text(encoding="utf-8").replace(old, new, 1), encoding="utf-8")
    assert _check_jsonschema(schema, broken, *extra).returncode == 1


GB300_CALLS = invocations("gb300")
PULUMI_CALLS = invocations("pulumi")


def test_ci_files_call_gb300_and_pulumi() -> None:
    """The command extraction finds the plan, preview and deploy commands, so the checks below bite."""
    assert {c.path.name for c in GB300_CALLS} == {
        "pr.yml",
        "stack-up.yml",
        "azure-pipelines.yml",
        "pulumi.yml",
        "pins.yml",
        "drift.yml",
    }
    assert {c.path.name for c in PULUMI_CALLS} == {"pr.yml", "stack-up.yml", "drift.yml", "pulumi.yml"}


@pytest.mark.parametrize("call", GB300_CALLS, ids=str)
def test_gb300_invocation_parses_with_the_cli(call: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """Every `gb300 ...` the CI runs is accepted by the CLI's own argument parser."""
    try:
        build_parser().parse_args(list(call.argv[1:]))
    except SystemExit as exc:
        pytest.fail(f"{call}: rejected by gb300's parser (exit {exc.code}): {capsys.readouterr().err}")


PULUMI_SPEC = yaml.safe_load(PULUMI_CLI.read_text(encoding="utf-8"))


@pytest.mark.parametrize("call", PULUMI_CALLS, ids=str)
def test_pulumi_invocation_uses_documented_commands_and_flags(call: Any) -> None:
    """Every `pulumi ...` the CI runs uses a command and flags listed in tests/fixtures/pulumi-cli.yaml."""
    parsed = parse_pulumi(call.argv, PULUMI_SPEC)
    assert not parsed.problems, f"{call}: {parsed.problems}"


REQUIRED_PULUMI = [
    # (file, command, flags it must carry)
    ("stack-up.yml", "preview", {"--policy-pack": "policies", "--stack": None}),
    ("stack-up.yml", "up", {"--yes": None, "--policy-pack": "policies", "--stack": None}),
    ("drift.yml", "preview", {"--expect-no-changes": None, "--refresh": None, "--stack": None}),
    ("pulumi.yml", "preview", {"--policy-pack": "policies", "--stack": None}),
    ("pulumi.yml", "up", {"--yes": None, "--policy-pack": "policies", "--stack": None}),
    ("pulumi.yml", "preview", {"--expect-no-changes": None, "--refresh": None}),
]


@pytest.mark.parametrize(("name", "command", "flags"), REQUIRED_PULUMI)
def test_flow_runs_pulumi_with_policy_and_drift_flags(name: str, command: str, flags: dict[str, Any]) -> None:
    """Deploys preview with the policy pack before the approval and run `up --yes` with it; drift expects no change."""
    calls = [parse_pulumi(c.argv, PULUMI_SPEC) for c in PULUMI_CALLS if c.path.name == name]
    matching = [
        c
        for c in calls
        if c.command == command and all(f in c.flags and (v is None or c.flags[f] == v) for f, v in flags.items())
    ]
    assert matching, f"{name}: no 'pulumi {command}' with {sorted(flags)}"


def _stack_flag_values() -> list[tuple[str, str]]:
    values = []
    for call in [*GB300_CALLS, *PULUMI_CALLS]:
        argv = list(call.argv)
        for i, word in enumerate(argv[:-1]):
            if word in {"--stack", "-s"}:
                values.append((str(call), argv[i + 1]))
    return values


def _github_deploy_stacks() -> list[str]:
    return [job["with"]["stack"] for job in jobs(WORKFLOWS / "deploy.yml").values() if job.get("uses") == STACK_UP]


def _azure_stage_jobs() -> list[tuple[dict[str, Any], dict[str, Any]]]:
    pipeline = load(ROOT / "azure-pipelines.yml")
    return [(stage, job) for stage in pipeline["stages"] for job in stage.get("jobs", [])]


def _azure_matrix_stacks(job_name: str) -> list[str]:
    job = next(j for _, j in _azure_stage_jobs() if j.get("job") == job_name)
    return [leg["STACK"] for leg in job["strategy"]["matrix"].values()]


def _azure_deploy_jobs() -> list[tuple[dict[str, Any], dict[str, Any]]]:
    return [(s, j) for s, j in _azure_stage_jobs() if "deployment" in j]


def _azure_deploy_stacks() -> list[str]:
    return [job["variables"]["STACK"] for _, job in _azure_deploy_jobs()]


def test_stacks_named_by_ci_exist() -> None:
    """Every stack a CI file names literally has a stacks/Pulumi.<name>.yaml."""
    stacks = stacks_in_repo()
    named = [(where, value) for where, value in _stack_flag_values() if is_literal(value)]
    named += [("deploy.yml", s) for s in _github_deploy_stacks()]
    named += [(f"azure-pipelines.yml {j}", s) for j in ("plan", "preview", "drift") for s in _azure_matrix_stacks(j)]
    named += [("azure-pipelines.yml deploy", s) for s in _azure_deploy_stacks()]
    missing = [(where, s) for where, s in named if s not in stacks]
    assert not missing, f"stacks not in stacks/ ({sorted(stacks)}): {missing}"


def test_every_deployed_stack_is_planned_previewed_and_checked_for_drift() -> None:
    """The stacks the pipelines deploy are those deploy.yml names, each with its file; Azure DevOps plans,
    previews, deploys and checks exactly those; GitHub plans and checks for drift every stack file (a stack file
    no pipeline deploys, such as one `gb300 init` just wrote, is planned on pull requests and left alone by drift).
    A stack reaches the pipelines only when someone adds it there (docs/gitops.md#adding-a-stack-to-the-pipelines)."""
    stacks = stacks_in_repo()
    assert stacks, "no stacks/Pulumi.<name>.yaml found"
    deployed = sorted(_github_deploy_stacks())
    assert deployed, "deploy.yml deploys no stack"
    assert set(deployed) <= stacks, f"deploy.yml deploys stacks without a file in stacks/: {deployed}"
    result = subprocess.run([ROOT / "scripts" / "list-stacks"], capture_output=True, text=True, check=True)
    listed = json.loads(result.stdout)
    assert listed == sorted(stacks), "scripts/list-stacks (the GitHub PR and drift matrices)"
    for job in ("plan", "preview", "drift"):
        assert sorted(_azure_matrix_stacks(job)) == deployed, f"azure-pipelines.yml matrix of {job!r}"
    assert sorted(_azure_deploy_stacks()) == deployed, "azure-pipelines.yml: one deploy stage per deployed stack"


def _deployer_principal_type(stack: str) -> str:
    stack_file = load(ROOT / "stacks" / f"Pulumi.{stack}.yaml")
    storage = (stack_file.get("config") or {}).get("gb300:storage") or {}
    return str((storage.get("nodePayload") or {}).get("deployerPrincipalType", "User"))


def test_pipeline_deployed_stacks_grant_the_deployer_as_a_service_principal() -> None:
    """Every stack a shipped pipeline deploys sets deployerPrincipalType ServicePrincipal (or none): the pipelines
    deploy as a service principal, and Azure refuses the default User grant (UnmatchedPrincipalType)."""
    deployed = {*_github_deploy_stacks(), *_azure_deploy_stacks()}
    assert deployed
    types = {stack: _deployer_principal_type(stack) for stack in sorted(deployed)}
    wrong = {stack: t for stack, t in types.items() if t not in {"ServicePrincipal", "none"}}
    assert not wrong, f"set gb300:storage.nodePayload.deployerPrincipalType: ServicePrincipal in {wrong}"


def test_github_deploys_run_in_per_stack_environments_one_at_a_time() -> None:
    """The deploy job runs in the environment named after its stack, serialized by a per-stack group."""
    up_jobs = {
        (path.name, job_id): job
        for path in GITHUB_WORKFLOWS
        for job_id, job in jobs(path).items()
        if any(argv[1:2] == ("up",) for argv in job_runs(job, "pulumi"))
    }
    assert list(up_jobs) == [("stack-up.yml", "up")]
    job = up_jobs["stack-up.yml", "up"]
    assert job["environment"] == "${{ inputs.stack }}"
    assert "${{ inputs.stack }}" in job["concurrency"]["group"]
    assert job["concurrency"]["cancel-in-progress"] is False
    # deploy.yml orders the stacks: each later one waits for the one before.
    callers = [j for j in jobs(WORKFLOWS / "deploy.yml").values() if j.get("uses") == STACK_UP]
    assert all("needs" in j for j in callers[1:])


def test_azure_deploys_are_deployment_jobs_in_environments_with_locking() -> None:
    """Azure DevOps deploys are deployment jobs in gb300-<stack> environments, one run per stack at a time."""
    deploys = _azure_deploy_jobs()
    assert deploys
    for stage, job in deploys:
        stack = job["variables"]["STACK"]
        assert job["environment"] == f"gb300-{stack}"
        assert stage["lockBehavior"] == "sequential"
        steps = job["strategy"]["runOnce"]["deploy"]["steps"]
        parameters = [s.get("parameters") for s in steps]
        assert {"command": "up", "serviceConnection": f"gb300-deploy-{stack}"} in parameters


def test_azure_previews_and_drift_use_the_read_only_connection() -> None:
    """Azure DevOps previews and drift checks sign in read-only; previews run on main only, never for a PR."""
    by_name = {job.get("job"): (stage, job) for stage, job in _azure_stage_jobs()}
    for name, command in (("preview", "preview"), ("drift", "drift")):
        _stage, job = by_name[name]
        parameters = [s.get("parameters") for s in job["steps"]]
        assert {"command": command, "serviceConnection": "gb300-read"} in parameters
    condition = by_name["preview"][0]["condition"]
    assert "eq(variables['Build.SourceBranch'], 'refs/heads/main')" in condition
    assert "in(variables['Build.Reason'], 'IndividualCI', 'BatchedCI', 'Manual')" in condition
    assert by_name["drift"][0]["condition"] == "eq(variables['Build.Reason'], 'Schedule')"


def test_deploy_and_drift_never_run_in_forks() -> None:
    """Every deploy and drift job is guarded by the repository's own GITOPS_REPOSITORY variable."""
    for name in ("deploy.yml", "drift.yml"):
        for job_id, job in jobs(WORKFLOWS / name).items():
            assert FORK_GUARD in job.get("if", ""), f"{name}:{job_id}"
    for job_id, job in jobs(WORKFLOWS / "deploy.yml").items():
        assert "github.ref == 'refs/heads/main'" in job["if"], f"deploy.yml:{job_id} deploys only main"
    on = load(WORKFLOWS / "deploy.yml")["on"]
    assert set(on) <= {"push", "workflow_dispatch"}
    assert on["push"]["branches"] == ["main"]


def test_the_pins_job_only_writes_a_pull_request_and_never_reaches_azure() -> None:
    """The pins workflow runs `gb300 software lock` in the repository itself (not forks), may push a branch and
    open a pull request, and has no Azure identity: the pins land only through review."""
    [(job_id, job)] = jobs(WORKFLOWS / "pins.yml").items()
    assert FORK_GUARD in job["if"], job_id
    assert job["permissions"] == {"contents": "write", "pull-requests": "write"}
    assert not _reaches_azure(job)
    assert [c.argv[:3] for c in GB300_CALLS if c.path.name == "pins.yml"] == [("gb300", "software", "lock")]
    script = "\n".join(str(s.get("run", "")) for s in job["steps"])
    assert "git add infra/gb300/data/checksums.yaml" in script
    assert "gh pr create" in script
    assert "git push origin main" not in script


def _reaches_azure(job: dict[str, Any]) -> bool:
    """Signs in to Azure, runs a pulumi command other than `pulumi package get-schema` (which only asks the local
    plugin for a schema), or calls the deploy workflow."""
    uses = [str(s.get("uses", "")) for s in job.get("steps", [])]
    pulumi = [argv for argv in job_runs(job, "pulumi") if argv[1:3] != ("package", "get-schema")]
    return any(u.startswith("azure/login@") for u in uses) or bool(pulumi) or job.get("uses") == STACK_UP


AZURE_JOBS = [
    (path, job_id, job) for path in GITHUB_WORKFLOWS for job_id, job in jobs(path).items() if _reaches_azure(job)
]


@pytest.mark.parametrize(("path", "job_id", "job"), AZURE_JOBS, ids=[f"{p.name}:{j}" for p, j, _ in AZURE_JOBS])
def test_jobs_that_reach_azure_use_oidc(path: Path, job_id: str, job: dict[str, Any]) -> None:
    """Jobs that sign in to Azure may request an OIDC token; pull request ones skip forks."""
    assert job.get("permissions", {}).get("id-token") == "write"
    if path.name == "pr.yml":
        assert SAME_REPO_PR in job.get("if", "")


@pytest.mark.parametrize("path", GITHUB_WORKFLOWS, ids=_rel)
def test_workflow_token_defaults_to_read_only(path: Path) -> None:
    """Each workflow's default token can only read; jobs ask for more one permission at a time."""
    assert load(path)["permissions"] == {"contents": "read"}


def test_only_the_pulumi_token_is_a_secret() -> None:
    """No CI file reads a secret other than PULUMI_ACCESS_TOKEN (and GitHub's own token), and the payload signing
    key, which only the deploy step (`pulumi up`) gets."""
    github = {m for p in [*GITHUB_WORKFLOWS, *GITHUB_ACTIONS] for m in re.findall(r"secrets\.(\w+)", p.read_text())}
    assert github <= ALLOWED_SECRETS, github
    # Azure DevOps hands secret variables to scripts only through `env:` mappings.
    mapped = {
        m
        for p in AZURE_PIPELINES
        for env in _values_of(load(p), "env")
        for v in env.values()
        for m in re.findall(r"\$\((\w+)\)", str(v))
    }
    assert mapped <= {"PULUMI_ACCESS_TOKEN", SIGNING_KEY}, mapped
    text = "".join(p.read_text() for p in [*GITHUB_WORKFLOWS, *GITHUB_ACTIONS, *AZURE_PIPELINES])
    assert "CLIENT_SECRET" not in text


def test_the_payload_signing_key_reaches_the_deploy_step_only() -> None:
    """GitHub: only the `pulumi up` step of the deploy workflow maps the environment secret; Azure DevOps: only the
    template's `up` command (docs/gitops.md, docs/node-payload.md#signing)."""
    steps = [
        (p.name, step)
        for p in GITHUB_WORKFLOWS
        for job in (load(p).get("jobs") or {}).values()
        for step in job.get("steps", [])
        if SIGNING_KEY in str(step)
    ]
    assert [(name, step.get("name")) for name, step in steps] == [("stack-up.yml", "pulumi up with the policy pack")]
    assert all(SIGNING_KEY not in str(job.get("env", {})) for p in GITHUB_WORKFLOWS for job in load(p)["jobs"].values())
    azure = [p for p in AZURE_PIPELINES if SIGNING_KEY in p.read_text()]
    assert [p.name for p in azure] == ["pulumi.yml"]
    assert "${{ if eq(parameters.command, 'up') }}:" in azure[0].read_text()


def _values_of(node: Any, key: str) -> list[dict[str, Any]]:
    if isinstance(node, dict):
        found = [node[key]] if isinstance(node.get(key), dict) else []
        return found + [x for v in node.values() for x in _values_of(v, key)]
    if isinstance(node, list):
        return [x for v in node for x in _values_of(v, key)]
    return []


@pytest.mark.parametrize("path", [*GITHUB_WORKFLOWS, *GITHUB_ACTIONS, *AZURE_PIPELINES], ids=_rel)
def test_scripts_take_ci_values_from_the_environment(path: Path) -> None:
    """No script has a CI value spliced into its text, where a crafted stack or branch name would run."""
    family = "github" if ".github" in path.parts else "azure"
    for script in scripts(load(path), SCRIPT_KEYS[family]):
        assert "${{" not in script, script
        assert not re.search(r"\$\([A-Za-z_][\w.]*\)", script), script


CI_SCRIPTS = [
    (path, script)
    for path in [*GITHUB_WORKFLOWS, *GITHUB_ACTIONS, *AZURE_PIPELINES]
    for script in scripts(load(path), SCRIPT_KEYS["github" if ".github" in path.parts else "azure"])
]


@pytest.mark.slow
@pytest.mark.parametrize(("path", "script"), CI_SCRIPTS, ids=[f"{_rel(p)}:{i}" for i, (p, _) in enumerate(CI_SCRIPTS)])
def test_ci_script_passes_shellcheck(path: Path, script: str) -> None:
    """Every shell script in the CI files passes shellcheck (bash), as the runners run them."""
    shellcheck = str(Path(sys.executable).parent / "shellcheck")
    result = subprocess.run([shellcheck, "-s", "bash", "-"], input=script, capture_output=True, text=True, check=False)
    assert result.returncode == 0, f"{_rel(path)}:\n{script}\n{result.stdout}"


@pytest.mark.parametrize("path", [*GITHUB_WORKFLOWS, *GITHUB_ACTIONS], ids=_rel)
def test_actions_are_pinned(path: Path) -> None:
    """Every action is pinned to a full commit SHA, with the release it is in a comment (verified against the
    actions' repositories: each tag resolves to that commit)."""
    for line in path.read_text().splitlines():
        m = re.search(r"uses:\s*(\S+)(.*)$", line)
        if m is None or m.group(1).startswith("./"):
            continue
        action, _, ref = m.group(1).partition("@")
        assert re.fullmatch(r"[0-9a-f]{40}", ref), f"{_rel(path)}: {m.group(1)} is not pinned to a commit"
        assert re.fullmatch(r"\s*# v\d+\.\d+\.\d+", m.group(2)), f"{_rel(path)}: {action} names no release"


def _pr_jobs() -> dict[str, dict[str, Any]]:
    assert set(load(WORKFLOWS / "pr.yml")["on"]) == {"pull_request"}
    return jobs(WORKFLOWS / "pr.yml")


def test_pull_requests_hold_no_token_and_no_secret() -> None:
    """No workflow a pull request triggers reads a secret (the Pulumi token above all), asks for an OIDC token or
    signs in to Azure; only the comment job may write, and only to the pull request."""
    triggered = [
        p for p in GITHUB_WORKFLOWS if "pull_request" in load(p)["on"] or "pull_request_target" in load(p)["on"]
    ]
    assert [p.name for p in triggered] == ["pr.yml"]
    text = (WORKFLOWS / "pr.yml").read_text()
    assert "secrets." not in text
    assert "PULUMI_ACCESS_TOKEN" not in text
    for job_id, job in _pr_jobs().items():
        permissions = job.get("permissions", {})
        assert "id-token" not in permissions, job_id
        assert not _reaches_azure(job) or job_id == "compute-package", job_id
        writes = {k for k, v in permissions.items() if v == "write"}
        assert writes <= ({"pull-requests"} if job_id == "comment" else set()), (job_id, writes)
    compute = _pr_jobs()["compute-package"]
    assert [argv[1:3] for argv in job_runs(compute, "pulumi")] == [("package", "get-schema")]


def test_pull_requests_plan_against_the_published_deployed_state() -> None:
    """Each stack's PR plan fetches the stripped state deploy or drift published and runs `gb300 plan --state` on it,
    with a token that can only read; the summary that feeds the comment reads that plan."""
    job = _pr_jobs()["plan"]
    assert job["permissions"] == {"contents": "read", "actions": "read"}
    script = "\n".join(job_scripts(job))
    assert 'scripts/fetch-state "$STACK" state' in script
    plans = [argv for argv in job_runs(job, "gb300") if argv[1:2] == ("plan",)]
    assert any("--state" in argv and "state/$STACK.json" in argv for argv in plans), plans
    fetch = (ROOT / "scripts" / "fetch-state").read_text()
    published = set(re.findall(r'"(\.github/workflows/[\w-]+\.yml)"', fetch))
    assert published == {".github/workflows/deploy.yml", ".github/workflows/drift.yml"}
    assert all((ROOT / p).is_file() for p in published)


PUBLISHERS = [("stack-up.yml", "up", "${{ inputs.stack }}"), ("drift.yml", "drift", "${{ matrix.stack }}")]


@pytest.mark.parametrize(("name", "job_id", "stack"), PUBLISHERS, ids=[p[0] for p in PUBLISHERS])
def test_deploy_and_drift_publish_only_the_stripped_state(name: str, job_id: str, stack: str) -> None:
    """After `pulumi up` and each drift check, the export goes through `gb300 strip-state`, and the artifact
    `state-<stack>` that pull requests read holds the stripped copy only."""
    job = jobs(WORKFLOWS / name)[job_id]
    strips = [argv for argv in job_runs(job, "gb300") if argv[1:2] == ("strip-state",)]
    assert len(strips) == 1
    out = strips[0][strips[0].index("--out") + 1]
    assert out == "state-stripped/$STACK.json"
    uploads = [s["with"] for s in job["steps"] if str(s.get("uses", "")).startswith("actions/upload-artifact@")]
    state = [u for u in uploads if str(u["name"]).startswith("state-")]
    assert state == [{**state[0], "name": f"state-{stack}", "path": f"state-stripped/{stack}.json"}]
    assert all(not str(u["path"]).startswith("state-full") and "RUNNER_TEMP" not in str(u["path"]) for u in uploads)


def test_azure_pull_request_builds_name_no_variable_group_and_no_connection() -> None:
    """The stage that runs for pull requests names neither the variable group (PULUMI_ACCESS_TOKEN) nor a service
    connection, and plans against the stripped state the main runs publish; every stage that names them runs on
    main only (their Branch control checks, docs/gitops.md, hold even against an edited pipeline file)."""
    pipeline = load(ROOT / "azure-pipelines.yml")
    assert all("group" not in v for v in pipeline["variables"])
    for stage in pipeline["stages"]:
        names_group = any("group" in v for v in stage.get("variables", []))
        text = json.dumps(stage)
        if stage["stage"] == "validate":
            assert not names_group
            assert "serviceConnection" not in text
            assert "$(PULUMI_ACCESS_TOKEN)" not in text
            continue
        assert names_group, stage["stage"]
        condition = stage["condition"]
        assert "refs/heads/main" in condition or condition == "eq(variables['Build.Reason'], 'Schedule')"
    plan = next(j for _, j in _azure_stage_jobs() if j.get("job") == "plan")
    download = next(s for s in plan["steps"] if s.get("task") == "DownloadPipelineArtifact@2")
    assert download["inputs"]["branchName"] == "refs/heads/main"
    assert download["inputs"]["artifactName"] == "state-$(STACK)"
    template = (ROOT / ".azure-pipelines" / "pulumi.yml").read_text()
    assert (
        'gb300 strip-state "$AGENT_TEMPDIRECTORY/state-full.json" --out "$AGENT_TEMPDIRECTORY/state/$STACK.json"'
        in (template)
    )
    assert "targetPath: $(Agent.TempDirectory)/state\n      artifact: state-$(STACK)" in template


def test_gitops_doc_sets_branch_control_on_every_connection_and_the_variable_group() -> None:
    """docs/gitops.md tells how to put Branch control (main only) on each service connection the pipeline names and
    on the variable group, since a pull request may edit the pipeline file."""
    doc = (ROOT / "docs" / "gitops.md").read_text()
    section = doc.split("### 5. Azure DevOps settings", 1)[1].split("\n## ", 1)[0]
    assert "Branch control" in section
    pipeline_text = "".join(p.read_text() for p in AZURE_PIPELINES)
    connections = set(re.findall(r"serviceConnection: (gb300-[\w-]+)", pipeline_text))
    assert connections == {"gb300-read", "gb300-deploy-dev", "gb300-deploy-reference"}
    for name in [*connections, "gb300"]:
        assert f"`{name}`" in section, name
    assert "refs/heads/main" in section


def test_make_targets_called_by_ci_exist() -> None:
    """Every `make <target>` in CI is a target of the Makefile."""
    targets = set(re.findall(r"^([\w-]+):", (ROOT / "Makefile").read_text(), re.MULTILINE))
    called = {argv[1] for call in invocations("make") for argv in [call.argv] if len(argv) > 1}
    assert called
    assert called <= targets, called - targets


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        ('pulumi up --stack "$STACK" --yes', [["pulumi", "up", "--stack", "$STACK", "--yes"]]),
        ("a --x \\\n  --y 2>&1 | tee out.txt", [["a", "--x", "--y"], ["tee", "out.txt"]]),
        (
            "if ! pulumi stack select -s dev; then\n  exit 0\nfi",
            [["pulumi", "stack", "select", "-s", "dev"], ["exit", "0"]],
        ),
        (
            "X=$(az account show --query id)\nexport X",
            [["az", "account", "show", "--query", "id"], ["export", "X"]],
        ),
        (
            "case $C in\n  up)\n    gb300 plan ;;\nesac",
            [["case", "$C", "in"], ["up"], ["gb300", "plan"], ["esac"]],
        ),
        ("echo ${{ matrix.stack }} > $(Build.X)/f", [["echo", "__CI_VALUE__"]]),
    ],
    ids=["plain", "continuation-redirect-pipe", "if-not", "substitution", "case", "placeholders"],
)
def test_command_extraction(script: str, expected: list[list[str]]) -> None:
    """The script reader splits shell text into the simple commands a shell would run."""
    assert commands(script) == expected


def test_deploy_identity_condition_covers_every_role_the_stack_assigns() -> None:
    """The role-assignment condition in docs/gitops.md allows each role id in data/roles.yaml."""
    roles_file = ROOT / "infra" / "gb300" / "data" / "roles.yaml"
    wanted = set(yaml.safe_load(roles_file.read_text(encoding="utf-8"))["roles"].values())
    line = re.search(r'^roles="([^"]*)"$', (ROOT / "docs" / "gitops.md").read_text(), re.MULTILINE)
    assert line, 'docs/gitops.md: no roles="..." line'
    assert set(re.findall(r"[0-9a-f-]{36}", line.group(1))) == wanted


# The Pulumi token only on main (docs/gitops.md, "Where the Pulumi token lives").
PULUMI_TOKEN = "PULUMI_ACCESS_TOKEN"  # noqa: S105 - the secret's name, not a secret
_INPUT = re.compile(r"\$\{\{\s*inputs\.([\w-]+)\s*\}\}")


def _main_only_environments() -> set[str]:
    """The GitHub environments docs/gitops.md lists with deployment branches `main` only."""
    text = (ROOT / "docs" / "gitops.md").read_text(encoding="utf-8")
    return set(re.findall(r"^ *\| `([\w-]+)` \| `main` only \|", text, re.MULTILINE))


def _token_leaks(workflows: dict[str, dict[str, Any]], main_only: set[str]) -> list[str]:
    """Where a workflow hands PULUMI_ACCESS_TOKEN to something outside a main-only environment.

    ``workflows`` maps a workflow's path (``./.github/workflows/x.yml``) to its loaded document. A job that names the
    token anywhere (env, with, secrets, run) must run in an environment of ``main_only``; an environment given as
    ``${{ inputs.<name> }}`` is every value the callers of that reusable workflow pass. A job calling a reusable
    workflow cannot name an environment, so passing the token there (or ``secrets: inherit``) is a leak, as is a
    workflow-level ``env`` that carries it.
    """
    leaks = []
    for path, doc in workflows.items():
        if PULUMI_TOKEN in str(doc.get("env", {})):
            leaks.append(f"{path}: workflow-level env")
        for job_id, job in (doc.get("jobs") or {}).items():
            if "uses" in job:
                if job.get("secrets") == "inherit" or PULUMI_TOKEN in str(job.get("secrets", {})):
                    leaks.append(f"{path} {job_id}: passes the token to {job['uses']}")
                continue
            if PULUMI_TOKEN not in str(job):
                continue
            env = job.get("environment")
            name = str(env.get("name") if isinstance(env, dict) else env or "")
            found = _INPUT.fullmatch(name)
            names = (
                {
                    str(caller.get("with", {}).get(found[1]))
                    for other in workflows.values()
                    for caller in (other.get("jobs") or {}).values()
                    if caller.get("uses") == path
                }
                if found
                else ({name} if name else set())
            )
            outside = sorted(names - main_only) if names else ["(no environment)"]
            if outside:
                leaks.append(f"{path} {job_id}: environment {', '.join(outside)}")
    return leaks


def _workflows() -> dict[str, dict[str, Any]]:
    return {f"./{_rel(p)}": load(p) for p in GITHUB_WORKFLOWS}


def test_token_check_catches_each_way_of_handing_out_the_token() -> None:
    """The check below fails a job without an environment, one in an environment the docs do not list as main-only,
    a workflow-level env, a reusable call passing the token or inheriting secrets, and a caller's unlisted stack."""
    token = "${{ secrets.PULUMI_ACCESS_TOKEN }}"  # noqa: S105 - an expression naming it
    run = {"steps": [{"run": "pulumi preview"}]}
    bad = {
        "./a.yml": {"env": {PULUMI_TOKEN: token}, "jobs": {}},
        "./b.yml": {"jobs": {"plain": {**run, "env": {PULUMI_TOKEN: token}}}},
        "./c.yml": {"jobs": {"staging": {**run, "environment": "staging", "env": {PULUMI_TOKEN: token}}}},
        "./d.yml": {"jobs": {"call": {"uses": "./e.yml", "secrets": {PULUMI_TOKEN: token}, "with": {"stack": "dev"}}}},
        "./e.yml": {"jobs": {"up": {**run, "environment": "${{ inputs.stack }}", "env": {PULUMI_TOKEN: token}}}},
        "./f.yml": {"jobs": {"call": {"uses": "./e.yml", "secrets": "inherit", "with": {"stack": "feature"}}}},
        "./g.yml": {"jobs": {"step": {"steps": [{"run": f"PULUMI_ACCESS_TOKEN={token} pulumi up"}]}}},
    }
    leaks = _token_leaks(bad, {"dev", "pulumi-read"})
    assert leaks == [
        "./a.yml: workflow-level env",
        "./b.yml plain: environment (no environment)",
        "./c.yml staging: environment staging",
        "./d.yml call: passes the token to ./e.yml",
        "./e.yml up: environment feature",
        "./f.yml call: passes the token to ./e.yml",
        "./g.yml step: environment (no environment)",
    ]


def test_the_pulumi_token_is_read_only_in_main_only_environments() -> None:
    """Every job that reads PULUMI_ACCESS_TOKEN runs in an environment docs/gitops.md lists as main-only, no workflow
    carries it in its own env, and no reusable-workflow call passes it (GitHub gives environment secrets only to a
    job in that environment, and the environment's branch policy keeps other branches out)."""
    main_only = _main_only_environments()
    assert {"pulumi-read", *_github_deploy_stacks()} <= main_only, main_only
    workflows = _workflows()
    assert not _token_leaks(workflows, main_only)
    readers = sorted(
        (path, job_id)
        for path, doc in workflows.items()
        for job_id, job in doc["jobs"].items()
        if "uses" not in job and PULUMI_TOKEN in str(job)
    )
    assert readers == [
        ("./.github/workflows/drift.yml", "drift"),
        ("./.github/workflows/stack-up.yml", "preview"),
        ("./.github/workflows/stack-up.yml", "up"),
    ]
    assert all(PULUMI_TOKEN not in p.read_text() for p in GITHUB_ACTIONS)


def test_gitops_doc_says_the_pulumi_token_is_an_environment_secret() -> None:
    """The setup steps put PULUMI_ACCESS_TOKEN in each main-only environment, never in the repository's secrets."""
    text = (ROOT / "docs" / "gitops.md").read_text(encoding="utf-8")
    assert "**Secret**: `PULUMI_ACCESS_TOKEN`" not in text
    assert "never a repository secret" in text
    for name in _main_only_environments():
        assert f"`{name}`" in text


def test_azure_schedule_that_reads_the_token_runs_on_main_only() -> None:
    """The drift stage reads the variable group on the schedule alone, and every schedule builds main only, so the
    Azure DevOps token (variable group `gb300`, with its Branch control check) stays on main as on GitHub."""
    pipeline = load(ROOT / "azure-pipelines.yml")
    assert [s["branches"] for s in pipeline["schedules"]] == [{"include": ["main"]}]
    scheduled = [s for s in pipeline["stages"] if "'Schedule'" in s.get("condition", "")]
    for stage in scheduled:
        if any("group" in v for v in stage.get("variables", [])):
            assert stage["condition"] == "eq(variables['Build.Reason'], 'Schedule')", stage["stage"]
