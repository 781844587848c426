"""The node payloads: one content-addressed blob per distinct payload, in a container of the cluster's account.

Each blob's content is a generated file (``pulumi.FileAsset``), so Pulumi's state keeps the file's path and hash,
not the archive. A blob is named by its sha256 and never changes in place: a new payload is a new blob, and the
old one is retained (``retain_on_delete``) for VMs that still boot with the custom data naming it (a rack not yet
reimaged that Azure scales out or repairs). The node identity may read this container and nothing else here
(Storage Blob Data Reader); the deployer (the identity running ``pulumi up``) may write it (Storage Blob Data
Contributor), since the upload goes over the data plane with Entra ID (the account has no shared keys).
docs/node-payload.md says what the deployer needs to reach the account.

The files live in a directory private to the process (:func:`payload_dir`), removed when it exits, so the path
Pulumi's state keeps differs on every run; Pulumi compares assets by their hash alone (``Asset.Equals`` in
pulumi's ``sdk/go/common/resource/asset/asset.go``), so a new path with the same bytes is no change.
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pulumi
from pulumi_azure_native import storage

from gb300.facts import roles

READER = "Storage Blob Data Reader"
WRITER = "Storage Blob Data Contributor"


@dataclass(frozen=True)
class PayloadFile:
    """One payload to store: its blob name (``<sha256>.tar.gz``), bytes, sha256 and the role it boots."""

    blob_name: str
    sha256: str
    archive: bytes
    role: str


@dataclass(frozen=True)
class NodePayloadArgs:
    """Inputs of :class:`NodePayloads`."""

    resource_group_name: pulumi.Input[str]
    account_name: pulumi.Input[str]
    blob_endpoint: pulumi.Input[str]
    container: str
    payloads: Sequence[PayloadFile]
    node_principal_id: pulumi.Input[str]
    deployer_principal_id: pulumi.Input[str]
    deployer_principal_type: str | None
    """``User`` or ``ServicePrincipal``: who runs ``pulumi up``; None grants the deployer nothing."""
    depends_on: Sequence[pulumi.Resource] = field(default_factory=tuple)


_RUN_DIR_LOCK = threading.Lock()


@functools.cache
def _run_dir() -> Path:
    path = Path(tempfile.mkdtemp(prefix="gb300-node-payload-"))  # mode 0700, a new name: no one else's directory
    # At exit, not earlier: under `pulumi up` the engine reads (hashes, uploads) a FileAsset after the program
    # registered it, and the program exits only once every registration is answered.
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def payload_dir() -> Path:
    """This process's private directory for the payload files it uploads: made on first use
    (``tempfile.mkdtemp``, mode 0700, under ``$TMPDIR``) and removed, with the files, when the process exits."""
    with _RUN_DIR_LOCK:
        return _run_dir()


def write_payload(payload: PayloadFile) -> Path:
    """The payload's file for upload: written once per process, left as is when the same bytes are there already."""
    path = payload_dir() / payload.blob_name
    if not path.is_file() or path.read_bytes() != payload.archive:
        # A name of this process's own, then an atomic rename: concurrent plans never see a partial file.
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_bytes(payload.archive)
        tmp.replace(path)
    return path


class NodePayloads(pulumi.ComponentResource):
    """The payload container, its two role assignments, and one blob per distinct payload."""

    url: pulumi.Output[str]
    blobs: list[storage.Blob]
    reader: pulumi.Resource

    @property
    def boot_dependencies(self) -> tuple[pulumi.Resource, ...]:
        """What a node's first boot reads here: every payload blob and the nodes' read grant."""
        return (*self.blobs, self.reader)

    def __init__(self, name: str, args: NodePayloadArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gb300:compute:NodePayloads", name, None, opts)
        container = storage.BlobContainer(
            f"{name}-container",
            container_name=args.container,
            account_name=args.account_name,
            resource_group_name=args.resource_group_name,
            public_access=storage.PublicAccess.NONE,
            opts=pulumi.ResourceOptions(parent=self, depends_on=list(args.depends_on)),
        )
        self.reader = roles.assign(
            f"{name}-nodes", role=READER, scope=container.id, principal_id=args.node_principal_id, parent=self
        )
        uploads_after: list[pulumi.Resource] = [container]
        if args.deployer_principal_type is not None:
            uploads_after.append(
                roles.assign(
                    f"{name}-deployer",
                    role=WRITER,
                    scope=container.id,
                    principal_id=args.deployer_principal_id,
                    parent=self,
                    principal_type=args.deployer_principal_type,
                )
            )
        self.blobs = []
        seen: set[str] = set()
        for payload in args.payloads:
            if payload.blob_name in seen:
                continue
            seen.add(payload.blob_name)
            self.blobs.append(
                storage.Blob(
                    f"{name}-{payload.sha256[:16]}",
                    blob_name=payload.blob_name,
                    container_name=container.name,
                    account_name=args.account_name,
                    resource_group_name=args.resource_group_name,
                    type=storage.BlobType.BLOCK,
                    content_type="application/gzip",
                    metadata={"sha256": payload.sha256, "role": payload.role},
                    source=pulumi.FileAsset(str(write_payload(payload))),
                    opts=pulumi.ResourceOptions(parent=self, depends_on=uploads_after, retain_on_delete=True),
                )
            )
        self.url = pulumi.Output.concat(
            pulumi.Output.from_input(args.blob_endpoint).apply(lambda url: url.rstrip("/")), "/", args.container
        )
        self.register_outputs({"url": self.url, "blobs": [b.name for b in self.blobs]})
