#!/usr/bin/env bash
# 72-lustre: the Lustre client is present and Azure Managed Lustre is mounted over TCP LNet, kept across reboot.
set -euo pipefail
# shellcheck source=../lib/gb300-lib.sh
. "${GB300_ROOT:-}/usr/local/lib/gb300/lib.sh"
# shellcheck source=/dev/null  # rendered by gb300 from templates/storage.env.j2
. "${GB300_ROOT:-}/etc/gb300/storage.env"

if [ -z "${GB300_LUSTRE_MOUNT:-}" ]; then
  record "no Lustre filesystem configured"
  exit 0
fi
# The MGS address exists only after deployment: it reaches the node as the VM tag gb300-lustre-mgs.
GB300_LUSTRE_MGS=$("${GB300_ROOT:-}/usr/local/lib/gb300/imds-tag" gb300-lustre-mgs) ||
  fail "cannot read this VM's tags from the instance metadata service"
[[ "$GB300_LUSTRE_MGS" =~ ^[0-9]{1,3}(\.[0-9]{1,3}){3}$ ]] ||
  fail "the VM tag gb300-lustre-mgs must be the filesystem's MGS IP address (got '${GB300_LUSTRE_MGS}'); see the lustreMgsAddress stack output"
mount_node=$GB300_LUSTRE_MOUNT
mp="${GB300_ROOT:-}${mount_node}"
spec="${GB300_LUSTRE_MGS}@tcp:/${GB300_LUSTRE_FSNAME}"

# The client: kernel module for the running kernel and the mount helper. The GB image carries both.
if ! modinfo lustre >/dev/null 2>&1 || ! command -v mount.lustre >/dev/null 2>&1; then
  [ -n "${GB300_LUSTRE_CLIENT_PACKAGES:-}" ] ||
    fail "the Lustre client is not installed and no client package is pinned (lustreClient.packages in infra/gb300/data/storage.yaml); use the Ubuntu-HPC GB image, which carries it"
  read -r -a pkgs <<<"$GB300_LUSTRE_CLIENT_PACKAGES"
  log "installing the Lustre client: ${pkgs[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${pkgs[@]}" ||
    fail "apt-get install ${pkgs[*]} failed; the client must match the running kernel $(uname -r)"
  modinfo lustre >/dev/null 2>&1 || fail "the lustre kernel module is still missing for kernel $(uname -r) after installing ${pkgs[*]}"
fi
# Held like every pinned package: an upgraded client must match the running kernel, and the kernel is held.
if [ -n "${GB300_LUSTRE_CLIENT_PACKAGES:-}" ]; then
  read -r -a pkgs <<<"$GB300_LUSTRE_CLIENT_PACKAGES"
  held=$(apt-mark showhold)
  unheld=()
  for p in "${pkgs[@]}"; do
    if dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q ' installed$' && ! grep -qx "$p" <<<"$held"; then
      unheld+=("$p")
    fi
  done
  if [ "${#unheld[@]}" -gt 0 ]; then
    apt-mark hold "${unheld[@]}" >/dev/null || fail "apt-mark hold ${unheld[*]} failed"
  fi
fi
if [ ! -d "${GB300_ROOT:-}/sys/module/lustre" ]; then
  modprobe lustre ||
    fail "cannot load the lustre kernel module; Trusted Launch (secure boot) blocks it, GB pools must use security type Standard"
fi

# Kept across reboot: one fstab line for this mount point, replacing any earlier one.
mkdir -p "$mp"
fstab="${GB300_ROOT:-}/etc/fstab"
[ -e "$fstab" ] || : >"$fstab"
line="${spec} ${mount_node} lustre ${GB300_LUSTRE_OPTIONS},_netdev,x-systemd.requires=network-online.target 0 0"
{
  awk -v mp="$mount_node" '!($2 == mp && $3 == "lustre")' "$fstab"
  printf '%s\n' "$line"
} | write_if_changed "$fstab"

if findmnt -n -t lustre -M "$mp" >/dev/null 2>&1; then
  current=$(findmnt -n -t lustre -M "$mp" -o SOURCE)
  [ "$current" = "$spec" ] ||
    fail "${mount_node} has ${current} mounted, expected ${spec}; unmount it (umount ${mount_node}) and rerun"
  log "${spec} already mounted at ${mount_node}"
else
  mount -t lustre -o "$GB300_LUSTRE_OPTIONS" "$spec" "$mp" ||
    fail "mounting ${spec} at ${mount_node} failed: check TCP 988 to ${GB300_LUSTRE_MGS} is open and the node is in the filesystem's zone"
  log "mounted ${spec} at ${mount_node}"
fi
lfs df "$mp" >/dev/null || fail "lfs df ${mount_node} fails: the filesystem is mounted but not answering"
record "${spec} at ${mount_node} (${GB300_LUSTRE_OPTIONS})"
