"""Azure over a fake HTTP transport for the tests: the one fake ARM (:mod:`gb300.heal.fake_arm`: the real azure-mgmt
clients and azure-core pipeline, with the network replaced by a ``requests`` adapter that answers like Azure
Resource Manager), plus what only tests use: a router (:class:`FakeAzure`), the subscription of a deployed stack,
and the answers of an identity without permission (:func:`forbidden`) and of no answer at all (:func:`timeout`).

A test subclasses :class:`FakeHttp` (its ``send`` answers with :func:`json_response`), hands :func:`transport` of
it to the client factory under test, and signs in with :class:`StaticCredential`: Entra ID is never called, and
the adapter can check the bearer token (:data:`TOKEN`) reached it. What the fake cannot show is said in
:mod:`gb300.heal.fake_arm`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlparse

import requests

from gb300.heal.fake_arm import TOKEN, FakeHttp, StaticCredential, json_response, response, transport

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
