"""``gb300 payload publish``: render a stack's node payloads, sign their manifests and upload them with Entra ID.

What the deploy job runs (the payload component's ``local.Command``) and what an operator may run by hand. It
renders the payloads from the stack file, as the program did, and refuses to publish unless every payload's sha256
is the one the deployment expects (``--expect NAME=SHA256``, from the program); reads the private signing key from
``GB300_PAYLOAD_SIGNING_KEY`` and refuses it unless its public half is the stack's
``gb300:storage.nodePayload.signingPublicKey``; then, per payload, uploads the content-addressed archive, a new
manifest (its ``serial`` the publish time in milliseconds, or one more than the manifest it replaces when that is
later) and the manifest's signature, over the account's public endpoint, with a bearer token from gb300's
credential (:mod:`gb300.azure.credential`: the azure-native provider's ``ARM_*`` variables, OIDC refreshed per
token).

Anyone who can write to the payload container can plant a manifest there, so what is there counts only when its
signature verifies with the stack's public key (and it is this cluster's manifest for this payload): only then
does its serial count, and only then is a payload "unchanged". Anything else (no signature, a bad one, a malformed
or foreign manifest, a blob larger than ``payload_limits`` allows, which is never downloaded) is treated as absent,
with a warning naming the blob and why, and the payload is published anew (docs/node-payload.md#publishing).

A role assignment takes minutes to reach the storage service (learn.microsoft.com role-based-access-control
troubleshooting: "up to 10 minutes"); the deployer's own grant is made in the same ``pulumi up``, so a 403
``AuthorizationPermissionMismatch`` is retried, waiting longer each time, for ``role_wait_s`` before it fails.
"""

from __future__ import annotations

import hashlib
import re
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TextIO, TypeVar

from gb300 import config
from gb300.errors import Gb300Error
from gb300.facts import storage_facts
from gb300.node import manifest
from gb300.node.custom_data import CustomData, render_stack
from gb300.node.manifest import Manifest

T = TypeVar("T")
ROLE_WAIT_SECONDS = 900
"""How long a 403 AuthorizationPermissionMismatch is retried: Azure's "up to 10 minutes", and some margin."""
_FIRST_WAIT_S = 1.0
_LONGEST_WAIT_S = 30.0
PERMISSION_MISMATCH = "AuthorizationPermissionMismatch"


class PublishError(Gb300Error):
    """The payloads could not be published (exit 2: the message says what to fix)."""


def render(cfg: config.StackConfig) -> tuple[CustomData, ...]:
    """The stack's payloads (with their custom data): the head's, then each GPU pool's, as the program declares
    them (:func:`gb300.node.custom_data.render_stack`, the one render the program and the plan use)."""
    return render_stack(cfg).all


def check_expected(rendered: Sequence[CustomData], expect: Mapping[str, str]) -> None:
    """Every payload the deployment expects, with its sha256, and no other (raises :class:`PublishError`)."""
    got = {r.name: r.payload.sha256 for r in rendered}
    problems = [
        f"payload {name}: the stack file renders {got.get(name, 'nothing')}, the deployment expects {sha}"
        for name, sha in sorted(expect.items())
        if got.get(name) != sha
    ]
    problems += [
        f"payload {name}: rendered but not expected by the deployment" for name in sorted(set(got) - set(expect))
    ]
    if problems:
        raise PublishError(
            "; ".join(problems) + ". Run it from the checkout and stack file `pulumi up` runs (gb300 payload publish "
            "renders the payloads again and publishes only the bytes the program declared)"
        )


def check_key(key: Any, cfg: config.StackConfig) -> None:
    """The private key must be the stack's (raises :class:`manifest.SigningKeyError`)."""
    want = cfg.storage.node_payload.signing_public_key
    got = manifest.public_key_line(key)
    if want != got:
        raise manifest.SigningKeyError(
            f"{manifest.SIGNING_KEY_ENV} is not this stack's payload signing key: its public half is {got}, "
            f"gb300:storage.nodePayload.signingPublicKey is {want}"
        )


_ACCOUNT_URL = re.compile(r"^https://([a-z0-9]{3,24})\.blob\.([a-z0-9.-]+)\Z")


def check_account_url(url: str) -> str:
    """``https://<account>.blob.<suffix>`` exactly (raises :class:`PublishError`)."""
    found = _ACCOUNT_URL.fullmatch(url.rstrip("/"))
    if not found or found.group(2) != storage_facts.blob_endpoint_suffix():
        raise PublishError(
            f"--account-url must be https://<account>.blob.{storage_facts.blob_endpoint_suffix()} (got {url!r})"
        )
    return url.rstrip("/")


