"""Rendered custom data: valid cloud-config, reviewable goldens, small, secret-free, hash-tracked."""

from __future__ import annotations

import base64
import copy
import gzip
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from gb300 import config
from gb300 import tags as gb300_tags
from gb300.errors import BootstrapError, UnknownRoleError
from gb300.node import context as node_context
from gb300.node import paths
from gb300.node.boot_context import BootstrapContext
from gb300.node.bundle import bundle_for
from gb300.node.custom_data import render_custom_data
from gb300.node.pack import AZURE_CUSTOM_DATA_LIMIT, pack_custom_data
from gb300.node.secrets import find_secret_material
from gb300.node.steps import COMPACT_NOTE, STEPS, steps_for
from gb300.paths import CLOUD_INIT_DIR
from tests.support.bootstrap_helpers import REFERENCE_CLUSTER, ROLES, reference_context, render_role
from tests.support.files import assert_golden
from tests.support.tools import CLOUD_INIT_MISSING, require_tool

GOLDEN = Path(__file__).with_name("golden")
"""The reviewed expected outputs of this file's tests (GB300_UPDATE_GOLDEN=1 rewrites them)."""


def _cloud_init() -> str:
    return require_tool("cloud-init", CLOUD_INIT_MISSING)


@pytest.mark.slow
@pytest.mark.parametrize("role", ROLES)
def test_every_role_passes_cloud_init_schema(role: str, tmp_path: Path) -> None:
    """Each role's cloud-config is accepted by the real `cloud-init schema`."""
    cloud_init = _cloud_init()
    config = tmp_path / f"{role}.yaml"
    config.write_text(render_role(role).cloud_config)
    result = subprocess.run(
        [cloud_init, "schema", "--config-file", str(config)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Valid cloud-config" in result.stdout


@pytest.mark.parametrize("role", ROLES)
def test_rendered_cloud_config_matches_golden(role: str) -> None:
    """A change to any role's cloud-config shows up as a golden-file diff in review."""
    assert_golden(GOLDEN / f"pack/{role}.cloud-config.yaml", render_role(role).cloud_config)


@pytest.mark.parametrize("role", ROLES)
def test_custom_data_is_gzip_base64_well_under_the_azure_limit(role: str) -> None:
    """Each role's custom data decodes to its cloud-config and uses under half of Azure's 64 KB."""
    rendered = render_role(role)
    assert gzip.decompress(base64.b64decode(rendered.base64)).decode() == rendered.cloud_config
    assert rendered.size == len(rendered.base64)
    print(f"{role}: custom data {rendered.size} bytes base64 ({len(rendered.cloud_config)} bytes plain)")
    assert rendered.size < AZURE_CUSTOM_DATA_LIMIT // 2


@pytest.mark.parametrize("role", ROLES)
def test_custom_data_carries_no_secrets(role: str) -> None:
    """No role's custom data contains keys, passwords or tokens."""
    text = render_role(role).cloud_config
    assert find_secret_material(text) == []
    lowered = text.lower()
    for marker in ("private key", "accountkey=", "sig=", "client_secret", "password:", "ssh_authorized_keys"):
        assert marker not in lowered


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("password: hunter2", ["password assignment"]),
        ("DB_PASSWORD='s3cr3t!'", ["password assignment"]),
        ("API_KEY=abcdef123456", ["password assignment"]),
        ("GB300_MUNGE_SECRET_NAME=munge-key", []),
        ('SECRET="${GB300_MUNGE_SECRET_NAME:-munge-key}"', []),
        ("token_json=$(curl -sS http://169.254.169.254/)", []),
        ("-----BEGIN OPENSSH PRIVATE KEY-----", ["private key block"]),
    ],
    ids=["yaml-password", "env-password", "api-key", "secret-name", "expansion", "command-substitution", "pem"],
)
def test_secret_detector_table(text: str, found: list[str]) -> None:
    """Literal secrets are caught; the name of a secret and shell expansions that fetch one at boot are not."""
    assert find_secret_material(text) == found


def test_secret_looking_feature_input_is_refused() -> None:
    """A later feature that tries to pass a secret through custom data fails to render."""
    ctx = BootstrapContext.for_pool(
        role="gpu-node",
        cluster_name=REFERENCE_CLUSTER,
        pool_name="gpu-a",
        extra_env={"GB300_BLOB_URL": "https://acct.blob.core.windows.net/c?sv=2024&sig=AbCdEfGhIjKlMnOpQrStUvWx%3D"},
    )
    with pytest.raises(BootstrapError, match="must not carry secrets"):
        render_custom_data(ctx)


def test_runcmd_runs_each_step_in_order_in_list_form() -> None:
    """runcmd is one list-form entry per step, in the node registry's order, ending with the ready step."""
    config = yaml.safe_load(render_role("gpu-node").cloud_config)
    names = [step.name for step in steps_for(reference_context("gpu-node"))]
    assert config["runcmd"] == [["/usr/local/lib/gb300/run-step", name] for name in names]
    assert names[-1] == "99-ready"
    placed = {entry["path"] for entry in config["write_files"]}
    assert {f"/usr/local/lib/gb300/steps/{name}.sh" for name in names} <= placed


