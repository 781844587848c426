#!/usr/bin/env bash
# 25-doca-ofed: DOCA-OFED at its pinned version.
set -euo pipefail
# shellcheck source=../lib/gb300-lib.sh
. "${GB300_ROOT:-}/usr/local/lib/gb300/lib.sh"

verify_or_install doca-ofed
record "$GB300_FOUND"
