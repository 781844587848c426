"""A double of ``pulumi-language-python``, the Python language host, at the engine's LanguageRuntime gRPC boundary.

Why a double: the real host is its own Go module (``github.com/pulumi/pulumi/sdk/python/cmd/pulumi-language-python/v3``)
and the Go module proxy refuses it (403 for every version), so it cannot be built here. The real Pulumi CLI
(scripts/build-engine) starts this double as it starts the real host: it finds ``pulumi-language-python`` beside
itself or on ``PATH`` (pulumi ``sdk/go/common/workspace/plugins.go`` ``getPluginInfoAndPath``), runs it in the
engine's working directory with the engine's address as the last argument
(``pkg/resource/plugin/langruntime_plugin.go`` ``NewLanguageRuntime``) and reads the port it prints.

What it does, each step read from pulumi/pulumi ``sdk/python/cmd/pulumi-language-python/main.go`` (the mirror's
v3.260 development tree: the v3.274.0 host is not in any module the proxy serves) and, at v3.274.0, from
``sdk/python/toolchain`` (pip.go, toolchain.go) and ``sdk/policy_proxy.go`` in the ``sdk/v3`` module:

* ``Run``: ``runtime.options`` (``virtualenv``, ``toolchain``) resolved against the *root directory*
  (``parseOptions``, ``resolveVirtualEnvironmentPath``); a ``virtualenv`` that is not one is refused with the
  host's words (``ValidateVenv``); ``<venv>/bin/python`` runs the real ``pulumi-language-python-exec`` (the
  v3.274.0 script from the ``sdk/v3`` module, which scripts/build-engine puts beside the CLI, as a release
  does) with ``constructArguments`` (``--monitor``, ``--engine``, ``--project``, ``--root_directory``,
  ``--stack``, ``--pwd``, ``--dry_run``, ``--parallel``, ``--organization``, the entry point, the program's
  args), in the host's own working directory, with the activated environment (``ActivateVirtualEnv``) plus
  ``PULUMI_CONFIG`` (the config as JSON, when there is any) and ``PULUMI_CONFIG_SECRET_KEYS`` (a JSON list,
  ``[]`` when none). Project, stack, monitor, engine, dry run, parallel and organization are arguments, not
  ``PULUMI_*`` variables, in this version. Exit 32 is a bail (the program already said why); any other
  non-zero exit is "program exited with non-zero exit code: N". The program writes to the host's stdout and
  stderr, which the engine shows.
* ``GetRequiredPackages``: the venv made when missing (``EnsureVenv``), then ``pip list --format json`` in it and
  the host's own script that finds each package's ``pulumi-plugin.json``; a package is a Pulumi package when it
  has that file or its name starts with ``pulumi-`` (``pulumi-policy`` and ``pulumi-esc-sdk`` excepted); its
  plugin is the file's ``name``/``version``/``server``/``parameterization``, else derived from the package's
  name and version (``packageDependencyFromPluginJSON``, ``determinePluginVersion``); ``resource: false``
  drops it. ``GetRequiredPlugins`` is unimplemented, as in the real host.
* ``InstallDependencies`` (``pulumi install``): ``python3 -m venv <venv>``, ``pip install --upgrade pip
  setuptools wheel``, ``pip install -r requirements.txt`` in the *program* directory (pip.go
  ``InstallDependencies``), the output streamed back.
* ``RunPlugin``: an analyzer (``pulumi preview --policy-pack policies``: ``pkg/resource/plugin/plugin.go``
  ``ExecPlugin`` runs a ``PulumiPolicy.yaml`` directory through its runtime) runs ``<venv>/bin/python -u -m
  pulumi.policy <args> <pack dir>`` in the pack's directory behind a policy proxy, as ``sdk/policy_proxy.go``
  does: the proxy's port is printed first, it answers ``Handshake`` itself, waits for ``ConfigureStack``, then
  starts the pack with ``PULUMI_ORGANIZATION``, ``PULUMI_PROJECT``, ``PULUMI_STACK``, ``PULUMI_DRY_RUN`` and
  ``PULUMI_CONFIG`` added, reads the port the pack prints and forwards ``ConfigureStack`` and every later call.
  Another plugin kind runs ``python <dir> <args>`` in the engine's directory.
* ``GetPluginInfo`` reports the CLI's version (the real host is released with the CLI); ``Handshake`` records
  the engine's address.

What it cannot show: everything of the real host that is not listed (the ``poetry`` and ``uv`` toolchains, the
``typechecker`` option, debugging, ``Pack``, ``Link``, code generation, ``About``), the host's health check of
the engine (the engine kills it at exit), its retries of pip, the Go host's own gRPC and logging behaviour, and
any change between the v3.260 host read here and the v3.274.0 host a release ships.
"""

