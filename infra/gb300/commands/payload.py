"""``gb300 payload``: the cluster's payload signing key, and publishing node payloads (docs/node-payload.md).

Examples::

    gb300 payload keygen --out ~/.gb300/ref-payload.pem   # prints the stack YAML with the public key
    GB300_PAYLOAD_SIGNING_KEY="$(cat ~/.gb300/ref-payload.pem)" \\
      gb300 payload publish --stack ref --account-url https://refpl0a1b2c3d.blob.core.windows.net \\
      --expect head=<sha256> --expect gpu-train=<sha256>

``keygen`` writes a new Ed25519 private key (PKCS#8 PEM, mode 0600, never over an existing file; missing folders
are created, mode 0700) and prints the public key as the nested stack YAML of
``gb300:storage.nodePayload.signingPublicKey``, ready to paste under ``config:``. Keep the private key out of the
repository: CI gives it to the deploy job as the environment secret GB300_PAYLOAD_SIGNING_KEY.

``publish`` is what ``pulumi up`` runs (the payload component's ``local.Command``): it renders the stack's
payloads, refuses any whose sha256 differs from ``--expect``, signs each manifest with the key in
GB300_PAYLOAD_SIGNING_KEY (refused unless it is the stack's) and uploads with Entra ID, signed in as the
azure-native provider is (ARM_* variables; docs/cli.md#azure-sign-in).

Exit status: 0 done; 2 for a bad stack, key, URL or credential, or an upload Azure refused.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from gb300 import config
from gb300.azure import credential
from gb300.config import stacks
from gb300.errors import UsageError
from gb300.io import writer
from gb300.node import manifest
from gb300.ops import payload_publish

NAME = "payload"


def add_parser(subparsers: Any) -> None:
    """Register ``payload`` with its ``keygen`` and ``publish`` actions on the CLI's subparsers."""
    parser = subparsers.add_parser(
        NAME,
        help="make the payload signing key; sign and upload node payloads",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    keygen = actions.add_parser("keygen", help="write a new payload signing key; print its public half")
    keygen.add_argument("--out", required=True, type=Path, metavar="FILE", help="where the private key goes (0600)")
    publish = actions.add_parser("publish", help="sign and upload the stack's node payloads (what pulumi up runs)")
    source = publish.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--stack", metavar="NAME", help="the stack Pulumi.NAME.yaml of the Pulumi project in the current directory"
    )
    source.add_argument("--stack-file", type=Path, metavar="PATH", help="this stack file")
    publish.add_argument(
        "--account-url", required=True, metavar="URL", help="the payload account's https://<account>.blob.<suffix>"
    )
    publish.add_argument("--container", metavar="NAME", help="default: gb300:storage.nodePayload.container")
    publish.add_argument(
        "--expect",
        action="append",
        default=[],
        metavar="NAME=SHA256",
        help="a payload and the sha256 the deployment declared (repeat for each; all required)",
    )
    publish.add_argument(
        "--role-wait-seconds",
        type=float,
        default=payload_publish.ROLE_WAIT_SECONDS,
        metavar="S",
        help=f"retry 403 AuthorizationPermissionMismatch this long (default {payload_publish.ROLE_WAIT_SECONDS})",
    )


def run(args: argparse.Namespace) -> int:
    if args.action == "keygen":
        return _keygen(args.out)
    return _publish(args)


def write_signing_key(out: Path, *, flag: str = "--out") -> str:
    """Write a new Ed25519 payload signing key to ``out`` (:func:`write_private_key`); return the public key's
    base64 (the stack's ``signingPublicKey``)."""
    pem, line = manifest.generate_key()
    write_private_key(out, pem, flag=flag)
    return line


def write_private_key(out: Path, pem: bytes, *, flag: str = "--out") -> None:
    """Write ``pem`` to ``out`` with mode 0600, never over an existing file, creating missing parent folders with
    mode 0700. A path that cannot be written is a :class:`UsageError` naming ``flag``."""
    out = out.expanduser()
    try:
        for folder in reversed([p for p in (out.parent, *out.parent.parents) if not p.exists()]):
            folder.mkdir(mode=0o700)  # each folder made here is 0700 (mkdir(parents=True) gives the rest 0777-umask)
    except OSError as exc:
        raise UsageError(f"{flag} {out}: cannot be created ({exc.strerror})") from None
    if out.is_dir():
        raise UsageError(f"{flag} {out}: is a directory; give a file name such as {out / 'payload.pem'}")
    writer.create_new(out, pem, mode=0o600, label=flag, what="a signing key")


def stack_block(public_key: str) -> str:
    """The nested stack YAML that carries ``public_key``, pasteable into ``config:`` of a stack file (merge it into
    an existing ``gb300:storage`` mapping)."""
    return f"  gb300:storage:\n    nodePayload:\n      signingPublicKey: {public_key}"


def _keygen(out: Path) -> int:
    line = write_signing_key(out)
    print(stack_block(line))
    print(
        f"gb300 payload keygen: private key in {out} (0600). Put the lines above under config: in the stack file "
        "(merged into its gb300:storage); give the private key to the deploy job as the secret "
        f"{manifest.SIGNING_KEY_ENV} (docs/gitops.md), and keep it out of the repository",
        file=sys.stderr,
    )
    return 0


def _expectations(values: list[str]) -> dict[str, str]:
    found: dict[str, str] = {}
    for value in values:
        name, _, sha = value.partition("=")
        if not name or len(sha) != 64 or any(c not in "0123456789abcdef" for c in sha):
            raise UsageError(f"--expect must be NAME=<64 hex digits> (got {value!r})")
        found[name] = sha
    if not found:
        raise UsageError("--expect: name at least one payload and its sha256 (the program's)")
    return found


def _publish(args: argparse.Namespace) -> int:
    _name, path = stacks.resolve(args.stack, args.stack_file)  # `pulumi up` runs it in the project's directory
    if not path.is_file():
        raise UsageError(f"stack file {path} is not a file")
    cfg = config.parse(config.load_stack_file(path))
    expect = _expectations(args.expect)
    account_url = payload_publish.check_account_url(args.account_url)
    key = manifest.load_private_key(os.environ.get(manifest.SIGNING_KEY_ENV, ""))
    payload_publish.check_key(key, cfg)
    rendered = payload_publish.render(cfg)
    payload_publish.check_expected(rendered, expect)
    container = args.container or cfg.storage.node_payload.container
    client = payload_publish.container_client(account_url, container, credential.shared())
    publisher = payload_publish.Publisher(client, role_wait_s=args.role_wait_seconds)
    for data in rendered:
        publisher.publish(
            cfg.cluster.name,
            data.name,
            data.payload.archive,
            key,
            public_key=cfg.storage.node_payload.signing_public_key,
        )
    return 0
