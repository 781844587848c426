"""Shared fixtures. The Pulumi mocks are installed here, before any test module imports the program."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pulumi
import pytest

from gb300.plan.mocks import AzureMocks

pytest_plugins = ["tests.support.cpu_durations"]  # --cpu-durations=N (docs/development.md)
pytest.register_assert_rewrite("tests.support.files")  # golden mismatches show their diff

# Mocks first: the SDK requires them before the program (gb300.program) is imported anywhere.
pulumi.runtime.set_mocks(AzureMocks(), project="gb300", stack="test", preview=True)

from gb300 import config, paths  # noqa: E402 - must follow set_mocks
from gb300.config import stacks as gb300_stacks  # noqa: E402
from gb300.plan import PlanResult, run_plan  # noqa: E402
from tests.support import signing  # noqa: E402
from tests.support.tie import tie_lustre  # noqa: E402

REPO = paths.REPO_ROOT


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Files with a slow test run first (in their own order, the rest after in theirs): `make test` hands a file at a
    time to each worker (pytest-xdist, --dist loadfile), and a long file handed out last would leave the other
    workers idle until it ends."""
    slow = {item.path for item in items if item.get_closest_marker("slow") is not None}
    items.sort(key=lambda item: item.path not in slow)


@pytest.fixture(scope="session")
def reference_raw() -> dict[str, Any]:
    """The gb300 namespace of the reference stack file, as the plan reads it."""
    return config.load_stack_file(gb300_stacks.stack_file("reference"))


@pytest.fixture(scope="session")
def dev_raw() -> dict[str, Any]:
    """The gb300 namespace of the one-rack dev stack file."""
    return config.load_stack_file(gb300_stacks.stack_file("dev"))


@pytest.fixture(scope="session")
def reference_plan(reference_raw: dict[str, Any]) -> PlanResult:
    """The reference stack planned once per session (about 5 s)."""
    return run_plan("reference", copy.deepcopy(reference_raw))


@pytest.fixture(scope="session")
def dev_plan(dev_raw: dict[str, Any]) -> PlanResult:
    """The dev stack planned once per session."""
    return run_plan("dev", copy.deepcopy(dev_raw))


@pytest.fixture(scope="session")
def signed_reference_plan(reference_raw: dict[str, Any]) -> PlanResult:
    """The reference stack with the tests' payload signing key (tests/support/signing.py) in place of its own,
    planned once per session: simulated nodes take only payloads the tests can sign (the shipped stacks' private
    halves are their deployers' secrets)."""
    return run_plan("reference", signing.with_test_key(copy.deepcopy(reference_raw)))


@pytest.fixture(scope="session")
def signed_dev_plan(dev_raw: dict[str, Any]) -> PlanResult:
    """The dev stack with the tests' payload signing key, planned once per session."""
    return run_plan("dev", signing.with_test_key(copy.deepcopy(dev_raw)))


@pytest.fixture
def write_stack(tmp_path: Path):  # type: ignore[no-untyped-def]
    """Write a stack file from a gb300 namespace dict and return its path."""
    import yaml  # noqa: PLC0415

    def _write(raw: dict[str, Any], name: str = "case") -> Path:
        path = tmp_path / f"Pulumi.{name}.yaml"
        path.write_text(yaml.safe_dump({"config": {f"gb300:{k}": v for k, v in raw.items()}}), encoding="utf-8")
        return path

    return _write


# --- A stack that ties Lustre to Blob (opt-in: gb300:storage.lustre.blobIntegration.enabled defaults to false) ---


@pytest.fixture(scope="session")
def tied_raw(reference_raw: dict[str, Any]) -> dict[str, Any]:
    """The reference stack with Lustre tied to Blob (the stack opts in)."""
    return tie_lustre(reference_raw)


@pytest.fixture(scope="session")
def tied_plan(tied_raw: dict[str, Any]) -> PlanResult:
    """The tied reference stack planned once per session."""
    return run_plan("reference", copy.deepcopy(tied_raw))