from __future__ import annotations

import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import empty_pb2, json_format
from pulumi.runtime.proto import (
    analyzer_pb2,
    analyzer_pb2_grpc,
    engine_pb2,
    engine_pb2_grpc,
    language_pb2,
    language_pb2_grpc,
    plugin_pb2,
)

EXEC_NAME = "pulumi-language-python-exec"
BAILED = 32
"""``pythonProcessExitedAfterShowingUserActionableMessage``: the program already logged why it stopped."""
PACKAGES_WITHOUT_PLUGINS = frozenset({"pulumi-policy", "pulumi-esc-sdk"})
PLUGIN_JSON_PATHS_SCRIPT = """import importlib.metadata, importlib.util, os, sys, json
result = {}
for pkg_name in sys.argv[1:]:
\ttry:
\t\tdist = importlib.metadata.distribution(pkg_name)
\t\tmodule = dist.metadata['Name'].replace('-', '_')
\t\tspec = importlib.util.find_spec(module)
\t\tlocs = list(spec.submodule_search_locations or []) if spec else []
\t\tfound = [p for l in locs for p in [os.path.join(str(l), 'pulumi-plugin.json')] if os.path.isfile(p)]
\t\tresult[pkg_name] = found[0] if found else ''
\texcept Exception:
\t\tresult[pkg_name] = ''
print(json.dumps(result))"""
"""The real host's ``pulumiPluginJSONPathsScript``, verbatim."""


class HostError(Exception):
    """A request the real host would refuse, with its words."""


def go_json(value: Any) -> str:
    """JSON as Go's ``json.Marshal`` writes it: compact, map keys sorted, ``<``, ``>`` and ``&`` escaped."""
    text = json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def options_of(info: Any, *, is_plugin: bool) -> dict[str, Any]:
    """``parseOptions``: the runtime options, ``virtualenv`` defaulting to ``venv`` for a plugin (not a program)."""
    opts = json_format.MessageToDict(info.options) if info.HasField("options") else {}
    toolchain = opts.get("toolchain", "pip")
    if toolchain != "pip":
        raise HostError(f"the language host double runs the pip toolchain only (got {toolchain!r})")
    if "typechecker" in opts:
        raise HostError("the language host double does not run a typechecker")
    if is_plugin and not opts.get("virtualenv"):
        opts["virtualenv"] = "venv"
    return opts


def venv_path(root: str, opts: Mapping[str, Any]) -> Path | None:
    """``resolveVirtualEnvironmentPath``: a relative ``virtualenv`` joined (and cleaned) to the root directory."""
    option = opts.get("virtualenv")
    if not option:
        return None
    return Path(os.path.normpath(Path(root) / str(option)))


def is_venv(path: Path) -> bool:
    """``IsVirtualEnv``: the directory holds ``bin/python``."""
    return (path / "bin" / "python").is_file()


def activate(environ: Mapping[str, str], venv: Path) -> dict[str, str]:
    """``ActivateVirtualEnv``: ``<venv>/bin`` first on ``PATH``, ``VIRTUAL_ENV`` set, ``PYTHONHOME`` dropped."""
    out: dict[str, str] = {}
    for key, value in environ.items():
        if key.upper() == "PATH":
            out[key] = f"{venv / 'bin'}{os.pathsep}{value}"
        elif key.upper() not in ("PYTHONHOME", "VIRTUAL_ENV"):
            out[key] = value
    if not any(key.upper() == "PATH" for key in out):
        out["PATH"] = str(venv / "bin")
    out["VIRTUAL_ENV"] = str(venv)
    return out


