"""tests/support/engine.py starts processes as the Pulumi engine does; gb300 names paths for that directory.

The harness follows pulumi's sources (``getPwdMain``, ``resolveVirtualEnvironmentPath``, ``ActivateVirtualEnv``,
``NewProvider``, pulumi-command's ``run``) and reads no gb300 path code; these tests pin each rule on small
projects, and that gb300's own :func:`gb300.paths.engine_pwd`, :func:`gb300.paths.project_virtualenv` and
:func:`gb300.paths.from_engine_pwd` (which the upload's command line is built from) agree with it on the same
projects.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import pytest

from gb300 import paths
from gb300.components.node_payload import PayloadSpec, publish_command
from gb300.config import stacks as gb300_stacks
from tests.support import engine


def _project(root: Path, text: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "Pulumi.yaml").write_text(text)
    return root


def test_a_main_that_is_a_directory_is_the_engines_working_directory(tmp_path: Path) -> None:
    """getPwdMain: ``main: infra/`` names a directory, which becomes the pwd of the program and every plugin."""
    root = _project(tmp_path / "p", "name: p\nruntime: python\nmain: infra/\n")
    (root / "infra").mkdir()
    assert engine.engine_pwd(engine.load_project(root)) == root / "infra"
    assert paths.engine_pwd(root / "Pulumi.yaml") == root / "infra"


def test_a_main_that_is_a_file_makes_its_directory_the_working_directory(tmp_path: Path) -> None:
    root = _project(tmp_path / "p", "name: p\nruntime: python\nmain: src/app.py\n")
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("")
    assert engine.engine_pwd(engine.load_project(root)) == root / "src"
    assert paths.engine_pwd(root / "Pulumi.yaml") == root / "src"


def test_no_main_is_the_project_directory(tmp_path: Path) -> None:
    root = _project(tmp_path / "p", "name: p\nruntime: python\n")
    assert engine.engine_pwd(engine.load_project(root)) == root
    assert paths.engine_pwd(root / "Pulumi.yaml") == root


def test_a_main_that_does_not_exist_is_refused_as_the_engine_refuses_it(tmp_path: Path) -> None:
    root = _project(tmp_path / "p", "name: p\nruntime: python\nmain: nowhere/\n")
    with pytest.raises(FileNotFoundError, match="project 'main' could not be read"):
        engine.engine_pwd(engine.load_project(root))


@pytest.mark.parametrize(
    ("main", "venv", "pwd"),
    [
        ("infra/", "venvs/py", "infra"),
        ("src/app.py", ".venv", "src"),
        ("", "../shared/.venv", "."),
    ],
    ids=["main-directory", "main-file", "no-main"],
)
def test_gb300s_paths_agree_with_the_harness_on_the_same_project(
    tmp_path: Path, main: str, venv: str, pwd: str
) -> None:
    """The same Pulumi.yaml read by the harness and by gb300.paths: the same engine directory, the same venv
    (relative to the project root, not to ``main``), and a path gb300 names relative to that directory leads, from
    the harness's directory, to the file it names."""
    main_line = f"main: {main}\n" if main else ""
    root = _project(
        tmp_path / "p", f"name: p\nruntime:\n  name: python\n  options:\n    virtualenv: {venv}\n{main_line}"
    )
    (root / "infra").mkdir()
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("")
    project = engine.load_project(root)
    file = root / "Pulumi.yaml"
    assert engine.engine_pwd(project) == paths.engine_pwd(file) == Path(os.path.normpath(root / pwd))
    harness_venv = engine.virtualenv(project)
    assert harness_venv == Path(os.path.normpath(root / venv))
    gb300_venv = paths.project_virtualenv(file)
    assert gb300_venv is not None
    assert Path(os.path.normpath(gb300_venv)) == harness_venv  # the same directory; gb300 leaves ".." unjoined
    for target in (harness_venv / "bin" / "python", root / "stacks" / "Pulumi.dev.yaml"):
        named = paths.from_engine_pwd(target, file)
        assert not named.startswith("/")
        assert Path(os.path.normpath(engine.engine_pwd(project) / named)) == target


def test_a_project_file_without_a_runtime_or_a_name_is_refused(tmp_path: Path) -> None:
    """ValidateProject: a project needs a name and a runtime; a directory with no project file has no project."""
    with pytest.raises(FileNotFoundError, match=r"no Pulumi\.yaml or Pulumi\.yml in"):
        engine.load_project(tmp_path)
    root = _project(tmp_path / "a", "name: p\nmain: infra/\n")
    with pytest.raises(ValueError, match="project is missing a 'runtime' attribute"):
        engine.load_project(root)
    root = _project(tmp_path / "b", "runtime: python\n")
    with pytest.raises(ValueError, match="project is missing a 'name' attribute"):
        engine.load_project(root)
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "Pulumi.yml").write_text("name: c\nruntime: python\n")
    assert engine.load_project(tmp_path / "c").name == "c"


