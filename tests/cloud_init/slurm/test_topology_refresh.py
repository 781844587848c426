"""The controller's topology refresh and the nodes' fabric publishing (cloud-init/slurm), through Slurm's node
records: a node publishes its NVLink identity in its own record's Extra=, the controller reads every record."""

from __future__ import annotations

import json

import pytest

from gb300.slurm.config import SlurmCluster, SlurmPool, render
from gb300.slurm.hostlist import expand

from .conftest import REPO, Sandbox

pytestmark = pytest.mark.slow  # every test runs a node script in a sandbox (subprocesses)

PLUGIN = "TopologyPlugin=topology/block"
UUIDS = ["5e797fc6-0f46-421a-8724-0e102c0f723c", "5e797fc6-0f46-421a-8724-0e102c0f721e"]
ENV = {"GB300_LIB": str(REPO / "infra"), "GB300_RECONFIGURE_WAIT": "0"}

# slurmctld as gb300-topology-refresh meets it, at the scontrol/sdiag/systemctl boundary (the real daemon's
# behaviour is in tests/slurm/real): `scontrol reconfigure` exits 0 at once and a new process then loads slurm.conf
# and topology.conf, so `sdiag` reports statistics since then and `scontrol show topology` its blocks; a topology.conf
# holding the text of $SANDBOX/refuse kills it (Slurm 24.11's fatal on a block smaller than the first), and then
# `scontrol ping` fails until `systemctl restart slurmctld`. It cannot show timing: it loads at once.
_LOAD = r"""load() {
  local topology="$GB300_ROOT/etc/slurm/topology.conf"
  if [ -e "$SANDBOX/refuse" ] && grep -qF "$(cat "$SANDBOX/refuse")" "$topology" 2>/dev/null; then
    touch "$SANDBOX/dead"; return
  fi
  rm -f "$SANDBOX/dead"
  date +%s >"$SANDBOX/started"
  if grep -qx 'TopologyPlugin=topology/block' "$GB300_ROOT/etc/slurm/slurm.conf"; then
    sed -n 's/^\(BlockName=[^ ]*\) Nodes=\([^ ]*\).*/\1 BlockIndex=0 Nodes=\2 BlockSize=18/p' \
      "$GB300_ROOT/etc/slurm/topology.conf" >"$SANDBOX/loaded"
  else
    : >"$SANDBOX/loaded"
  fi
}
"""
# `scontrol show hostnames`: the names of one hostlist expression (prefix[a-b,c]suffix parts), a stand-in's own.
_HOSTNAMES = r"""HOSTNAMES='
import re, sys
for part in re.findall(r"[^,\[]+(?:\[[^\]]*\])?", sys.argv[1]):
    m = re.fullmatch(r"(.*)\[([^\]]*)\](.*)", part.lstrip(","))
    if not m:
        print(part.lstrip(","))
        continue
    for item in m.group(2).split(","):
        low, _, high = item.partition("-")
        for i in range(int(low), int(high or low) + 1):
            print(f"{m.group(1)}{i:0{len(low)}d}{m.group(3)}")
'
"""
_SCONTROL = (
    _LOAD
    + _HOSTNAMES
    + r"""printf 'scontrol %s\n' "$*" >>"$SANDBOX/calls.log"
for rc in "$SANDBOX/rc/scontrol-$1" "$SANDBOX/rc/scontrol"; do
  if [ -e "$rc" ] && [ "$(cat "$rc")" != 0 ]; then exit "$(cat "$rc")"; fi
done
case "$1 ${2:-}" in
  "ping ") [ ! -e "$SANDBOX/dead" ] ;;
  "reconfigure ") [ -e "$SANDBOX/dead" ] && exit 1; load ;;
  "show topology") [ ! -e "$SANDBOX/dead" ] && cat "$SANDBOX/loaded" ;;
  "show hostnames") python3 -c "$HOSTNAMES" "$3" ;;
  "show "*) [ ! -e "$SANDBOX/dead" ] && cat "$SANDBOX/out/scontrol-show" ;;
  *) [ ! -e "$SANDBOX/dead" ] ;;
esac
"""
)
_SDIAG = r"""[ -e "$SANDBOX/dead" ] && exit 1
printf 'Data since      Sat Dec 05 00:00:00 2026 (%s)\n' "$(cat "$SANDBOX/started")"
"""
_SYSTEMCTL = (
    _LOAD
    + r"""printf 'systemctl %s\n' "$*" >>"$SANDBOX/calls.log"
if [ "$*" = "restart slurmctld" ]; then load; fi
"""
)


