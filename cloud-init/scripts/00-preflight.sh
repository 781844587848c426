#!/usr/bin/env bash
# 00-preflight: the rendered environment is in place; record the image's facts.
set -euo pipefail
# shellcheck source=../lib/gb300-lib.sh
. "${GB300_ROOT:-}/usr/local/lib/gb300/lib.sh"

for f in cluster.env node.env; do
  [ -r "${GB300_ROOT:-}/etc/gb300/${f}" ] || fail "/etc/gb300/${f} is missing: custom data was not applied by cloud-init"
done
if [ "${GB300_ROLE:-}" = gpu-node ]; then
  [ -r "${GB300_ROOT:-}/etc/gb300/versions.env" ] || fail "/etc/gb300/versions.env is missing"
  arch=$(uname -m)
  [ "$arch" = aarch64 ] || fail "a GB300 node must be arm64 (aarch64); this one is ${arch}: check the pool's image"
fi
os="unknown"
if [ -r "${GB300_ROOT:-}/etc/os-release" ]; then
  # shellcheck disable=SC1091  # the node's own os-release
  os=$(. "${GB300_ROOT:-}/etc/os-release" && printf '%s %s' "${ID:-?}" "${VERSION_ID:-?}")
fi
log "cluster ${GB300_CLUSTER:-?}, pool ${GB300_POOL:-?}, role ${GB300_ROLE:-?}, os ${os}"
record "cluster ${GB300_CLUSTER:-?}" "pool ${GB300_POOL:-?}" "role ${GB300_ROLE:-?}" "os ${os}"
