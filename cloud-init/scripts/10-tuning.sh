#!/usr/bin/env bash
# 10-tuning: apply the sysctl settings placed in /etc/sysctl.d/90-gb300.conf (limits need no action).
set -euo pipefail
# shellcheck source=../lib/gb300-lib.sh
. "${GB300_ROOT:-}/usr/local/lib/gb300/lib.sh"

read -r -a settings <<<"${GB300_SYSCTL:-}"
stale=()
for kv in "${settings[@]}"; do
  key=${kv%%=*} want=${kv#*=}
  got=$(sysctl -n "$key" 2>/dev/null || true)
  [ "$got" = "$want" ] || stale+=("$key")
done
if [ "${#stale[@]}" -gt 0 ]; then
  log "applying sysctl settings: ${stale[*]}"
  sysctl -q -p "${GB300_ROOT:-}/etc/sysctl.d/90-gb300.conf" || fail "sysctl could not apply /etc/sysctl.d/90-gb300.conf"
fi
[ -r "${GB300_ROOT:-}/etc/security/limits.d/90-gb300.conf" ] || fail "/etc/security/limits.d/90-gb300.conf is missing"
record "sysctl ${GB300_SYSCTL:-}" "limits /etc/security/limits.d/90-gb300.conf"
