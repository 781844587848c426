"""gb300's one Azure credential: the azure-native provider's settings, OIDC that keeps working for the whole job,
and a one-line sign-in hint (exit 2) when there is no credential."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from azure.core.exceptions import ClientAuthenticationError
from azure.core.pipeline.transport import RequestsTransport

from gb300 import cli
from gb300.azure import credential
from gb300.azure.credential import ARM_SCOPE, CredentialError, IdTokenRequest, Method, Settings
from gb300.plan import PlanResult
from tests.support.fake_arm import SUBSCRIPTION
from tests.support.state import write_stack_export

IDS = {"ARM_CLIENT_ID": "client", "ARM_TENANT_ID": "tenant"}
OIDC = {"ARM_USE_OIDC": "true", "ARM_OIDC_TOKEN": "jwt", **IDS}
SECRET = {"ARM_CLIENT_SECRET": "s", **IDS}


class Endpoints(BaseHTTPRequestHandler):
    """GitHub's ID token endpoint (GET /id-token) and Entra ID's token endpoint (POST /<tenant>/oauth2/v2.0/token)."""

    server: Server

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        if url.path == "/moved":  # a redirect to wherever the test says
            self.server.id_requests.append(({}, self.headers.get("Authorization", "")))
            self.send_response(302)
            self.send_header("Location", self.server.location)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if url.path != "/id-token":
            self._answer(404, {})
            return
        self.server.id_requests.append((parse_qs(url.query), self.headers.get("Authorization", "")))
        self._answer(200, {"value": f"id-token-{len(self.server.id_requests)}"})

    def do_POST(self) -> None:
        form = parse_qs(self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode())
        if not urlsplit(self.path).path.endswith("/oauth2/v2.0/token"):
            self._answer(404, {})
            return
        self.server.assertions.append(form["client_assertion"][0])
        if getattr(self.server, "refusal", None):  # Entra ID's answer to an expired client assertion
            self._answer(401, {"error": "invalid_client", "error_description": self.server.refusal})
            return
        number = len(self.server.assertions)
        self._answer(200, {"token_type": "Bearer", "access_token": f"access-{number}", "expires_in": self.server.ttl})

    def _answer(self, code: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


class Server(ThreadingHTTPServer):
    id_requests: list[tuple[dict[str, list[str]], str]]
    assertions: list[str]
    ttl: int
    refusal: str = ""
    location: str = ""


class ToLocal(RequestsTransport):
    """azure-identity's transport with every request sent to the local server (it refuses an http:// authority)."""

    def __init__(self, base: str) -> None:
        super().__init__()
        self.base = base

    def send(self, request: Any, **kwargs: Any) -> Any:
        url = urlsplit(request.url)
        request.url = f"{self.base}{url.path}" + (f"?{url.query}" if url.query else "")
        return super().send(request, **kwargs)


@pytest.fixture
def server() -> Iterator[Server]:
    """The two token endpoints on 127.0.0.1, in a thread."""
    httpd = Server(("127.0.0.1", 0), Endpoints)
    httpd.id_requests, httpd.assertions, httpd.ttl = [], [], 3600
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def _github_oidc(httpd: Server) -> credential.Credential:
    base = f"http://127.0.0.1:{httpd.server_address[1]}"
    env = {
        **IDS,
        "ARM_USE_OIDC": "true",
        "ACTIONS_ID_TOKEN_REQUEST_URL": f"{base}/id-token?api-version=2.0",
        "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "github-bearer",
    }
    return credential.build(Settings.from_env(env), transport=ToLocal(base))


def test_oidc_asks_github_for_a_new_id_token_when_the_access_token_expires(server: Server) -> None:
    """Once the first access token has expired, the next one is bought with a new ID token from the request URL."""
    server.ttl = 0  # expired as soon as it is issued
    cred = _github_oidc(server)
    first, second = cred.get_token_info(ARM_SCOPE), cred.get_token_info(ARM_SCOPE)
    assert server.assertions == ["id-token-1", "id-token-2"]
    assert (first.token, second.token) == ("access-1", "access-2")
    for query, auth in server.id_requests:
        assert query == {"api-version": ["2.0"], "audience": ["api://AzureADTokenExchange"]}
        assert auth == "Bearer github-bearer"


