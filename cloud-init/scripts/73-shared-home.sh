#!/usr/bin/env bash
# 73-shared-home: /home is <lustre mount>/home on every node, bind-mounted and kept across reboot, so users' files
# outlive any VM (the head included: a replaced head mounts the same directory). Homes the image made locally
# (the admin user Azure provisions) are copied in when the shared tree lacks them; the admin's authorized_keys
# follows the stack's key (Azure writes it at provisioning, gb300:access.sshPublicKey), other files are kept.
set -euo pipefail
# shellcheck source=../lib/gb300-lib.sh
. "${GB300_ROOT:-}/usr/local/lib/gb300/lib.sh"
# shellcheck source=/dev/null  # rendered by gb300 from templates/storage.env.j2
. "${GB300_ROOT:-}/etc/gb300/storage.env"

if [ -z "${GB300_LUSTRE_MOUNT:-}" ]; then
  record "no Lustre filesystem: /home stays on this VM's OS disk"
  exit 0
fi
R="${GB300_ROOT:-}"
shared_node="${GB300_LUSTRE_MOUNT}/home"
shared="${R}${shared_node}"
home="${R}/home"
findmnt -n -t lustre -M "${R}${GB300_LUSTRE_MOUNT}" >/dev/null 2>&1 ||
  fail "Lustre is not mounted at ${GB300_LUSTRE_MOUNT}; 72-lustre must run first"

bound=0
if findmnt -n -M "$home" >/dev/null 2>&1; then
  bound=1
fi
if [ "$bound" -eq 0 ]; then
  mkdir -p "$shared"
  chmod 0755 "$shared"
  for dir in "$home"/*/; do
    [ -d "$dir" ] || continue
    user=$(basename "$dir")
    if [ ! -e "$shared/$user" ]; then
      cp -a "$dir" "$shared/$user" || fail "cannot copy ${dir} into ${shared_node}"
      log "copied /home/${user} into ${shared_node}"
    elif [ -f "$dir/.ssh/authorized_keys" ] && ! cmp -s "$dir/.ssh/authorized_keys" "$shared/$user/.ssh/authorized_keys"; then
      mkdir -p "$shared/$user/.ssh"
      cp -p "$dir/.ssh/authorized_keys" "$shared/$user/.ssh/authorized_keys" ||
        fail "cannot update ${shared_node}/${user}/.ssh/authorized_keys"
      chown --reference="$dir" "$shared/$user/.ssh" "$shared/$user/.ssh/authorized_keys" 2>/dev/null || true
      log "${user}'s authorized_keys follows the key Azure provisioned on this VM"
    fi
  done
fi

fstab="${R}/etc/fstab"
[ -e "$fstab" ] || : >"$fstab"
line="${shared_node} /home none bind,x-systemd.requires-mounts-for=${GB300_LUSTRE_MOUNT} 0 0" # path as text, not accessed
{
  awk '!($2 == "/home" && $4 ~ /(^|,)bind(,|$)/)' "$fstab" # path as text, not accessed
  printf '%s\n' "$line"
} | write_if_changed "$fstab"

if [ "$bound" -eq 0 ]; then
  mount --bind "$shared" "$home" || fail "bind-mounting ${shared_node} at /home failed"
  log "/home is ${shared_node}"
fi
record "/home is ${shared_node} (bind mount, kept in /etc/fstab)"
