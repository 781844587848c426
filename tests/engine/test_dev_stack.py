"""The dev stack's life through the real Pulumi engine (the CLI built from source) and gb300's own program, with the
azure-native double as Azure: init and config from the stack file, ``pulumi preview --json`` with the policy pack (and
a violation that stops it with the finding ``gb300 plan`` prints), ``pulumi up`` as the deploy workflow runs it, a
second ``up`` that changes nothing, the drift workflow's ``preview --refresh --expect-no-changes`` with and without
drift, drift and a deletion staged in the double and read by ``pulumi refresh``, a change that replaces the rack,
``pulumi stack export`` read by ``gb300 strip-state`` and the pull request's ``gb300 plan --state``, and ``pulumi
destroy`` refused by protection.

The tests share one stack (module scope) and run in file order: each leaves the stack as the next expects.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gb300 import cli
from gb300.components import compute_package
from gb300.node import manifest
from gb300.plan import run_plan
from tests.support import ci_files, engine_stack
from tests.support.engine_stack import SUBSCRIPTION, EngineStack

pytestmark = pytest.mark.slow
STACK = "dev"
WORKFLOWS = ci_files.ROOT / ".github" / "workflows"
RACK = "dev-train-r0001"
G5 = "Standard_ND128isrG5_GB300_v6"  # another GB300 size of the catalog: a new rack, never a resize


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EngineStack]:
    made = engine_stack.open_stack(tmp_path_factory.mktemp("dev-stack"), STACK)
    yield made
    made.close()


def _ciphertexts(value: Any) -> list[str]:
    """Every secret's ciphertext in a ``pulumi stack export``."""
    if isinstance(value, dict):
        own = [value["ciphertext"]] if isinstance(value.get("ciphertext"), str) else []
        return own + [c for v in value.values() for c in _ciphertexts(v)]
    if isinstance(value, list):
        return [c for v in value for c in _ciphertexts(v)]
    return []


def test_the_stack_files_settings_reach_the_stack(dev: EngineStack) -> None:
    """``pulumi config set-all`` of the stack file's settings gives back, through ``pulumi config --json``, every
    gb300 key with the stack file's values."""
    proc = dev.pulumi("config", "--json")
    assert proc.returncode == 0, dev.output(proc)
    shown = json.loads(proc.stdout)
    for key, value in dev.raw.items():
        entry = shown[f"gb300:{key}"]
        assert entry.get("objectValue", entry.get("value")) == value, key


def test_preview_with_the_policy_pack_registers_what_the_plan_registers(dev: EngineStack) -> None:
    """``pulumi preview --json --policy-pack policies`` passes and plans to create exactly the resources ``gb300
    plan`` registers for the same settings."""
    proc = dev.pulumi("preview", "--json", "--policy-pack", "policies")
    assert proc.returncode == 0, dev.output(proc)
    steps = engine_stack.preview_steps(proc)
    assert engine_stack.declared(set(steps)) == {r.urn for r in dev.plan.resources}
    assert {op for urn in engine_stack.declared(set(steps)) for op in steps[urn]} == {"create"}


def test_a_policy_violation_stops_preview_with_the_plans_finding(dev: EngineStack) -> None:
    """An address space over Azure's RDMA range stops ``pulumi preview`` with the policy pack, with the message
    ``gb300 plan`` prints for the same settings."""
    raw = copy.deepcopy(dev.raw)
    raw["network"]["addressSpace"] = "172.16.0.0/16"
    [finding] = [f for f in run_plan(STACK, raw).findings if f.rule == "vnet-avoids-rdma-range"]
    dev.pulumi("config", "set", "--path", "gb300:network.addressSpace", "172.16.0.0/16")
    try:
        proc = dev.pulumi("preview", "--policy-pack", "policies")
    finally:
        dev.pulumi("config", "set", "--path", "gb300:network.addressSpace", dev.raw["network"]["addressSpace"])
    assert proc.returncode != 0
    assert "vnet-avoids-rdma-range" in proc.stdout + proc.stderr
    assert " ".join(finding.message.split()) in " ".join((proc.stdout + proc.stderr).split())


def test_a_bad_config_stops_preview_with_the_key_path_and_no_traceback(dev: EngineStack) -> None:
    """A rack count of 0 fails ``pulumi preview`` with the line naming ``gb300:gpuPools[0].racks``, no traceback,
    and nothing created."""
    dev.pulumi("config", "set", "--path", "gb300:gpuPools[0].racks", "0")
    try:
        proc = dev.pulumi("preview")
    finally:
        dev.pulumi("config", "set", "--path", "gb300:gpuPools[0].racks", str(dev.raw["gpuPools"][0]["racks"]))
    said = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "invalid stack configuration:" in said
    assert "gb300:gpuPools[0].racks: must be at least 1 (got 0)" in said
    assert "Traceback" not in said
    assert dev.ledger.resources() == {}


