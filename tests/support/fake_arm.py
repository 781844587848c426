"""Azure over a fake HTTP transport: the real azure-mgmt clients and azure-core pipeline, with the network replaced
by a ``requests`` adapter that answers like Azure Resource Manager.

A test subclasses :class:`FakeHttp` (its ``send`` answers with :func:`json_response`), hands :func:`transport` of
it to the client factory under test, and signs in with :class:`StaticCredential`: Entra ID is never called, and
the adapter can check the bearer token (:data:`TOKEN`) reached it.

``gb300 heal simulate`` has its own transport of this shape (``gb300.heal.sim``, ``FakeArm``): it is product code
and cannot import tests, so it keeps its copy.
"""

from __future__ import annotations

import http
import io
import json
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlparse

import requests
import urllib3
from azure.core.credentials import AccessToken, AccessTokenInfo
from azure.core.pipeline.transport import RequestsTransport

__all__ = [
    "SUBSCRIPTION",
    "TOKEN",
    "FakeAzure",
    "FakeHttp",
    "Handler",
    "StaticCredential",
    "forbidden",
    "json_response",
    "response",
    "timeout",
    "transport",
]

SUBSCRIPTION = "11111111-2222-3333-4444-555555555555"
"""The subscription a deployed stack lives in (the plan's ids carry the mocks' subscription instead)."""
TOKEN = "fake-token"  # noqa: S105 - the fixed bearer token StaticCredential hands out


class StaticCredential:
    """A token credential that hands out a fixed bearer token (no Entra ID call)."""

    def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        return AccessToken(TOKEN, int(time.time()) + 3600)

    def get_token_info(self, *scopes: str, options: Any = None) -> AccessTokenInfo:
        return AccessTokenInfo(TOKEN, int(time.time()) + 3600)


class FakeHttp(requests.adapters.BaseAdapter):
    """A ``requests`` adapter a test answers from; subclasses implement ``send``."""

    def close(self) -> None:
        pass


def response(
    request: requests.PreparedRequest, status: int, body: bytes = b"", headers: dict[str, str] | None = None
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
    request: requests.PreparedRequest, status: int, body: Any, headers: dict[str, str] | None = None
) -> requests.Response:
    """An answer to ``request`` as Azure sends it: ``body`` as JSON (none for None), with a request id."""
    content = b"" if body is None else json.dumps(body).encode()
    return response(request, status, content, {"Content-Type": "application/json; charset=utf-8", **(headers or {})})


def transport(adapter: requests.adapters.BaseAdapter) -> RequestsTransport:
    """azure-core's RequestsTransport whose every https request goes to ``adapter``."""
    session = requests.Session()
    session.mount("https://", adapter)
    return RequestsTransport(session=session, session_owner=False)


Handler = Callable[[requests.PreparedRequest], requests.Response]


class FakeAzure(FakeHttp):
    """Answers each ARM request with the handler of the first route its path ends with (404 for none); records
    ``METHOD path?query`` of each and checks the bearer token."""

    def __init__(self, routes: dict[str, Handler]) -> None:
        super().__init__()
        self.routes = routes
        self.seen: list[str] = []

    def send(self, request: requests.PreparedRequest, *args: Any, **kwargs: Any) -> requests.Response:
        url = urlparse(request.url or "")
        self.seen.append(f"{request.method} {url.path}?{url.query}")
        assert request.headers.get("Authorization") == f"Bearer {TOKEN}"
        for suffix, handler in self.routes.items():
            if url.path.endswith(suffix):
                return handler(request)
        return json_response(request, 404, {"error": {"code": "NotFound", "message": url.path}})


def forbidden(request: requests.PreparedRequest) -> requests.Response:
    """ARM's 403 to an identity without the permission (a Reader asking for more)."""
    return json_response(
        request,
        403,
        {
            "error": {
                "code": "AuthorizationFailed",
                "message": "The client 'x' does not have authorization to perform action "
                "'Microsoft.Compute/locations/usages/read' over scope '/subscriptions/1111'.",
            }
        },
    )


def timeout(request: requests.PreparedRequest) -> requests.Response:
    """No answer in time (what requests raises on a read timeout)."""
    raise requests.exceptions.ReadTimeout("Read timed out. (read timeout=20)")
