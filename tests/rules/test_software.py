"""``software-checksums``: what nodes will refuse to download, said at plan time with its consequence."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from gb300 import cli, config
from gb300.facts import software as software_module
from gb300.facts.software import load_software
from gb300.findings import Level
from gb300.plan import PlanResult, run_plan
from gb300.rules import software as rule

PLAIN_ARM64 = "canonical:ubuntu-24_04-lts:server-arm64:latest"


def _with_image(raw: dict[str, Any], image: str, *, new_doca: bool = False) -> dict[str, Any]:
    """``raw`` with the first pool on ``image``; ``new_doca`` also overrides DOCA to a release whose doca-host
    file has no sha256 pinned yet (the shipped data pins every download plain Ubuntu needs)."""
    out = copy.deepcopy(raw)
    out["gpuPools"][0]["image"] = image
    if new_doca:
        out["software"] = {**out.get("software", {}), "doca-ofed": "3.3.0"}
    return out


def _pin_everything(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, images: bool = True) -> None:
    """Point the loader at a checksums file that pins every URL of the shipped versions (and, with ``images``,
    every container image's digest)."""
    software = load_software()
    files = {
        f.url: {"sha256": "a" * 64, "status": "verified", "source": "t"} for c in software.components for f in c.files
    }
    keys = {r.key_url: {"fingerprints": ["A" * 40], "status": "verified", "source": "t"} for r in software.repos}
    path = tmp_path / "checksums.yaml"
    commits = {
        c.git.key: {"commit": "b" * 40, "status": "verified", "source": "t"} for c in software.components if c.git
    }
    digests = {
        image: {"digest": "sha256:" + "c" * 64, "status": "verified", "source": "t"}
        for image in software_module.container_images().values()
    }
    doc = {"files": files, "keys": keys, "commits": commits, **({"images": digests} if images else {})}
    path.write_text(yaml.safe_dump(doc))
    monkeypatch.setattr(software_module, "CHECKSUMS_FILE", path)


def test_a_container_image_without_a_digest_is_a_warning_naming_it(
    reference_raw: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Everything pinned but the DCGM exporter's digest: one warning naming the image and `gb300 software lock`
    (nodes pull it by tag); with the digest, nothing (the next test)."""
    _pin_everything(tmp_path, monkeypatch, images=False)
    [finding] = rule.findings(config.parse(reference_raw))
    image = software_module.container_images()["dcgm-exporter"]
    assert (finding.level, finding.resource) == (Level.WARNING, "gb300:software")
    assert f"container image dcgm-exporter ({image}) has no digest" in finding.message
    assert "gb300 software lock" in finding.message


def test_reference_plan_has_containers(reference_plan: PlanResult) -> None:
    """The shipped data pins enroot and pyxis by commit, so the reference stack plans with no containers warning
    and its GPU nodes are told which commit to build."""
    found = [f for f in reference_plan.findings if f.rule == rule.RULE_ID]
    assert [f for f in found if "container image" not in f.message] == []  # an unpinned image: the test above
    for name in ("enroot", "pyxis"):
        git = load_software().component(name).git
        assert git is not None
        assert git.commit is not None


def test_an_unpinned_container_commit_warns_that_containers_are_unavailable(
    reference_raw: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a commit for pyxis's tag the plan warns once, naming pyxis and `gb300 software lock`."""
    _pin_everything(tmp_path, monkeypatch)
    pinned = yaml.safe_load((tmp_path / "checksums.yaml").read_text())
    pinned["commits"] = {k: v for k, v in pinned["commits"].items() if "pyxis" not in k}
    (tmp_path / "checksums.yaml").write_text(yaml.safe_dump(pinned))
    [finding] = rule.findings(config.parse(copy.deepcopy(reference_raw)))
    assert finding.level == Level.WARNING
    assert finding.resource == "gb300:software"
    assert finding.message.startswith("pyxis: 1 download(s)")
    assert "srun --container-image` is unavailable" in finding.message
    assert "gb300 software lock" in finding.message


def test_a_plain_ubuntu_pool_with_unpinned_downloads_is_an_error(reference_raw: dict[str, Any]) -> None:
    """A pool on plain Ubuntu arm64 downloads the whole stack: a missing pin (here a new DOCA's file) stops its
    bootstrap. With the shipped pins it has none."""
    assert rule.findings(config.parse(_with_image(reference_raw, PLAIN_ARM64))) == list(
        rule.findings(config.parse(reference_raw))
    )
    cfg = config.parse(_with_image(reference_raw, PLAIN_ARM64, new_doca=True))
    [error] = [f for f in rule.findings(cfg) if f.level == Level.ERROR]
    assert error.resource == "gb300:gpuPools[0].image"
    assert "doca-ofed" in error.message
    assert "never join Slurm" in error.message


def test_an_image_the_catalog_does_not_know_is_a_warning(reference_raw: dict[str, Any]) -> None:
    """A custom image may carry the stack or not: the plan warns instead of failing."""
    image = (
        "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/img/providers/Microsoft.Compute/images/gb"
    )
    cfg = config.parse(_with_image(reference_raw, image, new_doca=True))
    pool_findings = [f for f in rule.findings(cfg) if f.resource == "gb300:gpuPools[0].image"]
    assert [f.level for f in pool_findings] == [Level.WARNING]


def test_nothing_is_said_once_everything_is_pinned(
    reference_raw: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With every URL pinned in checksums.yaml, neither the HPC image nor plain Ubuntu gets a finding."""
    _pin_everything(tmp_path, monkeypatch)
    assert rule.findings(config.parse(reference_raw)) == []
    assert rule.findings(config.parse(_with_image(reference_raw, PLAIN_ARM64))) == []


def test_an_overridden_version_needs_its_own_pin(
    reference_raw: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pins for the default enroot do not cover gb300:software.enroot: "3.4.1": the warning comes back."""
    _pin_everything(tmp_path, monkeypatch)
    raw = copy.deepcopy(reference_raw)
    raw["software"] = {"enroot": "3.4.1"}
    [finding] = rule.findings(config.parse(raw))
    assert finding.message.startswith("enroot: 1 download(s)")


def test_the_plan_fails_on_the_error_and_can_suppress_the_rule(reference_raw: dict[str, Any], write_stack: Any) -> None:
    """`gb300 plan` exits 1 for a plain-Ubuntu pool that cannot bootstrap; gb300:policy.suppress silences it."""
    raw = _with_image(reference_raw, PLAIN_ARM64, new_doca=True)
    assert cli.main(["plan", "--stack-file", str(write_stack(raw, "plain")), "--quiet"]) == 1
    raw["policy"] = {**raw.get("policy", {}), "suppress": [rule.RULE_ID]}
    result = run_plan("plain", copy.deepcopy(raw))
    assert rule.RULE_ID not in {f.rule for f in result.findings}
    assert cli.main(["plan", "--stack-file", str(write_stack(raw, "quiet")), "--quiet"]) == 0


def test_an_unpinned_optional_component_does_not_stop_a_pool(
    reference_raw: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sharp plugin is optional: pinning its version without a checksum is no error for a plain-Ubuntu pool."""
    _pin_everything(tmp_path, monkeypatch)
    raw = _with_image(reference_raw, PLAIN_ARM64)
    raw["software"] = {"nccl-rdma-sharp-plugins": "2.7.1"}
    assert load_software().component("nccl-rdma-sharp-plugins").optional
    assert rule.findings(config.parse(raw)) == []
