"""A ``pulumi stack export`` with every secret taken out, for reviews that must see the deployed state and nothing
else: the deploy and drift jobs publish it, pull requests plan against it (``gb300 plan --state``) without holding
the Pulumi access token (docs/gitops.md).

What goes:

* every Pulumi secret value, wherever it sits (inputs, outputs, provider inputs, pending operations, the stack's
  outputs): an object carrying the secret signature ``{"4dabf18193072939515e22adb298388d":
  "1b47061264138c4ac30d75fd1eb44270", ...}`` (pulumi ``sdk/go/common/resource/sig/sig.go``: ``Key``, ``Secret``)
  with its ``ciphertext`` (or ``plaintext``, after ``--show-secrets``; pulumi ``pkg/resource/stack/deployment.go``
  reads exactly one of the two) keeps its signature and gets :data:`REDACTED` as ciphertext, so the shape stays a
  secret's and no tool mistakes it for a plain value;
* ``deployment.secrets_providers``: the stack's secrets provider and its encrypted data key;
* values that are secret by nature even where a provider left them plain (:data:`ALWAYS_SECRET`).

The result is checked again before it is written: :func:`leftovers` must find nothing.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gb300.errors import UsageError
from gb300.io import writer
from gb300.plan.state import parse_state, read_state

SIG_KEY = "4dabf18193072939515e22adb298388d"
SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"  # noqa: S105 - Pulumi's signature of a secret, not one
REDACTED = "[stripped by gb300 strip-state]"
ALWAYS_SECRET: Mapping[str, frozenset[str]] = {
    # The munge key is a RandomBytes; a password would be a RandomPassword (pulumi-random's schema marks these
    # outputs secret; stripped here whatever a provider version did).
    "random:index/randomBytes:RandomBytes": frozenset({"base64", "hex"}),
    "random:index/randomPassword:RandomPassword": frozenset({"result", "bcryptHash"}),
    "random:index/randomString:RandomString": frozenset(),
}


def _redacted() -> dict[str, str]:
    return {SIG_KEY: SECRET_SIG, "ciphertext": REDACTED}


def _is_secret(node: Mapping[str, Any]) -> bool:
    return node.get(SIG_KEY) == SECRET_SIG


def _strip(node: Any) -> tuple[Any, int]:
    """``node`` with each secret replaced, and how many were."""
    if isinstance(node, Mapping):
        if _is_secret(node):
            return _redacted(), 1
        out, count = {}, 0
        for key, value in node.items():
            out[key], n = _strip(value)
            count += n
        return out, count
    if isinstance(node, list):
        items = [_strip(v) for v in node]
        return [v for v, _ in items], sum(n for _, n in items)
    return node, 0


def strip(doc: Mapping[str, Any]) -> tuple[dict[str, Any], int]:
    """A copy of an export with every secret taken out, and the number of values taken out."""
    out, count = _strip(copy.deepcopy(dict(doc)))
    deployment = out.get("deployment")
    if isinstance(deployment, dict):
        if deployment.pop("secrets_providers", None) is not None:
            count += 1
        for resource in deployment.get("resources") or []:
            if not isinstance(resource, dict):
                continue
            fields = ALWAYS_SECRET.get(str(resource.get("type")), frozenset())
            for part in ("inputs", "outputs"):
                values = resource.get(part)
                if not isinstance(values, dict):
                    continue
                for name in fields & values.keys():
                    if not (isinstance(values[name], Mapping) and values[name] == _redacted()):
                        values[name] = _redacted()
                        count += 1
    return out, count


def leftovers(doc: Any) -> list[str]:
    """Where a stripped document still holds a secret's text (a ``ciphertext``/``plaintext`` other than
    :data:`REDACTED`, or a secrets provider); empty when it is clean."""
    found: list[str] = []

    def walk(node: Any, at: str) -> None:
        if isinstance(node, Mapping):
            if _is_secret(node) and any(node.get(k) not in (None, REDACTED) for k in ("ciphertext", "plaintext")):
                found.append(at)
            for key, value in node.items():
                walk(value, f"{at}.{key}")
        elif isinstance(node, list):
            for i, value in enumerate(node):
                walk(value, f"{at}[{i}]")

    walk(doc, "$")
    deployment = doc.get("deployment") if isinstance(doc, Mapping) else None
    if isinstance(deployment, Mapping) and "secrets_providers" in deployment:
        found.append("$.deployment.secrets_providers")
    return found


def strip_file(source: Path, target: Path) -> int:
    """Read ``source`` (an export), write its stripped copy to ``target``; returns how many values went."""
    doc = read_state(source)
    parse_state(doc, where=f"state file {source}")  # the same shape checks as --state: refuse, never guess
    if source.resolve() == target.resolve():
        raise UsageError(f"--out {target} is the export itself; write the stripped copy to another file")
    stripped, count = strip(doc)
    left = leftovers(stripped)
    if left:  # a shape this module does not know: refuse rather than publish it
        raise UsageError(f"state file {source}: secrets left after stripping at {', '.join(left[:3])}")
    # an inventory of names, addresses and ids: 0600, replaced atomically, never written through a symlink
    writer.replace(target, json.dumps(stripped, indent=1) + "\n", mode=0o600, label="--out")
    return count
