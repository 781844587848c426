"""What the reference plan's nodes boot with: the custom data on the scale sets and the head VM."""

from __future__ import annotations

import base64
import copy
import gzip
import hashlib
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from gb300 import cli, config
from gb300 import tags as gb300_tags
from gb300.azure import inventory
from gb300.facts.software import load_software
from gb300.node import custom_data
from gb300.node import custom_data as nodes
from gb300.node.bundle import Bundle
from gb300.node.pack import AZURE_CUSTOM_DATA_LIMIT
from gb300.node.payload import ACCOUNT_PLACEHOLDER
from gb300.node.secrets import find_secret_material
from gb300.ops import payload_publish
from gb300.plan import PlanResult
from tests.support import plan_custom_data
from tests.support.files import assert_golden
from tests.support.tools import CLOUD_INIT_MISSING, require_tool

GOLDEN = Path(__file__).with_name("golden")
"""The reviewed expected outputs of this file's tests (GB300_UPDATE_GOLDEN=1 rewrites them)."""

GPU_STEPS = [
    "00-imds-guard",
    "00-preflight",
    "10-tuning",
    "15-kernel",
    "20-nvidia-driver",
    "25-doca-ofed",
    "30-cuda",
    "35-nvidia-imex",
    "40-nccl",
    "45-dcgm",
    "50-containers",
    "55-hold-packages",
    "60-infiniband",
    "70-nvme-raid",
    "72-lustre",
    "73-shared-home",
    "74-blobfuse2",
    "80-fabric",
    "85-dcgm-exporter",
    "86-node-exporter",
    "87-prometheus-agent",
    "gb300-munge-key",
    "gb300-pyxis-setup",
    "gb300-slurmd-setup",
    "99-ready",
]


def _decode(custom_data: str) -> str:
    return gzip.decompress(base64.b64decode(custom_data)).decode()


def _roles(plan: PlanResult) -> dict[str, tuple[str, dict[str, Any]]]:
    """role -> (cloud-config text, tags) for one GPU rack and the head node."""
    rack = next(ss for ss in inventory.scale_sets(plan.resources) if ss.name == "ref-train-r0001")
    head = next(r for r in plan.resources if r.type == "azure-native:compute:VirtualMachine")
    return {
        "gpu-node": (_decode(rack.properties["virtualMachineProfile"]["osProfile"]["customData"]), dict(rack.tags)),
        "head": (_decode(head.inputs["osProfile"]["customData"]), head.inputs["tags"]),
    }


def _runcmd_steps(cloud_config: str) -> list[str]:
    """The steps runcmd runs through run-step (before them, the custom data runs the IMDS guard and fetches the
    payload)."""
    doc = yaml.safe_load(cloud_config)
    names = []
    for cmd in doc["runcmd"]:
        assert isinstance(cmd, list), "runcmd entries are in list form"
        if cmd in (["/usr/local/sbin/gb300-imds-guard"], ["/usr/local/lib/gb300/fetch-payload"]):
            continue
        names.append(next(arg for arg in cmd if arg[:2].isdigit() or arg.startswith("gb300-")))
    return names


def _node_text(plan: PlanResult, role: str) -> str:
    """Everything ``role``'s node receives in ``plan``: its custom data and every file of the payload it fetches."""
    doc = plan_custom_data.full_cloud_config(plan, role)
    return plan_custom_data.cloud_config(plan, role) + "".join(f["content"] for f in doc["write_files"])


