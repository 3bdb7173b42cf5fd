#!/usr/bin/env bash
# dprun across hosts at a given link speed, against raw Gloo on the same buffers.
#
#   bench/multihost_bench.sh BUILD_DIR [OUT_DIR]
#
# Builds $MH_HOSTS hosts (default 2) as network namespaces on a bridge, each link
# limited with tc tbf to each rate of $MH_RATES (default "1gbit 10gbit") in both
# directions, an sshd in each host, and runs allreduce_bench there through
# `dprun -H` over ssh, $MH_SLOTS ranks per host (default 1): dprun, raw Gloo on one pre-packed buffer
# (gloo_fused, packing included), torch.distributed's Gloo on one flat buffer of the
# same size (bench/torch_gloo_peer.py; skipped without torch) and Gloo per tensor, for
# $MH_WORKLOADS (default "resnet50 small"),
# $MH_ITERS timed steps (default 10), the tensors laid out as $MH_LAYOUT says
# (allreduce_bench --layout: "separate", the default, or "bucket"). Each host has
# its own /dev/shm, so ranks on different hosts never share memory. Prints and writes OUT_DIR/multihost.md: each
# peer's median ms and its share of the ring all-reduce's link limit,
# S*2(H-1)/H / rate. With several ranks per host dprun runs hierarchically or
# flat, whichever it measured faster per size (HVD_HIERARCHICAL_ALLREDUCE=auto; it
# measures on the first 10 calls of a size, so dprun gets 12 warm-up steps), and is
# run again with each path forced (=1, =0) for the table's last column. Needs root (ip netns, tc, sshd); everything is removed at the
# end. Traffic stays inside the namespaces.
set -euo pipefail

. "$(dirname "$0")/bench_args.sh"
hosts=${MH_HOSTS:-2}
slots=${MH_SLOTS:-1}
np=$((hosts * slots))
rates=${MH_RATES:-1gbit 10gbit}
workloads=${MH_WORKLOADS:-resnet50 small}
iters=${MH_ITERS:-10}
layout=${MH_LAYOUT:-separate}
dprun=$build/dprun
bench=$build/bench/allreduce_bench
peer=$(cd "$(dirname "$0")" && pwd)/torch_gloo_peer.py
[ "$(id -u)" -eq 0 ] || { echo "$0: needs root (ip netns, tc, sshd)" >&2; exit 1; }
for f in "$dprun" "$bench" /usr/sbin/sshd /usr/bin/ssh-keygen; do
  [ -x "$f" ] || { echo "$0: $f not found" >&2; exit 1; }
done

tag=hvdb$$
tmp=$(mktemp -d /tmp/$tag-XXXXXX)
nss=()
sshd_pids=()
cleanup() {
  for ns in "${nss[@]}"; do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
  done
  rm -rf "$tmp"
}
trap cleanup EXIT

# Host 0 (the bridge, dprun and the store) and hosts 1..H, 10.232.0.(i+1).
ip netns add $tag-0 && nss+=($tag-0)
ip -n $tag-0 link set lo up
ip -n $tag-0 link add br0 type bridge
ip -n $tag-0 addr add 10.232.0.1/24 dev br0
ip -n $tag-0 link set br0 up
ssh-keygen -q -t ed25519 -N '' -f $tmp/host_key
ssh-keygen -q -t ed25519 -N '' -f $tmp/client_key
mkdir -p /run/sshd
addrs=()
for i in $(seq 1 "$hosts"); do
  ns=$tag-$i
  addr=10.232.0.$((i + 1))
  ip netns add $ns && nss+=($ns)
  ip -n $ns link set lo up
  ip link add v$i netns $tag-0 type veth peer name eth0 netns $ns
  ip -n $tag-0 link set v$i master br0 up
  ip -n $ns addr add $addr/24 dev eth0
  ip -n $ns link set eth0 up
  cat >$tmp/sshd_$i.conf <<CONF
ListenAddress $addr
HostKey $tmp/host_key
AuthorizedKeysFile $tmp/client_key.pub
PermitRootLogin yes
StrictModes no
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
PidFile none
LogLevel ERROR
CONF
  ip netns exec $ns sh -c "mount -t tmpfs -o size=1g hvd-shm /dev/shm && exec /usr/sbin/sshd -D -e -f $tmp/sshd_$i.conf" >$tmp/sshd_$i.log 2>&1 &
  sshd_pids+=($!)
  addrs+=($addr)
done
for i in $(seq 1 "$hosts"); do
  for _ in $(seq 1 100); do
    ip netns exec $tag-$i ss -Hltn 'sport = :22' | grep -q ":22" && break
    sleep 0.05
  done
done

# Both directions of each host's link: its eth0 (up) and its bridge port (down).
limit() {
  for i in $(seq 1 "$hosts"); do
    ip netns exec $tag-$i tc qdisc replace dev eth0 root tbf rate "$1" burst 1mb latency 50ms
    ip netns exec $tag-0 tc qdisc replace dev v$i root tbf rate "$1" burst 1mb latency 50ms
  done
}

