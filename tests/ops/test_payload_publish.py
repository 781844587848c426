"""`gb300 payload publish` against a container an attacker can write to but cannot sign for (issue 36).

The attacker holds Storage Blob Data Contributor on the payload container, not the signing key. What they plant
(an unsigned manifest naming today's sha256, a serial near 2^64, a manifest of another cluster, blobs of many
megabytes) must not decide what the publisher uploads or signs: only a manifest whose signature verifies with
the stack's public key counts; anything else is treated as absent, with a warning naming the blob and why, and
the payload is published anew. Serials stay in the range nodes compare exactly (payload_limits in node.yaml).

The publisher runs with azure-storage-blob's real ContainerClient and pipeline; the Blob service is
:class:`BlobService`, a ``requests`` adapter behind azure-core's own RequestsTransport
(tests/support/fake_arm.py) that answers Get Blob Properties (HEAD), ranged Get Blob and Put Blob as Azure does
(status, headers, x-ms-error-code). It cannot show anything about the network, TLS or
authentication (tests/journeys/test_payload_delivery.py runs the upload against a served Blob endpoint).
"""

from __future__ import annotations

import hashlib
import io
import json
from typing import Any

import pytest
import requests

from gb300.node import manifest
from gb300.ops import payload_publish
from tests.support import fake_arm, signing

ACCOUNT_URL = "https://devpl0123abcd.blob.core.windows.net"
CONTAINER = "gb300-node-payload"
CLUSTER = "dev"
NOW_S = 1_790_000_000.0  # the publisher's clock: its serials are this in milliseconds
NOW_MS = int(NOW_S * 1000)
ARCHIVE = b"\x1f\x8b" + b"payload archive bytes" * 40
SHA = hashlib.sha256(ARCHIVE).hexdigest()
MANIFEST_BLOB = manifest.manifest_blob("head")
SIGNATURE_BLOB = manifest.signature_blob("head")
ARCHIVE_BLOB = manifest.archive_blob(SHA)
MiB = 1024 * 1024


class BlobService(fake_arm.FakeHttp):
    """The payload container, answering as Azure's Blob service does: HEAD (Get Blob Properties) with the blob's
    Content-Length, GET with ``x-ms-range`` as 206 and a Content-Range, PUT as 201; 404 ``BlobNotFound`` for a
    missing blob. Records each request (method, blob, range) and the bytes each GET sent."""

    def __init__(self, blobs: dict[str, bytes] | None = None) -> None:
        super().__init__()
        self.blobs = dict(blobs or {})
        self.requests: list[tuple[str, str, str]] = []
        self.sent: dict[str, int] = {}

    def send(self, request: requests.PreparedRequest, *args: Any, **kwargs: Any) -> requests.Response:
        path = (request.url or "").split("?")[0].split(f"/{CONTAINER}/", 1)[1]
        wanted = request.headers.get("x-ms-range", "")
        self.requests.append((request.method or "", path, wanted))
        headers = {
            "ETag": '"0x8DC1"',
            "Last-Modified": "Tue, 01 Dec 2026 00:00:00 GMT",
            "x-ms-version": "2025-01-05",
        }
        if request.method == "PUT":
            self.blobs[path] = _body(request)
            return fake_arm.response(request, 201, b"", headers | {"x-ms-request-server-encrypted": "true"})
        if path not in self.blobs:
            error = b'<?xml version="1.0" encoding="utf-8"?><Error><Code>BlobNotFound</Code></Error>'
            body = b"" if request.method == "HEAD" else error
            return fake_arm.response(request, 404, body, headers | {"x-ms-error-code": "BlobNotFound"})
        data = self.blobs[path]
        headers |= {"x-ms-blob-type": "BlockBlob", "Content-Type": "application/octet-stream"}
        if request.method == "HEAD":
            return fake_arm.response(request, 200, b"", headers | {"Content-Length": str(len(data))})
        first, last = 0, len(data) - 1
        if wanted:
            start, _, end = wanted.removeprefix("bytes=").partition("-")
            first, last = int(start), min(int(end or last), last)
            headers["Content-Range"] = f"bytes {first}-{last}/{len(data)}"
        self.sent[path] = self.sent.get(path, 0) + last + 1 - first
        sent = data[first : last + 1]
        return fake_arm.response(request, 206 if wanted else 200, sent, headers | {"Content-Length": str(len(sent))})


