"""Start what the Pulumi engine starts, the way the engine starts it: from the project's ``Pulumi.yaml``, the
engine's working directory, the virtual environment the Python language host picks, and a provider's process as
pulumi-command's ``local.Command`` runs it.

Each function follows one engine source (pulumi/pulumi and pulumi/pulumi-command, cited per function), not
gb300's own code: :mod:`gb300.paths` computes the same directory for the command line, and a test that used it
here would agree with itself whatever the engine does. docs/engine-contract.md says what each behaviour is.

What this cannot show: the engine's gRPC between the program, the engine and the provider (the command line is
taken from the plan's recorded ``local.Command`` inputs, which the offline plan records as the engine would
receive them), and ``cloudCredentialEnvVars`` (credentials Pulumi Cloud ESC injects; the deploy jobs use none).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

PROJECT_FILES = ("Pulumi.yaml", "Pulumi.yml")
SHELL = ("/bin/sh", "-c")
"""pulumi-command ``provider/pkg/provider/local/commandOutputs.go`` ``run``: the interpreter when none is given
(on Linux and macOS)."""


@dataclass(frozen=True)
class Project:
    """A Pulumi project as the CLI loads it: the directory holding ``Pulumi.yaml`` (the engine's ``Root``) and the
    fields the engine reads to start processes."""

    root: Path
    name: str
    main: str
    runtime_options: dict[str, Any] = field(default_factory=dict)


def load_project(root: Path) -> Project:
    """``root``'s ``Pulumi.yaml`` (or ``.yml``): pulumi ``sdk/go/common/workspace/paths.go`` looks for both."""
    for name in PROJECT_FILES:
        if (root / name).is_file():
            doc = yaml.safe_load((root / name).read_text(encoding="utf-8")) or {}
            runtime = doc.get("runtime")
            options = runtime.get("options", {}) if isinstance(runtime, dict) else {}
            return Project(root=root, name=str(doc["name"]), main=str(doc.get("main") or ""), runtime_options=options)
    msg = f"no Pulumi.yaml in {root}"
    raise FileNotFoundError(msg)


def engine_pwd(project: Project) -> Path:
    """The engine's working directory for the program and every plugin it starts.

    pulumi/pulumi ``pkg/engine/project.go`` ``getPwdMain``: no ``main`` -> the project root; a relative ``main``
    is joined to the root; a directory becomes the pwd (main ".") and a file's parent directory does (main: its
    base name). ``pkg/engine/deployment.go`` ``ProjectInfoContext`` makes it the plugin context's ``Pwd``;
    ``pkg/resource/plugin/provider_plugin.go`` ``NewProvider`` starts each provider with ``newPlugin(ctx,
    ctx.Pwd, ...)``, and ``pkg/resource/plugin/plugin.go`` ``newPlugin`` sets ``cmd.Dir = pwd``."""
    if not project.main:
        return project.root
    main = Path(project.main)
    target = main if main.is_absolute() else Path(os.path.normpath(project.root / main))
    if not target.exists():
        msg = f"project 'main' could not be read: {target}"
        raise FileNotFoundError(msg)
    return target if target.is_dir() else target.parent


def virtualenv(project: Project) -> Path | None:
    """The virtual environment the Python language host runs the program in: ``runtime.options.virtualenv``
    relative to the project root (pulumi ``sdk/python/toolchain/pip.go`` ``resolveVirtualEnvironmentPath(root,
    virtualenv)``; ``root`` is ``RootDirectory``, the directory of ``Pulumi.yaml``, per
    ``sdk/python/cmd/pulumi-language-python/main.go`` ``parseOptions``), not to ``main``."""
    venv = project.runtime_options.get("virtualenv")
    if not isinstance(venv, str) or not venv:
        return None
    return Path(venv) if Path(venv).is_absolute() else project.root / venv


def activate_virtualenv(environ: Mapping[str, str], venv: Path) -> dict[str, str]:
    """pulumi ``sdk/python/toolchain/toolchain.go`` ``ActivateVirtualEnv``: ``<venv>/bin`` first on ``PATH``
    (``PATH`` is ``<venv>/bin`` alone when there was none), ``VIRTUAL_ENV`` set to ``venv``, ``PYTHONHOME``
    removed. The language host does this for the program and a Python policy pack, not for provider plugins."""
    env = {k: v for k, v in environ.items() if k.upper() not in ("PYTHONHOME", "VIRTUAL_ENV")}
    path_key = next((k for k in env if k.upper() == "PATH"), None)
    binary = str(venv / "bin")
    if path_key is None:
        env["PATH"] = binary
    else:
        env[path_key] = f"{binary}{os.pathsep}{env[path_key]}"
    env["VIRTUAL_ENV"] = str(venv)
    return env


def provider_environment(
    project: Project, engine_env: Mapping[str, str], provider_config: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment the engine gives a provider plugin: its own (``os.Environ()``), then ``PULUMI_RUNTIME_<OPTION>``
    for each runtime option, ``PULUMI_PROJECT`` and ``PULUMI_CONFIG`` (the stack config of the provider's own
    namespace as JSON; ``{}`` for the command provider, which gb300 configures nothing of).

    pulumi ``pkg/resource/plugin/provider_plugin.go`` ``NewProvider`` (the ``optionsStore``), the config from
    ``pkg/host/host.go``; ``pkg/resource/plugin/plugin.go`` ``newPlugin`` appends them to ``os.Environ()``. No
    virtual environment is activated for a provider."""
    import json  # noqa: PLC0415

    env = dict(engine_env)
    for key, value in project.runtime_options.items():
        env[f"PULUMI_RUNTIME_{key.upper()}"] = str(value)
    env["PULUMI_PROJECT"] = project.name
    env["PULUMI_CONFIG"] = json.dumps(dict(provider_config or {}), separators=(",", ":"))
    return env


@dataclass(frozen=True)
class Launch:
    """One process as the engine (or a provider) starts it: exactly these arguments, directory and environment."""

    argv: tuple[str, ...]
    cwd: Path
    env: dict[str, str]

    def run(self, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """Start it here and wait: the provider's ``exec.CommandContext`` with ``cmd.Dir`` and ``cmd.Env``."""
        return subprocess.run(
            list(self.argv), cwd=self.cwd, env=self.env, capture_output=True, text=True, timeout=timeout, check=False
        )

    def shell(self) -> str:
        """The same start as one bash line, for a driver that runs it inside a namespace of its own."""
        import shlex  # noqa: PLC0415

        env = [f"{k}={v}" for k, v in self.env.items()]
        return f"cd {shlex.quote(str(self.cwd))} && env -i {shlex.join(env)} {shlex.join(self.argv)}"


def local_command(
    create: str,
    *,
    provider_cwd: Path,
    provider_env: Mapping[str, str],
    dir: str | None = None,
    environment: Mapping[str, str] | None = None,
    interpreter: Sequence[str] | None = None,
) -> Launch:
    """pulumi-command's ``local.Command`` run of ``create`` (pulumi/pulumi-command
    ``provider/pkg/provider/local/commandOutputs.go`` ``run``): ``interpreter`` (default ``/bin/sh -c``) plus the
    command; ``cmd.Dir`` is ``dir`` when given (a relative one resolves against the provider's own working
    directory, which is the engine's pwd) else ``os.Getwd()``; ``cmd.Env`` is ``os.Environ()`` then
    ``environment`` (Go's exec keeps the last value of a repeated key)."""
    argv = (*(interpreter or SHELL), create)
    cwd = provider_cwd if dir is None else Path(os.path.normpath(provider_cwd / dir))
    env = dict(provider_env) | dict(environment or {})
    return Launch(argv=argv, cwd=cwd, env=env)


def command_as_engine_runs_it(
    project_root: Path,
    create: str,
    engine_env: Mapping[str, str],
    *,
    dir: str | None = None,
    environment: Mapping[str, str] | None = None,
) -> Launch:
    """A ``local.Command`` of the project at ``project_root`` as ``pulumi up`` runs it there: the command
    provider started in :func:`engine_pwd` with :func:`provider_environment`, then :func:`local_command`."""
    project = load_project(project_root)
    return local_command(
        create,
        provider_cwd=engine_pwd(project),
        provider_env=provider_environment(project, engine_env),
        dir=dir,
        environment=environment,
    )
