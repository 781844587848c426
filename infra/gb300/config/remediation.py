"""``gb300:remediation``: the self-healing loop (docs/self-healing.md), off unless the stack turns it on.

Defaults of the rails come from ``data/remediation.yaml`` (``rails``), so the data file stays their one home.
"""

from __future__ import annotations

import re
from typing import Annotated, ClassVar

from pydantic import Field

from gb300.config.base import Checks, ConfigModel
from gb300.config.checks import PathError
from gb300.facts.loader import data

_RAILS = data("remediation.yaml")["rails"]
_ROLE_ID = re.compile(
    r"^/subscriptions/[0-9a-fA-F-]{36}/providers/Microsoft\.Authorization/roleDefinitions/[0-9a-fA-F-]{36}\Z"
)
ROLE_COMMAND = (
    "gb300 heal role --subscription <id> --resource-group <resource group> > roles.json; "
    "jq '.[0]' roles.json > role.json; az role definition create --role-definition @role.json --query id -o tsv"
)
"""How an operator creates the custom role once (docs/self-healing.md#permissions)."""


class RemediationSettings(ConfigModel):
    """``gb300:remediation``: detect, drain, repair, revalidate and return GPU nodes with no human (off by default)."""

    enabled: bool = False
    """Run the remediation loop on the head. Off: nodes the health gate drains stay drained for a person."""
    requeue_jobs: bool = False
    """Requeue the jobs of a node the loop drains instead of waiting for them to end (they restart elsewhere)."""
    shadow: bool = False
    """Shadow mode: the loop runs on the live cluster and records every decision (drain, repair, rack hold, halt) but
    acts on none: no drain, no Azure call. For a first week on a new cluster."""
    guest_health_report: bool = False
    """File an Azure Guest Health Report (preview; the subscription must be enabled for `Microsoft.Impact`) naming the
    old physical host when a node's VM is moved to another host."""
    max_nodes_per_rack: Annotated[int, Field(ge=1, le=18, strict=True)] = int(_RAILS["maxNodesPerRack"])
    """At most this many nodes of one rack under repair at once (2 keeps 16 of 18 nodes schedulable)."""
    max_racks: Annotated[int, Field(ge=1, le=2000, strict=True)] = int(_RAILS["maxRacks"])
    """At most this many racks with a node under repair at once."""
    halt_share: Annotated[float, Field(gt=0, le=1)] = float(_RAILS["haltShare"])
    """Stop repairing, alert and wait for a person when more than this share of the fleet's nodes shows fault
    evidence within `haltWindowSeconds` (a bad driver rollout, a fabric event)."""
    halt_window_seconds: Annotated[int, Field(ge=60, le=86400, strict=True)] = int(_RAILS["haltWindowSeconds"])
    """The window of `haltShare`, in seconds."""
    halt_min_nodes: Annotated[int, Field(ge=1, le=100000, strict=True)] = int(_RAILS["haltMinNodes"])
    """A halt also needs more than this many nodes with fault evidence in the window (small fleets)."""
    role_definition_id: Annotated[str, Field(max_length=200)] | None = None
    """Required when `enabled`. The id of the custom role `gb300 remediation`
    (`/subscriptions/<id>/providers/Microsoft.Authorization/roleDefinitions/<guid>`), which an operator creates once
    from what `gb300 heal role` prints (`az role definition create`, docs/self-healing.md#permissions): the
    pipelines' identity cannot write role definitions. The plan assigns it to the head's remediation identity on
    the cluster's resource group, and the loop may then do exactly the calls it makes (list, restart, reimage,
    redeploy the racks' VMs) and nothing else.
    """

    def check_role_when_enabled(self) -> None:
        """The loop's role is a role definition id, and is given when the loop is on."""
        if self.role_definition_id is not None and not _ROLE_ID.match(self.role_definition_id):
            raise PathError(
                ("remediation", "roleDefinitionId"),
                "must be a role definition id /subscriptions/<guid>/providers/Microsoft.Authorization/"
                f"roleDefinitions/<guid> (got {self.role_definition_id!r})",
            )
        if self.enabled and self.role_definition_id is None:
            raise PathError(
                ("remediation", "roleDefinitionId"),
                "is required when gb300:remediation.enabled is true: the id of the custom role the loop runs with, "
                f"created once by an operator: {ROLE_COMMAND}",
            )

    CHECKS: ClassVar[Checks] = (check_role_when_enabled,)
