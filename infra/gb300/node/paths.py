"""Where things live on a node: one name per path, each written here once (issue 37).

Every module that writes a file to a node, or reads one there at run time, names its path with a constant of this
module, so a path is spelled in one place. It imports nothing, so the head's loop, which ships with only the modules
it imports (:mod:`gb300.heal.deploy`), can read it too.
"""

from __future__ import annotations

SBIN = "/usr/local/sbin"
"""Where node tools are installed (on ``PATH`` for root and systemd units)."""
UNIT_STAGING = "/opt/gb300/systemd"
"""Units a role carries but enables only when its boot step says so: staged here, linked into systemd later."""

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
