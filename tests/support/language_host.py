"""Start the Pulumi program and the policy pack exactly as the Pulumi engine starts them, with a stand-in engine.

What it reads from ``Pulumi.yaml`` and ``PulumiPolicy.yaml`` (working directory and entry point, virtual
environment, its activation, the stack's config) comes from :mod:`tests.support.engine`, the one model of those
rules, which the command provider's start uses too; this module adds what the language host does with them.

Sources (pulumi/pulumi, read at v3.259; the pinned SDK is constraints.txt's ``pulumi``):

**The program** (``pulumi preview``/``up``):

* ``pkg/engine/project.go`` ``getPwdMain``: ``Pulumi.yaml``'s ``main: infra/`` is a directory, so the program's
  working directory (``pwd``) is ``<root>/infra`` and its entry point is ``.``. ``pkg/engine/deployment.go``
  ``ProjectInfoContext`` gives that ``pwd`` to every plugin (``plugin.NewContextWithRoot``), and
  ``pkg/engine/update.go`` puts it in the run (``deploy.EvalRunInfo{Pwd, Program}``).
* ``sdk/go/common/resource/plugin/langruntime_plugin.go`` ``langhost.Run`` sends the language host a
  ``RunRequest``: monitor address, ``Pwd``, the program info (root directory = the ``Pulumi.yaml`` directory,
  program directory = ``pwd``, entry point, ``runtime.options``), project, stack, organization, config (each key
  ``namespace:name``, each value a string; an object value is its JSON text), the secret keys, dry run, parallel.
* ``sdk/python/cmd/pulumi-language-python/main.go`` ``Run``: ``parseOptions`` reads ``runtime.options``;
  ``toolchain.ResolveToolchain`` (``sdk/python/toolchain/pip.go`` ``newPip``/``resolveVirtualEnvironmentPath``)
  resolves ``virtualenv: .venv`` against the *root directory* and runs ``<venv>/bin/python`` with the environment
  ``toolchain.ActivateVirtualEnv`` makes (``<venv>/bin`` first on ``PATH``, ``VIRTUAL_ENV`` set, ``PYTHONHOME``
  dropped), plus ``PULUMI_CONFIG`` (the config as JSON) and ``PULUMI_CONFIG_SECRET_KEYS`` (a JSON list, ``[]``
  when none). The interpreter runs ``pulumi-language-python-exec`` (installed beside the language host) with
  ``constructArguments``: ``--monitor``, ``--engine``, ``--project``, ``--root_directory``, ``--stack``, ``--pwd``,
  ``--dry_run``, ``--parallel``, ``--organization`` and the entry point. Project, stack, monitor, engine, dry run,
  parallel and organization are *arguments*, not ``PULUMI_*`` variables, in this version. The command's own
  ``cmd.Dir`` is not set: it inherits the language host's, which the engine starts in ``pwd``
  (``pkg/host/host.go`` ``LanguageRuntime``: ``plugin.NewLanguageRuntime(host, ctx, runtime, ctx.Pwd)``); the
  exec script then ``chdir``s to ``--pwd`` and ``runpy.run_path``s the entry point as ``__main__`` (which runpy
  looks up on ``sys.path`` when the directory has no ``__main__.py``). A ``pulumi.RunError`` is
  logged to the engine (``Engine.Log``, severity error) and exits 1; another exception is logged with its
  traceback and exits 32; an entry point without ``__main__.py`` logs "unable to find main python program" and
  exits 32. The language host turns an exit status other than 0 and 32 into "program exited with non-zero exit
  code: N".

**The policy pack** (``pulumi preview --policy-pack policies``):

* ``pkg/resource/plugin/analyzer_plugin.go`` ``NewPolicyAnalyzer``: with a Python language plugin present (every
  current CLI) the pack is run through that plugin (``newPlugin(ctx, ctx.Pwd, policyPackPath, ...,
  []string{host.ServerAddr()}, ...)``), then sent ``Handshake`` (root and program directory: the pack's
  directory) and ``ConfigureStack`` (project, stack, organization, dry run, the stack's config).
* ``pkg/resource/plugin/plugin.go`` ``ExecPlugin``: a directory with ``PulumiPolicy.yaml`` is run by the language
  plugin's ``RunPlugin`` with ``NewProgramInfo(dir, dir, ".", runtime.options)``.
* ``sdk/python/cmd/pulumi-language-python/main.go`` ``RunPlugin`` (kind ``analyzer``): the venv is resolved
  against the *pack's directory* (``virtualenv: ../.venv`` -> ``<root>/.venv``); the command is
  ``<venv>/bin/python -u -m pulumi.policy <engine address> <pack directory>`` with ``cmd.Dir`` = the pack's
  directory; a ``PolicyProxy`` (``sdk/policy_proxy.go``) answers ``Handshake`` itself, waits for
  ``ConfigureStack``, and only then starts the pack with ``PULUMI_ORGANIZATION``, ``PULUMI_PROJECT``,
  ``PULUMI_STACK``, ``PULUMI_DRY_RUN`` and ``PULUMI_CONFIG`` added, reads the port the pack prints and forwards
  ``ConfigureStack`` and every later call to it.
* pulumi-policy's Python side: ``pulumi/policy/__main__.py`` reads ``PULUMI_CONFIG`` into the SDK's config,
  configures project/stack/dry run from those variables and ``runpy.run_path``s the pack directory;
  ``pulumi_policy/policy.py`` ``PolicyPack.__init__`` serves ``AnalyzerServicer`` on ``127.0.0.1:0`` and writes
  the port and a newline to stdout.

**What this harness is, and where it differs from the engine.** It serves the SDK's own gRPC services
(``pulumi.runtime.proto`` ``ResourceMonitorServicer`` and ``EngineServicer``) on 127.0.0.1, answering with the
plan's :class:`~gb300.plan.mocks.RecordingMonitor` (the SDK's ``MockMonitor``, keeping URNs as the engine builds
them), starts the *unmodified* program (``infra/__main__.py``) in a subprocess with the argv, cwd and environment
above, and starts the policy pack with the command, cwd and environment of ``RunPlugin`` and talks to it over
``analyzer_pb2_grpc``. It cannot show:

* anything a provider does: no plugin runs; registrations are answered by the plan's mocks, as in ``gb300 plan``
  (no diffs, no state, no real ids, no ``Check`` of inputs);
* the engine's own checks on what the monitor receives (``resmon.RegisterResource``: duplicate URNs, alias and
  provider reference validation, the order of steps); the recording monitor reproduces only the duplicate check;
* the language host itself: without a Pulumi CLI there is no ``pulumi-language-python-exec``, so the program is
  run by :mod:`tests.support.pulumi_language_python_exec`, which follows the steps of that script listed above
  (same arguments, same config handling, same exit statuses); with a CLI installed (its ``pulumi-language-python``
  on ``PATH``) the real exec script beside it is used instead. Neither the ``typechecker`` option nor
  ``--attach-debugger`` is reproduced;
* the ``PolicyProxy`` in front of the pack: the harness starts the pack with the environment the proxy gives it
  and sends ``ConfigureStack`` directly, as the proxy forwards it; ``Handshake`` goes to no one (the proxy answers
  it itself). Policy pack config (``--policy-pack-config``) is sent with ``Configure`` only when a test passes it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator, Mapping, Sequence
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import empty_pb2
from pulumi.runtime.proto import (
    analyzer_pb2,
    analyzer_pb2_grpc,
    engine_pb2,
    engine_pb2_grpc,
    resource_pb2,
    resource_pb2_grpc,
)

from gb300 import paths
from gb300.plan.mocks import AzureMocks, RecordingMonitor, Registration, engine_urn
from tests.support.engine import POLICY_PACK_FILE, Project, activate_virtualenv, load_project, pwd_main, virtualenv

REPO = paths.REPO_ROOT
EXEC_NAME = "pulumi-language-python-exec"
STAND_IN_EXEC = Path(__file__).with_name("pulumi_language_python_exec.py")
DIY_ORGANIZATION = "organization"
"""The organization a DIY (file) backend reports (pulumi ``pkg/backend/diy``), which the engine passes on."""
PROGRAM_EXITED_AFTER_MESSAGE = 32
"""``pythonProcessExitedAfterShowingUserActionableMessage``: the language host adds no message of its own."""
SEVERITY = {
    engine_pb2.DEBUG: "debug",
    engine_pb2.INFO: "info",
    engine_pb2.WARNING: "warning",
    engine_pb2.ERROR: "error",
}


# --- Where and how the language host runs things (the project rules are tests/support/engine.py's) ---


def interpreter(project: Project) -> Path:
    """The ``python`` the pip toolchain runs: ``<venv>/bin/python`` (``pip.Command``)."""
    venv = virtualenv(project)
    if venv is None:
        raise ValueError(f"{project.root}: no runtime.options.virtualenv; the engine would run python3 from PATH")
    return venv / "bin" / "python"


def language_exec() -> Path:
    """The real ``pulumi-language-python-exec`` beside a ``pulumi-language-python`` on PATH (a Pulumi CLI), else
    the harness's stand-in that follows it (:mod:`tests.support.pulumi_language_python_exec`)."""
    host = shutil.which("pulumi-language-python")
    if host is not None:
        real = Path(host).resolve().parent / EXEC_NAME
        if real.is_file():
            return real
    return STAND_IN_EXEC


