"""``software-checksums``: downloads nodes will refuse because checksums.yaml does not pin them.

Not a resource rule: it reads the stack's resolved software (versions.yaml, ``gb300:software`` and
checksums.yaml) and the images its GPU pools boot, and says what a node will do without each missing pin.

- enroot and pyxis are built on every image from a pinned git commit (no Azure image carries them):
  without the commit of their tag nodes skip them, the scheduler still runs, and ``srun --container-image``
  is unavailable (warning).
- A pool on an image the catalog knows does not carry the GB stack (plain Ubuntu) downloads everything:
  a missing pin stops its bootstrap, so its nodes never join Slurm (error).
- A pool on an image the catalog does not know may or may not need the downloads (warning).
- A container image nodes run (the DCGM exporter) without a digest in checksums.yaml is pulled by its tag, which
  its registry can point at other bytes later: nodes do not refuse it, so the plan says so (warning).
"""

from __future__ import annotations

from gb300.config import StackConfig
from gb300.facts import catalog
from gb300.facts.software import SoftwareSet, apply_software_overrides, container_images, load_checksums
from gb300.findings import Level, Report
from gb300.rules.base import config_rule

_FIX = "run `gb300 software lock` on a machine with Internet access and commit infra/gb300/data/checksums.yaml"


def _unpinned_by_component(software: SoftwareSet) -> dict[str, list[str]]:
    """Component -> the URLs it needs that have no pin (a repository's key counts for its components)."""
    repo_gaps = {owner: url for kind, owner, url in software.unpinned() if kind == "key"}
    out: dict[str, list[str]] = {}
    for comp in software.components:
        urls = [f.url for f in comp.files if f.sha256 is None]
        if comp.git and comp.git.commit is None:
            urls.append(comp.git.key)
        if comp.install == "apt" and comp.repo in repo_gaps:
            urls.append(repo_gaps[comp.repo])
        if urls:
            out[comp.name] = urls
    return out


def _unpinned_images() -> list[Report]:
    """One warning per container image nodes pull whose manifest digest checksums.yaml does not pin."""
    pins = load_checksums()
    return [
        Report(
            Level.WARNING,
            "gb300:software",
            f"container image {service} ({image}) has no digest in infra/gb300/data/checksums.yaml: nodes pull it "
            f"by its tag, which the registry can point at other bytes later (they do not refuse it); {_FIX}",
        )
        for service, image in sorted(container_images().items())
        if not pins.digest(image)
    ]


@config_rule("software-checksums")
def findings(cfg: StackConfig) -> list[Report]:
    """What the stack's nodes will refuse to download, and what follows from it."""
    software = apply_software_overrides(cfg.software)
    out: list[Report] = _unpinned_images()
    missing = _unpinned_by_component(software)
    if not missing:
        return out
    deferred = {c.name for c in software.components if c.deferred}
    containers = sorted(n for n in missing if n in deferred)
    if containers:
        count = sum(len(missing[n]) for n in containers)
        out.append(
            Report(
                Level.WARNING,
                "gb300:software",
                f"{', '.join(containers)}: {count} download(s) have no pinned checksum or commit, so nodes skip "
                f"them: Slurm runs, but `srun --container-image` is unavailable; {_FIX}",
            )
        )
    # An optional component (the sharp plugin) is recorded absent, never fatal: it does not stop a pool.
    optional = {c.name for c in software.components if c.optional}
    stack = sorted(n for n in missing if n not in deferred and n not in optional)
    if not stack:
        return out
    cat = catalog.load()
    for index, pool in enumerate(cfg.gpu_pools):
        carries = cat.image_carries_gb_stack(pool.image)
        if carries:
            continue
        names = ", ".join(stack)
        if carries is None:
            level, effect = Level.WARNING, "if the image does not carry them, the bootstrap stops at the first one"
        else:
            level, effect = Level.ERROR, "its nodes' bootstrap stops at the first one and they never join Slurm"
        out.append(
            Report(
                level,
                f"gb300:gpuPools[{index}].image",
                f"pool {pool.name} boots {pool.image}, which downloads {names} without a pinned checksum or key "
                f"fingerprint: {effect}; {_FIX}, or boot microsoft-dsvm:ubuntu-hpc:2404-gb",
            )
        )
    return out


RULE_ID = findings.id
