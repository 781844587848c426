#!/usr/bin/env bash
# 10-tuning: apply /etc/sysctl.d/90-gb300.conf; limits and GPU nodes' systemd NUMA file are read at login/boot.
set -euo pipefail
# shellcheck source=../lib/gb300-lib.sh
. "${GB300_ROOT:-}/usr/local/lib/gb300/lib.sh"

read -r -a settings <<<"${GB300_SYSCTL:-}"
# sunrpc.* exist only with the sunrpc module loaded.
for kv in "${settings[@]}"; do
  case "$kv" in sunrpc.*) ensure_module sunrpc ;; esac
done
stale=()
for kv in "${settings[@]}"; do
  # A list value (tcp_rmem) comes with commas; sysctl prints whitespace.
  key=${kv%%=*} want=${kv#*=}
  got=$(sysctl -n "$key" 2>/dev/null | tr -s '[:space:]' ',' || true)
  [ "${got%,}" = "$want" ] || stale+=("$key")
done
if [ "${#stale[@]}" -gt 0 ]; then
  log "applying sysctl settings: ${stale[*]}"
  sysctl -q -p "${GB300_ROOT:-}/etc/sysctl.d/90-gb300.conf" || fail "sysctl could not apply /etc/sysctl.d/90-gb300.conf"
fi
[ -r "${GB300_ROOT:-}/etc/security/limits.d/90-gb300.conf" ] || fail "/etc/security/limits.d/90-gb300.conf is missing"
files=("limits /etc/security/limits.d/90-gb300.conf") # path as text, not accessed
if [ "${GB300_ROLE:-}" = gpu-node ]; then
  grep -q '^NUMAPolicy=' "${GB300_ROOT:-}/etc/systemd/system.conf.d/90-gb300-numa.conf" 2>/dev/null ||
    fail "/etc/systemd/system.conf.d/90-gb300-numa.conf is missing or sets no NUMAPolicy"
  files+=("systemd NUMA /etc/systemd/system.conf.d/90-gb300-numa.conf (from the next boot)") # path as text, not accessed
fi
record "sysctl ${GB300_SYSCTL:-}" "${files[@]}"