def _workflow_runs(workflow: str, job: str, command: str) -> list[list[str]]:
    """The ``pulumi`` command lines of a GitHub job whose subcommand is ``command`` or ``stack``, read from the
    workflow file, with the job's variables (``$STACK``, ``$GITHUB_SHA``) given this stack's values."""
    runs = ci_files.job_runs(ci_files.jobs(WORKFLOWS / workflow)[job], "pulumi")
    values = {"$STACK": STACK, "$GITHUB_SHA": "0123abcd", "$RUNNER_TEMP": "."}
    picked = []
    for argv in runs:
        if argv[1] in (command, "stack") and argv[1:3] != ("stack", "export"):
            words = list(argv)
            for name, value in values.items():
                words = [w.replace(name, value) for w in words]
            picked.append(words)
    assert [w[1] for w in picked][-1] == command, runs  # the job's own command is there, after its stack select
    return picked


def _run_workflow(dev: EngineStack, runs: list[list[str]]) -> list[Any]:
    """Each command line as the job runs it, in the copy, through the test's engine; every result."""
    return [dev.engine.run(words[1:], cwd=dev.copy, env=dev.env) for words in runs]


def test_up_deploys_the_stack_into_the_double(dev: EngineStack) -> None:
    """The deploy workflow's ``pulumi up`` (stack-up.yml's up job, read from the file: the policy pack, --diff,
    --suppress-outputs, --parallel 64, --non-interactive) creates every azure-native resource the plan declares in
    the double, under the stack's subscription (the racks' parameterized provider gets it too), and the upload
    publishes every payload to the account."""
    done = _run_workflow(dev, _workflow_runs("stack-up.yml", "up", "up"))
    assert [p.returncode for p in done] == [0] * len(done), dev.output(done[-1])
    assert "--policy-pack" in dev.engine.log[-1]
    recorded = dev.ledger.resources()
    declared = [r for r in dev.plan.resources if r.type.startswith("azure-native") and r.id is not None]
    assert len(recorded) == len(declared)
    assert all(i.startswith(f"/subscriptions/{SUBSCRIPTION}/") for i in recorded)
    rack_id, rack = dev.ledger.find(f"::{RACK}")
    assert rack_id == (
        f"/subscriptions/{SUBSCRIPTION}/resourceGroups/dev-rg/providers/Microsoft.Compute/virtualMachineScaleSets/{RACK}"
    )
    assert rack["type"] == compute_package.SCALE_SET_TOKEN
    blobs = dev.account.blobs(dev.container)
    for role in ("head", "gpu-train"):
        assert manifest.manifest_blob(role) in blobs, sorted(blobs)


def test_a_second_up_changes_nothing(dev: EngineStack) -> None:
    """Run again with nothing changed, ``pulumi up --expect-no-changes`` succeeds and the double sees no write."""
    before = len([c for c in dev.ledger.calls() if c["method"] in ("Create", "Update", "Delete")])
    proc = dev.pulumi("up", "--yes", "--expect-no-changes")
    assert proc.returncode == 0, dev.output(proc)
    after = len([c for c in dev.ledger.calls() if c["method"] in ("Create", "Update", "Delete")])
    assert after == before


def test_the_drift_job_passes_without_drift_and_fails_with_it(dev: EngineStack) -> None:
    """drift.yml's ``pulumi preview --refresh --expect-no-changes`` (read from the workflow) exits 0 on the stack as
    deployed, and non-zero once a tag is changed in Azure by hand, naming the resource; a preview writes no state,
    so taking the change back leaves the stack clean again."""
    runs = _workflow_runs("drift.yml", "drift", "preview")
    assert "--refresh" in runs[-1]
    assert "--expect-no-changes" in runs[-1]
    clean = _run_workflow(dev, runs)
    assert [p.returncode for p in clean] == [0] * len(clean), dev.output(clean[-1])
    rg_id, rg = dev.ledger.find("::dev-rg")
    drifted = copy.deepcopy(rg)
    drifted["outputs"]["tags"] = {**rg["outputs"]["tags"], "owner": "someone-by-hand"}
    dev.ledger.put(rg_id, drifted)
    try:
        drift = _run_workflow(dev, runs)[-1]
    finally:
        dev.ledger.put(rg_id, rg)
    assert drift.returncode != 0
    assert "no changes were expected" in (drift.stdout + drift.stderr).lower(), dev.output(drift)
    assert "dev-rg" in drift.stdout + drift.stderr
    assert _run_workflow(dev, runs)[-1].returncode == 0


