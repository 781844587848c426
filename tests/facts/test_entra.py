"""``data/entra.yaml``: what gb300 relies on about Entra sign-in has a public source and a status, and gb300 installs
the extension only where Microsoft documents it."""

from __future__ import annotations

from gb300.facts import catalog, entra
from gb300.facts.loader import data


def test_every_fact_names_its_source_and_status() -> None:
    """The extension, each support row and the uid facts each carry an https source and verified or unverified."""
    raw = data("entra.yaml")
    entries = [raw["extension"], raw["uids"], *raw["support"]]
    for entry in entries:
        assert str(entry["source"]).startswith("https://")
        assert entry["status"] in ("verified", "unverified")


def test_sign_in_is_usable_on_x86_ubuntu_and_not_on_the_gpu_nodes_arm64() -> None:
    """Ubuntu 24.04 on x86_64 (the login nodes) is supported and verified; on arm64 (the GB300 nodes' Grace CPUs)
    the row is not usable, so no GPU node relies on Entra sign-in."""
    facts = entra.load()
    x64 = facts.supports("ubuntu-24.04", "x64")
    arm = facts.supports("ubuntu-24.04", "arm64")
    assert x64 is not None
    assert x64.usable
    assert arm is not None
    assert not arm.usable
    gpu_arch = catalog.load().skus["Standard_ND128isr_GB300_v6"].cpu_arch
    row = facts.supports("ubuntu-24.04", gpu_arch)
    assert row is not None
    assert not row.usable


def test_the_extension_is_microsofts_and_needs_a_system_identity() -> None:
    """The extension is AADSSHLoginForLinux of Microsoft.Azure.ActiveDirectory, which needs a system-assigned
    identity on the VM (the login VMs have one)."""
    facts = entra.load()
    assert (facts.publisher, facts.type) == ("Microsoft.Azure.ActiveDirectory", "AADSSHLoginForLinux")
    assert facts.needs_system_identity
