#!/usr/bin/env bash
# 40-nccl: NCCL at its pinned version, nccl-tests and the optional sharp plugin (built from pinned source
# when absent), and the GB NCCL environment.
set -euo pipefail
# shellcheck source=../lib/gb300-lib.sh
. "${GB300_ROOT:-}/usr/local/lib/gb300/lib.sh"

found=()
for c in nccl nccl-rdma-sharp-plugins nccl-tests; do
  verify_or_install "$c"
  found+=("$GB300_FOUND")
done
grep -qx 'NCCL_MNNVL_ENABLE=1' "${GB300_ROOT:-}/etc/nccl.conf" || fail "/etc/nccl.conf must enable MNNVL (NCCL_MNNVL_ENABLE=1)"
[ -r "${GB300_ROOT:-}/etc/profile.d/gb300-nccl.sh" ] || fail "/etc/profile.d/gb300-nccl.sh is missing"
record "${found[@]}" "/etc/nccl.conf MNNVL on"
