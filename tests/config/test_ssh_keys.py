"""gb300:access.sshPublicKey: one real key on one line, of a type and size Azure accepts, every byte checked."""

from __future__ import annotations

import base64
import shutil
import struct
import subprocess
from pathlib import Path
from typing import Any

import pytest

from gb300 import cli, config
from gb300.errors import ConfigError

ED25519 = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAABAgMEBQYHCAkKCwwNDg8QERITFBUWFxgZGhscHR4f ops@example"


def _keygen(tmp_path: Path, kind: str, bits: int | None = None) -> str:
    """A fresh public key from ssh-keygen (or, without it, the cryptography package)."""
    exe = shutil.which("ssh-keygen")
    if exe is not None:
        key = tmp_path / f"id_{kind}_{bits or 0}"
        cmd = [exe, "-q", "-t", kind, "-N", "", "-C", "test@example", "-f", str(key)]
        subprocess.run([*cmd, *(["-b", str(bits)] if bits else [])], check=True, capture_output=True, timeout=60)
        return key.with_suffix(".pub").read_text(encoding="utf-8").strip()
    crypto = pytest.importorskip(
        "cryptography.hazmat.primitives.asymmetric.rsa", reason="no ssh-keygen, no cryptography"
    )
    from cryptography.hazmat.primitives import serialization  # noqa: PLC0415

    assert kind == "rsa"
    private = crypto.generate_private_key(public_exponent=65537, key_size=bits or 2048)
    public = private.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    return public.decode() + " test@example"


def _raw(key: str) -> dict[str, Any]:
    return {
        "cluster": {"name": "ref", "location": "eastus2"},
        "access": {"sshPublicKey": key},
        "gpuPools": [{"name": "train", "racks": 1}],
    }


def _problem(key: str) -> str:
    with pytest.raises(ConfigError) as info:
        config.parse(_raw(key))
    (line,) = str(info.value).splitlines()
    return line


def test_real_1024_bit_rsa_key_is_refused(tmp_path: Path) -> None:
    """A 1024-bit RSA key made by ssh-keygen is refused with its real size; Azure needs 2048 bits."""
    line = _problem(_keygen(tmp_path, "rsa", 1024))
    assert line.startswith("gb300:access.sshPublicKey: is an RSA key of 1024 bits; Azure needs at least 2048")


def test_real_2048_bit_rsa_and_ed25519_keys_pass(tmp_path: Path) -> None:
    """Keys ssh-keygen makes by default sizes are accepted as they are."""
    for key in (_keygen(tmp_path, "rsa", 2048), _keygen(tmp_path, "ed25519")):
        assert config.parse(_raw(key)).access.ssh_public_key == key


def test_second_key_after_a_newline_is_refused(tmp_path: Path) -> None:
    """A second key riding after a newline (here a weak one) never reaches authorized_keys."""
    weak = _keygen(tmp_path, "rsa", 1024)
    line = _problem(f"{ED25519}\n{weak}")
    assert line.startswith("gb300:access.sshPublicKey: must be one public key on one line (got 2 lines)")


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        pytest.param(ED25519 + "\r" + ED25519, "must be one public key on one line", id="carriage-return"),
        pytest.param(ED25519.replace(" ops", "\tops"), "must not hold control characters", id="tab"),
        pytest.param(
            'command="/bin/sh" ' + ED25519,
            "Azure accepts ssh-ed25519, ssh-rsa (got type 'command=\"/bin/sh\"')",
            id="options-prefix",
        ),
        pytest.param(
            "ssh-ed25519 "
            + base64.b64encode(struct.pack(">I", 11) + b"ssh-ed25519" + struct.pack(">I", 3) + b"abc").decode(),
            "the body is not a 32-byte Ed25519 key",
            id="short-ed25519",
        ),
        pytest.param(
            "ssh-rsa "
            + base64.b64encode(
                b"".join(
                    struct.pack(">I", len(f)) + f for f in (b"ssh-rsa", b"\x02", (2**2047 + 1).to_bytes(257, "big"))
                )
            ).decode(),
            "the body is not a valid ssh-rsa key (e must be >= 3",
            id="rsa-exponent-two",
        ),
    ],
)
def test_malformed_keys_are_refused(key: str, expected: str) -> None:
    """Control characters, authorized_keys options and truncated bodies are refused on one line."""
    assert expected in _problem(key)


def test_cli_refuses_two_keys_with_one_line(
    tmp_path: Path, write_stack: Any, dev_raw: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    """gb300 plan exits 2 on a two-key field, with one line naming gb300:access.sshPublicKey."""
    raw = {**dev_raw, "access": {**dev_raw["access"], "sshPublicKey": ED25519 + "\n" + _keygen(tmp_path, "rsa", 1024)}}
    assert cli.main(["plan", "--stack-file", str(write_stack(raw)), "--quiet"]) == 2
    err = [line for line in capsys.readouterr().err.strip().splitlines() if not line.startswith("gb300 plan: ")]
    assert len(err) == 1
    assert err[0].startswith("gb300:access.sshPublicKey: must be one public key on one line")
