#!/usr/bin/env bash
# 99-ready: every earlier step recorded completion; mark the node ready, sentinel last.
set -euo pipefail
# shellcheck source=../lib/gb300-lib.sh
. "${GB300_ROOT:-}/usr/local/lib/gb300/lib.sh"

read -r -a steps <<<"${GB300_STEPS:-}"
for s in "${steps[@]}"; do
  [ "$s" = "$GB300_STEP" ] && continue
  [ -f "${GB300_STATE_DIR}/steps/${s}.done" ] || fail "step ${s} has no completion record; the node is not ready"
done
printf 'state: ready\n' | write_if_changed "$GB300_STATUS_FILE"
record "ready"
printf '%s\n' "${steps[@]}" | write_if_changed "$GB300_SENTINEL"
