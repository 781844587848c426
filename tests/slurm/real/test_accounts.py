"""A cluster many people share, on real slurmctld, slurmdbd, MariaDB and sackd (Debian trixie 24.11, sid 26.05):
accounts, QoS and fair share from the stack file (gb300:slurm.accounts, .qos, .users), which the head's own
gb300-slurm-accounts step loads with sacctmgr and Slurm enforces; and a login node (gb300:login) whose own
gb300-login-setup step starts sackd configless from the controller, from which users' Slurm commands and jobs work."""

from __future__ import annotations

import copy
import secrets
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gb300.slurm import config as slurm_config
from tests.support.real_slurm import layout
from tests.support.real_slurm.cluster import Cluster
from tests.support.real_slurm.fixtures import cluster_fixture
from tests.support.real_slurm.host import Host
from tests.support.real_slurm.root import SUITES

pytestmark = pytest.mark.slow

STEP = "/usr/local/lib/gb300/steps/gb300-slurm-accounts.sh"
ACCOUNTS_FILE = f"/etc/gb300/{slurm_config.ACCOUNTS_FILE}"
USERS = ("alice", "bob", "carol")
NODE_UNKNOWN = "erin"
"""A user of team_b on the login node and the head only: the GPU nodes have no passwd entry for her."""
SLURM: dict[str, Any] = {
    "qos": [
        {"name": "normal", "priority": 10},
        {"name": "high", "priority": 100, "preempt": ["normal"], "maxWallHours": 48, "maxGpusPerUser": 8},
    ],
    "accounts": [
        {"name": "team_a", "users": ["alice", "bob"], "fairshare": 3, "gpuLimit": 4, "qos": ["normal", "high"],
         "defaultQos": "normal"},
        {"name": "team_b", "users": ["alice", "carol", NODE_UNKNOWN], "fairshare": 1},
    ],
    "users": [{"name": "alice", "defaultAccount": "team_a"}],
}  # fmt: skip


@pytest.fixture(scope="module", params=list(SUITES), ids=[f"{s}-{v}" for s, v in SUITES.items()])
def accounts_cluster(request: pytest.FixtureRequest) -> Iterator[Cluster]:
    """The dev stack with two accounts and two QoS declared (accounting on by them) and a login node, its users on
    every host (the same uids) but erin, on the login node and the head only, and the head's gb300-slurm-accounts
    step run once."""
    for cluster in cluster_fixture(request, overrides={"slurm": SLURM}, accounting=True, login=True):
        for host in cluster.hosts:
            for uid, user in enumerate(USERS, 5001):
                host.run(["useradd", "--uid", str(uid), "--no-create-home", "--shell", "/bin/bash", user])
        assert cluster.login is not None
        for only in (cluster.head, cluster.login):
            only.run(["useradd", "--uid", "5101", "--create-home", "--shell", "/bin/bash", NODE_UNKNOWN])
        cluster.head.run(["bash", STEP], timeout=300)
        yield cluster


def _show(cluster: Cluster, *args: str) -> list[list[str]]:
    out = cluster.head.run(["sacctmgr", "-nP", "show", *args]).stdout
    return [line.split("|") for line in out.splitlines() if line]


def _sbatch(cluster: Cluster, user: str, *args: str) -> tuple[int, str]:
    """``sbatch`` as ``user`` on the head: (exit status, job id or error text)."""
    argv = ["sbatch", "--parsable", "--output=/dev/null", "--chdir=/", *args]
    done = cluster.head.run(["runuser", "-u", user, "--", *argv], check=False)
    errors = [line for line in done.stderr.splitlines() if "error" in line and "spank" not in line.lower()]
    return done.returncode, done.stdout.strip() if done.returncode == 0 else "\n".join(errors)


def _job(cluster: Cluster, job: str) -> list[str]:
    """A job's [state, reason] as squeue prints them."""
    return cluster.head.run(["squeue", "-h", "-j", job, "-o", "%T|%r"]).stdout.strip().split("|")


def _transactions(cluster: Cluster) -> int:
    return len(_show(cluster, "transactions"))


def test_slurm_conf_enforces_the_declared_accounts(accounts_cluster: Cluster) -> None:
    """Declaring accounts turns on accounting, its enforcement, GPUs as a counted resource and multifactor priority in
    the controller that runs."""
    config = accounts_cluster.scontrol("show", "config")
    assert "accounting_storage/slurmdbd" in config
    enforce = next(line for line in config.splitlines() if line.startswith("AccountingStorageEnforce"))
    assert {"associations", "limits", "qos"} <= set(enforce.split("=", 1)[1].strip().split(","))
    assert "gres/gpu" in next(line for line in config.splitlines() if line.startswith("AccountingStorageTRES"))
    assert "priority/multifactor" in next(line for line in config.splitlines() if line.startswith("PriorityType"))


