"""The reference stack (64 racks) through the real Pulumi engine (the CLI built from source) and gb300's own program,
with the azure-native double as Azure: ``pulumi preview --json`` with the policy pack registers exactly what ``gb300
plan`` registers, and one ``pulumi up`` with the policy pack deploys every rack, shared by the tests after it.

The stack is made once for the module and deployed once (:func:`deployed`); the tests run in file order.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest

from gb300.components import compute_package
from tests.support import engine_stack
from tests.support.engine_stack import SUBSCRIPTION, EngineStack

pytestmark = pytest.mark.slow
STACK = "reference"


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EngineStack]:
    made = engine_stack.open_stack(tmp_path_factory.mktemp("reference-stack"), STACK)
    yield made
    made.close()


@pytest.fixture(scope="module")
def deployed(reference: EngineStack) -> subprocess.CompletedProcess[str]:
    """The one ``pulumi up --policy-pack policies`` of the module."""
    return reference.pulumi("up", "--yes", "--policy-pack", "policies", "--suppress-outputs", timeout=1800)


def _racks(reference: EngineStack) -> set[str]:
    return {r.name for r in reference.plan.resources if r.type == compute_package.SCALE_SET_TOKEN}


def test_preview_with_the_policy_pack_registers_what_the_plan_registers(reference: EngineStack) -> None:
    """``pulumi preview --json --policy-pack policies`` of the 64-rack stack passes and plans to create exactly the
    resources ``gb300 plan`` registers for the same settings."""
    proc = reference.pulumi("preview", "--json", "--policy-pack", "policies", timeout=1800)
    assert proc.returncode == 0, reference.output(proc)
    steps = engine_stack.preview_steps(proc)
    assert engine_stack.declared(set(steps)) == {r.urn for r in reference.plan.resources}
    assert {op for urn in engine_stack.declared(set(steps)) for op in steps[urn]} == {"create"}
    assert len(_racks(reference)) == reference.raw["gpuPools"][0]["racks"]


def test_up_deploys_every_rack_into_the_double(
    reference: EngineStack, deployed: subprocess.CompletedProcess[str]
) -> None:
    """``pulumi up`` with the policy pack creates every azure-native resource the plan declares in the double, every
    rack's scale set among them, under the stack's subscription."""
    assert deployed.returncode == 0, reference.output(deployed)
    recorded = reference.ledger.resources()
    expected = [r for r in reference.plan.resources if r.type.startswith("azure-native") and r.id is not None]
    assert len(recorded) == len(expected)
    assert all(i.startswith(f"/subscriptions/{SUBSCRIPTION}/") for i in recorded)
    scale_sets = {
        v["urn"].rsplit("::", 1)[-1] for v in recorded.values() if v["type"] == compute_package.SCALE_SET_TOKEN
    }
    assert scale_sets == _racks(reference)


def test_the_checkpoint_holds_what_the_plan_declares(
    reference: EngineStack, deployed: subprocess.CompletedProcess[str]
) -> None:
    """After the ``up``, ``pulumi stack export`` holds every resource the plan declares, each with the id the double
    gave it."""
    assert deployed.returncode == 0, reference.output(deployed)
    state = {r["urn"]: r for r in reference.export()["deployment"]["resources"]}
    assert engine_stack.declared(set(state)) == {r.urn for r in reference.plan.resources}
    recorded = set(reference.ledger.resources())
    ids = {r["id"] for r in state.values() if r["type"].startswith("azure-native") and r.get("custom", True)}
    assert recorded <= ids
