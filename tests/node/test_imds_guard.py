"""The IMDS guard the plan's custom data installs, run for real: in a fresh network namespace with a stand-in
metadata service on 169.254.169.254, the exact guard script from each role's custom data lets root and the
allowed service users through and refuses every other user, at once.

Needs root (or passwordless sudo), ``unshare``, ``setpriv``, ``curl`` and Debian's ``nft``
(scripts/ensure-test-tools installs it). Without root or sudo the namespace tests skip, saying so, except under CI
(``CI`` set), where they fail; with them, a missing tool or a namespace that cannot be created fails the test.
The WireServer test does the same for 168.63.129.16 (root everywhere, others DNS only) and shows that a flushed
ruleset or chain is put back by the next run of the guard, which the timer makes every ``recheck_seconds``.
"""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from gb300 import config
from gb300 import tags as gb300_tags
from gb300.errors import BootstrapError, ConfigError
from gb300.node import context as node_context
from gb300.node import imds_guard
from gb300.node import steps as node_steps
from gb300.node.custom_data import render_custom_data
from gb300.plan import PlanResult
from tests.support import netns, plan_custom_data

ADDRESS = "169.254.169.254"
IMDS_PATH = "/metadata/identity/oauth2/token?api-version=2018-02-01&resource=https%3A%2F%2Fvault.azure.net"
PROMETHEUS_UID = 901  # what the node's passwd says in these tests (the package picks a free system uid)
NOBODY = 65534
NAMESPACE_TOOLS = ("unshare", "setpriv", "curl", "nft", "ip")


def _custom_data_file(plan: PlanResult, role: str, path: str) -> str:
    files = yaml.safe_load(plan_custom_data.cloud_config(plan, role))["write_files"]
    return str(next(f["content"] for f in files if f["path"] == path))


def _node_file(plan: PlanResult, role: str, path: str) -> str:
    """A file of ``role``'s node once its payload is laid out (the guard's units come with the payload)."""
    files = plan_custom_data.full_cloud_config(plan, role)["write_files"]
    return str(next(f["content"] for f in files if f["path"] == path))


def _namespace(driver: str, guard: str, work: Path, timeout: int) -> dict[str, list[str]]:
    """``driver`` run with ``guard`` at ``$WORK/guard`` in fresh namespaces, cut into its phases."""
    (work / "guard").write_text(guard)
    (work / "guard").chmod(0o755)
    work.chmod(0o755)  # the uids the requests run as need to reach nothing here, but curl's cwd must be readable
    env = {"WORK": str(work), "PATH": f"{os.environ['PATH']}:/usr/sbin:/sbin"}
    proc = netns.run(driver, env, work, timeout, tools=NAMESPACE_TOOLS, skip_outside_ci=True)
    if proc.returncode != 0:
        pytest.fail(f"the namespace test could not run (exit {proc.returncode}): {proc.stderr.strip()[-800:]}")
    return netns.phases(proc.stdout)


# In a fresh network namespace: loopback up, IMDS's address on it, an HTTP server answering 200 there (as
# root, like Azure's service answers from outside the VM's users), then the guard, then one request per uid.
DRIVER = textwrap.dedent(
    """\
    set -euo pipefail
    ip link set lo up
    ip addr add {address}/32 dev lo
    python3 -c '
    import http.server
    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200); self.end_headers(); self.wfile.write(b"token")
        def log_message(self, *a): pass
    http.server.HTTPServer(("{address}", 80), H).serve_forever()
    ' &
    trap 'kill $!' EXIT
    for _ in $(seq 100); do curl -s -o /dev/null "http://{address}/" && break; sleep 0.1; done
    ask() {{
      for uid in "$@"; do
        code=$(setpriv --reuid "$uid" --regid "$uid" --clear-groups \\
          curl -s -o /dev/null -w '%{{http_code}}' --max-time 5 -H Metadata:true "http://{address}{path}") || true
        echo "uid $uid: $code"
      done
    }}
    ask {uids}
    PATH="$WORK/before:$PATH" GB300_ROOT="$WORK/root" "$WORK/guard"
    echo "-- guarded"
    ask {uids}
    PATH="$WORK/after:$PATH" GB300_ROOT="$WORK/root" "$WORK/guard"
    echo "-- again"
    ask {uids}
    echo "-- table"
    nft list table inet gb300_imds
    """
)


