"""Pulumi secrets in a stack file: the offline plan accepts them, never shows them, and passes them on as secrets."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from gb300 import cli
from gb300.plan.runner import SECRET, run_plan

# What `pulumi config set --secret` writes for a passphrase stack: v1:<nonce>:<ciphertext>, base64.
CIPHERTEXT = "v1:Qm9ndXNOb25jZQ==:c2VjcmV0LXdlYmhvb2stdG9rZW4tY2lwaGVydGV4dA=="
RECEIVER = "https://hooks.example.com/services/T0/B0/plain"


def _with_webhooks(raw: dict[str, Any], *webhooks: object) -> dict[str, Any]:
    out = copy.deepcopy(raw)
    out["monitoring"] = {"alerts": {"webhooks": list(webhooks)}}
    return out


def _receivers(resources: list[dict[str, Any]]) -> Any:
    """The action group's webhookReceivers as recorded (a secret inside makes the whole input one)."""
    [group] = [r for r in resources if r["type"] == "azure-native:monitor:ActionGroup"]
    return group["inputs"]["webhookReceivers"]


def test_a_secret_webhook_plans_and_its_ciphertext_appears_nowhere(
    dev_raw: dict[str, Any], write_stack: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`gb300 plan` on a stack whose webhook is `{secure: v1:...}`: it plans by its rules, says the https check
    was skipped for that key, keeps the ciphertext out of its text and JSON, and the action group gets a secret."""
    path = write_stack(_with_webhooks(dev_raw, {"secure": CIPHERTEXT}, RECEIVER), "secret")
    out = tmp_path / "plan.json"
    code = cli.main(["plan", "--stack-file", str(path), "--json", str(out)])
    printed = capsys.readouterr()
    assert code in {0, 1}, printed.err
    written = out.read_text(encoding="utf-8")
    for text in (printed.out, printed.err, written):
        assert CIPHERTEXT not in text
        assert "Qm9ndXNOb25jZQ" not in text
    plan = json.loads(written)
    assert _receivers(plan["resources"]) == SECRET
    [skipped] = [f for f in plan["findings"] if f["rule"] == "stack-secrets"]
    assert skipped["resource"] == "gb300:monitoring.alerts.webhooks[0]"
    assert skipped["level"] == "info"
    assert "https:// check was skipped" in skipped["message"]
    assert "stack-secrets" in printed.out


def test_a_plain_webhook_still_reaches_the_action_group_as_a_secret(dev_raw: dict[str, Any]) -> None:
    """Under `pulumi up` the engine hands the program the decrypted URL in plain text; the program still passes
    it on as a secret, so it never lands readable in the state."""
    result = run_plan("plain-webhook", _with_webhooks(dev_raw, RECEIVER))
    assert _receivers([r.as_json() for r in result.resources]) == SECRET
    assert [f for f in result.findings if f.rule == "stack-secrets"] == []


def test_a_secret_where_none_is_allowed_is_one_line_naming_the_key(
    dev_raw: dict[str, Any], write_stack: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """An alert email given as a secret: exit 2, one line naming the key, no ciphertext."""
    raw = copy.deepcopy(dev_raw)
    raw["monitoring"] = {"alerts": {"emails": [{"secure": CIPHERTEXT}]}}
    assert cli.main(["plan", "--stack-file", str(write_stack(raw, "bad")), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "gb300:monitoring.alerts.emails[0]: cannot be a Pulumi secret" in err
    assert CIPHERTEXT not in err


def test_an_invalid_plain_webhook_is_still_refused(dev_raw: dict[str, Any], write_stack: Any) -> None:
    """The check a secret skips still runs on plain values: an http:// webhook is exit 2."""
    path = write_stack(_with_webhooks(dev_raw, "http://hooks.example.com/x"), "http")
    assert cli.main(["plan", "--stack-file", str(path), "--quiet"]) == 2
