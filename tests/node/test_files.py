"""Node side of storage and monitoring: rendered files, the step list, and the step scripts' behaviour."""

from __future__ import annotations

import copy
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import jinja2
import pytest
import yaml

from gb300 import config
from gb300 import tags as gb300_tags
from gb300.azure import inventory
from gb300.node import context as node_context
from gb300.node import custom_data as nodes
from gb300.node import files as node_files
from gb300.node import paths as node_paths
from gb300.node import steps as node_steps
from gb300.node.bundle import bundle_for
from gb300.node.file import NodeFile
from gb300.paths import CLOUD_INIT_DIR, REPO_ROOT
from gb300.plan import PlanResult

SCRIPTS = CLOUD_INIT_DIR / "scripts"
FEATURE_STEPS = [s for s in node_steps.STEPS if s.part in ("storage", "monitoring")]
OUR_SCRIPTS = [CLOUD_INIT_DIR / s.script for s in FEATURE_STEPS] + [SCRIPTS / "gb300-node-metrics"]
TAGS = {
    "gb300-lustre-mgs": "10.40.8.100",
    "gb300-blob-account": "refstbb528dd2",
    "gb300-node-client-id": "22222222-2222-2222-2222-222222222222",
    "gb300-prom-write": "https://ref-mon-dce.eastus2-1.metrics.ingest.monitor.azure.com/dataCollectionRules/dcr-1"
    "/streams/Microsoft-PrometheusMetrics/api/v1/write?api-version=2023-04-24",
}


@pytest.fixture(scope="module")
def files(reference_raw: dict[str, Any]) -> dict[str, NodeFile]:
    """The reference stack's storage and monitoring node files for a GPU node of pool 'train'."""
    cfg = config.parse(copy.deepcopy(reference_raw))
    return {f.path: f for f in _node_files(cfg, "gpu-node")}


def _node_files(cfg: config.StackConfig, role: str) -> list[NodeFile]:
    """The files the node registry gives ``role`` for stack ``cfg`` (pool 'train' for a GPU node)."""
    return list(bundle_for(node_context.build(cfg, role, cfg.gpu_pools[0]), fetch=False).files)


def _feature_steps(cfg: config.StackConfig, role: str) -> list[str]:
    """The storage and monitoring steps the node registry selects for ``role``."""
    ctx = node_context.build(cfg, role, cfg.gpu_pools[0])
    return [s.name for s in node_steps.steps_for(ctx) if s.part in ("storage", "monitoring")]


def _env(text: str) -> dict[str, str]:
    """Source an env file in bash and return the GB300_ variables it sets."""
    out = subprocess.run(
        ["bash", "-c", 'set -a; eval "$1"; env -0', "_", text], check=True, capture_output=True, text=True
    ).stdout
    pairs = (item.split("=", 1) for item in out.split("\0") if item.startswith("GB300_"))
    return dict(pairs)  # type: ignore[arg-type]


@pytest.mark.slow
def test_storage_env(files: dict[str, NodeFile]) -> None:
    """storage.env holds the Lustre mount (fsname, path, options) and the BlobFuse2 mounts, from config only."""
    env = _env(files["/etc/gb300/storage.env"].content)
    assert "GB300_LUSTRE_MGS" not in env  # a deploy-time value: the node reads its gb300-lustre-mgs tag
    assert env["GB300_LUSTRE_FSNAME"] == "lustrefs"
    assert env["GB300_LUSTRE_MOUNT"] == "/lustre"
    assert env["GB300_LUSTRE_OPTIONS"] == "noatime,flock"
    assert env["GB300_BLOB_MOUNTS"] == "datasets:/mnt/blob/datasets:ro checkpoints:/mnt/blob/checkpoints:rw"


