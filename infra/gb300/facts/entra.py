"""Microsoft Entra sign-in on Linux VMs (``data/entra.yaml``): the VM extension, where it is supported, and what is
known of the uids it gives."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from gb300.errors import DataError
from gb300.facts.loader import data

__all__ = ["EntraFacts", "Support", "load"]


@dataclass(frozen=True)
class Support:
    """Whether the extension supports one OS on one CPU architecture (the catalog's ``cpuArch``)."""

    os: str
    arch: str
    supported: bool
    source: str
    status: str

    @property
    def usable(self) -> bool:
        """Supported, and checked against its source: the only rows gb300 installs the extension on."""
        return self.supported and self.status == "verified"


@dataclass(frozen=True)
class EntraFacts:
    """The extension's identity, its support table and what is known of its uids."""

    publisher: str
    type: str
    type_handler_version: str
    needs_system_identity: bool
    source: str
    support: tuple[Support, ...]
    uid_source: str
    uid_status: str

    def supports(self, os: str, arch: str) -> Support | None:
        """The support row of ``os`` on ``arch``, or None when the data file has none."""
        return next((s for s in self.support if s.os == os and s.arch == arch), None)


@functools.cache
def load() -> EntraFacts:
    """The facts of ``data/entra.yaml``; a malformed file is a :class:`DataError` (a bug in gb300)."""
    raw = data("entra.yaml")
    try:
        ext, uids = raw["extension"], raw["uids"]
        support = tuple(
            Support(str(s["os"]), str(s["arch"]), bool(s["supported"]), str(s["source"]), str(s["status"]))
            for s in raw["support"]
        )
        return EntraFacts(
            publisher=str(ext["publisher"]),
            type=str(ext["type"]),
            type_handler_version=str(ext["typeHandlerVersion"]),
            needs_system_identity=bool(ext["needsSystemAssignedIdentity"]),
            source=str(ext["source"]),
            support=support,
            uid_source=str(uids["source"]),
            uid_status=str(uids["status"]),
        )
    except (KeyError, TypeError) as exc:
        msg = f"data/entra.yaml: malformed ({exc!r})"
        raise DataError(msg) from exc