def test_the_step_loads_the_declared_qos_accounts_and_users(accounts_cluster: Cluster) -> None:
    """Every declared QoS, account (share, GPU limit, QoS, default QoS) and membership is in slurmdbd as declared."""
    qos = {row[0]: row[1:] for row in _show(accounts_cluster, "qos", "format=name,priority,preempt,maxwall,maxtrespu")}
    for declared in SLURM["qos"]:
        priority, preempt, wall, per_user = qos[declared["name"]]
        assert int(priority) == declared["priority"]
        assert preempt.split(",") == (declared.get("preempt") or [""])
        assert wall == ("2-00:00:00" if declared.get("maxWallHours") == 48 else "")
        assert per_user == (f"gres/gpu={declared['maxGpusPerUser']}" if "maxGpusPerUser" in declared else "")
    names = ",".join(a["name"] for a in SLURM["accounts"])
    rows = _show(accounts_cluster, "assoc", f"account={names}", "format=account,user,share,grptres,qos,defaultqos")
    own = {row[0]: row[2:] for row in rows if not row[1]}
    members = sorted((row[0], row[1]) for row in rows if row[1])
    for declared in SLURM["accounts"]:
        share, grptres, qos_list, default_qos = own[declared["name"]]
        assert int(share) == declared["fairshare"]
        assert grptres == (f"gres/gpu={declared['gpuLimit']}" if "gpuLimit" in declared else "")
        assert sorted(qos_list.split(",")) == sorted(declared.get("qos") or ["normal"])
        assert default_qos == declared.get("defaultQos", "")
    assert members == sorted((a["name"], u) for a in SLURM["accounts"] for u in a["users"])
    defaults = dict(_show(accounts_cluster, "user", "format=user,defaultaccount"))
    assert defaults["alice"] == SLURM["users"][0]["defaultAccount"]
    assert defaults["carol"] == "team_b"


def test_fair_share_is_divided_as_declared(accounts_cluster: Cluster) -> None:
    """sshare gives each account its declared raw share and a normalised share in the declared proportion."""
    out = accounts_cluster.head.run(["sshare", "-nP", "-o", "account,user,rawshares,normshares"]).stdout
    rows = {parts[0].strip(): parts for parts in (line.split("|") for line in out.splitlines()) if not parts[1]}
    team_a, team_b = (next(a for a in SLURM["accounts"] if a["name"] == name) for name in ("team_a", "team_b"))
    assert int(rows["team_a"][2]) == team_a["fairshare"]
    assert int(rows["team_b"][2]) == team_b["fairshare"]
    ratio = float(rows["team_a"][3]) / float(rows["team_b"][3])
    assert ratio == pytest.approx(team_a["fairshare"] / team_b["fairshare"], rel=1e-3)


def test_a_job_past_the_accounts_gpu_limit_pends_with_slurms_reason(accounts_cluster: Cluster) -> None:
    """With team_a's GPUs all held by one job, a second team_a job pends with Slurm's association GPU limit reason,
    while carol's team_b job is not held by it."""
    pool = accounts_cluster.files.pool
    limit = next(a for a in SLURM["accounts"] if a["name"] == "team_a")["gpuLimit"]
    job_args = (f"--partition={pool}", "-N1", f"--gres=gpu:{limit}", "--wrap=sleep 300")
    status, first = _sbatch(accounts_cluster, "alice", "--account=team_a", *job_args)
    assert status == 0, first
    try:
        accounts_cluster.wait("the first team_a job runs", lambda: _job(accounts_cluster, first)[0] == "RUNNING")
        status, second = _sbatch(accounts_cluster, "bob", "--account=team_a", *job_args)
        assert status == 0, second
        accounts_cluster.wait(
            "the second team_a job pends on its account's GPU limit",
            lambda: _job(accounts_cluster, second) == ["PENDING", "AssocGrpGRES"],
            30,
        )
        status, other = _sbatch(accounts_cluster, "carol", "--account=team_b", *job_args)
        assert status == 0, other
        accounts_cluster.wait("carol's team_b job runs", lambda: _job(accounts_cluster, other)[0] == "RUNNING")
    finally:
        accounts_cluster.head.run(["bash", "-c", "for u in alice bob carol; do scancel -u $u; done"], check=False)


def test_a_user_in_no_account_cannot_submit(accounts_cluster: Cluster) -> None:
    """Enforced associations: a user of no declared account is refused at submission."""
    accounts_cluster.head.run(["useradd", "--no-create-home", "dave"], check=False)
    status, error = _sbatch(accounts_cluster, "dave", "--wrap=true")
    assert status != 0
    assert "Invalid account" in error


