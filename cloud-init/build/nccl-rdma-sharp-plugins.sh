#!/usr/bin/env bash
# Build recipe for nccl-rdma-sharp-plugins (install: source in infra/gb300/data/versions.yaml), run by the
# library's build_from_source in the unpacked source tree. The same autogen/configure/make as azhpc-images
# (components/install_nccl.sh), against the pinned CUDA; installs libnccl-net.so under
# /usr/local/nccl-rdma-sharp-plugins/lib (the detect path), which the NCCL profile script then puts on
# LD_LIBRARY_PATH.
set -euo pipefail
# shellcheck source=../lib/gb300-lib.sh
. "${GB300_ROOT:-}/usr/local/lib/gb300/lib.sh"

cuda=$(sw cuda VERSION)
[ -n "$cuda" ] || fail "nccl-rdma-sharp-plugins: versions.yaml pins no cuda version, so the CUDA path is unknown"
prefix="${GB300_ROOT:-}/usr/local/nccl-rdma-sharp-plugins"

./autogen.sh || fail "nccl-rdma-sharp-plugins: autogen.sh failed"
./configure --prefix="$prefix" --with-cuda="${GB300_ROOT:-}/usr/local/cuda-${cuda}" ||
  fail "nccl-rdma-sharp-plugins: configure failed (see journalctl -t gb300-${GB300_STEP})"
make -j "$(nproc)" || fail "nccl-rdma-sharp-plugins: make failed (see journalctl -t gb300-${GB300_STEP})"
make install || fail "nccl-rdma-sharp-plugins: make install failed"
[ -e "$prefix/lib/libnccl-net.so" ] || fail "nccl-rdma-sharp-plugins: make install put no lib/libnccl-net.so under the prefix"
log "nccl-rdma-sharp-plugins $(sw nccl-rdma-sharp-plugins VERSION): installed /usr/local/nccl-rdma-sharp-plugins/lib/libnccl-net.so"
