"""The config checks are public methods registered beside the section they check (each model's ``CHECKS``) and run
by one runner (``ConfigModel.run_checks``), as AWS ParallelCluster's config classes register their validators: a
check written but not registered, or run another way, fails here."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

import pytest
from pydantic import ValidationError

from gb300.config.base import Checks, ConfigModel, checks_of
from gb300.config.checks import PathError
from gb300.config.models import StackConfig
from tests.support.config_errors import error_lines


def sections() -> Iterator[type[ConfigModel]]:
    """Every model of the stack configuration (the subclasses of ConfigModel in gb300.config)."""
    todo = list(ConfigModel.__subclasses__())
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if cls.__module__.startswith("gb300.config."):
            yield cls


KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAABAgMEBQYHCAkKCwwNDg8QERITFBUWFxgZGhscHR4f ops@example"

SECTIONS = sorted(sections(), key=lambda c: f"{c.__module__}.{c.__qualname__}")


def _own_checks(cls: type) -> list[str]:
    """The ``check_*`` functions written in ``cls``'s own body, in the order they are written."""
    found = [(f.__code__.co_firstlineno, n) for n, f in vars(cls).items() if n.startswith("check_") and callable(f)]
    return [n for _, n in sorted(found)]


def test_the_sections_are_found() -> None:
    """The walk finds the stack's models, the root and the sections with checks among them."""
    names = {c.__name__ for c in SECTIONS}
    assert {"StackConfig", "GpuPool", "StorageSettings", "NetworkSettings", "RemediationSettings"} <= names


@pytest.mark.parametrize("cls", SECTIONS, ids=lambda c: c.__name__)
def test_every_check_is_registered_beside_it_in_order(cls: type[ConfigModel]) -> None:
    """Each check_* method a section writes is in that section's CHECKS, in the order written, and CHECKS holds no
    other class's function."""
    registered = [check.__name__ for check in vars(cls).get("CHECKS", ())]
    assert registered == _own_checks(cls)
    assert all(check.__qualname__.startswith(f"{cls.__qualname__}.") for check in vars(cls).get("CHECKS", ()))


@pytest.mark.parametrize("cls", [ConfigModel, *SECTIONS], ids=lambda c: c.__name__)
def test_the_runner_is_the_only_validator_of_a_whole_model(cls: type[ConfigModel]) -> None:
    """No section checks itself through a pydantic model or field validator of its own: run_checks is the only one."""
    decorators = cls.__pydantic_decorators__
    assert set(decorators.model_validators) == {"run_checks"}
    assert not decorators.field_validators


def test_the_base_check_runs_first_and_each_once() -> None:
    """Every model checks its own strings first, then its section's checks; none runs twice."""
    checks = checks_of(StackConfig)
    assert checks[0] is ConfigModel.check_printable
    assert len(set(checks)) == len(checks)
    assert [c.__name__ for c in checks[1:]] == _own_checks(StackConfig)


class _Probe(ConfigModel):
    """A section made for the test: two registered checks and one written but left out."""

    first: int = 0
    second: int = 0

    def check_first(self) -> None:
        if self.first:
            raise PathError(("probe", "first"), f"must be 0 (got {self.first})")

    def check_second(self) -> None:
        if self.second:
            raise PathError(("probe", "second"), f"must be 0 (got {self.second})")

    def check_unregistered(self) -> None:
        raise AssertionError("a check left out of CHECKS never runs")

    CHECKS: ClassVar[Checks] = (check_first, check_second)


def _problems(**values: Any) -> list[tuple[tuple[str | int, ...], str]]:
    """The (key path, message) of each check that fails when ``values`` are parsed as a _Probe."""
    try:
        _Probe.model_validate(values)
    except ValidationError as exc:
        errors = [e["ctx"]["error"] for e in exc.errors() if isinstance(e.get("ctx", {}).get("error"), PathError)]
        return [(e.loc, str(e)) for e in errors]
    return []


def test_the_runner_runs_registered_checks_in_order_and_only_them() -> None:
    """The first failing registered check is the model's problem; a check left out of CHECKS does not run."""
    assert _problems() == []
    assert _problems(second=1) == [(("probe", "second"), "must be 0 (got 1)")]
    assert _problems(first=1, second=1) == [(("probe", "first"), "must be 0 (got 1)")]
    assert [c.__name__ for c in checks_of(_Probe)] == ["check_printable", "check_first", "check_second"]


def test_a_check_names_the_full_key_path_through_parse() -> None:
    """A registered check's problem reaches the user as one line naming the full key path (duplicate pool names
    here), beside a field's own problem elsewhere in the stack."""
    raw = {
        "cluster": {"name": "ref", "location": "eastus2"},
        "access": {"sshPublicKey": "not a key"},
        "gpuPools": [
            {"name": "train", "vmSize": "Standard_ND128isr_GB300_v6", "racks": 1},
            {"name": "train", "vmSize": "Standard_ND128isr_GB300_v6", "racks": 1},
        ],
    }
    lines = error_lines(raw)
    assert any(line.startswith("gb300:access.sshPublicKey: ") for line in lines)
    assert error_lines(dict(raw, access={"sshPublicKey": KEY})) == [
        "gb300:gpuPools[1].name: duplicates gpuPools[0].name (got 'train'); pool names must be unique"
    ]
