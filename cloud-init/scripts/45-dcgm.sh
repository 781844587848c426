#!/usr/bin/env bash
# 45-dcgm: DCGM at its pinned version, host engine running.
set -euo pipefail
# shellcheck source=../lib/gb300-lib.sh
. "${GB300_ROOT:-}/usr/local/lib/gb300/lib.sh"

verify_or_install dcgm
ensure_service nvidia-dcgm
record "$GB300_FOUND" "nvidia-dcgm running"
