"""`pulumi up` of the payload upload through the real Pulumi engine, against Azurite: the engine test project.

The engine is the Pulumi CLI built from source at the pinned version (scripts/build-engine; tests/support/
pulumi_engine.py), with the two plugins the Go module proxy will not serve as doubles at their gRPC boundaries:
the Python language host and pulumi-command's provider (tests/support/engine_plugins/, each docstring says what it
cannot show). Without Go or the proxy it is skipped, saying so (under CI it fails); without Azurite
(scripts/ensure-test-tools) or root for the network namespace it fails.

What it runs, as a deploy job would: a scratch copy of the checkout (``infra/``, ``cloud-init/``, ``templates/``,
``stacks/``, ``Pulumi.yaml``; ``.venv`` linked) whose dev stack carries the tests' payload signing key; ``gb300 plan``
of that copy records the upload's ``command:local:Command`` inputs; tests/engine/project/__main__.py, put in place of
``infra/__main__.py``, declares exactly those inputs. In a network namespace of its own (the payload account's host
``<account>.blob.core.windows.net`` is Azurite over HTTPS with a test CA, taking bearer tokens only), with a local
file backend and a passphrase secrets provider: ``pulumi stack init``, ``pulumi config set``, ``pulumi up`` (the
engine starts the language host and the command provider in ``<copy>/infra``, and the provider runs the upload
there), ``pulumi up --expect-no-changes`` (nothing runs again), ``pulumi stack export``. The token comes from a
stand-in ``az`` (gb300's credential falls back to the Azure CLI), a JWT with Azure Storage's audience (Azurite
checks its claims, not its signature: what Azurite cannot show is Entra ID's signature and role checks). The test
reads back each payload and its signed manifest from Azurite.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from gb300 import config, paths, tags
from gb300.config import stacks as gb300_stacks
from gb300.node import manifest
from tests.support import azurite, netns, pulumi_engine, signing

pytestmark = pytest.mark.slow
STACK = "dev"
COPIED = ("infra", "cloud-init", "templates", "stacks")
PROJECT_NAMESPACE = "gb300-engine-test"

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
    AZURITE_ACCOUNTS="$AZURITE_ACCOUNTS" "$NODE_BIN_DIR/node" $AZURITE_ARGV >"$WORK/azurite.log" 2>&1 &
    azurite=$!
    trap 'kill $azurite' EXIT
    for _ in $(seq 300); do curl -s -o /dev/null "https://$PAYLOAD_HOST/" && break; sleep 0.1; done
    # The container (azure-native creates it in a real deploy).
    "$PY" "$WORK/container.py" >"$WORK/container.out" 2>&1 || { cat "$WORK/container.out"; exit 3; }
    cd "$COPY"
    step() {  # step NAME pulumi-args...: the command's output in $WORK/NAME.out, its exit status in $WORK/NAME.rc
      local name=$1; shift
      pulumi "$@" >"$WORK/$name.out" 2>&1
      echo $? >"$WORK/$name.rc"
    }
    step init stack init "$STACK" --non-interactive
    step config config set "$NAMESPACE:upload" "$WORK/upload.json" --stack "$STACK"
    step up up --stack "$STACK" --yes --non-interactive --skip-preview
    "$PY" "$WORK/read_back.py" >"$WORK/blobs.json" 2>"$WORK/read_back.err"
    step again up --stack "$STACK" --yes --non-interactive --expect-no-changes
    step export stack export --stack "$STACK" --file "$WORK/state.json"
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
STEPS = ("init", "config", "up", "again", "export")


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


def _stage(work: Path, host: str) -> Path:
    """The test CA and hosts file, the stand-in ``az`` and the Azurite scripts in ``work``; the stand-ins' bin."""
    netns.make_ca(work, [host])
    (work / "hosts").write_text(f"127.0.0.1 localhost {host}\n", encoding="utf-8")
    bin_dir = work / "standins"
    bin_dir.mkdir()
    (bin_dir / "az").write_text(AZ, encoding="utf-8")
    (bin_dir / "az").chmod(0o755)
    (work / "container.py").write_text(CONTAINER, encoding="utf-8")
    (work / "read_back.py").write_text(READ_BACK, encoding="utf-8")
    return bin_dir


