"""`gb300 migrate-racks`: gb300 0.1's dynamic racks moved onto the compute package, in files, offline."""

from __future__ import annotations

import base64
import copy
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gb300 import cli
from gb300.components import compute_package
from gb300.components.gpu_pool import RACK_TYPE
from gb300.plan.mocks import SUBSCRIPTION_ID
from gb300.plan.runner import register
from gb300.resources import ResourceRecord

REAL_SUBSCRIPTION = "5f1c7a2e-3b4d-4e6f-8a9b-0c1d2e3f4a5b"
LEGACY = "pulumi-python:dynamic:Resource"
POOL_TYPE = "gb300:compute:GpuPool"
PROVIDER = f"pulumi:providers:{compute_package.PACKAGE_NAME}"  # gb300 0.1 had no explicit provider
SHELLCHECK = str(Path(sys.executable).parent / "shellcheck")
ARM_TOP = ("location", "zones", "sku", "identity", "tags")  # gb300 0.1's ARM body keys outside ``properties``


def _real(value: Any, subscription: str = REAL_SUBSCRIPTION) -> Any:
    """A planned value as Azure would hold it: the deployed subscription instead of the mock one."""
    return json.loads(json.dumps(value).replace(SUBSCRIPTION_ID, subscription))


def _entry(record: ResourceRecord, subscription: str) -> dict[str, Any]:
    """A planned resource as ``pulumi stack export`` writes it once deployed."""
    out: dict[str, Any] = {"urn": record.urn, "type": record.type, "inputs": _real(record.inputs, subscription)}
    if record.id:
        out["id"] = _real(record.id, subscription)
    if record.parent:
        out["parent"] = record.parent
    return out


def legacy_urn(record: ResourceRecord, pool_urn: str) -> str:
    """The URN gb300 0.1 gave the rack: a dynamic resource, child of its GpuPool."""
    stack_project, _, _ = pool_urn.rpartition("::")
    return f"{stack_project}$pulumi-python:dynamic:Resource::{record.name}"


def legacy_entry(record: ResourceRecord, pool_urn: str, subscription: str) -> dict[str, Any]:
    """One rack scale set as gb300 0.1 deployed it: the dynamic resource with the ARM body under ``properties``."""
    inputs = _real(record.inputs, subscription)
    return {
        "urn": legacy_urn(record, pool_urn),
        "type": LEGACY,
        "id": _real(record.id, subscription),
        "parent": pool_urn,
        "inputs": {
            "gb300Kind": "rack-scale-set",
            "resourceType": "Microsoft.Compute/virtualMachineScaleSets",
            "apiVersion": "2025-04-01",
            "subscriptionId": subscription,
            "resourceGroupName": inputs.pop("resourceGroupName"),
            "resourceName": inputs.pop("vmScaleSetName"),
            **{k: inputs.pop(k) for k in ARM_TOP if k in inputs},
            "properties": inputs,
        },
    }


def legacy_state(
    resources: list[ResourceRecord], *, keep_new_racks: bool = False, subscription: str = REAL_SUBSCRIPTION
) -> dict[str, Any]:
    """The reference stack as gb300 0.1 left it: every rack a dynamic resource under its pool, no package provider
    (with the new racks and provider too when ``keep_new_racks``: a migration imported but not finished); each
    logs association depends on its rack."""
    by_urn = {r.urn: r for r in resources}
    entries, legacy_of = [], {}
    for r in resources:
        if r.type == compute_package.SCALE_SET_TOKEN and r.parent in by_urn and by_urn[r.parent].type == RACK_TYPE:
            pool_urn = str(by_urn[r.parent].parent)
            entries.append(legacy_entry(r, pool_urn, subscription))
            legacy_of[r.parent] = legacy_urn(r, pool_urn)
    for r in resources:
        if r.parent in legacy_of and r.type != compute_package.SCALE_SET_TOKEN and not keep_new_racks:
            entry = _entry(r, subscription)  # the logs association: in 0.1 it took the dynamic rack's id
            entry["dependencies"] = [legacy_of[r.parent]]
            entry["propertyDependencies"] = {"resourceUri": [legacy_of[r.parent]]}
            del entry["parent"]
            entries.append(entry)
        elif keep_new_racks or (r.type not in (RACK_TYPE, PROVIDER) and r.parent not in legacy_of):
            entries.append(_entry(r, subscription))
    return {"version": 3, "deployment": {"resources": entries}}


