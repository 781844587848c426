#!/usr/bin/env bash
# 35-nvidia-imex: nvidia-imex at the driver's version, IMEX channel0, the IMEX command service on, service enabled.
set -euo pipefail
# shellcheck source=../lib/gb300-lib.sh
. "${GB300_ROOT:-}/usr/local/lib/gb300/lib.sh"

verify_or_install nvidia-imex
imex=$GB300_FOUND
grep -q 'NVreg_CreateImexChannel0=1' "${GB300_ROOT:-}/etc/modprobe.d/90-gb300-nvidia.conf" ||
  fail "/etc/modprobe.d/90-gb300-nvidia.conf must set NVreg_CreateImexChannel0=1"
[ -e "${GB300_ROOT:-}/dev/nvidia-caps-imex-channels/channel0" ] ||
  fail "IMEX channel0 (/dev/nvidia-caps-imex-channels/channel0) is missing: the nvidia module was loaded before NVreg_CreateImexChannel0=1 was set; reboot the node"
# The command service lets `nvidia-imex-ctl -q` answer (the prolog waits for READY); each key replaces its line.
cfg="${GB300_ROOT:-}/etc/nvidia-imex/config.cfg"
[ -r "$cfg" ] || fail "/etc/nvidia-imex/config.cfg is missing: the nvidia-imex package installs it"
read -r -a keys <<<"${GB300_IMEX_CONFIG:-}"
edits=()
for kv in "${keys[@]}"; do edits+=(-e "s|^#\?[[:space:]]*${kv%%=*}=.*|${kv}|"); done
write_if_changed "$cfg" < <(
  sed "${edits[@]}" "$cfg"
  for kv in "${keys[@]}"; do grep -q "^#\?[[:space:]]*${kv%%=*}=" "$cfg" || printf '%s\n' "$kv"; done
)
[ "$GB300_CHANGED" = 0 ] || log "set ${keys[*]} in /etc/nvidia-imex/config.cfg"
# The nodes file is written per job (scheduler prolog), and IMEX reads both files only at start: enable, not start.
if ! systemctl is-enabled --quiet nvidia-imex; then
  systemctl enable nvidia-imex || fail "cannot enable nvidia-imex"
fi
record "$imex" "channel0 present" "config.cfg ${keys[*]}" "nvidia-imex enabled"
