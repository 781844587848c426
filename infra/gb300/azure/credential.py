"""One Azure identity for every call gb300 makes itself, chosen the way the azure-native provider chooses its own.

gb300 calls Azure itself for ``gb300 plan --quota live`` (:mod:`~gb300.azure.quota`, :mod:`~gb300.azure.lustre_live`),
``gb300 rollout`` and ``gb300 status`` (:mod:`gb300.ops.rollout`). They share one credential per process,
:func:`shared`, read from the variables the pulumi-azure-native provider reads, so a shell or CI job that can run
``pulumi up`` can run them too. Source: pulumi/pulumi-azure-native ``provider/pkg/provider/auth_azidentity.go``
(``readAuthConfig``, ``newSingleMethodAuthCredential``, ``newOidcCredential``, ``getOidcTokenExchangeAssertion``);
``ARM_OIDC_REQUEST_URL``/``ARM_OIDC_REQUEST_TOKEN`` come from its earlier ``auth.go`` (``determineOidcConfig``).

One method, the first that applies (the provider's order); never a chain that tries each in turn:

1. ``ARM_USE_DEFAULT_AZURE_CREDENTIAL=true``: azure-identity's ``DefaultAzureCredential`` (it reads ``AZURE_*``);
2. ``ARM_CLIENT_CERTIFICATE_PATH`` (PEM or PKCS#12, ``ARM_CLIENT_CERTIFICATE_PASSWORD``): a service principal's
   certificate, with ``ARM_CLIENT_ID`` and ``ARM_TENANT_ID``;
3. ``ARM_CLIENT_SECRET``: a service principal's secret, with ``ARM_CLIENT_ID`` and ``ARM_TENANT_ID``;
4. ``ARM_USE_OIDC=true``: workload identity federation, with ``ARM_CLIENT_ID`` and ``ARM_TENANT_ID``. The
   assertion is ``ARM_OIDC_TOKEN``, else the file ``ARM_OIDC_TOKEN_FILE_PATH`` (read again each time), else an ID
   token asked of ``ARM_OIDC_REQUEST_URL`` with ``ARM_OIDC_REQUEST_TOKEN`` (else GitHub's
   ``ACTIONS_ID_TOKEN_REQUEST_URL``/``ACTIONS_ID_TOKEN_REQUEST_TOKEN``) for the audience ``ARM_OIDC_AUDIENCE``
   (default ``api://AzureADTokenExchange``). That request is made afresh every time Entra ID is asked for an
   access token, so a job outlives both GitHub's ID token and the first access token;
5. ``ARM_USE_MSI=true``: the managed identity (user-assigned when ``ARM_CLIENT_ID`` is set);
6. otherwise the Azure CLI's sign-in (``az login``).

A managed identity is used only when asked for, so a workstation without one never waits on the instance metadata
endpoint. Where this differs from the provider: of the ``azure-native:*`` stack config keys only ``subscriptionId``
is read (:func:`subscription`; the rest come from variables only), no auxiliary tenants, and only the public
cloud (``ARM_ENVIRONMENT`` must be unset or ``public``).

A credential that cannot give a token (none configured, ``az`` missing or signed out, Entra ID refusing it) raises
:class:`CredentialError` on first use, converted in :class:`Credential` alone: the CLI prints it as one line
telling how to sign in, and exits 2.
"""

from __future__ import annotations

import enum
import functools
import json
import logging
import os
import shutil
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gb300.errors import Gb300Error

if TYPE_CHECKING:
    from azure.core.credentials import AccessToken, AccessTokenInfo, TokenRequestOptions

ARM_SCOPE = "https://management.azure.com/.default"
OIDC_AUDIENCE = "api://AzureADTokenExchange"
SIGN_IN = (
    "run 'az login', or set ARM_CLIENT_ID, ARM_TENANT_ID and ARM_USE_OIDC=true (CI), ARM_CLIENT_SECRET "
    "(a service principal) or ARM_USE_MSI=true (a managed identity), as for the azure-native provider "
    "(docs/cli.md#azure-sign-in)"
)
SUBSCRIPTION_HINT = "set ARM_SUBSCRIPTION_ID (or AZURE_SUBSCRIPTION_ID), or choose one with 'az account set'"
_PUBLIC = {"", "public", "azurecloud", "azurepubliccloud"}


class CredentialError(Gb300Error):
    """No usable Azure credential for gb300's own Azure calls: the message says how to sign in (exit 2)."""