def controller(sandbox: Sandbox) -> None:
    """A head node with gb300's rendered slurm.conf (topology off, no GPU node listed) and a running slurmctld."""
    pool = SlurmPool("gpu", "gpu-", 36, "Standard_ND128isr_GB300_v6", 4, 128, 840000)
    conf = render(SlurmCluster("ref", "head", (pool,)))["slurm.conf"]
    assert "\nNodeName=" not in conf
    sandbox.write("etc/slurm/slurm.conf", conf)
    sandbox.replace("scontrol", _SCONTROL)
    sandbox.replace("sdiag", _SDIAG)
    sandbox.replace("systemctl", _SYSTEMCTL)
    (sandbox.path / "started").write_text("1\n")  # a slurmctld started long ago
    (sandbox.path / "loaded").write_text("")
    records(sandbox, {})


def records(sandbox: Sandbox, nodes: dict[str, int | None]) -> None:
    """slurmctld's registered nodes, as `scontrol show node -o` prints them: name -> rack whose identity the node
    published in Extra=, or None for a node that has published nothing yet."""
    lines = []
    for name, rack in nodes.items():
        extra = f"Extra=gb300-nvlink:{UUIDS[rack]}:{32766 + rack} " if rack is not None else ""
        lines.append(f"NodeName={name} Arch=aarch64 NodeAddr=10.0.0.1 State=IDLE {extra}Reason=\n")
    sandbox.answer("scontrol-show", "".join(lines))


def publish(first: int, last: int, rack: int) -> dict[str, int | None]:
    return {f"gpu-{i:03d}": rack for i in range(first, last + 1)}


def changes(sandbox: Sandbox) -> list[str]:
    """scontrol calls that change something (reads and pings left out)."""
    return [call for call in sandbox.calls("scontrol") if not call.startswith(("show ", "ping"))]


def slurm_conf(sandbox: Sandbox) -> str:
    return (sandbox.root / "etc/slurm/slurm.conf").read_text()


def test_first_complete_rack_switches_block_plugin_on(sandbox: Sandbox) -> None:
    """The first full rack writes its block and enables topology/block with one reconfigure (no restart since 23.11)."""
    controller(sandbox)
    records(sandbox, publish(1, 18, rack=0))
    result = sandbox.run("gb300-topology-refresh", env=ENV)
    assert result.returncode == 0, result.stderr
    topology = (sandbox.root / "etc/slurm/topology.conf").read_text()
    assert "BlockName=block001 Nodes=gpu-[001-018]\n" in topology
    assert "BlockSizes=18\n" in topology
    assert f"\n{PLUGIN}\n" in slurm_conf(sandbox)
    assert sandbox.calls("systemctl") == []
    assert changes(sandbox) == ["reconfigure"]
    assert (sandbox.path / "loaded").read_text().startswith("BlockName=block001 ")  # the controller took it


def test_partial_rack_is_a_block(sandbox: Sandbox) -> None:
    """With 12 of 18 nodes reported the rack is an incomplete block (Slurm 25.05+): its nodes are schedulable."""
    controller(sandbox)
    records(sandbox, publish(1, 12, rack=0))
    result = sandbox.run("gb300-topology-refresh", env=ENV)
    assert result.returncode == 0, result.stderr
    topology = (sandbox.root / "etc/slurm/topology.conf").read_text()
    assert "BlockName=block001 Nodes=gpu-[001-012]\n" in topology
    assert "(partial: 12 of 18 nodes)" in topology
    assert f"\n{PLUGIN}\n" in slurm_conf(sandbox)