def test_blobfuse2_config_uses_the_identity_and_block_cache(files: dict[str, NodeFile]) -> None:
    """Each mounted container gets a BlobFuse2 config in block-cache mode, authenticating with the managed identity."""
    doc = yaml.safe_load(files["/etc/gb300/blobfuse2/datasets.yaml.in"].content)
    assert "block_cache" in doc["components"]
    assert doc["read-only"] is True
    assert doc["azstorage"]["mode"] == "msi"
    assert doc["azstorage"]["appid"] == "@GB300_NODE_CLIENT_ID@"
    assert doc["azstorage"]["endpoint"] == "https://@GB300_BLOB_ACCOUNT@.blob.core.windows.net"  # flat namespace
    assert doc["azstorage"]["type"] == "block"
    assert doc["block_cache"]["path"].startswith("/mnt/resource_nvme/")
    assert not {"account-key", "sas", "spn-client-secret"} & set(doc["azstorage"])
    assert yaml.safe_load(files["/etc/gb300/blobfuse2/checkpoints.yaml.in"].content)["read-only"] is False
    unit = files["/etc/systemd/system/gb300-blobfuse2-datasets.service"].content
    assert "--config-file=/etc/gb300/blobfuse2/datasets.yaml" in unit


@pytest.mark.slow
def test_prometheus_agent_config(files: dict[str, NodeFile]) -> None:
    """The agent scrapes the local exporters and remote-writes with the node's user-assigned identity."""
    doc = yaml.safe_load(files["/etc/gb300/prometheus-agent.yml.in"].content)
    assert doc["global"]["external_labels"] == {"cluster": "ref", "pool": "train"}
    assert {job["job_name"] for job in doc["scrape_configs"]} == {"dcgm", "node"}
    (rw,) = doc["remote_write"]
    assert rw["url"] == "@GB300_PROM_WRITE_URL@"
    assert rw["azuread"]["managed_identity"]["client_id"] == "@GB300_NODE_CLIENT_ID@"
    env = _env(files["/etc/gb300/monitoring.env"].content)
    assert env["GB300_DCGM_EXPORTER_LISTEN"].endswith(":9400")


def test_the_heads_agent_scrapes_every_slurmctld_endpoint(reference_raw: dict[str, Any], tmp_path: Path) -> None:
    """The head's Prometheus agent scrapes each slurmctld metrics endpoint of data/metrics.yaml on slurmctld's port,
    the GPU nodes' agents do not, and promtool accepts the head's scrape configuration."""
    cfg = config.parse(copy.deepcopy(reference_raw))
    spec = yaml.safe_load((REPO_ROOT / "infra/gb300/data/metrics.yaml").read_text())["exporters"]["slurmctld"]
    by_role = {
        role: yaml.safe_load(
            next(f for f in _node_files(cfg, role) if f.path.endswith("prometheus-agent.yml.in")).content
        )
        for role in ("head", "gpu-node")
    }
    assert "slurmctld" not in {job["job_name"] for job in by_role["gpu-node"]["scrape_configs"]}
    (job,) = [job for job in by_role["head"]["scrape_configs"] if job["job_name"] == "slurmctld"]
    scraped = {group["labels"]["__metrics_path__"]: group["targets"] for group in job["static_configs"]}
    assert scraped == {path: [f"127.0.0.1:{spec['port']}"] for path in spec["endpoints"]}
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("no promtool (scripts/ensure-test-tools installs it)")
    checked = tmp_path / "agent.yml"
    # Without remote_write: this machine's promtool may predate its azuread block; the scrape jobs are checked.
    checked.write_text(yaml.safe_dump({k: v for k, v in by_role["head"].items() if k != "remote_write"}))
    argv = [promtool, "check", "config", "--agent", str(checked)]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_dcgm_exporter_unit_attaches_to_the_host_engine() -> None:
    """The 85-dcgm-exporter step passes --remote-hostengine-info when nvidia-dcgm runs, else runs it embedded."""
    text = (SCRIPTS / "85-dcgm-exporter.sh").read_text()
    assert "systemctl is-active --quiet nvidia-dcgm" in text
    assert "--remote-hostengine-info localhost:5555" in text


