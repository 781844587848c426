"""The node payload delivered exactly as the deploy job delivers it, and fetched as a node fetches it.

The deploy job: the payload upload is the reference plan's recorded ``local.Command``, started as ``pulumi up``
starts it (tests/support/engine.py): the command provider runs ``/bin/sh -c <create>`` in the engine's working
directory (Pulumi.yaml's ``main``: ``<checkout>/infra``), with the engine's environment (the deploy job's, as
stack-up.yml sets it: ``ARM_USE_OIDC``, GitHub's ID token request, the signing key secret, ``.venv/bin`` on
``PATH``) plus what the engine adds for a provider. It runs in a network namespace whose /etc/hosts sends
GitHub's ID token endpoint and Entra ID to the stand-ins of tests/support/fake_azure.py and the payload
account's production host name (``<account>.blob.core.windows.net``) to Azurite (tests/support/azurite.py),
served over HTTPS with bearer tokens: the upload publishes there for real, and each role's ``fetch-payload``
(the real script, curl and openssl, with a stand-in IMDS) fetches and verifies it from there. The simulated
nodes (sandbox) then boot from the plan's custom data against what Azurite holds: they run what they fetched; a
tampered archive stops the bootstrap naming it.

What Azurite cannot do, a stand-in shows first, with the payload host sent to it: an account without Shared Key
refuses the Shared Key azure-native's ``storage:Blob`` would send, and the same upload waits out a deployer role
that has not propagated yet (two 403 ``AuthorizationPermissionMismatch``). The data account's private endpoint
address is unreachable there, as it is from a hosted runner outside the VNet.

Run from any directory but the engine's, the same command fails (exit 127: the shell finds no
``../.venv/bin/python``), which is what ``pulumi up`` did before the command was made relative to ``infra/``.

The node: fetch-payload itself, with the real curl and openssl, in a network namespace with a stand-in IMDS on
169.254.169.254 answering hostile tags and a listener on 10.0.0.5:8080 (issue 28's reproduction): no token reaches
the listener, and a client id that is not a GUID stops the fetch before IMDS is asked for a token.

Both need root (CI has it) and Azurite (scripts/ensure-test-tools); they fail without them, never skip.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shlex
import shutil
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from gb300 import paths
from gb300 import tags as gb300_tags
from gb300.config import stacks as gb300_stacks
from gb300.node import manifest
from gb300.node import steps as node_steps
from gb300.node.payload import FETCH_PAYLOAD, PAYLOAD_ENV
from gb300.plan import PlanResult
from tests.support import azurite, engine, fake_azure, netns, node_e2e, plan_custom_data, signing
from tests.support.sandbox import Sandbox

pytestmark = pytest.mark.slow  # namespaces, TLS stand-ins, Azurite and sandboxes

TENANT = "11111111-1111-1111-1111-111111111111"
CLIENT = "33333333-3333-3333-3333-333333333333"
NODE_CLIENT = "22222222-2222-2222-2222-222222222222"
DATA_ENDPOINT = "10.40.3.4"  # the data account's private endpoint: an address in the VNet, no route from outside
DENIED_FIRST = 2
STANDINS = "127.0.0.1"  # fake_azure: GitHub's ID token endpoint, Entra ID, the payload account's stand-in
AZURITE = "127.0.0.2"  # Azurite's Blob service
CONTAINER = "gb300-node-payload"
FETCHED_ROLES = (gb300_tags.ROLE_HEAD, gb300_tags.ROLE_GPU_NODE)


def _blobs(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def _requests(path: Path) -> list[dict[str, str]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


SHARED_KEY_PROBE = textwrap.dedent(
    """\
    import base64, sys
    from azure.core.exceptions import HttpResponseError
    from azure.storage.blob import BlobClient
    account = sys.argv[1].split(".")[0]
    key = base64.b64encode(b"k" * 64).decode()
    blob = BlobClient(f"https://{sys.argv[1]}", "gb300-node-payload", "probe",
                      credential={"account_name": account, "account_key": key})
    try:
        blob.upload_blob(b"x", overwrite=True)
        print("accepted")
    except HttpResponseError as exc:
        print(exc.status_code, exc.error_code)
    """
)

# What Azurite holds after the upload, read back over its Blob API with a bearer token: "<container>/<blob>".
READ_BACK = textwrap.dedent(
    """\
    import json, sys
    from azure.core.credentials import AccessToken
    from azure.storage.blob import ContainerClient
    class Token:
        def get_token(self, *scopes, **kwargs):
            return AccessToken(sys.argv[3], 2**31)
    client = ContainerClient(f"https://{sys.argv[1]}", sys.argv[2], credential=Token())
    out = {}
    for blob in client.list_blobs():
        out[f"{sys.argv[2]}/{blob.name}"] = client.download_blob(blob.name).readall().hex()
    json.dump(out, open(sys.argv[4], "w"))
    """
)

NODE_IMDS = textwrap.dedent(
    """\
    import http.server, json, sys
    tags, token = json.load(open(sys.argv[1])), open(sys.argv[2]).read().strip()
    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            if self.headers.get("Metadata") != "true":
                self.send_response(400); self.end_headers(); return
            if self.path.startswith("/metadata/instance/compute/tagsList"):
                body = json.dumps([{"name": k, "value": v} for k, v in tags.items()])
            elif self.path.startswith("/metadata/identity/oauth2/token"):
                body = json.dumps({"access_token": token, "token_type": "Bearer"})
            else:
                self.send_response(404); self.end_headers(); return
            self.send_response(200); self.end_headers(); self.wfile.write(body.encode())
        def log_message(self, *a): pass
    http.server.HTTPServer(("169.254.169.254", 80), H).serve_forever()
    """
)

DELIVERY = textwrap.dedent(
    """\
    set -uo pipefail
    ip link set lo up
    ip addr add 169.254.169.254/32 dev lo
    pids=""
    trap 'kill $pids 2>/dev/null' EXIT
    mount --bind "$WORK/hosts.standin" /etc/hosts
    mkdir -p "$WORK/azure" "$WORK/azurite"
    PYTHONPATH="$REPO" "$PY" -m tests.support.fake_azure --state "$WORK/azure" --cert "$WORK/server.pem" \\
      --key "$WORK/server.key" --payload-host "$PAYLOAD_HOST" --deny-first "$DENY_FIRST" --listen "$STANDINS" &
    pids="$pids $!"
    for _ in $(seq 200); do [ -e "$WORK/azure/ready" ] && break; sleep 0.05; done
    # -- What Azurite cannot show, against the stand-in. What azure-native's storage:Blob does (Shared Key from
    # ListKeys): refused.
    "$PY" "$WORK/shared_key.py" "$PAYLOAD_HOST" >"$WORK/shared_key.out" 2>&1
    # The data account's private endpoint, from outside the VNet.
    curl -sS --max-time 5 -o /dev/null "https://$DATA_HOST/" 2>"$WORK/data.err"
    echo $? >"$WORK/data.rc"
    # The upload, as the engine starts it, while the deployer's role propagates.
    rm -rf "$WORK/azure/blobs"
    (eval "$LAUNCH") >"$WORK/propagation.out" 2>&1
    echo $? >"$WORK/propagation.rc"
    # -- Azurite: the payload account's host name now leads there.
    mount --bind "$WORK/hosts.azurite" /etc/hosts
    AZURITE_ACCOUNTS="$AZURITE_ACCOUNTS" "$NODE_BIN_DIR/node" $AZURITE_ARGV >"$WORK/azurite.out" 2>&1 &
    pids="$pids $!"
    for _ in $(seq 300); do
      code=$(curl -s -o /dev/null -w '%{http_code}' "https://$PAYLOAD_HOST/?comp=list") && [ "$code" != 000 ] && break
      sleep 0.1
    done
    echo "${code:-000}" >"$WORK/azurite.ready"
    # The container, as the stack's BlobContainer creates it (through ARM) before the upload runs.
    curl -sS -o "$WORK/container.out" -w '%{http_code}' -X PUT -H "Content-Length: 0" -H "x-ms-version: 2021-08-06" \\
      -H "Authorization: Bearer $(cat "$WORK/node.token")" "https://$PAYLOAD_HOST/$CONTAINER?restype=container" \\
      >"$WORK/container.code"
    : >"$WORK/azure/requests.jsonl"
    (eval "$LAUNCH") >"$WORK/publish.out" 2>&1
    echo $? >"$WORK/publish.rc"
    cp "$WORK/azure/requests.jsonl" "$WORK/publish.requests.jsonl"
    # Tokens Azurite must refuse: another audience, expired, none.
    for token in wrong expired none; do
      auth=(); [ "$token" = none ] || auth=(-H "Authorization: Bearer $(cat "$WORK/$token.token")")
      curl -s -o "$WORK/$token.body" -w '%{http_code}' "${auth[@]}" -H "x-ms-version: 2021-08-06" \\
        "https://$PAYLOAD_HOST/$CONTAINER/payloads/head/manifest.json" >"$WORK/$token.code"
    done
    # Each role's node: the real fetch-payload, its token from a stand-in IMDS, the payload from Azurite.
    "$PY" "$WORK/imds.py" "$WORK/node.tags.json" "$WORK/node.token" &
    pids="$pids $!"
    for _ in $(seq 200); do curl -s -o /dev/null -H Metadata:true http://169.254.169.254/x && break; sleep 0.05; done
    for role in $ROLES; do
      GB300_ROOT="$WORK/$role" GB300_PAYLOAD_ATTEMPTS=1 "$WORK/$role/usr/local/lib/gb300/fetch-payload" \\
        >"$WORK/$role.out" 2>&1
      echo $? >"$WORK/$role.rc"
    done
    "$PY" "$WORK/read_back.py" "$PAYLOAD_HOST" "$CONTAINER" "$(cat "$WORK/node.token")" "$WORK/azurite.json" \\
      >"$WORK/read_back.out" 2>&1
    """
)


def _checkout(work: Path, plan: PlanResult) -> Path:
    """The checkout the deploy job runs in: the project file, the program's directory, the project's environment
    (``make setup``'s ``.venv``) and the stack file the plan was made from (with the tests' signing key)."""
    project = work / "checkout"
    (project / "stacks").mkdir(parents=True)
    (project / "infra").mkdir()
    shutil.copy(paths.PROJECT_FILE, project / "Pulumi.yaml")
    for name in ("__main__.py", "gb300"):
        (project / "infra" / name).symlink_to(paths.REPO_ROOT / "infra" / name)
    (project / ".venv").symlink_to(paths.REPO_ROOT / ".venv")
    stack = {"config": {f"gb300:{k}": v for k, v in _raw(plan).items()}}
    (project / "stacks" / "Pulumi.reference.yaml").write_text(yaml.safe_dump(stack))
    return project


def _deploy_job_env(project: Path, ca: str) -> dict[str, str]:
    """The environment ``pulumi up`` runs with in the deploy job (stack-up.yml's job and step ``env``, the setup
    action's ``.venv/bin`` on ``PATH``); the engine passes it on to the command provider."""
    return {
        "PATH": f"{project / '.venv' / 'bin'}:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
        "HOME": str(project.parent),
        "STACK": "reference",
        "ARM_USE_OIDC": "true",
        "ARM_CLIENT_ID": CLIENT,
        "ARM_TENANT_ID": TENANT,
        "ARM_SUBSCRIPTION_ID": "00000000-0000-0000-0000-000000000000",
        "ACTIONS_ID_TOKEN_REQUEST_URL": f"https://{fake_azure.ID_TOKEN_HOST}/id-token?api-version=2.0",
        "ACTIONS_ID_TOKEN_REQUEST_TOKEN": fake_azure.REQUEST_TOKEN,
        manifest.SIGNING_KEY_ENV: signing.key_pem(),
        # The stand-ins' CA, where a real job trusts the public CAs.
        "REQUESTS_CA_BUNDLE": ca,
        "SSL_CERT_FILE": ca,
    }


def _upload(plan: PlanResult, project: Path, env: dict[str, str]) -> engine.Launch:
    """The plan's ``local.Command``, started as ``pulumi up`` in ``project`` starts it."""
    inputs = plan_custom_data.publish_inputs(plan)
    return engine.command_as_engine_runs_it(
        project, str(inputs["create"]), env, dir=inputs.get("dir"), environment=inputs.get("environment")
    )


def _node_files(work: Path, plan: PlanResult) -> None:
    """fetch-payload and its settings from each role's custom data, laid out under ``work/<role>``."""
    for role in FETCHED_ROLES:
        _lay_out_fetch(yaml.safe_load(plan_custom_data.cloud_config(plan, role))["write_files"], work / role)


def _lay_out_fetch(files: list[dict[str, Any]], root: Path) -> None:
    """fetch-payload and payload.env of one role's ``write_files``, at their node paths under ``root``."""
    for entry in files:
        if entry["path"] in (FETCH_PAYLOAD, PAYLOAD_ENV):
            target = root / entry["path"].lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(entry["content"])
            target.chmod(int(entry["permissions"], 8))


@pytest.fixture(scope="module")
def delivered(signed_reference_plan: PlanResult, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The reference plan's upload run as the deploy job's ``pulumi up`` runs it, against the stand-in (what
    Azurite cannot show) and then Azurite; each role's fetch from Azurite; what each saw and kept."""
    blob_binary = azurite.blob_binary()  # fails, naming scripts/ensure-test-tools, when Azurite is missing
    work = tmp_path_factory.mktemp("delivery")
    work.chmod(0o755)
    account = plan_custom_data.payload_account(signed_reference_plan)
    payload_host = f"{account}.blob.core.windows.net"
    data_host = f"{_data_account(signed_reference_plan)}.blob.core.windows.net"
    netns.make_ca(work, [payload_host, fake_azure.ENTRA_HOST, fake_azure.ID_TOKEN_HOST])
    names = f"localhost {fake_azure.ENTRA_HOST} {fake_azure.ID_TOKEN_HOST}"
    (work / "hosts.standin").write_text(f"{STANDINS} {names} {payload_host}\n{DATA_ENDPOINT} {data_host}\n")
    (work / "hosts.azurite").write_text(f"{STANDINS} {names}\n{AZURITE} {payload_host}\n")
    (work / "shared_key.py").write_text(SHARED_KEY_PROBE)
    (work / "read_back.py").write_text(READ_BACK)
    (work / "imds.py").write_text(NODE_IMDS)
    (work / "node.tags.json").write_text(json.dumps({"gb300-node-client-id": NODE_CLIENT}))
    (work / "node.token").write_text(fake_azure.access_token(TENANT, "https://storage.azure.com"))
    (work / "wrong.token").write_text(fake_azure.access_token(TENANT, "https://vault.azure.net"))
    (work / "expired.token").write_text(fake_azure.access_token(TENANT, "https://storage.azure.com", lifetime=-600))
    _node_files(work, signed_reference_plan)
    project = _checkout(work, signed_reference_plan)
    ca = str(work / "ca.pem")
    launch = _upload(signed_reference_plan, project, _deploy_job_env(project, ca))
    argv = azurite.blob_argv(
        host=AZURITE, port=443, cert=work / "server.pem", key=work / "server.key", location=work / "azurite"
    )
    node = shutil.which("node")
    assert node is not None
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
        "HOME": str(work),
        "CURL_CA_BUNDLE": ca,
        "REQUESTS_CA_BUNDLE": ca,
        "SSL_CERT_FILE": ca,
        "WORK": str(work),
        "REPO": str(paths.REPO_ROOT),
        "PY": sys.executable,
        "LAUNCH": launch.shell(),
        "PAYLOAD_HOST": payload_host,
        "DATA_HOST": data_host,
        "DENY_FIRST": str(DENIED_FIRST),
        "STANDINS": STANDINS,
        "NODE_BIN_DIR": str(Path(node).parent),
        # The bin script's real file (node_modules/azurite/dist/src/blob/main.js), run by that node.
        "AZURITE_ARGV": shlex.join([str(blob_binary.resolve()), *argv[1:]]),
        "AZURITE_ACCOUNTS": azurite.accounts(account),
        "CONTAINER": CONTAINER,
        "ROLES": " ".join(FETCHED_ROLES),
    }
    proc = netns.run(DELIVERY, env, cwd=work, tools=(*netns.TOOLS, "node"))
    if not (work / "read_back.out").exists():
        pytest.fail(f"the delivery could not run (exit {proc.returncode}): {proc.stderr.strip()[-800:]}")
    read_back = work / "azurite.json"
    return {
        "launch": launch,
        "project": project,
        "command": launch.argv[-1],
        "propagation_rc": int((work / "propagation.rc").read_text()),
        "propagation": (work / "propagation.out").read_text(),
        "rc": int((work / "publish.rc").read_text()),
        "output": (work / "publish.out").read_text(),
        "azurite_log": (work / "azurite.out").read_text() + (work / "read_back.out").read_text(),
        "shared_key": (work / "shared_key.out").read_text().strip(),
        "data_rc": int((work / "data.rc").read_text()),
        "requests": _requests(work / "publish.requests.jsonl"),
        "blobs": {k: bytes.fromhex(v) for k, v in json.loads(read_back.read_text()).items()}
        if read_back.exists()
        else {},
        "fetched": {
            role: (int((work / f"{role}.rc").read_text()), (work / f"{role}.out").read_text(), work / role)
            for role in FETCHED_ROLES
        },
        "refused": {
            token: ((work / f"{token}.code").read_text().strip(), (work / f"{token}.body").read_text())
            for token in ("wrong", "expired", "none")
            if (work / f"{token}.code").exists()
        },
        "account": account,
        "payload_host": payload_host,
    }


def _raw(plan: PlanResult) -> dict[str, Any]:
    from gb300 import config  # noqa: PLC0415

    return signing.with_test_key(config.load_stack_file(gb300_stacks.stack_file("reference")))


def _data_account(plan: PlanResult) -> str:
    from gb300 import tags  # noqa: PLC0415

    [account] = [
        r
        for r in plan.resources
        if r.type == "azure-native:storage:StorageAccount"
        and r.inputs.get("tags", {}).get(tags.STORAGE_PURPOSE) == tags.STORAGE_PURPOSE_DATA
    ]
    return str(account.inputs["accountName"])


def test_the_engine_runs_the_upload_in_the_programs_directory(delivered: dict[str, Any]) -> None:
    """``pulumi up`` starts the command provider in Pulumi.yaml's ``main`` (``infra/``), and pulumi-command runs
    the plan's command there with ``/bin/sh -c``: the command names the project's Python and the stack file
    relative to that directory, nothing absolute (it is stored in the state)."""
    launch: engine.Launch = delivered["launch"]
    assert launch.cwd == delivered["project"] / "infra"
    assert launch.argv[:2] == ("/bin/sh", "-c")
    words = shlex.split(delivered["command"])
    assert words[0] == "../.venv/bin/python"
    assert words[words.index("--stack-file") + 1] == "../stacks/Pulumi.reference.yaml"
    assert not [w for w in words if w.startswith("/")]
    assert launch.env["PULUMI_PROJECT"] == "gb300"
    assert launch.env["PULUMI_RUNTIME_VIRTUALENV"] == ".venv"


def test_the_deploy_jobs_upload_signs_in_with_oidc_and_publishes_every_payload_to_azurite(
    delivered: dict[str, Any], signed_reference_plan: PlanResult
) -> None:
    """The plan's command, started as the engine starts it with the job's OIDC variables, gets an ID token from
    GitHub, trades it with Entra ID for a bearer token and publishes each payload to Azurite over HTTPS: the
    archive, a manifest and a signature that verifies with the stack's public key, read back from Azurite."""
    assert delivered["rc"] == 0, delivered["output"] + delivered["azurite_log"]
    words = shlex.split(delivered["command"])
    expect = dict(words[i + 1].split("=", 1) for i, w in enumerate(words) if w == "--expect")
    pools = [p["name"] for p in _raw(signed_reference_plan)["gpuPools"]]
    assert sorted(expect) == sorted(["head", *(f"gpu-{p}" for p in pools)])
    blobs = delivered["blobs"]
    for name, sha in expect.items():
        archive = blobs[f"{CONTAINER}/archives/{sha}.tar.gz"]
        assert hashlib.sha256(archive).hexdigest() == sha
        data = blobs[f"{CONTAINER}/payloads/{name}/manifest.json"]
        m = manifest.Manifest.from_bytes(data)
        assert (m.cluster, m.name, m.sha256, m.size) == ("ref", name, sha, len(archive))
        assert manifest.verify(signing.public_key(), data, blobs[f"{CONTAINER}/payloads/{name}/manifest.json.sig"])
    requests = delivered["requests"]
    assert any(r["host"] == fake_azure.ID_TOKEN_HOST for r in requests)
    assert any(r["host"] == fake_azure.ENTRA_HOST and r["method"] == "POST" for r in requests)
    assert not [r for r in requests if r["host"] == delivered["payload_host"]]  # the Blob calls went to Azurite
    assert delivered["data_rc"] != 0  # no route to the private endpoint's address


def test_azurite_refuses_a_token_for_another_audience_an_expired_one_and_none(delivered: dict[str, Any]) -> None:
    """The Azurite the upload published to checks bearer tokens (``--oauth basic``): a token for Key Vault and an
    expired one are refused (403 AuthenticationFailed, as Azure answers) and no token reads nothing from the
    private container, so the publish above was authenticated by the token Entra issued for Storage."""
    refused = delivered["refused"]
    details = {"wrong": "Invalid token audience.", "expired": "Lifetime validation failed. The token is expired."}
    for token, detail in details.items():
        assert refused[token][0] == "403", refused
        assert "<Code>AuthenticationFailed</Code>" in refused[token][1]
        assert f"<AuthenticationErrorDetail>{detail}</AuthenticationErrorDetail>" in refused[token][1]
    assert refused["none"][0] == "403", refused
    assert "<Code>AuthorizationFailure</Code>" in refused["none"][1]  # a private container, no anonymous read


def test_the_upload_waits_out_the_deployers_role_propagating(delivered: dict[str, Any]) -> None:
    """Against the stand-in (Azurite has no role assignments), the same command, started the same way, waits out
    two 403 AuthorizationPermissionMismatch and publishes."""
    assert delivered["propagation_rc"] == 0, delivered["propagation"]
    assert delivered["propagation"].count("AuthorizationPermissionMismatch") == DENIED_FIRST


def test_the_account_refuses_shared_key_as_azure_does(delivered: dict[str, Any]) -> None:
    """What azure-native's storage:Blob sends (Shared Key from ListKeys) is refused by the payload account's
    stand-in, as by Azure for an account with allowSharedKeyAccess false (Azurite would accept it): why the
    upload uses a token."""
    assert delivered["shared_key"] == "403 KeyBasedAuthenticationNotPermitted"


@pytest.mark.parametrize("role", FETCHED_ROLES)
def test_each_roles_fetch_payload_takes_its_payload_from_azurite(
    delivered: dict[str, Any], signed_reference_plan: PlanResult, role: str
) -> None:
    """The role's real fetch-payload (curl, openssl), with a managed identity token from IMDS, downloads its
    manifest, signature and archive from Azurite at the account's production host name and verifies them."""
    rc, output, root = delivered["fetched"][role]
    assert rc == 0, output
    _name, archive = plan_custom_data.payload_of(signed_reference_plan, role)
    assert (root / "var/lib/gb300/payload.sha256").read_text().strip() == hashlib.sha256(archive).hexdigest()


@pytest.mark.parametrize("where", ["checkout", "parent", "program-subdir"])
def test_the_same_upload_from_any_other_directory_fails(delivered: dict[str, Any], where: str) -> None:
    """The command, started from the repository root (what this test did before, and where it passed while
    ``pulumi up`` failed), from above it or from below the program's directory: the shell finds no
    ``../.venv/bin/python`` and exits 127 before anything is published. The delivery above is therefore sensitive
    to the directory the engine gives the command."""
    launch: engine.Launch = delivered["launch"]
    project: Path = delivered["project"]
    cwd = {"checkout": project, "parent": project.parent, "program-subdir": project / "infra" / "gb300"}[where]
    proc = dataclasses.replace(launch, cwd=cwd).run(timeout=60)
    assert proc.returncode == 127, proc.stdout + proc.stderr
    assert "../.venv/bin/python: not found" in proc.stderr


def _boot(tmp_path: Path, plan: PlanResult, role: str, blobs: dict[str, bytes], account: str) -> Sandbox:
    """``role``'s node from the plan's custom data: the IMDS guard, fetch-payload and the first step it delivered."""
    azure = node_e2e.Azure(tags={"gb300-node-client-id": NODE_CLIENT}, blobs=blobs, payload_account=account)
    box = Sandbox(tmp_path / role, plan_custom_data.cloud_config(plan, role), node_e2e.head_machine("ref-node"))
    box.config["runcmd"] = box.config["runcmd"][:3]
    with node_e2e.endpoints(azure) as url:
        (box.base / "state.json").write_text(json.dumps(box.state() | {"endpoint": url}))
        box.extra_env = {"GB300_PAYLOAD_ATTEMPTS": "2", "GB300_PAYLOAD_BACKOFF_SECONDS": "0"}
        box.last = box.run()  # type: ignore[attr-defined]
    return box


@pytest.mark.parametrize("role", [gb300_tags.ROLE_HEAD, gb300_tags.ROLE_GPU_NODE])
def test_nodes_fetch_verify_and_run_what_was_delivered(
    delivered: dict[str, Any], signed_reference_plan: PlanResult, tmp_path: Path, role: str
) -> None:
    """Each role's node, booting from the plan's custom data against what the upload left in the account, takes
    its payload (signature and sha256 checked) and runs the first step it delivered."""
    box = _boot(tmp_path, signed_reference_plan, role, delivered["blobs"], delivered["account"])
    _name, archive = plan_custom_data.payload_of(signed_reference_plan, role)
    assert box.last.returncodes == [  # type: ignore[attr-defined]
        ("gb300-imds-guard", 0),
        ("fetch-payload", 0),
        (node_steps.GUARD_STEP, 0),
    ]
    assert box.read("/var/lib/gb300/payload.sha256").strip() == hashlib.sha256(archive).hexdigest()
    assert box.path(f"/var/lib/gb300/steps/{node_steps.GUARD_STEP}.done").is_file()


def test_a_delivered_payload_tampered_in_the_account_stops_the_bootstrap(
    delivered: dict[str, Any], signed_reference_plan: PlanResult, tmp_path: Path
) -> None:
    """One byte changed in the uploaded archive: the node never extracts it, and its status names the mismatch."""
    _name, archive = plan_custom_data.payload_of(signed_reference_plan, gb300_tags.ROLE_HEAD)
    sha = hashlib.sha256(archive).hexdigest()
    blobs = dict(delivered["blobs"])
    key = f"gb300-node-payload/archives/{sha}.tar.gz"
    blobs[key] = blobs[key][:-1] + bytes([blobs[key][-1] ^ 1])
    box = _boot(tmp_path, signed_reference_plan, gb300_tags.ROLE_HEAD, blobs, delivered["account"])
    status = box.read("/var/lib/gb300/status")
    assert "step: payload" in status
    assert f"reason: payload sha256 mismatch: expected {sha} got {hashlib.sha256(blobs[key]).hexdigest()}" in status
    assert not box.path("/usr/local/lib/gb300/lib.sh").exists()


# ---------------------------------------------------------------------------------------------------------------
# The node's fetch, for real, against a hostile tag set (issue 28, item 1).

IMDS = textwrap.dedent(
    """\
    import http.server, json, sys
    tags, log = json.load(open(sys.argv[1])), sys.argv[2]
    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            open(log, "a").write(self.path + "\\n")
            if self.headers.get("Metadata") != "true":
                self.send_response(400); self.end_headers(); return
            if self.path.startswith("/metadata/instance/compute/tagsList"):
                body = json.dumps([{"name": k, "value": v} for k, v in tags.items()])
            elif self.path.startswith("/metadata/identity/oauth2/token"):
                body = json.dumps({"access_token": "imds-storage-token", "token_type": "Bearer"})
            else:
                self.send_response(404); self.end_headers(); return
            self.send_response(200); self.end_headers(); self.wfile.write(body.encode())
        def log_message(self, *a): pass
    http.server.HTTPServer(("169.254.169.254", 80), H).serve_forever()
    """
)
LISTENER = textwrap.dedent(
    """\
    import http.server, sys
    log = sys.argv[1]
    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            open(log, "a").write(f"{self.path} {self.headers.get('Authorization', '')}\\n")
            self.send_response(200); self.end_headers(); self.wfile.write(b"stolen")
        def log_message(self, *a): pass
    http.server.HTTPServer(("10.0.0.5", 8080), H).serve_forever()
    """
)
HOSTILE = textwrap.dedent(
    """\
    set -uo pipefail
    ip link set lo up
    ip addr add 169.254.169.254/32 dev lo
    ip addr add 10.0.0.5/32 dev lo
    mount --bind "$WORK/hosts" /etc/hosts
    mkdir -p "$WORK/azure/blobs"
    cp -r "$WORK/published/." "$WORK/azure/blobs/"
    PYTHONPATH="$REPO" "$PY" -m tests.support.fake_azure --state "$WORK/azure" --cert "$WORK/server.pem" \\
      --key "$WORK/server.key" --payload-host "$PAYLOAD_HOST" --accept-token imds-storage-token &
    pids=$!
    "$PY" "$WORK/listener.py" "$WORK/listener.log" &
    pids="$pids $!"
    for case in $CASES; do
      "$PY" "$WORK/imds.py" "$WORK/$case.tags.json" "$WORK/$case.imds.log" &
      imds=$!
      for _ in $(seq 200); do
        [ -e "$WORK/azure/ready" ] && curl -s -o /dev/null -H Metadata:true http://169.254.169.254/x && break
        sleep 0.05
      done
      GB300_ROOT="$WORK/$case" GB300_PAYLOAD_ATTEMPTS=1 "$WORK/$case/usr/local/lib/gb300/fetch-payload" \\
        >"$WORK/$case.out" 2>&1
      echo $? >"$WORK/$case.rc"
      kill $imds; wait $imds 2>/dev/null
    done
    kill $pids
    """
)
HOSTILE_URL = "http://10.0.0.5:8080/stolen"
CASES = {
    # A tag writer points the payload URL at its listener; the client id is the identity's.
    "url": {"gb300-payload-url": HOSTILE_URL, "gb300-node-client-id": NODE_CLIENT},
    # ... and splices a second resource into the IMDS token query.
    "both": {"gb300-payload-url": HOSTILE_URL, "gb300-node-client-id": "x&resource=https%3A%2F%2Fvault.azure.net"},
}


@pytest.fixture(scope="module")
def hostile(signed_reference_plan: PlanResult, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """fetch-payload from the reference head's custom data, run for each hostile tag set (CASES)."""
    work = tmp_path_factory.mktemp("hostile")
    work.chmod(0o755)
    account = plan_custom_data.payload_account(signed_reference_plan)
    payload_host = f"{account}.blob.core.windows.net"
    netns.make_ca(work, [payload_host])
    (work / "hosts").write_text(f"127.0.0.1 localhost {payload_host}\n")
    for blob, data in plan_custom_data.published(signed_reference_plan, signing.key()).items():
        target = work / "published" / blob
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    (work / "imds.py").write_text(IMDS)
    (work / "listener.py").write_text(LISTENER)
    files = yaml.safe_load(plan_custom_data.cloud_config(signed_reference_plan, gb300_tags.ROLE_HEAD))["write_files"]
    for case, tags in CASES.items():
        (work / f"{case}.tags.json").write_text(json.dumps(tags))
        _lay_out_fetch(files, work / case)
    ca = str(work / "ca.pem")
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
        "HOME": str(work),
        "CURL_CA_BUNDLE": ca,
        "WORK": str(work),
        "REPO": str(paths.REPO_ROOT),
        "PY": sys.executable,
        "PAYLOAD_HOST": payload_host,
        "CASES": " ".join(CASES),
    }
    proc = netns.run(HOSTILE, env, cwd=work)
    if not all((work / f"{case}.rc").exists() for case in CASES):
        pytest.fail(f"the namespace test could not run (exit {proc.returncode}): {proc.stderr.strip()[-800:]}")
    return work


def test_a_tag_naming_another_address_gets_no_token(hostile: Path, signed_reference_plan: PlanResult) -> None:
    """gb300-payload-url pointing at a listener is not read: the node fetches its payload from the custom data's
    account (the listener hears nothing) and asks IMDS for a storage token for its own identity only."""
    assert (hostile / "url.rc").read_text().strip() == "0", (hostile / "url.out").read_text()
    assert not (hostile / "listener.log").exists() or (hostile / "listener.log").read_text() == ""
    _, archive = plan_custom_data.payload_of(signed_reference_plan, gb300_tags.ROLE_HEAD)
    done = hostile / "url" / "var/lib/gb300/payload.sha256"
    assert done.read_text().strip() == hashlib.sha256(archive).hexdigest()
    tokens = [line for line in (hostile / "url.imds.log").read_text().splitlines() if "oauth2/token" in line]
    assert tokens
    assert all(line.endswith(f"&client_id={NODE_CLIENT}") and line.count("resource=") == 1 for line in tokens)


def test_a_client_id_tag_splicing_a_resource_stops_the_fetch_before_any_token(hostile: Path) -> None:
    """The client id `x&resource=...vault...` is not a GUID: the fetch stops naming the tag, IMDS is never asked
    for a token (for storage or the vault), and the listener hears nothing."""
    assert (hostile / "both.rc").read_text().strip() == "1"
    status = (hostile / "both" / "var/lib/gb300/status").read_text()
    assert "reason: payload refused: tag gb300-node-client-id must be a GUID" in status
    asked = (hostile / "both.imds.log").read_text().splitlines()
    assert asked
    assert not [line for line in asked if "oauth2/token" in line]
    assert not (hostile / "listener.log").exists() or (hostile / "listener.log").read_text() == ""
    assert not (hostile / "both" / "usr/local/lib/gb300/lib.sh").exists()


def test_the_node_never_reads_a_payload_url_tag() -> None:
    """No node script reads gb300-payload-url any more: the tag no longer exists in the tag contract."""
    scripts = Path(node_steps.CLOUD_INIT_DIR).rglob("*")
    assert not [p for p in scripts if p.is_file() and "gb300-payload-url" in p.read_text(errors="replace")]
