"""Recognise secret-looking material so it never reaches custom data (readable by anyone on the VM
and stored in the scale set model). Nodes fetch secrets at boot with their managed identity."""

from __future__ import annotations

import re

__all__ = ["find_secret_material"]

_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("private key block", re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----")),
    ("ssh private key", re.compile(r"openssh-key-v1|b3BlbnNzaC1rZXktdjE")),
    ("Azure storage connection string", re.compile(r"AccountKey=[A-Za-z0-9+/=]{20,}")),
    ("shared access signature", re.compile(r"[?&]sig=[A-Za-z0-9%+/=]{20,}")),
    ("bearer token", re.compile(r"(?i)\bbearer\s+[a-z0-9._~+/-]{20,}")),
    ("JSON web token", re.compile(r"\beyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.")),
    ("GitHub token", re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}")),
    (
        "password assignment",
        # A literal value only: not a *_NAME key (the name of a secret), not a shell expansion ($VAR, $(cmd)).
        re.compile(
            r"(?im)^\s*(?![\w.-]*_name\b)[\w.-]*(password|passwd|secret|token|api_?key)[\w.-]*\s*[:=]\s*(?![\"']?\$)\S+"
        ),
    ),
    (
        "cloud-config user password",
        re.compile(r"(?m)^\s*(chpasswd|passwd|hashed_passwd|plain_text_passwd)\s*:"),
    ),
)


def find_secret_material(text: str) -> list[str]:
    """Names of the secret-looking patterns found in `text` (empty when it looks clean)."""
    return [name for name, pattern in _PATTERNS if pattern.search(text)]
