"""A stack that ties Lustre to Blob. The tie is opt-in (gb300:storage.lustre.blobIntegration.enabled defaults to
false, docs/storage.md#lustre-and-blob), so tests of the tie build such a stack from another one."""

from __future__ import annotations

import copy
from typing import Any

TIE_PRINCIPAL = "3c5e9a51-7d2f-4e18-9b0a-2f6d8c41e7a3"
"""A made-up object id for the `HPC Cache Resource Provider` service principal of a test tenant."""


def tie_lustre(raw: dict[str, Any], **settings: Any) -> dict[str, Any]:
    """A copy of ``raw`` (a gb300 namespace with Lustre and a storage account) whose Lustre is tied, as the reference
    file's commented-out block shows: the checkpoints container, datasets imported, checkpoints exported;
    ``settings`` (camelCase keys) override."""
    out = copy.deepcopy(raw)
    out["storage"]["lustre"]["blobIntegration"] = {
        "enabled": True,
        "container": "checkpoints",
        "importPrefix": "/datasets",
        "exportPrefix": "/checkpoints",
        "servicePrincipalId": TIE_PRINCIPAL,
        **settings,
    }
    return out
