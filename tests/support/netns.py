"""Run a bash driver as root in fresh network and mount namespaces: loopback only, an /etc/hosts of the test's
own (bind-mounted over the host's, in the new mount namespace only) and a test CA for the TLS stand-ins.

These tests need root (or passwordless sudo): CI has it. Without it they fail, saying so; a caller may instead
skip outside CI (``skip_outside_ci``), never under CI (``CI`` set).
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import shutil
import subprocess
from pathlib import Path

import pytest

TOOLS = ("unshare", "ip", "curl", "openssl")
"""What a driver with TLS stand-ins needs; a caller names its own."""


def privileged(*, skip_outside_ci: bool = False) -> list[str]:
    """The prefix that runs a command as root here: none as root, ``sudo -n`` where that works; else fail (or,
    with ``skip_outside_ci``, skip, saying so, unless ``CI`` is set)."""
    if os.geteuid() == 0:
        return []
    if (
        shutil.which("sudo")
        and subprocess.run(["sudo", "-n", "true"], capture_output=True, check=False).returncode == 0
    ):
        return ["sudo", "-n"]
    if skip_outside_ci and not os.environ.get("CI"):
        pytest.skip("not root and no passwordless sudo: a network namespace needs root")
    pytest.fail("needs root or passwordless sudo: a network namespace with stand-in endpoints (CI has root)")


def require(*tools: str) -> None:
    """Fail naming the first of ``tools`` this machine lacks (``/usr/sbin`` counts: a non-root PATH may lack it)."""
    for tool in tools:
        if shutil.which(tool) is None and not Path("/usr/sbin", tool).exists():
            pytest.fail(f"{tool} is not installed (scripts/ensure-test-tools installs the tests' system tools)")


def make_ca(directory: Path, hosts: list[str]) -> tuple[Path, Path, Path]:
    """A throwaway CA and a server certificate for ``hosts``: (ca.pem, server.pem, server.key)."""
    from cryptography import x509  # noqa: PLC0415
    from cryptography.hazmat.primitives import hashes, serialization  # noqa: PLC0415
    from cryptography.hazmat.primitives.asymmetric import ec  # noqa: PLC0415
    from cryptography.x509.oid import NameOID  # noqa: PLC0415

    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "gb300 test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=2))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = [x509.DNSName(h) for h in hosts]
    names.append(x509.IPAddress(ipaddress.IPv4Address("127.0.0.1")))
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=2))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    ca_pem, cert_pem, key_pem = directory / "ca.pem", directory / "server.pem", directory / "server.key"
    ca_pem.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    cert_pem.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_pem.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return ca_pem, cert_pem, key_pem


def run(
    driver: str,
    env: dict[str, str],
    cwd: Path,
    timeout: int = 300,
    *,
    tools: tuple[str, ...] = TOOLS,
    skip_outside_ci: bool = False,
) -> subprocess.CompletedProcess[str]:
    """``driver`` (bash) as root in new network and mount namespaces, with exactly ``env``; ``tools`` must exist."""
    prefix = privileged(skip_outside_ci=skip_outside_ci)
    require(*tools)
    return subprocess.run(
        [*prefix, "env", "-i", *(f"{k}={v}" for k, v in env.items()), "unshare", "-n", "-m", "bash", "-c", driver],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=cwd,
    )


def phases(stdout: str, first: str = "open") -> dict[str, list[str]]:
    """A driver's output cut at its ``-- NAME`` lines: NAME -> the lines after it (``first``: the lines before any)."""
    found: dict[str, list[str]] = {first: []}
    phase = first
    for line in stdout.splitlines():
        if line.startswith("-- "):
            phase = line[3:]
            found[phase] = []
        else:
            found[phase].append(line)
    return found