@pytest.mark.slow
@pytest.mark.parametrize("role", ["gpu-node", "head"])
def test_reference_custom_data_passes_cloud_init_schema(reference_plan: PlanResult, role: str, tmp_path: Path) -> None:
    """The reference plan's custom data decodes (gzip, base64) to a cloud-config the real cloud-init accepts."""
    exe = require_tool("cloud-init", CLOUD_INIT_MISSING)
    text, _ = _roles(reference_plan)[role]
    path = tmp_path / f"{role}.yaml"
    path.write_text(text, encoding="utf-8")
    proc = subprocess.run([exe, "schema", "--config-file", str(path)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_gpu_nodes_run_every_component_step_in_order(reference_plan: PlanResult) -> None:
    """A GPU node verifies or installs the whole stack, joins Slurm, and marks itself ready last."""
    text, _ = _roles(reference_plan)["gpu-node"]
    assert _runcmd_steps(text) == GPU_STEPS


def test_head_runs_the_controller_steps(reference_plan: PlanResult) -> None:
    """The head node fetches the munge key, sets up pyxis, mounts its state disk, then slurmdbd (a no-op here) and
    slurmctld before ready."""
    steps = _runcmd_steps(_roles(reference_plan)["head"][0])
    assert steps[-6:] == [
        "gb300-munge-key",
        "gb300-pyxis-setup",
        "gb300-state-disk",
        "gb300-slurmdbd-setup",
        "gb300-slurmctld-setup",
        "99-ready",
    ]


@pytest.fixture(scope="module")
def head_with_slurmdbd(reference_raw: dict[str, Any]) -> nodes.CustomData:
    """The reference stack's head custom data with gb300:head.slurmdbd: true."""
    raw = copy.deepcopy(reference_raw)
    raw.setdefault("head", {})["slurmdbd"] = True
    return nodes.render(gb300_tags.ROLE_HEAD, config.parse(raw))


@pytest.mark.slow
def test_head_with_slurmdbd_passes_cloud_init_schema(head_with_slurmdbd: nodes.CustomData, tmp_path: Path) -> None:
    """With slurmdbd on, the head's cloud-config is still accepted by the real `cloud-init schema`."""
    exe = require_tool("cloud-init", CLOUD_INIT_MISSING)
    path = tmp_path / "head.yaml"
    path.write_text(head_with_slurmdbd.cloud_config, encoding="utf-8")
    proc = subprocess.run([exe, "schema", "--config-file", str(path)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_head_with_slurmdbd_fits_custom_data_and_holds_no_secret(head_with_slurmdbd: nodes.CustomData) -> None:
    """With slurmdbd on, the head's custom data stays under Azure's 64 KB and carries no password."""
    print(f"head with slurmdbd: custom data {head_with_slurmdbd.size} bytes base64")
    assert head_with_slurmdbd.size < AZURE_CUSTOM_DATA_LIMIT
    assert find_secret_material(head_with_slurmdbd.cloud_config) == []
    assert find_secret_material(head_with_slurmdbd.payload.cloud_config) == []
    doc = yaml.safe_load(head_with_slurmdbd.payload.cloud_config)
    [dbd] = [f for f in doc["write_files"] if f["path"] == "/etc/slurm/slurmdbd.conf"]
    assert "StoragePass" not in dbd["content"]
    assert dbd["permissions"] == "0600"


def test_head_with_slurmdbd_starts_it_before_slurmctld(head_with_slurmdbd: nodes.CustomData) -> None:
    """With slurmdbd on, the head's slurm.env turns the step on and runcmd runs it before slurmctld's setup."""
    doc = yaml.safe_load(head_with_slurmdbd.payload.cloud_config)
    [env] = [f["content"] for f in doc["write_files"] if f["path"] == "/etc/gb300/slurm.env"]
    assert "GB300_SLURMDBD=1" in env.splitlines()
    steps = _runcmd_steps(head_with_slurmdbd.cloud_config)
    assert steps.index("gb300-slurmdbd-setup") < steps.index("gb300-slurmctld-setup")


@pytest.mark.parametrize("role", ["gpu-node", "head"])
def test_custom_data_hash_tag_matches_content(reference_plan: PlanResult, role: str) -> None:
    """The gb300-custom-data-sha256 tag is the hash of the cloud-config as the config renders it (the payload
    account's name, its one deploy-time value, left as its placeholder), so a changed bootstrap shows in the plan
    and the plan's tag is the deployed one whatever the subscription."""
    text, tags = _roles(reference_plan)[role]
    account = plan_custom_data.payload_account(reference_plan)
    assert f"https://{account}.blob.core.windows.net/" in text
    rendered = text.replace(account, ACCOUNT_PLACEHOLDER)
    assert tags["gb300-custom-data-sha256"] == hashlib.sha256(rendered.encode()).hexdigest()


@pytest.mark.parametrize("role", ["gpu-node", "head"])
def test_custom_data_holds_no_vault_name_or_key(reference_plan: PlanResult, role: str) -> None:
    """The munge key and the vault's generated name never travel in custom data or the node payload; the vault
    comes from a tag."""
    _, tags = _roles(reference_plan)[role]
    text = _node_text(reference_plan, role)
    assert tags["gb300-keyvault"] not in text
    assert "GB300_KEYVAULT_NAME=" not in text  # slurm.env leaves it to the tag
    assert "munge.key" in text  # the script that fetches it is there, the key is not
    assert "BEGIN" not in text


@pytest.mark.parametrize("role", ["gpu-node", "head"])
def test_reference_cloud_config_matches_golden(
    reference_plan: PlanResult, reference_raw: dict[str, Any], role: str
) -> None:
    """The reference stack's custom data and the full cloud-config its node payload is packed from are golden
    files per role, so every change shows in review; the plan uploads exactly that payload."""
    text, _ = _roles(reference_plan)[role]
    assert_golden(GOLDEN / f"reference/{role}.custom-data.yaml", text)
    cfg = config.parse(copy.deepcopy(reference_raw))
    custom = nodes.render(role, cfg, cfg.gpu_pools[0] if role == "gpu-node" else None)
    assert plan_custom_data.payload_of(reference_plan, role)[1] == custom.payload.archive
    assert_golden(GOLDEN / f"reference/{role}.cloud-config.yaml", custom.payload.cloud_config)


def _slurm_env(custom: nodes.CustomData) -> dict[str, str]:
    doc = yaml.safe_load(custom.payload.cloud_config)
    [env] = [f["content"] for f in doc["write_files"] if f["path"] == "/etc/gb300/slurm.env"]
    return dict(line.split("=", 1) for line in env.splitlines() if "=" in line and not line.startswith("#"))


def test_every_role_installs_the_pinned_slurm_and_an_override_moves_it(reference_raw: dict[str, Any]) -> None:
    """The head and GPU nodes get versions.yaml's Slurm version (one ABI for slurmd, srun and pyxis);
    gb300:software.slurm replaces it everywhere; the head never gets the enroot pins (containers run on GPU nodes)."""
    pinned = load_software().component("slurm").version
    assert pinned
    cfg = config.parse(copy.deepcopy(reference_raw))
    head, gpu = nodes.render(gb300_tags.ROLE_HEAD, cfg), nodes.render(gb300_tags.ROLE_GPU_NODE, cfg, cfg.gpu_pools[0])
    for custom in (head, gpu):
        assert _slurm_env(custom)["GB300_SLURM_VERSION"] == pinned
    assert _slurm_env(head)["GB300_INSTALL_ENROOT"] == "0"
    assert "GB300_ENROOT_GIT" not in _slurm_env(head)
    assert _slurm_env(gpu)["GB300_ENROOT_COMMIT"] == load_software().component("enroot").git.commit  # type: ignore[union-attr]
    assert _slurm_env(gpu)["GB300_INSTALL_ENROOT"] == "1"
    raw = copy.deepcopy(reference_raw)
    raw["software"] = {"slurm": "23.11.4-1.2ubuntu5.1"}
    moved = config.parse(raw)
    assert _slurm_env(nodes.render(gb300_tags.ROLE_HEAD, moved))["GB300_SLURM_VERSION"] == "23.11.4-1.2ubuntu5.1"


def _placed(custom: nodes.CustomData, path: str) -> str:
    [content] = [f["content"] for f in yaml.safe_load(custom.payload.cloud_config)["write_files"] if f["path"] == path]
    return str(content)


def test_every_role_gets_the_open_files_limit_and_gpu_nodes_the_tuning(reference_raw: dict[str, Any]) -> None:
    """Head and GPU nodes get nofile 1048576 as Azure's image; only GPU nodes get the 2 GiB socket buffers, the
    NUMA binding and the IMEX command service."""
    cfg = config.parse(copy.deepcopy(reference_raw))
    head, gpu = nodes.render(gb300_tags.ROLE_HEAD, cfg), nodes.render(gb300_tags.ROLE_GPU_NODE, cfg, cfg.gpu_pools[0])
    for custom in (head, gpu):
        limits = _placed(custom, "/etc/security/limits.d/90-gb300.conf").splitlines()
        assert {"* soft nofile 1048576", "* hard nofile 1048576"} <= set(limits)
        assert "sunrpc.tcp_max_slot_table_entries = 128" in _placed(custom, "/etc/sysctl.d/90-gb300.conf")
    assert "net.core.rmem_max = 2147483647" in _placed(gpu, "/etc/sysctl.d/90-gb300.conf")
    assert "net.core.rmem_max" not in _placed(head, "/etc/sysctl.d/90-gb300.conf")
    assert "NUMAPolicy=bind" in _placed(gpu, "/etc/systemd/system.conf.d/90-gb300-numa.conf")
    assert "GB300_IMEX_CONFIG='IMEX_CMD_ENABLED=1 IMEX_CMD_PORT=50005'" in _placed(gpu, "/etc/gb300/node.env")


def test_gpu_nodes_pin_as_azure_pins(reference_raw: dict[str, Any]) -> None:
    """NCCL with its CUDA suffix, the driver pinning package, DCGM's proprietary packages (GEMM test), DOCA from
    the doca-host file with its sha256, and no DOCA repository to trust."""
    cfg = config.parse(copy.deepcopy(reference_raw))
    env = _placed(nodes.render(gb300_tags.ROLE_GPU_NODE, cfg, cfg.gpu_pools[0]), "/etc/gb300/versions.env")
    assert "GB300_SW_NCCL_APT_VERSION=2.29.3-1+cuda13.0" in env
    assert "nvidia-driver-pinning-580.126.20 " in env
    assert "datacenter-gpu-manager-4-proprietary datacenter-gpu-manager-4-proprietary-cuda13" in env
    assert "GB300_SW_DOCA_OFED_INSTALL=deb-repo" in env
    assert "GB300_SW_DOCA_OFED_SHA256S=0343656f130b79b7392742f9f7890fb59d6a1489fa020ccab26adc714e727b04" in env
    assert "GB300_REPO_DOCA_" not in env


# -- one render per plan: the program, the summary and the uploader read the same render (render_stack) --------


def test_one_plan_parses_the_stack_once_and_renders_each_role_once(
    monkeypatch: pytest.MonkeyPatch, dev_raw: dict[str, Any]
) -> None:
    """During one `gb300 plan --stack dev` the stack is parsed once and each role's bundle rendered once (the
    program, the summary's payload sizes and the custom data checks share it)."""
    parses: list[object] = []
    bundles: list[str] = []
    parse, bundle_for = config.parse, custom_data.bundle_for

    def counted_parse(raw: Any) -> config.StackConfig:
        parses.append(raw)
        return parse(raw)

    def counted_bundle(ctx: Any, **kwargs: Any) -> Bundle:
        bundles.append(f"{ctx.role}/{ctx.pool_name}")
        return bundle_for(ctx, **kwargs)

    monkeypatch.setattr(config, "parse", counted_parse)
    monkeypatch.setattr(custom_data, "bundle_for", counted_bundle)
    assert cli.main(["plan", "--stack", "dev", "--quiet"]) == 0
    assert len(parses) == 1
    dev = parse(copy.deepcopy(dev_raw))
    roles = [f"{gb300_tags.ROLE_HEAD}/{gb300_tags.ROLE_HEAD}"] + [
        f"{gb300_tags.ROLE_GPU_NODE}/{p.name}" for p in dev.gpu_pools
    ]
    assert sorted(bundles) == sorted(roles)


def test_the_uploader_and_the_program_read_one_render(dev_raw: dict[str, Any]) -> None:
    """Rendered twice from one config object, the stack is the same render; a new parse renders the same bytes."""
    cfg = config.parse(copy.deepcopy(dev_raw))
    first = custom_data.render_stack(cfg)
    assert custom_data.render_stack(cfg) is first
    assert payload_publish.render(cfg) == first.all
    again = custom_data.render_stack(config.parse(copy.deepcopy(dev_raw)))
    assert again is not first
    assert [(d.sha256, d.payload.sha256) for d in again.all] == [(d.sha256, d.payload.sha256) for d in first.all]
