"""docs/node-payload.md#rotating-the-signing-key, walked on the dev stack as documented: a new key refused by
`gb300 plan --state` (the head VM is replaced), the documented consent makes it pass with a warning, and after
`pulumi up` the consent, no longer needed, is a warning until removed."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from gb300 import cli, config, paths
from gb300.config import stacks as gb300_stacks
from gb300.plan import run_plan
from gb300.rules import destroy
from tests.support import signing
from tests.support.state import write_stack_export

DOC = paths.REPO_ROOT / "docs" / "node-payload.md"


def _section() -> str:
    text = DOC.read_text(encoding="utf-8")
    return text.split("### Rotating the signing key", 1)[1].split("\n## ", 1)[0]


def _consent(cluster: str) -> dict[str, Any]:
    """The documented gb300:allowDestroy block, with <cluster> filled in."""
    [block] = re.findall(r"```yaml\n(.*?)```", _section(), re.DOTALL)
    doc = yaml.safe_load(block.replace("<cluster>", cluster))
    assert list(doc) == ["gb300:allowDestroy"]
    return {"allowDestroy": doc["gb300:allowDestroy"]}


def _write(path: Path, raw: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump({"config": {f"gb300:{k}": v for k, v in raw.items()}}), encoding="utf-8")
    return path


def _plan(stack: Path, state: Path, out: Path) -> tuple[int, list[dict[str, str]]]:
    code = cli.main(["plan", "--stack-file", str(stack), "--state", str(state), "--json", str(out), "--quiet"])
    return code, [f for f in json.loads(out.read_text())["findings"] if f["rule"] == destroy.RULE_ID]


def test_the_documented_rotation_steps_plan_as_the_page_says(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Step 1's keygen block pasted in, step 2's plan refuses the head's replacement, the documented consent makes
    it a warning, and after the deploy (the new plan as the state) step 5's leftover consent is a warning."""
    raw = signing.with_test_key(copy.deepcopy(config.load_stack_file(gb300_stacks.stack_file("dev"))))
    cluster = raw["cluster"]["name"]
    state = write_stack_export(tmp_path / "state.json", run_plan("dev", copy.deepcopy(raw)))
    # 1. a new key; its printed YAML carries the public key the stack file takes
    assert cli.main(["payload", "keygen", "--out", str(tmp_path / "keys" / "dev-payload-2.pem")]) == 0
    printed = yaml.safe_load("config:\n" + capsys.readouterr().out)["config"]
    new_key = printed["gb300:storage"]["nodePayload"]["signingPublicKey"]
    assert new_key != raw["storage"]["nodePayload"]["signingPublicKey"]
    raw["storage"]["nodePayload"]["signingPublicKey"] = new_key
    stack = _write(tmp_path / "Pulumi.dev.yaml", raw)
    # 2. refused: the head VM is replaced
    code, found = _plan(stack, state, tmp_path / "plan.json")
    assert code == 1
    assert [(f["level"], f["resource"].rsplit("::", 1)[-1]) for f in found] == [("error", f"{cluster}-head")]
    assert "osProfile.customData changed" in found[0]["message"]
    # ... with the documented consent it passes, the replacement a warning
    consented = {**copy.deepcopy(raw), **_consent(cluster)}
    stack = _write(stack, consented)
    code, found = _plan(stack, state, tmp_path / "plan.json")
    assert code == 0
    assert [(f["level"], f["resource"].rsplit("::", 1)[-1]) for f in found] == [("warning", f"{cluster}-head")]
    # 3. after pulumi up the deployed state is the new plan; 5. the consent left in is a warning until removed
    state = write_stack_export(tmp_path / "state-2.json", run_plan("dev", copy.deepcopy(consented)))
    code, found = _plan(stack, state, tmp_path / "plan.json")
    assert code == 0
    assert [f["level"] for f in found] == ["warning"]
    assert "names nothing this plan deletes" in found[0]["message"]
    stack = _write(stack, raw)
    code, found = _plan(stack, state, tmp_path / "plan.json")
    assert (code, found) == (0, [])
