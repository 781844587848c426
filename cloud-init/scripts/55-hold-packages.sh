#!/usr/bin/env bash
# 55-hold-packages: apt-mark hold every installed pinned package, so upgrades cannot drift the stack.
set -euo pipefail
# shellcheck source=../lib/gb300-lib.sh
. "${GB300_ROOT:-}/usr/local/lib/gb300/lib.sh"

read -r -a components <<<"${GB300_SW_COMPONENTS:-}"
held=$(apt-mark showhold)
wanted=()
for c in "${components[@]}"; do
  [ -n "$(sw "$c" VERSION)" ] || continue
  read -r -a pkgs <<<"$(sw "$c" PACKAGES)"
  for p in "${pkgs[@]}"; do
    if dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q ' installed$'; then
      grep -qx "$p" <<<"$held" || wanted+=("$p")
    fi
  done
done
if [ "${#wanted[@]}" -gt 0 ]; then
  apt-mark hold "${wanted[@]}" >/dev/null || fail "apt-mark hold ${wanted[*]} failed"
  log "held ${wanted[*]}"
fi
record "held $(apt-mark showhold | sort | tr '\n' ' ')"
