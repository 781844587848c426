"""What a role's small custom data adds to fetch its node payload (docs/node-payload.md): two inline files.

The custom data is a small cloud-config (:func:`gb300.node.pack.pack_custom_data`): any inline row of the registry
(one that must run before anything is fetched), then ``fetch-payload`` (manifest and signature, checked with the
cluster's public key; the archive's sha256 from the signed manifest checked before anything is extracted or run;
bounded retries; a status naming the failure), then ``run-step`` for each of the role's steps in order, exactly as
the full cloud-config would run them. It carries the payload's base URL, name and public key, never the payload's
sha256: a payload change leaves it unchanged, and a node takes the newer payload in place (``gb300-payload-update``,
:func:`update_script`, which the payload itself carries: nothing needs it before the first fetch).

The base URL names the payload account, whose name derives from the subscription (known at deploy time only): the
custom data is rendered with :data:`ACCOUNT_PLACEHOLDER` there and :meth:`gb300.node.pack.CustomData.for_account`
puts the name in. Its hash (the custom data hash tag, ``tags.CUSTOM_DATA_HASH``) is of the rendered text with the
placeholder: the one deploy-time value in it is fixed for a deployed stack (subscription, cluster name and region),
so the plan and the deployed tag agree.
"""

from __future__ import annotations

from gb300.errors import BootstrapError, ConfigError, Problem
from gb300.facts import storage_facts
from gb300.io import quoting
from gb300.node import manifest, paths
from gb300.node.boot_context import BootstrapContext
from gb300.node.file import NodeFile
from gb300.node.steps import compact
from gb300.paths import CLOUD_INIT_DIR

__all__ = [
    "ACCOUNT_PLACEHOLDER",
    "FETCH_PAYLOAD",
    "PAYLOAD_ENV",
    "PAYLOAD_UPDATE",
    "fetch_files",
    "payload_settings",
    "update_script",
]

FETCH_PAYLOAD = paths.FETCH_PAYLOAD
PAYLOAD_ENV = paths.PAYLOAD_ENV
PAYLOAD_UPDATE = paths.PAYLOAD_UPDATE
ACCOUNT_PLACEHOLDER = "@GB300_PAYLOAD_ACCOUNT@"
"""Where the payload account's name goes in the rendered custom data (known at deploy time only)."""
SIGNING_KEY_PATH = "gb300:storage.nodePayload.signingPublicKey"


def payload_settings(ctx: BootstrapContext) -> tuple[str, str]:
    """The stack's payload container and public signing key; the key is required (exit 2 naming it)."""
    if ctx.stack is None:
        raise BootstrapError(f"node payload for role {ctx.role!r}: rendered without its stack config")
    settings = ctx.stack.storage.node_payload
    if not settings.signing_public_key:
        raise ConfigError(
            [
                Problem(
                    SIGNING_KEY_PATH,
                    "is required: nodes take only payloads signed by the cluster's key. Make one with "
                    "`gb300 payload keygen --out FILE` and set the public key line it prints "
                    "(docs/node-payload.md#signing)",
                )
            ]
        )
    return settings.container, settings.signing_public_key


def _payload_env(ctx: BootstrapContext, name: str) -> str:
    container, public_key = payload_settings(ctx)
    suffix = storage_facts.blob_endpoint_suffix()
    limits = manifest.limits()
    return "# fetch-payload's settings (docs/node-payload.md).\n" + quoting.env_lines(
        {
            "GB300_PAYLOAD_URL": f"https://{ACCOUNT_PLACEHOLDER}.blob.{suffix}/{container}",
            "GB300_PAYLOAD_NAME": name,
            "GB300_PAYLOAD_CLUSTER": ctx.cluster_name,
            "GB300_PAYLOAD_PUBLIC_KEY": public_key,
            "GB300_STORAGE_SUFFIX": suffix,
            "GB300_PAYLOAD_ATTEMPTS": str(ctx.node.payload_attempts),
            "GB300_PAYLOAD_BACKOFF_SECONDS": str(ctx.node.payload_backoff_seconds),
            "GB300_PAYLOAD_MANIFEST_MAX_BYTES": str(limits.manifest_max_bytes),
            "GB300_PAYLOAD_SIGNATURE_MAX_BYTES": str(limits.signature_max_bytes),
            "GB300_PAYLOAD_SERIAL_MAX_DIGITS": str(limits.serial_max_digits),
        },
        "payload.env",
    )


def update_script() -> str:
    """``gb300-payload-update``: ``fetch-payload`` (from the custom data) taking a newer payload, forward only."""
    return (
        "#!/usr/bin/env bash\n"
        "# gb300-payload-update: take the newest signed payload in place (docs/node-payload.md#updating): the same\n"
        "# fetch and checks as at boot; a manifest older than the payload in place is refused (no rollback).\n"
        "set -euo pipefail\n"
        f'GB300_PAYLOAD_UPDATE=1 exec "${{GB300_ROOT:-}}{FETCH_PAYLOAD}" "$@"\n'
    )


def fetch_files(ctx: BootstrapContext, name: str) -> tuple[NodeFile, ...]:
    """The custom data's own files: ``fetch-payload`` and ``payload.env`` for payload ``name`` (the signing key is
    required: exit 2 naming it)."""
    fetch = compact((CLOUD_INIT_DIR / "lib" / "fetch-payload").read_text(encoding="utf-8"))
    return (
        NodeFile(FETCH_PAYLOAD, fetch, "0755"),
        NodeFile(PAYLOAD_ENV, _payload_env(ctx, name)),
    )
