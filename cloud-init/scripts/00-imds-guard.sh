#!/usr/bin/env bash
# 00-imds-guard: before any other step, close the instance metadata service to local users other than root and
# the allowed service users (gb300-imds-guard), and keep it closed at every boot (gb300-imds-guard.service).
set -euo pipefail
# shellcheck source=../lib/gb300-lib.sh
. "${GB300_ROOT:-}/usr/local/lib/gb300/lib.sh"

"${GB300_ROOT:-}/usr/local/sbin/gb300-imds-guard" ||
  fail "cannot close the instance metadata service to other users (nft; see journalctl -t gb300-00-imds-guard)"
if ! systemctl is-enabled --quiet gb300-imds-guard.service; then
  systemctl daemon-reload
  systemctl enable gb300-imds-guard.service || fail "cannot enable gb300-imds-guard.service"
fi
record "IMDS closed to users other than root and the allowed services; gb300-imds-guard.service enabled"
