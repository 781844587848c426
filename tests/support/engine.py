"""Start what the Pulumi engine starts, the way the engine starts it: from the project's ``Pulumi.yaml`` (or a policy
pack's ``PulumiPolicy.yaml``), the engine's working directory, the virtual environment the Python language host
picks, the config the engine sends, and a provider's process as pulumi-command's ``local.Command`` runs it.

This module is the one home of the harness's project-reading rules (:class:`Project`, :func:`load_project`,
:func:`pwd_main`/:func:`engine_pwd`, :func:`virtualenv`, :func:`activate_virtualenv`, :func:`engine_config`):
the command provider here uses them (the program and the policy pack run under the real engine: tests/engine).

It is the *independent* model of the engine. Each function follows one engine source (pulumi/pulumi and
pulumi/pulumi-command, cited per function), never gb300's own path code: the production functions
:func:`gb300.paths.engine_pwd`, :func:`gb300.paths.project_virtualenv` and :func:`gb300.paths.from_engine_pwd`
(which the payload upload's command line is built from) are what this harness checks, and a harness that called
them would agree with itself whatever the engine does. tests/test_engine_harness.py checks that both give the
same answers on the same projects (``main`` a directory, a file, absent; a relative ``virtualenv``).
docs/engine-contract.md says what each behaviour is.

What this cannot show: the engine's gRPC between the program, the engine and the provider (the command line is
taken from the plan's recorded ``local.Command`` inputs, which the offline plan records as the engine would
receive them), and ``cloudCredentialEnvVars`` (credentials Pulumi Cloud ESC injects; the deploy jobs use none).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gb300.config import stack_yaml

PROJECT_FILES = ("Pulumi.yaml", "Pulumi.yml")
POLICY_PACK_FILE = "PulumiPolicy.yaml"
SHELL = ("/bin/sh", "-c")
"""pulumi-command ``provider/pkg/provider/local/commandOutputs.go`` ``run``: the interpreter when none is given
(on Linux and macOS)."""


@dataclass(frozen=True)
class Project:
    """What the engine reads from a project file (``Pulumi.yaml``) or a policy pack file (``PulumiPolicy.yaml``)
    to start processes."""

    root: Path
    """The directory of the file (the engine's ``Root``): the program's root directory, or the pack's own."""
    name: str
    main: str
    runtime: str
    options: Mapping[str, Any] = field(default_factory=dict)
    """``runtime.options`` (``virtualenv``, ``toolchain``, ...)."""


def load_project(root: Path, file: str | None = None) -> Project:
    """The project file in ``root``: ``Pulumi.yaml`` or ``Pulumi.yml`` when ``file`` is None (pulumi
    ``sdk/go/common/workspace/paths.go`` looks for both), else ``file`` (``PulumiPolicy.yaml`` for a policy pack,
    ``pkg/resource/plugin/plugin.go`` ``ExecPlugin``). ``runtime`` is a name or ``{name, options}``; a project
    without a name or a runtime is refused with the CLI's words (``sdk/go/common/workspace/project.go``
    ``ValidateProject``). ``root`` is taken absolute, symbolic links resolved."""
    names = PROJECT_FILES if file is None else (file,)
    found = next((root / name for name in names if (root / name).is_file()), None)
    if found is None:
        msg = f"no {' or '.join(names)} in {root}"
        raise FileNotFoundError(msg)
    doc = yaml.safe_load(found.read_text(encoding="utf-8")) or {}
    runtime = doc.get("runtime")
    name, options = (runtime, {}) if not isinstance(runtime, dict) else (runtime.get("name"), runtime.get("options"))
    if not name:
        msg = f"{found}: project is missing a 'runtime' attribute"
        raise ValueError(msg)
    if file is None and not doc.get("name"):
        msg = f"{found}: project is missing a 'name' attribute"
        raise ValueError(msg)
    return Project(
        root=root.resolve(),
        name=str(doc.get("name") or ""),
        main=str(doc.get("main") or ""),
        runtime=str(name),
        options=dict(options or {}),
    )


def pwd_main(root: Path, main: str) -> tuple[Path, str]:
    """The working directory and entry point the engine runs ``main`` of the project at ``root`` with.

    pulumi/pulumi ``pkg/engine/project.go`` ``getPwdMain``: no ``main`` -> the root and "."; a relative ``main``
    is joined to the root (and cleaned), an absolute one is taken as is; a directory becomes the pwd (entry ".")
    and a file's parent directory does (entry: its base name); a ``main`` that does not exist is refused."""
    if not main:
        return root, "."
    target = Path(main) if Path(main).is_absolute() else Path(os.path.normpath(root / main))
    if not target.exists():
        msg = f"project 'main' could not be read: {target}"
        raise FileNotFoundError(msg)
    if target.is_dir():
        return target, "."
    return target.parent, target.name


def engine_pwd(project: Project) -> Path:
    """The engine's working directory for the program and every plugin it starts: :func:`pwd_main`'s directory.

    ``pkg/engine/deployment.go`` ``ProjectInfoContext`` makes it the plugin context's ``Pwd``;
    ``pkg/resource/plugin/provider_plugin.go`` ``NewProvider`` starts each provider with ``newPlugin(ctx,
    ctx.Pwd, ...)``, and ``pkg/resource/plugin/plugin.go`` ``newPlugin`` sets ``cmd.Dir = pwd``."""
    return pwd_main(project.root, project.main)[0]


def virtualenv(project: Project) -> Path | None:
    """The virtual environment the Python language host runs the program (or the policy pack) in:
    ``runtime.options.virtualenv`` joined to the file's directory, not to ``main`` (pulumi
    ``sdk/python/toolchain/pip.go`` ``resolveVirtualEnvironmentPath(root, virtualenv)``: ``filepath.Join``, which
    cleans, for a relative one; an absolute one as is). ``root`` is ``RootDirectory``, the directory of
    ``Pulumi.yaml``, per ``sdk/python/cmd/pulumi-language-python/main.go`` ``parseOptions``; for a pack,
    ``RunPlugin`` resolves it against the pack's directory (``virtualenv: ../.venv`` -> ``<root>/.venv``)."""
    option = project.options.get("virtualenv")
    if not isinstance(option, str) or not option:
        return None
    path = Path(option)
    return path if path.is_absolute() else Path(os.path.normpath(project.root / path))


def activate_virtualenv(environ: Mapping[str, str], venv: Path) -> dict[str, str]:
    """pulumi ``sdk/python/toolchain/toolchain.go`` ``ActivateVirtualEnv``: ``<venv>/bin`` first on ``PATH``
    (compared without case; ``PATH`` is ``<venv>/bin`` alone when there was none), ``VIRTUAL_ENV`` set to
    ``venv``, ``PYTHONHOME`` removed. The language host does this for the program and a Python policy pack, not for
    provider plugins."""
    binary = str(venv / "bin")
    env: dict[str, str] = {}
    for key, value in environ.items():
        if key.upper() == "PATH":
            env[key] = f"{binary}{os.pathsep}{value}"
        elif key.upper() not in ("PYTHONHOME", "VIRTUAL_ENV"):
            env[key] = value
    if not any(key.upper() == "PATH" for key in env):
        env["PATH"] = binary
    env["VIRTUAL_ENV"] = str(venv)
    return env


def _config_text(value: Any) -> str:
    """A config value as the engine passes it: text as is, an object or list as compact JSON, a scalar as text."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return json.dumps(value)
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def _has_secure(value: Any) -> bool:
    if isinstance(value, dict):
        return set(value) == {"secure"} or any(_has_secure(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_secure(v) for v in value)
    return False


def engine_config(stack_file: Path, project: str = "gb300") -> dict[str, str]:
    """The config map the engine sends the program for ``stack_file``: every key ``namespace:name`` (a key without
    a namespace takes the project's), every value a string. Encrypted (``secure:``) values are refused: the
    harness holds no secrets provider to decrypt them. The file is read with gb300's strict stack reader (what it
    refuses, the CLI would not get to send); the keys and values are made as the engine makes them."""
    doc = stack_yaml.load(stack_file) or {}
    out: dict[str, str] = {}
    for key, value in (doc.get("config") or {}).items():
        if _has_secure(value):
            raise ValueError(f"{stack_file}: {key} holds an encrypted value; the harness cannot decrypt it")
        out[key if ":" in key else f"{project}:{key}"] = _config_text(value)
    return out


def provider_environment(
    project: Project, engine_env: Mapping[str, str], provider_config: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment the engine gives a provider plugin: its own (``os.Environ()``), then ``PULUMI_RUNTIME_<OPTION>``
    for each runtime option, ``PULUMI_PROJECT`` and ``PULUMI_CONFIG`` (the stack config of the provider's own
    namespace as JSON; ``{}`` for the command provider, which gb300 configures nothing of).

    pulumi ``pkg/resource/plugin/provider_plugin.go`` ``NewProvider`` (the ``optionsStore``), the config from
    ``pkg/host/host.go``; ``pkg/resource/plugin/plugin.go`` ``newPlugin`` appends them to ``os.Environ()``. No
    virtual environment is activated for a provider."""
    env = dict(engine_env)
    for key, value in project.options.items():
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
