#!/usr/bin/env bash
# 00-preflight: the rendered environment is in place; record the image's facts.
set -euo pipefail
# shellcheck source=../lib/gb300-lib.sh
. "${GB300_ROOT:-}/usr/local/lib/gb300/lib.sh"

for f in cluster.env node.env; do
  [ -r "${GB300_ROOT:-}/etc/gb300/${f}" ] || fail "/etc/gb300/${f} is missing: custom data was not applied by cloud-init"
done
if [ "${GB300_ROLE:-}" = gpu-node ]; then
  [ -r "${GB300_ROOT:-}/etc/gb300/versions.env" ] || fail "/etc/gb300/versions.env is missing"
  arch=$(uname -m)
  [ "$arch" = aarch64 ] || fail "a GB300 node must be arm64 (aarch64); this one is ${arch}: check the pool's image"
fi
os="unknown"
if [ -r "${GB300_ROOT:-}/etc/os-release" ]; then
  # shellcheck disable=SC1091  # the node's own os-release
  os=$(. "${GB300_ROOT:-}/etc/os-release" && printf '%s %s' "${ID:-?}" "${VERSION_ID:-?}")
fi
# The image this node booted: what it records about itself (azhpc-images' component_versions.txt) against
# what gb300's image catalog says the stack's pinned version carries (GB300_IMAGE_RECORD, KEY=version pairs).
# A difference is a warning: the software steps that follow still enforce every pinned component.
image="image ${GB300_IMAGE:-unknown}"
if [ -n "${GB300_IMAGE_RECORD:-}" ]; then
  file="${GB300_ROOT:-}${GB300_IMAGE_RECORD_FILE:-/opt/azurehpc/component_versions.txt}"
  if [ ! -r "$file" ]; then
    warn "${file} is missing: cannot check that this node booted ${GB300_IMAGE:-the pinned image}"
    image="${image}: not verified (no ${file})"
  elif differ=$(python3 - "$file" "$GB300_IMAGE_RECORD" <<'PY'
import json
import sys

record = json.load(open(sys.argv[1], encoding="utf-8"))


def plain(version):
    return version.split(":", 1)[-1]


def same(found, want):
    found, want = plain(found), plain(want)
    return found == want or any(a.startswith(b + s) for a, b in ((found, want), (want, found)) for s in "-+.")


for pair in sys.argv[2].split():
    key, want = pair.split("=", 1)
    found = str(record.get(key, ""))
    if not same(found, want):
        print(f"{key} {found or 'absent'} (catalog: {want})")
PY
  ); then
    if [ -n "$differ" ]; then
      differ=${differ//$'\n'/; }
      warn "this node's image records ${differ}, not what the catalog lists for ${GB300_IMAGE:-?}:" \
        "it booted another image, or infra/gb300/data/images.yaml is wrong about that version"
      image="${image}: differs from the catalog (${differ})"
    else
      image="${image}: verified against ${file}"
    fi
  else
    warn "cannot read ${file}: the image's component versions were not checked"
    image="${image}: not verified (unreadable ${file})"
  fi
fi
log "cluster ${GB300_CLUSTER:-?}, pool ${GB300_POOL:-?}, role ${GB300_ROLE:-?}, os ${os}, ${image}"
record "cluster ${GB300_CLUSTER:-?}" "pool ${GB300_POOL:-?}" "role ${GB300_ROLE:-?}" "os ${os}" "${image}"
