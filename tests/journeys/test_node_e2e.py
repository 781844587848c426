"""Each shipped stack's nodes, end to end: the custom data the plan sends to Azure, run on simulated VMs.

Per stack, a head node and a GPU node boot from their own custom data (decoded from the plan), with stand-ins
only for hardware, system commands, Azure endpoints and the Slurm controller they share (tests/support/node_e2e.py).
The GPU node has exactly the mounts its stack configures. The head and a rack of GPU nodes then exchange
their data through the path the stack defines (Slurm's node records; docs/shared-path.md). The example stack
examples/custom-slurm boots the same way, its gb300:hooks running on the nodes (docs/customize.md#bootstrap-hooks).
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gb300 import config, paths
from gb300 import tags as gb300_tags
from gb300.config import stacks as gb300_stacks
from gb300.node import context as node_context
from gb300.node import imds_guard
from gb300.node import steps as node_steps
from gb300.node.bundle import bundle_for
from gb300.plan import PlanResult, run_plan
from gb300.slurm.hostlist import expand
from tests.support import node_e2e, plan_custom_data, signing
from tests.support.sandbox import Sandbox

pytestmark = pytest.mark.slow  # plans both stacks and runs every node step in sandboxes

TAGS = {
    "gb300-lustre-mgs": "10.40.8.100",
    "gb300-blob-account": "refst0001",
    "gb300-node-client-id": "22222222-2222-2222-2222-222222222222",
    "gb300-prom-write": "https://ref-mon.eastus2-1.metrics.ingest.monitor.azure.com/dataCollectionRules/dcr-1"
    "/streams/Microsoft-PrometheusMetrics/api/v1/write?api-version=2023-04-24",
    "gb300-keyvault": "kv-gb300-ref",
}
HEALTH = "/usr/local/sbin/gb300-health-check"


@dataclass
class Cluster:
    """A stack's head and first GPU node, booted from the plan's custom data, sharing one Slurm controller."""

    stack: str
    cfg: config.StackConfig
    head: node_e2e.Node
    gpu: node_e2e.Node
    slurm_state: Path
    endpoint: str
    plan: PlanResult
    azure: node_e2e.Azure

    @property
    def gpu_name(self) -> str:
        return f"{self.cfg.cluster.name}-train-r0001-000001"


def _plan(request: pytest.FixtureRequest, stack: str) -> PlanResult:
    plan: PlanResult = request.getfixturevalue(f"signed_{stack}_plan")  # nodes take only what the tests can sign
    return plan


@pytest.fixture(scope="module", params=["reference", "dev"])
def cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """The stack's head and one GPU node, each booted once from its role's custom data in the plan."""
    stack = str(request.param)
    plan = _plan(request, stack)
    cfg = config.parse(config.load_stack_file(gb300_stacks.stack_file(stack)))
    yield from _boot(stack, cfg, plan, tmp_path_factory.mktemp(f"e2e-{stack}"))


def _boot(
    stack: str, cfg: config.StackConfig, plan: PlanResult, base: Path, *, own_file: bool = True
) -> Iterator[Cluster]:
    """Boot ``plan``'s head, then its first GPU node, on one stand-in controller and one set of stand-in endpoints.
    ``own_file``: the stack is the project's ``stacks/Pulumi.<stack>.yaml`` (else its payloads are rendered from
    ``cfg`` and held to the plan's digests)."""
    slurm_state = base / "slurm.json"
    # The stand-in payload account serves exactly what the plan's upload publishes: per payload the archive, the
    # manifest and its signature (the tests' key, whose public half the test plans carry).
    blobs = plan_custom_data.published(plan, signing.key(), cfg=None if own_file else cfg)
    azure = node_e2e.Azure(tags=TAGS, blobs=blobs, payload_account=plan_custom_data.payload_account(plan))
    with node_e2e.endpoints(azure) as url:
        head = node_e2e.boot(
            base / "head",
            plan_custom_data.cloud_config(plan, gb300_tags.ROLE_HEAD),
            node_e2e.head_machine(node_context.head_hostname(cfg)),
            endpoint=url,
            slurm_state=slurm_state,
            address="10.40.1.4",
        )
        name = f"{cfg.cluster.name}-train-r0001-000001"
        gpu = node_e2e.boot(
            base / "gpu-1",
            plan_custom_data.cloud_config(plan, gb300_tags.ROLE_GPU_NODE),
            node_e2e.healthy_machine(name, "10.40.4.1"),
            endpoint=url,
            slurm_state=slurm_state,
            address="10.40.4.1",
        )
        yield Cluster(stack, cfg, head, gpu, slurm_state, url, plan, azure)