def python_command(venv: Path | None) -> tuple[list[str], dict[str, str]]:
    """``tc.Command``: the venv's python with the activated environment, else ``python3`` (or ``python``) on PATH
    with the host's own environment (``CommandPath``)."""
    if venv is not None:
        return [str(venv / "bin" / "python")], activate(os.environ, venv)
    found = shutil.which("python3") or shutil.which("python")
    if found is None:
        raise HostError("failed to locate any of ['python3' 'python'] on your PATH.  Have you installed Python 3.6+?")
    return [found], dict(os.environ)


def plugin_version(package_version: str) -> str | None:
    """``determinePluginVersion``: a PEP 440 version as a plugin (semver) version; None when it cannot be made."""
    match = re.fullmatch(r"(\d+(?:\.\d+)*)(?:(a|b|rc)(\d*))?(?:\.post(\d*))?(?:\.dev(\d*))?", package_version)
    if match is None:
        return None
    numbers, pre, pre_n, post, dev = match.groups()
    segments = numbers.split(".") + ["0"] * max(0, 3 - len(numbers.split(".")))
    out = ".".join(segments)
    if pre:
        out += "-" + {"a": "alpha", "b": "beta", "rc": "rc"}[pre] + "." + pre_n
    if post is not None:
        out += "+post" + post
    if dev is not None:
        out += ("" if post is not None else "+") + "dev" + dev
    return out


def _parameterization(data: Mapping[str, Any] | None) -> plugin_pb2.PackageParameterization | None:
    if not data:
        return None
    import base64  # noqa: PLC0415 - Go decodes a []byte JSON field from base64

    value = base64.b64decode(data.get("value") or "")
    return plugin_pb2.PackageParameterization(name=data.get("name", ""), version=data.get("version", ""), value=value)


def package_dependency(name: str, version: str, plugin_json: Mapping[str, Any] | None) -> Any:
    """``packageDependencyFromPluginJSON``: the plugin a Python package needs, or None."""
    plugin_name = plugin_version_text = server = ""
    parameterization = extension = None
    if plugin_json is not None:
        if not plugin_json.get("resource"):
            return None
        plugin_name, plugin_version_text = plugin_json.get("name", ""), plugin_json.get("version", "")
        server = plugin_json.get("server", "")
        parameterization = _parameterization(plugin_json.get("parameterization"))
        extension = _parameterization(plugin_json.get("extensionParameterization"))
    plugin_name = plugin_name or name.removeprefix("pulumi-")
    if not plugin_version_text:
        derived = plugin_version(version)
        if derived is None:
            return None
        plugin_version_text = derived
    if not plugin_version_text.startswith("v"):
        plugin_version_text = "v" + plugin_version_text
    return plugin_pb2.PackageDependency(
        name=plugin_name,
        version=plugin_version_text,
        kind="resource",
        server=server,
        parameterization=parameterization,
        extension=extension,
    )


def required_packages(venv: Path | None) -> list[Any]:
    """``listPulumiPackageInfos`` and ``packageDependencyFromPluginJSON`` over the packages in ``venv``."""
    python, env = python_command(venv)
    listed = subprocess.run(
        [*python, "-m", "pip", "list", "--format", "json"], env=env, capture_output=True, text=True, check=False
    )
    if listed.returncode != 0:
        raise HostError(f"calling `{' '.join([*python, '-m', 'pip', 'list', '--format', 'json'])}`: {listed.stderr}")
    packages = [(re.sub(r"[-_.]+", "-", p["name"]).lower(), p["version"]) for p in json.loads(listed.stdout)]
    found = subprocess.run(
        [*python, "-c", PLUGIN_JSON_PATHS_SCRIPT, *[name for name, _ in packages]],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    paths: dict[str, str] = json.loads(found.stdout) if found.returncode == 0 else {}
    out = []
    for name, version in packages:
        if name in PACKAGES_WITHOUT_PLUGINS:
            continue
        path = paths.get(name, "")
        plugin_json = json.loads(Path(path).read_text(encoding="utf-8")) if path else None
        if plugin_json is None and not name.startswith("pulumi-"):
            continue
        dependency = package_dependency(name, version, plugin_json)
        if dependency is not None:
            out.append(dependency)
    return out


def install_dependencies(cwd: Path, venv: Path | None, say: Any) -> None:
    """pip.go ``InstallDependencies``: create the venv, update pip, install ``requirements.txt`` of ``cwd``."""

    def run(argv: list[str], env: Mapping[str, str] | None = None) -> None:
        proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, check=False)
        say(proc.stdout, proc.stderr)
        if proc.returncode != 0:
            raise HostError(f"{' '.join(argv)}: exit status {proc.returncode}: {proc.stderr.strip()}")

    if venv is not None:
        say("Creating virtual environment...\n", "")
        base, _ = python_command(None)
        run([*base, "-m", "venv", str(venv)])
        say("Finished creating virtual environment\n", "")
    python, env = python_command(venv)
    say("Updating pip, setuptools, and wheel in virtual environment...\n", "")
    run([*python, "-m", "pip", "install", "--upgrade", "pip", "setuptools", "wheel"], env)
    say("Finished updating\n", "")
    if (cwd / "requirements.txt").is_file():
        say("Installing dependencies in virtual environment...\n", "")
        run([*python, "-m", "pip", "install", "-r", "requirements.txt"], env)
        say("Finished installing dependencies\n", "")


