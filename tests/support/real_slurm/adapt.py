"""The head's and the nodes' layers: gb300's rendered files, plus the adaptations listed in
:mod:`tests.support.real_slurm` (each one written here, nowhere else)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from tests.support.real_slurm import layout, priv

if TYPE_CHECKING:
    from tests.support.real_slurm.cluster import Cluster
    from tests.support.real_slurm.host import Host

SLURM_CONF_ADAPTATIONS = (
    "# real-Slurm fixture (tests/support/real_slurm): the SKU's 128 CPUs and 820 GiB on a small machine\n"
    "SlurmdParameters=config_overrides\n"
)
CGROUP_V2_ADAPTATIONS = (
    "# real-Slurm fixture (tests/support/real_slurm): no systemd in the hosts to create slurmstepd's scope\n"
    "IgnoreSystemd=yes\n"
)


NEWER_KEYS = {"MetricsType": (25, 11)}
"""slurm.conf keys of our release (25.11) that an older fixture release rejects ("unrecognized key", fatal)."""


def without_newer_keys(text: str, version: str) -> str:
    """slurm.conf without the lines of keys ``version`` does not know yet (24.11: ``MetricsType``)."""
    release = tuple(int(part) for part in version.split(".")[:2])
    dropped = {key.lower() for key, since in NEWER_KEYS.items() if release < since}
    return "".join(
        line for line in text.splitlines(keepends=True) if line.split("=", 1)[0].strip().lower() not in dropped
    )


def cgroup_v2_only() -> bool:
    """Whether this machine mounts only cgroup v2 (CI runners; this fixture's own machine has v1 hierarchies)."""
    return Path("/sys/fs/cgroup/cgroup.controllers").exists()


SYSTEMCTL = r"""#!/bin/bash
# real-Slurm fixture stand-in for systemctl: records its calls and keeps unit states (start, restart, stop,
# is-active) under /var/lib/gb300-standin/units; start/restart (or enable --now) of a unit in RUN runs the unit's
# last ExecStart= (its drop-ins included) as its User=, MariaDB as `mariadbd` (its unit wraps Galera recovery).
RUN=" mariadb slurmdbd "
dir=/var/lib/gb300-standin/units
mkdir -p "$dir" /var/log/gb300-standin /run/gb300-standin
printf '%s\n' "$*" >>/var/log/gb300-standin/systemctl.log
quiet=0 now=0 args=()
for word in "$@"; do
  case "$word" in
    --quiet) quiet=1 ;;
    --now) now=1 ;;
    --*) ;;
    *) args+=("$word") ;;
  esac
done
verb=${args[0]:-}
for unit in "${args[@]:1}"; do
  unit=${unit%.service}
  case "$verb" in
    start | restart) ;;
    enable) [ "$now" = 1 ] || continue ;;
    stop) echo inactive >"$dir/$unit"; continue ;;
    is-active)
      state=$(cat "$dir/$unit" 2>/dev/null || echo inactive)
      [ "$quiet" = 1 ] || echo "$state"
      [ "$state" = active ]
      exit
      ;;
    *) continue ;;
  esac
  pidfile=/run/gb300-standin/$unit.pid
  if [ "$(cat "$dir/$unit" 2>/dev/null)" = active ] && [ "$verb" != restart ]; then continue; fi
  echo active >"$dir/$unit"
  [[ "$RUN" == *" $unit "* ]] || continue
  if [ -r "$pidfile" ]; then
    pid=$(cat "$pidfile")
    kill "$pid" 2>/dev/null || true
    while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
  fi
  files=(/usr/lib/systemd/system/"$unit".service /etc/systemd/system/"$unit".service.d/*.conf)
  settings=$(cat "${files[@]}" 2>/dev/null)
  user=$(sed -n 's/^User=//p' <<<"$settings" | tail -n1)
  user=${user:-root}
  for runtime in $(sed -n 's/^RuntimeDirectory=//p' <<<"$settings"); do install -d -o "$user" "/run/$runtime"; done
  if [ "$unit" = mariadb ]; then
    [ -d /run/mariadbd ] || install -d -o mysql -g mysql /run/mysqld # trixie's socket directory (no tmpfiles.d)
    cmd=/usr/sbin/mariadbd
  else
    cmd=$(sed -n 's/^ExecStart=//p' <<<"$settings" | grep -v '^$' | tail -n1)
  fi
  # shellcheck disable=SC2086 # systemd splits ExecStart= at whitespace; unset $VARIABLES expand to nothing
  setsid setpriv --reuid="$user" --regid="$user" --init-groups bash -c "exec $cmd" \
    </dev/null >>"/var/log/gb300-standin/$unit.out" 2>&1 &
  echo $! >"$pidfile"
done
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


def _common(host: Host, key: bytes, hosts: str) -> None:
    upper = host.upper
    for path in ("etc/munge", "var/lib/munge", "var/log/munge", "var/log/slurm", "var/spool/slurmctld"):
        (upper / path).mkdir(parents=True, exist_ok=True)
    (upper / "etc/hosts").write_text(hosts)
    (upper / "etc/hostname").write_text(host.name + "\n")
    (upper / "etc/munge/munge.key").write_bytes(key)


def seal(cluster: Cluster, host: Host) -> None:
    """Give a host's layer the ownership it has on a node (root; munge's and slurm's directories), as root."""
    munge = "{}:{}".format(*layout.owner(cluster.root, "munge"))
    slurm = "{}:{}".format(*layout.owner(cluster.root, "slurm"))
    upper = host.upper
    priv.run(["chown", "-R", "0:0", str(upper)])
    priv.run(["chown", "-R", munge, *(str(upper / p) for p in ("etc/munge", "var/lib/munge", "var/log/munge"))])
    priv.run(["chmod", "0400", str(upper / "etc/munge/munge.key")])
    priv.run(["chown", "-R", slurm, str(upper / "var/log/slurm"), str(upper / "var/spool/slurmctld")])


def head_layer(cluster: Cluster, key: bytes, hosts: str) -> None:
    """The head's layer: its rendered files (``/etc/slurm``: slurm.conf, gres.conf, cgroup.conf, plugstack.conf,
    topology.conf when rendered) with the slurm.conf adaptation appended."""
    layout.place(cluster.files.head, cluster.head.upper)
    _common(cluster.head, key, hosts)
    conf = cluster.head.upper / "etc/slurm/slurm.conf"
    conf.write_text(without_newer_keys(conf.read_text(), cluster.version) + SLURM_CONF_ADAPTATIONS)
    _write(cluster.head.upper, "usr/bin/systemctl", SYSTEMCTL, 0o755)
    if cgroup_v2_only():
        cgroup = cluster.head.upper / "etc/slurm/cgroup.conf"
        cgroup.write_text(cgroup.read_text() + CGROUP_V2_ADAPTATIONS)


def node_layer(cluster: Cluster, host: Host, key: bytes, hosts: str, extra: dict[str, str] | None = None) -> None:
    """A GPU node's layer: its rendered files, no /etc/slurm (configless), the gate's skip lists holding every
    hardware check, IMEX's command service on, stand-ins for systemctl and nvidia-imex-ctl; then ``extra``."""
    upper = host.upper
    layout.place(cluster.files.node, upper, skip=("/etc/slurm/",))
    _common(host, key, hosts)
    (upper / "var/spool/slurmd").mkdir(parents=True, exist_ok=True)
    env_path = upper / "etc/gb300/health.env"
    env = layout.source_env(env_path.read_text())
    checks = " ".join(hardware_checks((upper / "usr/local/sbin/gb300-health-check").read_text(), env))
    skips = "".join(f"GB300_SKIP_{mode}='{checks}'\n" for mode in ("BOOT", "PERIODIC", "EPILOG"))
    env_path.write_text(env_path.read_text() + "# real-Slurm fixture: no GPU, InfiniBand or DCGM here\n" + skips)
    _write(upper, "usr/bin/systemctl", SYSTEMCTL, 0o755)
    _write(upper, "usr/bin/nvidia-imex-ctl", IMEX_CTL, 0o755)
    _write(upper, "etc/nvidia-imex/config.cfg", IMEX_CONFIG, 0o644)
    for path, text in (extra or {}).items():
        _write(upper, path, text, 0o755 if path.startswith(("/usr/", "usr/")) else 0o644)


def _write(upper: Path, path: str, text: str, mode: int) -> None:
    target = upper / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    target.chmod(mode)


def start_accounting(cluster: Cluster) -> None:
    """MariaDB and slurmdbd on the head: the head's own ``gb300-slurmdbd-setup`` step, run on the head (it starts
    them through the systemctl stand-in, creates the database and slurmdbd's account, waits for sacctmgr)."""
    step = "/usr/local/lib/gb300/steps/gb300-slurmdbd-setup.sh"
    cluster.head.run(["env", "GB300_SLURM_INSTALL=/bin/true", "bash", step], timeout=300)
