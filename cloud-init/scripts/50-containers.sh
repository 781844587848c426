#!/usr/bin/env bash
# 50-containers: container runtime with nvidia-container-toolkit (CDI), enroot and pyxis.
set -euo pipefail
# shellcheck source=../lib/gb300-lib.sh
. "${GB300_ROOT:-}/usr/local/lib/gb300/lib.sh"

found=()
for c in moby nvidia-container-toolkit enroot pyxis; do
  verify_or_install "$c"
  found+=("$GB300_FOUND")
done
cdi="${GB300_ROOT:-}/etc/cdi/nvidia.yaml"
if [ ! -s "$cdi" ]; then
  nvidia-ctk cdi generate --output="$cdi" || fail "nvidia-ctk could not generate the CDI spec ${cdi}"
fi
if ! grep -q '"nvidia"' "${GB300_ROOT:-}/etc/docker/daemon.json" 2>/dev/null; then
  nvidia-ctk runtime configure --runtime=docker --cdi.enabled || fail "nvidia-ctk could not configure docker"
  systemctl restart docker || fail "docker does not restart after enabling the NVIDIA runtime"
fi
ensure_service docker
record "${found[@]}" "CDI spec /etc/cdi/nvidia.yaml" "docker running with the nvidia runtime"