def _steps(box: Sandbox) -> list[str]:
    """The steps a node's runcmd runs through run-step (after fetch-payload)."""
    return [entry[1] for entry in box.config["runcmd"] if len(entry) == 2]


def _fetched_its_payload(cluster: Cluster, node: node_e2e.Node, role: str) -> None:
    name, data = plan_custom_data.payload_of(cluster.plan, role)
    assert node.box.config["runcmd"][1] == ["/usr/local/lib/gb300/fetch-payload"]  # after the IMDS guard
    container = cluster.cfg.storage.node_payload.container
    sha = hashlib.sha256(data).hexdigest()
    asked = [f"{container}/payloads/{name}/manifest.json", f"{container}/payloads/{name}/manifest.json.sig"]
    assert {*asked, f"{container}/archives/{sha}.tar.gz"} <= set(cluster.azure.blob_requests)
    assert node.box.read("/var/lib/gb300/payload.sha256").strip() == hashlib.sha256(data).hexdigest()
    # Every file of the payload is on the node, as the plan would upload it.
    full = plan_custom_data.full_cloud_config(cluster.plan, role)
    for entry in full["write_files"]:
        assert node.box.read(entry["path"]) == entry["content"], entry["path"]


def test_head_reaches_ready(cluster: Cluster) -> None:
    """The head node fetches its node payload from the Blob endpoint, runs every step and ends ready."""
    assert cluster.head.run.ok, cluster.head.run.output[-2000:]
    assert "trying again" not in cluster.head.run.output, "a step failed on a healthy head and was retried"
    assert cluster.head.status()["state"] == "ready"
    _fetched_its_payload(cluster, cluster.head, gb300_tags.ROLE_HEAD)
    for step in _steps(cluster.head.box):
        assert cluster.head.box.path(f"/var/lib/gb300/steps/{step}.done").is_file(), step


def test_gpu_node_reaches_ready_and_is_not_drained(cluster: Cluster) -> None:
    """A healthy GPU node with exactly its stack's mounts fetches its payload, ends ready, passes the health gate,
    and is not drained."""
    assert cluster.gpu.run.ok, cluster.gpu.run.output[-2000:]
    # run-step retries a failed step (30 s later): on a healthy node every step succeeds the first time.
    assert "trying again" not in cluster.gpu.run.output, "a step failed on a healthy GPU node and was retried"
    assert cluster.gpu.status()["state"] == "ready"
    _fetched_its_payload(cluster, cluster.gpu, gb300_tags.ROLE_GPU_NODE)
    for step in _steps(cluster.gpu.box):
        assert cluster.gpu.box.path(f"/var/lib/gb300/steps/{step}.done").is_file(), step
    assert cluster.gpu.box.read("/var/lib/gb300/health/boot.result") == "pass\n"
    periodic = node_e2e.run_tool(cluster.gpu.box, HEALTH)
    assert periodic.returncode == 0, periodic.stdout + periodic.stderr
    record = node_e2e.slurm_nodes(cluster.slurm_state)[cluster.gpu_name]
    assert "DRAIN" not in record["State"]
    assert record["Reason"] == ""


def test_every_role_closes_imds_before_anything_else_changes_the_node(cluster: Cluster) -> None:
    """On the head and a GPU node, the custom data runs the IMDS guard before it fetches anything: its table is
    loaded before any other command changes the machine and lets through root and the agents' users the image has
    (no one else); the guard's step, first of the steps, enables the boot unit."""
    for node in (cluster.head, cluster.gpu):
        # The custom data's own copy of the guard runs before the payload is fetched; its step runs first of all.
        assert node.box.config["runcmd"][0] == [imds_guard.GUARD]
        assert _steps(node.box)[0] == node_steps.GUARD_STEP
        changes = [c for c in node.box.calls() if c.startswith("MUTATE")]
        assert changes[0] == "MUTATE nft -f -", changes[:3]
        state = node.box.state()
        users = state["users"]
        uids = ["0", *(str(users[u]) for u in imds_guard.allowed_users(cluster.cfg) if u in users)]
        assert len(uids) == 3  # root, syslog (Azure Monitor Agent) and prometheus on both shipped stacks
        [rules] = state["nft_loads"]  # loaded once: 87-prometheus-agent's second run of the guard changes nothing
        assert f"ip daddr {imds_guard.address()} meta skuid != {{ {', '.join(uids)} }} reject" in rules
        assert state["services"]["gb300-imds-guard"]["enabled"]


