#!/usr/bin/env bash
# 70-nvme-raid: RAID0 of the data NVMe namespaces (never the OS disk) at the NVMe mount point, kept across reboot.
set -euo pipefail
# shellcheck source=../lib/gb300-lib.sh
. "${GB300_ROOT:-}/usr/local/lib/gb300/lib.sh"

mp_node=${GB300_NVME_MOUNT_POINT}
mp="${GB300_ROOT:-}${mp_node}"
md="${GB300_ROOT:-}/dev/md/${GB300_NVME_ARRAY_NAME}"
fs=${GB300_NVME_FILESYSTEM}

# Data namespaces by model; the disk that holds / is excluded even if its model matches.
root_src=$(findmnt -n -o SOURCE / || true)
mapfile -t devs < <(lsblk -J -d -o NAME,MODEL,TYPE,MOUNTPOINT | python3 -c '
import json, re, sys
pattern, root = re.compile(sys.argv[1]), sys.argv[2]
for dev in json.load(sys.stdin)["blockdevices"]:
    name, model = dev["name"], (dev.get("model") or "").strip()
    if dev.get("type") != "disk" or not name.startswith("nvme") or dev.get("mountpoint"):
        continue
    if root and root.startswith("/dev/" + name):  # path as text, not accessed
        continue
    if pattern.search(model):
        print(name)
' "$GB300_NVME_DATA_MODEL_REGEX" "$root_src")
if [ "${#devs[@]}" -ne "$GB300_NVME_EXPECTED_COUNT" ]; then
  models=$(lsblk -d -n -o NAME,MODEL | tr -s ' ' | tr '\n' ';')
  fail "found ${#devs[@]} data NVMe namespaces with model matching '${GB300_NVME_DATA_MODEL_REGEX}', expected ${GB300_NVME_EXPECTED_COUNT} (disks: ${models}); fix nvme.data_model_regex in infra/gb300/data/node.yaml"
fi

if ! mdadm --detail "$md" >/dev/null 2>&1; then
  members=()
  for d in "${devs[@]}"; do members+=("${GB300_ROOT:-}/dev/${d}"); done
  # Assemble first: creating over members that already hold this array would destroy its data.
  if mdadm --assemble "$md" "${members[@]}" >/dev/null 2>&1; then
    log "assembled the existing array ${md} from ${members[*]}"
  else
    log "creating RAID0 ${md} from ${members[*]}"
    mdadm --create "$md" --level=0 --raid-devices="${#members[@]}" --name="$GB300_NVME_ARRAY_NAME" --run "${members[@]}" ||
      fail "mdadm could not create ${md} from ${members[*]}"
  fi
fi
if [ "$(blkid -s TYPE -o value "$md" || true)" != "$fs" ]; then
  log "making ${fs} on ${md}"
  "mkfs.${fs}" -f "$md" >/dev/null || fail "mkfs.${fs} failed on ${md}"
fi

# Survive reboot: the array in mdadm.conf (and the initramfs), the filesystem in fstab (nofail).
mdconf="${GB300_ROOT:-}/etc/mdadm/mdadm.conf"
array=$(mdadm --detail --brief "$md")
[ -n "$array" ] || fail "mdadm --detail --brief printed nothing for ${md}"
write_if_changed "$mdconf" < <(
  grep -v "^ARRAY /dev/md/${GB300_NVME_ARRAY_NAME} " "$mdconf" 2>/dev/null || true
  printf '%s\n' "$array"
)
if [ "$GB300_CHANGED" = 1 ]; then
  update-initramfs -u >/dev/null || fail "update-initramfs failed after adding the array to mdadm.conf"
fi
uuid=$(blkid -s UUID -o value "$md")
[ -n "$uuid" ] || fail "no filesystem UUID on ${md}"
fstab="${GB300_ROOT:-}/etc/fstab"
{ awk -v mp="$mp_node" '$2 != mp' "$fstab" 2>/dev/null || true; printf 'UUID=%s %s %s %s 0 2\n' "$uuid" "$mp_node" "$fs" "$GB300_NVME_MOUNT_OPTIONS"; } |
  write_if_changed "$fstab"

mkdir -p "$mp"
if ! findmnt -n "$mp" >/dev/null 2>&1; then
  mount -t "$fs" -o "$GB300_NVME_MOUNT_OPTIONS" "$md" "$mp" || fail "cannot mount ${md} at ${mp_node}"
fi
findmnt -n "$mp" >/dev/null 2>&1 || fail "${mp_node} is not mounted"
record "raid0 /dev/md/${GB300_NVME_ARRAY_NAME} of ${devs[*]}" "${fs} UUID=${uuid} at ${mp_node}" "in mdadm.conf and fstab"
