#!/usr/bin/env bash
# An example gb300 hook (point prolog): record which job starts on this node.
set -euo pipefail
echo "job ${SLURM_JOB_ID:-none} of ${SLURM_JOB_USER:-nobody} starts on pool ${GB300_POOL}"