def _body(request: requests.PreparedRequest) -> bytes:
    """What a PUT carried: azure-core hands requests bytes, a stream or an iterator of chunks."""
    body = request.body
    if body is None:
        return b""
    if isinstance(body, bytes | bytearray):
        return bytes(body)
    if isinstance(body, str):
        return body.encode()
    if hasattr(body, "read"):
        return bytes(body.read())
    return b"".join(bytes(chunk) for chunk in body)


def _publish(service: BlobService) -> tuple[manifest.Manifest, str]:
    """Publish payload ``head`` (:data:`ARCHIVE`) of cluster dev into ``service``; (manifest, stderr)."""
    client = payload_publish.container_client(
        ACCOUNT_URL, CONTAINER, fake_arm.StaticCredential(), transport=fake_arm.transport(service)
    )
    out = io.StringIO()
    publisher = payload_publish.Publisher(client, role_wait_s=0, clock=lambda: NOW_S, out=out)
    got = publisher.publish(CLUSTER, "head", ARCHIVE, signing.key(), public_key=signing.public_key())
    return got, out.getvalue()


def _manifest_text(
    serial: str, *, cluster: str = CLUSTER, name: str = "head", sha: str = SHA, size: int = 840
) -> bytes:
    """A manifest in the one serialization with ``serial`` as written (any digits: what an attacker may plant)."""
    return (
        f'{{"archive":"archives/{sha}.tar.gz","cluster":"{cluster}","format":1,"name":"{name}",'
        f'"serial":{serial},"sha256":"{sha}","size":{size}}}\n'
    ).encode()


def _other_key() -> Any:
    return manifest.load_private_key(manifest.generate_key()[0].decode())


def _signed(data: bytes, key: Any = None) -> dict[str, bytes]:
    return {MANIFEST_BLOB: data, SIGNATURE_BLOB: (key or signing.key()).sign(data)}


def _assert_published_anew(service: BlobService, got: manifest.Manifest, serial: int) -> None:
    """The archive, a manifest naming it with ``serial`` and a signature that verifies were all uploaded."""
    puts = [path for method, path, _ in service.requests if method == "PUT"]
    assert puts == [ARCHIVE_BLOB, MANIFEST_BLOB, SIGNATURE_BLOB]
    assert service.blobs[ARCHIVE_BLOB] == ARCHIVE
    assert (got.sha256, got.serial, got.cluster) == (SHA, serial, CLUSTER)
    assert service.blobs[MANIFEST_BLOB] == got.to_bytes()
    assert manifest.verify(signing.public_key(), service.blobs[MANIFEST_BLOB], service.blobs[SIGNATURE_BLOB])


def _warning(err: str) -> str:
    [line] = [x for x in err.splitlines() if "WARNING" in x]
    return line


def test_an_unsigned_manifest_naming_todays_sha256_is_not_unchanged() -> None:
    """The attack: an unsigned manifest that names today's sha256 (and no archive). The publisher does not call the
    payload unchanged: it uploads the archive, a manifest with a serial from its clock and the signature, and warns
    naming the blob and why. (Before: "unchanged", nothing uploaded, a green deploy and nodes that fail.)"""
    service = BlobService({MANIFEST_BLOB: manifest.Manifest(CLUSTER, "head", SHA, len(ARCHIVE), 5).to_bytes()})
    got, err = _publish(service)
    _assert_published_anew(service, got, NOW_MS)
    line = _warning(err)
    assert f"WARNING: {MANIFEST_BLOB}: unsigned ({SIGNATURE_BLOB} does not exist)" in line
    assert "treated as absent" in line
    assert "unchanged" not in err


