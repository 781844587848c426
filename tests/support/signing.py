"""The test suite's payload signing key: a key pair made for the tests alone (the shipped stacks' private halves
are their deployers' secrets, never in the repository). Test plans carry its public half."""

from __future__ import annotations

from typing import Any

from gb300 import paths
from gb300.node import manifest

TEST_KEY_FILE = paths.REPO_ROOT / "tests" / "fixtures" / "keys" / "payload-signing-test.pem"


def key_pem() -> str:
    return TEST_KEY_FILE.read_text(encoding="ascii")


def key() -> Any:
    """The tests' Ed25519 private key."""
    return manifest.load_private_key(key_pem(), source=str(TEST_KEY_FILE))


def public_key() -> str:
    """Its public half, as a stack carries it (gb300:storage.nodePayload.signingPublicKey)."""
    return manifest.public_key_line(key())


def with_test_key(raw: dict[str, Any]) -> dict[str, Any]:
    """A stack's gb300 namespace with the tests' public key in place of its own."""
    storage = dict(raw.get("storage") or {})
    node_payload = dict(storage.get("nodePayload") or {})
    node_payload["signingPublicKey"] = public_key()
    storage["nodePayload"] = node_payload
    return {**raw, "storage": storage}
