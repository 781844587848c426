"""The real Pulumi engine for the tests: the CLI built from source (scripts/build-engine) with the plugin doubles.

:func:`engine` gives a test a ready :class:`Engine` in a directory of its own:

* ``bin/``: the CLI (a hard link to the cached build, a copy across file systems), the real
  ``pulumi-language-python-exec`` beside it, and a shim per plugin double (tests/support/engine_plugins):
  ``pulumi-language-python`` and ``pulumi-resource-command``, plus any a test adds. They sit *beside* the CLI, not
  only on ``PATH``, because the engine takes a plugin found on ``PATH`` elsewhere with a warning ("using ... from
  $PATH") and a bundled one (the Python language host) next to its own executable without one (pulumi
  ``sdk/go/common/workspace/plugins.go`` ``getPluginInfoAndPath``); ``PATH`` starts with ``bin/``.
* ``PULUMI_HOME`` in the directory (no plugin cache, no credentials of the machine), ``pulumi login
  file://<dir>/state`` done, ``PULUMI_CONFIG_PASSPHRASE`` set (the passphrase secrets provider), update checks off
  (``PULUMI_SKIP_UPDATE_CHECK``) and automatic plugin downloads off (``PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION``,
  ``sdk/go/common/env/env.go``): a plugin the engine cannot find fails the run instead of being fetched.

Where the engine cannot be built (no Go, or the Go module proxy out of reach) the test is skipped with that
reason; under CI (``CI`` set) it fails instead: CI has Go and the proxy.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from gb300 import paths

BUILD_SCRIPT = paths.REPO_ROOT / "scripts" / "build-engine"
PLUGINS_DIR = Path(__file__).with_name("engine_plugins")
DOUBLES = {
    "pulumi-language-python": PLUGINS_DIR / "language_python.py",
    "pulumi-resource-command": PLUGINS_DIR / "command_provider.py",
}
"""The plugins the engine starts for gb300's program that cannot be built here (the proxy refuses their modules)."""
PASSPHRASE = "gb300-engine-test"  # noqa: S105 - the scratch stacks' passphrase secrets provider, not a secret
NO_GO_EXIT = 3
"""scripts/build-engine's exit status when Go is not on PATH."""
UNREACHABLE = ("dial tcp", "no such host", "connection refused", "i/o timeout", "proxyconnect", "403 Forbidden")


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"the Pulumi engine is needed under CI: {reason}")
    pytest.skip(reason)


def cli_bin_dir() -> Path:
    """The directory of the built CLI (built now when the cache has none: minutes, once)."""
    proc = subprocess.run([str(BUILD_SCRIPT)], capture_output=True, text=True, check=False, timeout=3600)
    if proc.returncode == NO_GO_EXIT:
        _unavailable("Go is not installed: the Pulumi engine is built from source (scripts/build-engine)")
    if proc.returncode != 0 and any(word in proc.stderr for word in UNREACHABLE):
        _unavailable(f"the Go module proxy cannot be reached to build the Pulumi engine: {proc.stderr[-600:]}")
    if proc.returncode != 0:
        pytest.fail(f"scripts/build-engine failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return Path(proc.stdout.strip().splitlines()[-1])


def shim(plugin: Path, python: str = sys.executable, env: Mapping[str, str] | None = None) -> str:
    """A plugin executable that runs the double ``plugin`` with ``python`` (the tests' virtual environment, which
    has grpcio and the Pulumi SDK's protos), exporting ``env`` first."""
    exports = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in (env or {}).items())
    return f'#!/bin/sh\n{exports}exec {shlex.quote(python)} {shlex.quote(str(plugin))} "$@"\n'


def _link_or_copy(source: Path, target: Path) -> None:
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


@dataclass
class Engine:
    """The CLI, its plugins and a logged-in file backend, all under ``root``."""

    root: Path
    bin_dir: Path
    env: dict[str, str]
    version: str
    log: list[str] = field(default_factory=list)

    def run(
        self, args: Sequence[str], cwd: Path, *, timeout: float = 900, env: Mapping[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """``pulumi <args>`` in ``cwd`` with this engine's environment (plus ``env``); never raises on failure."""
        proc = subprocess.run(
            [str(self.bin_dir / "pulumi"), *args],
            cwd=cwd,
            env={**self.env, **(env or {})},
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        self.log.append(f"$ pulumi {shlex.join(args)}  (exit {proc.returncode})\n{proc.stdout}{proc.stderr}")
        return proc

    def add_plugin(self, name: str, plugin: Path, env: Mapping[str, str] | None = None) -> None:
        """Put a plugin double beside the CLI as ``name`` (``pulumi-resource-<package>``, ...)."""
        target = self.bin_dir / name
        target.write_text(shim(plugin, env=env), encoding="utf-8")
        target.chmod(0o755)


def engine(root: Path, base_env: Mapping[str, str] | None = None) -> Engine:
    """A ready engine in ``root`` (which must be empty or missing): see the module docstring."""
    cli = cli_bin_dir()
    version = (cli.parent / "VERSION").read_text(encoding="utf-8").strip()
    bin_dir = root / "bin"
    bin_dir.mkdir(parents=True)
    _link_or_copy(cli / "pulumi", bin_dir / "pulumi")
    shutil.copy2(cli / "pulumi-language-python-exec", bin_dir / "pulumi-language-python-exec")
    (root / "home").mkdir()
    (root / "state").mkdir()
    env = dict(os.environ if base_env is None else base_env)
    for key in ("PULUMI_ACCESS_TOKEN", "PULUMI_BACKEND_URL", "PULUMI_IGNORE_AMBIENT_PLUGINS", "PULUMI_HOME"):
        env.pop(key, None)
    env.update(
        {
            "PATH": f"{bin_dir}{os.pathsep}{env.get('PATH', '/usr/bin:/bin')}",
            "PULUMI_HOME": str(root / "home"),
            "PULUMI_CONFIG_PASSPHRASE": PASSPHRASE,
            "PULUMI_SKIP_UPDATE_CHECK": "true",
            "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
        }
    )
    made = Engine(root=root, bin_dir=bin_dir, env=env, version=version)
    made.add_plugin(
        "pulumi-language-python",
        DOUBLES["pulumi-language-python"],
        env={"GB300_LANGUAGE_HOST_VERSION": version},
    )
    # -use-executor is the real host's flag; the shim passes the exec script beside it.
    language = bin_dir / "pulumi-language-python"
    language.write_text(
        language.read_text(encoding="utf-8").replace(
            '"$@"', f'-use-executor {shlex.quote(str(bin_dir / "pulumi-language-python-exec"))} "$@"'
        ),
        encoding="utf-8",
    )
    made.add_plugin("pulumi-resource-command", DOUBLES["pulumi-resource-command"])
    login = made.run(["login", f"file://{root / 'state'}"], cwd=root)
    if login.returncode != 0:
        pytest.fail(f"pulumi login failed: {login.stdout}{login.stderr}")
    return made
