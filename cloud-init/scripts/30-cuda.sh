#!/usr/bin/env bash
# 30-cuda: the CUDA toolkit and runtime at the pinned version.
set -euo pipefail
# shellcheck source=../lib/gb300-lib.sh
. "${GB300_ROOT:-}/usr/local/lib/gb300/lib.sh"

verify_or_install cuda
record "$GB300_FOUND"