def test_running_the_step_again_changes_nothing(accounts_cluster: Cluster) -> None:
    """A second run of gb300-slurm-accounts issues no sacctmgr change: slurmdbd's transaction log does not grow."""
    before = _transactions(accounts_cluster)
    accounts_cluster.head.run(["bash", STEP], timeout=300)
    assert _transactions(accounts_cluster) == before


def _write(cluster: Cluster, path: str, text: str) -> None:
    cluster.head.run(["bash", "-c", f"printf '%s' {shlex.quote(text)} >{shlex.quote(path)}"])


def test_a_removed_user_can_no_longer_submit_after_the_step_runs_again(accounts_cluster: Cluster) -> None:
    """bob taken out of team_a (his only account), team_b's share changed and two limits dropped in the stack file:
    after the step runs on the newly rendered file bob is refused, team_b has its new share, the limits are cleared,
    and alice and carol keep their accounts."""
    status, job = _sbatch(accounts_cluster, "bob", "--account=team_a", "--hold", "--wrap=true")
    assert status == 0, job
    accounts_cluster.head.run(["scancel", job])
    changed = copy.deepcopy(SLURM)
    changed["accounts"][0]["users"] = ["alice"]
    changed["accounts"][1]["fairshare"] = 2
    del changed["accounts"][0]["gpuLimit"]
    del changed["qos"][1]["maxWallHours"]
    rendered = layout.node_bundles("dev", {"slurm": changed, "head": {"slurmdbd": True}}).head[ACCOUNTS_FILE]
    _write(accounts_cluster, ACCOUNTS_FILE, rendered.content)
    accounts_cluster.head.run(["bash", STEP], timeout=300)
    accounts_cluster.wait(
        "bob is refused", lambda: _sbatch(accounts_cluster, "bob", "--account=team_a", "--wrap=true")[0] != 0, 30
    )
    assert "Invalid account" in _sbatch(accounts_cluster, "bob", "--account=team_a", "--wrap=true")[1]
    assert [row[0] for row in _show(accounts_cluster, "user", "format=user")].count("bob") == 0
    [[share]] = _show(accounts_cluster, "assoc", "account=team_b", "user=", "format=share")
    assert int(share) == 2
    [[_, grptres]] = _show(accounts_cluster, "assoc", "account=team_a", "user=", "format=account,grptres")
    assert grptres == ""
    assert dict(_show(accounts_cluster, "qos", "format=name,maxwall"))["high"] == ""
    members = sorted(tuple(row) for row in _show(accounts_cluster, "assoc", "format=account,user") if row[1] != "root")
    assert ("team_a", "alice") in members
    assert ("team_b", "carol") in members


# -- the login node: sackd, configless, no slurmd --------------------------------------------------------------------
def _login(cluster: Cluster) -> Host:
    assert cluster.login is not None
    return cluster.login


def _as(cluster: Cluster, user: str, *argv: str) -> str:
    """``argv`` run as ``user`` on the login node; its output (fails with its error text)."""
    return _login(cluster).run(["runuser", "-u", user, "--", *argv]).stdout


def _processes(host: Host) -> list[list[str]]:
    """Every process on ``host`` as its argument vector."""
    script = 'for f in /proc/[0-9]*/cmdline; do tr "\\0" " " <"$f" 2>/dev/null; echo; done'
    return [line.split() for line in host.run(["bash", "-c", script]).stdout.splitlines() if line.strip()]


def test_the_login_node_runs_sackd_from_the_controller_and_no_slurmd(accounts_cluster: Cluster) -> None:
    """The login node has no slurm.conf of its own and runs no slurmd; sackd, started by the login step with the
    options it rendered, holds the controller's slurm.conf byte for byte, and the login node is no Slurm node."""
    login = _login(accounts_cluster)
    head = accounts_cluster.files.head_hostname
    assert login.run(["test", "-e", "/etc/slurm/slurm.conf"], check=False).returncode == 1
    programs = {Path(argv[0]).name: argv for argv in _processes(login)}
    assert "slurmd" not in programs
    assert programs["sackd"][1:] == ["-D", "--conf-server", head]
    assert login.run(["cat", "/etc/default/sackd"]).stdout.splitlines()[-1] == f'SACKD_OPTIONS="--conf-server {head}"'
    served = login.run(["cat", "/run/slurm/conf/slurm.conf"]).stdout
    assert served == accounts_cluster.head.run(["cat", "/etc/slurm/slurm.conf"]).stdout
    nodes = accounts_cluster.scontrol("show", "node", "-o")
    assert login.name not in nodes
    assert all(host.name in nodes for host in accounts_cluster.nodes)


