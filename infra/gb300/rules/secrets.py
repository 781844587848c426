"""``stack-secrets``: the values ``gb300 plan`` could not check because they are Pulumi secrets.

Not a resource rule: it reads the typed stack config. A ``{secure: ...}`` value reaches the offline plan as a
:class:`~gb300.config.secrets.StackSecret` (the plan has no key to decrypt it); the checks that need its text
are skipped, and this rule says which, where, and where they do run (``pulumi preview`` and ``up``, whose engine
decrypts the value before the program validates the config).
"""

from __future__ import annotations

from gb300.config import StackConfig
from gb300.config.secrets import StackSecret
from gb300.findings import Level, Report
from gb300.rules.base import config_rule


@config_rule("stack-secrets")
def findings(cfg: StackConfig) -> list[Report]:
    """One info line per secret value whose checks the offline plan skipped."""
    out: list[Report] = []
    for index, url in enumerate(cfg.monitoring.alerts.webhooks):
        if isinstance(url, StackSecret):
            out.append(
                Report(
                    Level.INFO,
                    f"gb300:monitoring.alerts.webhooks[{index}]",
                    "a Pulumi secret: the plan cannot decrypt it, so its https:// check was skipped and the action "
                    "group gets a placeholder here; `pulumi preview --stack <stack>` checks the decrypted URL and "
                    "passes it to the action group as a secret",
                )
            )
    return out
