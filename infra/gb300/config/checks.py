"""Field checks of the stack configuration: names, CIDRs, SSH keys, sizes, paths; and the path-aware error.

Each ``check_*`` (``_check_*`` where only this module uses it) takes a value pydantic has parsed and returns it (or
its normal form) or raises ``ValueError`` with the message the user sees after the key path. :class:`PathError`
lets a model-level check name a key path other than its own.
"""

from __future__ import annotations

import base64
import binascii
import difflib
import ipaddress
import re
import struct
from typing import Any

from gb300.config.text import refuse_unprintable
from gb300.errors import Gb300Error
from gb300.facts import catalog

NAMESPACE = "gb300"

# Key types Azure accepts for Linux VM SSH keys. Security-key (sk-) types are not accepted by Azure.
_SSH_KEY_TYPES = ("ssh-ed25519", "ssh-rsa")
_RSA_MIN_BITS = 2048


def check_name(value: str) -> str:
    if not re.fullmatch(r"[a-z][a-z0-9-]*", value) or value.endswith("-") or "--" in value:
        raise ValueError(
            f"must be lowercase letters, digits and single hyphens, starting with a letter (got {value!r})"
        )
    return value


# Names gb300.program gives its own parts after "<cluster>-" (head node, node identity, monitoring, storage,
# resource group). A pool of the same name would name its resources like theirs: pool "head" names its component
# like the head node, and rack 1's log association carries an alias (its URN before racks were components) equal
# to the head VM's association's URN, so the engine would take one for the other.
RESERVED_POOL_NAMES = ("head", "node", "mon", "lustre", "blob", "rg")


def check_pool_name(value: str) -> str:
    if not re.fullmatch(r"[a-z][a-z0-9]*", value):
        raise ValueError(f"must be lowercase letters and digits, starting with a letter (got {value!r})")
    if value in RESERVED_POOL_NAMES:
        raise ValueError(
            f"is a name gb300 gives its own resources (got {value!r}); choose another, such as 'train' "
            f"(reserved: {', '.join(RESERVED_POOL_NAMES)})"
        )
    return value


