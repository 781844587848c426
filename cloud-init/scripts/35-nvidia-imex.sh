#!/usr/bin/env bash
# 35-nvidia-imex: nvidia-imex at the driver's version, IMEX channel0, service enabled.
set -euo pipefail
# shellcheck source=../lib/gb300-lib.sh
. "${GB300_ROOT:-}/usr/local/lib/gb300/lib.sh"

verify_or_install nvidia-imex
imex=$GB300_FOUND
grep -q 'NVreg_CreateImexChannel0=1' "${GB300_ROOT:-}/etc/modprobe.d/90-gb300-nvidia.conf" ||
  fail "/etc/modprobe.d/90-gb300-nvidia.conf must set NVreg_CreateImexChannel0=1"
[ -e "${GB300_ROOT:-}/dev/nvidia-caps-imex-channels/channel0" ] ||
  fail "IMEX channel0 (/dev/nvidia-caps-imex-channels/channel0) is missing: the nvidia module was loaded before NVreg_CreateImexChannel0=1 was set; reboot the node"
# The nodes file is written per job (scheduler prolog), and IMEX reads it only at start: enable, not start.
if ! systemctl is-enabled --quiet nvidia-imex; then
  systemctl enable nvidia-imex || fail "cannot enable nvidia-imex"
fi
record "$imex" "channel0 present" "nvidia-imex enabled"
