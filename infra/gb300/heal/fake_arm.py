"""The one fake Azure Resource Manager of the remediation loop: how ARM's answers to the loop's calls look.

Used by ``gb300 heal simulate`` (:class:`FakeArm`, a requests adapter under azure-core's ``RequestsTransport``, so
azure-mgmt-compute's own client, serializers and error handling run) and by the head's service test, whose
HTTPS stand-in answers the head's real process with the same shapes (:func:`route`, :func:`vm_list`,
:func:`instance_view`, :func:`error`, :func:`insights`). What it cannot show: ARM's real throttling and
long-running operation records (the loop starts operations with ``polling=False`` and never reads them), and
which errors ARM really sends for a given state beyond those the scenario names.
"""

from __future__ import annotations

import io
import json
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlparse

import requests
import urllib3
from azure.core.credentials import AccessToken, AccessTokenInfo
from azure.core.pipeline.transport import RequestsTransport
from azure.mgmt.compute import ComputeManagementClient

TOKEN = "simulated-token"  # noqa: S105 - a stand-in bearer token the adapter checks is sent
Answer = tuple[int, Any, dict[str, str]]
"""Status, JSON body (None: no body) and extra headers (``Retry-After``)."""
_VMS = re.compile(
    r"/subscriptions/(?P<sub>[^/]+)/resourceGroups/(?P<rg>[^/]+)/providers/Microsoft\.Compute/"
    r"virtualMachineScaleSets/(?P<vmss>[^/]+)/virtualMachines(?:/(?P<instance>\d+)(?:/(?P<action>\w+))?)?"
)
_IMPACTS = re.compile(
    r"/subscriptions/(?P<sub>[^/]+)/providers/Microsoft\.Impact/workloadImpacts/(?P<name>[\w:-]+)(?P<insights>/insights)?"
)
CODES: Mapping[int, str] = {
    400: "InvalidParameter",
    403: "AuthorizationFailed",
    404: "NotFound",
    409: "Conflict",
    429: "TooManyRequests",
}


@dataclass(frozen=True)
class Call:
    """One ARM request as the loop makes it: ``call`` is the scenario format's name for it."""

    call: str  # list, restart, reimage, redeploy, report, any (instance view reads count as list)
    scale_set: str | None = None
    instance: str | None = None
    action: str | None = None  # restart, reimage, redeploy, instanceView; None for the list
    report: str | None = None


def route(method: str, path: str) -> Call:
    """Which of the loop's calls ``method path`` is (query string ignored)."""
    path = path.split("?", 1)[0]
    vms = _VMS.fullmatch(path)
    if vms is not None:
        action = vms.group("action")
        if method == "GET":
            return Call("list", vms.group("vmss"), vms.group("instance"), action)
        if method == "POST" and action in ("restart", "reimage", "redeploy"):
            return Call(action, vms.group("vmss"), vms.group("instance"), action)
        return Call("any", vms.group("vmss"), vms.group("instance"), action)
    impacts = _IMPACTS.fullmatch(path)
    if impacts is not None:
        return Call("report", report=impacts.group("name"), action="insights" if impacts.group("insights") else None)
    return Call("any")


def vm_list(path: str, hosts: Sequence[str], vm_id: Callable[[int], str]) -> dict[str, Any]:
    """``virtual_machine_scale_set_vms.list``: each VM's name, instance id, ARM id, computer name and vmId."""
    base = path.split("?", 1)[0]
    scale_set = base.rsplit("/", 2)[-2]
    return {
        "value": [
            {
                "name": f"{scale_set}_{i}",
                "instanceId": str(i),
                "id": f"{base}/{i}",
                "properties": {"osProfile": {"computerName": host}, "vmId": vm_id(i)},
            }
            for i, host in enumerate(hosts)
        ]
    }


def instance_view(busy: bool, changed_at: float) -> dict[str, Any]:
    """The VM's instance view: ``ProvisioningState/updating`` while an operation holds it, else ``succeeded``,
    with the time the state last changed."""
    state = "updating" if busy else "succeeded"
    stamp = datetime.fromtimestamp(changed_at, UTC).isoformat()
    return {"statuses": [{"code": f"ProvisioningState/{state}", "time": stamp}]}


def error(status: int, message: str) -> dict[str, Any]:
    """ARM's error body (``{"error": {"code", "message"}}``)."""
    return {"error": {"code": CODES.get(status, "Error"), "message": message}}


def insights(title: str) -> dict[str, Any]:
    """``GET .../workloadImpacts/{name}/insights``: one insight."""
    return {"value": [{"name": "i1", "properties": {"content": {"title": title}}}]}


class FakeArm(requests.adapters.BaseAdapter):
    """A requests adapter that hands ARM requests to ``answer(method, path, body)`` (azure-core's RequestsTransport
    sits above it, so the SDK's client runs unmodified); a request without the bearer token is refused (401)."""

    def __init__(self, answer: Callable[[str, str, Any], Answer]) -> None:
        super().__init__()
        self.answer = answer

    def send(self, request: requests.PreparedRequest, *args: Any, **kwargs: Any) -> requests.Response:
        url = urlparse(request.url or "")
        if request.headers.get("Authorization") != f"Bearer {TOKEN}":
            return _response(request, 401, {"error": {"code": "AuthenticationFailed", "message": "no token"}})
        raw = request.body
        body = json.loads(raw) if isinstance(raw, (str, bytes)) and raw else None
        status, answer, headers = self.answer(request.method or "GET", url.path, body)
        response = _response(request, status, answer)
        response.headers.update(headers)
        return response

    def close(self) -> None:
        pass


def _response(request: requests.PreparedRequest, status: int, body: Any) -> requests.Response:
    response = requests.Response()
    response.status_code = status
    content = b"" if body is None else json.dumps(body).encode()
    response._content = content
    response.raw = urllib3.HTTPResponse(body=io.BytesIO(content), status=status, preload_content=False)
    response.headers["Content-Type"] = "application/json; charset=utf-8"
    response.headers["x-ms-request-id"] = "00000000-0000-0000-0000-000000000001"
    response.url = request.url or ""
    response.request = request
    return response


class SimulatedCredential:
    """A fixed bearer token: the fake transport checks it is sent, Entra ID is never called."""

    def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        return AccessToken(TOKEN, int(time.time()) + 3600)

    def get_token_info(self, *scopes: str, options: Any = None) -> AccessTokenInfo:
        return AccessTokenInfo(TOKEN, int(time.time()) + 3600)


def compute_client_for(answer: Callable[[str, str, Any], Answer]) -> Callable[[str], Any]:
    """``subscription -> ComputeManagementClient`` whose HTTP goes to ``answer``; ``retry_total=0`` as on the head
    (the loop owns the retry of a refused call)."""
    session = requests.Session()
    session.mount("https://", FakeArm(answer))
    transport = RequestsTransport(session=session, session_owner=False)
    clients: dict[str, Any] = {}

    def client_for(subscription: str) -> Any:
        if subscription not in clients:
            clients[subscription] = ComputeManagementClient(
                SimulatedCredential(), subscription, transport=transport, retry_total=0
            )
        return clients[subscription]

    return client_for