def test_unchanged_fabric_changes_nothing(sandbox: Sandbox) -> None:
    """A second run over the same fabric files restarts and reconfigures nothing."""
    controller(sandbox)
    records(sandbox, publish(1, 18, rack=0))
    assert sandbox.run("gb300-topology-refresh", env=ENV).returncode == 0
    (sandbox.path / "calls.log").unlink()
    assert sandbox.run("gb300-topology-refresh", env=ENV).returncode == 0
    assert sandbox.calls("systemctl") == []
    assert changes(sandbox) == []


def test_a_node_missing_from_its_loaded_block_is_put_back_by_a_reconfigure(sandbox: Sandbox) -> None:
    """With topology.conf unchanged, a node slurmctld no longer lists in its block (its record was deleted and
    created again by its next registration) makes the refresh reconfigure, so slurmctld reads the file again."""
    controller(sandbox)
    records(sandbox, publish(1, 18, rack=0))
    assert sandbox.run("gb300-topology-refresh", env=ENV).returncode == 0
    (sandbox.path / "calls.log").unlink()
    loaded = sandbox.path / "loaded"
    loaded.write_text(loaded.read_text().replace("gpu-[001-018]", "gpu-[001-017]"))  # gpu-018 in no block
    result = sandbox.run("gb300-topology-refresh", env=ENV)
    assert result.returncode == 0, result.stderr
    assert changes(sandbox) == ["reconfigure"]
    assert "Nodes=gpu-[001-018] " in loaded.read_text()


def test_new_rack_reconfigures_without_restart(sandbox: Sandbox) -> None:
    """A rack joining later adds a block and only needs scontrol reconfigure."""
    controller(sandbox)
    records(sandbox, publish(1, 18, rack=0))
    assert sandbox.run("gb300-topology-refresh", env=ENV).returncode == 0
    (sandbox.path / "calls.log").unlink()
    records(sandbox, publish(1, 18, rack=0) | publish(19, 36, rack=1))
    assert sandbox.run("gb300-topology-refresh", env=ENV).returncode == 0
    assert "BlockName=block002 Nodes=gpu-[019-036]" in (sandbox.root / "etc/slurm/topology.conf").read_text()
    assert sandbox.calls("systemctl") == []
    assert changes(sandbox) == ["reconfigure"]


def test_failed_reconfigure_is_retried_and_the_file_applied_only_after_success(sandbox: Sandbox) -> None:
    """A reconfigure that fails once puts the old topology back and is retried, with the new file, next run."""
    controller(sandbox)
    records(sandbox, publish(1, 18, rack=0))
    assert sandbox.run("gb300-topology-refresh", env=ENV).returncode == 0
    topology = sandbox.root / "etc/slurm/topology.conf"
    applied = sandbox.root / "var/lib/gb300/topology/topology.conf.applied"
    one_rack = topology.read_text()
    records(sandbox, {**publish(1, 18, rack=0), **publish(19, 36, rack=1)})
    (sandbox.path / "rc" / "scontrol-reconfigure").write_text("1")  # scontrol reconfigure fails this once
    (sandbox.path / "calls.log").unlink()

    failed = sandbox.run("gb300-topology-refresh", env=ENV)
    assert failed.returncode == 1
    assert "reconfigure failed; the previous topology.conf is back and the next run retries it" in failed.stderr
    assert topology.read_text() == one_rack  # slurmctld still runs on the old file
    assert applied.read_text() == one_rack

    (sandbox.path / "rc" / "scontrol-reconfigure").unlink()
    retried = sandbox.run("gb300-topology-refresh", env=ENV)
    assert retried.returncode == 0, retried.stderr
    assert "BlockName=block002 Nodes=gpu-[019-036]" in topology.read_text()
    assert applied.read_text() == topology.read_text()
    assert changes(sandbox) == ["reconfigure", "reconfigure"]
    assert sandbox.calls("systemctl") == []

    assert sandbox.run("gb300-topology-refresh", env=ENV).returncode == 0
    assert changes(sandbox) == ["reconfigure", "reconfigure"]  # applied: nothing more to do


