#!/usr/bin/env bash
# 86-node-exporter: the node exporter (InfiniBand and textfile collectors) on 127.0.0.1:9100, and gb300's node metrics.
set -euo pipefail
# shellcheck source=../lib/gb300-lib.sh
. "${GB300_ROOT:-}/usr/local/lib/gb300/lib.sh"
# shellcheck source=/dev/null  # rendered by gb300 from templates/monitoring.env.j2
. "${GB300_ROOT:-}/etc/gb300/monitoring.env"

pkg=$GB300_NODE_EXPORTER_PACKAGE
if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$pkg" ||
    fail "apt-get install ${pkg} failed"
fi
mkdir -p "${GB300_ROOT:-}${GB300_TEXTFILE_DIR}"
systemctl daemon-reload
ensure_service prometheus-node-exporter
# The gb300 drop-in moves the listener to GB300_NODE_EXPORTER_LISTEN; restart once if it is not there yet.
if ! curl -sf "http://${GB300_NODE_EXPORTER_LISTEN}/metrics" >/dev/null 2>&1; then
  systemctl restart prometheus-node-exporter || fail "prometheus-node-exporter does not restart"
  sleep 2
fi
metrics=$(curl -sf "http://${GB300_NODE_EXPORTER_LISTEN}/metrics") ||
  fail "the node exporter does not answer on ${GB300_NODE_EXPORTER_LISTEN} (see journalctl -u prometheus-node-exporter)"
grep -q '^node_infiniband_state_id' <<<"$metrics" ||
  warn "the node exporter reports no InfiniBand ports; IB panels and alerts will be empty for this node"
ensure_service gb300-node-metrics.timer
"${GB300_ROOT:-}/usr/local/lib/gb300/gb300-node-metrics" || fail "gb300-node-metrics failed"
record "node exporter on ${GB300_NODE_EXPORTER_LISTEN}" "textfile ${GB300_TEXTFILE_DIR}"
