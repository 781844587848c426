"""Whether Azure publishes each marketplace image version the plan boots, asked only when the plan goes live.

With ``gb300 plan --quota live`` (the plan may call Azure with your credential) gb300 asks azure-mgmt-compute for
every marketplace URN the stack's pools and head boot, in the stack's region:
``virtual_machine_images.get(location, publisher, offer, skus, version)`` for a pinned version, and
``virtual_machine_images.list(..., top=1)`` for ``latest`` (is there any version at all). Image resource ids
(``/subscriptions/...``) are not marketplace images and are not asked about.

Fetching never raises for Azure's answers (as :mod:`gb300.azure.quota`): a 404 means Azure does not have the image
(``exists=False``, an ERROR of rule ``image-version-exists``); a 401/403, a timeout or any other failure leaves the
answer unknown (``exists=None`` with the reason, a WARNING). No credential at all is
:class:`~gb300.azure.credential.CredentialError`, as for the quota check.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gb300.azure import answers
from gb300.azure import credential as azure_credential

if TYPE_CHECKING:
    from gb300.config import StackConfig

LIVE = "live"


@dataclass(frozen=True)
class UsedImage:
    """A marketplace image the stack boots: where in the config, the URN, and the region it boots in."""

    where: str  # the config key path, e.g. gb300:gpuPools[0].image
    urn: str  # publisher:offer:sku:version
    region: str

    @property
    def parts(self) -> tuple[str, str, str, str]:
        publisher, offer, sku, version = self.urn.split(":")
        return publisher, offer, sku, version


@dataclass(frozen=True)
class ImageAnswer:
    """Azure's answer for one URN in one region: ``exists`` True/False, or None with ``why`` it is unknown."""

    urn: str
    region: str
    exists: bool | None
    why: str | None = None


@dataclass(frozen=True)
class ImageAnswers:
    """Azure's answers, by (URN, region), from one source (``live``)."""

    source: str = LIVE
    answers: Mapping[tuple[str, str], ImageAnswer] = field(default_factory=dict)

    def get(self, urn: str, region: str) -> ImageAnswer | None:
        return self.answers.get((urn.lower(), region.lower()))


def is_marketplace(image: str) -> bool:
    """A ``publisher:offer:sku:version`` URN, not an image resource id."""
    return not image.startswith("/") and len(image.split(":")) == 4


def used_images(cfg: StackConfig) -> list[UsedImage]:
    """The marketplace images the stack boots: every GPU pool's, the head's and every CPU pool's, in the stack's
    region."""
    region = cfg.cluster.location
    found = [UsedImage(f"gb300:gpuPools[{i}].image", pool.image, region) for i, pool in enumerate(cfg.gpu_pools)]
    found += [UsedImage(f"gb300:cpuPools[{i}].image", cpu.image, region) for i, cpu in enumerate(cfg.cpu_pools)]
    found.append(UsedImage("gb300:head.image", cfg.head.image, region))
    return [u for u in found if is_marketplace(u.urn)]


def fetch_live(
    images: Iterable[UsedImage],
    *,
    subscription_id: str | None = None,
    credential: Any = None,
    timeout_s: float = 20.0,
    **client_kwargs: Any,
) -> ImageAnswers:
    """Ask Azure about each distinct (URN, region); every failure but a 404 leaves the answer unknown."""
    from azure.mgmt.compute import ComputeManagementClient  # noqa: PLC0415 - the Azure SDK loads only when live

    distinct = {(u.urn.lower(), u.region.lower()): u for u in images}
    if not distinct:
        return ImageAnswers()
    if credential is None:
        credential = azure_credential.signed_in()
    sub = azure_credential.subscription_id(subscription_id)
    if not sub:
        why = f"no subscription id: {azure_credential.SUBSCRIPTION_HINT}"
        return ImageAnswers(LIVE, {k: ImageAnswer(u.urn, u.region, None, why) for k, u in distinct.items()})
    client_kwargs.setdefault("connection_timeout", timeout_s)
    client_kwargs.setdefault("read_timeout", timeout_s)
    client_kwargs.setdefault("retry_total", 1)
    client = ComputeManagementClient(credential, sub, **client_kwargs)
    return ImageAnswers(LIVE, {key: _ask(client, used) for key, used in sorted(distinct.items())})


def _ask(client: Any, used: UsedImage) -> ImageAnswer:
    """One image in one region: a 404 is ``exists=False``, every other failure ``exists=None`` with why."""
    from azure.core.exceptions import (  # noqa: PLC0415 - the Azure SDK loads only when asked to go live
        AzureError,
        HttpResponseError,
    )

    publisher, offer, sku, version = used.parts
    try:
        if version.lower() == "latest":
            exists = bool(client.virtual_machine_images.list(used.region, publisher, offer, sku, top=1))
        else:
            client.virtual_machine_images.get(used.region, publisher, offer, sku, version)
            exists = True
        return ImageAnswer(used.urn, used.region, exists, None if exists else "no version listed")
    except AzureError as exc:
        if isinstance(exc, HttpResponseError) and exc.status_code == 404:
            return ImageAnswer(used.urn, used.region, False, f"HTTP 404: {answers.first_line(exc)}")
        why = answers.unanswered(exc, "Microsoft.Compute images (needs Reader)")
        return ImageAnswer(used.urn, used.region, None, why)
