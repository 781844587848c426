#!/usr/bin/env bash
# 00-imds-guard: before any other step, close the instance metadata service to local users other than root and
# the allowed service users, and the WireServer to users other than root except DNS (gb300-imds-guard); keep
# them closed at every boot (gb300-imds-guard.service) and put the table back within seconds if anything
# flushes or changes it (gb300-imds-guard.timer).
set -euo pipefail
# shellcheck source=../lib/gb300-lib.sh
. "${GB300_ROOT:-}/usr/local/lib/gb300/lib.sh"

"${GB300_ROOT:-}/usr/local/sbin/gb300-imds-guard" ||
  fail "cannot close the instance metadata service to other users (nft; see journalctl -t gb300-00-imds-guard)"
if ! systemctl is-enabled --quiet gb300-imds-guard.service || ! systemctl is-enabled --quiet gb300-imds-guard.timer; then
  systemctl daemon-reload
  systemctl enable gb300-imds-guard.service gb300-imds-guard.timer ||
    fail "cannot enable gb300-imds-guard.service and gb300-imds-guard.timer"
fi
systemctl is-active --quiet gb300-imds-guard.timer || systemctl start gb300-imds-guard.timer ||
  fail "cannot start gb300-imds-guard.timer"
record "IMDS closed to users other than root and the allowed services, WireServer to all but root except DNS; gb300-imds-guard.service and .timer enabled"