def test_templates_are_strict() -> None:
    """Templates render with StrictUndefined: a missing value is an error, never an empty string."""
    with pytest.raises(jinja2.UndefinedError):
        node_files._render("storage.env.j2", lustre={})


def test_no_files_when_pieces_are_off(reference_raw: dict[str, Any]) -> None:
    """Without Prometheus there are no monitoring files and no exporter steps; without Lustre no Lustre step."""
    raw = copy.deepcopy(reference_raw)
    off = {"enabled": False}
    raw["monitoring"] = {"prometheus": off, "grafana": off, "alerts": off}
    raw["storage"] = {}
    cfg = config.parse(raw)
    paths = {f.path for f in _node_files(cfg, "gpu-node")}
    assert not {"/etc/gb300/storage.env", "/etc/gb300/monitoring.env", node_paths.IMDS_TAG} & paths
    assert _feature_steps(cfg, "gpu-node") == []


def test_head_node_gets_no_gpu_exporter(reference_raw: dict[str, Any]) -> None:
    """The head node mounts Lustre and runs the node exporter and agent, but no DCGM exporter or BlobFuse2."""
    cfg = config.parse(copy.deepcopy(reference_raw))
    assert _feature_steps(cfg, "head") == ["72-lustre", "73-shared-home", "86-node-exporter", "87-prometheus-agent"]
    paths = {f.path for f in _node_files(cfg, "head")}
    assert f"{node_steps.STEP_DIR}/85-dcgm-exporter.sh" not in paths
    assert not [p for p in paths if "blobfuse2" in p]
    assert node_paths.IMDS_TAG in paths


@pytest.mark.parametrize("script", OUR_SCRIPTS, ids=lambda p: p.name)
def test_script_conventions(script: Path) -> None:
    """Each script is strict bash, never touches /tmp, prefixes paths with GB300_ROOT, and logs no secrets."""
    text = script.read_text()
    assert text.startswith("#!/usr/bin/env bash\n")
    assert "set -euo pipefail" in text
    assert "/tmp" not in text
    for match in re.finditer(r'"(/(?:etc|var|usr|sys|mnt)/[^"]*)"', text):
        line = text[: match.start()].rsplit("\n", 1)[-1]
        assert "${GB300_ROOT:-}" in line or "http" in line, (script.name, line)
    if script.suffix == ".sh":
        assert "record " in text
        assert os.access(script, os.X_OK)


@pytest.mark.slow
def test_scripts_pass_shellcheck() -> None:
    """shellcheck, following the bootstrap library, finds nothing in the storage and monitoring scripts."""
    shellcheck = shutil.which("shellcheck") or str(REPO_ROOT / ".venv" / "bin" / "shellcheck")
    result = subprocess.run(
        [shellcheck, "-x", "-P", str(CLOUD_INIT_DIR / "lib"), *(s.name for s in OUR_SCRIPTS)],
        capture_output=True,
        text=True,
        check=False,
        cwd=SCRIPTS,
    )
    assert result.returncode == 0, result.stdout


# --- the Lustre step in a sandbox ------------------------------------------------------------------------------


def _imds_tag_stub(root: Path, tags: dict[str, str] = TAGS) -> None:
    """A stand-in for imds-tag that answers from ``tags``."""
    stub = root / "usr/local/lib/gb300/imds-tag"
    stub.parent.mkdir(parents=True, exist_ok=True)
    cases = "".join(f"  {name}) echo {shlex.quote(value)} ;;\n" for name, value in tags.items())
    stub.write_text(f"#!/usr/bin/env bash\ncase $1 in\n{cases}  *) echo ;;\nesac\n")
    stub.chmod(0o755)


