"""Why Azure gave no answer to a read gb300 makes itself (``--quota live``: quota, images, the existing VNet).

Every live read turns the Azure SDK's exception into one short reason, so a plan that could not ask Azure says
so as a warning ("unverified") in the same words whatever it was reading. azure-core's exception classes
(``azure/core/exceptions.py``): ``ClientAuthenticationError`` (401, or no credential at all) is a kind of
``HttpResponseError``; ``ServiceRequestError`` (the request never left) and ``ServiceResponseError`` (no answer
came back) are what a timeout raises.
"""

from __future__ import annotations


def first_line(exc: BaseException) -> str:
    """The first line of an exception's text (the SDK's messages run to many lines), or its type's name."""
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def unanswered(exc: BaseException, reads: str) -> str:
    """Why a read of ``reads`` (e.g. ``"Microsoft.Compute images (needs Reader)"``) got no answer: ``exc`` is the
    azure-core exception the client raised."""
    from azure.core.exceptions import (  # noqa: PLC0415 - the Azure SDK loads only when asked to go live
        ClientAuthenticationError,
        HttpResponseError,
        ServiceRequestError,
        ServiceResponseError,
    )

    if isinstance(exc, ClientAuthenticationError):
        code = getattr(exc, "status_code", None)
        return f"HTTP {code}: not authorized" if code else f"no Azure credential ({first_line(exc)})"
    if isinstance(exc, HttpResponseError):
        code = exc.status_code
        return (
            f"HTTP {code}: the identity may not read {reads}"
            if code in (401, 403)
            else f"HTTP {code}: {first_line(exc)}"
        )
    if isinstance(exc, ServiceRequestError | ServiceResponseError):
        return f"Azure did not answer in time ({first_line(exc)})"
    return first_line(exc)
