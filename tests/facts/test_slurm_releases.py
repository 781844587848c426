"""The record of what real Slurm does per release (data/slurm_releases.yaml, gb300.facts.slurm_releases)."""

from __future__ import annotations

from gb300.facts import slurm_releases
from gb300.facts.software import load_software
from gb300.slurm import options

TESTED = ("24.11", "26.05")
"""The releases the real-Slurm tests run (Debian trixie and sid)."""


def test_ours_is_the_release_versions_yaml_pins() -> None:
    """The file's own release is the one every node installs."""
    version = load_software().component("slurm").version
    assert version is not None
    assert slurm_releases.ours() == options.release_of(version)


def test_every_behaviour_says_what_ours_and_both_tested_releases_do_and_where_that_is_from() -> None:
    """Each behaviour has an answer for the pinned release and the two the tests run, each with a status and a
    public source; a behaviour fixed in a release is absent from ours when ours is that release or later."""
    found = slurm_releases.behaviours()
    assert found
    for behaviour in found.values():
        assert behaviour.description
        for release in (slurm_releases.ours(), *TESTED):
            entry = behaviour.releases[release]
            assert entry.status in ("verified", "unverified"), (behaviour.name, release)
            assert entry.source.strip(), (behaviour.name, release)
            assert "DOMAIN" not in entry.source


def test_the_block_fatal_that_kills_configless_slurmd_is_gone_in_ours() -> None:
    """24.11's fatal on a block smaller than the first (every configless slurmd dies at reconfigure) was fixed
    before the pinned release, and the record names the change."""
    behaviour = slurm_releases.behaviour("blockSmallerThanFirstIsFatal")
    assert slurm_releases.shows(behaviour.name, "24.11")
    assert not slurm_releases.shows(behaviour.name, slurm_releases.ours())
    assert behaviour.fixed_in is not None
    assert "CHANGELOG/slurm-25.05.md" in behaviour.releases[slurm_releases.ours()].source