STUBS = {
    "modinfo": "exit 0",
    "mount.lustre": "exit 0",
    "modprobe": 'echo "modprobe $*" >>"$SANDBOX/calls.log"; mkdir -p "$GB300_ROOT/sys/module/$1"',
    "lfs": "exit 0",
    "mount": 'echo "mount $*" >>"$SANDBOX/calls.log"; echo "${@: -2:1} ${@: -1} lustre" >>"$SANDBOX/mounts"',
    "findmnt": (
        'mp=""; want_src=0; while [ $# -gt 0 ]; do case $1 in -M) mp=$2; shift;; -o) want_src=1; shift;; esac; '
        'shift; done; line=$(awk -v mp="$mp" \'$2 == mp\' "$SANDBOX/mounts" 2>/dev/null | head -n 1); '
        '[ -n "$line" ] || exit 1; [ "$want_src" = 1 ] && echo "${line%% *}"; exit 0'
    ),
}


def _sandbox(tmp_path: Path, storage_env: str) -> tuple[dict[str, str], Path]:
    root = tmp_path / "root"
    (root / "usr/local/lib/gb300").mkdir(parents=True)
    shutil.copy(REPO_ROOT / "cloud-init/lib/gb300-lib.sh", root / "usr/local/lib/gb300/lib.sh")
    (root / "etc/gb300").mkdir(parents=True)
    (root / "etc/gb300/storage.env").write_text(storage_env)
    (root / "etc/fstab").write_text("UUID=abc / ext4 defaults 0 1\n")
    _imds_tag_stub(root)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for name, body in STUBS.items():
        stub = bindir / name
        stub.write_text(f"#!/usr/bin/env bash\n{body}\n")
        stub.chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{bindir}:{os.environ['PATH']}",
        "GB300_ROOT": str(root),
        "SANDBOX": str(tmp_path),
        "GB300_STEP": "72-lustre",
    }
    return env, root


def _run(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(SCRIPTS / "72-lustre.sh")], env=env, capture_output=True, text=True, check=False)


@pytest.mark.slow
def test_lustre_step_mounts_once(tmp_path: Path, files: dict[str, NodeFile]) -> None:
    """72-lustre mounts <mgs>@tcp:/lustrefs with noatime,flock, adds one fstab line, and a rerun changes nothing."""
    env, root = _sandbox(tmp_path, files["/etc/gb300/storage.env"].content)
    first = _run(env)
    assert first.returncode == 0, first.stderr
    calls = (tmp_path / "calls.log").read_text()
    assert f"mount -t lustre -o noatime,flock 10.40.8.100@tcp:/lustrefs {root}/lustre" in calls
    fstab = (root / "etc/fstab").read_text()
    assert fstab.count(" /lustre lustre ") == 1
    assert "10.40.8.100@tcp:/lustrefs /lustre lustre noatime,flock,_netdev" in fstab
    done = root / "var/lib/gb300/steps/72-lustre.done"
    before = (fstab, done.read_text(), done.stat().st_mtime_ns, (root / "etc/fstab").stat().st_mtime_ns)
    second = _run(env)
    assert second.returncode == 0, second.stderr
    assert (tmp_path / "calls.log").read_text() == calls  # no second mount, no modprobe
    after = (
        (root / "etc/fstab").read_text(),
        done.read_text(),
        done.stat().st_mtime_ns,
        (root / "etc/fstab").stat().st_mtime_ns,
    )
    assert after == before


@pytest.mark.slow
def test_lustre_step_refuses_a_foreign_mount(tmp_path: Path, files: dict[str, NodeFile]) -> None:
    """When something else is mounted at the path, 72-lustre fails and says what to do."""
    env, root = _sandbox(tmp_path, files["/etc/gb300/storage.env"].content)
    (tmp_path / "mounts").write_text(f"10.9.9.9@tcp:/other {root}/lustre lustre\n")
    result = _run(env)
    assert result.returncode == 1
    assert "expected 10.40.8.100@tcp:/lustrefs" in (root / "run/gb300/reason").read_text()


