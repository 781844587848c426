"""``stack-identity``: a stack that is a copy of another: the shipped example SSH key, another stack's payload
signing key, or another stack's cluster name.

Copying ``stacks/Pulumi.dev.yaml`` plans cleanly, yet the copy logs nobody in (the example key's private half is
nobody's), names every Azure resource like the stack it was copied from (the cluster name prefixes them all) and
signs its payloads with a key whose private half the new stack's deployer does not hold, so the upload fails in
the middle of ``pulumi up``. ``gb300 init`` writes a stack without these; this rule catches a hand-made copy.

The other stacks are the ``Pulumi.*.yaml`` files beside the planned one (:func:`siblings`), read by the plan before
the rules run (a rule reads no files); the policy pack has none, so there the rule checks only the example key.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from gb300.config import load_stack_file, stacks
from gb300.errors import Gb300Error
from gb300.findings import Level, Report
from gb300.resources import Resource
from gb300.rules.base import Kind, Rule, RuleContext, StackIdentity

RULE_ID = "stack-identity"

EXAMPLE_SSH_KEYS: tuple[str, ...] = ("AAAAC3NzaC1lZDI1NTE5AAAAIDuptD3soyOcGeTftsws1pF9pLvy/fYHdTEGGBbeVuI6",)
"""The bodies of the example SSH public keys the shipped stacks (``stacks/Pulumi.dev.yaml``,
``stacks/Pulumi.reference.yaml``, ``stacks/Pulumi.landingzone.yaml``) carry: placeholders whose private half nobody
holds."""

SHIPPED_STACKS: frozenset[str] = frozenset({"dev", "reference", "landingzone"})
"""The example stacks gb300 ships: for them the example key is an info (replace it before deploying), for any
other stack a warning. Not an error: the stack deploys, and one config change and ``pulumi up`` give the nodes
another key; another stack's cluster name or signing key is an error, since the deployment collides or fails."""


def ssh_key_body(key: str) -> str:
    """The base64 body of an OpenSSH public key line (the comment and type dropped)."""
    parts = key.split()
    return parts[1] if len(parts) > 1 else key.strip()


def is_example_ssh_key(key: str) -> bool:
    """Whether ``key`` is one of the shipped stacks' example keys."""
    return ssh_key_body(key) in EXAMPLE_SSH_KEYS


def _dig(raw: Any, *keys: str) -> str | None:
    for key in keys:
        if not isinstance(raw, dict):
            return None
        raw = raw.get(key)
    return raw if isinstance(raw, str) else None


def identity(stack: str, raw: dict[str, Any]) -> StackIdentity:
    """The identity of stack ``stack`` from its ``gb300`` namespace as read (not validated)."""
    return StackIdentity(
        stack,
        _dig(raw, "cluster", "name"),
        _dig(raw, "storage", "nodePayload", "signingPublicKey"),
    )


def siblings(stack_file: Path) -> tuple[StackIdentity, ...]:
    """The identities of the project's other stacks: the other ``Pulumi.*.yaml`` / ``.yml`` files in
    ``stack_file``'s folder when that folder is the stack folder of the Pulumi project around it (a stack file
    elsewhere has no siblings); a file that cannot be read is skipped (its own plan reports it)."""
    here = stack_file.resolve()
    project = stacks.find_project(here.parent)
    if project is None or stacks.stacks_dir(project).resolve() != here.parent:
        return ()
    out = []
    for path in stacks.stack_files(here.parent):
        if path.resolve() == here:
            continue
        try:
            raw = load_stack_file(path)
        except (Gb300Error, OSError):
            continue
        out.append(identity(stacks.name_of(path), raw))
    return tuple(out)


def check(
    stack: str | None, cluster_name: str, ssh_public_key: str, signing_key: str | None, others: Sequence[StackIdentity]
) -> Iterable[Report]:
    """A stack that carries an example SSH key, or another stack's cluster name or payload signing key."""
    if is_example_ssh_key(ssh_public_key):
        shipped = stack in SHIPPED_STACKS
        yield Report(
            Level.INFO if shipped else Level.WARNING,
            "gb300:access.sshPublicKey",
            "is the example key the shipped stacks carry: nobody holds its private half, so nobody could log in "
            + (
                "to this example stack. Put your own public key here before deploying it"
                if shipped
                else "after the deployment. Put your own public key here (cat ~/.ssh/id_ed25519.pub), or make the "
                "stack with `gb300 init` (docs/cli.md#gb300-init)"
            ),
        )
    for other in others:
        if other.cluster_name is not None and other.cluster_name == cluster_name:
            yield Report(
                Level.ERROR,
                "gb300:cluster.name",
                f"is also the cluster name of stack {other.stack!r} (got {cluster_name!r}): it prefixes every Azure "
                "name, so both stacks would name the same resource group and resources. Choose a name of its own",
            )
        if signing_key is not None and other.signing_public_key == signing_key:
            yield Report(
                Level.ERROR,
                "gb300:storage.nodePayload.signingPublicKey",
                f"is also the payload signing key of stack {other.stack!r}: this stack's deployer would need that "
                "stack's private key, and the payload upload fails in the middle of `pulumi up` without it. Make "
                "a key of its own: gb300 payload keygen --out ~/.gb300/<stack>-payload.pem "
                "(docs/node-payload.md#signing)",
            )


def _adapt(resources: Sequence[Resource], ctx: RuleContext) -> Iterable[Report]:
    del resources
    cfg = ctx.config
    assert cfg is not None  # noqa: S101 - Rule.applies checked it
    key = cfg.access.ssh_public_key
    return check(
        ctx.stack,
        cfg.cluster.name,
        key if isinstance(key, str) else "",
        cfg.storage.node_payload.signing_public_key,
        ctx.siblings,
    )


stack_identity: Rule[Any] = Rule(RULE_ID, Kind.CONFIG, check, _adapt, security=False)
