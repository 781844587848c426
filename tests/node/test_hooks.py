"""Hooks in the node payload (gb300.node.hooks): each lands as a row of its own with the signed table beside it, and
a changed hook changes that role's payload and nothing else."""

from __future__ import annotations

import copy
import hashlib
from pathlib import Path
from typing import Any

import pytest

from gb300 import config
from gb300 import tags as gb300_tags
from gb300.node import context as node_context
from gb300.node import paths
from gb300.node.bundle import Bundle, bundle_for
from gb300.node.pack import pack_custom_data, pack_payload

# A header comment, as a user's script has: gb300 trims its own scripts' headers, never a hook's (its sha256).
SCRIPT = "#!/usr/bin/env bash\n# Warm the cache.\nset -euo pipefail\necho warm\n"


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "warm.sh").write_text(SCRIPT, encoding="utf-8")
    (root / "warm.sh").chmod(0o755)
    monkeypatch.setenv("GB300_HOOK_ROOT", str(root))
    return root


def _cfg(dev_raw: dict[str, Any]) -> config.StackConfig:
    raw = copy.deepcopy(dev_raw)
    raw["hooks"] = [{"name": "warm", "script": "warm.sh", "point": "afterHealthGate", "onFailure": "warn"}]
    return config.parse(raw)


def _gpu(cfg: config.StackConfig) -> Bundle:
    return bundle_for(node_context.build(cfg, gb300_tags.ROLE_GPU_NODE, cfg.gpu_pools[0]))


def test_a_hook_lands_executable_with_its_sha256_in_the_table(dev_raw: dict[str, Any], repo: Path) -> None:
    """The GPU node carries the hook at hooks/<name> (0755) byte for byte, comments included, the runner, and a table
    line with its sha256; the step that runs it is in the node's steps; the head carries none of it."""
    cfg = _cfg(dev_raw)
    files = {f.path: f for f in _gpu(cfg).files}
    hook = files[f"{paths.HOOK_DIR}/warm"]
    assert (hook.content, hook.permissions) == (SCRIPT, "0755")
    assert paths.RUN_HOOKS in files
    digest = hashlib.sha256(SCRIPT.encode()).hexdigest()
    assert f"afterHealthGate\twarm\t{cfg.hooks[0].timeout_seconds}\twarn\t{digest}" in files[paths.HOOKS_TABLE].content
    assert "gb300-hooks-after-gate" in _gpu(cfg).steps
    head = bundle_for(node_context.build(cfg, gb300_tags.ROLE_HEAD))
    assert not [f.path for f in head.files if f.path.startswith(paths.HOOK_DIR) or f.path == paths.HOOKS_TABLE]


def test_a_changed_hook_changes_the_payload_hash_and_nothing_else(dev_raw: dict[str, Any], repo: Path) -> None:
    """Editing the hook's script changes the GPU payload's sha256, and only the hook file and its table line; the
    steps and the head's payload stay as they were."""
    cfg = _cfg(dev_raw)
    before = _gpu(cfg)
    head_before = pack_payload(bundle_for(node_context.build(cfg, gb300_tags.ROLE_HEAD))).sha256
    (repo / "warm.sh").write_text(SCRIPT + "echo hotter\n", encoding="utf-8")
    after = _gpu(cfg)
    changed = {f.path for f in after.files} ^ {f.path for f in before.files} | {
        a.path for a, b in zip(after.files, before.files, strict=True) if a != b
    }
    assert changed == {f"{paths.HOOK_DIR}/warm", paths.HOOKS_TABLE}
    assert after.steps == before.steps
    assert pack_payload(after).sha256 != pack_payload(before).sha256
    assert pack_payload(bundle_for(node_context.build(cfg, gb300_tags.ROLE_HEAD))).sha256 == head_before
    # The custom data names the payload by its hash: that is the only reason it changes.
    old, new = pack_custom_data(before).cloud_config, pack_custom_data(after).cloud_config
    assert old.replace(pack_payload(before).sha256, "") == new.replace(pack_payload(after).sha256, "")