@pytest.mark.slow
def test_lustre_step_without_lustre(tmp_path: Path, reference_raw: dict[str, Any]) -> None:
    """With no Lustre configured the step records that and touches nothing."""
    raw = copy.deepcopy(reference_raw)
    raw["storage"] = {}
    env, root = _sandbox(tmp_path, node_files.storage_env(config.parse(raw)))
    assert _run(env).returncode == 0
    assert not (tmp_path / "calls.log").exists()
    assert (root / "var/lib/gb300/steps/72-lustre.done").read_text() == "no Lustre filesystem configured\n"


# --- the monitoring helpers in a sandbox -----------------------------------------------------------------------


def _stub_bin(tmp_path: Path, stubs: dict[str, str]) -> Path:
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    for name, body in stubs.items():
        stub = bindir / name
        stub.write_text(f"#!/usr/bin/env bash\n{body}\n")
        stub.chmod(0o755)
    return bindir


@pytest.mark.slow
def test_node_metrics_emit_listed_metrics(tmp_path: Path, files: dict[str, NodeFile]) -> None:
    """gb300-node-metrics writes bootstrap, GPU and Lustre health as Prometheus text, only with listed metric names."""
    root = tmp_path / "root"
    (root / "etc/gb300").mkdir(parents=True)
    (root / "etc/gb300/storage.env").write_text(files["/etc/gb300/storage.env"].content)
    (root / "var/lib/gb300").mkdir(parents=True)
    (root / "var/lib/gb300/bootstrap.done").write_text("")
    gpus = "\n".join(f"GPU {i}: NVIDIA GB300 (UUID: GPU-{i})" for i in range(3))
    bindir = _stub_bin(tmp_path, {"nvidia-smi": f"printf '%s\\n' '{gpus}'", "findmnt": "exit 1"})
    env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}", "GB300_ROOT": str(root)}
    subprocess.run(["bash", str(SCRIPTS / "gb300-node-metrics")], env=env, check=True)
    text = (root / "var/lib/gb300/textfile/gb300.prom").read_text()
    samples = dict(line.split() for line in text.splitlines() if not line.startswith("#"))
    assert samples == {"gb300_bootstrap_done": "1", "gb300_gpus_visible": "3", "gb300_lustre_mounted": "0"}
    listed = yaml.safe_load((REPO_ROOT / "infra/gb300/data/metrics.yaml").read_text())["exporters"]["gb300"]["metrics"]
    assert set(samples) == set(listed)
    assert not list((root / "var/lib/gb300/textfile").glob(".*"))  # the temporary file was renamed away