class Publisher:
    """Uploads through azure-storage-blob's container client with bearer tokens; retries the role's arrival."""

    def __init__(
        self,
        container_client: Any,
        *,
        role_wait_s: float = ROLE_WAIT_SECONDS,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
        out: TextIO = sys.stderr,
    ) -> None:
        self.client = container_client
        self.role_wait_s = role_wait_s
        self.sleep = sleep
        self.clock = clock
        self.out = out
        self._waited = 0.0

    def _say(self, text: str) -> None:
        print(f"gb300 payload publish: {text}", file=self.out, flush=True)

    def _call(self, what: str, action: Callable[[], T]) -> T:
        """``action()``, retrying a 403 AuthorizationPermissionMismatch while the deployer's grant propagates."""
        from azure.core.exceptions import (  # noqa: PLC0415
            HttpResponseError,
            ResourceNotFoundError,
            ServiceRequestError,
        )

        delay = _FIRST_WAIT_S
        while True:
            try:
                return action()
            except ResourceNotFoundError:
                raise
            except HttpResponseError as exc:
                code = getattr(exc, "error_code", None) or ""
                if exc.status_code == 403 and code == PERMISSION_MISMATCH and self._waited < self.role_wait_s:
                    self._say(
                        f"{what}: 403 {code}: the deployer's Storage Blob Data Contributor grant has not reached "
                        f"the storage service yet; trying again in {delay:g}s"
                    )
                    self.sleep(delay)
                    self._waited += delay
                    delay = min(delay * 2, _LONGEST_WAIT_S)
                    continue
                raise PublishError(_refusal(what, exc.status_code, code, self._waited)) from None
            except ServiceRequestError as exc:
                raise PublishError(
                    f"{what}: cannot reach the payload account ({_first_line(exc)}): its public endpoint must admit "
                    "this machine (gb300:storage.nodePayload.uploadSourceRanges)"
                ) from None

    def _read(self, blob_name: str, cap: int) -> bytes | None:
        """``blob_name``'s bytes, or None when it does not exist; raises :class:`_Untrusted` when it is empty or
        larger than ``cap`` bytes. Its size is read first and at most ``cap`` bytes are ever asked for (a ranged
        read), so a blob grown in between is still read no further."""
        from azure.core.exceptions import ResourceNotFoundError  # noqa: PLC0415

        blob = self.client.get_blob_client(blob_name)
        try:
            size = int(self._call(f"read {blob_name}", blob.get_blob_properties).size)
            if size > cap:
                raise _Untrusted(f"{size} bytes, larger than the {cap} a gb300 publisher writes (not read)", blob_name)
            if size == 0:
                raise _Untrusted("empty", blob_name)
            data = self._call(f"read {blob_name}", lambda: blob.download_blob(offset=0, length=size).readall())
        except ResourceNotFoundError:
            return None
        if len(data) > cap:  # not asked for; a service that answers more than the range is not read further
            raise _Untrusted(f"answered more than the {cap} bytes asked for", blob_name)
        return bytes(data)

    def _current(self, cluster: str, name: str, public_key: str) -> Manifest | None:
        """The manifest the container holds for ``name`` now, when its signature verifies with ``public_key`` and
        it is this cluster's manifest for ``name``; None otherwise (with a warning naming the blob and why, unless
        there is no manifest at all: a first publish)."""
        try:
            return self._verified(cluster, name, public_key)
        except _Untrusted as exc:
            self._say(
                f"WARNING: {exc.blob}: {exc}; not trusted: treated as absent, so {name} is published anew "
                "(serial from the clock, docs/node-payload.md#publishing)"
            )
            return None

    def _verified(self, cluster: str, name: str, public_key: str) -> Manifest | None:
        limits = manifest.limits()
        blob_name, sig_name = manifest.manifest_blob(name), manifest.signature_blob(name)
        data = self._read(blob_name, limits.manifest_max_bytes)
        if data is None:
            return None
        signature = self._read(sig_name, limits.signature_max_bytes)
        if signature is None:
            raise _Untrusted(f"unsigned ({sig_name} does not exist)", blob_name)
        if not manifest.verify(public_key, data, signature):
            raise _Untrusted("its signature does not verify with gb300:storage.nodePayload.signingPublicKey", blob_name)
        try:
            current = Manifest.from_bytes(data)
        except (ValueError, KeyError, TypeError) as exc:  # UnicodeDecodeError is a ValueError
            raise _Untrusted(f"signed but not a manifest this version reads ({exc})", blob_name) from None
        if (current.cluster, current.name) != (cluster, name):
            raise _Untrusted(f"signed for payload {current.name!r} of cluster {current.cluster!r}", blob_name)
        return current

    def _put(self, blob_name: str, data: bytes, content_type: str) -> None:
        from azure.storage.blob import ContentSettings  # noqa: PLC0415

        blob = self.client.get_blob_client(blob_name)
        settings = ContentSettings(content_type=content_type)
        self._call(f"upload {blob_name}", lambda: blob.upload_blob(data, overwrite=True, content_settings=settings))

    def publish(self, cluster: str, name: str, archive: bytes, key: Any, *, public_key: str | None = None) -> Manifest:
        """Upload payload ``name``'s ``archive``, then a new signed manifest, unless the container's manifest
        verifies with ``public_key`` (the stack's; default: ``key``'s public half) and already names its sha256.

        The current serial and "unchanged" come only from a verified manifest of this cluster and payload; anything
        else is treated as absent (a warning names the blob and why). The new serial is the publish time in
        milliseconds, or one more than the verified manifest's when that is later: it never goes backwards for a
        node holding a serial this cluster's key signed, as long as this machine's clock is not behind the clock of
        the publish that signed it. A serial outside ``payload_limits`` is refused, never signed.
        """
        public = public_key if public_key is not None else manifest.public_key_line(key)
        sha256 = hashlib.sha256(archive).hexdigest()
        current = self._current(cluster, name, public)
        # Content-addressed and small: uploaded every time, so an archive deleted or overwritten in the container
        # is put back even when the manifest is unchanged.
        self._put(manifest.archive_blob(sha256), archive, "application/gzip")
        if current is not None and current.sha256 == sha256:
            self._say(
                f"{name}: manifest unchanged (serial {current.serial}, signature verified, sha256 "
                f"{sha256[:12]}); archive {current.archive} uploaded again"
            )
            return current
        serial = max(int(self.clock() * 1000), (current.serial + 1) if current else 1)
        top = manifest.limits().serial_max
        if serial > top:
            raise PublishError(
                f"payload {name}: serial {serial} is past {top}, the largest a node reads "
                "(payload_limits.serial_max_digits in infra/gb300/data/node.yaml): refused, nothing signed"
            )
        new = Manifest(cluster, name, sha256, len(archive), serial)
        data = new.to_bytes()
        self._put(manifest.manifest_blob(name), data, "application/json")
        self._put(manifest.signature_blob(name), key.sign(data), "application/octet-stream")
        self._say(f"{name}: published {new.archive} ({new.size} bytes), manifest serial {serial}, signed")
        return new


