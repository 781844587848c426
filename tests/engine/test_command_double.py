"""The pulumi-command double (tests/support/engine_plugins/command_provider.py) at its gRPC boundary, as the engine
calls it: started as a plugin process in a working directory, its port read from stdout."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import json_format, struct_pb2
from pulumi.runtime.proto import provider_pb2, provider_pb2_grpc

from tests.support import pulumi_engine

URN = "urn:pulumi:dev::gb300::command:local:Command::payload-publish"


def _struct(value: dict[str, Any]) -> struct_pb2.Struct:
    out = struct_pb2.Struct()
    out.update(value)
    return out


@pytest.fixture
def provider(tmp_path: Path) -> Iterator[tuple[Any, Path]]:
    """The double started as the engine starts a provider: in ``tmp_path`` (the engine's pwd), port on stdout."""
    proc = subprocess.Popen(
        [sys.executable, str(pulumi_engine.DOUBLES["pulumi-resource-command"])],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    port = int(proc.stdout.readline())
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        yield provider_pb2_grpc.ResourceProviderStub(channel), tmp_path
    proc.kill()
    proc.wait()


def _create(stub: Any, inputs: dict[str, Any], preview: bool = False) -> Any:
    return stub.Create(
        provider_pb2.CreateRequest(
            urn=URN, name="payload-publish", type="command:local:Command", properties=_struct(inputs), preview=preview
        )
    )


def test_create_runs_the_command_with_sh_in_the_plugin_directory(provider: tuple[Any, Path]) -> None:
    """Without ``dir`` the command runs under /bin/sh in the directory the engine started the provider in, with
    ``environment`` added, and its stdout and stderr (one trailing newline off) become outputs."""
    stub, cwd = provider
    made = _create(stub, {"create": 'pwd; echo "$GREETING" >&2', "environment": {"GREETING": "hello"}})
    outputs = json_format.MessageToDict(made.properties)
    assert Path(outputs["stdout"]) == cwd.resolve()
    assert outputs["stderr"] == "hello"
    assert made.id.startswith("payload-publish")


def test_create_in_preview_runs_nothing(provider: tuple[Any, Path]) -> None:
    """In a preview create runs no command: nothing is written and the outputs are empty."""
    stub, cwd = provider
    made = _create(stub, {"create": "touch ran"}, preview=True)
    assert not (cwd / "ran").exists()
    assert json_format.MessageToDict(made.properties)["stdout"] == ""


def test_a_failing_command_fails_the_step_with_its_output(provider: tuple[Any, Path]) -> None:
    """A command that exits non-zero fails the create with its exit status, the command and what it printed."""
    stub, _ = provider
    with pytest.raises(grpc.RpcError) as failed:
        _create(stub, {"create": "echo no-account >&2; exit 3"})
    assert "exit status 3" in (failed.value.details() or "")
    assert "no-account" in (failed.value.details() or "")


@pytest.mark.parametrize(
    ("change", "replaced"),
    [({"create": "echo two"}, False), ({"triggers": ["b"]}, True), ({}, None)],
)
def test_diff_updates_on_inputs_and_replaces_on_triggers(
    provider: tuple[Any, Path], change: dict[str, Any], replaced: bool | None
) -> None:
    """A changed input is an update, changed ``triggers`` a replacement, unchanged inputs no change."""
    stub, _ = provider
    old = {"create": "echo one", "triggers": ["a"]}
    diff = stub.Diff(
        provider_pb2.DiffRequest(
            urn=URN,
            type="command:local:Command",
            olds=_struct(old),
            old_inputs=_struct(old),
            news=_struct(old | change),
        )
    )
    if replaced is None:
        assert diff.changes == provider_pb2.DiffResponse.DIFF_NONE
    else:
        assert diff.changes == provider_pb2.DiffResponse.DIFF_SOME
        assert bool(diff.replaces) is replaced
