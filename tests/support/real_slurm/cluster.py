"""A real Slurm cluster on this machine: the head (munged, slurmctld, optionally MariaDB and slurmdbd) and N dynamic
GPU nodes (munged, slurmd), each a :class:`~tests.support.real_slurm.host.Host`, on a private bridge.

Start it with :func:`start_cluster` (or as a context manager); everything it started is stopped by PID and its
namespaces, cgroups and directories removed by :meth:`Cluster.stop`, also when a start fails half-way.
The adaptations to a small machine are listed once, in :mod:`tests.support.real_slurm`.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gb300.slurm.client import Slurm
from tests.support.real_slurm import adapt, layout, priv
from tests.support.real_slurm.host import Host
from tests.support.real_slurm.root import slurm_root

SUBNET = "198.18.0"
"""The bridge's addresses (RFC 2544's benchmarking range): only ever inside the cluster's own namespaces."""


@dataclass
class Cluster:
    """A running real-Slurm cluster of one Debian ``suite``; ``head`` and ``nodes`` are its hosts."""

    suite: str
    root: Path
    directory: Path
    files: layout.StackFiles
    accounting: bool = False
    node_files: dict[int, dict[str, str]] = field(default_factory=dict)
    head: Host = field(init=False)
    nodes: list[Host] = field(default_factory=list)
    node_options: dict[str, list[str]] = field(default_factory=dict)
    _netns: list[str] = field(default_factory=list)

    # -- reading it -------------------------------------------------------------------------------------------
    @property
    def version(self) -> str:
        """The Slurm release running (``slurmctld``'s Debian version, upstream part: ``24.11.5``)."""
        for line in layout.readable(self.root.with_suffix(".versions")).splitlines():
            name, version = line.split("\t")
            if name == "slurmctld":
                return re.split(r"[-+~]", version)[0]
        raise RuntimeError(f"no slurmctld in {self.root}.versions")

    def slurm(self) -> Slurm:
        """gb300's Slurm client (:class:`gb300.slurm.client.Slurm`), running its commands on the head."""
        return Slurm(via=(*self.head.enter(), "bash", "-c"))

    def scontrol(self, *args: str, host: Host | None = None, check: bool = True) -> str:
        """``scontrol`` output, run on ``host`` (the head by default)."""
        return (host or self.head).run(["scontrol", *args], check=check).stdout

    def log(self, host: Host, name: str) -> str:
        """The text of ``/var/log/slurm/<name>.log`` on ``host`` (``slurmctld``, ``slurmd``, ``slurmdbd``)."""
        return priv.read(host.upper / "var/log/slurm" / f"{name}.log")

    def errors(self, host: Host, name: str) -> list[str]:
        """The ``error:`` lines of a daemon's log on ``host``."""
        return [line for line in self.log(host, name).splitlines() if "error:" in line]

    def node(self, name: str) -> Host:
        return next(h for h in self.nodes if h.name == name)

    def wait(self, what: str, ready: Callable[[], bool], timeout: float = 60) -> None:
        """Poll ``ready`` until it holds; fail naming ``what`` (with the daemons' log tails) after ``timeout``."""
        deadline = time.monotonic() + timeout
        while not ready():
            if time.monotonic() > deadline:
                raise RuntimeError(f"{what}: not within {timeout:.0f} s\n{self.diagnostics()}")
            time.sleep(0.25)

    def diagnostics(self) -> str:
        """The last lines of every daemon's log and console, for a failure message."""
        parts = []
        for host in [self.head, *self.nodes]:
            texts = {p.name: p.read_text(errors="replace") for p in sorted(host.directory.glob("*.out"))}
            texts.update({f"{d}.log": self.log(host, d) for d in ("slurmctld", "slurmd", "slurmdbd")})
            for name, text in texts.items():
                if text:
                    parts.append(f"--- {host.name}: {name}\n" + "\n".join(text.splitlines()[-15:]))
        return "\n".join(parts)

    # -- starting it ----------------------------------------------------------------------------------------------
    def _network(self, count: int) -> None:
        tag = f"g3rs{os.getpid()}-{secrets.token_hex(2)}"
        bridge = f"{tag}-br"
        _ip("netns", "add", bridge)
        self._netns.append(bridge)
        _ip("-n", bridge, "link", "add", "br0", "type", "bridge")
        _ip("-n", bridge, "link", "set", "br0", "up")
        for index in range(count):
            netns = f"{tag}-{index}"
            _ip("netns", "add", netns)
            self._netns.append(netns)
            _ip("-n", bridge, "link", "add", f"v{index}", "type", "veth", "peer", "name", "eth0", "netns", netns)
            _ip("-n", bridge, "link", "set", f"v{index}", "master", "br0", "up")
            _ip("-n", netns, "addr", "add", f"{SUBNET}.{index + 1}/24", "dev", "eth0")
            _ip("-n", netns, "link", "set", "eth0", "up")
            _ip("-n", netns, "link", "set", "lo", "up")

    def _host(self, index: int, name: str, gpus: int) -> Host:
        return Host(
            name=name,
            address=f"{SUBNET}.{index + 1}",
            netns=self._netns[index + 1],
            directory=self.directory / name,
            lower=self.root,
            gpus=gpus,
        )

    def start(self, node_names: list[str]) -> None:
        """Bring up the network, the head, then every node; returns when every node is registered."""
        self._network(1 + len(node_names))
        gpus = int(self.files.env(self.files.node, "/etc/gb300/slurm.env")["GB300_SLURM_GPUS"])
        self.head = self._host(0, self.files.head_hostname, 0)
        self.nodes = [self._host(i + 1, name, gpus) for i, name in enumerate(node_names)]
        key = secrets.token_bytes(1024)
        hosts = "127.0.0.1 localhost\n" + "".join(f"{h.address} {h.name}\n" for h in [self.head, *self.nodes])
        adapt.head_layer(self, key, hosts)
        adapt.seal(self, self.head)
        self.head.boot()
        self._start_head()
        for index, host in enumerate(self.nodes):
            adapt.node_layer(self, host, key, hosts, self.node_files.get(index))
            self.node_options[host.name], _ = layout.slurmd_argv(host.upper)
            adapt.seal(self, host)
            host.boot()
            self.start_node(host)
        self.wait_registered([h.name for h in self.nodes])

    def _munged(self, host: Host) -> None:
        # What boot does before any service: the packages' runtime directories under /run (tmpfiles.d).
        host.run(["systemd-tmpfiles", "--create", "--prefix=/run"], check=False)
        unit = self.root / "usr/lib/systemd/system/munge.service"
        user = layout.unit_user(unit) or "root"
        host.run(["install", "-d", "-o", user, "-g", user, "-m", "0755", "/run/munge"])
        argv = [*layout.unit_command(unit, {}), "--foreground"]
        host.start("munged", ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *argv])
        self.wait(f"munged on {host.name}", lambda: host.run(["munge", "-n"], check=False).returncode == 0, 20)

    def _start_head(self) -> None:
        self._munged(self.head)
        if self.accounting:
            adapt.start_accounting(self)
        self.start_controller()

    def start_controller(self) -> None:
        """Start slurmctld on the head (its unit's command line, in the foreground) and wait until it answers."""
        unit = self.root / "usr/lib/systemd/system/slurmctld.service"
        self.head.start("slurmctld", layout.unit_command(unit, {}))
        self.wait("slurmctld answers scontrol ping", self.controller_up, 60)

    def controller_up(self) -> bool:
        """Whether ``scontrol ping`` on the head says the primary controller is UP."""
        done = self.head.run(["scontrol", "ping"], check=False, timeout=20)
        return done.returncode == 0 and "is UP" in done.stdout

    def start_node(self, host: Host) -> None:
        """munged, the boot health check (its unit's command), then slurmd with the options gb300-slurmd-setup set."""
        if "munged" not in host.daemons:
            self._munged(host)
        boot_unit = host.upper / "etc/systemd/system/gb300-health-boot.service"
        host.run(layout.unit_command(boot_unit, {}), check=False, timeout=120)
        unit = self.root / "usr/lib/systemd/system/slurmd.service"
        host.start("slurmd", layout.unit_command(unit, {"SLURMD_OPTIONS": self.node_options[host.name]}))

    def reboot(self, host: Host, down: float = 0.0) -> None:
        """Reboot a node as a VM restart would: every process gone, ``/run`` and ``/dev`` fresh, its disk (its
        layer) kept, a new boot time; after ``down`` seconds it boots and starts munged, the gate and slurmd."""
        before = self.slurmd_start_time(host)
        host.destroy()
        time.sleep(max(down, 1.0))  # boot and start times have whole seconds
        host.boot()
        self.start_node(host)
        self.wait(f"{host.name} registered again", lambda: self.slurmd_start_time(host) > before, 90)

    def slurmd_start_time(self, host: Host) -> int:
        """When the controller last saw ``host``'s slurmd start (its registration), in epoch seconds; 0: never."""
        done = self.head.run(["scontrol", "--json", "show", "node", host.name], check=False)
        if done.returncode != 0:
            return 0
        [node] = json.loads(done.stdout)["nodes"] or [{}]
        value = node.get("slurmd_start_time", 0)
        return int(value.get("number", 0) if isinstance(value, dict) else value)

    def wait_registered(self, names: list[str], timeout: float = 90) -> None:
        """Wait until slurmctld has a record of every node in ``names`` that is not NOT_RESPONDING/DOWN."""

        def registered() -> bool:
            found = self.slurm().nodes(names)
            return set(found) == set(names) and all(not ({"DOWN", "NOT_RESPONDING"} & n.states) for n in found.values())

        self.wait(f"nodes {names} registered", registered, timeout)

    # -- stopping it ----------------------------------------------------------------------------------------------
    def stop(self) -> None:
        """Stop every process this cluster started (by PID), remove its namespaces, cgroups and directories."""
        problems: list[str] = []
        for host in [*getattr(self, "nodes", []), *([self.head] if hasattr(self, "head") else [])]:
            try:
                host.destroy()
            except Exception as error:  # noqa: BLE001 - keep tearing down the rest
                problems.append(f"{host.name}: {error}")
        for netns in reversed(self._netns):
            if priv.run(["ip", "netns", "del", netns], check=False).returncode:
                problems.append(f"ip netns del {netns} failed")
        self._netns.clear()
        priv.run(["rm", "-rf", "--one-file-system", str(self.directory)], check=False)
        if problems:
            raise RuntimeError("real-Slurm teardown: " + "; ".join(problems))


