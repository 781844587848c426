"""fetch-payload against a payload container an attacker can write to but cannot sign for (issue 36).

Each case runs the dev head's fetch-payload (from its rendered custom data, with its payload.env) as a node runs
it, with the real curl, openssl, head and sed, in a network namespace: the Blob service and IMDS are the
stand-ins of tests/support/fake_azure.py over TLS with a test CA. What the cases show:

* sizes: a manifest, signature or archive longer than its bound (payload_limits in node.yaml; the archive's
  signed size) is stopped there with a line naming it, and no file the fetch writes is ever longer than the
  bound. The stand-in stops each long body after its first 256 KiB and waits while the test measures every file
  under /var/lib/gb300, then sends the rest; with a declared length (what Azure's Get Blob always sends) and
  without one (chunked: what Azure never sends; a reader must bound such a body itself, curl before 8.4 does
  not);
* serials: serials are compared exactly at any length (never with bash's -lt, which errors past 2^63-1 and so
  skipped the rollback refusal), a manifest's serial outside 1..10^18-1 or not a JSON integer is refused, and a
  node whose stored serial is not one (19 or 20 digits, leading zeros, not a number, missing beside a payload in
  place) fails closed instead of skipping the check;
* a freshly reimaged node (no stored serial) takes any manifest signed for its cluster and payload, an old one
  too (docs/node-payload.md#what-a-fresh-node-accepts).

The stand-in Blob service cannot show Azure's own limits (a block blob's size, request rates); the checks here
are the node's. Needs root (CI has it); fails without it, never skips.
"""

from __future__ import annotations

import hashlib
import json
import sys
import textwrap
from dataclasses import dataclass, field
from typing import Any

import pytest
import yaml

from gb300 import config, paths
from gb300 import tags as gb300_tags
from gb300.config import stacks as gb300_stacks
from gb300.node import custom_data as nodes
from gb300.node import manifest
from gb300.node.payload import ACCOUNT_PLACEHOLDER, FETCH_PAYLOAD, PAYLOAD_ENV
from tests.support import netns, signing

pytestmark = pytest.mark.slow  # a namespace and a TLS stand-in per case

ACCOUNT = "devpl0123abcd"
HOST = f"{ACCOUNT}.blob.core.windows.net"
CONTAINER = "gb300-node-payload"
TOKEN = "imds-storage-token"  # noqa: S105 - the stand-in IMDS's fixed token
PAUSE = 256 * 1024  # the stand-in sends this much of a longer body, then waits for the test to look
MiB = 1024 * 1024
OLD_SHA = "0" * 64  # the payload "in place" on a node that already took one

DRIVER = textwrap.dedent(
    """\
    set -uo pipefail
    ip link set lo up
    ip addr add 169.254.169.254/32 dev lo
    mount --bind "$WORK/hosts" /etc/hosts
    for case in $CASES; do
      dir="$WORK/cases/$case"
      flags=$(cat "$dir/flags")
      # shellcheck disable=SC2086
      PYTHONPATH="$REPO" "$PY" -m tests.support.fake_azure --state "$dir/azure" --cert "$WORK/server.pem" \\
        --key "$WORK/server.key" --payload-host "$PAYLOAD_HOST" --accept-token "$TOKEN" \\
        --imds-tags "$WORK/tags.json" --pause-after "$PAUSE" $flags &
      fake=$!
      for _ in $(seq 200); do
        [ -e "$dir/azure/ready" ] && curl -s -o /dev/null -H Metadata:true http://169.254.169.254/x && break
        sleep 0.05
      done
      GB300_ROOT="$dir/root" GB300_PAYLOAD_ATTEMPTS=1 GB300_PAYLOAD_UPDATE="$(cat "$dir/update")" \\
        "$dir/root$FETCH" >"$dir/out" 2>&1 &
      fetch=$!
      # While the stand-in holds a long body back: every file under /var/lib/gb300 and its size.
      for _ in $(seq 400); do
        [ -e "$dir/azure/paused" ] || ! kill -0 "$fetch" 2>/dev/null && break
        sleep 0.05
      done
      if [ -e "$dir/azure/paused" ]; then
        sleep 1.5
        find "$dir/root/var/lib/gb300" -type f -printf '%s %f\\n' >"$dir/disk"
        ! kill -0 "$fetch" 2>/dev/null || touch "$dir/waiting"
      fi
      touch "$dir/azure/go"
      wait "$fetch"
      echo $? >"$dir/rc"
      kill "$fake"
      wait "$fake" 2>/dev/null
    done
    """
)