def run_arguments(request: Any, engine_address: str) -> list[str]:
    """``constructArguments``: each non-empty flag, then the entry point and the program's arguments."""
    pairs = [
        ("monitor", request.monitor_address),
        ("engine", engine_address),
        ("project", request.project),
        ("root_directory", request.info.root_directory),
        ("stack", request.stack),
        ("pwd", request.pwd),
        ("dry_run", "true" if request.dryRun else "false"),
        ("parallel", str(request.parallel)),
        ("organization", request.organization),
    ]
    args = [item for key, value in pairs if value for item in (f"--{key}", value)]
    return [*args, request.info.entry_point, *request.args]


def _pump(stream: Any, kind: str, out: queue.Queue[tuple[str, bytes]]) -> None:
    for chunk in iter(lambda: stream.read1(65536), b""):
        out.put((kind, chunk))
    out.put((kind, b""))


class PolicyProxy(analyzer_pb2_grpc.AnalyzerServicer):
    """``sdk/policy_proxy.go``: answers ``Handshake``, keeps ``ConfigureStack`` until the pack is up, forwards the
    rest to the pack once it has printed its port."""

    def __init__(self) -> None:
        self.configured = threading.Event()
        self.config: Any = None
        self.ready = threading.Event()
        self.stub: Any = None
        self.failure = ""

    def ConfigureStack(self, request: Any, context: Any) -> Any:
        self.config = request
        self.configured.set()
        return analyzer_pb2.AnalyzerStackConfigureResponse()

    def Handshake(self, request: Any, context: Any) -> Any:
        return analyzer_pb2.AnalyzerHandshakeResponse()

    def attach(self, port: int) -> None:
        """Connect to the pack; forward the stack configuration it was started for."""
        self.stub = analyzer_pb2_grpc.AnalyzerStub(grpc.insecure_channel(f"127.0.0.1:{port}"))
        if self.config is not None:
            try:
                self.stub.ConfigureStack(self.config)
            except grpc.RpcError as exc:
                if exc.code() != grpc.StatusCode.UNIMPLEMENTED:
                    self.failure = f"policy pack configuration failed: {exc.details()}"
        self.ready.set()

    def _client(self, context: Any) -> Any:
        self.configured.set()  # awaitClient: a call before ConfigureStack starts the pack without it
        self.ready.wait()
        if self.failure or self.stub is None:
            context.abort(grpc.StatusCode.UNKNOWN, f"policy pack not started: {self.failure}")
        return self.stub

    def Analyze(self, request: Any, context: Any) -> Any:
        return self._client(context).Analyze(request)

    def AnalyzeStack(self, request: Any, context: Any) -> Any:
        return self._client(context).AnalyzeStack(request)

    def Remediate(self, request: Any, context: Any) -> Any:
        return self._client(context).Remediate(request)

    def GetAnalyzerInfo(self, request: Any, context: Any) -> Any:
        return self._client(context).GetAnalyzerInfo(request)

    def GetPluginInfo(self, request: Any, context: Any) -> Any:
        return self._client(context).GetPluginInfo(request)

    def Configure(self, request: Any, context: Any) -> Any:
        return self._client(context).Configure(request)

    def Cancel(self, request: Any, context: Any) -> Any:
        return self._client(context).Cancel(request)


