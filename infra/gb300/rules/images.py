"""Images: ``image-version-pinned`` (each GPU pool boots one known image version whose contents match gb300's pins)
and ``image-version-exists`` (Azure publishes each image version the stack boots).

Not a resource rule: it reads the stack's pool images, the image catalog (``data/images.yaml``: what each known
version of an image carries, from Azure/azhpc-images' ``versions.json`` history) and the resolved software
pins (``versions.yaml`` with ``gb300:software``).

- ``latest``: the day Azure publishes a new image, new nodes boot other driver, DOCA or NCCL versions than the
  pins and fail their bootstrap, while older racks keep the old ones (warning).
- A version the catalog does not know: nobody checked what it carries (warning, saying how to add it).
- A known version carrying another version of a pinned component than the pin: every node of the pool stops
  at that component's step (error).

``image-version-exists`` reads the pools' and the head's marketplace URNs (image ids are skipped). Offline, a
pinned version whose catalog entry is not ``status: verified`` is a warning naming the version and the command
that checks it. With the plan gone live (:mod:`gb300.azure.images_live`), Azure's answer replaces the catalog's
word: not found is an error naming the URN and region, no answer (403, timeout) a warning, found nothing.
"""

from __future__ import annotations

from gb300.azure import images_live
from gb300.azure.images_live import ImageAnswer, ImageAnswers, UsedImage
from gb300.config import StackConfig
from gb300.facts import catalog
from gb300.facts.software import apply_software_overrides
from gb300.findings import Level, Report
from gb300.rules.base import config_rule, live_config_rule


def _plain(version: str) -> str:
    """A Debian version without its epoch (``1:4.5.3-1`` -> ``4.5.3-1``)."""
    return version.split(":", 1)[1] if ":" in version else version


def carries(found: str, pinned: str) -> bool:
    """Whether an image's recorded version is the pinned one: equal without epochs, or one is the other with more
    detail (``4.5.3`` and ``1:4.5.3-1``; ``2.29.3-1`` and ``2.29.3-1+cuda13.0``), never ``4.5.30`` for ``4.5.3``."""
    found, pinned = _plain(found), _plain(pinned)
    return any(a == b or a.startswith((f"{b}-", f"{b}+", f"{b}.")) for a, b in ((found, pinned), (pinned, found)))


def image_version(image: str) -> tuple[str, str] | None:
    """``(publisher:offer:sku, version)`` of a marketplace URN, or None for an image id."""
    parts = image.split(":")
    return (":".join(parts[:3]), parts[3]) if len(parts) == 4 else None


@config_rule("image-version-pinned")
def findings(cfg: StackConfig) -> list[Report]:
    """Pools on ``latest``, on a version the catalog does not know, or on one whose contents differ from the pins."""
    cat = catalog.load()
    pins = {c.name: c.version for c in apply_software_overrides(cfg.software).components if c.version}
    out: list[Report] = []
    for index, pool in enumerate(cfg.gpu_pools):
        split = image_version(pool.image)
        if split is None:
            continue
        urn, version = split
        key = f"gb300:gpuPools[{index}].image"
        known = cat.image(pool.image)
        newest = known.latest_known if known else None
        suggestion = f" such as {urn}:{newest}" if newest else ""
        if version.lower() == "latest":
            out.append(
                Report(
                    Level.WARNING,
                    key,
                    f"pool {pool.name} boots {pool.image}: must pin an image version (got latest). When Azure "
                    "publishes a new image, new nodes boot other driver, DOCA and NCCL versions than gb300 pins and "
                    f"fail their bootstrap. Pin a version the catalog knows{suggestion} (data/images.yaml).",
                )
            )
            continue
        if known is None or not known.versions:
            continue  # an image the catalog tracks no versions of: image-arch-matches-sku speaks for it
        entry = known.versions.get(version)
        if entry is None:
            out.append(
                Report(
                    Level.WARNING,
                    key,
                    f"pool {pool.name} boots {pool.image}: version {version} is unknown to the image catalog, so "
                    "gb300 cannot say which driver, DOCA, NCCL and DCGM it carries. Boot one VM from it, read "
                    f"{known.record_file or 'its component versions'} and add the version to "
                    f"infra/gb300/data/images.yaml (or pin a known one{suggestion}).",
                )
            )
            continue
        differ = [
            f"{name} {found} (gb300 pins {pins[name]})"
            for name, found in sorted(entry.components.items())
            if name in pins and not carries(found, pins[name])
        ]
        if differ:
            inferred = (
                f" (what it carries is inferred, not read at a release tag: {known.record_file} on one VM says "
                "for sure)"
                if entry.components_status == "inferred"
                else ""
            )
            out.append(
                Report(
                    Level.ERROR,
                    key,
                    f"pool {pool.name} boots {pool.image}, which carries {', '.join(differ)}{inferred}: every node "
                    "would stop at those components' bootstrap steps. Pin an image version that carries the pins, or "
                    "set gb300:software to the image's versions.",
                )
            )
    return out


RULE_ID = findings.id


def _show(urn: str, region: str) -> str:
    return f"az vm image show --urn {urn} --location {region}"


def _live_report(used: UsedImage, answer: ImageAnswer) -> Report | None:
    """Azure's answer as a finding: missing is an error, unknown a warning, present nothing."""
    publisher, offer, sku, _ = used.parts
    listing = f"az vm image list --publisher {publisher} --offer {offer} --sku {sku} --all --location {used.region}"
    if answer.exists is False:
        return Report(
            Level.ERROR,
            used.where,
            f"{used.urn} does not exist in {used.region}: Azure answered not found ({answer.why}). Every VM of it "
            f"would fail to deploy. Pin a version Azure lists (`{listing} -o table`), or deploy to a region that "
            "has it.",
        )
    if answer.exists is None:
        return Report(
            Level.WARNING,
            used.where,
            f"whether {used.urn} exists in {used.region} could not be checked ({answer.why}). Check by hand: "
            f"`{_show(used.urn, used.region)}`.",
        )
    return None


@live_config_rule("image-version-exists")
def image_version_exists(cfg: StackConfig, answers: ImageAnswers | None) -> list[Report]:
    """Each marketplace image version the stack boots is one Azure publishes in its region (asked live)."""
    cat = catalog.load()
    out: list[Report] = []
    for used in images_live.used_images(cfg):
        answer = answers.get(used.urn, used.region) if answers is not None else None
        if answer is not None:  # Azure said, or could not say: that replaces the catalog's word
            found = _live_report(used, answer)
            if found is not None:
                out.append(found)
            continue
        urn, version = used.urn.rsplit(":", 1)
        known = cat.image(used.urn)
        entry = known.versions.get(version) if known is not None else None
        if entry is None or entry.status == "verified":
            continue  # latest, or a version the catalog does not list: image-version-pinned speaks for those
        assert known is not None  # noqa: S101 - entry came from it
        out.append(
            Report(
                Level.WARNING,
                used.where,
                f"image version {version} of {urn} is inferred, not seen in Azure's image list (status "
                f"{entry.status} in infra/gb300/data/images.yaml; the version was derived from azhpc-images release "
                f"{entry.release}). If Azure does not publish it, no VM deploys. Check it: "
                f"`{_show(used.urn, used.region)}` (or run `gb300 plan --quota live`), then set `status: verified` "
                "on its entry.",
            )
        )
    return out