def test_health_gate_checks_exactly_the_configured_mounts(cluster: Cluster) -> None:
    """The GPU node's health gate requires the NVMe scratch plus the stack's Lustre and Blob mounts, nothing else."""
    env = cluster.gpu.box.read("/etc/gb300/health.env")
    [line] = [x for x in env.splitlines() if x.startswith("GB300_MOUNTS=")]
    wanted = ["/mnt/resource_nvme"]  # data/node.yaml's NVMe mount point, on every GPU node
    if cluster.cfg.storage.lustre is not None:
        wanted.append(cluster.cfg.storage.lustre.mount_path)
    if cluster.cfg.storage.blob is not None:
        wanted += [c.mount_path for c in cluster.cfg.storage.blob.containers if c.mount_path]
    assert line.split("=", 1)[1].strip("'").split() == wanted
    assert "/shared" not in cluster.gpu.box.read("/etc/gb300/health.env")


def test_a_missing_configured_mount_drains_the_node_naming_it(cluster: Cluster, tmp_path: Path) -> None:
    """With any one configured mount gone (a soft check), the health gate drains the node after
    softFailuresToDrain runs in a row, with a reason that names the check and that mount."""
    runs = cluster.cfg.health.soft_failures_to_drain
    mounts = node_context.health_mounts(node_context.build(cluster.cfg, "gpu-node", cluster.cfg.gpu_pools[0]))
    assert mounts
    for i, mount in enumerate(mounts):
        slurm_state = tmp_path / f"slurm-{i}.json"
        shutil.copy(cluster.slurm_state, slurm_state)
        node = node_e2e.clone(cluster.gpu.box, tmp_path / f"gpu-{i}", cluster.gpu_name, "10.40.4.1", slurm_state)
        table = node.path("/proc/mounts")
        table.write_text("".join(x + "\n" for x in table.read_text().splitlines() if x.split()[1] != mount))
        for _ in range(runs - 1):
            assert node_e2e.run_tool(node, HEALTH).returncode == 0, mount
            assert "DRAIN" not in node_e2e.slurm_nodes(slurm_state)[cluster.gpu_name]["State"]
        result = node_e2e.run_tool(node, HEALTH)
        assert result.returncode == 1, mount
        record = node_e2e.slurm_nodes(slurm_state)[cluster.gpu_name]
        assert "DRAIN" in record["State"]
        assert record["Reason"] == f"gb300: mounts: {mount} not mounted (failed {runs} runs in a row)"


def _scontrol(box: Sandbox, *args: str) -> str:
    out = subprocess.run(["scontrol", *args], env=box.env(), capture_output=True, text=True, check=True)
    return out.stdout


@dataclass
class Rack:
    """The head and a full rack of 18 GPU nodes (clones of the booted one) on one stand-in Slurm controller."""

    head: Sandbox
    prefix: str
    nodes: list[Sandbox]
    slurm_state: Path