@pytest.fixture(scope="module")
def deployed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The engine test project through the real engine in a scratch copy, against Azurite: each step's output."""
    work = tmp_path_factory.mktemp("engine")
    work.chmod(0o755)
    cli = pulumi_engine.engine(work / "engine")
    blob_binary = azurite.blob_binary()  # fails, naming scripts/ensure-test-tools, when Azurite is missing
    copy = _scratch_copy(work)
    recorded = _recorded_upload(copy, work)
    (work / "upload.json").write_text(json.dumps(recorded["inputs"]), encoding="utf-8")
    shutil.copy2(Path(__file__).with_name("project") / "__main__.py", copy / "infra" / "__main__.py")
    host = f"{recorded['account']}.blob.core.windows.net"
    standins = _stage(work, host)
    argv = azurite.blob_argv(
        host="127.0.0.1", port=443, cert=work / "server.pem", key=work / "server.key", location=work / "azurite"
    )
    node = shutil.which("node")
    assert node is not None
    ca = str(work / "ca.pem")
    env = {
        **{k: v for k, v in cli.env.items() if k.startswith("PULUMI_")},
        "PATH": ":".join([str(standins), cli.env["PATH"]]),
        "HOME": str(work),
        "PYTHONPATH": str(copy / "infra"),
        manifest.SIGNING_KEY_ENV: signing.key_pem(),
        "REQUESTS_CA_BUNDLE": ca,
        "SSL_CERT_FILE": ca,
        "CURL_CA_BUNDLE": ca,
        "WORK": str(work),
        "COPY": str(copy),
        "PY": str(paths.REPO_ROOT / ".venv" / "bin" / "python"),
        "STACK": STACK,
        "NAMESPACE": PROJECT_NAMESPACE,
        "NODE_BIN_DIR": str(Path(node).parent),
        "AZURITE_ARGV": shlex.join([str(blob_binary.resolve()), *argv[1:]]),
        "AZURITE_ACCOUNTS": azurite.accounts(recorded["account"]),
        "PAYLOAD_HOST": host,
        "CONTAINER": config.parse(
            config.load_stack_file(copy / "stacks" / f"Pulumi.{STACK}.yaml")
        ).storage.node_payload.container,
    }
    started = time.monotonic()
    proc = netns.run(DRIVER, env, cwd=work, timeout=900, tools=(*netns.TOOLS, "node"))
    if not (work / "up.rc").exists():
        pytest.fail(f"the engine test could not run (exit {proc.returncode}): {(proc.stdout + proc.stderr)[-3000:]}")
    state = work / "state.json"
    return {
        "rc": {name: int((work / f"{name}.rc").read_text()) for name in STEPS if (work / f"{name}.rc").exists()},
        "out": {name: (work / f"{name}.out").read_text() for name in STEPS if (work / f"{name}.out").exists()},
        "blobs": json.loads((work / "blobs.json").read_text() or "{}"),
        "read_back_err": (work / "read_back.err").read_text(),
        "state": json.loads(state.read_text()) if state.exists() else {},
        "inputs": recorded["inputs"],
        "seconds": time.monotonic() - started,
        "copy": copy,
        "version": cli.version,
    }


def _expected(create: str) -> dict[str, str]:
    """The payloads the command publishes: its ``--expect name=sha256`` words."""
    words = shlex.split(create)
    return dict(words[i + 1].split("=", 1) for i, w in enumerate(words) if w == "--expect")


def _commands(state: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in state["deployment"].get("resources", []) if r["type"] == "command:local:Command"]


def test_pulumi_up_runs_the_upload_where_the_engine_runs_it_and_publishes(deployed: dict[str, Any]) -> None:
    """`pulumi up` runs the upload as the component declares it, from the directory the engine gives plugins
    (<copy>/infra), and it publishes every payload to Azurite with a bearer token: the archive under its sha256,
    and a manifest naming it whose signature verifies with the stack's key."""
    assert deployed["rc"]["init"] == 0, deployed["out"]["init"]
    assert deployed["rc"]["up"] == 0, deployed["out"]["up"][-4000:]
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


def test_a_second_up_with_the_same_inputs_changes_nothing(deployed: dict[str, Any]) -> None:
    """A second `pulumi up` of the same stack and inputs finds no change (`--expect-no-changes` passes): the
    upload does not run again."""
    assert deployed["rc"]["again"] == 0, deployed["out"]["again"][-4000:]
    assert "payload-publish" not in deployed["out"]["again"].split("Resources:")[0].replace("unchanged", "")


def test_stack_export_holds_the_upload_with_its_inputs_and_outputs(deployed: dict[str, Any]) -> None:
    """`pulumi stack export` writes the checkpoint the engine keeps: the upload with the inputs the component
    declared, its provider (pulumi-command at constraints.txt's version) and the command's stdout."""
    assert deployed["rc"]["export"] == 0, deployed["out"]["export"]
    [upload] = _commands(deployed["state"])
    assert upload["inputs"]["create"] == deployed["inputs"]["create"]
    assert upload["outputs"]["create"] == deployed["inputs"]["create"]
    assert "stdout" in upload["outputs"]
    [provider] = [
        r for r in deployed["state"]["deployment"]["resources"] if r["urn"] == upload["provider"].rsplit("::", 1)[0]
    ]
    from importlib.metadata import version  # noqa: PLC0415

    assert provider["inputs"].get("version") == version("pulumi_command")