class _Untrusted(Exception):  # noqa: N818 - not an error: a blob read and set aside
    """A blob in the container that is not read as a manifest or signature (why, and which blob)."""

    def __init__(self, why: str, blob: str) -> None:
        super().__init__(why)
        self.blob = blob


def _refusal(what: str, status: int | None, code: str, waited: float) -> str:
    if status == 403 and code == PERMISSION_MISMATCH:
        return (
            f"{what}: refused (403 {code}) after waiting {waited:g}s for the deployer's role: the identity running "
            "this needs Storage Blob Data Contributor on the payload container (the program grants it unless "
            "gb300:storage.nodePayload.deployerPrincipalType is 'none'; with 'User' for a service principal Azure "
            "refuses the grant)"
        )
    if status == 403:
        return (
            f"{what}: refused (403 {code or 'Forbidden'}): the account takes Entra ID only and its public endpoint "
            "admits the addresses of gb300:storage.nodePayload.uploadSourceRanges (when set)"
        )
    return f"{what}: the Blob service answered HTTP {status} {code}".rstrip()


def _first_line(exc: BaseException, limit: int = 200) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = lines[0] if lines else type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def container_client(account_url: str, container: str, credential: Any, **client_kwargs: Any) -> Any:
    """azure-storage-blob's client of ``container``, authenticated with ``credential`` (bearer tokens only)."""
    from azure.storage.blob import ContainerClient  # noqa: PLC0415 - the Azure SDK loads only to publish

    return ContainerClient(account_url, container, credential=credential, **client_kwargs)
