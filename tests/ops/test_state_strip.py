"""``gb300 strip-state``: the export the deploy and drift jobs publish for pull requests holds no secret, and a plan
against it says what a plan against the full export says: adds, destroys, the head replaced, racks to roll out."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from gb300 import cli
from gb300.ops import ci_summary, state_strip
from gb300.plan import PlanResult
from tests.support import signing

SIG = {state_strip.SIG_KEY: state_strip.SECRET_SIG}
CIPHERTEXT = "v1:xRi3+sQJSJHR8sha:RM8BfzSAJI84QMl+zLGjzPvwSqV6zOSdd/I/V34h"  # the shape Pulumi writes
PLAINTEXT = "https://hooks.example.com/services/T000/B000/secret-token-in-the-url"
MUNGE = "c2VjcmV0LW11bmdlLWtleS1ieXRlcy0xMjM0NTY3ODkw"
DATA_KEY = "v1:encrypted-data-key-of-the-stack=="


def _export_with_secrets(plan: PlanResult) -> dict[str, Any]:
    """The deployed reference stack as `pulumi stack export` writes it, with secrets where Pulumi puts them: a
    secret input nested in a list, a plaintext one (`--show-secrets`), a provider's secret config, the munge key's
    RandomBytes (marked secret, and once more unmarked), the stack's secret output and the secrets provider."""
    resources: list[dict[str, Any]] = [
        {
            "urn": "urn:pulumi:reference::gb300::pulumi:pulumi:Stack::gb300-reference",
            "type": "pulumi:pulumi:Stack",
            "outputs": {"alertWebhook": {**SIG, "ciphertext": CIPHERTEXT}},
        },
        {
            "urn": "urn:pulumi:reference::gb300::pulumi:providers:azure-native::default",
            "type": "pulumi:providers:azure-native",
            "inputs": {"clientSecret": {**SIG, "ciphertext": CIPHERTEXT}, "location": "eastus2"},
        },
        {
            "urn": "urn:pulumi:reference::gb300::random:index/randomBytes:RandomBytes::ref-munge-key",
            "type": "random:index/randomBytes:RandomBytes",
            "inputs": {"length": 1024},
            "outputs": {"base64": MUNGE, "hex": {**SIG, "plaintext": json.dumps(MUNGE)}},
        },
    ]
    for r in plan.resources:
        inputs = copy.deepcopy(dict(r.inputs))
        if r.type.endswith(":ActionGroup"):  # a webhook URL that carries a token, as `pulumi config set --secret`
            inputs["webhookReceivers"] = [{"name": "hook", "serviceUri": {**SIG, "plaintext": json.dumps(PLAINTEXT)}}]
        resources.append({"urn": r.urn, "type": r.type, "id": r.id, "inputs": inputs, "outputs": {}})
    resources[-1]["outputs"] = {"nested": [{"deeper": {**SIG, "ciphertext": CIPHERTEXT}}]}
    return {
        "version": 3,
        "deployment": {
            "manifest": {"time": "2026-12-01T00:00:00Z", "version": "v3.272.0"},
            "secrets_providers": {"type": "service", "state": {"url": "https://api.pulumi.com", "key": DATA_KEY}},
            "resources": resources,
        },
    }


@pytest.fixture(scope="module")
def exported(reference_plan: PlanResult, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("state") / "state.json"
    path.write_text(json.dumps(_export_with_secrets(reference_plan)), encoding="utf-8")
    return path


def test_the_stripped_export_holds_no_secret(
    exported: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No ciphertext, plaintext, munge key or data key survives, wherever it sat; the secrets provider is gone; the
    resources are all there."""
    out = tmp_path / "stripped.json"
    assert cli.main(["strip-state", str(exported), "--out", str(out)]) == 0
    assert "secret value(s) taken out" in capsys.readouterr().out
    text = out.read_text(encoding="utf-8")
    assert PLAINTEXT in exported.read_text(encoding="utf-8")  # the fixture does carry the webhook secret
    for secret in (CIPHERTEXT, PLAINTEXT, MUNGE, DATA_KEY, "plaintext"):
        assert secret not in text
    doc = json.loads(text)
    assert "secrets_providers" not in doc["deployment"]
    assert state_strip.leftovers(doc) == []
    before = json.loads(exported.read_text(encoding="utf-8"))["deployment"]["resources"]
    assert [r["urn"] for r in doc["deployment"]["resources"]] == [r["urn"] for r in before]


def test_leftovers_see_the_secrets_of_an_unstripped_export(exported: Path) -> None:
    """The check that guards the write is not vacuous: on the export itself it finds the secrets."""
    left = state_strip.leftovers(json.loads(exported.read_text(encoding="utf-8")))
    assert "$.deployment.secrets_providers" in left
    assert any(path.endswith(".outputs.alertWebhook") for path in left)


def test_a_plan_against_the_stripped_export_sees_what_the_full_one_sees(
    exported: Path, write_stack: Any, reference_raw: dict[str, Any], tmp_path: Path
) -> None:
    """Shrinking the pool by four racks and changing the payload signing key (which every node's custom data names;
    a pin change reaches only the payload): the plan against the stripped export reports the same adds, destroys and
    racks to roll out as against the full one, and the pull request comment shows them."""
    stripped = tmp_path / "stripped.json"
    assert cli.main(["strip-state", str(exported), "--out", str(stripped)]) == 0
    raw = copy.deepcopy(reference_raw)
    raw["gpuPools"][0]["racks"] = 60
    raw = signing.with_test_key(raw)
    stack = write_stack(raw, "reference")
    summaries = []
    for state in (exported, stripped):
        out = tmp_path / f"plan-{state.stem}.json"
        assert cli.main(["plan", "--stack-file", str(stack), "--state", str(state), "--json", str(out)]) == 1
        summaries.append(json.loads(out.read_text(encoding="utf-8"))["summary"])
    assert summaries[0] == summaries[1]
    summary = summaries[1]
    # four racks, and the head: its custom data names the signing key, so `pulumi up` replaces it
    assert {k: summary["destroys"][k] for k in ("resources", "vms")} == {"resources": 5, "vms": 73}
    assert summary["needsReimage"] == {"train": 60}
    comment = ci_summary.render([ci_summary.digest({"stack": "reference", "summary": summary}, "reference")])
    assert "Against the deployed state" in comment
    assert "| `reference` | " in comment
    assert "**5 resource(s), 73 VM(s)**" in comment
    assert "60 in train" in comment


@pytest.mark.parametrize(
    ("content", "words"),
    [("[1, 2]", "is not a 'pulumi stack export' document"), ("{not json", "is not JSON")],
)
def test_what_is_not_an_export_exits_two(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, words: str
) -> None:
    """Anything but an export is refused on one line, and nothing is written."""
    source = tmp_path / "state.json"
    source.write_text(content, encoding="utf-8")
    out = tmp_path / "out.json"
    assert cli.main(["strip-state", str(source), "--out", str(out)]) == 2
    assert words in capsys.readouterr().err
    assert not out.exists()


def test_the_export_is_never_overwritten(exported: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--out naming the export itself is refused: the stripped copy never replaces the deploy job's own export."""
    assert cli.main(["strip-state", str(exported), "--out", str(exported)]) == 2
    assert "is the export itself" in capsys.readouterr().err