def _register(cluster: Cluster, base: Path, name: str, address: str, slurm_state: Path) -> Sandbox:
    """A GPU VM of the rack (same image and custom data, own name and address) whose slurmd registers."""
    twin = node_e2e.clone(cluster.gpu.box, base, name, address, slurm_state)
    setup = subprocess.run(
        [str(twin.path("/usr/local/lib/gb300/run-step")), "gb300-slurmd-setup"],
        env=twin.env(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert setup.returncode == 0, setup.stdout + setup.stderr
    return twin


def _rack(cluster: Cluster, tmp_path: Path) -> Rack:
    slurm_state = tmp_path / "slurm.json"
    shutil.copy(cluster.slurm_state, slurm_state)
    head_name = node_context.head_hostname(cluster.cfg)
    head = node_e2e.clone(cluster.head.box, tmp_path / "head", head_name, "10.40.1.4", slurm_state)
    prefix = f"{cluster.cfg.cluster.name}-train-r0001-"
    nodes = [node_e2e.clone(cluster.gpu.box, tmp_path / "gpu-1", f"{prefix}000001", "10.40.4.1", slurm_state)]
    for i in range(2, 19):  # the other 17 VMs of the rack
        nodes.append(_register(cluster, tmp_path / f"gpu-{i}", f"{prefix}{i:06d}", f"10.40.4.{i}", slurm_state))
    return Rack(head, prefix, nodes, slurm_state)


@pytest.fixture(scope="module")
def registered_rack(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Rack:
    """The stack's rack, its 17 other VMs registered once (each runs gb300-slurmd-setup); tests take a copy."""
    return _rack(cluster, tmp_path_factory.mktemp(f"rack-{cluster.stack}"))


def _copy_rack(rack: Rack, tmp_path: Path) -> Rack:
    """A copy of ``rack`` (every disk and the controller's records) for one test to change."""
    slurm_state = tmp_path / "slurm.json"
    shutil.copy(rack.slurm_state, slurm_state)

    def twin(box: Sandbox, name: str) -> Sandbox:
        state = box.state()
        return node_e2e.clone(box, tmp_path / name, state["hostname"], state["address"], slurm_state)

    nodes = [twin(node, f"gpu-{i}") for i, node in enumerate(rack.nodes, start=1)]
    return Rack(twin(rack.head, "head"), rack.prefix, nodes, slurm_state)


def test_head_and_a_rack_exchange_fabric_identity_and_imex_nodes(registered_rack: Rack, tmp_path: Path) -> None:
    """A rack of GPU nodes publishes its NVLink identity; the head's topology refresh writes the rack's block,
    and the IMEX prolog on a node writes the job's node addresses."""
    rack = _copy_rack(registered_rack, tmp_path)
    head, prefix, nodes = rack.head, rack.prefix, rack.nodes

    fabric = json.loads(nodes[0].read("/var/lib/gb300/fabric.json"))
    seen = _scontrol(head, "show", "node", "-o", f"{prefix}000001")
    assert f" Extra=gb300-nvlink:{fabric['ClusterUUID']}:{fabric['CliqueId']} " in seen + " "

    refresh = node_e2e.run_tool(head, "/usr/local/sbin/gb300-topology-refresh")
    assert refresh.returncode == 0, refresh.stdout + refresh.stderr
    topology = head.read("/etc/slurm/topology.conf")
    [block] = [line for line in topology.splitlines() if line.startswith("BlockName=")]
    assert expand(block.split("Nodes=", 1)[1]) == [f"{prefix}{i:06d}" for i in range(1, 19)]
    assert "\nTopologyPlugin=topology/block\n" in head.read("/etc/slurm/slurm.conf")

    job = {
        "SLURM_JOB_ID": "42",
        "SLURM_JOB_NODELIST": f"{prefix}[000001-000004]",
        "SLURM_JOB_UID": str(os.geteuid()),  # one this process may hand a directory to, root or not
        "SLURM_JOB_GID": str(os.getegid()),
        "GB300_IMEX_TIMEOUT": "2",
    }
    prolog = node_e2e.run_tool(nodes[0], "/usr/local/sbin/gb300-imex-prolog", env=job)
    assert prolog.returncode == 0, prolog.stdout + prolog.stderr
    assert nodes[0].read("/etc/nvidia-imex/nodes_config.cfg") == "".join(f"10.40.4.{i}\n" for i in range(1, 5))
    cache = nodes[0].path(f"/mnt/resource_nvme/enroot/cache/user-{os.geteuid()}")  # the job user's own cache
    assert (cache.stat().st_uid, cache.stat().st_mode & 0o777) == (os.geteuid(), 0o700)


def _stop_responding(slurm_state: Path, *names: str) -> None:
    """What slurmctld records when it no longer hears from these nodes' slurmd: DOWN and NOT_RESPONDING."""
    slurm = json.loads(slurm_state.read_text())
    for name in names:
        slurm["nodes"][name]["State"] = "DOWN+DYNAMIC_NORM+NOT_RESPONDING"
    slurm_state.write_text(json.dumps(slurm))


def _refresh(head: Sandbox) -> None:
    result = node_e2e.run_tool(head, "/usr/local/sbin/gb300-topology-refresh")
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_replaced_instance_record_is_deleted_and_a_rebooting_node_is_kept(
    cluster: Cluster, registered_rack: Rack, tmp_path: Path
) -> None:
    """VM 5 of a rack is replaced by a new instance (new name) while VM 7 reboots (same name): once the rack's
    records show which is gone, the head's periodic refresh deletes VM 5's record only, and the rack's block
    holds the new instance."""
    rack = _copy_rack(registered_rack, tmp_path)
    old, rebooting, new = f"{rack.prefix}000005", f"{rack.prefix}000007", f"{rack.prefix}00000i"
    _stop_responding(rack.slurm_state, old, rebooting)
    _refresh(rack.head)  # 18 records for 18 VMs: either could be rebooting
    assert {old, rebooting} <= set(node_e2e.slurm_nodes(rack.slurm_state))

    _register(cluster, tmp_path / "gpu-new", new, "10.40.4.19", rack.slurm_state)
    _refresh(rack.head)  # 19 records, 1 surplus, 2 silent: which one is gone cannot be told yet
    assert {old, rebooting, new} <= set(node_e2e.slurm_nodes(rack.slurm_state))

    back = subprocess.run(["systemctl", "restart", "slurmd"], env=rack.nodes[6].env(), check=False)
    assert back.returncode == 0  # VM 7 is up again: its slurmd registers under its own name
    _refresh(rack.head)

    records = node_e2e.slurm_nodes(rack.slurm_state)
    assert old not in records
    assert new in records
    assert "NOT_RESPONDING" not in records[rebooting]["State"]
    assert old not in _scontrol(rack.head, "show", "node", "-o")
    [block] = [x for x in rack.head.read("/etc/slurm/topology.conf").splitlines() if x.startswith("BlockName=")]
    members = expand(block.split("Nodes=", 1)[1])
    assert new in members
    assert old not in members
    assert len(members) == 18
    assert f"deleted the Slurm record of replaced instance {old}" in (rack.head.base / "journal.log").read_text()


def test_reference_custom_data_stays_under_8_kb(reference_plan: PlanResult) -> None:
    """Each role's custom data in the reference plan is at most 8 KB of base64: the node payload carries the rest."""
    sizes = {role: len(data) for role, data in plan_custom_data.encoded_custom_data(reference_plan).items()}
    assert set(sizes) == {"gpu-node", "head"}
    print(f"custom data bytes (base64): {sizes}")
    print(f"node payload bytes (gzip): { {r: len(plan_custom_data.payload_of(reference_plan, r)[1]) for r in sizes} }")
    assert max(sizes.values()) <= 8 * 1024, sizes


# --- gb300:hooks on booted nodes: examples/custom-slurm's three hooks, then one that hangs and one that fails ---

EXAMPLE = paths.REPO_ROOT / "examples" / "custom-slurm" / "Pulumi.custom.yaml"
# name -> (script, the stack entry's other keys); they run after the example's own afterHealthGate hook
OUR_HOOKS: dict[str, tuple[str, dict[str, Any]]] = {
    "stuck": ("#!/usr/bin/env bash\necho stuck starts\nsleep 600\necho stuck ends\n",
              {"timeoutSeconds": 1, "onFailure": "warn"}),
    "site-check": ("#!/usr/bin/env bash\necho site check failed >&2\nexit 3\n", {"onFailure": "drain"}),
}  # fmt: skip


@pytest.fixture(scope="module")
def hooked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """examples/custom-slurm's head and first GPU node, booted once from the plan of the example stack (the tests'
    signing key) with two afterHealthGate hooks of ours after its own three: ``stuck`` sleeps past its 1 s timeout
    (onFailure warn), ``site-check`` exits 3 (onFailure drain). The scripts are read from a repository of the test's
    own holding a copy of examples/hooks and ours (GB300_HOOK_ROOT)."""
    repo = tmp_path_factory.mktemp("hook-repo")
    shutil.copytree(paths.REPO_ROOT / "examples" / "hooks", repo / "examples" / "hooks")
    raw = signing.with_test_key(config.load_stack_file(EXAMPLE))
    raw["hooks"] = list(raw["hooks"])
    for name, (script, keys) in OUR_HOOKS.items():
        path = repo / "hooks" / f"{name}.sh"
        path.parent.mkdir(exist_ok=True)
        path.write_text(script, encoding="utf-8")
        path.chmod(0o755)
        raw["hooks"].append({"name": name, "script": f"hooks/{name}.sh", "point": "afterHealthGate", **keys})
    with pytest.MonkeyPatch.context() as env:
        env.setenv("GB300_HOOK_ROOT", str(repo))
        plan = run_plan("custom", copy.deepcopy(raw))
        cfg = config.parse(raw)
        yield from _boot("custom", cfg, plan, tmp_path_factory.mktemp("e2e-hooks"), own_file=False)


def _journal(node: node_e2e.Node) -> list[str]:
    """The node's journal lines, ``<tag>: <line>`` (the logger stand-in's)."""
    return (node.box.base / "journal.log").read_text().splitlines()


def test_the_example_stacks_hooks_run_on_the_booted_nodes(hooked: Cluster) -> None:
    """On the GPU node the example's beforeSlurm hook runs before slurmd registers and its afterHealthGate hook after,
    each with the documented environment and its output in the step log; the head runs its afterHealthGate hook too
    and ends ready."""
    journal = _journal(hooked.gpu)
    pool, name = hooked.cfg.gpu_pools[0].name, hooked.cfg.cluster.name
    warm = f"gb300-hook-warm-cache: warming the dataset cache on gpu-node node of pool {pool} (rack 1)"
    agent = f"gb300-hook-site-agent: site agent for cluster {name}: node passed its health gate"
    registered = next(i for i, line in enumerate(journal) if line.startswith("gb300-gb300-slurmd-setup: "))
    assert journal.index(warm) < registered < journal.index(agent)
    # run-step keeps each step's output under the step's tag (journalctl -t gb300-<step>): the hooks' lines are there.
    assert f"gb300-gb300-hooks-before-slurm: <{warm.replace(': ', '> ', 1)}" in journal
    assert f"gb300-gb300-hooks-after-gate: <{agent.replace(': ', '> ', 1)}" in journal
    assert "gb300-hook-job-audit" not in "\n".join(journal)  # a prolog hook: it waits for a job

    head = _journal(hooked.head)
    assert agent in head
    assert not [line for line in head if line.startswith("gb300-hook-warm-cache")]  # roles: gpu-node only
    assert hooked.head.run.ok, hooked.head.run.output[-2000:]
    assert hooked.head.status()["state"] == "ready"


def test_a_failing_drain_hook_drains_the_booted_node_naming_it(hooked: Cluster) -> None:
    """A hook with onFailure drain that exits non-zero leaves the booted GPU node drained in Slurm with a reason
    naming the hook; its step fails once, with a reason (not retried as a transient failure), and the node never
    reports ready."""
    record = node_e2e.slurm_nodes(hooked.slurm_state)[hooked.gpu_name]
    assert "DRAIN" in record["State"]
    assert record["Reason"] == "gb300-hook: site-check exited with status 3"
    status = hooked.gpu.status()
    assert (status["state"], status["step"]) == ("failed", "gb300-hooks-after-gate")
    assert status["reason"].startswith("a gb300:hooks afterHealthGate hook failed")
    assert not hooked.gpu.box.path("/var/lib/gb300/bootstrap.done").exists()
    journal = _journal(hooked.gpu)
    assert journal.count("gb300-hook-site-check: site check failed") == 1  # run once, not again by a retry
    assert "trying again" not in hooked.gpu.run.output


def test_a_hanging_hook_is_killed_at_its_timeout_on_the_booted_node(hooked: Cluster) -> None:
    """A hook that sleeps past its 1 s timeout is killed then, with a warning naming it (onFailure warn), and the
    hook after it still runs."""
    journal = _journal(hooked.gpu)
    assert "gb300-hook-stuck: stuck starts" in journal
    assert "gb300-hook-stuck: stuck ends" not in journal
    killed = "gb300-hook-stuck: WARNING: hook stuck (afterHealthGate) killed at its timeout of 1s; on failure: warn"
    assert journal.index(f"{killed}, going on") < journal.index("gb300-hook-site-check: site check failed")


def test_the_example_heads_custom_slurm_settings_come_from_its_payload(hooked: Cluster) -> None:
    """The example's head, booted from its custom data on a fresh OS disk (what a reimage runs again), has the stack's
    gb300:slurm settings and extra partitions in /etc/slurm/slurm.conf exactly as gb300 renders them into the signed
    payload: nothing on the head is edited by hand, so nothing is lost when it is reimaged."""
    conf = hooked.head.box.read("/etc/slurm/slurm.conf")
    rendered = bundle_for(node_context.build(hooked.cfg, gb300_tags.ROLE_HEAD), fetch=False)
    assert conf == next(f.content for f in rendered.files if f.path == "/etc/slurm/slurm.conf")
    lines = conf.splitlines()
    for key, value in hooked.cfg.slurm.settings.items():
        assert f"{key}={'YES' if value is True else value}" in lines, key
    for partition in hooked.cfg.slurm.partitions:
        assert any(line.startswith(f"PartitionName={partition.name} ") for line in lines), partition.name
