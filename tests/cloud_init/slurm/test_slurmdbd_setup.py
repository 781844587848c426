"""gb300-slurmdbd-setup on the head: MariaDB and slurmdbd with unix-socket auth, run in the sandbox with stand-ins."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

import pytest

from gb300.node.registry import SlurmView, slurm_node_files
from gb300.slurm.config import SlurmCluster, SlurmPool
from gb300.slurm.files import SlurmBootInputs

from .conftest import Sandbox

pytestmark = pytest.mark.slow  # every test runs a node script in a sandbox (subprocesses)

STEP = "gb300-slurmdbd-setup"
TRAIN = SlurmPool("train", "ref-train-r0001-", 18, "Standard_ND128isr_GB300_v6", 4, 128, 840499)
ON = (SlurmCluster("ref", "ref-head", (TRAIN,), accounting_host="ref-head"), SlurmBootInputs("ref-head", slurmdbd=True))
OFF = (SlurmCluster("ref", "ref-head", (TRAIN,)), SlurmBootInputs("ref-head"))

# Packages the apt-get stand-in "installs": commands it puts on PATH.
_MARIADB = r"""printf 'mariadb %s\n' "$*" >>"$SANDBOX/calls.log"
db="$SANDBOX/mariadb"
mkdir -p "$db"
if ! grep -Eq '^systemctl (enable --now|restart) mariadb.service$' "$SANDBOX/calls.log"; then
  echo "ERROR 2002 (HY000): Can't connect to local server through socket '/run/mysqld/mysqld.sock'" >&2
  exit 1
fi
if [ "$#" -gt 2 ]; then
  query="${*: -1}"
  case "$query" in
    "SELECT 1") echo 1 ;;
    *information_schema*)
      name=$(grep -o "SCHEMA_NAME='[A-Za-z0-9_]*'" <<<"$query" | cut -d"'" -f2)
      has_db=0; [ -e "$db/database-$name" ] && has_db=1
      has_user=0; [ "$(cat "$db/user-plugin" 2>/dev/null)" = unix_socket ] && has_user=1
      has_grant=0; [ "$(cat "$db/grant" 2>/dev/null)" = "$name.*" ] && has_grant=1
      printf '%s\t%s\t%s\n' "$has_db" "$has_user" "$has_grant" ;;
    *) echo "stand-in: unsupported query: $query" >&2; exit 1 ;;
  esac
  exit 0