def test_every_step_runs_on_some_role_and_head_is_marked_ready() -> None:
    """Every step in the node registry belongs to a role, and the head role also ends by marking ready."""
    assert all(step.roles for step in STEPS)
    assert [s.name for s in steps_for(reference_context("head"))][-1] == "99-ready"


def test_gpu_node_custom_data_covers_every_component_of_the_issue() -> None:
    """The GPU node's custom data names every component the bootstrap must verify or install."""
    text = render_role("gpu-node").cloud_config
    for needle in (
        "nvidia-driver",
        "NVreg_CoherentGPUMemoryMode=driver",
        "nvidia_peermem",
        "nvidia-persistenced",
        "doca-ofed",
        "nvidia-imex",
        "channel0",
        "cuda",
        "libnccl2",
        "nccl-rdma-sharp-plugins",
        "nccl-tests",
        "dcgm",
        "moby",
        "nvidia-container-toolkit",
        "cdi",
        "enroot",
        "pyxis",
        "apt-mark hold",
        "OS.EnableRDMA",
        "ibstat",
        "pkeys",
        "NCCL_MNNVL_ENABLE=1",
        "/etc/nccl.conf",
        "/etc/profile.d/gb300-nccl.sh",
        "mdadm",
        "/mnt/resource_nvme",
        "fstab",
        "sysctl",
        "limits.d",
        "ClusterUUID",
        "CliqueId",
        "fabric.json",
        "bootstrap.done",
    ):
        assert needle in text, needle


def test_content_hash_is_stable_and_changes_with_a_software_pin() -> None:
    """The same inputs give the same hash; a new NCCL pin gives a new hash (pool needs reimage)."""
    first, again = render_role("gpu-node"), render_role("gpu-node")
    assert first.sha256 == again.sha256
    assert first.base64 == again.base64
    bumped = render_role("gpu-node", nccl="2.30.1")
    assert bumped.sha256 != first.sha256
    assert "GB300_SW_NCCL_VERSION=2.30.1" in bumped.cloud_config


def test_pools_differ_only_in_their_identity() -> None:
    """Two GPU pools of one cluster get different custom data (their pool name) from the same steps."""
    a = render_custom_data(reference_context("gpu-node"))
    b = render_custom_data(
        BootstrapContext.for_pool(role="gpu-node", cluster_name=REFERENCE_CLUSTER, pool_name="gpu-b")
    )
    assert a.sha256 != b.sha256
    assert "GB300_POOL=gpu-b" in b.cloud_config


def test_unknown_role_names_the_known_ones() -> None:
    """Asking for a role with no fragment says which roles exist."""
    with pytest.raises(UnknownRoleError, match="role must be one of cpu-node, gpu-node, head, login"):
        render_custom_data(reference_context("compute"))


def _code_lines(text: str) -> list[str]:
    return [line for line in text.splitlines()[1:] if line.strip() and not line.lstrip().startswith("#")]


@pytest.mark.slow
@pytest.mark.parametrize("role", ROLES)
def test_custom_data_scripts_ship_as_clean_code_only(role: str, reference_raw: dict[str, Any], tmp_path: Path) -> None:
    """Each bash script the stack's custom data carries (the IMDS guard, fetch-payload) keeps every code line of the
    payload's commented copy or of its source in order, carries no comment but its directives, and passes shellcheck."""
    raw = copy.deepcopy(reference_raw)
    raw["cpuPools"] = [{"name": "prep", "count": 2}]
    cfg = config.parse(raw)
    pools = {gb300_tags.ROLE_GPU_NODE: cfg.gpu_pools[0], gb300_tags.ROLE_CPU_NODE: cfg.cpu_pools[0]}
    ctx = node_context.build(cfg, role, pools.get(role))
    bundle = bundle_for(ctx)
    sources = {f.path: f.content for f in (*bundle.files, *bundle.fetch)}
    shipped = {f["path"]: f["content"] for f in yaml.safe_load(pack_custom_data(bundle).cloud_config)["write_files"]}
    scripts = [path for path, text in shipped.items() if text.startswith("#!/usr/bin/env bash")]
    assert sorted(scripts) == sorted([paths.IMDS_GUARD, paths.FETCH_PAYLOAD])
    source_text = (CLOUD_INIT_DIR / "lib" / "fetch-payload").read_text(encoding="utf-8")
    assert _code_lines(shipped[paths.FETCH_PAYLOAD]) == _code_lines(source_text)
    shellcheck = shutil.which("shellcheck") or str(Path(sys.executable).parent / "shellcheck")
    for path in scripts:
        assert _code_lines(shipped[path]) == _code_lines(sources[path])
        comments = [line.strip() for line in shipped[path].splitlines()[1:] if line.lstrip().startswith("#")]
        assert all(c == COMPACT_NOTE or c.startswith("# shellcheck") for c in comments), comments
        target = tmp_path / path.rsplit("/", 1)[-1]
        target.write_text(shipped[path], encoding="utf-8")
        result = subprocess.run([shellcheck, str(target)], capture_output=True, text=True, check=False)
        assert result.returncode == 0, result.stdout