# --- The engine's side: the resource monitor and the engine service, over gRPC ---


@dataclass
class EngineLog:
    severity: str
    message: str
    urn: str


class _Monitor(resource_pb2_grpc.ResourceMonitorServicer):
    """The ResourceMonitor service, answered by a :class:`RecordingMonitor` (the SDK's MockMonitor)."""

    def __init__(self, recorder: RecordingMonitor) -> None:
        self.recorder = recorder

    def SupportsFeature(self, request: Any, context: Any) -> Any:  # noqa: N802 - gRPC method names
        answer = self.recorder.SupportsFeature(request)  # type: ignore[no-untyped-call]
        return resource_pb2.SupportsFeatureResponse(hasSupport=bool(answer.hasSupport))

    def GetDeploymentInfo(self, request: Any, context: Any) -> Any:  # noqa: N802
        return self.recorder.GetDeploymentInfo(request)  # type: ignore[no-untyped-call]

    def RegisterResource(self, request: Any, context: Any) -> Any:  # noqa: N802
        return self.recorder.RegisterResource(request)

    def RegisterResourceOutputs(self, request: Any, context: Any) -> Any:  # noqa: N802
        return empty_pb2.Empty()

    def RegisterPackage(self, request: Any, context: Any) -> Any:  # noqa: N802
        return self.recorder.RegisterPackage(request)

    def Invoke(self, request: Any, context: Any) -> Any:  # noqa: N802
        return self.recorder.Invoke(request)  # type: ignore[no-untyped-call]

    def ReadResource(self, request: Any, context: Any) -> Any:  # noqa: N802
        return self.recorder.ReadResource(request)  # type: ignore[no-untyped-call]

    def RegisterStackTransform(self, request: Any, context: Any) -> Any:  # noqa: N802
        return empty_pb2.Empty()

    def RegisterStackInvokeTransform(self, request: Any, context: Any) -> Any:  # noqa: N802
        return empty_pb2.Empty()

    def RegisterResourceHook(self, request: Any, context: Any) -> Any:  # noqa: N802
        return empty_pb2.Empty()

    def RegisterErrorHook(self, request: Any, context: Any) -> Any:  # noqa: N802
        return empty_pb2.Empty()

    def SignalAndWaitForShutdown(self, request: Any, context: Any) -> Any:  # noqa: N802
        return empty_pb2.Empty()


