"""`pulumi preview --policy-pack policies` through the real Pulumi engine: the engine runs gb300's policy pack
through the Python language host's ``RunPlugin`` (pulumi ``pkg/resource/plugin/plugin.go`` ``ExecPlugin``; here
the host double of tests/support/engine_plugins, with its policy proxy), and the stack's config reaches the pack.

The program is a one-resource project (a ``local.Command``): gb300's own program registers azure-native resources,
whose provider double is built elsewhere. Skipped, saying why, where the engine cannot be built (not under CI).
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from gb300 import paths, rules
from tests.support import pulumi_engine

pytestmark = pytest.mark.slow
PROGRAM = textwrap.dedent(
    """\
    import pulumi
    from pulumi_command import local
    local.Command("hello", create="echo hello")
    """
)


def _project(root: Path) -> Path:
    """A Python project with the repository's virtual environment (which has gb300, pulumi-policy, pulumi-command)."""
    project = root / "project"
    project.mkdir()
    (project / ".venv").symlink_to(paths.REPO_ROOT / ".venv")
    (project / "Pulumi.yaml").write_text(
        "name: packcheck\nruntime:\n  name: python\n  options:\n    toolchain: pip\n    virtualenv: .venv\n",
        encoding="utf-8",
    )
    (project / "__main__.py").write_text(PROGRAM, encoding="utf-8")
    return project


@pytest.fixture(scope="module")
def previews(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Two previews with the pack: a stack without gb300 settings and one suppressing a rule, with a reason."""
    root = tmp_path_factory.mktemp("pack")
    engine = pulumi_engine.engine(root / "engine")
    project = _project(root)
    rule = next(r.id for r in rules.REGISTRY if r.suppressible)
    pack = str(paths.REPO_ROOT / "policies")
    out: dict[str, Any] = {"rule": rule, "log": engine.log}
    for stack, settings in (("plain", []), ("suppressing", [("rule", rule), ("reason", "engine test")])):
        engine.run(["stack", "init", stack], cwd=project)
        for key, value in settings:
            engine.run(["config", "set", "--path", f"gb300:policy.suppress[0].{key}", value], cwd=project)
        out[stack] = engine.run(["preview", "--stack", stack, "--policy-pack", pack, "--non-interactive"], cwd=project)
    return out


def test_preview_loads_the_pack_through_the_language_host(previews: dict[str, Any]) -> None:
    """`pulumi preview --policy-pack policies` starts gb300's pack and reports it among the policies it ran; a
    program with nothing to object to passes."""
    plain = previews["plain"]
    assert plain.returncode == 0, plain.stdout[-3000:] + plain.stderr[-3000:]
    assert "gb300@v" in plain.stdout
    assert "[suppressed]" not in plain.stdout


def test_the_stacks_policy_settings_reach_the_pack(previews: dict[str, Any]) -> None:
    """The stack's `gb300:policy.suppress` reaches the pack (the engine's ConfigureStack, passed on as
    PULUMI_CONFIG): its advisory names the suppressed rule and the reason, and the preview still passes."""
    suppressing = previews["suppressing"]
    assert suppressing.returncode == 0, suppressing.stdout[-3000:] + suppressing.stderr[-3000:]
    assert f"rule {previews['rule']} does not run (reason: engine test)" in suppressing.stdout
