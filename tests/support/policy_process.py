"""The policy pack as a process, driven over its Analyzer protocol: a fast unit harness, not the engine.

The pack (``python -m pulumi.policy <engine> policies``) is real; the caller stands in for the engine's side of the
Analyzer protocol, and a minimal Engine service takes the pack's log calls. This cannot show how the engine
starts the pack (interpreter, virtual environment, working directory, the ``PolicyProxy``'s variables) or which
calls it sends: ``tests/engine/test_policy_pack_preview.py`` and ``tests/engine/test_dev_stack.py`` run
``pulumi preview --policy-pack policies`` for that (docs/engine-contract.md).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from concurrent import futures
from typing import Any

import grpc
from google.protobuf import empty_pb2
from pulumi.runtime.proto import analyzer_pb2, analyzer_pb2_grpc, engine_pb2_grpc

from gb300 import paths

ORGANIZATION = "organization"  # what a DIY backend names the organization


class _Engine(engine_pb2_grpc.EngineServicer):
    """Takes the pack's log calls; nothing reads them (the diagnostics are the answer)."""

    def Log(self, request: Any, context: Any) -> Any:  # noqa: N802 - gRPC method names
        return empty_pb2.Empty()


def _read_port(process: subprocess.Popen[bytes], timeout: float) -> int:
    """The first line of the pack's stdout, its port; the pack's stderr when it prints anything else."""
    result: list[bytes] = []
    reader = threading.Thread(target=lambda: result.append(process.stdout.readline() if process.stdout else b""))
    reader.start()
    reader.join(timeout)
    line = result[0].decode().strip() if result else ""
    if not line.isdigit():
        process.kill()
        _, err = process.communicate()
        raise RuntimeError(f"the pack printed no port ({line!r}): {err.decode(errors='replace')[-4000:]}")
    return int(line)


@contextlib.contextmanager
def pack_process(
    stack: str, config: Mapping[str, str], *, project: str = "gb300", timeout: float = 120
) -> Iterator[analyzer_pb2_grpc.AnalyzerStub]:
    """Start ``policies/`` with this interpreter, send ``ConfigureStack`` with ``config``, and yield its client."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    engine_pb2_grpc.add_EngineServicer_to_server(_Engine(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    env = dict(os.environ, PULUMI_PROJECT=project, PULUMI_STACK=stack, PULUMI_DRY_RUN="true")
    env["PULUMI_ORGANIZATION"] = ORGANIZATION
    env["PULUMI_CONFIG"] = json.dumps(dict(config), separators=(",", ":"))
    argv = [sys.executable, "-u", "-m", "pulumi.policy", f"127.0.0.1:{port}", str(paths.POLICIES_DIR)]
    process = subprocess.Popen(
        argv, cwd=paths.POLICIES_DIR, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL
    )
    channel: grpc.Channel | None = None
    try:
        channel = grpc.insecure_channel(f"127.0.0.1:{_read_port(process, timeout)}")
        analyzer = analyzer_pb2_grpc.AnalyzerStub(channel)
        request = analyzer_pb2.AnalyzerStackConfigureRequest(
            stack=stack, project=project, organization=ORGANIZATION, dry_run=True, config=dict(config)
        )
        analyzer.ConfigureStack(request, timeout=timeout)
        yield analyzer
    finally:
        if channel is not None:
            channel.close()
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        server.stop(None)
