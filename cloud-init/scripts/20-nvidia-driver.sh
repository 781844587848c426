#!/usr/bin/env bash
# 20-nvidia-driver: open driver 580 with CoherentGPUMemoryMode=driver, nvidia_peermem, persistence daemon.
set -euo pipefail
# shellcheck source=../lib/gb300-lib.sh
. "${GB300_ROOT:-}/usr/local/lib/gb300/lib.sh"

verify_or_install nvidia-driver
driver=$GB300_FOUND
grep -q 'NVreg_CoherentGPUMemoryMode=driver' "${GB300_ROOT:-}/etc/modprobe.d/90-gb300-nvidia.conf" ||
  fail "/etc/modprobe.d/90-gb300-nvidia.conf must set NVreg_CoherentGPUMemoryMode=driver"
if [ ! -d "${GB300_ROOT:-}/sys/module/nvidia" ]; then
  modprobe nvidia || fail "cannot load the nvidia kernel module"
fi
grep -q 'Open Kernel Module' "${GB300_ROOT:-}/proc/driver/nvidia/version" ||
  fail "the loaded NVIDIA driver is not the open kernel module GB300 needs ($(head -n 1 "${GB300_ROOT:-}/proc/driver/nvidia/version" 2>/dev/null || echo 'no /proc/driver/nvidia/version'))"
ensure_module nvidia_peermem
ensure_service nvidia-persistenced
record "$driver" "open kernel module" "nvidia_peermem loaded" "nvidia-persistenced running"
