"""The one type of a file a node carries: its node path, text content and octal mode (imports nothing of gb300).

Every producer of node content (:mod:`gb300.node.registry`'s rows, :mod:`gb300.heal.deploy`) yields these, the
packers (:mod:`gb300.node.bundle`) pack them. No secrets: custom data and payloads are readable on the node.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class NodeFile:
    """A file a node carries: where it lands, what it holds, its octal mode (``0644`` unless said)."""

    path: str
    content: str
    permissions: str = "0644"
