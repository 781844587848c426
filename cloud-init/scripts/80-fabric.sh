#!/usr/bin/env bash
# 80-fabric: read the NVLink fabric identity from nvidia-smi into /var/lib/gb300/fabric.json.
set -euo pipefail
# shellcheck source=../lib/gb300-lib.sh
. "${GB300_ROOT:-}/usr/local/lib/gb300/lib.sh"

query=$(nvidia-smi -q) || fail "nvidia-smi -q failed: the NVIDIA driver is not working"
gpus=$(awk -F': *' '/^Attached GPUs/ { print $2 }' <<<"$query")
[ "$gpus" = "$GB300_FABRIC_EXPECTED_GPUS" ] ||
  fail "nvidia-smi sees ${gpus:-no} GPUs, expected ${GB300_FABRIC_EXPECTED_GPUS}"
# One line per GPU: bus-id|State|Status|CliqueId|ClusterUUID, from each GPU's "Fabric" block.
rows=$(awk '
  function indent(s) { match(s, /^ */); return RLENGTH }
  function emit() { print gpu "|" st "|" stt "|" cl "|" uu; infab = 0 }
  /^GPU / { if (infab) emit(); gpu = $2; next }
  {
    ind = indent($0)
    if (infab && ind <= fabind) emit()
    if ($0 ~ /^ *Fabric *$/) { infab = 1; fabind = ind; st = stt = cl = uu = "-"; next }
    if (infab && ind == fabind + 4) {
      key = $0; sub(/^ */, "", key); sub(/ *:.*/, "", key)
      val = $0; sub(/^[^:]*: */, "", val); sub(/ *$/, "", val)
      if (key == "State") st = val; else if (key == "Status") stt = val
      else if (key == "CliqueId") cl = val; else if (key == "ClusterUUID") uu = val
    }
  }
  END { if (infab) emit() }' <<<"$query")
[ -n "$rows" ] || fail "nvidia-smi -q has no Fabric block: the driver does not report NVLink fabric state"
uuids=$(cut -d '|' -f 5 <<<"$rows" | sort -u)
cliques=$(cut -d '|' -f 4 <<<"$rows" | sort -u)
while IFS='|' read -r gpu state status clique uuid; do
  if [ -z "$(tr -d '0-' <<<"$uuid")" ]; then
    fail "NVLink fabric failure: GPU ${gpu} reports ClusterUUID ${uuid} (all zeros); the rack's NVLink fabric is not set up. Reimage the node, and report it to Azure if it persists"
  fi
  [ "$state" = "$GB300_FABRIC_HEALTHY_STATE" ] && [ "$status" = "$GB300_FABRIC_HEALTHY_STATUS" ] ||
    fail "NVLink fabric not healthy on GPU ${gpu}: State ${state}, Status ${status} (expected ${GB300_FABRIC_HEALTHY_STATE}, ${GB300_FABRIC_HEALTHY_STATUS})"
  [ "$clique" != 0 ] || fail "NVLink fabric failure: GPU ${gpu} reports CliqueId 0"
  [[ "$uuid" =~ ^[0-9a-fA-F-]+$ && "$clique" =~ ^[0-9]+$ ]] || fail "unexpected fabric identity on GPU ${gpu}: ${uuid} / ${clique}"
done <<<"$rows"
[ "$(grep -c . <<<"$uuids")" -eq 1 ] && [ "$(grep -c . <<<"$cliques")" -eq 1 ] ||
  fail "the GPUs of this VM disagree on their NVLink domain (ClusterUUIDs: $(tr '\n' ' ' <<<"$uuids"), CliqueIds: $(tr '\n' ' ' <<<"$cliques"))"
printf '{"ClusterUUID": "%s", "CliqueId": %s, "State": "%s", "Status": "%s", "gpus": %s}\n' \
  "$uuids" "$cliques" "$GB300_FABRIC_HEALTHY_STATE" "$GB300_FABRIC_HEALTHY_STATUS" "$gpus" |
  write_if_changed "${GB300_STATE_DIR}/fabric.json"
record "ClusterUUID ${uuids} CliqueId ${cliques}" "/var/lib/gb300/fabric.json"