@pytest.mark.parametrize(
    ("case", "planted", "why"),
    [
        (
            "a serial near 2^64 signed by another key",
            _signed(_manifest_text(str(2**64 - 2), sha="a" * 64), _other_key()),
            "its signature does not verify with gb300:storage.nodePayload.signingPublicKey",
        ),
        (
            "today's sha256, signature of other bytes",
            {MANIFEST_BLOB: _manifest_text("5"), SIGNATURE_BLOB: signing.key().sign(_manifest_text("6"))},
            "its signature does not verify",
        ),
        (
            "signed by the stack's key, for another cluster",
            _signed(_manifest_text("5", cluster="prod")),
            "signed for payload 'head' of cluster 'prod'",
        ),
        (
            "signed by the stack's key, for another payload",
            _signed(_manifest_text("5", name="gpu-train")),
            "signed for payload 'gpu-train' of cluster 'dev'",
        ),
        ("signed, not JSON", _signed(b"\x00garbage\n"), "signed but not a manifest this version reads"),
        (
            "signed with a serial past 2^64 (by a publisher before this check)",
            _signed(_manifest_text(str(2**64), sha="b" * 64)),
            "signed but not a manifest this version reads (serial 18446744073709551616 is outside 1..99",
        ),
        (
            "signed with a serial of leading zeros",
            _signed(_manifest_text('"0000000000007"')),
            "signed but not a manifest this version reads (size and serial must be integers)",
        ),
        ("an empty signature", {MANIFEST_BLOB: _manifest_text("5"), SIGNATURE_BLOB: b""}, f"{SIGNATURE_BLOB}: empty"),
    ],
)
def test_a_manifest_that_does_not_verify_for_this_payload_is_absent_loudly(
    case: str, planted: dict[str, bytes], why: str
) -> None:
    """Whatever the planted manifest says (today's sha256, a serial near or past 2^64, another cluster), it is
    treated as absent: the payload is published anew with the clock's serial, never the planted serial plus one,
    and one warning names the blob and why."""
    service = BlobService(planted)
    got, err = _publish(service)
    _assert_published_anew(service, got, NOW_MS)
    assert why in _warning(err), case


def test_a_huge_manifest_or_signature_is_never_downloaded() -> None:
    """A manifest of 64 MiB (or a signature of 1 MiB) is judged by its size (Get Blob Properties) and never
    downloaded: not one byte of it is asked for; it is treated as absent, the warning naming its size and the
    cap, and the payload is published anew."""
    service = BlobService({MANIFEST_BLOB: b"{" * (64 * MiB)})
    got, err = _publish(service)
    assert service.sent.get(MANIFEST_BLOB, 0) == 0
    assert ("HEAD", MANIFEST_BLOB, "") in service.requests
    cap = manifest.limits().manifest_max_bytes
    assert f"WARNING: {MANIFEST_BLOB}: {64 * MiB} bytes, larger than the {cap} a gb300 publisher writes" in err
    _assert_published_anew(service, got, NOW_MS)

    data = _manifest_text("5")
    service = BlobService({MANIFEST_BLOB: data, SIGNATURE_BLOB: signing.key().sign(data) + b"\0" * MiB})
    got, err = _publish(service)
    assert service.sent.get(SIGNATURE_BLOB, 0) == 0
    assert service.sent[MANIFEST_BLOB] == len(data)
    assert f"WARNING: {SIGNATURE_BLOB}: {64 + MiB} bytes, larger than the 64 a gb300 publisher writes" in err
    _assert_published_anew(service, got, NOW_MS)


def test_every_read_asks_for_no_more_than_the_size_it_was_told() -> None:
    """Each Get Blob of the manifest and signature is a ranged read of at most the cap: a blob that grew between
    its properties and its download is not read further."""
    data = manifest.Manifest(CLUSTER, "head", SHA, len(ARCHIVE), 5).to_bytes()
    service = BlobService(_signed(data))
    _publish(service)
    ranges = {path: wanted for method, path, wanted in service.requests if method == "GET"}
    assert ranges == {MANIFEST_BLOB: f"bytes=0-{len(data) - 1}", SIGNATURE_BLOB: "bytes=0-63"}


def test_a_verified_manifest_is_unchanged_and_its_archive_is_put_back() -> None:
    """A manifest that verifies and names today's sha256 is left as it is (no new serial, no new signature), and
    the archive it names is uploaded again: one deleted from the container is back after the publish."""
    data = manifest.Manifest(CLUSTER, "head", SHA, len(ARCHIVE), 5).to_bytes()
    service = BlobService(_signed(data))
    got, err = _publish(service)
    assert got.serial == 5
    assert [p for m, p, _ in service.requests if m == "PUT"] == [ARCHIVE_BLOB]
    assert service.blobs[ARCHIVE_BLOB] == ARCHIVE
    assert service.blobs[MANIFEST_BLOB] == data
    assert "head: manifest unchanged (serial 5, signature verified" in err
    assert "WARNING" not in err