def test_a_failed_reconfigure_is_retried_on_the_next_run(sandbox: Sandbox) -> None:
    """The first rack's reconfigure command fails (slurmctld busy): the next run reconfigures again, then stops."""
    controller(sandbox)
    records(sandbox, publish(1, 18, rack=0))
    (sandbox.path / "rc" / "scontrol-reconfigure").write_text("1")
    assert sandbox.run("gb300-topology-refresh", env=ENV).returncode == 1
    assert PLUGIN not in slurm_conf(sandbox).replace(f"#{PLUGIN}", "")  # the plugin line went back too
    (sandbox.path / "rc" / "scontrol-reconfigure").unlink()
    (sandbox.path / "calls.log").unlink()
    assert sandbox.run("gb300-topology-refresh", env=ENV).returncode == 0
    assert changes(sandbox) == ["reconfigure"]
    (sandbox.path / "calls.log").unlink()
    assert sandbox.run("gb300-topology-refresh", env=ENV).returncode == 0
    assert changes(sandbox) == []


def test_a_controller_that_dies_on_the_new_file_gets_the_old_one_back(sandbox: Sandbox) -> None:
    """A reconfigure that exits 0 but whose new slurmctld dies on the file: the previous topology.conf is restored,
    slurmctld is started on it, the run exits 1 and the file is not marked applied (nor retried unchanged)."""
    controller(sandbox)
    records(sandbox, publish(1, 18, rack=0))
    assert sandbox.run("gb300-topology-refresh", env=ENV).returncode == 0
    topology = sandbox.root / "etc/slurm/topology.conf"
    applied = sandbox.root / "var/lib/gb300/topology/topology.conf.applied"
    one_rack = topology.read_text()
    records(sandbox, {**publish(1, 18, rack=0), **publish(19, 30, rack=1)})
    (sandbox.path / "refuse").write_text("BlockName=block002")  # 24.11: block002 smaller than block001
    (sandbox.path / "calls.log").unlink()

    failed = sandbox.run("gb300-topology-refresh", env=ENV)
    assert failed.returncode == 1
    assert "slurmctld did not take the new topology.conf" in failed.stderr
    assert "slurmctld runs on the previous topology.conf again" in failed.stderr
    assert topology.read_text() == one_rack
    assert applied.read_text() == one_rack
    assert not (sandbox.path / "dead").exists()  # the controller answers again
    assert sandbox.calls("systemctl") == ["restart slurmctld"]
    assert "block002" in (sandbox.root / "var/lib/gb300/topology/topology.conf.refused").read_text()

    (sandbox.path / "calls.log").unlink()
    again = sandbox.run("gb300-topology-refresh", env=ENV)
    assert again.returncode == 1
    assert "not tried again before 60 minutes unless it changes" in again.stderr
    assert changes(sandbox) == []
    assert topology.read_text() == one_rack


def test_a_controller_still_on_the_old_process_is_not_confirmed(sandbox: Sandbox) -> None:
    """scontrol reconfigure exits 0 but no new slurmctld process answers within the wait: the first block and the
    plugin line are taken back, and the run fails instead of recording the file as applied."""
    controller(sandbox)
    sandbox.replace("sdiag", "printf 'Data since      Thu Jan 01 00:00:01 1970 (1)\\n'\n")
    records(sandbox, publish(1, 18, rack=0))
    conf = slurm_conf(sandbox)
    result = sandbox.run("gb300-topology-refresh", env=ENV)
    assert result.returncode == 1
    assert "slurmctld did not take the new topology.conf within 0s" in result.stderr
    assert slurm_conf(sandbox) == conf  # TopologyPlugin still commented out
    assert not (sandbox.root / "etc/slurm/topology.conf").exists()
    assert not (sandbox.root / "var/lib/gb300/topology/topology.conf.applied").exists()