def _getent(directory: Path, users: dict[str, int]) -> None:
    """A ``getent passwd NAME`` that answers from ``users`` (the node's passwd, not this machine's)."""
    directory.mkdir()
    cases = "".join(
        f"  {name}) echo '{name}:x:{uid}:{uid}::/nonexistent:/usr/sbin/nologin';;\n" for name, uid in users.items()
    )
    script = directory / "getent"
    script.write_text(f'#!/bin/sh\n[ "$1" = passwd ] || exit 2\ncase "$2" in\n{cases}  *) exit 2;;\nesac\n')
    script.chmod(0o755)


def _run_in_namespace(guard: str, work: Path, *, before: dict[str, int], after: dict[str, int]) -> dict[str, list[str]]:
    """Run DRIVER with ``guard``; the node's users are ``before`` at the first run of the guard, ``after`` at the
    second. Returns the answers per phase (``uid N: CODE`` lines) and the loaded table."""
    _getent(work / "before", before)
    _getent(work / "after", after)
    uids = " ".join(str(u) for u in (0, NOBODY, PROMETHEUS_UID))
    phases = _namespace(DRIVER.format(address=ADDRESS, path=IMDS_PATH, uids=uids), guard, work, timeout=120)
    answers = {phase: [x for x in lines if x.startswith("uid ")] for phase, lines in phases.items() if phase != "table"}
    return {**answers, "table": phases["table"]}


@pytest.mark.parametrize("role", [gb300_tags.ROLE_GPU_NODE, gb300_tags.ROLE_HEAD])
def test_the_plans_guard_refuses_a_non_root_user_and_lets_root_and_the_agent_through(
    reference_plan: PlanResult, role: str, tmp_path: Path
) -> None:
    """With the guard from the role's own custom data applied, root and the Prometheus agent's user get their
    token (200) and nobody (uid 65534) is refused without an answer; before the guard, everyone got one."""
    guard = _custom_data_file(reference_plan, role, imds_guard.GUARD)
    users = {"prometheus": PROMETHEUS_UID}
    phases = _run_in_namespace(guard, tmp_path, before=users, after=users)
    assert phases["open"] == ["uid 0: 200", f"uid {NOBODY}: 200", f"uid {PROMETHEUS_UID}: 200"]
    assert phases["guarded"] == ["uid 0: 200", f"uid {NOBODY}: 000", f"uid {PROMETHEUS_UID}: 200"]
    assert phases["again"] == phases["guarded"]
    assert any(f"ip daddr {ADDRESS} meta skuid != {{ 0, {PROMETHEUS_UID} }} reject" in x for x in phases["table"])


def test_an_agent_user_created_after_the_first_boot_step_is_let_through_when_the_guard_runs_again(
    reference_plan: PlanResult, tmp_path: Path
) -> None:
    """At the first step the prometheus user does not exist yet (its package comes in 87-prometheus-agent), so
    only root passes; once the user exists, running the guard again (as that step does) lets it through."""
    guard = _custom_data_file(reference_plan, gb300_tags.ROLE_GPU_NODE, imds_guard.GUARD)
    phases = _run_in_namespace(guard, tmp_path, before={}, after={"prometheus": PROMETHEUS_UID})
    assert phases["guarded"] == ["uid 0: 200", f"uid {NOBODY}: 000", f"uid {PROMETHEUS_UID}: 000"]
    assert phases["again"] == ["uid 0: 200", f"uid {NOBODY}: 000", f"uid {PROMETHEUS_UID}: 200"]
    step = Path(node_steps.CLOUD_INIT_DIR, "scripts/87-prometheus-agent.sh").read_text()
    assert step.index(imds_guard.GUARD) > step.index("apt-get install")


