"""The node registry (gb300.node.steps): one declaration per step, its order checked by the renderer."""

from __future__ import annotations

import copy
import dataclasses
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from gb300 import config
from gb300.errors import BootstrapError
from gb300.node import context as node_context
from gb300.node import steps as node_steps
from gb300.node.custom_data import render_custom_data
from gb300.paths import CLOUD_INIT_DIR, REPO_ROOT


def _ctx(reference_raw: dict[str, Any], role: str = "gpu-node") -> Any:
    cfg = config.parse(copy.deepcopy(reference_raw))
    return node_context.build(cfg, role, cfg.gpu_pools[0])


def test_steps_are_declared_in_one_place_only() -> None:
    """No step list lives outside the registry: no steps.yaml, no step tuples in feature modules."""
    assert not (CLOUD_INIT_DIR / "steps.yaml").exists()
    declared = re.compile(r"^(STEPS|HEAD_STEPS|GPU_STEPS)\b|^\s+Step\(\"", re.MULTILINE)
    holders = sorted(
        str(path.relative_to(REPO_ROOT))
        for path in (REPO_ROOT / "infra").rglob("*.py")
        if declared.search(path.read_text(encoding="utf-8"))
    )
    assert holders == ["infra/gb300/node/steps.py"]


def test_every_script_is_placed_in_the_one_steps_directory(reference_raw: dict[str, Any]) -> None:
    """Every step of a role lands as /usr/local/lib/gb300/steps/<name>.sh and runs from runcmd in order."""
    for role in ("gpu-node", "head"):
        ctx = _ctx(reference_raw, role)
        doc = yaml.safe_load(render_custom_data(ctx).cloud_config)
        steps = node_steps.steps_for(ctx)
        assert doc["runcmd"] == [[node_steps.RUN_STEP, s.name] for s in steps]
        placed = {f["path"] for f in doc["write_files"]}
        assert {f"/usr/local/lib/gb300/steps/{s.name}.sh" for s in steps} <= placed
        assert not [p for p in placed if p.startswith("/usr/local/lib/gb300/features/")]


def test_conditions_follow_the_stack(reference_raw: dict[str, Any]) -> None:
    """Lustre, Blob and monitoring steps run only when the stack configures them."""
    raw = copy.deepcopy(reference_raw)
    raw["storage"] = {}
    raw["monitoring"] = {"prometheus": {"enabled": False}, "grafana": {"enabled": False}, "alerts": {"enabled": False}}
    cfg = config.parse(raw)
    names = [s.name for s in node_steps.steps_for(node_context.build(cfg, "gpu-node", cfg.gpu_pools[0]))]
    assert not {"72-lustre", "74-blobfuse2", "85-dcgm-exporter", "86-node-exporter", "87-prometheus-agent"} & set(names)
    assert {"80-fabric", "gb300-slurmd-setup", "99-ready"} <= set(names)


def test_a_step_listed_before_what_it_needs_is_refused(reference_raw: dict[str, Any], monkeypatch: Any) -> None:
    """Rendering refuses a registry where a step comes before a step it names in ``after``."""
    steps = list(node_steps.STEPS)
    fabric = next(i for i, s in enumerate(steps) if s.name == "80-fabric")
    steps.insert(0, steps.pop(fabric))
    monkeypatch.setattr(node_steps, "STEPS", tuple(steps))
    with pytest.raises(BootstrapError, match="'80-fabric' must come after '20-nvidia-driver'"):
        render_custom_data(_ctx(reference_raw))


def test_ready_must_be_last(reference_raw: dict[str, Any], monkeypatch: Any) -> None:
    """A step after 99-ready is refused: the node would be marked ready before it ran."""
    late = dataclasses.replace(node_steps.STEPS[0], name="99-zz-late", after=())
    monkeypatch.setattr(node_steps, "STEPS", (*node_steps.STEPS, late))
    with pytest.raises(BootstrapError, match="the last step must be 99-ready"):
        render_custom_data(_ctx(reference_raw))


