"""``gb300 migrate-racks`` through the real Pulumi engine: a dev stack in gb300 0.1's layout, its ``commands.sh`` run
for real (``pulumi stack export``, ``pulumi import --file``, ``pulumi stack import``, ``pulumi state delete``,
``pulumi preview --json``) with the CLI built from source and the azure-native double as Azure.

The 0.1 layout is made from a real deployment: ``pulumi up`` of today's program, then its export rewritten as gb300
0.1 left its state (each rack's scale set a ``pulumi-python:dynamic:Resource`` child of its pool under the default
``pulumi-python`` provider, no rack component, no compute package provider, the logs association depending on the
dynamic rack) and put back with ``pulumi stack import``. The double then holds exactly the Azure such a stack
deployed. What this cannot show: gb300 0.1's own program and dynamic provider running (the dynamic entries are never
asked anything by the migration: it deletes them from the state only).
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gb300.components import compute_package
from gb300.components.gpu_pool import RACK_TYPE
from tests.support import engine_stack
from tests.support.engine_stack import EngineStack

pytestmark = pytest.mark.slow
STACK = "dev"
LEGACY = "pulumi-python:dynamic:Resource"
PYTHON_PROVIDER = "pulumi:providers:pulumi-python"
ARM_TOP = ("location", "zones", "sku", "identity", "tags")  # gb300 0.1's ARM body keys outside ``properties``
WRITES = ("Create", "Update", "Delete")


def _legacy_entry(vmss: dict[str, Any], pool_urn: str, provider_ref: str) -> dict[str, Any]:
    """A rack scale set as gb300 0.1 recorded it: a dynamic resource under its pool, the ARM body as inputs."""
    inputs = dict(vmss["inputs"])
    body = {
        "gb300Kind": "rack-scale-set",
        "resourceType": "Microsoft.Compute/virtualMachineScaleSets",
        "apiVersion": "2025-04-01",
        "subscriptionId": engine_stack.SUBSCRIPTION,
        "resourceGroupName": inputs.pop("resourceGroupName"),
        "resourceName": inputs.pop("vmScaleSetName"),
        **{k: inputs.pop(k) for k in ARM_TOP if k in inputs},
        "properties": inputs,
    }
    name = vmss["urn"].rsplit("::", 1)[-1]
    return {
        "urn": f"{pool_urn.rpartition('::')[0]}${LEGACY}::{name}",
        "custom": True,
        "id": vmss["id"],
        "type": LEGACY,
        "inputs": body,
        "outputs": body,
        "parent": pool_urn,
        "provider": provider_ref,
    }


def legacy_layout(exported: dict[str, Any]) -> dict[str, Any]:
    """The deployed stack's export rewritten as gb300 0.1 left its state (see the module docstring)."""
    resources = exported["deployment"]["resources"]
    racks = {r["urn"]: r for r in resources if r["type"] == RACK_TYPE}
    package = {r["urn"] for r in resources if r["type"] == f"pulumi:providers:{compute_package.PACKAGE_NAME}"}
    stack_urn = next(r["urn"] for r in resources if r["type"] == "pulumi:pulumi:Stack")
    provider = {
        "urn": f"{stack_urn.split('::')[0]}::gb300::{PYTHON_PROVIDER}::default",
        "custom": True,
        "id": str(uuid.uuid4()),
        "type": PYTHON_PROVIDER,
        "parent": stack_urn,
    }
    provider_ref = f"{provider['urn']}::{provider['id']}"
    renamed: dict[str, str] = {}
    kept: list[dict[str, Any]] = []
    for r in resources:
        if r["type"] == compute_package.SCALE_SET_TOKEN and r.get("parent") in racks:
            entry = _legacy_entry(r, racks[r["parent"]]["parent"], provider_ref)
            renamed[r["urn"]] = entry["urn"]
            kept.append(entry)
        elif r["urn"] not in racks and r["urn"] not in package:
            kept.append(dict(r))
    gone = set(racks) | package

    def edges(urns: list[str]) -> list[str]:
        return [renamed.get(u, u) for u in urns if u not in gone]

    for r in kept:
        if r.get("parent") in racks:
            r["parent"] = racks[r["parent"]]["parent"]
        r["dependencies"] = edges(r.get("dependencies") or [])
        if r.get("propertyDependencies"):
            r["propertyDependencies"] = {k: edges(v or []) for k, v in r["propertyDependencies"].items()}
    at = next(i for i, r in enumerate(kept) if r["type"] == LEGACY)
    kept.insert(at, provider)
    return {**exported, "deployment": {**exported["deployment"], "resources": kept}}