class _Engine(engine_pb2_grpc.EngineServicer):
    """The Engine service: keeps what the program logs, and its root resource."""

    def __init__(self) -> None:
        self.logs: list[EngineLog] = []
        self.root = ""
        self._lock = threading.Lock()

    def Log(self, request: Any, context: Any) -> Any:  # noqa: N802
        with self._lock:
            self.logs.append(EngineLog(SEVERITY.get(request.severity, "info"), request.message, request.urn))
        return empty_pb2.Empty()

    def GetRootResource(self, request: Any, context: Any) -> Any:  # noqa: N802
        return engine_pb2.GetRootResourceResponse(urn=self.root)

    def SetRootResource(self, request: Any, context: Any) -> Any:  # noqa: N802
        self.root = request.urn
        return engine_pb2.SetRootResourceResponse()

    def RequirePulumiVersion(self, request: Any, context: Any) -> Any:  # noqa: N802
        return engine_pb2.RequirePulumiVersionResponse()


class _StackMonitor(RecordingMonitor):
    """URNs for the run's own project and stack (the harness process's SDK settings belong to the tests)."""

    def __init__(self, mocks: AzureMocks, project: str, stack: str) -> None:
        super().__init__(mocks)
        self.project = project
        self.stack = stack

    def make_urn(self, parent: str, type_: str, name: str) -> str:
        return engine_urn(self.stack, self.project, parent, type_, name)