def test_a_user_reads_the_cluster_from_the_login_node(accounts_cluster: Cluster) -> None:
    """On the login node alice's sinfo lists the pool's partition with every GPU node, and squeue answers."""
    pool = accounts_cluster.files.pool
    rows = [line.split("|") for line in _as(accounts_cluster, "alice", "sinfo", "-h", "-N", "-o", "%N|%P").split()]
    assert sorted(node for node, _ in rows) == sorted(host.name for host in accounts_cluster.nodes)
    assert {partition.rstrip("*") for _, partition in rows} == {pool}
    assert _as(accounts_cluster, "alice", "squeue", "-h", "-u", "alice", "-t", "all") is not None


def _job_from_login(cluster: Cluster, user: str, account: str, command: str) -> tuple[str, str, list[str]]:
    """``command`` as a batch job of ``user`` (``account``) submitted on the login node: (job id, the node it ran on,
    its output's lines, read on that node) once sacct says it completed."""
    out = "/var/tmp/login-job-%j.out"
    argv = ["sbatch", "--parsable", f"--partition={cluster.files.pool}", f"--account={account}", "--chdir=/",
            f"--output={out}", f"--wrap={command}"]  # fmt: skip
    job = _as(cluster, user, *argv).strip().split(";")[0]
    assert job.isdigit(), job

    def state() -> list[str]:
        rows = cluster.head.run(["sacct", "-X", "-n", "-P", "-j", job, "-o", "state,nodelist,account"])
        return rows.stdout.strip().split("|")

    cluster.wait(f"job {job} from the login node completes", lambda: state()[0] == "COMPLETED", 60)
    _, node, ran_as = state()
    assert ran_as == account
    return job, node, cluster.node(node).run(["cat", out.replace("%j", job)]).stdout.splitlines()


def test_a_job_submitted_on_the_login_node_runs_on_a_gpu_node(accounts_cluster: Cluster) -> None:
    """alice's sbatch on the login node (her team_a account) runs on a GPU node as her uid, never on the login node,
    and its output is written there."""
    login = _login(accounts_cluster)
    command = "echo $(hostname) $(id -u) $SLURM_JOB_ACCOUNT"
    job, node, written = _job_from_login(accounts_cluster, "alice", "team_a", command)
    assert node in [host.name for host in accounts_cluster.nodes]
    uid = login.run(["id", "-u", "alice"]).stdout.strip()
    assert written == [f"{node} {uid} team_a"]
    assert login.run(["test", "-e", f"/var/tmp/login-job-{job}.out"], check=False).returncode == 1


def test_a_user_the_gpu_nodes_do_not_know_runs_with_her_numbers_and_home_but_no_name(accounts_cluster: Cluster) -> None:
    """erin is known on the login node and the head only, as an Entra user is (no nss_slurm: docs/access.md, Not there
    yet): her job from the login node runs on a GPU node with her uid, gid and HOME, and the node has no passwd entry
    for her uid."""
    login = _login(accounts_cluster)
    name, _, uid, gid, _, home, _ = login.run(["getent", "passwd", NODE_UNKNOWN]).stdout.strip().split(":")
    command = "echo $(id -u) $(id -g) $HOME; getent passwd $(id -u) || echo no passwd entry"
    _, node, written = _job_from_login(accounts_cluster, name, "team_b", command)
    assert accounts_cluster.node(node).run(["getent", "passwd", name], check=False).returncode == 2
    assert written == [f"{uid} {gid} {home}", "no passwd entry"]


def test_a_reconfigure_on_the_head_reaches_the_login_node(accounts_cluster: Cluster) -> None:
    """After a change to the head's slurm.conf and `scontrol reconfigure`, sackd on the login node holds the new file:
    nothing is copied by hand."""
    login = _login(accounts_cluster)
    mark = f"# reconfigure reaches the login node {secrets.token_hex(4)}"
    accounts_cluster.head.run(["bash", "-c", f"echo {shlex.quote(mark)} >>/etc/slurm/slurm.conf"])
    accounts_cluster.scontrol("reconfigure")
    accounts_cluster.wait("slurmctld is back after reconfigure", accounts_cluster.controller_up, 60)
    accounts_cluster.wait(
        "the login node's sackd holds the new slurm.conf",
        lambda: mark in login.run(["cat", "/run/slurm/conf/slurm.conf"], check=False).stdout,
        60,
    )
    assert _as(accounts_cluster, "alice", "sinfo", "-h", "-o", "%P").strip().rstrip("*") == accounts_cluster.files.pool