def check_location(value: str) -> str:
    if not re.fullmatch(r"[a-z][a-z0-9]+", value):
        raise ValueError(f"must be an Azure region name such as 'eastus2' (got {value!r})")
    regions = catalog.load().limit("azureRegions")
    if value not in regions:
        close = difflib.get_close_matches(value, regions, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ValueError(
            f"is not an Azure region (got {value!r}){hint} (`az account list-locations -o table` lists them; "
            "a region newer than infra/gb300/data/platform.yaml goes there)"
        )
    return value


def check_tag_key(value: str) -> str:
    limits = catalog.load()
    prefixes = limits.limit("reservedTagPrefixes")
    if any(value.lower().startswith(p) for p in prefixes):
        raise ValueError(f"must not start with {', '.join(prefixes)}: Azure reserves those prefixes (got {value!r})")
    longest = int(limits.limit("tagNameMaxLength"))
    if len(value) > longest:
        raise ValueError(
            f"must be at most {longest} characters, Azure's limit for tags on storage accounts (got {len(value)})"
        )
    return value


def check_address_space(value: str) -> str:
    net = ipaddress.IPv4Network(value)
    ranges = [ipaddress.IPv4Network(r) for r in catalog.load().limit("vnetAddressRanges")]
    if not any(net.subnet_of(r) for r in ranges):
        raise ValueError(
            f"must be private: inside {', '.join(str(r) for r in ranges)} (RFC 1918, RFC 6598) (got {value!r})"
        )
    return value


def zone_to_str(value: Any) -> Any:
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


def check_cidr(value: Any) -> str:
    if not isinstance(value, str) or len(value) > len("255.255.255.255/32"):
        shown = _short(value) if isinstance(value, str) else value
        raise ValueError(f"must be an IPv4 CIDR such as '10.40.0.0/16' (got {shown!r})")
    try:
        net = ipaddress.IPv4Network(value, strict=False)
    except ValueError:
        raise ValueError(f"must be an IPv4 CIDR such as '10.40.0.0/16' (got {value!r})") from None
    if "/" not in value:
        raise ValueError(f"must give a prefix length, such as '{value}/32' (got {value!r})")
    if str(net) != value:
        raise ValueError(f"has host bits set; the network is {net} (got {value!r})")
    return value


def check_ssh_public_key(value: str) -> str:
    """One OpenSSH public key on one line, of a type Azure accepts, with a body that decodes to that type."""
    text = value.strip()
    if "PRIVATE KEY" in text:
        raise ValueError("is a private key; give the public key (the .pub file), never the private one")
    lines = text.splitlines()
    if len(lines) > 1:
        raise ValueError(
            f"must be one public key on one line (got {len(lines)} lines); a second line would reach "
            "authorized_keys unchecked"
        )
    if any(ord(c) < 32 or ord(c) == 127 for c in text):
        raise ValueError(f"must not hold control characters such as tabs (got {_short(text)!r})")
    parts = text.split()
    hint = "must be an OpenSSH public key such as 'ssh-ed25519 AAAA... you@host'"
    if len(parts) < 2:
        raise ValueError(f"{hint} (got {_short(text)!r})")
    kind, blob = parts[0], parts[1]
    if kind not in _SSH_KEY_TYPES:
        raise ValueError(f"{hint}; Azure accepts {', '.join(_SSH_KEY_TYPES)} (got type {_short(kind)!r})")
    try:
        raw = base64.b64decode(blob, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"{hint}; the key body is not base64 (got {_short(text)!r})") from None
    fields = _ssh_fields(raw)
    if not fields or fields[0] != kind.encode():
        raise ValueError(f"{hint}; the key body does not encode a {kind} key (got {_short(text)!r})")
    if kind == "ssh-ed25519" and (len(fields) != 2 or len(fields[1]) != 32):
        raise ValueError(f"{hint}; the body is not a 32-byte Ed25519 key (got {_short(text)!r})")
    if kind == "ssh-rsa":
        if len(fields) != 3:
            raise ValueError(f"{hint}; the body is not an RSA key (e, n) (got {_short(text)!r})")
        bits = int.from_bytes(fields[2], "big").bit_length()
        if bits < _RSA_MIN_BITS:
            raise ValueError(
                f"is an RSA key of {bits} bits; Azure needs at least {_RSA_MIN_BITS}. "
                "Make a new one with 'ssh-keygen -t ed25519'"
            )
    _load_ssh_key(kind, blob, hint, text)
    return text


def _load_ssh_key(kind: str, blob: str, hint: str, text: str) -> None:
    """The body as OpenSSH's own loader reads it (``cryptography``'s ``load_ssh_public_key``: an RSA exponent below
    3 or even, a point off the curve); refused as the line's other problems are."""
    from cryptography.exceptions import UnsupportedAlgorithm  # noqa: PLC0415 - loaded only for a key
    from cryptography.hazmat.primitives import serialization  # noqa: PLC0415

    try:
        serialization.load_ssh_public_key(f"{kind} {blob}".encode("ascii"))
    except (ValueError, UnsupportedAlgorithm) as exc:
        raise ValueError(f"{hint}; the body is not a valid {kind} key ({exc}) (got {_short(text)!r})") from None


def _ssh_fields(raw: bytes) -> list[bytes]:
    fields: list[bytes] = []
    pos = 0
    while pos + 4 <= len(raw):
        (length,) = struct.unpack(">I", raw[pos : pos + 4])
        pos += 4
        if pos + length > len(raw):
            return []
        fields.append(raw[pos : pos + length])
        pos += length
    return fields if pos == len(raw) else []


def _short(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def check_ssh_limit(value: int) -> int:
    """``gb300:policy.sshSourceLimitPrefix`` only tightens the SSH rule: a prefix shorter than the default admits more
    of the Internet, and a /1 would admit half of it with no reason recorded anywhere."""
    loosest = int(catalog.load().limit("sshSourceLimitPrefix"))
    if value < loosest:
        raise ValueError(
            f"must be at least {loosest} (got {value}): a shorter prefix would let SSH admit more than one /{loosest} "
            "of public addresses and so switch rule no-ssh-from-internet off. This key only tightens the limit; to "
            "admit wider sources, suppress no-ssh-from-internet in gb300:policy.suppress with a reason, which every "
            "plan shows"
        )
    return value


# An Ed25519 public key as DER SubjectPublicKeyInfo (RFC 8410): this 12-byte header, then the 32-byte key.
ED25519_SPKI_PREFIX = bytes.fromhex("302a300506032b6570032100")


def check_payload_public_key(value: str) -> str:
    """An Ed25519 public key, base64 of its DER SubjectPublicKeyInfo: the one line between a PEM's armour lines,
    as ``gb300 payload keygen`` prints it."""
    text = value.strip()
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != len(ED25519_SPKI_PREFIX) + 32 or not raw.startswith(ED25519_SPKI_PREFIX):
        raise ValueError(
            "must be an Ed25519 public key: the base64 line `gb300 payload keygen` prints, starting with "
            f"'MCowBQYDK2VwAyEA' (got {_short(text)!r})"
        )
    return text


def check_username(value: str) -> str:
    if not re.fullmatch(r"[a-z_][a-z0-9_-]{0,31}", value):
        raise ValueError(f"must be a Linux user name: lowercase, digits, '_' or '-' (got {value!r})")
    if value in catalog.load().limit("reservedAdminUsernames"):
        raise ValueError(f"is reserved by Azure (got {value!r}); choose another name such as 'azureuser'")
    return value


def check_imds_user(value: str) -> str:
    if not re.fullmatch(r"[a-z_][a-z0-9_-]{0,31}", value):
        raise ValueError(f"must be a Linux user name: lowercase, digits, '_' or '-' (got {value!r})")
    if value == "root":
        raise ValueError("need not list root: root always reaches the instance metadata service")
    return value


def check_gpu_size(value: str) -> str:
    cat = catalog.load()
    sku = cat.skus.get(value)
    if sku is None or not sku.is_gpu:
        known = ", ".join(sorted(n for n, s in cat.skus.items() if s.is_gpu))
        raise ValueError(f"is not a GPU size in the catalog (got {_short(value)!r}); known: {known}")
    return value


def check_cpu_size(value: str) -> str:
    cat = catalog.load()
    sku = cat.skus.get(value)
    if sku is None or sku.is_gpu:
        known = ", ".join(sorted(n for n, s in cat.skus.items() if not s.is_gpu))
        raise ValueError(f"is not a CPU size in the catalog (got {_short(value)!r}); known: {known}")
    return value


def check_size(value: str) -> str:
    if value not in catalog.load().skus:
        known = ", ".join(sorted(catalog.load().skus))
        raise ValueError(f"is not a size in the catalog (got {_short(value)!r}); known: {known}")
    return value


_IMAGE_ID = re.compile(r"/subscriptions/[^/]+/resourceGroups/[^/]+/providers/Microsoft\.Compute/.+", re.IGNORECASE)


def check_image(value: str) -> str:
    if value.startswith("/"):
        if not _IMAGE_ID.fullmatch(value):
            raise ValueError(f"must be an image resource id under Microsoft.Compute (got {_short(value)!r})")
        return value
    parts = value.split(":")
    if len(parts) != 4 or not all(parts):
        raise ValueError(
            f"must be a marketplace URN 'publisher:offer:sku:version' or an image id (got {_short(value)!r})"
        )
    return value


def check_resource_id(value: str) -> str:
    if not value.startswith("/subscriptions/"):
        raise ValueError(f"must be an Azure resource id starting with /subscriptions/ (got {_short(value)!r})")
    return value


def check_mount_path(value: str) -> str:
    """A mount point of its own: a plain absolute path, not a directory that holds others, and neither inside nor
    above a system tree or a tree gb300 runs from or writes as root (``data/platform.yaml``)."""
    path = value.rstrip("/") or "/"
    limits = catalog.load()
    if any(part in (".", "..", "") for part in path.split("/")[1:]) and path != "/":
        raise ValueError(f"must be a plain absolute path without '..', '.' or '//' (got {value!r})")
    if path in limits.limit("reservedMountPoints"):
        raise ValueError(f"must be a dedicated directory such as '/lustre', not {path} itself (got {value!r})")
    for tree in limits.limit("reservedMountTrees"):
        if _within(path, tree) or _within(tree, path):
            raise ValueError(
                f"must not be in the system tree {tree} (got {value!r}); use a directory such as '/lustre'"
            )
    for tree in limits.limit("gb300MountTrees"):
        if _within(path, tree) or _within(tree, path):
            where = "inside" if _within(path, tree) and path != tree else "above" if path != tree else "the tree"
            raise ValueError(
                f"must not be {where} {tree}, where gb300 runs programs or writes as root (got {value!r}): a mount "
                "there would put the storage's contents where root reads or runs them. Use a directory of its own "
                "such as '/lustre' or '/mnt/data'"
            )
    return path


def _within(path: str, tree: str) -> bool:
    """Whether ``path`` is ``tree`` or lies below it."""
    return path == tree or path.startswith(tree.rstrip("/") + "/")


def check_container_name(value: str) -> str:
    if not re.fullmatch(r"[a-z0-9][a-z0-9-]{1,61}[a-z0-9]", value) or "--" in value:
        raise ValueError(
            f"must be 3-63 lowercase letters, digits and single hyphens, starting and ending with a letter or "
            f"digit (got {_short(value)!r})"
        )
    return value


def check_email(value: str) -> str:
    """One address ``local@domain.tld``, parsed in one pass: a backtracking pattern took minutes on a long value."""
    refuse_unprintable(value)
    local, at, domain = value.partition("@")
    labels = domain.split(".")
    if not at or not local or "@" in domain or len(labels) < 2 or not all(labels) or any(c.isspace() for c in value):
        raise ValueError(f"must be an email address such as 'oncall@example.com' (got {_short(value)!r})")
    return value


def check_webhook(value: str) -> str:
    if not re.fullmatch(r"https://[^\s/]+(/\S*)?", value):
        raise ValueError(f"must be an https:// URL; alerts never go out in clear text (got {_short(value)!r})")
    return value


_REASON_MIN_CHARS = 10


def check_reason(value: str) -> str:
    text = value.strip()
    if "\n" in text or len(text) < _REASON_MIN_CHARS:
        raise ValueError(
            f"must be one line of at least {_REASON_MIN_CHARS} characters saying why the rule does not apply "
            f"(got {_short(text)!r})"
        )
    return text


def suppression_from_text(value: Any) -> Any:
    return {"rule": value} if isinstance(value, str) else value


class PathError(ValueError, Gb300Error):
    """A model-level problem that belongs to a specific key path. A ``ValueError``, so pydantic makes it one problem
    of the stack's :class:`~gb300.errors.ConfigError` (:mod:`gb300.config.messages` reads its path)."""

    def __init__(self, loc: tuple[str | int, ...], message: str, *, relative: bool = False) -> None:
        super().__init__(message)
        self.loc = loc
        self.relative = relative  # ``loc`` continues the path of the model that raised it (a list item)


def format_path(loc: tuple[str | int, ...]) -> str:
    """``('gpuPools', 0, 'racks')`` -> ``gb300:gpuPools[0].racks``. A part that is a user's mapping key and is long
    or not printable (``gb300:cluster.tags``) is shown shortened and escaped, never raw."""
    out = NAMESPACE
    for i, part in enumerate(loc):
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            shown = part if part.isprintable() and len(part) <= _PATH_PART_MAX else ascii(_short(part, _PATH_PART_MAX))
            out += (":" if i == 0 else ".") + shown
    return out


_PATH_PART_MAX = 80