class Method(enum.Enum):
    """How gb300 signs in to Azure, in the order the methods are considered; the value is how messages name it."""

    DEFAULT = "DefaultAzureCredential (ARM_USE_DEFAULT_AZURE_CREDENTIAL)"
    CERTIFICATE = "service principal certificate (ARM_CLIENT_CERTIFICATE_PATH)"
    SECRET = "service principal secret (ARM_CLIENT_SECRET)"  # noqa: S105 - a label, not a secret
    OIDC = "workload identity federation (ARM_USE_OIDC)"
    MSI = "managed identity (ARM_USE_MSI)"
    CLI = "Azure CLI"


WHEN: Mapping[Method, str] = {
    Method.DEFAULT: "`ARM_USE_DEFAULT_AZURE_CREDENTIAL=true`; azure-identity's `DefaultAzureCredential` reads "
    "`AZURE_*`",
    Method.CERTIFICATE: "`ARM_CLIENT_CERTIFICATE_PATH` (and `ARM_CLIENT_CERTIFICATE_PASSWORD`), with `ARM_CLIENT_ID` "
    "and `ARM_TENANT_ID`",
    Method.SECRET: "`ARM_CLIENT_SECRET`, with `ARM_CLIENT_ID` and `ARM_TENANT_ID`",
    Method.OIDC: "`ARM_USE_OIDC=true`, with `ARM_CLIENT_ID` and `ARM_TENANT_ID`; the assertion is `ARM_OIDC_TOKEN`, "
    "else the file `ARM_OIDC_TOKEN_FILE_PATH` (read each time), else a new ID token from `ARM_OIDC_REQUEST_URL` with "
    "`ARM_OIDC_REQUEST_TOKEN` (else GitHub's `ACTIONS_ID_TOKEN_REQUEST_URL` and `_TOKEN`) for the audience "
    "`ARM_OIDC_AUDIENCE` (default `api://AzureADTokenExchange`), asked each time an access token is bought",
    Method.MSI: "`ARM_USE_MSI=true`; user-assigned when `ARM_CLIENT_ID` is set",
    Method.CLI: "none of the above: the `az login` session",
}
"""When each method applies, for the docs (``gb300 docs``): :meth:`Settings.method` is the code."""


@dataclass(frozen=True)
class Settings:
    """What the environment says about signing in; empty strings for what it does not set."""

    client_id: str = ""
    tenant_id: str = ""
    client_secret: str = field(default="", repr=False)
    certificate_path: str = ""
    certificate_password: str = field(default="", repr=False)
    use_oidc: bool = False
    oidc_token: str = field(default="", repr=False)
    oidc_token_file: str = ""
    oidc_request_url: str = ""
    oidc_request_token: str = field(default="", repr=False)
    oidc_audience: str = ""
    use_msi: bool = False
    use_default: bool = False
    environment: str = ""

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Settings:
        """The provider's variables; the OIDC request falls back to GitHub's only when both ARM_ ones are unset."""

        def get(name: str) -> str:
            return env.get(name, "").strip()

        url, token = get("ARM_OIDC_REQUEST_URL"), get("ARM_OIDC_REQUEST_TOKEN")
        if not (url and token):
            url, token = get("ACTIONS_ID_TOKEN_REQUEST_URL"), get("ACTIONS_ID_TOKEN_REQUEST_TOKEN")
        return cls(
            client_id=get("ARM_CLIENT_ID"),
            tenant_id=get("ARM_TENANT_ID"),
            client_secret=get("ARM_CLIENT_SECRET"),
            certificate_path=get("ARM_CLIENT_CERTIFICATE_PATH"),
            certificate_password=get("ARM_CLIENT_CERTIFICATE_PASSWORD"),
            use_oidc=get("ARM_USE_OIDC") == "true",
            oidc_token=get("ARM_OIDC_TOKEN"),
            oidc_token_file=get("ARM_OIDC_TOKEN_FILE_PATH"),
            oidc_request_url=url,
            oidc_request_token=token,
            oidc_audience=get("ARM_OIDC_AUDIENCE"),
            use_msi=get("ARM_USE_MSI") == "true",
            use_default=get("ARM_USE_DEFAULT_AZURE_CREDENTIAL") == "true",
            environment=get("ARM_ENVIRONMENT") or get("AZURE_ENVIRONMENT"),
        )

    def method(self) -> Method:
        """The first method that applies, in the provider's order."""
        if self.use_default:
            return Method.DEFAULT
        if self.certificate_path:
            return Method.CERTIFICATE
        if self.client_secret:
            return Method.SECRET
        if self.use_oidc:
            return Method.OIDC
        if self.use_msi:
            return Method.MSI
        return Method.CLI