host_list=$(printf "%s:$slots," "${addrs[@]}")
host_list=${host_list%,}
ssh_flags="--ssh-identity-file $tmp/client_key --ssh-option StrictHostKeyChecking=no \
--ssh-option UserKnownHostsFile=/dev/null --ssh-option LogLevel=ERROR"
report=$out/multihost.md
{
  echo "# dprun across $hosts hosts (network namespaces, tc tbf), $slots rank(s) per host, $layout layout"
  echo
  echo "| rate | workload | MB | dprun ms | % of link | gloo fused ms | % of link | torch.distributed gloo ms | % of link | gloo per-tensor ms | dprun / best peer | dprun forced hierarchical / flat ms |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
} >"$report"
for rate in $rates; do
  limit "$rate"
  bits=$(echo "$rate" | sed -e 's/gbit/*1000000000/' -e 's/mbit/*1000000/' | bc)
  for w in $workloads; do
    csv=$tmp/$rate-$w.csv
    # shellcheck disable=SC2086
    ip netns exec $tag-0 "$dprun" -np "$np" -H "$host_list" $ssh_flags \
      "$bench" --workload "$w" --layout "$layout" --iters "$iters" --warmup 12 --csv "$csv" >$tmp/$rate-$w.log 2>&1 ||
      { echo "$0: $rate $w failed:" >&2; cat $tmp/$rate-$w.log >&2; exit 1; }
    grep -h "hvd: all-reduce of" $tmp/$rate-$w.log | sed 's/^\[[0-9]*\]<stderr>://' >&2 || true
    # Each path forced, dprun alone.
    forced=()
    if [ "$slots" -gt 1 ]; then
      for mode in 1 0; do
        # shellcheck disable=SC2086
        ip netns exec $tag-0 "$dprun" -np "$np" -H "$host_list" $ssh_flags \
          -x HVD_HIERARCHICAL_ALLREDUCE=$mode "$bench" --workload "$w" --layout "$layout" --iters "$iters" \
          --peers dprun --csv "$csv.$mode" >$tmp/$rate-$w.$mode.log 2>&1 ||
          { echo "$0: $rate $w HVD_HIERARCHICAL_ALLREDUCE=$mode failed:" >&2;
            cat $tmp/$rate-$w.$mode.log >&2; exit 1; }
        forced+=("$csv.$mode")
      done
    fi
    # torch.distributed's Gloo on one flat buffer of the same size (no packing).
    elements=$(/usr/bin/python3 -c "import csv,sys; print(int(float(next(csv.DictReader(open(sys.argv[1])))['bytes']))//4)" "$csv")
    torch_ms=nan
    if /usr/bin/python3 -c "import torch.distributed" 2>/dev/null; then
      # shellcheck disable=SC2086
      ip netns exec $tag-0 "$dprun" -np "$np" -H "$host_list" $ssh_flags -x GLOO_SOCKET_IFNAME=eth0 \
        /usr/bin/python3 "$peer" --elements "$elements" --master "${addrs[0]}:29517" \
        --iters "$iters" >$tmp/$rate-$w.torch.log 2>&1 || true
      torch_ms=$(awk '/<stdout>:torch_gloo [0-9]/ {print $NF}' $tmp/$rate-$w.torch.log)
      [ -n "$torch_ms" ] || { echo "$0: torch peer failed:" >&2; tail -5 $tmp/$rate-$w.torch.log >&2; torch_ms=nan; }
    fi
    /usr/bin/python3 - "$csv" "$rate" "$w" "$bits" "$hosts" "$torch_ms" "${forced[@]}" >>"$report" <<'PY'
import csv, sys
path, rate, workload, bits, hosts = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), int(sys.argv[5])
torch_ms = float(sys.argv[6])
forced = [float(next(csv.DictReader(open(f)))["median_ms"]) for f in sys.argv[7:]]
forced_cell = " / ".join("%.1f" % m for m in forced) if forced else "-"
rows = list(csv.DictReader(open(path)))
by = {r["peer"]: r for r in rows}
size = float(rows[0]["bytes"])
limit_ms = size * 2 * (hosts - 1) / hosts * 8 / bits * 1000
def ms(p): return float(by[p]["median_ms"]) if p in by else float("nan")
d, f, t = ms("dprun"), ms("gloo_fused"), ms("gloo_per_tensor")
best = min(f, torch_ms) if torch_ms == torch_ms else f
print("| %s | %s | %.1f | %.1f | %.0f%% | %.1f | %.0f%% | %.1f | %.0f%% | %.1f | %.2f | %s |" % (
    rate, workload, size / 1e6, d, 100 * limit_ms / d, f, 100 * limit_ms / f, torch_ms,
    100 * limit_ms / torch_ms, t, d / best, forced_cell))
PY
  done
done
cat "$report"
