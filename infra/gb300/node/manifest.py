"""Signed node payload manifests: what the uploader writes and every node checks before it extracts anything.

Per payload (``head``, ``gpu-<pool>``) the payload container holds::

    payloads/<name>/manifest.json       {"archive", "cluster", "format", "name", "serial", "sha256", "size"}
    payloads/<name>/manifest.json.sig   the Ed25519 signature of manifest.json's exact bytes (64 bytes, raw)
    archives/<sha256>.tar.gz            the content-addressed archive the manifest names

The cluster's signing key is an Ed25519 key pair (RFC 8032). Its public half is stack config
(``gb300:storage.nodePayload.signingPublicKey``: base64 of the DER SubjectPublicKeyInfo, the body of a PEM
``PUBLIC KEY``) and travels in every node's custom data; its private half stays with whoever publishes
(``GB300_PAYLOAD_SIGNING_KEY``, a PKCS#8 PEM) and never enters the program or Pulumi's state. A node verifies the
signature with ``openssl pkeyutl -verify -pubin -keyform DER -rawin`` (OpenSSL 3 on Ubuntu 24.04; checked here
with OpenSSL 3.0), then the manifest's fields,
then the archive's sha256, and only then extracts (``cloud-init/lib/fetch-payload``, docs/node-payload.md).

``serial`` only grows (the uploader takes the publish time in milliseconds, or one more than the verified
manifest it replaces): a node refuses a manifest older than the payload it runs, so an old signed manifest written
back cannot roll a node back. Serials are decimals of 1 to :func:`limits`' ``serial_max_digits`` digits (18: below
2^63-1, so every reader compares them exactly); a :class:`Manifest` outside that range cannot be made, so none is
signed. The sizes a reader takes at most (manifest, signature) are :func:`limits` too: ``payload_limits`` in
``infra/gb300/data/node.yaml``, the one place they are defined (the custom data's payload.env carries them to
``fetch-payload``).
"""

from __future__ import annotations

import base64
import functools
import json
import re
from dataclasses import dataclass
from typing import Any

from gb300.errors import DataError, Gb300Error
from gb300.facts.loader import DATA_DIR, data
from gb300.tags import ROLE_CPU_NODE

__all__ = [
    "ARCHIVE_PREFIX",
    "FORMAT",
    "MANIFEST",
    "PAYLOAD_PREFIX",
    "SIGNATURE",
    "SIGNING_KEY_ENV",
    "Limits",
    "Manifest",
    "SigningKeyError",
    "archive_blob",
    "generate_key",
    "limits",
    "load_private_key",
    "manifest_blob",
    "payload_name",
    "public_key_line",
    "signature_blob",
    "verify",
]

FORMAT = 1
MANIFEST = "manifest.json"
SIGNATURE = "manifest.json.sig"
PAYLOAD_PREFIX = "payloads"
ARCHIVE_PREFIX = "archives"
SIGNING_KEY_ENV = "GB300_PAYLOAD_SIGNING_KEY"
"""The variable holding the private signing key (PKCS#8 PEM) for ``gb300 payload publish``."""
_NAME = re.compile(r"^[a-z][a-z0-9-]{0,62}\Z")


@dataclass(frozen=True)
class Limits:
    """``payload_limits`` (node.yaml): the most any reader takes of the payload container, and the serial range."""

    manifest_max_bytes: int
    signature_max_bytes: int
    serial_max_digits: int

    @property
    def serial_max(self) -> int:
        """The largest serial: ``serial_max_digits`` nines."""
        return int(10**self.serial_max_digits) - 1


_INT64_DIGITS = 18
"""The most digits every decimal below 2^63-1 may have: the bound on ``serial_max_digits``."""


@functools.cache
def limits() -> Limits:
    """``payload_limits`` from ``infra/gb300/data/node.yaml``, checked (a serial never past 18 digits)."""
    path = DATA_DIR / "node.yaml"
    raw: Any = data("node.yaml").get("payload_limits")
    try:
        found = Limits(int(raw["manifest_max_bytes"]), int(raw["signature_max_bytes"]), int(raw["serial_max_digits"]))
    except (KeyError, TypeError, ValueError) as exc:
        msg = f"{path}: payload_limits: missing or malformed ({exc!r})"
        raise DataError(msg) from exc
    if not 1 <= found.serial_max_digits <= _INT64_DIGITS:
        msg = f"{path}: payload_limits.serial_max_digits must be 1 to {_INT64_DIGITS} (got {found.serial_max_digits})"
        raise DataError(msg)
    if found.signature_max_bytes < SIGNATURE_BYTES or found.manifest_max_bytes < 1:
        msg = f"{path}: payload_limits: a signature takes {SIGNATURE_BYTES} bytes and a manifest at least one"
        raise DataError(msg)
    return found


SIGNATURE_BYTES = 64
"""An Ed25519 signature's length (RFC 8032 section 5.1.6)."""


class SigningKeyError(Gb300Error):
    """The private signing key is missing, unreadable or not the stack's (exit 2)."""


def payload_name(role: str, pool: str | None) -> str:
    """The payload's name: the role's for the head and the login nodes (``head``, ``login``), ``gpu-<pool>`` for a GPU
    pool's nodes, ``cpu-<pool>`` for a CPU pool's."""
    if pool is None:
        return role
    return f"{'cpu' if role == ROLE_CPU_NODE else 'gpu'}-{pool}"


def manifest_blob(name: str) -> str:
    return f"{PAYLOAD_PREFIX}/{name}/{MANIFEST}"