def test_a_policy_pack_file_needs_no_name(tmp_path: Path) -> None:
    """PulumiPolicy.yaml names no project; its venv resolves against the pack's own directory."""
    (tmp_path / "pack").mkdir()
    (tmp_path / "pack" / engine.POLICY_PACK_FILE).write_text(
        "runtime:\n  name: python\n  options:\n    virtualenv: ../.venv\n"
    )
    pack = engine.load_project(tmp_path / "pack", engine.POLICY_PACK_FILE)
    assert (pack.name, pack.runtime) == ("", "python")
    assert engine.virtualenv(pack) == tmp_path / ".venv"


def test_this_project_runs_its_plugins_in_infra_and_its_program_in_the_root_venv() -> None:
    """Pulumi.yaml: ``main: infra/`` and ``virtualenv: .venv``, the venv relative to the project root, not main."""
    project = engine.load_project(paths.REPO_ROOT)
    assert engine.engine_pwd(project) == paths.REPO_ROOT / "infra" == paths.engine_pwd()
    assert engine.virtualenv(project) == paths.REPO_ROOT / ".venv" == paths.project_virtualenv()


def test_the_upload_names_the_venv_and_stack_file_relative_to_the_engines_directory() -> None:
    """The command line resolves, from infra/, to the project's Python and the stack file, and holds no
    absolute path (it is stored in the state and must be the same from every checkout)."""
    words = shlex.split(publish_command("dev", "https://a.blob.core.windows.net", "c", [PayloadSpec("head", "0", "h")]))
    pwd = engine.engine_pwd(engine.load_project(paths.REPO_ROOT))
    assert (pwd / words[0]).resolve() == (paths.REPO_ROOT / ".venv" / "bin" / "python").resolve()
    assert (pwd / words[words.index("--stack-file") + 1]).resolve() == gb300_stacks.stack_file("dev").resolve()
    assert not [w for w in words if w.startswith("/")]


def test_activating_the_virtualenv_prepends_its_bin_and_drops_pythonhome(tmp_path: Path) -> None:
    env = engine.activate_virtualenv({"PATH": "/usr/bin", "PYTHONHOME": "/x", "VIRTUAL_ENV": "/old"}, tmp_path)
    assert env == {"PATH": f"{tmp_path}/bin:/usr/bin", "VIRTUAL_ENV": str(tmp_path)}
    assert engine.activate_virtualenv({}, tmp_path)["PATH"] == f"{tmp_path}/bin"


def test_activation_matches_path_and_pythonhome_without_case(tmp_path: Path) -> None:
    """ActivateVirtualEnv compares keys with strings.EqualFold: ``Path`` is prepended to, ``pythonhome`` dropped."""
    env = engine.activate_virtualenv({"Path": "/usr/bin", "pythonhome": "/x", "virtual_env": "/old"}, tmp_path)
    assert env == {"Path": f"{tmp_path}/bin:/usr/bin", "VIRTUAL_ENV": str(tmp_path)}


def test_a_provider_gets_the_engines_environment_and_the_runtime_options(tmp_path: Path) -> None:
    """NewProvider: os.Environ(), PULUMI_RUNTIME_<OPTION>, PULUMI_PROJECT, PULUMI_CONFIG; no virtualenv."""
    project = engine.load_project(paths.REPO_ROOT)
    env = engine.provider_environment(project, {"PATH": "/usr/bin", "ARM_USE_OIDC": "true"})
    assert env["PATH"] == "/usr/bin"
    assert env["ARM_USE_OIDC"] == "true"
    assert env["PULUMI_RUNTIME_VIRTUALENV"] == ".venv"
    assert env["PULUMI_RUNTIME_TOOLCHAIN"] == "pip"
    assert env["PULUMI_PROJECT"] == "gb300"
    assert env["PULUMI_CONFIG"] == "{}"
    assert "VIRTUAL_ENV" not in env


def test_a_command_runs_with_sh_in_the_providers_directory_or_its_dir(tmp_path: Path) -> None:
    """pulumi-command's run: ``/bin/sh -c``; no ``dir`` -> the provider's own working directory; a relative
    ``dir`` resolves against it; ``environment`` is added to (and overrides) the provider's environment."""
    (tmp_path / "infra").mkdir()
    here = engine.local_command(
        "pwd; echo $A", provider_cwd=tmp_path / "infra", provider_env={"A": "1", "PATH": "/bin"}
    )
    assert here.run().stdout.split() == [str(tmp_path / "infra"), "1"]
    there = engine.local_command(
        "pwd; echo $A",
        provider_cwd=tmp_path / "infra",
        provider_env={"A": "1", "PATH": "/bin"},
        dir="..",
        environment={"A": "2"},
    )
    assert there.argv[:2] == ("/bin/sh", "-c")
    assert there.run().stdout.split() == [str(tmp_path), "2"]