fi
sql=$(cat)
printf '%s\n' "$sql" >>"$SANDBOX/sql.log"
while IFS= read -r line; do
  case "$line" in
    "CREATE DATABASE IF NOT EXISTS "*) name=${line#CREATE DATABASE IF NOT EXISTS }; touch "$db/database-${name%;}" ;;
    "CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED VIA "*)
      [ -e "$db/user-plugin" ] || { plugin=${line##* VIA }; echo "${plugin%;}" >"$db/user-plugin"; } ;;
    "ALTER USER 'slurm'@'localhost' IDENTIFIED VIA "*) plugin=${line##* VIA }; echo "${plugin%;}" >"$db/user-plugin" ;;
    "GRANT ALL ON "*" TO 'slurm'@'localhost';") scope=${line#GRANT ALL ON }; echo "${scope%% TO *}" >"$db/grant" ;;
    *) echo "stand-in: unsupported SQL: $line" >&2; exit 1 ;;
  esac
done <<<"$sql"
"""
# sacctmgr answers once slurmdbd was started (as slurmdbd would).
_SACCTMGR = r"""printf 'sacctmgr %s\n' "$*" >>"$SANDBOX/calls.log"
grep -Eq '^systemctl (enable --now|restart) slurmdbd.service$' "$SANDBOX/calls.log" || exit 1
"""
_APT_GET = r"""printf 'apt-get %s\n' "$*" >>"$SANDBOX/calls.log"
for pkg in "$SANDBOX"/pkg/*; do cp "$pkg" "$SANDBOX/bin/"; done
"""


def head_with_accounting(sandbox: Sandbox, files: tuple[SlurmCluster, SlurmBootInputs] = ON) -> dict[str, str]:
    """A fresh head VM with gb300's head files placed as write_files would; returns the step's environment."""
    for node_file in slurm_node_files(SlurmView("head", *files)):
        target = sandbox.write(node_file.path.lstrip("/"), node_file.content)
        target.chmod(int(node_file.permissions, 8))
    pkg = sandbox.path / "pkg"
    pkg.mkdir()
    for name, body in (("mariadb", _MARIADB), ("slurmdbd", "exit 0\n"), ("sacctmgr", _SACCTMGR)):
        (pkg / name).write_text("#!/usr/bin/env bash\n" + body)
        (pkg / name).chmod(0o755)
    sandbox.replace("apt-get", _APT_GET)
    sandbox.replace("apt-mark", 'printf "apt-mark %s\\n" "$*" >>"$SANDBOX/calls.log"\n')
    return {"GB300_UNIT_DIR": str(sandbox.root / "opt/gb300/systemd"), "GB300_SLURMDBD_WAIT_SECONDS": "0"}


def database(sandbox: Sandbox) -> dict[str, str]:
    """What the MariaDB stand-in holds: database names, the slurm account's auth plugin and its grant."""
    db = sandbox.path / "mariadb"
    return {p.name: p.read_text().strip() for p in db.iterdir()} if db.exists() else {}


def snapshot(root: Path) -> dict[str, tuple[int, str, int]]:
    """Every file under ``root`` with its mode, content hash and mtime."""
    out = {}
    for dirpath, _, names in os.walk(root):
        for name in names:
            path = Path(dirpath) / name
            st = path.stat()
            out[str(path.relative_to(root))] = (
                st.st_mode,
                hashlib.sha256(path.read_bytes()).hexdigest(),
                st.st_mtime_ns,
            )
    return out


def test_first_run_installs_creates_the_account_and_starts_slurmdbd(sandbox: Sandbox) -> None:
    """The first run installs MariaDB and slurmdbd, creates the DB and a unix_socket account, then slurmdbd answers."""
    result = sandbox.run(STEP, env=head_with_accounting(sandbox))
    assert result.returncode == 0, result.stderr
    [install] = sandbox.calls("apt-get")
    assert "mariadb-server" in install.split()
    assert sandbox.calls("gb300-slurm-install") == ["slurm-smd-slurmdbd"]  # Microsoft's slurmdbd, held
    assert database(sandbox) == {
        "database-slurm_acct_db": "",
        "user-plugin": "unix_socket",
        "grant": "slurm_acct_db.*",  # the accounting database only, not *.*
    }
    sql = (sandbox.path / "sql.log").read_text().upper()
    assert "PASSWORD" not in sql
    assert "IDENTIFIED BY" not in sql
    conf = sandbox.root / "etc/slurm/slurmdbd.conf"
    assert f"slurm:slurm {conf}" in " ".join(sandbox.calls("chown"))
    assert stat.S_IMODE(conf.stat().st_mode) == 0o600
    dropin = (sandbox.root / "etc/systemd/system/slurmdbd.service.d/gb300.conf").read_text()
    assert "User=slurm" in dropin.splitlines()
    calls = (sandbox.path / "calls.log").read_text().splitlines()
    order = [
        calls.index("systemctl restart mariadb.service"),
        next(i for i, c in enumerate(calls) if c == "mariadb --batch"),
        calls.index("systemctl restart slurmdbd.service"),
        next(i for i, c in enumerate(calls) if c.startswith("sacctmgr ")),
    ]
    assert order == sorted(order)
    assert (sandbox.root / "var/lib/gb300/slurm/slurmdbd-setup.done").exists()


def test_second_run_changes_nothing(sandbox: Sandbox) -> None:
    """Run again, the step installs nothing, creates nothing, restarts nothing and leaves every file as it was."""
    env = head_with_accounting(sandbox)
    assert sandbox.run(STEP, env=env).returncode == 0
    before, sql_before, db_before = snapshot(sandbox.root), (sandbox.path / "sql.log").read_text(), database(sandbox)
    (sandbox.path / "calls.log").unlink()
    result = sandbox.run(STEP, env=env)
    assert result.returncode == 0, result.stderr
    assert sandbox.calls("apt-get") == []
    assert not [c for c in sandbox.calls("systemctl") if c.startswith(("restart", "daemon-reload"))]
    assert (sandbox.path / "sql.log").read_text() == sql_before
    assert database(sandbox) == db_before
    assert snapshot(sandbox.root) == before
    assert sandbox.calls("sacctmgr")  # it still checks that slurmdbd answers


def test_changed_slurmdbd_conf_restarts_slurmdbd(sandbox: Sandbox) -> None:
    """A slurmdbd.conf that changed since the last start (a re-rendered head) restarts slurmdbd, not MariaDB."""
    env = head_with_accounting(sandbox)
    assert sandbox.run(STEP, env=env).returncode == 0
    conf = sandbox.root / "etc/slurm/slurmdbd.conf"
    conf.write_text(conf.read_text() + "DebugLevel=verbose\n")
    (sandbox.path / "calls.log").unlink()
    assert sandbox.run(STEP, env=env).returncode == 0
    restarts = [c for c in sandbox.calls("systemctl") if c.startswith("restart")]
    assert restarts == ["restart slurmdbd.service"]


@pytest.mark.parametrize(
    ("breakage", "message"),
    [
        ("mariadb", "mariadb did not start (journalctl -u mariadb)"),
        ("sacctmgr", "slurmdbd did not answer within 0s"),
        ("apt-get", "apt-get install mariadb-server failed"),
    ],
)
def test_failures_are_one_clear_line(sandbox: Sandbox, breakage: str, message: str) -> None:
    """MariaDB not starting, slurmdbd never answering or apt failing exits 1 with one line and no done record."""
    env = head_with_accounting(sandbox)
    if breakage == "mariadb":
        sandbox.replace(
            "systemctl",
            'printf "systemctl %s\\n" "$*" >>"$SANDBOX/calls.log"\n'
            'case "$*" in *mariadb.service) [ "$1" = is-active ] || exit 1 ;; esac\n',
        )
    elif breakage == "sacctmgr":
        (sandbox.path / "pkg" / "sacctmgr").write_text("#!/usr/bin/env bash\nexit 1\n")
    else:
        sandbox.replace("apt-get", "exit 100\n")
    result = sandbox.run(STEP, env=env)
    assert result.returncode == 1
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(f"{STEP}: {message}")
    assert not (sandbox.root / "var/lib/gb300/slurm/slurmdbd-setup.done").exists()


def test_without_slurmdbd_the_step_does_nothing(sandbox: Sandbox) -> None:
    """A head without gb300:head.slurmdbd runs the step as a no-op: nothing installed, started or written."""
    env = head_with_accounting(sandbox, OFF)
    before = snapshot(sandbox.root)
    result = sandbox.run(STEP, env=env)
    assert result.returncode == 0, result.stderr
    assert snapshot(sandbox.root) == before
    assert sandbox.calls("apt-get") == []
    assert sandbox.calls("systemctl") == []
    assert not (sandbox.path / "mariadb").exists()