def signature_blob(name: str) -> str:
    return f"{PAYLOAD_PREFIX}/{name}/{SIGNATURE}"


def archive_blob(sha256: str) -> str:
    return f"{ARCHIVE_PREFIX}/{sha256}.tar.gz"


@dataclass(frozen=True)
class Manifest:
    """One payload's manifest: the fields a node checks before it takes the archive."""

    cluster: str
    name: str
    sha256: str
    size: int
    serial: int

    def __post_init__(self) -> None:
        top = limits().serial_max
        if isinstance(self.serial, bool) or not isinstance(self.serial, int) or not 1 <= self.serial <= top:
            msg = f"serial {self.serial!r} is outside 1..{top} (payload_limits.serial_max_digits in node.yaml)"
            raise ValueError(msg)
        if isinstance(self.size, bool) or not isinstance(self.size, int) or not 1 <= self.size <= top:
            msg = f"size {self.size!r} is outside 1..{top}"
            raise ValueError(msg)

    @property
    def archive(self) -> str:
        return archive_blob(self.sha256)

    def to_bytes(self) -> bytes:
        """The manifest's one serialization: sorted keys, no spaces, a final newline (what is signed)."""
        body = {
            "archive": self.archive,
            "cluster": self.cluster,
            "format": FORMAT,
            "name": self.name,
            "serial": self.serial,
            "sha256": self.sha256,
            "size": self.size,
        }
        text = (json.dumps(body, sort_keys=True, separators=(",", ":")) + "\n").encode("ascii")
        if len(text) > limits().manifest_max_bytes:
            msg = f"manifest of {len(text)} bytes is larger than {limits().manifest_max_bytes} (payload_limits)"
            raise ValueError(msg)
        return text

    @classmethod
    def from_bytes(cls, data: bytes) -> Manifest:
        """A manifest read back; raises ValueError for anything the uploader would not have written."""
        if len(data) > limits().manifest_max_bytes:
            raise ValueError(f"larger than {limits().manifest_max_bytes} bytes")
        body: Any = json.loads(data.decode("ascii"))
        if not isinstance(body, dict) or body.get("format") != FORMAT:
            raise ValueError("not a gb300 payload manifest (format 1)")
        sha = str(body.get("sha256", ""))
        size, serial = body.get("size"), body.get("serial")
        if not isinstance(size, int) or not isinstance(serial, int):
            raise ValueError("size and serial must be integers")
        if not isinstance(body.get("cluster"), str) or not isinstance(body.get("name"), str):
            raise ValueError("cluster and name must be strings")
        manifest = cls(body["cluster"], body["name"], sha, size, serial)
        if not re.fullmatch(r"[0-9a-f]{64}", sha) or body.get("archive") != manifest.archive:
            raise ValueError("manifest names no content-addressed archive")
        if manifest.to_bytes() != data:
            raise ValueError("manifest is not in its one serialization")
        return manifest


def generate_key() -> tuple[bytes, str]:
    """A new Ed25519 key pair: the private key as PKCS#8 PEM and the public key line for the stack."""
    from cryptography.hazmat.primitives import serialization  # noqa: PLC0415 - loads for keygen/publish only
    from cryptography.hazmat.primitives.asymmetric import ed25519  # noqa: PLC0415

    key = ed25519.Ed25519PrivateKey.generate()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    return pem, public_key_line(key)


def public_key_line(key: Any) -> str:
    """``key``'s public half (a private or public Ed25519 key) as the one base64 line the stack carries."""
    from cryptography.hazmat.primitives import serialization  # noqa: PLC0415

    public = key.public_key() if hasattr(key, "public_key") else key
    der = public.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return base64.b64encode(der).decode("ascii")


def load_private_key(pem: str, *, source: str = SIGNING_KEY_ENV) -> Any:
    """The Ed25519 private key in ``pem`` (PKCS#8, unencrypted); raises :class:`SigningKeyError`."""
    from cryptography.hazmat.primitives import serialization  # noqa: PLC0415
    from cryptography.hazmat.primitives.asymmetric import ed25519  # noqa: PLC0415

    if not pem.strip():
        raise SigningKeyError(
            f"{source} is not set: it must hold the cluster's payload signing key (a PEM from `gb300 payload "
            "keygen`); CI gives it to the deploy job from the environment secret GB300_PAYLOAD_SIGNING_KEY"
        )
    try:
        key = serialization.load_pem_private_key(pem.encode("utf-8"), password=None)
    except (ValueError, TypeError) as exc:
        raise SigningKeyError(f"{source}: not an unencrypted PEM private key ({type(exc).__name__})") from None
    if not isinstance(key, ed25519.Ed25519PrivateKey):
        raise SigningKeyError(f"{source}: must be an Ed25519 key (got {type(key).__name__})")
    return key


def verify(public_line: str, data: bytes, signature: bytes) -> bool:
    """Whether ``signature`` is the key ``public_line``'s Ed25519 signature of ``data``."""
    from cryptography.exceptions import InvalidSignature  # noqa: PLC0415
    from cryptography.hazmat.primitives import serialization  # noqa: PLC0415
    from cryptography.hazmat.primitives.asymmetric import ed25519  # noqa: PLC0415

    public = serialization.load_der_public_key(base64.b64decode(public_line))
    if not isinstance(public, ed25519.Ed25519PublicKey):
        return False
    try:
        public.verify(signature, data)
    except InvalidSignature:
        return False
    return True