def migrated_state(resources: list[ResourceRecord], subscription: str = REAL_SUBSCRIPTION) -> dict[str, Any]:
    """The state after commands.sh: the plan's resources with their Azure ids, and no legacy entry."""
    return {"version": 3, "deployment": {"resources": [_entry(r, subscription) for r in resources]}}


@pytest.fixture(scope="module")
def planned(reference_raw: dict[str, Any]) -> list[ResourceRecord]:
    """The reference stack's registrations."""
    return register("reference", copy.deepcopy(reference_raw))


@pytest.fixture(scope="module")
def migration(planned: list[ResourceRecord], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """`gb300 migrate-racks` run once on the reference stack's legacy state: its exit code, output and files."""
    tmp = tmp_path_factory.mktemp("migrate")
    state = tmp / "before.json"
    state.write_text(json.dumps(legacy_state(planned)), encoding="utf-8")
    out = tmp / "migrate"
    code = cli.main(["migrate-racks", "--stack", "reference", "--state", str(state), "--out", str(out)])
    return {
        "code": code,
        "out": out,
        "import": json.loads((out / "import.json").read_text(encoding="utf-8")),
        "commands": (out / "commands.sh").read_text(encoding="utf-8"),
        "legacy": [r["urn"] for r in legacy_state(planned)["deployment"]["resources"] if r["type"] == LEGACY],
    }


def test_import_file_has_a_component_and_a_scale_set_per_rack(migration: dict[str, Any]) -> None:
    """import.json names the 64 rack components and, under each, its rack's deployed scale set."""
    assert migration["code"] == 0
    resources = migration["import"]["resources"]
    racks = [r for r in resources if r["type"] == RACK_TYPE]
    scale_sets = [r for r in resources if r["type"] == compute_package.SCALE_SET_TOKEN]
    assert len(racks) == 64
    assert len(scale_sets) == 64
    assert all(r["component"] is True and "id" not in r for r in racks)
    entries = {r["name"]: r for r in racks}
    for vmss in scale_sets:
        rack = entries[vmss["parent"]]
        assert rack["logicalName"] == vmss["logicalName"] == vmss["name"]
        assert rack["parent"] in migration["import"]["nameTable"]
        assert vmss["id"] == (
            f"/subscriptions/{REAL_SUBSCRIPTION}/resourceGroups/ref-rg/providers/Microsoft.Compute/"
            f"virtualMachineScaleSets/{vmss['name']}"
        )
        assert vmss["version"] == compute_package.PACKAGE_VERSION
        assert vmss["provider"] == "ref-compute"


def test_import_file_creates_the_package_provider_the_racks_name(migration: dict[str, Any]) -> None:
    """The package's explicit provider, not yet in a gb300 0.1 state, comes first in import.json: no id, the
    package's version and parameterization, its planned configuration as inputs."""
    first = migration["import"]["resources"][0]
    assert first["type"] == f"pulumi:providers:{compute_package.PACKAGE_NAME}"
    assert first["name"] == first["logicalName"] == "ref-compute"
    assert "id" not in first
    assert first["version"] == compute_package.PACKAGE_VERSION
    assert first["parameterization"]["value"] == compute_package.BASE64_PARAMETER
    assert [r for r in migration["import"]["resources"] if r["type"].startswith("pulumi:providers:")] == [first]


def test_a_deployed_provider_is_named_not_created(planned: list[ResourceRecord], tmp_path: Path) -> None:
    """When the state already holds the package's provider, the nameTable names it and the import creates none."""
    doc = legacy_state(planned)
    provider = next(r for r in planned if r.type.startswith("pulumi:providers:"))
    doc["deployment"]["resources"].append({"urn": provider.urn, "type": provider.type, "id": "0b1c", "inputs": {}})
    state = tmp_path / "before.json"
    state.write_text(json.dumps(doc), encoding="utf-8")
    out = tmp_path / "m"
    assert cli.main(["migrate-racks", "--stack", "reference", "--state", str(state), "--out", str(out)]) == 0
    written = json.loads((out / "import.json").read_text(encoding="utf-8"))
    assert written["nameTable"]["ref-compute"] == provider.urn
    assert not [r for r in written["resources"] if r["type"].startswith("pulumi:providers:")]


def test_name_table_names_the_deployed_pools(migration: dict[str, Any]) -> None:
    """The nameTable maps each rack's parent to the GpuPool URN already in the state."""
    assert migration["import"]["nameTable"] == {
        "ref-train": "urn:pulumi:reference::gb300::gb300:compute:GpuPool::ref-train"
    }


def test_parameterization_decodes_to_the_compute_module(migration: dict[str, Any]) -> None:
    """Each scale set's parameterization is azure-native's plugin with the compute 2026-03-01 parameter bytes."""
    for vmss in migration["import"]["resources"]:
        if vmss["type"] != compute_package.SCALE_SET_TOKEN:
            continue
        param = vmss["parameterization"]
        assert (param["pluginName"], param["pluginVersion"]) == ("azure-native", compute_package.BASE_PROVIDER_VERSION)
        assert json.loads(base64.b64decode(base64.b64decode(param["value"]))) == {
            "module": "compute",
            "version": "v20260301",
        }


def test_inputs_are_the_plan_in_the_deployed_subscription(
    migration: dict[str, Any], reference_raw: dict[str, Any]
) -> None:
    """Each scale set's inputs are what the program registers in the subscription the state's racks live in: its
    custom data names that subscription's storage accounts (their names hash the subscription), never the mocks'."""
    deployed = register("reference", copy.deepcopy(reference_raw), subscription=REAL_SUBSCRIPTION)
    by_name = {r.name: r for r in deployed if r.type == compute_package.SCALE_SET_TOKEN}
    mock = {r.name: r for r in register("reference", copy.deepcopy(reference_raw))}
    differs = False
    for vmss in migration["import"]["resources"]:
        if vmss["type"] != compute_package.SCALE_SET_TOKEN:
            continue
        inputs = vmss["inputs"]
        assert SUBSCRIPTION_ID not in json.dumps(inputs)
        assert REAL_SUBSCRIPTION in inputs["identity"]["userAssignedIdentities"][0]
        assert inputs == {k: v for k, v in by_name[vmss["name"]].inputs.items() if v is not None}
        differs |= inputs != _real(mock[vmss["name"]].inputs)
    assert differs  # the mocks' subscription gives other custom data: planning there imported the wrong one


def test_commands_pass_shellcheck_and_delete_each_legacy_entry(migration: dict[str, Any]) -> None:
    """commands.sh is strict bash that shellcheck passes, keeps the state, imports, deletes each legacy URN once,
    then previews as JSON for the check beside it (no --expect-no-changes: every imported rack shows an update)."""
    script = migration["commands"]
    result = subprocess.run([SHELLCHECK, "-s", "bash", "-"], input=script, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout
    assert "set -euo pipefail" in script
    deletes = re.findall(r"^pulumi state delete '([^']+)' --yes$", script, flags=re.MULTILINE)
    assert sorted(deletes) == sorted(migration["legacy"])
    assert len(deletes) == 64
    steps = [line for line in script.splitlines() if line.startswith("pulumi ")]
    assert steps[0] == f"pulumi stack export --file {migration['out'] / 'rollback.json'}"
    assert steps[1] == (
        f"pulumi import --file {migration['out'] / 'import.json'} --yes --protect=false --generate-code=false"
    )
    assert "--expect-no-changes" not in script
    assert f"if ! pulumi preview --json > {migration['out'] / 'preview.json'}; then" in script
    # run by gb300's own interpreter, so that it reads the preview with gb300's strict reader
    assert script.rstrip().splitlines()[-1].startswith(f"{sys.executable} {migration['out'] / 'check_preview.py'} ")


def test_commands_unlink_the_logs_associations_first(migration: dict[str, Any], tmp_path: Path) -> None:
    """The logs associations depend on the legacy racks, so commands.sh drops those edges before the deletes, and
    its filter leaves no state entry naming a legacy rack."""
    script = migration["commands"]
    assert script.index("\npulumi stack import ") < script.index("\npulumi state delete ")
    filter_src = script.split("<<'PY'\n", 1)[1].split("\nPY\n", 1)[0]
    before = tmp_path / "before.json"
    before.write_text(json.dumps(migration_state_with_associations(migration)), encoding="utf-8")
    subprocess.run(
        [sys.executable, "-", str(before), str(tmp_path / "after.json")], input=filter_src, text=True, check=True
    )
    after = json.loads((tmp_path / "after.json").read_text(encoding="utf-8"))["deployment"]["resources"]
    legacy = set(migration["legacy"])
    others = [r for r in after if r["urn"] not in legacy]
    assert not any(set(r["dependencies"]) & legacy for r in others)
    assert not any({u for us in (r.get("propertyDependencies") or {}).values() for u in us} & legacy for r in others)


def migration_state_with_associations(migration: dict[str, Any]) -> dict[str, Any]:
    """A small export as `pulumi import` leaves it: one legacy rack, its association depending on it."""
    urn = migration["legacy"][0]
    return {
        "version": 3,
        "deployment": {
            "resources": [
                {"urn": urn, "type": LEGACY, "inputs": {"gb300Kind": "rack-scale-set"}},
                {
                    "urn": "urn:pulumi:reference::gb300::x:y:Z::a",
                    "type": "x:y:Z",
                    "dependencies": [urn],
                    "propertyDependencies": {"resourceUri": [urn]},
                },
            ]
        },
    }


def test_summary_names_the_files_and_the_check(
    planned: list[ResourceRecord], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The command prints the rack count, the files it wrote and the check to run afterwards."""
    state = tmp_path / "before.json"
    state.write_text(json.dumps(legacy_state(planned)), encoding="utf-8")
    assert cli.main(["migrate-racks", "--stack", "reference", "--state", str(state), "--out", str(tmp_path / "m")]) == 0
    out = capsys.readouterr().out
    assert "64 rack(s)" in out
    assert str(tmp_path / "m" / "import.json") in out
    assert str(tmp_path / "m" / "commands.sh") in out
    assert "gb300 plan --state" in out
    assert "destroys-deployed" in out


def _refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], doc: dict[str, Any], stack: str = "reference") -> str:
    state = tmp_path / "state.json"
    state.write_text(json.dumps(doc), encoding="utf-8")
    code = cli.main(["migrate-racks", "--stack", stack, "--state", str(state), "--out", str(tmp_path / "m")])
    err = capsys.readouterr().err
    assert code == 2
    assert len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "m").exists()
    return err


def test_refuses_a_state_without_legacy_racks(
    planned: list[ResourceRecord], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A state that holds no gb300 0.1 rack exits 2 with one line: nothing to migrate."""
    assert "nothing to migrate" in _refused(tmp_path, capsys, migrated_state(planned))


def test_refuses_the_state_of_another_stack(
    planned: list[ResourceRecord], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The reference stack's state given with --stack dev exits 2 with one line naming both stacks."""
    err = _refused(tmp_path, capsys, legacy_state(planned), stack="dev")
    assert "stack reference, not dev" in err


def test_refuses_an_interconnect_block(
    planned: list[ResourceRecord], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A legacy interconnect block exits 2 with one line: the package cannot import it, see docs/fabric.md."""
    doc = legacy_state(planned)
    block = copy.deepcopy(next(r for r in doc["deployment"]["resources"] if r["type"] == LEGACY))
    block["urn"] += "-icb"
    block["inputs"]["gb300Kind"] = "interconnect-block"
    doc["deployment"]["resources"].append(block)
    err = _refused(tmp_path, capsys, doc)
    assert "interconnect block" in err
    assert "docs/fabric.md" in err


def test_refuses_a_rack_the_stack_no_longer_declares(
    planned: list[ResourceRecord], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A legacy rack with no planned scale set of its Azure name exits 2 naming it and the stack file to use."""
    doc = legacy_state(planned)
    extra = copy.deepcopy(next(r for r in doc["deployment"]["resources"] if r["type"] == LEGACY))
    extra["urn"] = extra["urn"].replace("r0001", "r0099")
    extra["id"] = extra["id"].replace("r0001", "r0099")
    extra["inputs"]["resourceName"] = "ref-train-r0099"
    doc["deployment"]["resources"].append(extra)
    err = _refused(tmp_path, capsys, doc)
    assert "ref-train-r0099" in err
    assert "same stack file that deployed" in err


def _destroys(tmp_path: Path, doc: dict[str, Any]) -> list[dict[str, str]]:
    """The destroys-deployed ERRORs of `gb300 plan --stack reference --state` on ``doc``.

    The states these tests plan hold the plan's own (mock) subscription: the rules compare planned ids with
    deployed ones as strings, and the offline plan cannot know the deployed subscription.
    """
    state, out = tmp_path / "after.json", tmp_path / "plan.json"
    state.write_text(json.dumps(doc), encoding="utf-8")
    assert cli.main(["plan", "--stack", "reference", "--state", str(state), "--json", str(out), "--quiet"]) in (0, 1)
    findings = json.loads(out.read_text(encoding="utf-8"))["findings"]
    return [f for f in findings if f["rule"] == "destroys-deployed" and f["level"] == "error"]


def test_plan_after_the_migration_destroys_nothing(planned: list[ResourceRecord], tmp_path: Path) -> None:
    """Once commands.sh has run (new racks imported, legacy entries gone), `gb300 plan --state` reports no
    destroys-deployed error."""
    assert _destroys(tmp_path, migrated_state(planned, SUBSCRIPTION_ID)) == []


def test_plan_of_a_half_done_migration_names_migrate_racks(planned: list[ResourceRecord], tmp_path: Path) -> None:
    """With the racks imported but the legacy entries still in the state, each legacy rack is one
    destroys-deployed error that says to run `gb300 migrate-racks`."""
    doc = legacy_state(planned, keep_new_racks=True, subscription=SUBSCRIPTION_ID)
    legacy = {r["urn"] for r in doc["deployment"]["resources"] if r["type"] == LEGACY}
    errors = _destroys(tmp_path, doc)
    assert sorted(f["resource"] for f in errors) == sorted(legacy)
    assert all("`gb300 migrate-racks`" in f["message"] for f in errors)


def _cli(bin_dir: Path, version: str) -> Path:
    """A ``pulumi`` on PATH that only answers ``pulumi version`` (all migrate-racks asks it); the real CLI runs
    commands.sh in tests/engine/test_migrate_racks.py."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    exe = bin_dir / "pulumi"
    exe.write_text(f"#!/bin/sh\necho {version}\n", encoding="utf-8")
    exe.chmod(0o755)
    return bin_dir


def _preview(planned: list[ResourceRecord], ops: dict[str, str] | None = None) -> dict[str, Any]:
    """A `pulumi preview --json` document (pulumi/pulumi pkg/display/json.go PreviewDigest) of the migrated stack:
    every rack's scale set an update, as after an import, except the ops ``ops`` gives by name; the rest same."""
    ops = ops or {}
    steps = []
    for r in planned:
        op = "update" if r.type == compute_package.SCALE_SET_TOKEN else "same"
        op = ops.get(r.name, op)
        state = {"urn": r.urn, "type": r.type, "custom": r.type != RACK_TYPE}
        step: dict[str, Any] = {"op": op, "urn": r.urn, "oldState": state, "detailedDiff": None}
        if op != "delete":
            step["newState"] = state
        if op == "update":
            step["diffReasons"] = ["virtualMachineProfile"]
        steps.append(step)
    return {"steps": steps, "changeSummary": {}}


def test_check_ignores_a_replace_of_something_else_and_counts_replacement_steps(planned: list[ResourceRecord]) -> None:
    """Only racks stop the migration: a replaced logs association goes on; a rack's create-replacement and
    delete-replaced steps (--show-replacement-steps) name it once."""
    from gb300.ops import migrate_preview  # noqa: PLC0415

    other = next(r for r in planned if r.type not in (compute_package.SCALE_SET_TOKEN, RACK_TYPE) and r.parent)
    types = (compute_package.SCALE_SET_TOKEN, RACK_TYPE)
    ok, _ = migrate_preview.check(_preview(planned, {other.name: "replace"}), types, "rollback.json")
    assert ok
    doc = _preview(planned, {"ref-train-r0001": "create-replacement"})
    doc["steps"].append({**next(s for s in doc["steps"] if s["op"] == "create-replacement"), "op": "delete-replaced"})
    ok, lines = migrate_preview.check(doc, types, "rollback.json")
    assert not ok
    assert "1 rack(s): ref-train-r0001 (create-replacement/delete-replaced)" in lines[0]


def test_migrate_racks_refuses_a_pulumi_cli_below_its_floor(
    planned: list[ResourceRecord], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A Pulumi CLI on PATH older than data/floors.yaml's CLI floor (parameterized import) exits 2 with one line
    naming its version and the floor, and writes nothing."""
    from gb300 import floors  # noqa: PLC0415

    bin_dir = _cli(tmp_path / "bin", "v3.253.0")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    err = _refused(tmp_path, capsys, legacy_state(planned))
    assert "v3.253.0" in err
    assert f"v{floors.cli_floor().floor}" in err


def test_migrate_racks_says_which_pulumi_cli_it_found(
    planned: list[ResourceRecord], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """With a CLI at or above the floor on PATH, the summary says so in one line; with none, it names the floor."""
    state = tmp_path / "before.json"
    state.write_text(json.dumps(legacy_state(planned)), encoding="utf-8")
    bin_dir = _cli(tmp_path / "bin", "v3.254.0")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    assert cli.main(["migrate-racks", "--stack", "reference", "--state", str(state), "--out", str(tmp_path / "a")]) == 0
    assert "Pulumi CLI v3.254.0 on PATH: at or above v3.254.0" in capsys.readouterr().out
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert cli.main(["migrate-racks", "--stack", "reference", "--state", str(state), "--out", str(tmp_path / "b")]) == 0
    assert "no Pulumi CLI on PATH here: commands.sh needs pulumi v3.254.0 or later" in capsys.readouterr().out


def test_check_reads_the_type_from_the_urn_and_refuses_an_unreadable_preview(tmp_path: Path) -> None:
    """A step without states is typed by its URN; a preview file that is not JSON exits 2 with one line that still
    gives the rollback command."""
    from gb300.ops import migrate_preview  # noqa: PLC0415

    urn = (
        "urn:pulumi:reference::gb300::gb300:compute:GpuPool$gb300:compute:Rack$"
        f"{compute_package.SCALE_SET_TOKEN}::ref-train-r0003"
    )
    ok, lines = migrate_preview.check(
        {"steps": [{"op": "replace", "urn": urn}]}, (compute_package.SCALE_SET_TOKEN,), "r"
    )
    assert not ok
    assert "ref-train-r0003 (replace)" in lines[0]
    bad = tmp_path / "preview.json"
    for text, why in (
        ("error: could not load plugin\n", "is not JSON (line 1, column 1"),
        ('{"steps": [], "steps": [{"op": "delete"}]}', "gives key 'steps' twice"),  # the strict reader's refusal
    ):
        bad.write_text(text, encoding="utf-8")
        result = subprocess.run(
            [sys.executable, migrate_preview.__file__, str(bad), "rollback.json", compute_package.SCALE_SET_TOKEN],
            capture_output=True,
            text=True,
            check=False,
        )
        assert result.returncode == 2
        assert len(result.stderr.strip().splitlines()) == 1
        assert why in result.stderr
        assert "pulumi stack import --file rollback.json" in result.stderr


@pytest.mark.parametrize(
    "name",
    ["logs\ntouch pwned #", "logs\rtouch pwned", "a\x00b", "x" * (64 * 1024 + 1)],
    ids=["newline", "carriage-return", "nul", "huge"],
)
def test_a_state_entry_name_never_becomes_a_command(
    planned: list[ResourceRecord], tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    """A state entry depending on a legacy rack whose name holds a newline (or another control character, or
    megabytes) used to end commands.sh's comment and run as the operator: now exit 2 on one line and no file."""
    doc = legacy_state(planned)
    legacy = next(r["urn"] for r in doc["deployment"]["resources"] if r["type"] == LEGACY)
    doc["deployment"]["resources"].insert(
        0, {"urn": f"urn:pulumi:reference::gb300::x:y:Z::{name}", "type": "x:y:Z", "dependencies": [legacy]}
    )
    state = tmp_path / "before.json"
    state.write_text(json.dumps(doc), encoding="utf-8")
    out = tmp_path / "m"
    code = cli.main(["migrate-racks", "--stack", "reference", "--state", str(state), "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1, err[:3]
    assert "a control character in a generated script" in err[0] or "go into a script" in err[0]
    assert not out.exists()


def test_hostile_but_printable_names_are_quoted_words(planned: list[ResourceRecord], tmp_path: Path) -> None:
    """A legacy URN holding quotes, $(...) and backticks reaches commands.sh as one quoted word each, which bash
    reads back exactly (it used to be refused only for a single quote)."""
    doc = legacy_state(planned)
    hostile = 'r\'; $(touch pwned) `id` "x"'
    for entry in doc["deployment"]["resources"]:
        if entry["type"] == LEGACY:
            entry["urn"] = entry["urn"] + hostile
            break
    state = tmp_path / "before.json"
    state.write_text(json.dumps(doc), encoding="utf-8")
    out = tmp_path / "m"
    assert cli.main(["migrate-racks", "--stack", "reference", "--state", str(state), "--out", str(out)]) == 0
    script = (out / "commands.sh").read_text(encoding="utf-8")
    deletes = [line for line in script.splitlines() if line.startswith("pulumi state delete ")]
    assert len(deletes) == 64
    shell = subprocess.run(
        ["bash", "-c", "pulumi() { printf '%s\\0' \"$@\"; }\n" + "\n".join(deletes)],
        capture_output=True,
        check=True,
        cwd=tmp_path,
    ).stdout.split(b"\0")
    assert any(w.decode().endswith(hostile) for w in shell)
    assert not (tmp_path / "pwned").exists()


def _recording_cli(bin_dir: Path, log: Path) -> Path:
    """A ``pulumi`` on PATH that records the subscription each call sees, then fails (commands.sh stops there)."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    exe = bin_dir / "pulumi"
    exe.write_text(f'#!/bin/sh\necho "$ARM_SUBSCRIPTION_ID" >> {log}\nexit 1\n', encoding="utf-8")
    exe.chmod(0o755)
    return bin_dir


@pytest.mark.parametrize("given", ["", REAL_SUBSCRIPTION, "00000000-0000-0000-0000-000000000001"])
def test_commands_run_in_the_racks_subscription_or_stop(migration: dict[str, Any], tmp_path: Path, given: str) -> None:
    """`pulumi import`'s provider takes its subscription from the environment only: commands.sh gives it the racks'
    subscription when none is set, and stops before its first pulumi call when another one is set."""
    log = tmp_path / "calls"
    bin_dir = _recording_cli(tmp_path / "bin", log)
    env = {k: v for k, v in os.environ.items() if k != "ARM_SUBSCRIPTION_ID"}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    if given:
        env["ARM_SUBSCRIPTION_ID"] = given
    script = migration["out"] / "commands.sh"
    ran = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, check=False)
    assert ran.returncode == 1
    if given and given != REAL_SUBSCRIPTION:
        assert not log.exists()
        assert f"the racks are in {REAL_SUBSCRIPTION}" in ran.stderr
    else:
        assert log.read_text(encoding="utf-8").split() == [REAL_SUBSCRIPTION]


def test_a_subscription_that_is_no_guid_is_refused(
    planned: list[ResourceRecord], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The racks' subscription reaches commands.sh unquoted: a state whose ids name anything but a GUID there is
    refused with exit 2 on one line, and no file is written."""
    err = _refused(tmp_path, capsys, legacy_state(planned, subscription="$(touch pwned)"))
    assert "no GUID" in err