def test_adding_a_step_is_one_entry(reference_raw: dict[str, Any], monkeypatch: Any, tmp_path: Path) -> None:
    """One registry entry and its script put the step in the role's custom data, in place, as docs/node-steps.md
    describes."""
    tree = tmp_path / "cloud-init"
    shutil.copytree(CLOUD_INIT_DIR, tree)
    (tree / "scripts" / "76-hello.sh").write_text("#!/usr/bin/env bash\nset -euo pipefail\necho hello\n")
    hello = node_steps.Step("76-hello", "scripts/76-hello.sh", ("gpu-node",), "storage", "say hello", ("74-blobfuse2",))
    steps = list(node_steps.STEPS)
    steps.insert(next(i for i, s in enumerate(steps) if s.name == "80-fabric"), hello)
    monkeypatch.setattr(node_steps, "STEPS", tuple(steps))
    monkeypatch.setattr(node_steps, "CLOUD_INIT_DIR", tree)
    doc = yaml.safe_load(render_custom_data(_ctx(reference_raw)).cloud_config)
    names = [entry[1] for entry in doc["runcmd"]]
    assert names[names.index("74-blobfuse2") + 1] == "76-hello"
    [script] = [f for f in doc["write_files"] if f["path"] == "/usr/local/lib/gb300/steps/76-hello.sh"]
    assert script["content"].endswith("echo hello\n")
    head = yaml.safe_load(render_custom_data(_ctx(reference_raw, "head")).cloud_config)
    assert "76-hello" not in [entry[1] for entry in head["runcmd"]]


@pytest.mark.slow
def test_every_step_script_passes_shellcheck() -> None:
    """Every script the registry ships as a step is shellcheck-clean, following the step library."""
    shellcheck = shutil.which("shellcheck") or str(REPO_ROOT / ".venv" / "bin" / "shellcheck")
    result = subprocess.run(
        [
            shellcheck,
            "-x",
            "-P",
            str(CLOUD_INIT_DIR / "lib"),
            *(str(CLOUD_INIT_DIR / s.script) for s in node_steps.STEPS),
        ],
        capture_output=True,
        text=True,
        check=False,
        cwd=CLOUD_INIT_DIR / "scripts",
    )
    assert result.returncode == 0, result.stdout


NOTE = node_steps.COMPACT_NOTE
CODE_ONLY_CASES = [
    pytest.param(
        "#!/usr/bin/env bash\n# header\nset -e\n\n  # indented comment\necho hi # trailing stays\n",
        f"#!/usr/bin/env bash\n{NOTE}\nset -e\necho hi # trailing stays\n",
        id="comments-and-blank-lines",
    ),
    pytest.param(
        "#!/usr/bin/env bash\n# shellcheck source=lib.sh\n. lib.sh\n  # shellcheck disable=SC2086\nx $y\n",
        f"#!/usr/bin/env bash\n{NOTE}\n# shellcheck source=lib.sh\n. lib.sh\n  # shellcheck disable=SC2086\nx $y\n",
        id="shellcheck-directives-kept",
    ),
    pytest.param(
        f"#!/usr/bin/env bash\n{NOTE}\nset -e\n",
        f"#!/usr/bin/env bash\n{NOTE}\nset -e\n",
        id="compacted-note-once",
    ),
    pytest.param(
        "#!/usr/bin/env bash\ncat >f <<'EOF'\n# kept\n\nEOF\n# dropped\n"
        'cat <<-END\n\t# kept\n\tEND\nx <<<"$v"\n# dropped\n',
        f"#!/usr/bin/env bash\n{NOTE}\ncat >f <<'EOF'\n# kept\n\nEOF\ncat <<-END\n\t# kept\n\tEND\nx <<<\"$v\"\n",
        id="here-documents-whole",
    ),
    pytest.param(
        "#!/usr/bin/env python3\n# header\n\nx = 1\n", "#!/usr/bin/env python3\n# header\n\nx = 1\n", id="not-bash"
    ),
    pytest.param("# env file\nA=1\n", "# env file\nA=1\n", id="no-shebang"),
]


@pytest.mark.parametrize(("script", "shipped"), CODE_ONLY_CASES)
def test_code_only_drops_comment_and_blank_lines_of_bash_scripts(script: str, shipped: str) -> None:
    """A bash script as custom data ships it keeps its shebang, one note, shellcheck directives, here-documents
    and every code line, and loses comment and blank lines; other files are unchanged."""
    assert node_steps.code_only(script) == shipped


def test_compact_drops_only_the_header_comments() -> None:
    """A script loses its header comment block, keeps shellcheck directives and every line after the header."""
    script = "#!/usr/bin/env bash\n# what it does\n# inputs\nset -euo pipefail\n# a comment in the body\necho hi\n"
    assert node_steps.compact(script) == (
        "#!/usr/bin/env bash\n"
        "# Documented in the gb300 repository (cloud-init/); comments trimmed for custom data.\n"
        "set -euo pipefail\n# a comment in the body\necho hi\n"
    )
    directive = "#!/usr/bin/env bash\n# shellcheck source=lib.sh\n. lib.sh\n"
    assert node_steps.compact(directive) == directive
    assert node_steps.compact("#!/usr/bin/env python3\n# header\n") == "#!/usr/bin/env python3\n# header\n"
