#!/usr/bin/env bash
# 55-hold-packages: apt-mark hold every installed pinned package and the kernel (meta packages and the running
# kernel's own), so no upgrade, unattended or by hand, drifts the stack (why holds: docs/node-software.md).
set -euo pipefail
# shellcheck source=../lib/gb300-lib.sh
. "${GB300_ROOT:-}/usr/local/lib/gb300/lib.sh"

installed() { dpkg-query -W -f='${Status}\n' "$1" 2>/dev/null | grep -q ' installed$'; }
read -r -a components <<<"${GB300_SW_COMPONENTS:-}"
candidates=()
for c in "${components[@]}"; do
  [ -n "$(sw "$c" VERSION)" ] || continue
  read -r -a pkgs <<<"$(sw "$c" PACKAGES)"
  candidates+=("${pkgs[@]}")
done
read -r -a kernel_pkgs <<<"${GB300_KERNEL_HOLD:-}"
running=$(uname -r)
candidates+=("${kernel_pkgs[@]}" "linux-image-${running}" "linux-modules-${running}" "linux-modules-extra-${running}" "linux-headers-${running}")
held=$(apt-mark showhold)
wanted=()
for p in "${candidates[@]}"; do
  if installed "$p"; then
    grep -qx "$p" <<<"$held" || wanted+=("$p")
  fi
done
if [ "${#wanted[@]}" -gt 0 ]; then
  apt-mark hold "${wanted[@]}" >/dev/null || fail "apt-mark hold ${wanted[*]} failed"
  log "held ${wanted[*]}"
fi
record "held $(apt-mark showhold | sort | tr '\n' ' ')"