def test_refresh_reads_drift_and_a_deletion_staged_in_azure(dev: EngineStack) -> None:
    """A tag changed and a security group deleted outside Pulumi are read by ``pulumi refresh``; the next ``up``
    puts the tag back and makes the group again."""
    rg_id, rg = dev.ledger.find("::dev-rg")
    rg["outputs"]["tags"] = {**rg["outputs"]["tags"], "env": "changed-by-hand"}
    dev.ledger.put(rg_id, rg)
    nsg_id, nsg = next((k, v) for k, v in dev.ledger.resources().items() if v["type"].endswith("NetworkSecurityGroup"))
    dev.ledger.remove(nsg_id)
    proc = dev.pulumi("refresh", "--yes")
    assert proc.returncode == 0, dev.output(proc)
    state = {r["urn"]: r for r in dev.export()["deployment"]["resources"]}
    rg_urn = dev.ledger.find("::dev-rg")[1]["urn"]
    assert state[rg_urn]["outputs"]["tags"]["env"] == "changed-by-hand"
    assert not any(r.get("id") == nsg_id for r in state.values())
    preview = dev.pulumi("preview", "--json")
    steps = engine_stack.preview_steps(preview)
    assert steps[rg_urn] == {"update"}
    assert steps[nsg["urn"]] == {"create"}
    proc = dev.pulumi("up", "--yes")
    assert proc.returncode == 0, dev.output(proc)
    assert dev.ledger.find("::dev-rg")[1]["outputs"]["tags"]["env"] == "dev"
    assert dev.ledger.get(nsg_id) is not None


def test_a_new_vm_size_replaces_the_rack(dev: EngineStack) -> None:
    """Another GB300 size for the pool replaces its rack, deleting the old scale set first (same name), and no other
    Azure resource but the rack's own logs association, which names the rack's id (unknown until the new one
    exists)."""
    dev.pulumi("config", "set", "--path", "gb300:gpuPools[0].vmSize", G5)
    preview = dev.pulumi("preview", "--json")
    assert preview.returncode == 0, dev.output(preview)
    replaced = {
        urn.rsplit("::", 1)[-1]
        for urn, ops in engine_stack.preview_steps(preview).items()
        if ops & {"replace", "create-replacement", "delete-replaced"} and "azure-native" in urn
    }
    assert replaced == {RACK, f"{RACK}-logs"}
    proc = dev.pulumi("up", "--yes")
    assert proc.returncode == 0, dev.output(proc)
    assert dev.ledger.find(f"::{RACK}")[1]["inputs"]["sku"]["name"] == G5
    writes = [(c["method"]) for c in dev.ledger.calls() if c.get("urn", "").endswith(f"::{RACK}")]
    assert writes[-2:] == ["Delete", "Create"]


def test_the_export_is_read_by_strip_state_and_the_pr_plan(dev: EngineStack, tmp_path: Path) -> None:
    """``pulumi stack export`` of the deployed stack goes through ``gb300 strip-state`` (no secret left) and the pull
    request's ``gb300 plan --state``, which passes and sees nothing to add, replace or destroy: the storage accounts
    it names are the ones deployed in the stack's subscription."""
    exported = tmp_path / "state-full.json"
    proc = dev.pulumi("stack", "export", "--file", str(exported))
    assert proc.returncode == 0, dev.output(proc)
    stripped = tmp_path / "state.json"
    assert cli.main(["strip-state", str(exported), "--out", str(stripped)]) == 0
    secrets = _ciphertexts(json.loads(exported.read_text(encoding="utf-8")))
    assert secrets  # the munge key's bytes at least: a strip of nothing would pass by accident
    assert not any(c in stripped.read_text(encoding="utf-8") for c in secrets)
    plan_json = tmp_path / "plan.json"
    stack_file = dev.copy / "stacks" / f"Pulumi.{STACK}.yaml"
    code = cli.main(
        ["plan", "--stack-file", str(stack_file), "--state", str(stripped), "--json", str(plan_json), "--quiet"]
    )
    doc: dict[str, Any] = json.loads(plan_json.read_text(encoding="utf-8"))
    assert [f["message"] for f in doc["findings"] if f["level"] == "error"] == []
    assert code == 0
    summary = doc["summary"]
    assert (summary["adds"]["resources"], summary["replacesVms"]) == (0, [])
    assert (summary["changes"]["adds"], summary["changes"]["destroys"]) == ([], [])


def test_destroy_is_refused_by_protection(dev: EngineStack) -> None:
    """``pulumi destroy`` stops at the protected state disk of the head, which stays in Azure."""
    proc = dev.pulumi("destroy", "--yes")
    assert proc.returncode != 0
    assert "protected" in proc.stdout + proc.stderr
    assert dev.ledger.find("::dev-head-state")[0]