def _ip(*args: str) -> None:
    priv.run(["ip", *args])


def node_names(files: layout.StackFiles, count: int) -> list[str]:
    """``count`` GPU node names as a Uniform scale set of the pool names its instances (``<prefix><6 base-36>``)."""
    return [f"{files.cluster}-{files.pool}-{index:06d}" for index in range(count)]


@contextmanager
def start_cluster(
    suite: str,
    directory: Path,
    *,
    nodes: int = 2,
    stack: str = "dev",
    overrides: dict[str, Any] | None = None,
    accounting: bool = False,
    node_files: dict[int, dict[str, str]] | None = None,
) -> Iterator[Cluster]:
    """A running cluster of ``suite`` (``trixie``, ``sid``) with ``nodes`` GPU nodes of ``stack``'s first pool,
    in ``directory`` (emptied and removed afterwards). ``accounting`` turns on the head's slurmdbd (the stack's
    ``gb300:head.slurmdbd``) and starts MariaDB and slurmdbd on the head. ``node_files`` (node index -> node path
    -> text) is written into a node's layer after gb300's files and the adaptations (a failing gate's health.env)."""
    if accounting:
        overrides = {**(overrides or {}), "head": {**(overrides or {}).get("head", {}), "slurmdbd": True}}
    files = layout.node_bundles(stack, overrides)
    cluster = Cluster(
        suite=suite,
        root=slurm_root(suite),
        directory=directory,
        files=files,
        accounting=accounting,
        node_files=dict(node_files or {}),
    )
    directory.mkdir(parents=True, exist_ok=True)
    try:
        cluster.start(node_names(files, nodes))
        yield cluster
    finally:
        cluster.stop()
