"""A double of ``pulumi-resource-command`` 1.2.1 (constraints.txt ``pulumi_command``) at the ResourceProvider gRPC
boundary: ``command:local:Command``, the one resource of pulumi-command that gb300 declares (the payload upload).

Why a double: the provider's Go module (``github.com/pulumi/pulumi-command/provider``) and the framework it is
written with (``github.com/pulumi/pulumi-go-provider``) are refused by the Go module proxy (403), so the release
cannot be built here. The real Pulumi CLI starts this double as it starts the release: ``pulumi-resource-command``
found on ``PATH`` (an ambient plugin), run in the engine's working directory (``pkg/resource/plugin/plugin.go``
``newPlugin``: ``cmd.Dir = pwd``) with the engine's address as its argument, its port read from stdout.

The behaviour of ``local.Command`` is copied from pulumi/pulumi-command v1.2.1, not its code:
``provider/pkg/provider/local/commandController.go`` (create, update, delete) and ``commandOutputs.go`` ``run``:

* the command runs as ``interpreter`` + command, ``/bin/sh -c`` by default; in ``dir`` when given (a relative
  ``dir`` against the provider's own working directory, as Go's ``exec`` does) else in the provider's working
  directory (``os.Getwd()``, the engine's pwd); with the provider's environment, then ``environment``, then
  ``PULUMI_COMMAND_STDOUT``/``PULUMI_COMMAND_STDERR`` holding the previous run's outputs when non-empty and
  ``addPreviousOutputInEnv`` is not false; ``stdin`` on standard input;
* ``stdout`` and ``stderr`` outputs are the streams with one trailing newline removed; each line is also logged
  to the engine (``logging`` not ``none``);
* a failing command fails the step with ``exit status N: running "<command>":`` and the interleaved output;
* create runs ``create`` (nothing in preview) and makes the ID ``<name><8 hex digits>``
  (``resource.NewUniqueHex(name, 8, 0)``); update runs ``update``, else ``create``, keeping the old outputs in
  preview; delete runs ``delete`` when given; read returns the state as it is;
* diff (pulumi-go-provider's default for ``infer`` resources, ``infer/resource.go`` ``diff``: the old state's
  input properties against the new inputs): a changed input is an update, a changed ``triggers`` (tagged
  ``replaceOnChanges``) a replacement.

What it cannot show: ``assetPaths``/``archivePaths``, ``remote:*`` and the ``run`` invoke (gb300 uses none;
asked for, they fail loudly), the exact schema checks and error texts of pulumi-go-provider's ``infer``
(Check only checks the types of the inputs listed above), secrets beyond the top-level inputs (a secret input
makes that input secret in the state, as the engine expects), how a release records a partially failed create,
and any change in pulumi-command after v1.2.1.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import empty_pb2, json_format, struct_pb2
from pulumi.runtime.proto import engine_pb2, engine_pb2_grpc, plugin_pb2, provider_pb2, provider_pb2_grpc

VERSION = "1.2.1"
COMMAND = "command:local:Command"
UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"
SIG = "4dabf18193072939515e22adb298388d"
SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"  # noqa: S105 - the protocol's secret marker, not a secret
STRINGS = ("create", "update", "delete", "dir", "stdin", "logging")
INPUTS = (*STRINGS, "triggers", "interpreter", "environment", "addPreviousOutputInEnv")
UNSUPPORTED = ("assetPaths", "archivePaths")
REPLACE_ON_CHANGES = ("triggers",)


def to_dict(struct: struct_pb2.Struct) -> dict[str, Any]:
    return json_format.MessageToDict(struct)


def to_struct(value: dict[str, Any]) -> struct_pb2.Struct:
    out = struct_pb2.Struct()
    out.update(value)
    return out


def is_secret(value: Any) -> bool:
    return isinstance(value, dict) and value.get(SIG) == SECRET_SIG


def reveal(props: dict[str, Any]) -> tuple[dict[str, Any], set[str]]:
    """The inputs with top-level secrets unwrapped, and the names of those that were secret."""
    plain = {k: (v["value"] if is_secret(v) else v) for k, v in props.items()}
    return plain, {k for k, v in props.items() if is_secret(v)}


def conceal(props: dict[str, Any], names: set[str]) -> dict[str, Any]:
    return {k: ({SIG: SECRET_SIG, "value": v} if k in names else v) for k, v in props.items()}


def check_failures(news: dict[str, Any]) -> list[provider_pb2.CheckFailure]:
    """The type checks of the inputs gb300 uses; an input the double does not model is refused."""
    failures = []
    for key, value in news.items():
        if value == UNKNOWN or is_secret(value):
            continue
        if key in UNSUPPORTED:
            failures.append(provider_pb2.CheckFailure(property=key, reason=f"the command double does not do {key}"))
        elif key in STRINGS and not isinstance(value, str):
            failures.append(provider_pb2.CheckFailure(property=key, reason=f"{key} must be a string"))
        elif key == "interpreter" and not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
            failures.append(provider_pb2.CheckFailure(property=key, reason="interpreter must be a list of strings"))
        elif key == "environment" and not (isinstance(value, dict) and all(isinstance(v, str) for v in value.values())):
            failures.append(provider_pb2.CheckFailure(property=key, reason="environment must map names to strings"))
    return failures


class CommandProvider(provider_pb2_grpc.ResourceProviderServicer):
    """``command:local:Command`` as pulumi-command 1.2.1 runs it."""

    def __init__(self, engine_address: str) -> None:
        self.engine = engine_pb2_grpc.EngineStub(grpc.insecure_channel(engine_address)) if engine_address else None

    def GetPluginInfo(self, request: Any, context: Any) -> Any:
        return plugin_pb2.PluginInfo(version=VERSION)

    def Handshake(self, request: Any, context: Any) -> Any:
        return provider_pb2.ProviderHandshakeResponse(accept_secrets=True, accept_resources=True)

    def CheckConfig(self, request: Any, context: Any) -> Any:
        return provider_pb2.CheckResponse(inputs=request.news)

    def DiffConfig(self, request: Any, context: Any) -> Any:
        return provider_pb2.DiffResponse(changes=provider_pb2.DiffResponse.DIFF_NONE)

    def Configure(self, request: Any, context: Any) -> Any:
        return provider_pb2.ConfigureResponse(acceptSecrets=True, supportsPreview=True, acceptResources=True)

    def GetSchema(self, request: Any, context: Any) -> Any:
        context.abort(grpc.StatusCode.UNIMPLEMENTED, "the command double has no schema")

    def Invoke(self, request: Any, context: Any) -> Any:
        context.abort(grpc.StatusCode.UNIMPLEMENTED, f"the command double does not do {request.tok}")

    def _type(self, request: Any, context: Any) -> None:
        kind = request.type or request.urn.split("::")[2]
        if kind != COMMAND:
            context.abort(grpc.StatusCode.UNIMPLEMENTED, f"the command double does only {COMMAND} (got {kind})")

    def Check(self, request: Any, context: Any) -> Any:
        self._type(request, context)
        news = to_dict(request.news)
        return provider_pb2.CheckResponse(inputs=request.news, failures=check_failures(news))

    def Diff(self, request: Any, context: Any) -> Any:
        self._type(request, context)
        olds = to_dict(request.olds)  # the state, of which only the input properties are compared (as infer does)
        news = to_dict(request.news)
        detailed: dict[str, Any] = {}
        for key in sorted(set(olds) | set(news)):
            if key not in INPUTS and key not in UNSUPPORTED:
                continue
            if key in olds and key in news and olds[key] == news[key] and news[key] != UNKNOWN:
                continue
            replace = key in REPLACE_ON_CHANGES
            if key not in olds:
                kind = provider_pb2.PropertyDiff.ADD_REPLACE if replace else provider_pb2.PropertyDiff.ADD
            elif key not in news:
                kind = provider_pb2.PropertyDiff.DELETE_REPLACE if replace else provider_pb2.PropertyDiff.DELETE
            else:
                kind = provider_pb2.PropertyDiff.UPDATE_REPLACE if replace else provider_pb2.PropertyDiff.UPDATE
            detailed[key] = provider_pb2.PropertyDiff(kind=kind, inputDiff=True)
        changes = provider_pb2.DiffResponse.DIFF_SOME if detailed else provider_pb2.DiffResponse.DIFF_NONE
        replaces = [k for k in detailed if k in REPLACE_ON_CHANGES]
        return provider_pb2.DiffResponse(
            changes=changes, diffs=list(detailed), replaces=replaces, detailedDiff=detailed, hasDetailedDiff=True
        )

    def Create(self, request: Any, context: Any) -> Any:
        self._type(request, context)
        props, hidden = reveal(to_dict(request.properties))
        ident = request.name + secrets.token_hex(4)
        state = {**props, "stdout": "", "stderr": ""}
        if not request.preview and props.get("create"):
            self._run(props["create"], props, state, request.urn, context)
        return provider_pb2.CreateResponse(id=ident, properties=to_struct(conceal(state, hidden)))

    def Update(self, request: Any, context: Any) -> Any:
        self._type(request, context)
        olds = to_dict(request.olds)
        news, hidden = reveal(to_dict(request.news))
        state = {**news, "stdout": olds.get("stdout", ""), "stderr": olds.get("stderr", "")}
        command = news.get("update") or news.get("create")
        if not request.preview and command:
            self._run(command, news, state, request.urn, context)
        return provider_pb2.UpdateResponse(properties=to_struct(conceal(state, hidden)))

    def Delete(self, request: Any, context: Any) -> Any:
        self._type(request, context)
        state, _ = reveal(to_dict(request.properties))
        if state.get("delete"):
            self._run(state["delete"], state, dict(state), request.urn, context)
        return empty_pb2.Empty()

    def Read(self, request: Any, context: Any) -> Any:
        self._type(request, context)
        return provider_pb2.ReadResponse(id=request.id, properties=request.properties, inputs=request.inputs)

    def _log(self, urn: str, text: str) -> None:
        if self.engine is None:
            return
        for line in text.splitlines():
            self.engine.Log(engine_pb2.LogRequest(severity=engine_pb2.INFO, message=line, urn=urn))

    def _run(self, command: str, inputs: dict[str, Any], state: dict[str, Any], urn: str, context: Any) -> None:
        """``commandOutputs.go`` ``run``: the command's process, its outputs into ``state``."""
        argv = [*(inputs.get("interpreter") or ["/bin/sh", "-c"]), command]
        env = dict(os.environ) | dict(inputs.get("environment") or {})
        if inputs.get("addPreviousOutputInEnv", True):
            for key, name in (("stdout", "PULUMI_COMMAND_STDOUT"), ("stderr", "PULUMI_COMMAND_STDERR")):
                if state.get(key):
                    env[name] = state[key]
        cwd = inputs.get("dir") or str(Path.cwd())
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        out, err = proc.communicate(inputs.get("stdin") or "")
        logging = inputs.get("logging", "stdoutAndStderr")
        if logging in ("stdout", "stdoutAndStderr"):
            self._log(urn, out)
        if logging in ("stderr", "stdoutAndStderr"):
            self._log(urn, err)
        if proc.returncode != 0:
            # Go's "%w: running %q:\n%s" (exec.ExitError prints "exit status N"); stdout then stderr here, where the
            # release interleaves them as written.
            context.abort(
                grpc.StatusCode.UNKNOWN, f"exit status {proc.returncode}: running {json.dumps(command)}:\n{out}{err}"
            )
        state["stdout"] = out.removesuffix("\n")
        state["stderr"] = err.removesuffix("\n")


def main(argv: list[str]) -> int:
    """Serve on a free port of 127.0.0.1 and print it; the engine's address is the last argument."""
    if "-version" in argv or "--version" in argv:
        print(VERSION)
        return 0
    args = [a for a in argv if not a.startswith("-")]
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
    provider_pb2_grpc.add_ResourceProviderServicer_to_server(CommandProvider(args[-1] if args else ""), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(port, flush=True)
    server.wait_for_termination()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