@dataclass
class Case:
    """One node and what the container holds for it."""

    blobs: dict[str, bytes]
    stored_serial: str | None = None
    in_place: bool = False
    """The node already runs a payload (payload.sha256 present): gb300-payload-update's situation."""
    chunked: bool = False
    flags: list[str] = field(default_factory=list)


@pytest.fixture(scope="module")
def head() -> Any:
    """The dev head's rendered custom data (the tests' signing key) and payload."""
    cfg = config.parse(signing.with_test_key(config.load_stack_file(gb300_stacks.stack_file("dev"))))
    return nodes.render(gb300_tags.ROLE_HEAD, cfg)


def _manifest_text(serial: str, archive: bytes) -> bytes:
    """The head's manifest in the one serialization with ``serial`` written as given (any digits)."""
    sha = hashlib.sha256(archive).hexdigest()
    return (
        f'{{"archive":"archives/{sha}.tar.gz","cluster":"dev","format":1,"name":"head",'
        f'"serial":{serial},"sha256":"{sha}","size":{len(archive)}}}\n'
    ).encode()


def _published(
    archive: bytes, serial: str = "1", *, body: bytes | None = None, sig_extra: bytes = b""
) -> dict[str, bytes]:
    """The container's blobs: ``archive`` (or ``body`` in its place), a manifest with ``serial``, its signature."""
    data = _manifest_text(serial, archive)
    sha = hashlib.sha256(archive).hexdigest()
    return {
        f"{CONTAINER}/{manifest.archive_blob(sha)}": archive if body is None else body,
        f"{CONTAINER}/{manifest.manifest_blob('head')}": data,
        f"{CONTAINER}/{manifest.signature_blob('head')}": signing.key().sign(data) + sig_extra,
    }


def _cases(archive: bytes) -> dict[str, Case]:
    big_manifest = b'{"format":1,"pad":"' + b"x" * (4 * MiB) + b'"}\n'
    longer = archive + b"\0" * (4 * MiB)
    cases = {
        # Sizes.
        "manifest-big": Case({f"{CONTAINER}/{manifest.manifest_blob('head')}": big_manifest}),
        "signature-big": Case(_published(archive, sig_extra=b"\0" * (4 * MiB))),
        "archive-big": Case(_published(archive, body=longer)),
        # Serials in the manifest.
        "manifest-2^63": Case(_published(archive, "9223372036854775808"), stored_serial="5", in_place=True),
        "manifest-19-digits": Case(_published(archive, "1000000000000000000"), stored_serial="5", in_place=True),
        "manifest-string-zeros": Case(_published(archive, '"0000000000010"'), stored_serial="5", in_place=True),
        # Serials stored on the node.
        "stored-2^63": Case(_published(archive, "5"), stored_serial="9223372036854775808", in_place=True),
        "stored-20-digits": Case(_published(archive, "5"), stored_serial="18446744073709551616", in_place=True),
        "stored-leading-zeros": Case(_published(archive, "5"), stored_serial="0007", in_place=True),
        "stored-not-a-number": Case(_published(archive, "5"), stored_serial="abc", in_place=True),
        "stored-missing": Case(_published(archive, "5"), in_place=True),
        # Exact comparison.
        "older-by-length": Case(_published(archive, "9"), stored_serial="10", in_place=True),
        "newer-by-length": Case(_published(archive, "10"), stored_serial="9", in_place=True),
        "older-at-18-digits": Case(
            _published(archive, "999999999999999998"), stored_serial="999999999999999999", in_place=True
        ),
        # A fresh node: any signed manifest for its cluster and payload, an old serial too.
        "fresh": Case(_published(archive, "1")),
    }
    for name in ("manifest-big", "signature-big", "archive-big"):
        cases[f"{name}-chunked"] = Case(dict(cases[name].blobs), chunked=True)
    return cases