@pytest.mark.slow
def test_prometheus_agent_step_labels_targets(tmp_path: Path, files: dict[str, NodeFile]) -> None:
    """87-prometheus-agent fills the remote-write target from the VM's tags and labels its scrape targets."""
    root = tmp_path / "root"
    (root / "usr/local/lib/gb300").mkdir(parents=True)
    shutil.copy(REPO_ROOT / "cloud-init/lib/gb300-lib.sh", root / "usr/local/lib/gb300/lib.sh")
    (root / "etc/gb300").mkdir(parents=True)
    (root / "etc/gb300/monitoring.env").write_text(files["/etc/gb300/monitoring.env"].content)
    (root / "etc/gb300/prometheus-agent.yml.in").write_text(files["/etc/gb300/prometheus-agent.yml.in"].content)
    _imds_tag_stub(root)
    guard = root / "usr/local/sbin/gb300-imds-guard"  # the IMDS guard (tests/test_imds_guard.py runs the real one)
    guard.parent.mkdir(parents=True)
    guard.write_text('#!/bin/sh\necho "gb300-imds-guard" >>"$SANDBOX/calls.log"\n')
    guard.chmod(0o755)
    (root / "var/lib/gb300").mkdir(parents=True)
    (root / "var/lib/gb300/fabric.json").write_text('{"ClusterUUID": "abcd-01", "CliqueId": 7, "gpus": 4}\n')
    bindir = _stub_bin(
        tmp_path,
        {
            "prometheus": "exit 0",
            "hostname": "echo ref-train-r0003-000004",
            "chown": "exit 0",
            "curl": 'case "$*" in *169.254.169.254*) echo \'{"vmScaleSetName": "ref-train-r0003"}\';; esac; exit 0',
            "systemctl": 'echo "systemctl $*" >>"$SANDBOX/calls.log"; case "$1" in is-enabled) '
            '[ "$3" = gb300-dcgm-exporter ];; *) exit 0;; esac',
        },
    )
    env = {
        **os.environ,
        "PATH": f"{bindir}:{os.environ['PATH']}",
        "GB300_ROOT": str(root),
        "SANDBOX": str(tmp_path),
        "GB300_STEP": "87-prometheus-agent",
    }
    for _ in range(2):
        result = subprocess.run(
            ["bash", str(SCRIPTS / "87-prometheus-agent.sh")], env=env, capture_output=True, text=True, check=False
        )
        assert result.returncode == 0, result.stderr
    targets = root / "etc/gb300/prometheus/targets"
    node = yaml.safe_load((targets / "node.json").read_text())
    assert node == [
        {
            "targets": ["127.0.0.1:9100"],
            "labels": {"instance": "ref-train-r0003-000004", "rack": "ref-train-r0003", "nvlink_domain": "abcd-01/7"},
        }
    ]
    assert yaml.safe_load((targets / "dcgm.json").read_text())[0]["targets"] == ["127.0.0.1:9400"]
    config_doc = yaml.safe_load((root / "etc/gb300/prometheus-agent.yml").read_text())
    assert config_doc["remote_write"][0]["url"] == TAGS["gb300-prom-write"]
    assert config_doc["remote_write"][0]["azuread"]["managed_identity"]["client_id"] == TAGS["gb300-node-client-id"]
    calls = (tmp_path / "calls.log").read_text()
    assert calls.count("reload-or-restart") == 1  # the second run found the same configuration
    assert calls.count("gb300-imds-guard") == 2  # after the package is in place, the guard lets its user through
    done = (root / "var/lib/gb300/steps/87-prometheus-agent.done").read_text()
    assert "rack ref-train-r0003, nvlink domain abcd-01/7" in done


def test_nodes_carry_deploy_time_values_as_tags(reference_plan: PlanResult) -> None:
    """Every scale set and the head node carry the tags the steps read: MGS, account, client id, remote-write URL."""
    nodes_ = [r for r in reference_plan.resources if inventory.is_scale_set(r)]
    nodes_ += [r for r in reference_plan.resources if r.type == "azure-native:compute:VirtualMachine"]
    for node in nodes_:
        tags = node.inputs["tags"]
        assert set(gb300_tags.NODE_READS) <= set(tags), node.name
        assert tags["gb300-prom-write"].startswith("https://")
        assert "/dataCollectionRules/dcr-" in tags["gb300-prom-write"]
        assert len(tags["gb300-prom-write"]) <= 256  # Azure's tag value limit
        assert re.fullmatch(r"\d+\.\d+\.\d+\.\d+", tags["gb300-lustre-mgs"])


def test_gpu_custom_data_runs_the_feature_steps(reference_raw: dict[str, Any]) -> None:
    """The GPU nodes' payload places the feature scripts and runs them before Slurm's steps and 99-ready."""
    cfg = config.parse(copy.deepcopy(reference_raw))
    custom = nodes.render(gb300_tags.ROLE_GPU_NODE, cfg, cfg.gpu_pools[0])
    doc = yaml.safe_load(custom.payload.cloud_config)
    paths = {f["path"] for f in doc["write_files"]}
    assert {s.node_path for s in FEATURE_STEPS} <= paths
    assert "/etc/gb300/prometheus-agent.yml.in" in paths
    runcmd = [" ".join(c) if isinstance(c, list) else c for c in doc["runcmd"]]
    order = [next(i for i, c in enumerate(runcmd) if name in c) for name in (
        "70-nvme-raid", "72-lustre", "80-fabric", "85-dcgm-exporter", "87-prometheus-agent", "gb300-munge-key",
        "99-ready",
    )]  # fmt: skip
    assert order == sorted(order)


