#!/usr/bin/env bash
# 85-dcgm-exporter: the DCGM exporter serves GPU metrics on 127.0.0.1:9400, attached to nvidia-dcgm when it runs.
set -euo pipefail
# shellcheck source=../lib/gb300-lib.sh
. "${GB300_ROOT:-}/usr/local/lib/gb300/lib.sh"
# shellcheck source=/dev/null  # rendered by gb300 from templates/monitoring.env.j2
. "${GB300_ROOT:-}/etc/gb300/monitoring.env"

command -v docker >/dev/null 2>&1 || fail "docker is not installed; the 50-containers step installs it"
# The image already runs DCGM's host engine (45-dcgm): attach to it instead of starting a second one.
if systemctl is-active --quiet nvidia-dcgm; then
  mode="remote host engine"
  exporter_args="--remote-hostengine-info localhost:5555"
  docker_args=""
else
  mode="embedded host engine"
  exporter_args=""
  docker_args="--gpus all --cap-add SYS_ADMIN"
fi
# Fed with < <(...), not a pipe, so GB300_CHANGED survives (see write_if_changed).
write_if_changed "${GB300_ROOT:-}/etc/gb300/dcgm-exporter.env" < <(
  printf 'GB300_DCGM_EXPORTER_ARGS="%s"\nGB300_DCGM_EXPORTER_DOCKER_ARGS="%s"\n' "$exporter_args" "$docker_args"
)
changed=$GB300_CHANGED

if ! docker image inspect "$GB300_DCGM_EXPORTER_IMAGE" >/dev/null 2>&1; then
  docker pull "$GB300_DCGM_EXPORTER_IMAGE" || fail "cannot pull ${GB300_DCGM_EXPORTER_IMAGE} (egress through the NAT gateway to nvcr.io?)"
fi
systemctl daemon-reload
ensure_service gb300-dcgm-exporter
if [ "$changed" = 1 ]; then
  systemctl restart gb300-dcgm-exporter || fail "gb300-dcgm-exporter does not restart (see journalctl -u gb300-dcgm-exporter)"
fi
for _ in $(seq 1 30); do
  if curl -sf "http://${GB300_DCGM_EXPORTER_LISTEN}/metrics" | grep -q '^DCGM_FI_DEV_GPU_UTIL'; then
    record "dcgm-exporter (${mode}) on ${GB300_DCGM_EXPORTER_LISTEN}" "${GB300_DCGM_EXPORTER_IMAGE}"
    exit 0
  fi
  sleep 2
done
fail "the DCGM exporter serves no DCGM_FI_DEV_GPU_UTIL on ${GB300_DCGM_EXPORTER_LISTEN} after 60 s (see journalctl -u gb300-dcgm-exporter)"