class Credential:
    """A token credential over azure-identity's that turns its sign-in failures into one :class:`CredentialError`."""

    def __init__(self, inner: Any, method: Method, hint: str = "") -> None:
        self.inner = inner
        self.method = method
        self.hint = hint  # appended to a refusal: what cannot be renewed, and where the docs say what to do

    def get_token(
        self,
        *scopes: str,
        claims: str | None = None,
        tenant_id: str | None = None,
        enable_cae: bool = False,
        **kwargs: Any,
    ) -> AccessToken:
        token: AccessToken = self._call(
            lambda: self.inner.get_token(*scopes, claims=claims, tenant_id=tenant_id, enable_cae=enable_cae, **kwargs)
        )
        return token

    def get_token_info(self, *scopes: str, options: TokenRequestOptions | None = None) -> AccessTokenInfo:
        info: AccessTokenInfo = self._call(lambda: self.inner.get_token_info(*scopes, options=options))
        return info

    def _call(self, ask: Callable[[], Any]) -> Any:
        from azure.core.exceptions import AzureError, ClientAuthenticationError  # noqa: PLC0415 - loads when live

        try:
            return ask()
        except ClientAuthenticationError as exc:  # CredentialUnavailableError included
            if self.hint:
                raise CredentialError(f"Azure refused {self.method.value}: {_first_line(exc)}; {self.hint}") from None
            raise CredentialError(f"no Azure credential ({self.method.value}: {_first_line(exc)}): {SIGN_IN}") from None
        except AzureError as exc:  # Entra ID (or the CLI, or the identity endpoint) did not answer
            raise CredentialError(f"Azure sign-in did not complete ({self.method.value}: {_first_line(exc)})") from None

    def close(self) -> None:
        close = getattr(self.inner, "close", None)
        if callable(close):
            close()


def build(settings: Settings, **client_kwargs: Any) -> Credential:
    """The credential ``settings`` select; ``client_kwargs`` (``transport``, ``authority``) reach its HTTP client.

    Raises :class:`CredentialError` for settings the method cannot work with (a missing client id, say).
    """
    if settings.environment.lower() not in _PUBLIC:
        raise CredentialError(
            f"ARM_ENVIRONMENT must be 'public' for gb300's own Azure calls (got {settings.environment!r}): they reach "
            "management.azure.com only"
        )
    method = settings.method()
    try:
        return Credential(_azure_identity(settings, method, client_kwargs), method, _hint(settings, method))
    except (ValueError, OSError) as exc:  # a malformed tenant id, an unreadable certificate
        raise CredentialError(f"{method.value}: {_first_line(exc)}") from None


FIXED_TOKEN_HINT = (
    "ARM_OIDC_TOKEN is a fixed ID token that neither gb300 nor the azure-native provider can renew once it expires "  # noqa: S105
    "(Azure DevOps: docs/gitops.md#token-lifetime-on-azure-devops)"
)


def _hint(settings: Settings, method: Method) -> str:
    """What a refusal should add: a fixed OIDC token cannot be renewed (the provider's rule too)."""
    return FIXED_TOKEN_HINT if method is Method.OIDC and settings.oidc_token else ""


def _azure_identity(settings: Settings, method: Method, client_kwargs: dict[str, Any]) -> Any:
    """azure-identity's credential for ``method``."""
    from azure import identity  # noqa: PLC0415 - the Azure SDK loads only when asked to go live

    if method is Method.DEFAULT:
        return identity.DefaultAzureCredential(**client_kwargs)
    if method is Method.MSI:
        return identity.ManagedIdentityCredential(client_id=settings.client_id or None, **client_kwargs)
    if method is Method.CLI:
        # ARM_TENANT_ID, when set, is the tenant asked: `az account get-access-token --tenant <it>`. The provider does
        # the same in the auth_azidentity.go revision 015fcf2 (newSingleMethodAuthCredential sets
        # AzureCLICredentialOptions.TenantID); revision 34d8ff3 of that file does not, so this follows the former.
        return identity.AzureCliCredential(tenant_id=settings.tenant_id)
    for name, value in (("ARM_CLIENT_ID", settings.client_id), ("ARM_TENANT_ID", settings.tenant_id)):
        if not value:
            raise CredentialError(f"{name} must be set to sign in with a {method.value} (got nothing); {SIGN_IN}")
    tenant, client = settings.tenant_id, settings.client_id
    if method is Method.CERTIFICATE:
        password = settings.certificate_password or None
        return identity.CertificateCredential(
            tenant, client, settings.certificate_path, password=password, **client_kwargs
        )
    if method is Method.SECRET:
        return identity.ClientSecretCredential(tenant, client, settings.client_secret, **client_kwargs)
    return identity.ClientAssertionCredential(tenant, client, assertion(settings), **client_kwargs)