def policy_environment(config: Any) -> dict[str, str]:
    """The variables the proxy adds for the pack from ``ConfigureStack`` (each only when non-empty)."""
    if config is None:
        return {}
    env = {
        "PULUMI_ORGANIZATION": config.organization,
        "PULUMI_PROJECT": config.project,
        "PULUMI_STACK": config.stack,
        "PULUMI_DRY_RUN": "true" if config.dry_run else "false",
        "PULUMI_CONFIG": go_json(dict(config.config)),
    }
    return {k: v for k, v in env.items() if v}


class LanguageHost(language_pb2_grpc.LanguageRuntimeServicer):
    """The LanguageRuntime methods the engine calls for a Python program and a Python policy pack."""

    def __init__(self, exec_path: Path, engine_address: str, version: str) -> None:
        self.exec_path = exec_path
        self.engine_address = engine_address
        self.version = version
        self.running: set[subprocess.Popen[bytes]] = set()

    def GetPluginInfo(self, request: Any, context: Any) -> Any:
        return plugin_pb2.PluginInfo(version=self.version)

    def Handshake(self, request: Any, context: Any) -> Any:
        self.engine_address = request.engine_address
        return language_pb2.LanguageHandshakeResponse()

    def GetRequiredPlugins(self, request: Any, context: Any) -> Any:
        context.abort(grpc.StatusCode.UNIMPLEMENTED, "method GetRequiredPlugins not implemented")

    def _log(self, message: str, severity: Any) -> None:
        if message and self.engine_address:
            stub = engine_pb2_grpc.EngineStub(grpc.insecure_channel(self.engine_address))
            stub.Log(engine_pb2.LogRequest(severity=severity, message=message, ephemeral=True))

    def GetRequiredPackages(self, request: Any, context: Any) -> Any:
        try:
            opts = options_of(request.info, is_plugin=False)
            venv = venv_path(request.info.root_directory, opts)
            if venv is not None and not is_venv(venv):
                install_dependencies(
                    Path(request.info.program_directory),
                    venv,
                    lambda out, err: (self._log(out, engine_pb2.INFO), self._log(err, engine_pb2.ERROR)),
                )
            packages = required_packages(venv)
        except HostError as exc:
            context.abort(grpc.StatusCode.UNKNOWN, str(exc))
        return language_pb2.GetRequiredPackagesResponse(packages=packages)

    def InstallDependencies(self, request: Any, context: Any) -> Iterator[Any]:
        messages: list[Any] = []

        def say(out: str, err: str) -> None:
            messages.append(language_pb2.InstallDependenciesResponse(stdout=out.encode(), stderr=err.encode()))

        yield language_pb2.InstallDependenciesResponse(stdout=b"Installing dependencies...\n\n")
        try:
            opts = options_of(request.info, is_plugin=request.is_plugin)
            install_dependencies(
                Path(request.info.program_directory), venv_path(request.info.root_directory, opts), say
            )
        except HostError as exc:
            yield from messages
            context.abort(grpc.StatusCode.UNKNOWN, str(exc))
        yield from messages
        yield language_pb2.InstallDependenciesResponse(stdout=b"Finished installing dependencies\n\n")

    def Run(self, request: Any, context: Any) -> Any:
        try:
            opts = options_of(request.info, is_plugin=False)
            venv = venv_path(request.info.root_directory, opts)
            if venv is not None and not is_venv(venv):
                raise HostError(
                    f"The 'virtualenv' option in Pulumi.yaml is set to {opts['virtualenv']!r}, but {venv!s} doesn't "
                    "appear to be a virtual environment."
                )
            python, env = python_command(venv)
        except HostError as exc:
            context.abort(grpc.StatusCode.UNKNOWN, str(exc))
        if request.config:
            env["PULUMI_CONFIG"] = go_json(dict(request.config))
        env["PULUMI_CONFIG_SECRET_KEYS"] = go_json(list(request.configSecretKeys))
        argv = [*python, str(self.exec_path), *run_arguments(request, self.engine_address)]
        sys.stdout.flush()
        proc = subprocess.Popen(argv, env=env, stdout=sys.stdout, stderr=sys.stderr)
        self.running.add(proc)
        code = proc.wait()
        self.running.discard(proc)
        if code == 0:
            return language_pb2.RunResponse()
        if code == BAILED:
            return language_pb2.RunResponse(bail=True)
        return language_pb2.RunResponse(error=f"program exited with non-zero exit code: {code}")

    def Cancel(self, request: Any, context: Any) -> Any:
        for proc in list(self.running):
            proc.send_signal(signal.SIGINT)
        return empty_pb2.Empty()

    def RunPlugin(self, request: Any, context: Any) -> Iterator[Any]:
        analyzer = request.kind == "analyzer"
        try:
            opts = options_of(request.info, is_plugin=not analyzer)
            python, env = python_command(venv_path(request.info.root_directory, opts))
        except HostError as exc:
            context.abort(grpc.StatusCode.UNKNOWN, str(exc))
        program = request.info.program_directory
        if not analyzer:
            yield from self._stream([*python, program, *request.args], request.pwd, env, request.env)
            return
        proxy = PolicyProxy()
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        analyzer_pb2_grpc.add_AnalyzerServicer_to_server(proxy, server)
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        yield language_pb2.RunPluginResponse(stdout=f"{port}\n".encode())
        proxy.configured.wait()
        env.update(policy_environment(proxy.config))
        argv = [*python, "-u", "-m", "pulumi.policy", *request.args, program]
        try:
            yield from self._stream(argv, program, env, request.env, proxy=proxy)
        finally:
            proxy.ready.set()
            server.stop(grace=None)

    def _stream(
        self, argv: list[str], cwd: str, env: dict[str, str], extra: Any, proxy: PolicyProxy | None = None
    ) -> Iterator[Any]:
        """Start ``argv`` and stream its stdout and stderr, then its exit status when not 0. Behind a proxy, the
        first line of stdout is the pack's port (not streamed)."""
        for item in extra:
            key, _, value = item.partition("=")
            env[key] = value
        proc = subprocess.Popen(argv, cwd=cwd or None, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.running.add(proc)
        if proxy is not None:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            if not line.strip().isdigit():
                proxy.failure = f"could not read policy pack port: {line!r}"
                proxy.ready.set()
            else:
                proxy.attach(int(line))
        chunks: queue.Queue[tuple[str, bytes]] = queue.Queue()
        for kind, stream in (("stdout", proc.stdout), ("stderr", proc.stderr)):
            threading.Thread(target=_pump, args=(stream, kind, chunks), daemon=True).start()
        open_streams = 2
        while open_streams:
            kind, chunk = chunks.get()
            if not chunk:
                open_streams -= 1
                continue
            yield language_pb2.RunPluginResponse(**{kind: chunk})
        code = proc.wait()
        self.running.discard(proc)
        if code != 0:
            yield language_pb2.RunPluginResponse(exitcode=code)


def main(argv: list[str]) -> int:
    """Serve on a free port of 127.0.0.1 and print it, as the real host does; the engine's address is the last
    argument. ``-use-executor PATH`` names the exec script (the real host's flag); by default it is the one beside
    this plugin's shim, which the shim passes."""
    args = list(argv)
    exec_path = Path(sys.argv[0]).with_name(EXEC_NAME)
    if "-use-executor" in args:
        at = args.index("-use-executor")
        exec_path = Path(args[at + 1])
        del args[at : at + 2]
    args = [a for a in args if not a.startswith("-")]
    version = os.environ.pop("GB300_LANGUAGE_HOST_VERSION", "")  # the shim's, not passed on to programs
    if "-version" in argv:
        print(version)
        return 0
    if not exec_path.is_file():
        print(f"missing executor {exec_path}", file=sys.stderr)
        return 1
    host = LanguageHost(exec_path, args[-1] if args else "", version)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
    language_pb2_grpc.add_LanguageRuntimeServicer_to_server(host, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(port, flush=True)
    server.wait_for_termination()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
