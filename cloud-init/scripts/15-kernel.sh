#!/usr/bin/env bash
# 15-kernel: the Grace kernel (linux-azure-nvidia) with Azure's command line; plain Ubuntu reboots into it
# once and gb300-resume.service runs the bootstrap again (run-step skips steps while a reboot is pending).
set -euo pipefail
# shellcheck source=../lib/gb300-lib.sh
. "${GB300_ROOT:-}/usr/local/lib/gb300/lib.sh"

verify_or_install kernel
kernel=$GB300_FOUND
grub="${GB300_ROOT:-}/etc/default/grub.d/90-gb300.cfg"
# shellcheck disable=SC2016  # $GRUB_CMDLINE_LINUX is GRUB's, expanded by update-grub
write_if_changed "$grub" < <(printf '# gb300: kernel command line for GB300 (infra/gb300/data/node.yaml)\nGRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX %s"\n' "$GB300_KERNEL_CMDLINE")
if [ "$GB300_CHANGED" = 1 ]; then
  update-grub || fail "update-grub failed after writing /etc/default/grub.d/90-gb300.cfg"
fi
running=$(uname -r)
read -r -a params <<<"$GB300_KERNEL_CMDLINE"
missing=()
for p in "${params[@]}"; do
  grep -qw -- "$p" "${GB300_ROOT:-}/proc/cmdline" || missing+=("$p")
done
if [[ "$running" == *"-${GB300_KERNEL_FLAVOUR}" ]] && [ "${#missing[@]}" -eq 0 ]; then
  rm -f "${GB300_STATE_DIR}/reboots"
  record "$kernel" "running ${running}" "cmdline ${GB300_KERNEL_CMDLINE}"
  exit 0
fi
why="running ${running}${missing[*]:+, command line lacks ${missing[*]}}"
if [ -e "${GB300_STATE_DIR}/reboots" ]; then
  fail "rebooted once for the ${GB300_KERNEL_FLAVOUR} kernel and its command line, still ${why}; check GRUB's default entry (grub-editenv list) and /etc/default/grub.d"
fi
log "rebooting: ${why}"
systemctl enable gb300-resume.service || fail "cannot enable gb300-resume.service"
printf '%s\n' "$why" >"${GB300_STATE_DIR}/reboots"
printf '%s\n' "$why" >"${GB300_STATE_DIR}/reboot-pending"
printf 'state: rebooting\nstep: %s\nreason: %s\n' "$GB300_STEP" "$why" | write_if_changed "$GB300_STATUS_FILE"
systemctl reboot --no-block || fail "cannot reboot into the ${GB300_KERNEL_FLAVOUR} kernel"
