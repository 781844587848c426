"""The one fake Azure Resource Manager: the real Azure SDK (azure-mgmt clients, azure-core's pipeline and
``RequestsTransport``) with the network replaced by a ``requests`` adapter that answers as ARM does.

The pieces: :class:`FakeHttp` (the adapter base), :func:`response` and :func:`json_response` (answers with ARM's
headers), :func:`transport` (azure-core's ``RequestsTransport`` over an adapter) and :class:`StaticCredential` (a
fixed bearer token, :data:`TOKEN`: Entra ID is never called, the adapter can check the token reached it). Used by
``gb300 heal simulate`` (:class:`FakeArm`: ARM's answers to the loop's calls come from the simulated world), by the
head's service test, whose HTTPS stand-in answers the head's real process with the same shapes (:func:`route`,
:func:`vm_list`, :func:`instance_view`, :func:`error`, :func:`insights`), and by the tests of ``gb300 rollout``,
fleet status and the live Azure reads (tests/support/fake_arm.py adds their routing).

What it cannot show: ARM's real throttling and long-running operation records (the loop starts operations with
``polling=False`` and never reads them; an operation that fails after ARM accepted it shows only as the instance
view's ``ProvisioningState/failed/<code>``, not as ARM's real message text; the rollout tests answer
``Azure-AsyncOperation`` themselves), which errors ARM really sends for a given state beyond those a scenario or
test names, Entra ID sign-in and token refresh, and the network itself (TLS, proxies, timeouts other than those a
test raises).
"""

from __future__ import annotations

import http
import io
import json
import re
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlparse

import requests
import urllib3
from azure.core.credentials import AccessToken, AccessTokenInfo
from azure.core.pipeline.transport import RequestsTransport
from azure.mgmt.compute import ComputeManagementClient

TOKEN = "fake-token"  # noqa: S105 - the fixed bearer token StaticCredential hands out
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


def vm_list(path: str, hosts: Sequence[str], vm_id: Callable[[int], str], gone: Collection[str] = ()) -> dict[str, Any]:
    """``virtual_machine_scale_set_vms.list``: each VM's name, instance id, ARM id, computer name and vmId (instance
    ids by position in ``hosts``; the VMs of ``gone``, deleted, are not listed)."""
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
            if host not in gone
        ]
    }


def instance_view(busy: bool, changed_at: float, failed: str | None = None) -> dict[str, Any]:
    """The VM's instance view: ``ProvisioningState/updating`` while an operation holds it, ``failed/<code>`` when the
    last operation (accepted with 202) failed with that ARM error code, else ``succeeded``, with the time the state
    last changed."""
    state = "updating" if busy else (f"failed/{failed}" if failed else "succeeded")
    stamp = datetime.fromtimestamp(changed_at, UTC).isoformat()
    status: dict[str, Any] = {"code": f"ProvisioningState/{state}", "time": stamp}
    if failed and not busy:
        status |= {"level": "Error", "displayStatus": "Provisioning failed", "message": f"simulated {failed}"}
    return {"statuses": [status]}


def error(status: int, message: str, code: str | None = None) -> dict[str, Any]:
    """ARM's error body (``{"error": {"code", "message"}}``); ``code`` (``AllocationFailed``...) or the status's."""
    return {"error": {"code": code or CODES.get(status, "Error"), "message": message}}


def insights(title: str) -> dict[str, Any]:
    """``GET .../workloadImpacts/{name}/insights``: one insight."""
    return {"value": [{"name": "i1", "properties": {"content": {"title": title}}}]}


class StaticCredential:
    """A token credential that hands out a fixed bearer token (:data:`TOKEN`; no Entra ID call)."""

    def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        return AccessToken(TOKEN, int(time.time()) + 3600)

    def get_token_info(self, *scopes: str, options: Any = None) -> AccessTokenInfo:
        return AccessTokenInfo(TOKEN, int(time.time()) + 3600)


class FakeHttp(requests.adapters.BaseAdapter):
    """A ``requests`` adapter answered in-process; subclasses implement ``send`` (with :func:`json_response`)."""

    def close(self) -> None:
        pass


def response(
    request: requests.PreparedRequest, status: int, body: bytes = b"", headers: Mapping[str, str] | None = None
) -> requests.Response:
    """An answer to ``request`` as Azure sends it: ``body`` as given, with a request id and ``headers``."""
    answer = requests.Response()
    answer.status_code = status
    answer.reason = http.HTTPStatus(status).phrase
    answer._content = body
    answer.raw = urllib3.HTTPResponse(body=io.BytesIO(body), status=status, preload_content=False)
    answer.headers["x-ms-request-id"] = "00000000-0000-0000-0000-000000000001"
    for key, value in (headers or {}).items():
        answer.headers[key] = value
    answer.url = request.url or ""
    answer.request = request
    return answer


def json_response(
    request: requests.PreparedRequest, status: int, body: Any, headers: Mapping[str, str] | None = None
) -> requests.Response:
    """An answer to ``request`` as Azure sends it: ``body`` as JSON (none for None), with a request id."""
    content = b"" if body is None else json.dumps(body).encode()
    return response(request, status, content, {"Content-Type": "application/json; charset=utf-8", **(headers or {})})


def transport(adapter: requests.adapters.BaseAdapter) -> RequestsTransport:
    """azure-core's RequestsTransport whose every https request goes to ``adapter``."""
    session = requests.Session()
    session.mount("https://", adapter)
    return RequestsTransport(session=session, session_owner=False)


class FakeArm(FakeHttp):
    """Hands ARM requests to ``answer(method, path, body)`` (azure-core's RequestsTransport sits above it, so the
    SDK's client runs unmodified); a request without the bearer token is refused (401)."""

    def __init__(self, answer: Callable[[str, str, Any], Answer]) -> None:
        super().__init__()
        self.answer = answer

    def send(self, request: requests.PreparedRequest, *args: Any, **kwargs: Any) -> requests.Response:
        url = urlparse(request.url or "")
        if request.headers.get("Authorization") != f"Bearer {TOKEN}":
            return json_response(request, 401, {"error": {"code": "AuthenticationFailed", "message": "no token"}})
        raw = request.body
        body = json.loads(raw) if isinstance(raw, (str, bytes)) and raw else None
        status, answer, headers = self.answer(request.method or "GET", url.path, body)
        return json_response(request, status, answer, headers)


def compute_client_for(answer: Callable[[str, str, Any], Answer]) -> Callable[[str], Any]:
    """``subscription -> ComputeManagementClient`` whose HTTP goes to ``answer``; ``retry_total=0`` as on the head
    (the loop owns the retry of a refused call)."""
    through = transport(FakeArm(answer))
    clients: dict[str, Any] = {}

    def client_for(subscription: str) -> Any:
        if subscription not in clients:
            clients[subscription] = ComputeManagementClient(
                StaticCredential(), subscription, transport=through, retry_total=0
            )
        return clients[subscription]

    return client_for


__all__ = [
    "TOKEN",
    "Answer",
    "Call",
    "FakeArm",
    "FakeHttp",
    "StaticCredential",
    "compute_client_for",
    "error",
    "insights",
    "instance_view",
    "json_response",
    "response",
    "route",
    "transport",
    "vm_list",
]
