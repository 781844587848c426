"""The head's and the nodes' layers: gb300's rendered files, plus the adaptations listed in
:mod:`tests.support.real_slurm` (each one written here, nowhere else)."""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING

from tests.support.real_slurm import layout

if TYPE_CHECKING:
    from tests.support.real_slurm.cluster import Cluster
    from tests.support.real_slurm.host import Host

SLURM_CONF_ADAPTATIONS = (
    "# real-Slurm fixture (tests/support/real_slurm): the SKU's 128 CPUs and 820 GiB on a small machine\n"
    "SlurmdParameters=config_overrides\n"
)
SYSTEMCTL = r"""#!/bin/bash
# real-Slurm fixture stand-in for systemctl: units are words in /var/lib/gb300-standin/units/<unit>.
dir=/var/lib/gb300-standin/units
mkdir -p "$dir" /var/log/gb300-standin
printf '%s\n' "$*" >>/var/log/gb300-standin/systemctl.log
quiet=0 args=()
for word in "$@"; do [ "$word" = --quiet ] && quiet=1 || args+=("$word"); done
verb=${args[0]:-} unit=${args[1]:-}
unit=${unit%.service}
case "$verb" in
  start | restart) echo active >"$dir/$unit" ;;
  stop) echo inactive >"$dir/$unit" ;;
  is-active)
    state=$(cat "$dir/$unit" 2>/dev/null || echo inactive)
    [ "$quiet" = 1 ] || echo "$state"
    [ "$state" = active ]
    exit
    ;;
esac
exit 0
"""
IMEX_CTL = r"""#!/bin/bash
# real-Slurm fixture stand-in for nvidia-imex-ctl: -q answers READY while the nvidia-imex stand-in unit is active.
printf '%s\n' "$*" >>/var/log/gb300-standin/nvidia-imex-ctl.log
if [ "${1:-}" = -q ]; then
  state=$(cat /var/lib/gb300-standin/units/nvidia-imex 2>/dev/null)
  if [ "$state" = active ]; then echo READY; else echo UNAVAILABLE; fi
fi
"""
IMEX_CONFIG = "IMEX_CMD_ENABLED=1\nIMEX_CMD_PORT=50005\n"


def hardware_checks(gate: str, health_env: dict[str, str]) -> list[str]:
    """Every check the health gate ``gate`` (its script text) runs, by name: the literal ``run_check <name>``
    calls and the field watches of ``health.env``. All of them read GPUs, InfiniBand, DCGM or the kernel."""
    names = re.findall(r"run_check ([a-z0-9-]+) ", gate)
    names += [word.split(":", 1)[0] for word in health_env.get("GB300_FIELD_WATCHES", "").split()]
    return list(dict.fromkeys(names))


def _common(cluster: Cluster, host: Host, key: bytes, hosts: str) -> None:
    upper = host.upper
    munge_uid, munge_gid = layout.owner(cluster.root, "munge")
    slurm_uid, slurm_gid = layout.owner(cluster.root, "slurm")
    (upper / "etc").mkdir(parents=True, exist_ok=True)
    (upper / "etc/hosts").write_text(hosts)
    (upper / "etc/hostname").write_text(host.name + "\n")
    munge_dir = upper / "etc/munge"
    munge_dir.mkdir(parents=True, exist_ok=True)
    (munge_dir / "munge.key").write_bytes(key)
    (munge_dir / "munge.key").chmod(0o400)
    for path in (munge_dir, upper / "var/lib/munge", upper / "var/log/munge"):
        path.mkdir(parents=True, exist_ok=True)
        layout.chown_tree(path, munge_uid, munge_gid)
    for path in (upper / "var/log/slurm", upper / "var/spool/slurmctld"):
        path.mkdir(parents=True, exist_ok=True)
        layout.chown_tree(path, slurm_uid, slurm_gid)


def head_layer(cluster: Cluster, key: bytes, hosts: str) -> None:
    """The head's layer: its rendered files (``/etc/slurm``: slurm.conf, gres.conf, cgroup.conf, plugstack.conf,
    topology.conf when rendered) with the slurm.conf adaptation appended."""
    layout.place(cluster.files.head, cluster.head.upper)
    _common(cluster, cluster.head, key, hosts)
    conf = cluster.head.upper / "etc/slurm/slurm.conf"
    conf.write_text(conf.read_text() + SLURM_CONF_ADAPTATIONS)


def node_layer(cluster: Cluster, host: Host, key: bytes, hosts: str, extra: dict[str, str] | None = None) -> None:
    """A GPU node's layer: its rendered files, no /etc/slurm (configless), the gate's skip lists holding every
    hardware check, IMEX's command service on, stand-ins for systemctl and nvidia-imex-ctl; then ``extra``."""
    upper = host.upper
    layout.place(cluster.files.node, upper, skip=("/etc/slurm/",))
    _common(cluster, host, key, hosts)
    (upper / "var/spool/slurmd").mkdir(parents=True, exist_ok=True)
    env_path = upper / "etc/gb300/health.env"
    env = layout.source_env(env_path.read_text())
    checks = " ".join(hardware_checks((upper / "usr/local/sbin/gb300-health-check").read_text(), env))
    skips = "".join(f"GB300_SKIP_{mode}='{checks}'\n" for mode in ("BOOT", "PERIODIC", "EPILOG"))
    env_path.write_text(env_path.read_text() + "# real-Slurm fixture: no GPU, InfiniBand or DCGM here\n" + skips)
    for path, text, mode in (
        ("usr/bin/systemctl", SYSTEMCTL, 0o755),
        ("usr/bin/nvidia-imex-ctl", IMEX_CTL, 0o755),
        ("etc/nvidia-imex/config.cfg", IMEX_CONFIG, 0o644),
    ):
        target = upper / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        target.chmod(mode)
    for path, text in (extra or {}).items():
        target = upper / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)


def start_accounting(cluster: Cluster) -> None:
    """MariaDB and slurmdbd on the head, as gb300-slurmdbd-setup configures them (its rendered files)."""
    head = cluster.head
    head.run(["install", "-d", "-o", "mysql", "-g", "mysql", "/run/mysqld"])
    head.start("mariadb", ["mariadbd", "--user=mysql", "--skip-networking=0", "--bind-address=127.0.0.1"])
    deadline = time.monotonic() + 60
    while head.run(["mariadb", "-e", "select 1"], check=False).returncode != 0:
        if time.monotonic() > deadline:
            raise RuntimeError("MariaDB did not start:\n" + cluster.diagnostics())
        time.sleep(0.5)
    unit = cluster.root / "usr/lib/systemd/system/slurmdbd.service"
    head.start("slurmdbd", layout.unit_command(unit, {}))