def test_a_verified_serial_ahead_of_the_clock_still_goes_forward() -> None:
    """A verified manifest whose serial is ahead of this machine's clock (another publisher's clock ran fast):
    the new serial is one more, never the clock's (nodes holding it would refuse the new payload)."""
    ahead = NOW_MS + 60_000
    service = BlobService(_signed(manifest.Manifest(CLUSTER, "head", "c" * 64, 10, ahead).to_bytes()))
    got, err = _publish(service)
    _assert_published_anew(service, got, ahead + 1)
    assert "WARNING" not in err


def test_no_serial_outside_the_range_is_signed() -> None:
    """A verified manifest already at the largest serial (10^18-1): the next would be past what nodes read, so
    the publish is refused naming the limit, and nothing is signed or replaced."""
    top = manifest.limits().serial_max
    assert top == 10**18 - 1 < 2**63 - 1
    data = manifest.Manifest(CLUSTER, "head", "c" * 64, 10, top).to_bytes()
    service = BlobService(_signed(data))
    with pytest.raises(payload_publish.PublishError) as caught:
        _publish(service)
    assert f"serial {top + 1} is past {top}" in str(caught.value)
    assert "payload_limits.serial_max_digits" in str(caught.value)
    assert service.blobs[MANIFEST_BLOB] == data
    assert [p for m, p, _ in service.requests if m == "PUT"] == [ARCHIVE_BLOB]


@pytest.mark.parametrize("serial", [0, -1, 10**18, 2**63, 2**64, True])
def test_a_manifest_outside_the_serial_range_cannot_be_made(serial: int) -> None:
    """The manifest type refuses a serial outside 1..10^18-1 (or a bool), so none can be signed."""
    with pytest.raises(ValueError, match=r"outside 1\.\.999999999999999999 "):
        manifest.Manifest(CLUSTER, "head", SHA, 10, serial)


def test_the_largest_manifest_fits_the_cap_with_room() -> None:
    """The longest manifest the formats allow (63-character cluster and payload names, 18-digit serial and
    size) is 385 bytes, within payload_limits.manifest_max_bytes (the figure node.yaml's comment gives)."""
    longest = manifest.Manifest("c" * 63, "n" * 63, SHA, 10**18 - 1, 10**18 - 1).to_bytes()
    assert len(longest) == 385
    assert len(longest) * 2 < manifest.limits().manifest_max_bytes
    assert manifest.limits().signature_max_bytes == 64 == len(signing.key().sign(longest))


def test_the_command_verifies_with_the_stacks_key(
    monkeypatch: pytest.MonkeyPatch, write_stack: Any, dev_raw: dict[str, Any]
) -> None:
    """`gb300 payload publish` hands the publisher the stack's signingPublicKey to verify with."""
    from gb300 import cli, config  # noqa: PLC0415

    seen: list[str | None] = []

    def publish(self: Any, cluster: str, name: str, archive: bytes, key: Any, *, public_key: str | None = None) -> None:
        seen.append(public_key)

    raw = signing.with_test_key(dev_raw)
    monkeypatch.setattr(payload_publish.Publisher, "publish", publish)
    monkeypatch.setattr(payload_publish, "container_client", lambda *a, **k: object())
    monkeypatch.setenv(manifest.SIGNING_KEY_ENV, signing.key_pem())
    expect = [
        w for r in payload_publish.render(config.parse(raw)) for w in ("--expect", f"{r.name}={r.payload.sha256}")
    ]
    args = ["payload", "publish", "--stack-file", str(write_stack(raw)), "--account-url", ACCOUNT_URL, *expect]
    assert cli.main(args) == 0
    assert seen
    assert set(seen) == {signing.public_key()}


def test_manifest_bytes_helper_is_the_one_serialization() -> None:
    """The planted manifests above are byte for byte what the publisher writes, where the serial is in range."""
    assert _manifest_text("5", size=len(ARCHIVE)) == manifest.Manifest(CLUSTER, "head", SHA, len(ARCHIVE), 5).to_bytes()
    assert json.loads(_manifest_text(str(2**64)))["serial"] == 2**64