def assertion(settings: Settings) -> Callable[[], str]:
    """The OIDC assertion source: the token, the token file, or a fresh ID token from the request URL each call."""
    if settings.oidc_token:
        token = settings.oidc_token
        return lambda: token
    if settings.oidc_token_file:
        path = Path(settings.oidc_token_file)
        return lambda: _read_token_file(path)
    if settings.oidc_request_url and settings.oidc_request_token:
        return IdTokenRequest(settings.oidc_request_url, settings.oidc_request_token, settings.oidc_audience)
    raise CredentialError(
        "ARM_USE_OIDC=true needs ARM_OIDC_TOKEN, ARM_OIDC_TOKEN_FILE_PATH, or ARM_OIDC_REQUEST_URL with "
        "ARM_OIDC_REQUEST_TOKEN (GitHub Actions sets ACTIONS_ID_TOKEN_REQUEST_URL/_TOKEN with 'permissions: "
        "id-token: write') (got none)"
    )


def _read_token_file(path: Path) -> str:
    from azure.core.exceptions import ClientAuthenticationError  # noqa: PLC0415

    try:
        return path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        why = f"ARM_OIDC_TOKEN_FILE_PATH {path} cannot be read ({exc.strerror})"
        raise ClientAuthenticationError(message=why) from None


class _RedirectRefusedError(OSError):
    """A token endpoint redirected somewhere its bearer token must not go."""


class _SameHostHttpsOnly(urllib.request.HTTPRedirectHandler):
    """Follows a redirect only to https on the host first asked: the request carries the CI's bearer token, which
    urllib would send on to any scheme and host (a downgrade to http, or another host, would hand it over)."""

    def __init__(self, netloc: str) -> None:
        super().__init__()
        self.netloc = netloc

    def redirect_request(  # noqa: PLR0917 - urllib's signature, called positionally
        self, req: urllib.request.Request, fp: Any, code: int, msg: str, headers: Any, newurl: str
    ) -> urllib.request.Request | None:
        target = urllib.parse.urlsplit(newurl)
        if target.scheme != "https" or target.netloc != self.netloc:
            shown = f"{target.scheme}://{target.netloc}"
            raise _RedirectRefusedError(f"was redirected to {shown}; only https on {self.netloc} is followed")
        return super().redirect_request(req, fp, code, msg, headers, newurl)


@dataclass(frozen=True)
class IdTokenRequest:
    """Asks the CI's token endpoint (GitHub's ``ACTIONS_ID_TOKEN_REQUEST_URL``) for a new ID token on each call."""

    url: str
    bearer: str = field(repr=False)
    audience: str = ""
    timeout_s: float = 30.0

    def __call__(self) -> str:
        from azure.core.exceptions import ClientAuthenticationError  # noqa: PLC0415

        parts = urllib.parse.urlsplit(self.url)
        query = [(k, v) for k, v in urllib.parse.parse_qsl(parts.query) if k != "audience"]
        query.append(("audience", self.audience or OIDC_AUDIENCE))
        url = urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(query)))
        request = urllib.request.Request(  # noqa: S310 - the CI's own endpoint, http(s) by construction
            url, headers={"Authorization": f"Bearer {self.bearer}", "Accept": "application/json"}
        )
        where = f"the OIDC token request to {parts.netloc}"
        opener = urllib.request.build_opener(_SameHostHttpsOnly(parts.netloc))
        try:
            with opener.open(request, timeout=self.timeout_s) as response:
                body = json.loads(response.read().decode("utf-8"))
        except _RedirectRefusedError as exc:
            raise ClientAuthenticationError(message=f"{where} {exc}") from None
        except urllib.error.HTTPError as exc:
            raise ClientAuthenticationError(message=f"{where} answered HTTP {exc.code}") from None
        except (OSError, ValueError) as exc:
            raise ClientAuthenticationError(message=f"{where} failed ({_first_line(exc)})") from None
        value = body.get("value") if isinstance(body, dict) else None
        if not isinstance(value, str) or not value:
            raise ClientAuthenticationError(message=f"{where} answered without a 'value'")
        return value


@functools.cache
def shared() -> Credential:
    """The process's one credential, built on first use from the environment (raises :class:`CredentialError`)."""
    quiet = logging.getLogger("azure.identity")
    if quiet.level == logging.NOTSET:  # each failed attempt logs a warning; CredentialError says it in one line
        quiet.setLevel(logging.CRITICAL)
    return build(Settings.from_env(os.environ))