def test_nodes_without_a_published_identity_are_left_out(sandbox: Sandbox) -> None:
    """Registered nodes that have not published their NVLink identity yet stay out of the topology, by name."""
    controller(sandbox)
    records(sandbox, publish(1, 18, rack=0) | dict.fromkeys(("gpu-019", "gpu-020")))
    result = sandbox.run("gb300-topology-refresh", env=ENV)
    assert result.returncode == 0, result.stderr
    topology = (sandbox.root / "etc/slurm/topology.conf").read_text()
    assert "BlockName=block001 Nodes=gpu-[001-018]\n" in topology
    assert "gpu-019" not in topology
    assert any("without a published NVLink identity: gpu-019 gpu-020" in call for call in sandbox.calls("logger"))


def test_scale_set_names_registered_later_join_their_block(sandbox: Sandbox) -> None:
    """A rack of scale-set host names is a partial block with 17 published nodes, and whole once the 18th joins."""
    controller(sandbox)
    names = [f"ref-gpu-r0001-{i:06x}" for i in range(18)]
    records(sandbox, dict.fromkeys(names[:17], 0))
    assert sandbox.run("gb300-topology-refresh", env=ENV).returncode == 0
    assert "(partial: 17 of 18 nodes)" in (sandbox.root / "etc/slurm/topology.conf").read_text()
    records(sandbox, dict.fromkeys(names, 0))
    assert sandbox.run("gb300-topology-refresh", env=ENV).returncode == 0
    topology = (sandbox.root / "etc/slurm/topology.conf").read_text()
    [block] = [line for line in topology.splitlines() if line.startswith("BlockName=block001 ")]
    assert sorted(expand(block.split("Nodes=", 1)[1])) == names
    assert f"\n{PLUGIN}\n" in slurm_conf(sandbox)


def test_fabric_publish_sets_the_node_record_once(sandbox: Sandbox) -> None:
    """A registered node puts fabric.json's identity into its record's Extra=; with it there, it changes nothing."""
    sandbox.write("var/lib/gb300/fabric.json", json.dumps({"ClusterUUID": UUIDS[0].upper(), "CliqueId": 32766}))
    env = {"GB300_NODENAME": "gpu-005"}
    sandbox.answer("scontrol-show", "NodeName=gpu-005 Arch=aarch64 NodeAddr=10.0.0.5 State=IDLE Reason=\n")
    assert sandbox.run("gb300-fabric-publish", env=env).returncode == 0
    assert changes(sandbox) == [f"update nodename=gpu-005 extra=gb300-nvlink:{UUIDS[0]}:32766"]
    (sandbox.path / "calls.log").unlink()
    records(sandbox, {"gpu-005": 0})
    assert sandbox.run("gb300-fabric-publish", env=env).returncode == 0
    assert changes(sandbox) == []


def test_fabric_publish_fails_when_the_node_never_registers(sandbox: Sandbox) -> None:
    """If slurmctld does not know the node within the wait, the publisher fails naming the node."""
    sandbox.write("var/lib/gb300/fabric.json", json.dumps({"ClusterUUID": UUIDS[0], "CliqueId": 32766}))
    result = sandbox.run("gb300-fabric-publish", env={"GB300_NODENAME": "gpu-005", "GB300_PUBLISH_WAIT": "0"})
    assert result.returncode == 1
    assert "slurmctld does not know node gpu-005" in result.stderr


def test_fabric_publish_fails_without_fabric_json(sandbox: Sandbox) -> None:
    """Without the bootstrap's fabric.json the step fails with the missing path."""
    result = sandbox.run("gb300-fabric-publish", env={"GB300_NODENAME": "gpu-005"})
    assert result.returncode == 1
    assert "fabric.json missing" in result.stderr