@contextlib.contextmanager
def engine(project: str, stack: str) -> Iterator[tuple[str, str, _StackMonitor, _Engine]]:
    """The monitor and engine services on 127.0.0.1 (ports the kernel picks): their addresses, and what they keep."""
    recorder = _StackMonitor(AzureMocks(), project, stack)
    engine_service = _Engine()
    servers = []
    addresses = []
    for add, servicer in (
        (resource_pb2_grpc.add_ResourceMonitorServicer_to_server, _Monitor(recorder)),
        (engine_pb2_grpc.add_EngineServicer_to_server, engine_service),
    ):
        server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=8),
            options=[("grpc.max_receive_message_length", 400 * 1024 * 1024)],
        )
        add(servicer, server)  # type: ignore[no-untyped-call]
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        servers.append(server)
        addresses.append(f"127.0.0.1:{port}")
    try:
        yield addresses[0], addresses[1], recorder, engine_service
    finally:
        for server in servers:
            server.stop(grace=None)


# --- The program ---


@dataclass
class ProgramRun:
    """One run of the program: how it was started and what the engine saw."""

    argv: list[str]
    cwd: Path
    env: dict[str, str]
    returncode: int
    stdout: str
    stderr: str
    registrations: list[Registration]
    duplicates: list[str]
    logs: list[EngineLog] = field(default_factory=list)

    @property
    def engine_error(self) -> str | None:
        """What the language host reports to the engine (``RunResponse.Error``): None for exit 0 and for 32,
        after which the program has shown its own message."""
        if self.returncode in (0, PROGRAM_EXITED_AFTER_MESSAGE):
            return None
        return f"program exited with non-zero exit code: {self.returncode}"

    def errors(self) -> list[str]:
        return [log.message for log in self.logs if log.severity == "error"]


def program_command(
    *,
    project: Project,
    stack: str,
    monitor: str,
    engine_address: str,
    pwd: Path,
    entry: str,
    dry_run: bool = True,
    parallel: int = 16,
    organization: str = DIY_ORGANIZATION,
) -> list[str]:
    """The language host's command line (``Run``: ``tc.Command(exec, constructArguments(req)...)``)."""
    args = [str(interpreter(project)), str(language_exec())]
    for key, value in (
        ("monitor", monitor),
        ("engine", engine_address),
        ("project", project.name),
        ("root_directory", str(project.root)),
        ("stack", stack),
        ("pwd", str(pwd)),
        ("dry_run", "true" if dry_run else "false"),
        ("parallel", str(parallel)),
        ("organization", organization),
    ):
        if value:
            args += [f"--{key}", value]
    return [*args, entry]


def program_env(project: Project, config: Mapping[str, str], secret_keys: Sequence[str] = ()) -> dict[str, str]:
    """The program's environment: the engine's own, activated for the venv, plus the config variables."""
    venv = virtualenv(project)
    env = activate_virtualenv(os.environ, venv) if venv is not None else dict(os.environ)
    env["PULUMI_CONFIG"] = json.dumps(dict(config), separators=(",", ":"))
    env["PULUMI_CONFIG_SECRET_KEYS"] = json.dumps(list(secret_keys))
    return env


def run_program(
    stack: str,
    config: Mapping[str, str],
    *,
    root: Path = REPO,
    pwd: Path | None = None,
    entry: str | None = None,
    dry_run: bool = True,
    timeout: float = 300,
) -> ProgramRun:
    """Run the project's program under the harness's engine as ``pulumi preview`` (``dry_run``) or ``up`` does.

    ``pwd``/``entry`` default to what ``getPwdMain`` gives for the project's ``main``; a test passes others only to
    show what the engine would not do.
    """
    project = load_project(root)
    engine_pwd, engine_entry = pwd_main(project.root, project.main)
    pwd = engine_pwd if pwd is None else pwd
    entry = engine_entry if entry is None else entry
    env = program_env(project, config)
    with engine(project.name, stack) as (monitor, engine_address, recorder, engine_service):
        argv = program_command(
            project=project,
            stack=stack,
            monitor=monitor,
            engine_address=engine_address,
            pwd=pwd,
            entry=entry,
            dry_run=dry_run,
        )
        # The language host is started in the program's directory (newPlugin(ctx, ctx.Pwd, ...)) and does not set
        # the exec's cmd.Dir, so the exec starts there too; it then changes to --pwd itself.
        done = subprocess.run(
            argv,
            cwd=pwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            stdin=subprocess.DEVNULL,
        )
        return ProgramRun(
            argv=argv,
            cwd=pwd,
            env=env,
            returncode=done.returncode,
            stdout=done.stdout,
            stderr=done.stderr,
            registrations=list(recorder.registrations),
            duplicates=list(recorder.duplicates),
            logs=list(engine_service.logs),
        )