def _shared_home_sandbox(tmp_path: Path, files: dict[str, NodeFile]) -> tuple[dict[str, str], Path]:
    """A node with Lustre mounted and the admin's home made locally by Azure's provisioning."""
    env, root = _sandbox(tmp_path, files["/etc/gb300/storage.env"].content)
    env["GB300_STEP"] = "73-shared-home"
    (tmp_path / "bin" / "mount").write_text(
        '#!/usr/bin/env bash\necho "mount $*" >>"$SANDBOX/calls.log"\n'
        'echo "${@: -2:1} ${@: -1} none" >>"$SANDBOX/mounts"\n'
    )
    (tmp_path / "mounts").write_text(f"10.40.8.100@tcp:/lustrefs {root}/lustre lustre\n")
    (root / "lustre").mkdir()
    ssh = root / "home/azureuser/.ssh"
    ssh.mkdir(parents=True)
    (ssh / "authorized_keys").write_text("ssh-ed25519 AAAA stack-key\n")
    return env, root


def _run_home(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    script = SCRIPTS / "73-shared-home.sh"
    return subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, check=False)


def test_home_on_lustre_outlives_the_head(tmp_path: Path, files: dict[str, NodeFile]) -> None:
    """First boot copies the admin's home into <lustre>/home and bind-mounts it at /home (one fstab line); a
    replaced head (new OS disk, a newer stack key) finds every user file there and takes the new key."""
    env, root = _shared_home_sandbox(tmp_path, files)
    first = _run_home(env)
    assert first.returncode == 0, first.stderr
    shared = root / "lustre/home"
    assert (shared / "azureuser/.ssh/authorized_keys").read_text() == "ssh-ed25519 AAAA stack-key\n"
    assert f"mount --bind {shared} {root}/home" in (tmp_path / "calls.log").read_text()
    fstab = (root / "etc/fstab").read_text()
    assert fstab.count(" /home none bind") == 1
    assert "/lustre/home /home none bind,x-systemd.requires-mounts-for=/lustre 0 0" in fstab
    # A user's work on the shared /home, then the head is replaced: a fresh OS disk with a newly provisioned key.
    (shared / "alice").mkdir()
    (shared / "alice/train.py").write_text("print('step')\n")
    (tmp_path / "mounts").write_text(f"10.40.8.100@tcp:/lustrefs {root}/lustre lustre\n")
    (root / "home/azureuser/.ssh/authorized_keys").write_text("ssh-ed25519 BBBB rotated-key\n")
    (root / "var/lib/gb300/steps/73-shared-home.done").unlink()
    second = _run_home(env)
    assert second.returncode == 0, second.stderr
    assert (shared / "alice/train.py").read_text() == "print('step')\n"
    assert (shared / "azureuser/.ssh/authorized_keys").read_text() == "ssh-ed25519 BBBB rotated-key\n"
    assert (root / "etc/fstab").read_text().count(" /home none bind") == 1


def test_home_waits_for_lustre(tmp_path: Path, files: dict[str, NodeFile]) -> None:
    """Without Lustre mounted the step fails before touching /home, naming the step that mounts it."""
    env, root = _shared_home_sandbox(tmp_path, files)
    (tmp_path / "mounts").write_text("")
    result = _run_home(env)
    assert result.returncode == 1
    assert "72-lustre must run first" in (root / "run/gb300/reason").read_text()
    assert not (root / "lustre/home").exists()
