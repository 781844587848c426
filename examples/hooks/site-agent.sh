#!/usr/bin/env bash
# An example gb300 hook (point afterHealthGate): start a site agent once the node passed its health gate.
set -euo pipefail
echo "site agent for cluster ${GB300_CLUSTER}: node passed its health gate"
