"""`pulumi up` of the payload upload, by the real Pulumi CLI, against Azurite: the engine test project.

Needs a Pulumi CLI (``pulumi`` on PATH) and Azurite (``azurite`` on PATH, npm ``azurite@3.35.0``); the CI job
``engine`` in .github/workflows/pr.yml installs both. Without a Pulumi CLI it is skipped, saying so (the only
skip); without Azurite, or without root for the network namespace, it fails.

What it runs, as a deploy job would: a scratch copy of the checkout (``infra/``, ``cloud-init/``, ``templates/``,
``stacks/``, ``Pulumi.yaml``; ``.venv`` linked) whose dev stack carries the tests' payload signing key; ``gb300 plan``
of that copy records the upload's ``command:local:Command`` inputs; tests/engine/project/__main__.py, put in place of
``infra/__main__.py``, declares exactly those inputs. ``pulumi up`` (a local file backend, a passphrase secrets
provider) then starts the language host and pulumi-command's provider as it does for gb300's program, in
``<copy>/infra``, and the provider runs the command there. In a network namespace of its own the payload account's
host (``<account>.blob.core.windows.net``) is Azurite over HTTPS (a test CA), taking bearer tokens only
(``--oauth basic``); the token comes from a stand-in ``az`` (gb300's credential falls back to the Azure CLI), a JWT
with Azure Storage's audience (Azurite checks its claims, not its signature: what Azurite cannot show is Entra ID's
signature and role checks). The test reads back each payload and its signed manifest from Azurite.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from gb300 import config, paths, tags
from gb300.config import stacks as gb300_stacks
from gb300.node import manifest
from tests.support import netns, signing

PULUMI = shutil.which("pulumi")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(PULUMI is None, reason="no Pulumi CLI on PATH: the engine test project needs `pulumi up`"),
]
STACK = "dev"
PASSPHRASE = "gb300-engine-test"  # noqa: S105 - the scratch stack's passphrase secrets provider, not a secret
COPIED = ("infra", "cloud-init", "templates", "stacks")
COMMAND_PLUGIN = "command"

AZ = textwrap.dedent(
    """\
    #!/usr/bin/env python3
    # Stand-in Azure CLI: `az account get-access-token` answers a JWT with Azure Storage's audience.
    import base64, json, sys, time
    def part(obj):
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()
    now = int(time.time())
    if sys.argv[1:3] != ["account", "get-access-token"]:
        sys.exit("az stand-in: only 'account get-access-token'")
    claims = {"aud": "https://storage.azure.com", "iss": "https://sts.windows.net/TENANT/", "iat": now,
              "nbf": now - 60, "exp": now + 3600, "oid": "OID", "tid": "TENANT"}
    token = part({"alg": "RS256", "typ": "JWT"}) + "." + part(claims) + "." + part({"sig": "unsigned"})
    print(json.dumps({"accessToken": token, "expires_on": now + 3600, "tokenType": "Bearer"}))
    """
)

DRIVER = textwrap.dedent(
    """\
    set -uo pipefail
    ip link set lo up
    mount --bind "$WORK/hosts" /etc/hosts
    AZURITE_ACCOUNTS="$ACCOUNT:$ACCOUNT_KEY" azurite-blob --blobHost 127.0.0.1 --blobPort 443 --oauth basic \\
      --cert "$WORK/server.pem" --key "$WORK/server.key" --location "$WORK/azurite" --skipApiVersionCheck \\
      --disableTelemetry >"$WORK/azurite.log" 2>&1 &
    azurite=$!
    trap 'kill $azurite' EXIT
    for _ in $(seq 300); do curl -s -o /dev/null "https://$PAYLOAD_HOST/" && break; sleep 0.1; done
    # The container (azure-native creates it in a real deploy).
    "$PY" "$WORK/container.py" >"$WORK/container.out" 2>&1 || { cat "$WORK/container.out"; exit 3; }
    cd "$COPY"
    pulumi stack init "$STACK" --non-interactive >"$WORK/init.out" 2>&1 || { cat "$WORK/init.out"; exit 4; }
    pulumi config set gb300-engine-test:upload "$WORK/upload.json" --stack "$STACK" >>"$WORK/init.out" 2>&1
    pulumi up --stack "$STACK" --yes --non-interactive --skip-preview >"$WORK/up.out" 2>&1
    echo $? >"$WORK/up.rc"
    "$PY" "$WORK/read_back.py" >"$WORK/blobs.json" 2>"$WORK/read_back.err"
    """
)

CONTAINER = textwrap.dedent(
    """\
    import os
    from azure.core.credentials import AccessToken
    from azure.storage.blob import BlobServiceClient
    import json, subprocess
    class Az:
        def get_token(self, *scopes, **kw):
            out = json.loads(subprocess.check_output(["az", "account", "get-access-token"]))
            return AccessToken(out["accessToken"], out["expires_on"])
    service = BlobServiceClient(f"https://{os.environ['PAYLOAD_HOST']}", credential=Az())
    service.create_container(os.environ["CONTAINER"])
    print("created")
    """
)

READ_BACK = CONTAINER.replace(
    'service.create_container(os.environ["CONTAINER"])\nprint("created")\n',
    textwrap.dedent(
        """\
        import base64
        box = service.get_container_client(os.environ["CONTAINER"])
        print(json.dumps({b.name: base64.b64encode(box.download_blob(b.name).readall()).decode()
                          for b in box.list_blobs()}))
        """
    ),
)


def _scratch_copy(root: Path) -> Path:
    """The checkout as a deploy job has it, with the tests' signing key in the dev stack; .venv linked."""
    copy = root / "checkout"
    copy.mkdir()
    for name in COPIED:
        shutil.copytree(paths.REPO_ROOT / name, copy / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(paths.REPO_ROOT / "Pulumi.yaml", copy / "Pulumi.yaml")
    (copy / ".venv").symlink_to(paths.REPO_ROOT / ".venv")
    raw = signing.with_test_key(config.load_stack_file(gb300_stacks.stack_file(STACK)))
    stack = {"config": {f"gb300:{k}": v for k, v in raw.items()}}
    (copy / "stacks" / f"Pulumi.{STACK}.yaml").write_text(yaml.safe_dump(stack), encoding="utf-8")
    return copy


def _env_of_copy(copy: Path) -> dict[str, str]:
    """gb300 imported from the copy (ahead of the editable install's path entry), as its own checkout would."""
    return {**os.environ, "PYTHONPATH": str(copy / "infra")}


def _recorded_upload(copy: Path, work: Path) -> dict[str, Any]:
    """The upload's inputs as `gb300 plan` of the copy records them (the component's own declaration)."""
    out = work / "plan.json"
    subprocess.run(
        [str(copy / ".venv" / "bin" / "python"), "-m", "gb300.cli", "plan", "--stack", STACK, "--json", str(out)],
        cwd=copy,
        env=_env_of_copy(copy),
        check=False,
        capture_output=True,
        timeout=600,
    )
    plan = json.loads(out.read_text(encoding="utf-8"))
    [upload] = [r for r in plan["resources"] if r["type"] == "command:local:Command"]
    [account] = [
        r
        for r in plan["resources"]
        if r["type"] == "azure-native:storage:StorageAccount"
        and r["inputs"].get("tags", {}).get(tags.STORAGE_PURPOSE) == tags.STORAGE_PURPOSE_NODE_PAYLOAD
    ]
    return {"inputs": upload["inputs"], "account": account["inputs"]["accountName"], "plan": plan}


def _command_plugin_version() -> str:
    from importlib.metadata import version  # noqa: PLC0415

    return version("pulumi_command")


@pytest.fixture(scope="module")
def deployed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """`pulumi up` of the engine test project in the scratch copy, against Azurite; what it printed and left."""
    assert PULUMI is not None
    if shutil.which("azurite-blob") is None:
        pytest.fail("azurite-blob is not on PATH (npm install -g azurite@3.35.0; the CI job `engine` installs it)")
    work = tmp_path_factory.mktemp("engine")
    work.chmod(0o755)
    copy = _scratch_copy(work)
    recorded = _recorded_upload(copy, work)
    (work / "upload.json").write_text(json.dumps(recorded["inputs"]), encoding="utf-8")
    shutil.copy2(Path(__file__).with_name("project") / "__main__.py", copy / "infra" / "__main__.py")
    host = f"{recorded['account']}.blob.core.windows.net"
    netns.make_ca(work, [host])
    (work / "hosts").write_text(f"127.0.0.1 localhost {host}\n", encoding="utf-8")
    bin_dir = work / "bin"
    bin_dir.mkdir()
    (bin_dir / "az").write_text(AZ, encoding="utf-8")
    (bin_dir / "az").chmod(0o755)
    (work / "container.py").write_text(CONTAINER, encoding="utf-8")
    (work / "read_back.py").write_text(READ_BACK, encoding="utf-8")
    pulumi_home = work / "pulumi-home"
    # The provider plugin first, while the network is there (the namespace has loopback only).
    subprocess.run(
        [PULUMI, "plugin", "install", "resource", COMMAND_PLUGIN, _command_plugin_version()],
        env={**os.environ, "PULUMI_HOME": str(pulumi_home)},
        check=True,
        capture_output=True,
        timeout=600,
    )
    ca = str(work / "ca.pem")
    path = [
        str(bin_dir),
        str(paths.REPO_ROOT / ".venv" / "bin"),
        str(Path(PULUMI).parent),
        str(Path(sys.executable).parent),
    ]
    for tool in ("azurite-blob", "node"):
        found = shutil.which(tool)
        if found:
            path.append(str(Path(found).parent))
    env = {
        "PATH": ":".join([*path, "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"]),
        "HOME": str(work),
        "PULUMI_HOME": str(pulumi_home),
        "PULUMI_BACKEND_URL": f"file://{work / 'state'}",
        "PULUMI_CONFIG_PASSPHRASE": PASSPHRASE,
        "PULUMI_SKIP_UPDATE_CHECK": "true",
        "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
        "PYTHONPATH": str(copy / "infra"),
        manifest.SIGNING_KEY_ENV: signing.key_pem(),
        "REQUESTS_CA_BUNDLE": ca,
        "SSL_CERT_FILE": ca,
        "CURL_CA_BUNDLE": ca,
        "NODE_EXTRA_CA_CERTS": ca,
        "WORK": str(work),
        "COPY": str(copy),
        "PY": str(paths.REPO_ROOT / ".venv" / "bin" / "python"),
        "STACK": STACK,
        "ACCOUNT": recorded["account"],
        "ACCOUNT_KEY": base64.b64encode(b"azurite-engine-test-key-" * 2).decode(),
        "PAYLOAD_HOST": host,
        "CONTAINER": config.parse(
            config.load_stack_file(copy / "stacks" / f"Pulumi.{STACK}.yaml")
        ).storage.node_payload.container,
    }
    (work / "state").mkdir()
    started = time.monotonic()
    proc = netns.run(DRIVER, env, cwd=work, timeout=900, tools=("unshare", "ip", "curl"))
    if not (work / "up.rc").exists():
        pytest.fail(f"the engine test could not run (exit {proc.returncode}): {(proc.stdout + proc.stderr)[-3000:]}")
    return {
        "rc": int((work / "up.rc").read_text()),
        "up": (work / "up.out").read_text(),
        "blobs": json.loads((work / "blobs.json").read_text() or "{}"),
        "read_back_err": (work / "read_back.err").read_text(),
        "azurite": (work / "azurite.log").read_text(),
        "inputs": recorded["inputs"],
        "seconds": time.monotonic() - started,
        "copy": copy,
    }


def _expected(create: str) -> dict[str, str]:
    """The payloads the command publishes: its ``--expect name=sha256`` words."""
    words = shlex.split(create)
    return dict(words[i + 1].split("=", 1) for i, w in enumerate(words) if w == "--expect")


def test_pulumi_up_runs_the_upload_where_the_engine_runs_it_and_publishes(deployed: dict[str, Any]) -> None:
    """`pulumi up` runs the upload as the component declares it, from the directory the engine gives plugins
    (<copy>/infra), and it publishes every payload to Azurite with a bearer token: the archive under its sha256,
    and a manifest naming it whose signature verifies with the stack's key."""
    assert deployed["rc"] == 0, deployed["up"][-4000:]
    blobs = {name: base64.b64decode(data) for name, data in deployed["blobs"].items()}
    expected = _expected(deployed["inputs"]["create"])
    assert expected, deployed["inputs"]["create"]
    for name, sha in expected.items():
        archive = blobs.get(manifest.archive_blob(sha))
        assert archive is not None, (name, sorted(blobs), deployed["read_back_err"])
        assert hashlib.sha256(archive).hexdigest() == sha
        data = blobs[manifest.manifest_blob(name)]
        signing.key().public_key().verify(blobs[manifest.signature_blob(name)], data)
        assert json.loads(data)["sha256"] == sha
