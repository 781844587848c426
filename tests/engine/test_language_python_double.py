"""The Python language host double (tests/support/engine_plugins/language_python.py) at its gRPC boundary: the
plugins it tells the engine gb300's program needs, read from the project's virtual environment as the real host
reads them."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import struct_pb2
from pulumi.runtime.proto import language_pb2, language_pb2_grpc

from gb300 import paths
from tests.support import pulumi_engine
from tests.support.engine_plugins import language_python


@pytest.fixture(scope="module")
def host() -> Iterator[Any]:
    """The double started as the engine starts it, in the program directory, its port read from stdout."""
    proc = subprocess.Popen(
        [sys.executable, str(pulumi_engine.DOUBLES["pulumi-language-python"]), "-use-executor", sys.executable],
        cwd=paths.REPO_ROOT / "infra",
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    port = int(proc.stdout.readline())
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        yield language_pb2_grpc.LanguageRuntimeStub(channel)
    proc.kill()
    proc.wait()


def _program_info() -> language_pb2.ProgramInfo:
    options = struct_pb2.Struct()
    options.update({"toolchain": "pip", "virtualenv": ".venv"})
    return language_pb2.ProgramInfo(
        root_directory=str(paths.REPO_ROOT),
        program_directory=str(paths.REPO_ROOT / "infra"),
        entry_point=".",
        options=options,
    )


def _plugin_json(module: str) -> dict[str, Any]:
    found = metadata.distribution(module.replace("_", "-")).locate_file(f"{module}/pulumi-plugin.json")
    return dict(json.loads(Path(str(found)).read_text(encoding="utf-8")))


def test_required_packages_are_the_plugins_the_venv_declares(host: Any) -> None:
    """GetRequiredPackages names each installed Pulumi package's plugin at the version its pulumi-plugin.json
    gives (pulumi-command, pulumi-azure-native), as the real host does, and skips pulumi-policy."""
    packages = host.GetRequiredPackages(language_pb2.GetRequiredPackagesRequest(info=_program_info())).packages
    got = {p.name: p.version for p in packages}
    for module in ("pulumi_command", "pulumi_azure_native"):
        declared = _plugin_json(module)
        assert got[declared["name"]] == "v" + declared["version"].removeprefix("v")
    assert "policy" not in got
    assert {p.kind for p in packages} == {"resource"}


@pytest.mark.parametrize(
    ("package", "plugin"),
    [
        ("1.0", "1.0.0"),
        ("1.2.3a4", "1.2.3-alpha.4"),
        ("1.2.3rc4", "1.2.3-rc.4"),
        ("1.2.3.post4", "1.2.3+post4"),
        ("1.2.3.post4.dev5", "1.2.3+post4dev5"),
        ("1!2.0", None),
    ],
)
def test_a_package_version_becomes_the_plugin_version_the_real_host_derives(package: str, plugin: str | None) -> None:
    """A package without pulumi-plugin.json gets the plugin version the real host derives from its PEP 440 version
    (the examples of ``determinePluginVersion``'s comment in pulumi-language-python's main.go)."""
    assert language_python.plugin_version(package) == plugin


def test_run_arguments_are_the_exec_scripts_flags() -> None:
    """The program is started with the flags of ``constructArguments`` (only non-empty ones), then the entry point
    and the program's arguments."""
    request = language_pb2.RunRequest(
        project="gb300",
        stack="dev",
        pwd="/p/infra",  # noqa: S106 - the working directory, not a password
        monitor_address="127.0.0.1:1",
        parallel=4,
        dryRun=True,
        info=_program_info(),
        args=["x"],
    )
    args = language_python.run_arguments(request, "127.0.0.1:2")
    assert args[-2:] == [".", "x"]
    flags = dict(zip(args[:-2:2], args[1:-2:2], strict=True))
    assert flags == {
        "--monitor": "127.0.0.1:1",
        "--engine": "127.0.0.1:2",
        "--project": "gb300",
        "--root_directory": str(paths.REPO_ROOT),
        "--stack": "dev",
        "--pwd": "/p/infra",
        "--dry_run": "true",
        "--parallel": "4",
    }
