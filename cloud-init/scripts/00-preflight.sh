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
# The booted image's record vs the catalog's entry for the pinned version (warn: later steps enforce pins).
image="image ${GB300_IMAGE:-?}"
if [ -n "${GB300_IMAGE_RECORD:-}" ]; then
  read -ra r <<<"$GB300_IMAGE_RECORD"
  f="${GB300_ROOT:-}${r[0]}" d=""
  if [ -r "$f" ]; then
    for kv in "${r[@]:1}"; do
      g=$(sed -n "s/.*\"${kv%%=*}\": *\"\([^\"]*\)\".*/\1/p" "$f")
      version_matches "${kv#*=}" "$g" || d+=" ${kv%%=*} ${g:-absent} not ${kv#*=}"
    done
    image+=": ${d:+differs:}${d:-verified}"
    [ -z "$d" ] || warn "$image"
  else
    image+=": not verified (no ${r[0]})"
  fi
fi
log "cluster ${GB300_CLUSTER:-?}, pool ${GB300_POOL:-?}, role ${GB300_ROLE:-?}, os ${os}, ${image}"
record "cluster ${GB300_CLUSTER:-?}" "pool ${GB300_POOL:-?}" "role ${GB300_ROLE:-?}" "os ${os}" "${image}"