def signed_in() -> Credential:
    """:func:`shared`, once it has given a token for Azure Resource Manager (raises :class:`CredentialError`)."""
    credential = shared()
    credential.get_token_info(ARM_SCOPE)
    return credential


STACK_SUBSCRIPTION = "azure-native:subscriptionId"


@dataclass(frozen=True)
class Subscription:
    """The subscription gb300 asks Azure about, and where that id came from (every live answer names both)."""

    id: str
    source: str

    def __str__(self) -> str:
        return f"{self.id} (from {self.source})"


def stack_subscription(path: Path) -> str | None:
    """The stack file's ``azure-native:subscriptionId``, None when it does not set one.

    Raises :class:`CredentialError` when it is set but not a plain string (a Pulumi secret gb300 cannot decrypt): the
    provider would use it, so reading ``ARM_SUBSCRIPTION_ID`` instead could ask another subscription.
    """
    from gb300.config import stack_yaml  # noqa: PLC0415 - config imports nothing from here, but keep loads lazy

    doc = stack_yaml.load(path) or {}
    value = (doc.get("config") or {}).get(STACK_SUBSCRIPTION) if isinstance(doc, dict) else None
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise CredentialError(
            f"{path}: config.{STACK_SUBSCRIPTION} must be a plain subscription id for gb300's own Azure calls (got "
            f"{'an encrypted value' if isinstance(value, dict) else repr(value)}); the provider uses it, so gb300 "
            "will not fall back to ARM_SUBSCRIPTION_ID"
        )
    return value.strip()


def subscription(explicit: str | None = None, env: Mapping[str, str] | None = None) -> Subscription | None:
    """The subscription to ask, in the provider's order: ``explicit`` (the stack's ``azure-native:subscriptionId``),
    else ``ARM_SUBSCRIPTION_ID``, else (gb300's own addition) ``AZURE_SUBSCRIPTION_ID``, else the Azure CLI's default
    subscription when signing in with the CLI; None when there is none.

    Stack config over the variable is the provider's rule: pulumi/pulumi-azure-native
    ``provider/pkg/provider/provider.go`` ``getConfig`` returns the config key when set and only then reads the
    variable, and ``auth_azidentity.go`` ``readAuthConfig`` reads ``getConfig("subscriptionId",
    "ARM_SUBSCRIPTION_ID")``; with the CLI, ``NewAzCoreIdentity`` takes ``az account show``'s subscription.
    """
    env = os.environ if env is None else env
    for value, source in (
        (explicit, f"the stack's {STACK_SUBSCRIPTION}"),
        (env.get("ARM_SUBSCRIPTION_ID"), "ARM_SUBSCRIPTION_ID"),
        (env.get("AZURE_SUBSCRIPTION_ID"), "AZURE_SUBSCRIPTION_ID"),
    ):
        if value and value.strip():
            return Subscription(value.strip(), source)
    if Settings.from_env(env).method() is Method.CLI:
        found = cli_subscription()
        return Subscription(found, "az account show") if found else None
    return None


def subscription_id(explicit: str | None = None, env: Mapping[str, str] | None = None) -> str | None:
    """:func:`subscription`'s id alone."""
    found = subscription(explicit, env)
    return found.id if found else None


def state_subscriptions_line(command: str, ids: Sequence[str]) -> str:
    """What ``gb300 <command>`` prints before asking Azure: the subscription(s) of the racks it asks about.

    ``rollout`` and ``status`` ask each rack's own subscription, the one in its Azure id in the exported state (where
    the provider created it), not one read from the environment.
    """
    distinct = sorted({i for i in ids if i})
    where = ", ".join(distinct) or "(none)"
    return f"gb300 {command}: Azure subscription {where} (from the racks' Azure ids in --state)"


def check_stack_subscription(path: Path, ids: Sequence[str]) -> None:
    """Refuse a state whose racks live in another subscription than the stack's ``azure-native:subscriptionId``."""
    wanted = stack_subscription(path)
    others = sorted({i for i in ids if i and i.lower() != (wanted or i).lower()})
    if wanted and others:
        raise CredentialError(
            f"{path}: config.{STACK_SUBSCRIPTION} is {wanted}, but the state's racks are in {', '.join(others)}: "
            "export the state of this stack's deployment, or fix the stack file"
        )


def cli_subscription() -> str | None:
    """``az account show``'s subscription id, or None without ``az`` or a sign-in."""
    az = shutil.which("az")
    if az is None:
        return None
    try:
        done = subprocess.run(
            [az, "account", "show", "--query", "id", "--output", "tsv"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


def _first_line(exc: BaseException, limit: int = 200) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = lines[0] if lines else type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."