def test_the_boot_unit_runs_the_guard_before_the_network_at_every_boot(
    reference_plan: PlanResult, tmp_path: Path
) -> None:
    """Every role carries gb300-imds-guard.service: early (no default dependencies), before network-pre.target,
    pulled in by sysinit.target, running the guard the custom data places (the unit comes with the payload);
    systemd-analyze verify accepts it."""
    for role in (gb300_tags.ROLE_GPU_NODE, gb300_tags.ROLE_HEAD):
        unit = _node_file(reference_plan, role, imds_guard.UNIT)
        lines = unit.splitlines()
        assert {
            "DefaultDependencies=no",
            "Before=network-pre.target shutdown.target",
            "Wants=network-pre.target",
        } <= set(lines)
        assert {
            "Type=oneshot",
            "RemainAfterExit=yes",
            f"ExecStart={imds_guard.GUARD}",
            "WantedBy=sysinit.target",
        } <= set(lines)
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        return
    root = tmp_path / "root"
    guard = root / imds_guard.GUARD.lstrip("/")
    guard.parent.mkdir(parents=True)
    guard.write_text(_custom_data_file(reference_plan, gb300_tags.ROLE_HEAD, imds_guard.GUARD))
    guard.chmod(0o755)
    unit_file = root / imds_guard.UNIT.lstrip("/")
    unit_file.parent.mkdir(parents=True)
    unit_file.write_text(unit)
    proc = subprocess.run(
        [analyze, "verify", f"--root={root}", "--man=no", imds_guard.UNIT],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "gb300-imds-guard.service:" not in proc.stdout + proc.stderr  # systemd's warnings on a unit exit 0


def _cfg(raw: dict[str, Any], **access: Any) -> config.StackConfig:
    raw = copy.deepcopy(raw)
    raw["access"] = {**raw["access"], **access}
    return config.parse(raw)


def test_allowed_users_follow_the_agents_the_stack_installs(reference_raw: dict[str, Any]) -> None:
    """The Prometheus agent's user with Prometheus on, the Azure Monitor Agent's users with logs on, neither when
    both are off; gb300:access.imdsAllowedUsers comes after them."""
    cfg = config.parse(copy.deepcopy(reference_raw))
    assert cfg.monitoring.prometheus.enabled
    assert cfg.monitoring.logs.enabled
    assert imds_guard.allowed_users(cfg) == ("prometheus", "syslog", "azuremetricsext")
    raw = copy.deepcopy(reference_raw)
    raw["monitoring"] = {part: {"enabled": False} for part in ("prometheus", "logs", "grafana", "alerts")}
    assert imds_guard.allowed_users(config.parse(raw)) == ()
    assert imds_guard.allowed_users(_cfg(reference_raw, imdsAllowedUsers=["telegraf"]))[-1] == "telegraf"


def test_an_allowed_user_from_the_stack_reaches_the_rendered_guard(reference_raw: dict[str, Any]) -> None:
    """gb300:access.imdsAllowedUsers lands in both roles' guard scripts; the other role's files do not change."""
    cfg = _cfg(reference_raw, imdsAllowedUsers=["telegraf"])
    for role, pool in ((gb300_tags.ROLE_GPU_NODE, cfg.gpu_pools[0]), (gb300_tags.ROLE_HEAD, None)):
        text = yaml.safe_load(render_custom_data(node_context.build(cfg, role, pool)).cloud_config)
        guard = next(f["content"] for f in text["write_files"] if f["path"] == imds_guard.GUARD)
        assert "users=(prometheus syslog azuremetricsext telegraf)" in guard


@pytest.mark.parametrize(
    ("users", "message"),
    [
        (["root"], "gb300:access.imdsAllowedUsers[0]: need not list root"),
        (["Bad User"], "gb300:access.imdsAllowedUsers[0]: must be a Linux user name"),
        ([f"u{i}" for i in range(17)], "gb300:access.imdsAllowedUsers: "),
    ],
    ids=["root", "not-a-name", "too-many"],
)
def test_a_wrong_allowed_user_is_one_line_naming_the_key(
    reference_raw: dict[str, Any], users: list[str], message: str
) -> None:
    """root (always allowed), a name Linux would refuse, or more than 16 users: one line naming the key."""
    with pytest.raises(ConfigError) as info:
        _cfg(reference_raw, imdsAllowedUsers=users)
    lines = str(info.value).splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(message), lines


def test_a_registry_whose_roles_do_not_start_with_the_guard_is_refused(reference_raw: dict[str, Any]) -> None:
    """Moving 00-imds-guard after another step (or dropping it) is refused when custom data is rendered."""
    cfg = config.parse(copy.deepcopy(reference_raw))
    ctx = node_context.build(cfg, gb300_tags.ROLE_HEAD)
    guard, preflight, *rest = node_steps.STEPS
    for steps in ((preflight, guard, *rest), (preflight, *rest)):
        with pytest.raises(BootstrapError, match="the first step must be 00-imds-guard"):
            node_steps.steps_for(ctx, steps)
    assert node_steps.steps_for(ctx)[0].name == guard.name == node_steps.GUARD_STEP


def test_the_rendered_guard_passes_shellcheck(reference_raw: dict[str, Any], tmp_path: Path) -> None:
    """The guard as rendered with the agents' users and with none (no monitoring) is clean shell."""
    quiet = copy.deepcopy(reference_raw)
    quiet["monitoring"] = {part: {"enabled": False} for part in ("prometheus", "logs", "grafana", "alerts")}
    shellcheck = shutil.which("shellcheck") or str(Path(sys.executable).parent / "shellcheck")
    for name, raw in (("agents", reference_raw), ("none", quiet)):
        cfg = config.parse(copy.deepcopy(raw))
        target = tmp_path / name
        target.write_text(imds_guard.script(cfg))
        result = subprocess.run([shellcheck, str(target)], capture_output=True, text=True, check=False)
        assert result.returncode == 0, result.stdout
    assert "users=()" in target.read_text()


WIRESERVER = "168.63.129.16"

# In a fresh network namespace: IMDS and the WireServer on loopback, HTTP servers (as root) on IMDS:80, the
# WireServer's tcp ports 80, 32526 and 53 and a udp echo on its port 53; the guard; one probe per uid and
# target; then the ruleset flushed whole, the guard's chain flushed, and the guard run again after each.
WIRE_DRIVER = textwrap.dedent(
    """\
    set -euo pipefail
    ip link set lo up
    ip addr add {imds}/32 dev lo
    ip addr add {wire}/32 dev lo
    python3 -c '
    import http.server, socket, socketserver, threading
    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200); self.end_headers(); self.wfile.write(b"ok")
        def log_message(self, *a): pass
    class S(socketserver.ThreadingMixIn, http.server.HTTPServer): pass
    for host, port in (("{imds}", 80), ("{wire}", 80), ("{wire}", 32526), ("{wire}", 53)):
        threading.Thread(target=S((host, port), H).serve_forever, daemon=True).start()
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); udp.bind(("{wire}", 53))
    while True:
        data, peer = udp.recvfrom(512); udp.sendto(data, peer)
    ' &
    trap 'kill $!' EXIT
    for _ in $(seq 100); do curl -s -o /dev/null "http://{wire}:53/" && break; sleep 0.1; done
    probe() {{
      for uid in 0 {nobody}; do
        for target in {imds}:80 {wire}:80 {wire}:32526 {wire}:53; do
          code=$(setpriv --reuid "$uid" --regid "$uid" --clear-groups \\
            curl -s -o /dev/null -w '%{{http_code}}' --max-time 5 "http://$target/") || true
          echo "uid $uid tcp $target: $code"
        done
        answer=$(setpriv --reuid "$uid" --regid "$uid" --clear-groups timeout 3 bash -c \
          'exec 3<>/dev/udp/{wire}/53 && printf q >&3 && read -r -t 2 -n 1 reply <&3 && echo "$reply"' \
          2>/dev/null) || answer=refused
        echo "uid $uid udp {wire}:53: $answer"
      done
    }}
    probe
    echo "-- guarded"
    GB300_ROOT="$WORK/root" "$WORK/guard"
    probe
    echo "-- ruleset flushed"
    nft flush ruleset
    probe
    echo "-- guard after flush"
    GB300_ROOT="$WORK/root" "$WORK/guard"
    probe
    echo "-- chain flushed"
    nft flush chain inet gb300_imds output
    GB300_ROOT="$WORK/root" "$WORK/guard"
    echo "-- guard after chain flush"
    probe
    echo "-- unchanged"
    GB300_ROOT="$WORK/root" "$WORK/guard"
    echo "-- end"
    """
)


def _wire_phases(guard: str, work: Path) -> dict[str, list[str]]:
    return _namespace(WIRE_DRIVER.format(imds=ADDRESS, wire=WIRESERVER, nobody=NOBODY), guard, work, timeout=180)


def _answers(uid: int, *, imds: str, wire: str, dns: str) -> list[str]:
    return [
        f"uid {uid} tcp {ADDRESS}:80: {imds}",
        f"uid {uid} tcp {WIRESERVER}:80: {wire}",
        f"uid {uid} tcp {WIRESERVER}:32526: {wire}",
        f"uid {uid} tcp {WIRESERVER}:53: {dns}",
        f"uid {uid} udp {WIRESERVER}:53: {'q' if dns == '200' else 'refused'}",
    ]


def test_the_wireserver_answers_root_and_everyone_only_for_dns_and_a_flush_is_undone(
    reference_plan: PlanResult, tmp_path: Path
) -> None:
    """With the plan's guard, nobody reaches neither IMDS nor the WireServer's agent ports (80, 32526) but still
    gets DNS (tcp and udp 53); root reaches all. Flushing the whole ruleset or only the guard's chain reopens
    everything until the guard runs again (as its timer does), which closes it again; an intact table is left."""
    guard = _custom_data_file(reference_plan, gb300_tags.ROLE_GPU_NODE, imds_guard.GUARD)
    phases = _wire_phases(guard, tmp_path)
    everyone = _answers(0, imds="200", wire="200", dns="200") + _answers(NOBODY, imds="200", wire="200", dns="200")
    guarded = _answers(0, imds="200", wire="200", dns="200") + _answers(NOBODY, imds="000", wire="000", dns="200")
    assert phases["open"] == everyone
    assert [x for x in phases["guarded"] if x.startswith("uid ")] == guarded
    assert phases["ruleset flushed"] == everyone
    assert [x for x in phases["guard after flush"] if x.startswith("uid ")] == guarded
    assert any(x.startswith("gb300-imds-guard: ") for x in phases["chain flushed"])  # the guard saw it and reloaded
    assert phases["guard after chain flush"] == guarded
    assert phases["unchanged"] == []  # an intact table is not reloaded (no message)


def test_the_timer_runs_the_guard_again_every_recheck_interval(reference_plan: PlanResult, tmp_path: Path) -> None:
    """Every role carries gb300-imds-guard.timer (enabled by the first step) firing every recheck_seconds from
    data/imds.yaml, and a oneshot service it starts that runs the same guard; systemd-analyze verify accepts them."""
    every = imds_guard.recheck_seconds()
    step = Path(node_steps.CLOUD_INIT_DIR, "scripts/00-imds-guard.sh").read_text()
    assert "systemctl enable gb300-imds-guard.service gb300-imds-guard.timer" in step
    for role in (gb300_tags.ROLE_GPU_NODE, gb300_tags.ROLE_HEAD):
        timer = _node_file(reference_plan, role, imds_guard.TIMER).splitlines()
        service = _node_file(reference_plan, role, imds_guard.RECHECK_UNIT).splitlines()
        assert {f"OnBootSec={every}s", f"OnUnitActiveSec={every}s", "WantedBy=timers.target"} <= set(timer)
        assert f"Unit={Path(imds_guard.RECHECK_UNIT).name}" in timer
        assert {"Type=oneshot", f"ExecStart={imds_guard.GUARD}"} <= set(service)
        assert not any(line.startswith("RemainAfterExit=yes") for line in service)  # else a timer starts it once
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        return
    root = tmp_path / "root"
    for path in (imds_guard.GUARD, imds_guard.UNIT, imds_guard.RECHECK_UNIT, imds_guard.TIMER):
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(_node_file(reference_plan, gb300_tags.ROLE_HEAD, path))
        target.chmod(0o755 if path == imds_guard.GUARD else 0o644)
    system = root / "usr/lib/systemd/system"  # the targets default dependencies name, from this machine
    system.mkdir(parents=True)
    for unit in Path("/usr/lib/systemd/system").glob("*.target"):
        if unit.is_file():
            shutil.copy(unit, system / unit.name)
    proc = subprocess.run(
        [analyze, "verify", f"--root={root}", "--man=no", imds_guard.TIMER, imds_guard.RECHECK_UNIT],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "gb300-imds-guard" not in proc.stdout + proc.stderr
