"""One error hierarchy: every exception gb300 defines derives from ``Gb300Error``, and the CLI's exit codes hold."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from typing import Any

import pytest

import gb300
from gb300 import cli
from gb300.commands import plan as plan_command
from gb300.errors import BootstrapDataError, DataError, Gb300Error, SoftwareOverrideError

STANDALONE = {"gb300.slurm.hostlist", "gb300.slurm.topology"}  # shipped alone to the controller: stdlib only


def _defined_exceptions() -> list[type[BaseException]]:
    """Every public exception class defined in a gb300 module (a private one is a signal caught where it is raised)."""
    found: list[type[BaseException]] = []
    for info in pkgutil.walk_packages(gb300.__path__, prefix="gb300."):
        if info.name in STANDALONE:
            continue
        module = importlib.import_module(info.name)
        for _, obj in inspect.getmembers(module, inspect.isclass):
            if issubclass(obj, BaseException) and obj.__module__ == info.name and not obj.__name__.startswith("_"):
                found.append(obj)
    return found


def test_every_gb300_exception_derives_from_the_package_error() -> None:
    """Bootstrap, Slurm, plan and config errors are all Gb300Error, so callers catch one type."""
    classes = _defined_exceptions()
    names = {c.__name__ for c in classes}
    assert {"ConfigError", "BootstrapError", "BootstrapDataError", "SlurmConfigError", "SlurmError"} <= names
    assert [c.__qualname__ for c in classes if not issubclass(c, Gb300Error)] == []


def test_standalone_slurm_scripts_define_no_exception() -> None:
    """The controller's stdlib-only scripts raise plain ValueError, so no gb300 exception escapes the hierarchy."""
    for name in STANDALONE:
        module = importlib.import_module(name)
        defined = [
            obj
            for _, obj in inspect.getmembers(module, inspect.isclass)
            if issubclass(obj, BaseException) and obj.__module__ == name
        ]
        assert defined == []


@pytest.mark.parametrize(
    ("error", "code", "words"),
    [
        pytest.param(
            SoftwareOverrideError("gb300:software.nccl: unknown version"), 2, "gb300:software.nccl", id="input"
        ),
        pytest.param(BootstrapDataError("versions.yaml components.x: no source"), 3, "bug in gb300", id="data"),
        pytest.param(DataError("health.yaml defaults.checks.x.class"), 3, "bug in gb300", id="data-plain"),
    ],
)
def test_exit_codes_follow_the_hierarchy(
    error: Gb300Error, code: int, words: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A user's bad input exits 2 and a malformed shipped data file exits 3, each as one line without a traceback."""

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise error

    monkeypatch.setattr(plan_command, "run_plan", broken)
    assert cli.main(["plan", "--stack", "dev"]) == code
    err = [line for line in capsys.readouterr().err.splitlines() if not line.startswith("gb300 plan: validating")]
    assert len(err) == 1
    assert str(error) in err[0]
    assert words in err[0]
    assert "Traceback" not in err[0]
