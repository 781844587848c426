"""Azure's own answer to "how many addresses does this Lustre filesystem need?", asked only when the plan goes live.

The storage subnet's size comes from config (``gb300:storage.lustre.subnetPrefixLength``, default Azure's
documented size), never from this answer: the address plan must not move when an answer does. With
``gb300 plan --quota live`` (the plan is allowed to call Azure with your credential) the plan also asks
``POST /subscriptions/{sub}/providers/Microsoft.StorageCache/getRequiredAmlFSSubnetsSize`` and compares the
answer with the subnet's free addresses (rule ``lustre-subnet-size``). It is a POST: Reader (the CI's
read-only identity) may not make it, so a 401/403 or a timeout is a WARNING that says so, never an error and never
a traceback. No credential at all is :class:`~gb300.azure.credential.CredentialError`, as for the quota check.
"""

from __future__ import annotations

import ipaddress
import json
from dataclasses import dataclass
from typing import Any

from gb300.azure import answers
from gb300.azure import credential as azure_credential
from gb300.findings import Level, Report

API_VERSION = "2024-03-01"  # the version pulumi-azure-native 3.29's getRequiredAmlFSSubnetsSize invoke uses
ARM = "https://management.azure.com"
WHERE = "gb300:storage.lustre.subnetPrefixLength"


@dataclass(frozen=True)
class Answer:
    """Azure's ``filesystemSubnetSize`` (free addresses the filesystem needs), or why there is none."""

    addresses: int | None
    unverified: str | None = None


def ask(  # noqa: PLR0911 - one return per way Azure can fail to answer
    sku: str,
    capacity_tib: float,
    *,
    subscription_id: str | None = None,
    credential: Any = None,
    timeout_s: float = 20.0,
    **pipeline_kwargs: Any,
) -> Answer:
    """Ask Azure; every failure becomes an :class:`Answer` with ``unverified`` set."""
    from azure.core import PipelineClient  # noqa: PLC0415 - the Azure SDK loads only when asked to go live
    from azure.core.exceptions import AzureError, ClientAuthenticationError  # noqa: PLC0415
    from azure.core.pipeline.policies import BearerTokenCredentialPolicy, RetryPolicy  # noqa: PLC0415
    from azure.core.rest import HttpRequest  # noqa: PLC0415

    if credential is None:
        credential = azure_credential.signed_in()
    sub = azure_credential.subscription_id(subscription_id)
    if not sub:
        return Answer(None, f"no subscription id: {azure_credential.SUBSCRIPTION_HINT}")
    retry_total = int(pipeline_kwargs.pop("retry_total", 1))
    policies = [
        RetryPolicy(retry_total=retry_total),
        BearerTokenCredentialPolicy(credential, f"{ARM}/.default"),
    ]
    client = PipelineClient(ARM, policies=policies, **pipeline_kwargs)
    request = HttpRequest(
        "POST",
        f"{ARM}/subscriptions/{sub}/providers/Microsoft.StorageCache/getRequiredAmlFSSubnetsSize",
        params={"api-version": API_VERSION},
        json={"sku": {"name": sku}, "storageCapacityTiB": capacity_tib},
    )
    try:
        response = client.send_request(request, connection_timeout=timeout_s, read_timeout=timeout_s)
    except ClientAuthenticationError as exc:
        return Answer(None, f"no Azure credential ({answers.first_line(exc)})")
    except AzureError as exc:
        return Answer(None, f"Azure did not answer ({answers.first_line(exc)})")
    if response.status_code in (401, 403):
        return Answer(
            None,
            f"HTTP {response.status_code}: the identity may not call getRequiredAmlFSSubnetsSize (a POST; Reader "
            "cannot), so Azure's own answer was not checked",
        )
    if response.status_code != 200:
        return Answer(None, f"HTTP {response.status_code} from getRequiredAmlFSSubnetsSize")
    try:
        size = json.loads(response.text())["filesystemSubnetSize"]
        return Answer(int(size))
    except (ValueError, KeyError, TypeError):
        return Answer(None, "Azure's answer has no filesystemSubnetSize")


def findings(answer: Answer, subnet_prefix: str, reserved: int, *, sku: str, capacity_tib: float) -> list[Report]:
    """An error when Azure asks for more free addresses than the storage subnet has; a warning when unverified."""
    if answer.unverified is not None:
        return [
            Report(
                Level.WARNING,
                WHERE,
                f"Azure's subnet size for the Lustre filesystem could not be checked: {answer.unverified}. The "
                "storage subnet keeps the size in config; ask Azure by hand (docs/rules.md#lustre-subnet-size).",
            )
        ]
    free = ipaddress.IPv4Network(subnet_prefix).num_addresses - reserved
    if answer.addresses is not None and answer.addresses > free:
        return [
            Report(
                Level.ERROR,
                WHERE,
                f"storage subnet {subnet_prefix}: Azure says a {capacity_tib:g} TiB {sku} filesystem needs "
                f"{answer.addresses} free addresses (got {free}). Lower gb300:storage.lustre.subnetPrefixLength "
                "before the first deploy: the filesystem cannot move once created.",
            )
        ]
    return []
