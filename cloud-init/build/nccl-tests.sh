#!/usr/bin/env bash
# Build recipe for nccl-tests (install: source in infra/gb300/data/versions.yaml), run by the library's
# build_from_source in the unpacked source tree with NVCC_GENCODE and MPI_HOME exported from build_env.
# Builds with MPI against Ubuntu's Open MPI, the pinned CUDA and the NCCL in /usr (libnccl-dev), then
# installs the binaries where the Ubuntu-HPC image keeps them: /opt/nccl-tests/build (the detect path).
set -euo pipefail
# shellcheck source=../lib/gb300-lib.sh
. "${GB300_ROOT:-}/usr/local/lib/gb300/lib.sh"

: "${NVCC_GENCODE:?versions.yaml nccl-tests.build_env must set NVCC_GENCODE}"
: "${MPI_HOME:?versions.yaml nccl-tests.build_env must set MPI_HOME}"
cuda=$(sw cuda VERSION)
[ -n "$cuda" ] || fail "nccl-tests: versions.yaml pins no cuda version, so CUDA_HOME is unknown"
cuda_home="${GB300_ROOT:-}/usr/local/cuda-${cuda}"
[ -e "${cuda_home}/bin/nvcc" ] || fail "nccl-tests: /usr/local/cuda-${cuda}/bin/nvcc is missing (the 30-cuda step installs it)"

make -j "$(nproc)" MPI=1 MPI_HOME="${GB300_ROOT:-}${MPI_HOME}" CUDA_HOME="$cuda_home" \
  NCCL_HOME="${GB300_ROOT:-}/usr" NVCC_GENCODE="$NVCC_GENCODE" ||
  fail "nccl-tests: make failed (see journalctl -t gb300-${GB300_STEP})"
[ -x build/all_reduce_perf ] || fail "nccl-tests: the build produced no build/all_reduce_perf"

# Replace only /opt/nccl-tests/build, and only as a whole: all_reduce_perf appears when every binary is there.
dest="${GB300_ROOT:-}/opt/nccl-tests"
mkdir -p "$dest"
rm -rf "$dest/build.gb300-new"
cp -a build "$dest/build.gb300-new"
rm -rf "$dest/build"
mv "$dest/build.gb300-new" "$dest/build"
log "nccl-tests $(sw nccl-tests VERSION): installed $(find "$dest/build" -maxdepth 1 -name '*_perf' | wc -l) binaries in /opt/nccl-tests/build"