@pytest.fixture(scope="module")
def ran(head: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Every case run: its exit status, output, status file, the files it left and what the disk held mid-body."""
    work = tmp_path_factory.mktemp("trust")
    work.chmod(0o755)
    netns.make_ca(work, [HOST])
    (work / "hosts").write_text(f"127.0.0.1 localhost {HOST}\n")
    (work / "tags.json").write_text(json.dumps({"gb300-node-client-id": "22222222-2222-2222-2222-222222222222"}))
    text = head.cloud_config.replace(ACCOUNT_PLACEHOLDER, ACCOUNT)
    files = {f["path"]: f for f in yaml.safe_load(text)["write_files"]}
    cases = _cases(head.payload.archive)
    for name, case in cases.items():
        base = work / "cases" / name
        for node_path in (FETCH_PAYLOAD, PAYLOAD_ENV):
            target = base / "root" / node_path.lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(files[node_path]["content"])
            target.chmod(int(files[node_path]["permissions"], 8))
        state = base / "root" / "var/lib/gb300"
        state.mkdir(parents=True)
        if case.stored_serial is not None:
            (state / "payload.serial").write_text(case.stored_serial + "\n")
        if case.in_place:
            (state / "payload.sha256").write_text(OLD_SHA + "\n")
        for blob, data in case.blobs.items():
            target = base / "azure" / "blobs" / blob
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        (base / "flags").write_text("--chunked" if case.chunked else "")
        (base / "update").write_text("1" if case.in_place else "0")
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
        "HOME": str(work),
        "CURL_CA_BUNDLE": str(work / "ca.pem"),
        "WORK": str(work),
        "REPO": str(paths.REPO_ROOT),
        "PY": sys.executable,
        "PAYLOAD_HOST": HOST,
        "TOKEN": TOKEN,
        "PAUSE": str(PAUSE),
        "FETCH": FETCH_PAYLOAD,
        "CASES": " ".join(cases),
    }
    proc = netns.run(DRIVER, env, cwd=work, timeout=600)
    found: dict[str, dict[str, Any]] = {}
    for name in cases:
        base = work / "cases" / name
        if not (base / "rc").exists():
            pytest.fail(f"case {name} did not run (driver exit {proc.returncode}): {proc.stderr.strip()[-800:]}")
        state = base / "root" / "var/lib/gb300"
        disk = base / "disk"
        found[name] = {
            "rc": int((base / "rc").read_text()),
            "out": (base / "out").read_text(),
            "status": (state / "status").read_text() if (state / "status").exists() else "",
            "serial": (state / "payload.serial").read_text().strip() if (state / "payload.serial").exists() else None,
            "sha": (state / "payload.sha256").read_text().strip() if (state / "payload.sha256").exists() else None,
            "extracted": (base / "root" / "usr/local/lib/gb300/lib.sh").exists(),
            "waited": (base / "waiting").exists(),
            "disk": [line.split(" ", 1) for line in disk.read_text().splitlines()] if disk.exists() else None,
            "requests": [json.loads(x)["path"] for x in (base / "azure" / "requests.jsonl").read_text().splitlines()]
            if (base / "azure" / "requests.jsonl").exists()
            else [],
        }
    return found


URL = f"https://{HOST}/{CONTAINER}/payloads/head/manifest.json"


def _largest(case: dict[str, Any]) -> dict[str, int]:
    """The size of each file under /var/lib/gb300 while the stand-in held the rest of the body back (after
    256 KiB). The fetch must not be waiting for the rest then: it stops reading at its bound."""
    assert not case["waited"], f"the fetch was still reading past its bound: {case['disk']}"
    return {name: int(size) for size, name in case["disk"] or []}


@pytest.mark.parametrize("variant", ["", "-chunked"])
def test_a_huge_manifest_stops_at_the_cap_and_never_fills_the_disk(ran: dict[str, Any], variant: str) -> None:
    """A 4 MiB manifest (declared length or chunked): the fetch stops at once naming the URL and the cap, no
    file ever holds more than 1024 bytes of it, the signature and the archive are never asked for."""
    case = ran[f"manifest-big{variant}"]
    cap = manifest.limits().manifest_max_bytes
    assert case["rc"] == 1, case["out"]
    reason = f"payload manifest too large: {URL} is longer than {cap} bytes (stopped there"
    assert f"reason: {reason}" in case["status"]
    assert all(size <= cap for size in _largest(case).values()), case["disk"]
    assert not [p for p in case["requests"] if p.endswith(".sig") or "/archives/" in p]
    assert not case["extracted"]


@pytest.mark.parametrize("variant", ["", "-chunked"])
def test_a_huge_signature_stops_at_64_bytes(ran: dict[str, Any], variant: str) -> None:
    """A signature blob of 64 bytes and 4 MiB more: stopped at 64 bytes, naming it; the archive never asked for."""
    case = ran[f"signature-big{variant}"]
    assert case["rc"] == 1, case["out"]
    assert f"reason: payload signature too large: {URL}.sig is longer than 64 bytes" in case["status"]
    sizes = _largest(case)
    assert sizes.get("manifest.sig", 0) <= 64, case["disk"]
    assert all(size <= manifest.limits().manifest_max_bytes for size in sizes.values()), case["disk"]
    assert not [p for p in case["requests"] if "/archives/" in p]


@pytest.mark.parametrize("variant", ["", "-chunked"])
def test_an_archive_longer_than_signed_stops_at_the_signed_size(ran: dict[str, Any], head: Any, variant: str) -> None:
    """The archive blob holds the signed archive and 4 MiB more: the download stops at the manifest's signed size
    (the file never longer), nothing is extracted, and the status names the archive and the size."""
    case = ran[f"archive-big{variant}"]
    size = len(head.payload.archive)
    assert case["rc"] == 1, case["out"]
    archive = f"https://{HOST}/{CONTAINER}/archives/{head.payload.sha256}.tar.gz"
    reason = f"payload archive larger than signed: {archive} is longer than the manifest's size, {size} bytes"
    assert f"reason: {reason}" in case["status"]
    assert _largest(case).get("payload.tar.gz", 0) <= size, case["disk"]
    assert not case["extracted"]
    assert case["sha"] is None


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        ("manifest-2^63", "9223372036854775808"),
        ("manifest-19-digits", "1000000000000000000"),
    ],
)
def test_a_signed_serial_past_the_range_is_refused(ran: dict[str, Any], name: str, shown: str) -> None:
    """A signed manifest whose serial is past 10^18-1 (2^63 itself, where bash's -lt errors and the old check
    let it through): refused as malformed, the payload in place and its serial kept."""
    case = ran[name]
    assert case["rc"] == 1, case["out"]
    assert f"payload manifest malformed: {URL}: serial '{shown}' is not a serial of 1 to 18 digits" in case["out"]
    assert "payload update failed (the payload in place stays)" in case["out"]
    assert (case["serial"], case["sha"], case["extracted"]) == ("5", OLD_SHA, False)


def test_a_serial_that_is_not_a_json_integer_is_refused(ran: dict[str, Any]) -> None:
    """A signed serial written as a string with leading zeros ("0000000000010"): malformed, nothing taken."""
    case = ran["manifest-string-zeros"]
    assert case["rc"] == 1, case["out"]
    assert f"payload manifest malformed: {URL}" in case["out"]
    assert (case["serial"], case["sha"], case["extracted"]) == ("5", OLD_SHA, False)


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        ("stored-2^63", "9223372036854775808"),
        ("stored-20-digits", "18446744073709551616"),
        ("stored-leading-zeros", "0007"),
        ("stored-not-a-number", "abc"),
        ("stored-missing", ""),
    ],
)
def test_a_node_fails_closed_on_a_stored_serial_it_cannot_read(ran: dict[str, Any], name: str, shown: str) -> None:
    """The serial stored for the payload in place is past the range, has leading zeros, is not a number or is
    missing beside the payload: the node takes nothing (before: the check was skipped and an older signed
    manifest, serial 5, rolled it back), and says which file and why. Not one request is made."""
    case = ran[name]
    assert case["rc"] == 1, case["out"]
    assert (
        f"payload serial unreadable: /var/lib/gb300/payload.serial holds '{shown}', not a serial of 1 to 18 digits"
        in case["out"]
    )
    assert case["sha"] == OLD_SHA
    assert not case["extracted"]
    assert case["requests"] == []


def test_serials_compare_exactly_by_length_then_digits(ran: dict[str, Any], head: Any) -> None:
    """9 is older than 10 (not "9" > "10" as strings), 10 is newer than 9, and 18-digit serials compare exactly."""
    older = ran["older-by-length"]
    assert older["rc"] == 1
    assert "payload rollback refused: manifest serial 9 is older than the payload in place (serial 10)" in older["out"]
    newer = ran["newer-by-length"]
    assert newer["rc"] == 0, newer["out"]
    assert (newer["serial"], newer["sha"]) == ("10", head.payload.sha256)
    top = ran["older-at-18-digits"]
    assert top["rc"] == 1
    assert (
        "manifest serial 999999999999999998 is older than the payload in place (serial 999999999999999999)"
        in top["out"]
    )


def test_a_fresh_node_takes_any_manifest_signed_for_it(ran: dict[str, Any], head: Any) -> None:
    """A freshly reimaged node has no stored serial: it takes a manifest signed for its cluster and payload with
    serial 1 (a replay of an old signed payload is possible there; docs/node-payload.md says what limits it)."""
    case = ran["fresh"]
    assert case["rc"] == 0, case["out"]
    assert (case["serial"], case["sha"], case["extracted"]) == ("1", head.payload.sha256, True)
