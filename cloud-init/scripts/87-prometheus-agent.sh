#!/usr/bin/env bash
# 87-prometheus-agent: Prometheus in agent mode scrapes the local exporters and remote-writes to Azure Monitor.
set -euo pipefail
# shellcheck source=../lib/gb300-lib.sh
. "${GB300_ROOT:-}/usr/local/lib/gb300/lib.sh"
# shellcheck source=/dev/null  # rendered by gb300 from templates/monitoring.env.j2
. "${GB300_ROOT:-}/etc/gb300/monitoring.env"

# Deploy-time values from the VM's tags: where to write, and as which identity.
tag="${GB300_ROOT:-}/usr/local/lib/gb300/imds-tag"
write_url=$("$tag" gb300-prom-write) || fail "cannot read this VM's tags from the instance metadata service"
client_id=$("$tag" gb300-node-client-id) || fail "cannot read this VM's tags from the instance metadata service"
# No spaces, pipes, ampersands or backslashes: the URL goes into a sed replacement below.
url_re='^https://[A-Za-z0-9.-]+/[^[:space:]|&\\]+$'
[[ "$write_url" =~ $url_re ]] ||
  fail "the VM tag gb300-prom-write must be the remote-write URL (got '${write_url}'); see the prometheusRemoteWriteUrl stack output"
[[ "$client_id" =~ ^[0-9a-fA-F-]{36}$ ]] || fail "the VM tag gb300-node-client-id must be a client id (got '${client_id}')"
write_if_changed "${GB300_ROOT:-}/etc/gb300/prometheus-agent.yml" < <(
  sed -e "s|@GB300_PROM_WRITE_URL@|${write_url}|g" -e "s|@GB300_NODE_CLIENT_ID@|${client_id}|g" \
    "${GB300_ROOT:-}/etc/gb300/prometheus-agent.yml.in"
)
config_changed=$GB300_CHANGED
if ! command -v prometheus >/dev/null 2>&1; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$GB300_PROMETHEUS_PACKAGE" ||
    fail "apt-get install ${GB300_PROMETHEUS_PACKAGE} failed"
fi
# The package creates the prometheus user: the agent asks IMDS for its token, so the guard lets that user through.
"${GB300_ROOT:-}/usr/local/sbin/gb300-imds-guard" || fail "cannot let the prometheus user through the IMDS guard"
# The distro package enables a full Prometheus server; gb300 runs only the agent.
if systemctl is-enabled --quiet prometheus 2>/dev/null; then
  systemctl disable --now prometheus || fail "cannot stop the distribution's prometheus.service"
fi

# Per-node labels: the rack is this VM's scale set (one per NVL72 rack), the NVLink domain comes from 80-fabric.
compute=$(curl -sf -H Metadata:true "http://169.254.169.254/metadata/instance/compute?api-version=2021-02-01") ||
  fail "cannot read the instance metadata service (169.254.169.254)"
rack=$(python3 -c 'import json, sys; print(json.load(sys.stdin).get("vmScaleSetName") or "none")' <<<"$compute")
domain=none
fabric="${GB300_STATE_DIR}/fabric.json"
if [ -r "$fabric" ]; then
  domain=$(python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); print(str(d["ClusterUUID"]) + "/" + str(d["CliqueId"]))' "$fabric")
fi
host=$(hostname)
targets="${GB300_ROOT:-}/etc/gb300/prometheus/targets"
mkdir -p "$targets"
label_json() {
  python3 -c 'import json, sys; print(json.dumps([{"targets": [sys.argv[1]], "labels": {"instance": sys.argv[2], "rack": sys.argv[3], "nvlink_domain": sys.argv[4]}}] if sys.argv[1] else []))' "$@"
}
dcgm_target=""
if systemctl is-enabled --quiet gb300-dcgm-exporter 2>/dev/null; then dcgm_target=$GB300_DCGM_EXPORTER_LISTEN; fi
label_json "$dcgm_target" "$host" "$rack" "$domain" | write_if_changed "${targets}/dcgm.json"
label_json "$GB300_NODE_EXPORTER_LISTEN" "$host" "$rack" "$domain" | write_if_changed "${targets}/node.json"

data="${GB300_STATE_DIR}/prometheus-agent"
mkdir -p "$data"
chown prometheus:prometheus "$data" || fail "no prometheus user: the ${GB300_PROMETHEUS_PACKAGE} package creates it"
systemctl daemon-reload
ensure_service gb300-prometheus-agent
if [ "$config_changed" = 1 ]; then
  systemctl reload-or-restart gb300-prometheus-agent || fail "gb300-prometheus-agent does not take its new configuration"
fi
for _ in $(seq 1 30); do
  if curl -sf http://127.0.0.1:9090/-/ready >/dev/null 2>&1; then
    record "agent ready; rack ${rack}, nvlink domain ${domain}"
    exit 0
  fi
  sleep 2
done
fail "the Prometheus agent is not ready after 60 s (see journalctl -u gb300-prometheus-agent)"