# --- The policy pack ---


def policy_command(pack: Project, engine_address: str) -> list[str]:
    """``RunPlugin`` for kind ``analyzer``: ``<venv>/bin/python -u -m pulumi.policy <engine> <pack directory>``."""
    return [str(interpreter(pack)), "-u", "-m", "pulumi.policy", engine_address, str(pack.root)]


def policy_env(
    pack: Project, *, project: str, stack: str, config: Mapping[str, str], dry_run: bool = True
) -> dict[str, str]:
    """The pack's environment: the engine's, activated for the pack's venv, plus what the ``PolicyProxy`` adds from
    ``ConfigureStack`` (organization, project, stack, dry run, config)."""
    venv = virtualenv(pack)
    env = activate_virtualenv(os.environ, venv) if venv is not None else dict(os.environ)
    env["PULUMI_ORGANIZATION"] = DIY_ORGANIZATION
    env["PULUMI_PROJECT"] = project
    env["PULUMI_STACK"] = stack
    env["PULUMI_DRY_RUN"] = "true" if dry_run else "false"
    env["PULUMI_CONFIG"] = json.dumps(dict(config), separators=(",", ":"))
    return env


@dataclass
class RunningPack:
    """A policy pack process and the client the engine would use."""

    process: subprocess.Popen[bytes]
    channel: grpc.Channel
    analyzer: analyzer_pb2_grpc.AnalyzerStub
    argv: list[str]
    cwd: Path
    env: dict[str, str]


@contextlib.contextmanager
def policy_pack(
    stack: str,
    config: Mapping[str, str],
    *,
    pack_dir: Path = paths.POLICIES_DIR,
    project: str = "gb300",
    cwd: Path | None = None,
    timeout: float = 120,
) -> Iterator[RunningPack]:
    """Start the pack in ``pack_dir`` as the engine does, send it ``ConfigureStack``, and yield its client.

    ``cwd`` defaults to the pack's directory (``RunPlugin`` sets ``cmd.Dir`` so); a test passes another only to
    show what the engine would not do.
    """
    pack = load_project(pack_dir, POLICY_PACK_FILE)
    with engine(project, stack) as (_, engine_address, _recorder, _engine_service):
        argv = policy_command(pack, engine_address)
        env = policy_env(pack, project=project, stack=stack, config=config)
        where = pack.root if cwd is None else cwd
        process = subprocess.Popen(
            argv, cwd=where, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL
        )
        channel: grpc.Channel | None = None
        try:
            port = _read_port(process, timeout)
            channel = grpc.insecure_channel(f"127.0.0.1:{port}")
            analyzer = analyzer_pb2_grpc.AnalyzerStub(channel)
            analyzer.ConfigureStack(
                analyzer_pb2.AnalyzerStackConfigureRequest(
                    stack=stack, project=project, organization=DIY_ORGANIZATION, dry_run=True, config=dict(config)
                ),
                timeout=timeout,
            )
            yield RunningPack(process, channel, analyzer, argv, where, env)
        finally:
            if channel is not None:
                channel.close()
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


class PackStartError(RuntimeError):
    """The pack exited, or printed something other than a port, as ``newPlugin`` would report it."""


def _read_port(process: subprocess.Popen[bytes], timeout: float) -> int:
    """The first line of the pack's stdout, a port (``newPlugin`` reads a byte at a time up to the newline)."""
    assert process.stdout is not None
    result: list[bytes] = []
    reader = threading.Thread(target=lambda: result.append(process.stdout.readline() if process.stdout else b""))
    reader.start()
    reader.join(timeout)
    line = result[0].decode().strip() if result else ""
    if not line.isdigit():
        process.kill()
        _, err = process.communicate()
        raise PackStartError(f"could not read plugin port (read {line!r}): {err.decode(errors='replace')[-4000:]}")
    return int(line)


def analyzer_resource(urn: str, typ: str, name: str, properties: Mapping[str, Any], **extra: Any) -> Any:
    """An ``AnalyzerResource`` as the engine sends it (properties as a protobuf Struct)."""
    from google.protobuf import struct_pb2  # noqa: PLC0415

    props = struct_pb2.Struct()
    props.update(json.loads(json.dumps(dict(properties))))
    return analyzer_pb2.AnalyzerResource(urn=urn, type=typ, name=name, properties=props, **extra)
