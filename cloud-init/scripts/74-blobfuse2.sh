#!/usr/bin/env bash
# 74-blobfuse2: mount the configured Blob containers with BlobFuse2 (block cache), as the node's managed identity.
set -euo pipefail
# shellcheck source=../lib/gb300-lib.sh
. "${GB300_ROOT:-}/usr/local/lib/gb300/lib.sh"
# shellcheck source=/dev/null  # rendered by gb300 from templates/storage.env.j2
. "${GB300_ROOT:-}/etc/gb300/storage.env"

if [ -z "${GB300_BLOB_MOUNTS:-}" ]; then
  record "no Blob containers to mount"
  exit 0
fi
# Deploy-time values from the VM's tags: the account's generated name and the node identity's client id.
tag="${GB300_ROOT:-}/usr/local/lib/gb300/imds-tag"
account=$("$tag" gb300-blob-account) || fail "cannot read this VM's tags from the instance metadata service"
client_id=$("$tag" gb300-node-client-id) || fail "cannot read this VM's tags from the instance metadata service"
[[ "$account" =~ ^[a-z0-9]{3,24}$ ]] || fail "the VM tag gb300-blob-account must be a storage account name (got '${account}')"
[[ "$client_id" =~ ^[0-9a-fA-F-]{36}$ ]] || fail "the VM tag gb300-node-client-id must be a client id (got '${client_id}')"
if ! command -v blobfuse2 >/dev/null 2>&1; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends blobfuse2 fuse3 ||
    fail "blobfuse2 is not installed and apt cannot install it (packages.microsoft.com prod repository for this Ubuntu and architecture); remove mountPath from gb300:storage.blob.containers to skip the mounts"
fi
# allow-other in the mount configuration needs user_allow_other in fuse.conf.
fuse_conf="${GB300_ROOT:-}/etc/fuse.conf"
[ -e "$fuse_conf" ] || : >"$fuse_conf"
if ! grep -qx 'user_allow_other' "$fuse_conf"; then
  { cat "$fuse_conf"; printf 'user_allow_other\n'; } | write_if_changed "$fuse_conf"
fi

systemctl daemon-reload
mounted=()
for entry in $GB300_BLOB_MOUNTS; do
  IFS=: read -r container path mode <<<"$entry"
  conf="${GB300_ROOT:-}/etc/gb300/blobfuse2/${container}"
  [ -r "${conf}.yaml.in" ] ||
    fail "missing /etc/gb300/blobfuse2/${container}.yaml.in (rendered by gb300 from templates/blobfuse2.yaml.j2)"
  sed -e "s/@GB300_BLOB_ACCOUNT@/${account}/g" -e "s/@GB300_NODE_CLIENT_ID@/${client_id}/g" "${conf}.yaml.in" |
    write_if_changed "${conf}.yaml"
  mkdir -p "${GB300_ROOT:-}${path}" "${GB300_ROOT:-}${GB300_BLOB_CACHE_PATH}/${container}"
  ensure_service "gb300-blobfuse2-${container}"
  for _ in $(seq 1 30); do
    findmnt -n -M "${GB300_ROOT:-}${path}" >/dev/null 2>&1 && break
    sleep 2
  done
  findmnt -n -M "${GB300_ROOT:-}${path}" >/dev/null 2>&1 ||
    fail "container ${container} is not mounted at ${path} after 60 s; see journalctl -u gb300-blobfuse2-${container} (the node identity needs its role on the container, and the private endpoint must resolve)"
  mounted+=("${container}:${path}:${mode}")
done
record "account ${account}" "${mounted[@]}"
