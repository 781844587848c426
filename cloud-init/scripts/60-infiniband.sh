#!/usr/bin/env bash
# 60-infiniband: IPoIB through waagent (OS.EnableRDMA=y); 4 IB ports Active with a full-member pkey.
set -euo pipefail
# shellcheck source=../lib/gb300-lib.sh
. "${GB300_ROOT:-}/usr/local/lib/gb300/lib.sh"

conf="${GB300_ROOT:-}/etc/waagent.conf"
[ -f "$conf" ] || fail "/etc/waagent.conf is missing: the image has no Azure Linux agent to set up IPoIB"
content=$(cat "$conf")
read -r -a settings <<<"${GB300_WAAGENT_SETTINGS:-}"
for kv in "${settings[@]}"; do
  content=$(awk -v k="${kv%%=*}" -v kv="$kv" '
    { line = $0; sub(/^#[ \t]*/, "", line) }
    !done && index(line, k "=") == 1 { print kv; done = 1; next }
    { print }
    END { if (!done) print kv }' <<<"$content")
done
write_if_changed "$conf" < <(printf '%s\n' "$content")
if [ "$GB300_CHANGED" = 1 ]; then
  log "waagent settings changed (${GB300_WAAGENT_SETTINGS:-}); restarting the agent to bring up IPoIB"
  systemctl restart walinuxagent || fail "walinuxagent does not restart after setting ${GB300_WAAGENT_SETTINGS:-}"
fi

# ibstat prints one block per CA; keep the InfiniBand ports of mlx5_ib* devices (mlx5_an* is Ethernet).
read_ports() {
  ibstat | awk -v prefix="${GB300_IB_DEVICE_PREFIX}" '
    /^CA / { ca = $2; gsub(/\047/, "", ca) }
    /^[ \t]*Port [0-9]+:/ { port = $2; sub(/:/, "", port) }
    /^[ \t]*State:/ { state = $2 }
    /^[ \t]*Physical state:/ { phys = $3 }
    /^[ \t]*Rate:/ { rate = $2 }
    /^[ \t]*Link layer:/ { if (index(ca, prefix) == 1 && $3 == "InfiniBand") print ca, port, state, phys, rate }'
}
wait_s=${GB300_IB_WAIT_SECONDS:-300}
deadline=$((SECONDS + wait_s))
while :; do
  ports=$(read_ports) || fail "ibstat failed: is DOCA-OFED loaded?"
  bad=$(awk '$3 != "Active" || $4 != "LinkUp"' <<<"$ports")
  count=$(grep -c . <<<"$ports" || true)
  if [ -z "$bad" ] && [ "$count" -eq "$GB300_IB_EXPECTED_PORTS" ]; then break; fi
  if [ "$SECONDS" -ge "$deadline" ]; then
    if [ "$count" -ne "$GB300_IB_EXPECTED_PORTS" ]; then
      fail "found ${count} InfiniBand ports on ${GB300_IB_DEVICE_PREFIX}* devices, expected ${GB300_IB_EXPECTED_PORTS} (ibstat)"
    fi
    first=$(head -n 1 <<<"$bad")
    read -r ca port state phys _ <<<"$first"
    fail "InfiniBand port ${ca} port ${port} is ${state} (${phys}), expected Active (LinkUp) after ${wait_s}s; report the node to Azure if it stays down"
  fi
  sleep 10
done

json="["
sep=""
while read -r ca port state phys rate; do
  pkey=""
  for f in "${GB300_ROOT:-}/sys/class/infiniband/${ca}/ports/${port}/pkeys/"*; do
    [ -r "$f" ] || continue
    v=""
    read -r v <"$f" || true # a file without a final newline still sets v
    [ -n "$v" ] || continue
    if [ $((v & 0x8000)) -ne 0 ] && [ $((v & 0x7fff)) -ne 0 ]; then pkey=$v; fi
  done
  [ -n "$pkey" ] || fail "InfiniBand port ${ca} port ${port} has no full-member partition key (only limited or none): the VM is not joined to its scale set's IB partition"
  json+="${sep}{\"device\": \"${ca}\", \"port\": ${port}, \"state\": \"${state}\", \"rate\": \"${rate}\", \"pkey\": \"${pkey}\"}"
  sep=", "
done <<<"$ports"
printf '%s]\n' "$json" | write_if_changed "${GB300_STATE_DIR}/ib.json"
record "ipoib ${GB300_WAAGENT_SETTINGS:-}" "${count} ports Active with full-member pkeys (/var/lib/gb300/ib.json)"