def test_oidc_reuses_an_access_token_until_it_expires(server: Server) -> None:
    """While the access token is valid, gb300 asks GitHub for no new ID token and Entra ID for no new token."""
    cred = _github_oidc(server)
    tokens = {cred.get_token(ARM_SCOPE).token for _ in range(3)}
    assert tokens == {"access-1"}
    assert len(server.id_requests) == len(server.assertions) == 1


def test_refused_id_token_request_is_a_credential_error() -> None:
    """An ID token endpoint that cannot be reached becomes the one-line sign-in error, naming OIDC."""
    cred = credential.build(
        Settings.from_env(
            {
                **IDS,
                "ARM_USE_OIDC": "true",
                "ARM_OIDC_REQUEST_URL": "http://127.0.0.1:9/id-token",
                "ARM_OIDC_REQUEST_TOKEN": "t",
            }
        )
    )
    with pytest.raises(CredentialError, match=r"no Azure credential \(workload identity federation .*az login"):
        cred.get_token(ARM_SCOPE)


@pytest.mark.parametrize(
    ("env", "method", "kind"),
    [
        ({}, Method.CLI, "AzureCli"),
        ({"AZURE_CLIENT_ID": "c", "AZURE_TENANT_ID": "t", "AZURE_CLIENT_SECRET": "s"}, Method.CLI, "AzureCli"),
        ({"ARM_USE_MSI": "true"}, Method.MSI, "ManagedIdentity"),
        ({"ARM_USE_MSI": "true", **OIDC}, Method.OIDC, "ClientAssertion"),
        ({**OIDC, **SECRET}, Method.SECRET, "ClientSecret"),
        ({"ARM_CLIENT_CERTIFICATE_PATH": "sp.pfx", **SECRET}, Method.CERTIFICATE, None),
        ({"ARM_USE_DEFAULT_AZURE_CREDENTIAL": "true", **SECRET}, Method.DEFAULT, "DefaultAzure"),
    ],
)
def test_variables_select_the_providers_method(env: dict[str, str], method: Method, kind: str | None) -> None:
    """The ARM_* variables pick one method in the provider's order (default, certificate, secret, OIDC, MSI, CLI)."""
    settings = Settings.from_env(env)
    assert settings.method() is method
    if kind is not None:
        assert type(credential.build(settings).inner).__name__ == f"{kind}Credential"


