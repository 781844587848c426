"""Where things live on a node: the paths more than one module names, each written here once (issue 37).

A path only the node registry writes is named in its row (:mod:`gb300.node.registry`); a path that another module
also needs (a template argument, the payload packer, the heal loop, a command reading a node) is named here, and
the registry's row reads it from here. So every node path literal is spelled in one module. It imports nothing, so
the head's loop, which ships with only the modules it imports (:mod:`gb300.heal.deploy`), can read it too.
"""

from __future__ import annotations

SBIN = "/usr/local/sbin"
"""Where node tools are installed (on ``PATH`` for root and systemd units)."""
UNIT_STAGING = "/opt/gb300/systemd"
"""Units a role carries but enables only when its boot step says so: staged here, linked into systemd later."""
SYSTEMD = "/etc/systemd/system"
"""systemd's unit folder: units every boot enables (the guard, the resume unit, the exporters)."""
ETC = "/etc/gb300"
"""gb300's own settings on a node (environment files the steps source)."""

LIB = "/usr/local/lib/gb300"
"""The step library, the step scripts, the build recipes and gb300's helpers."""
STEP_DIR = f"{LIB}/steps"
"""Every step script lands here as ``<name>.sh`` (``run-step <name>`` runs it)."""
RUN_STEP = f"{LIB}/run-step"
BUILD_DIR = f"{LIB}/build"
"""The build recipes of the ``install: source`` components (``<recipe>.sh``)."""
IMDS_TAG = f"{LIB}/imds-tag"
"""Reads one VM tag from IMDS (the steps' one way to a deploy-time value, :data:`gb300.tags.NODE_READS`)."""
IMDS_GUARD = f"{SBIN}/gb300-imds-guard"
"""The IMDS guard script its units run (:mod:`gb300.node.imds_guard`)."""
IMDS_GUARD_UNIT = f"{SYSTEMD}/gb300-imds-guard.service"
IMDS_GUARD_RECHECK = f"{SYSTEMD}/gb300-imds-guard-recheck.service"
IMDS_GUARD_TIMER = f"{SYSTEMD}/gb300-imds-guard.timer"

FETCH_PAYLOAD = f"{LIB}/fetch-payload"
"""Where the fetch script lands (inline, from the custom data)."""
PAYLOAD_ENV = f"{ETC}/payload.env"
"""The payload's base URL, name, cluster, public key, retry settings and read limits (inline, from the custom
data; the limits are ``payload_limits`` in node.yaml)."""
PAYLOAD_UPDATE = f"{SBIN}/gb300-payload-update"
"""Takes a newer signed payload in place: the same fetch and checks, forward only (from the payload)."""

SLURM_LIB = "/opt/gb300/lib"
"""The head's copy of gb300's topology generator (``gb300/slurm/*.py``), run by ``gb300-topology-refresh``."""
PYXIS_PLUGIN = "/usr/local/lib/slurm/spank_pyxis.so"
"""Where ``gb300-pyxis-setup`` installs pyxis's SPANK plugin (plugstack.conf names it)."""
STATUS = "/var/lib/gb300/status"
"""The bootstrap's progress, written by ``run-step`` and read by ``gb300 status`` through Run Command."""

HEAL_HOME = "/opt/gb300/heal"
"""The head's remediation loop: its Python tree, requirements and examples (``gb300.paths.REPO_ROOT`` there)."""
HEAL_CONFIG = "/etc/gb300/heal.json"
"""The loop's cluster description, rendered by :func:`gb300.heal.deploy.config_json`."""
HEAL_STATE_DIR = "/var/lib/gb300/heal"
"""The loop's state, lock, topology view and rack NCCL results."""
HEAL_STATE = f"{HEAL_STATE_DIR}/state.json"
HEAL_LOCK = f"{HEAL_STATE_DIR}/lock"
HEAL_TOPOLOGY_VIEW = f"{HEAL_STATE_DIR}/topology.conf"
HEAL_NCCL_DIR = f"{HEAL_STATE_DIR}/nccl"
HEAL_DECISION_LOG = "/var/log/gb300/health/remediation.log"
"""The loop's decision records: the data collection rule ships ``/var/log/gb300/health/*.log`` to Azure Monitor."""
HOOK_DIR = f"{LIB}/hooks"
"""Where the hooks of ``gb300:hooks`` land, one file per hook (``<name>``); ``run-hooks`` runs them."""
RUN_HOOKS = f"{LIB}/run-hooks"
"""The runner of the hooks at one point: ``run-hooks <point>`` (a step, or the IMEX prolog and epilog)."""
HOOKS_TABLE = f"{ETC}/hooks.tsv"
"""The hooks a node runs: point, name, timeout, on-failure and sha256, one per line (``run-hooks`` reads it)."""
