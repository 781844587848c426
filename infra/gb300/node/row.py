"""The one shape of a file a node carries, declared: a :class:`Row` (imports nothing of gb300).

As Cluster Toolkit's startup-script runners (``modules/scripts/startup-script/variables.tf``: each runner a type, a
``source`` or ``content`` and a ``destination``), a row is plain data: its ``kind``, its ``source``, its
``destination`` on the node, its ``mode`` and the ``step`` that owns it. Conditions, name lists and content
functions are named by string and looked up in the registry's tables (:mod:`gb300.node.registry`), so a row holds
no code and a table of rows can be printed (docs/node-steps.md is generated from it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Kind = Literal["template", "repo", "content", "step", "hook"]
"""Where a row's text comes from: a Jinja template under ``templates/`` (rendered with the node context), a
repository file placed as it is, a named content function, a node step's script (``cloud-init/``), or a hook
script of the user's repository (``gb300:hooks``)."""

KINDS: tuple[Kind, ...] = ("template", "repo", "content", "step", "hook")


@dataclass(frozen=True)
class Row:
    """One file a node carries: its kind, source, node destination, mode and owner step.

    ``roles`` (empty: every role) and ``when`` (a condition's name; ``""``: always) say who carries it; a row with a
    condition needs a stack (a context built without one carries unconditioned rows only). ``each`` names a name
    list: the row is placed once per name, ``{name}`` in its source and destination. ``inline`` rows travel in the
    custom data as well as the payload; ``first`` ones run before the payload is fetched.
    """

    kind: Kind
    source: str
    destination: str
    step: str
    mode: str = "0644"
    roles: tuple[str, ...] = ()
    when: str = ""
    each: str = ""
    inline: bool = False
    first: bool = False