@pytest.mark.parametrize(
    ("env", "url"),
    [
        ({"ACTIONS_ID_TOKEN_REQUEST_URL": "https://gh/x", "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "g"}, "https://gh/x"),
        (
            {
                "ARM_OIDC_REQUEST_URL": "https://arm/x",
                "ARM_OIDC_REQUEST_TOKEN": "a",
                "ACTIONS_ID_TOKEN_REQUEST_URL": "https://gh/x",
                "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "g",
            },
            "https://arm/x",
        ),
        (
            {
                "ARM_OIDC_REQUEST_URL": "https://arm/x",
                "ACTIONS_ID_TOKEN_REQUEST_URL": "https://gh/x",
                "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "g",
            },
            "https://gh/x",
        ),
    ],
)
def test_oidc_request_url_prefers_arm_then_github(env: dict[str, str], url: str) -> None:
    """ARM_OIDC_REQUEST_URL and _TOKEN win when both are set; otherwise GitHub's ACTIONS_ID_TOKEN_REQUEST_* are used."""
    source = credential.assertion(Settings.from_env({"ARM_USE_OIDC": "true", **IDS, **env}))
    assert isinstance(source, IdTokenRequest)
    assert source.url == url


def test_oidc_token_file_is_read_at_each_request(tmp_path: Path) -> None:
    """ARM_OIDC_TOKEN_FILE_PATH is read again for each assertion, so a token rotated in the file is picked up."""
    path = tmp_path / "token"
    path.write_text("first\n")
    source = credential.assertion(Settings.from_env({"ARM_USE_OIDC": "true", "ARM_OIDC_TOKEN_FILE_PATH": str(path)}))
    before = source()
    path.write_text("second\n")
    assert (before, source()) == ("first", "second")


@pytest.mark.parametrize(
    ("env", "words"),
    [
        ({"ARM_USE_OIDC": "true", "ARM_TENANT_ID": "t", "ARM_OIDC_TOKEN": "jwt"}, "ARM_CLIENT_ID must be set"),
        ({"ARM_USE_OIDC": "true", **IDS}, "ARM_USE_OIDC=true needs ARM_OIDC_TOKEN"),
        ({"ARM_CLIENT_SECRET": "s", "ARM_CLIENT_ID": "c"}, "ARM_TENANT_ID must be set"),
        ({"ARM_ENVIRONMENT": "usgovernment"}, "ARM_ENVIRONMENT must be 'public'"),
        ({"ARM_CLIENT_CERTIFICATE_PATH": "/nonexistent/sp.pem", **IDS}, r"^service principal certificate .*sp\.pem"),
    ],
)
def test_incomplete_settings_say_what_is_missing(env: dict[str, str], words: str) -> None:
    """A method chosen without what it needs is a CredentialError naming the missing variable."""
    with pytest.raises(CredentialError, match=words):
        credential.build(Settings.from_env(env))


def test_secrets_stay_out_of_reprs() -> None:
    """A secret, a certificate password or a token read from the environment never shows in a repr or a log line."""
    env = {
        **SECRET,
        "ARM_CLIENT_SECRET": "s3cret",
        "ARM_CLIENT_CERTIFICATE_PASSWORD": "pfx-pass",
        "ARM_OIDC_TOKEN": "jwt-value",
        "ARM_OIDC_REQUEST_URL": "https://ci/x",
        "ARM_OIDC_REQUEST_TOKEN": "ci-bearer",
    }
    settings = Settings.from_env(env)
    shown = repr(settings) + repr(IdTokenRequest(settings.oidc_request_url, settings.oidc_request_token))
    assert not {"s3cret", "pfx-pass", "jwt-value", "ci-bearer"} & {w for w in env.values() if w in shown}


@pytest.mark.parametrize(
    ("explicit", "env", "cli", "expected"),
    [
        ("given", {"ARM_SUBSCRIPTION_ID": "arm", "AZURE_SUBSCRIPTION_ID": "azure"}, "cli", "given"),
        (None, {"ARM_SUBSCRIPTION_ID": "arm", "AZURE_SUBSCRIPTION_ID": "azure"}, "cli", "arm"),
        (None, {"AZURE_SUBSCRIPTION_ID": "azure"}, "cli", "azure"),
        (None, {}, "cli", "cli"),
        (None, {"ARM_USE_MSI": "true"}, "cli", None),
    ],
)
def test_subscription_id_order(
    monkeypatch: pytest.MonkeyPatch, explicit: str | None, env: dict[str, str], cli: str, expected: str | None
) -> None:
    """Subscription: given, ARM_SUBSCRIPTION_ID, AZURE_SUBSCRIPTION_ID, then az's default (only when az signs in)."""
    monkeypatch.setattr(credential, "cli_subscription", lambda: cli)
    assert credential.subscription_id(explicit, env) == expected


@pytest.fixture
def no_credential(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """A process with no ARM_/AZURE_/ACTIONS_ variable, no `az` on PATH, and a fresh shared credential."""
    import os  # noqa: PLC0415

    for name in list(os.environ):
        if name.startswith(("ARM_", "AZURE_", "ACTIONS_ID_TOKEN_", "IDENTITY_", "MSI_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("PATH", str(tmp_path))
    credential.shared.cache_clear()
    yield
    credential.shared.cache_clear()


def _after_up_state(plan: PlanResult, tmp_path: Path) -> Path:
    """The state exported after `pulumi up`: every model holds the stack's custom data, so what runs is Azure's to
    say (rollout refuses a state whose models are still old before it asks Azure anything)."""
    return write_stack_export(tmp_path / "state.json", plan, subscription=SUBSCRIPTION)


@pytest.mark.parametrize("command", ["status", "rollout", "plan"])
def test_without_a_credential_commands_exit_two_with_the_sign_in_hint(
    no_credential: None, dev_plan: PlanResult, tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """status, rollout and plan --quota live, with no way to sign in, print one line saying how and exit 2."""
    state = str(_after_up_state(dev_plan, tmp_path))
    argv = {
        "status": ["status", "--state", state],
        "rollout": ["rollout", "--stack", "dev", "--state", state],
        "plan": ["plan", "--stack", "dev", "--quota", "live"],
    }[command]
    code = cli.main(argv)
    out, err = capsys.readouterr()
    assert code == cli.EXIT_USAGE, err
    *progress, last = err.splitlines()
    assert all(line.startswith(f"gb300 {command}: validating") for line in progress)  # the plan's progress line
    assert last.startswith(f"gb300 {command}: no Azure credential (Azure CLI: ")
    assert "run 'az login'" in last
    assert "ARM_USE_OIDC=true" in last
    assert "bug" not in err
    assert "drain" not in out


def _fake_az(folder: Path, log: Path) -> None:
    """An `az` on PATH that records its arguments and answers `account get-access-token` with a token.

    A stand-in for the Azure CLI: it shows the arguments azure-identity's AzureCliCredential passes, not how the real
    CLI resolves a tenant."""
    az = folder / "az"
    az.write_text(
        "#!/bin/sh\n"
        f'printf "%s\\n" "$*" >> "{log}"\n'
        'echo \'{"accessToken": "cli-token", "expires_on": 4102444800, "tokenType": "Bearer"}\'\n',
        encoding="utf-8",
    )
    az.chmod(0o755)


@pytest.mark.parametrize(("tenant", "expected"), [("tenant-b", "--tenant tenant-b"), ("", None)])
def test_az_cli_sign_in_asks_for_arm_tenant_id(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tenant: str, expected: str | None
) -> None:
    """Signed in with `az login`, ARM_TENANT_ID reaches the CLI as `--tenant`, as the provider's CLI credential does;
    without it the CLI's own default tenant is asked."""
    log = tmp_path / "az.log"
    _fake_az(tmp_path, log)
    monkeypatch.setenv("PATH", str(tmp_path))
    cred = credential.build(Settings.from_env({"ARM_TENANT_ID": tenant} if tenant else {}))
    assert cred.method is Method.CLI
    assert cred.get_token(ARM_SCOPE).token == "cli-token"  # noqa: S105 - the fake az's answer
    [call] = log.read_text().splitlines()
    assert call.startswith("account get-access-token")
    if expected:
        assert call.endswith(expected)
    else:
        assert "--tenant" not in call


def test_az_cli_with_a_malformed_tenant_is_one_line() -> None:
    """A tenant id azure-identity rejects is a CredentialError naming the CLI method, not a traceback."""
    with pytest.raises(CredentialError, match=r"^Azure CLI: "):
        credential.build(Settings.from_env({"ARM_TENANT_ID": "not a tenant!"}))


@pytest.mark.parametrize(
    ("explicit", "env", "expected"),
    [
        ("stack-sub", {"ARM_SUBSCRIPTION_ID": "arm"}, ("stack-sub", "the stack's azure-native:subscriptionId")),
        (None, {"ARM_SUBSCRIPTION_ID": "arm", "AZURE_SUBSCRIPTION_ID": "az"}, ("arm", "ARM_SUBSCRIPTION_ID")),
        (None, {"AZURE_SUBSCRIPTION_ID": "az"}, ("az", "AZURE_SUBSCRIPTION_ID")),
        (None, {}, ("cli-sub", "az account show")),
    ],
)
def test_subscription_names_where_it_came_from(
    monkeypatch: pytest.MonkeyPatch, explicit: str | None, env: dict[str, str], expected: tuple[str, str]
) -> None:
    """The stack's azure-native:subscriptionId over ARM_SUBSCRIPTION_ID (the provider's getConfig order), and each
    answer says which one it is."""
    monkeypatch.setattr(credential, "cli_subscription", lambda: "cli-sub")
    found = credential.subscription(explicit, env)
    assert found is not None
    assert (found.id, found.source) == expected


STACK_SUB = "99999999-8888-7777-6666-555555555555"


def _stack_file(tmp_path: Path, value: Any) -> Path:
    """The reference stack file with ``azure-native:subscriptionId`` set to ``value``."""
    import yaml  # noqa: PLC0415

    from gb300.config import stacks as gb300_stacks  # noqa: PLC0415

    doc = yaml.safe_load(gb300_stacks.stack_file("reference").read_text(encoding="utf-8"))
    doc["config"]["azure-native:subscriptionId"] = value
    path = tmp_path / "Pulumi.reference.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


def test_live_plan_asks_the_stacks_subscription_and_names_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With azure-native:subscriptionId in the stack file and another ARM_SUBSCRIPTION_ID, every live call asks the
    stack's subscription, and the text and the JSON name it and where it came from."""
    from tests.azure.test_images_live import _azure, _go_live, _serve  # noqa: PLC0415

    monkeypatch.setenv("ARM_SUBSCRIPTION_ID", SUBSCRIPTION)
    adapter = _azure(_serve("eastus2-2404-gb-24.04.2026052801.json"))
    adapter.routes = {k.replace(SUBSCRIPTION, STACK_SUB): v for k, v in adapter.routes.items()}  # Azure, under it
    _go_live(monkeypatch, adapter)
    out_json = tmp_path / "plan.json"
    argv = ["plan", "--stack-file", str(_stack_file(tmp_path, STACK_SUB)), "--quota", "live", "--json", str(out_json)]
    code = cli.main(argv)
    out = capsys.readouterr().out
    assert code == 0, out
    asked = {s.split("/")[2] for s in adapter.seen}
    assert asked == {STACK_SUB}, adapter.seen
    assert f"live answers from Azure subscription {STACK_SUB} (from the stack's azure-native:subscriptionId)" in out
    summary = json.loads(out_json.read_text())["summary"]
    assert summary["azureSubscription"] == {"id": STACK_SUB, "from": "the stack's azure-native:subscriptionId"}


def test_live_plan_without_stack_subscription_names_the_variable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without the stack key, ARM_SUBSCRIPTION_ID is asked and named."""
    from tests.azure import test_images_live as live  # noqa: PLC0415

    monkeypatch.setenv("ARM_SUBSCRIPTION_ID", "44444444-3333-2222-1111-000000000000")
    adapter = live._azure(live._serve("eastus2-2404-gb-24.04.2026052801.json"))
    adapter.routes = {
        k.replace(SUBSCRIPTION, "44444444-3333-2222-1111-000000000000"): v for k, v in adapter.routes.items()
    }
    transport = live.fake_arm.transport(adapter)
    common: dict[str, Any] = {"credential": live.StaticCredential(), "retry_total": 0, "transport": transport}
    import functools  # noqa: PLC0415

    monkeypatch.setattr(live.quota, "fetch_live", functools.partial(live.quota.fetch_live, **common))
    monkeypatch.setattr(live.images_live, "fetch_live", functools.partial(live.images_live.fetch_live, **common))
    monkeypatch.setattr(live.lustre_live, "ask", functools.partial(live.lustre_live.ask, **common))
    assert cli.main(["plan", "--stack", "reference", "--quota", "live"]) == 0
    out = capsys.readouterr().out
    assert {s.split("/")[2] for s in adapter.seen} == {"44444444-3333-2222-1111-000000000000"}
    assert "live answers from Azure subscription 44444444-3333-2222-1111-000000000000 (from ARM_SUBSCRIPTION_ID)" in out


@pytest.mark.parametrize("value", [{"secure": "v1:abc"}, ""], ids=["encrypted", "empty"])
def test_unreadable_stack_subscription_is_exit_two(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str], value: Any
) -> None:
    """A stack subscription gb300 cannot read is one line and exit 2, not a silent fall-back to ARM_SUBSCRIPTION_ID
    (the provider would use the stack's)."""
    monkeypatch.setenv("ARM_SUBSCRIPTION_ID", SUBSCRIPTION)
    code = cli.main(["plan", "--stack-file", str(_stack_file(tmp_path, value)), "--quota", "live"])
    err = capsys.readouterr().err
    assert code == cli.EXIT_USAGE
    last = err.splitlines()[-1]
    assert "config.azure-native:subscriptionId must be a plain subscription id" in last
    assert "Traceback" not in err


EXPIRED = (
    "AADSTS700024: Client assertion is not within its valid time range. Current time: 2026-12-02T05:00:00Z, "
    "expiry time of assertion 2026-12-02T04:10:00Z."
)


def _fixed_token(httpd: Server) -> credential.Credential:
    """The Azure DevOps template's sign-in: ARM_USE_OIDC with the task's ID token as a fixed ARM_OIDC_TOKEN."""
    base = f"http://127.0.0.1:{httpd.server_address[1]}"
    env = {**IDS, "ARM_USE_OIDC": "true", "ARM_OIDC_TOKEN": "ado-id-token"}
    return credential.build(Settings.from_env(env), transport=ToLocal(base))


def test_a_fixed_oidc_token_is_sent_again_unchanged_and_its_refusal_says_why(server: Server) -> None:
    """A fixed ARM_OIDC_TOKEN is the same assertion at every renewal; once Entra ID refuses it (expired), the error is
    one line that says the token cannot be renewed and points at the Azure DevOps section, not at 'az login'."""
    server.ttl = 0
    cred = _fixed_token(server)
    cred.get_token_info(ARM_SCOPE)
    server.refusal = EXPIRED
    with pytest.raises(CredentialError) as refused:
        cred.get_token_info(ARM_SCOPE)
    assert server.assertions == ["ado-id-token", "ado-id-token"]
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith("Azure refused workload identity federation (ARM_USE_OIDC): ")
    assert "AADSTS700024" in message
    assert message.endswith(credential.FIXED_TOKEN_HINT)
    assert "az login" not in message


def test_a_refused_fixed_token_is_exit_two_for_a_live_command(
    server: Server, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`gb300 plan --quota live` signed in with a fixed token Entra ID refuses: one line, exit 2, no traceback."""
    server.refusal = EXPIRED
    monkeypatch.setattr(credential, "shared", lambda: _fixed_token(server))
    code = cli.main(["plan", "--stack", "reference", "--quota", "live", "--quiet"])
    err = capsys.readouterr().err
    assert code == cli.EXIT_USAGE
    last = err.splitlines()[-1]
    assert last.startswith("gb300 plan: Azure refused workload identity federation (ARM_USE_OIDC): ")
    assert "AADSTS700024" in last
    assert "docs/gitops.md#token-lifetime-on-azure-devops" in last
    assert "Traceback" not in err


@pytest.mark.parametrize("target", ["http://{host}/id-token", "https://elsewhere.invalid/id-token"])
def test_the_id_token_request_follows_no_redirect_off_https_or_to_another_host(server: Server, target: str) -> None:
    """A token endpoint that redirects to plain http or to another host gets its one request and no second: the
    bearer token goes nowhere else, and the error names where the redirect pointed."""
    host = f"127.0.0.1:{server.server_address[1]}"
    server.location = target.format(host=host)
    request = IdTokenRequest(f"http://{host}/moved", "github-bearer")
    with pytest.raises(ClientAuthenticationError, match=r"was redirected to .*only https on 127\.0\.0\.1"):
        request()
    assert server.id_requests == [({}, "Bearer github-bearer")]