@pytest.fixture(scope="module")
def migrated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The dev stack deployed, rewritten to the 0.1 layout, ``gb300 migrate-racks`` run on its export and its
    ``commands.sh`` run by bash with the engine first on PATH."""
    root = tmp_path_factory.mktemp("migrate-racks")
    made = engine_stack.open_stack(root, STACK)
    plugin = made.engine.bin_dir / "pulumi-resource-pulumi-python"  # as a release ships it beside the CLI
    plugin.write_text(f'#!/bin/sh\nexec {sys.executable} -u -m pulumi.dynamic "$@"\n', encoding="utf-8")
    plugin.chmod(0o755)
    try:
        up = made.pulumi("up", "--yes")
        assert up.returncode == 0, made.output(up)
        deployed = made.export()
        legacy = root / "legacy.json"
        legacy.write_text(json.dumps(legacy_layout(deployed)), encoding="utf-8")
        put = made.pulumi("stack", "import", "--file", str(legacy))
        assert put.returncode == 0, made.output(put)
        before = root / "before.json"
        made.pulumi("stack", "export", "--file", str(before))
        calls = len(made.ledger.calls())
        out = root / "migrate"
        # The provider `pulumi import` creates from import.json gets no subscription from the stack's config (found
        # here: its preview failed "subscription ID not set"); commands.sh exports the racks' own, so the
        # operator's environment need not give it.
        env = {k: v for k, v in {**made.engine.env, **made.env}.items() if k != "ARM_SUBSCRIPTION_ID"}
        stack_file = made.copy / "stacks" / f"Pulumi.{STACK}.yaml"
        gb300 = Path(sys.executable).with_name("gb300")
        wrote = subprocess.run(
            [str(gb300), "migrate-racks", "--stack-file", str(stack_file), "--state", str(before), "--out", str(out)],
            cwd=made.copy,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        assert wrote.returncode == 0, wrote.stderr
        ran = subprocess.run(
            ["bash", str(out / "commands.sh")], cwd=made.copy, env=env, capture_output=True, text=True, check=False
        )
        yield {"made": made, "ran": ran, "out": out, "calls": calls, "deployed": deployed, "wrote": wrote}
    finally:
        made.close()


def test_commands_run_for_real_and_move_the_racks(migrated: dict[str, Any]) -> None:
    """commands.sh runs to its end through the real CLI (it names the CLI it found at or above its floor), its
    preview check says the racks' updates are expected, and the state holds no dynamic rack, only the rack's scale
    set under its rack component with the Azure id it had."""
    made: EngineStack = migrated["made"]
    ran = migrated["ran"]
    assert "on PATH: at or above" in migrated["wrote"].stdout
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    assert "expected after an import" in ran.stdout
    after = made.export()["deployment"]["resources"]
    assert not [r for r in after if r["type"] == LEGACY]
    before = {r["urn"]: r for r in migrated["deployed"]["deployment"]["resources"]}
    now = {r["urn"]: r for r in after}
    for urn, r in before.items():
        if r["type"] in (compute_package.SCALE_SET_TOKEN, RACK_TYPE):
            assert urn in now, urn
            assert now[urn].get("id") == r.get("id")


def test_the_migration_writes_nothing_to_azure(migrated: dict[str, Any]) -> None:
    """From the legacy state to the end of commands.sh the double sees reads only: no create, update or delete."""
    made: EngineStack = migrated["made"]
    writes = [c for c in made.ledger.calls()[migrated["calls"] :] if c["method"] in WRITES]
    assert writes == []


def test_preview_then_up_replace_nothing(migrated: dict[str, Any]) -> None:
    """After the migration ``pulumi preview`` replaces and deletes no Azure resource (the racks update: an import
    reads no custom data, which ARM never returns), and the next ``pulumi up`` only updates them in Azure."""
    made: EngineStack = migrated["made"]
    preview = made.pulumi("preview", "--json")
    assert preview.returncode == 0, made.output(preview)
    steps = engine_stack.preview_steps(preview)
    bad = {"replace", "create-replacement", "delete-replaced", "delete", "create"}
    assert {u: ops for u, ops in steps.items() if "azure-native" in u and ops & bad} == {}
    racks = [u for u in steps if compute_package.SCALE_SET_TOKEN in u]
    assert racks
    assert all(steps[u] == {"update"} for u in racks)
    calls = len(made.ledger.calls())
    up = made.pulumi("up", "--yes")
    assert up.returncode == 0, made.output(up)
    writes = {c["method"] for c in made.ledger.calls()[calls:] if c["method"] in WRITES}
    assert writes == {"Update"}
