#!/usr/bin/env bash
# An example gb300 hook (point beforeSlurm): warm the node's local dataset cache before Slurm gives it jobs.
# Hooks see GB300_HOOK_POINT, GB300_HOOK_NAME, GB300_ROLE, GB300_POOL, GB300_RACK and GB300_CLUSTER, and no secret.
set -euo pipefail
echo "warming the dataset cache on ${GB300_ROLE} node of pool ${GB300_POOL} (rack ${GB300_RACK:-unknown})"
