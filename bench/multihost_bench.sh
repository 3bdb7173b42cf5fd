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
# $MH_ITERS timed steps (default 10; $MH_RUN steps of each peer in turn, default
# allreduce_bench's 10, 1 alternates them step by step), the tensors laid out as $MH_LAYOUT says
# (allreduce_bench --layout: "separate", the default, or "bucket"), $MH_ROUNDS times
# (default 1; the row gives the medians over the rounds, the ratio the median of
# each round's own ratio, and the rounds are listed below the table). $MH_PEERS
# (default "dprun,gloo_fused,gloo_per_tensor,torch") names the peers to run;
# "dprun,gloo_fused" with MH_RUN=1 is the closest comparison of the two. The peer
# "ddp" adds, for the resnet50 workload, torch's DDP over the "dprun" backend and
# over Gloo on ResNet-50's gradient set (bench/torch_gloo_peer.py --ddp-sizes), in a
# table of their own. Each host has
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
rounds=${MH_ROUNDS:-1}
peers=${MH_PEERS:-dprun,gloo_fused,gloo_per_tensor,torch}
bench_peers=$(echo "$peers" | tr ',' '\n' | grep -v '^torch$' | grep -v '^ddp$' | paste -sd, -)
sizes=$(cd "$(dirname "$0")" && pwd)/../../shared/data/resnet50_sizes.txt
[ -f "$sizes" ] || sizes=$(cd "$(dirname "$0")" && pwd)/data/resnet50_sizes.txt
run_args=()
[ -z "${MH_RUN:-}" ] || run_args=(--run "$MH_RUN")
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
  disown  # killed at the end, without a "Killed" line from the shell
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
rounds_report=$tmp/rounds.md
for rate in $rates; do
  limit "$rate"
  bits=$(echo "$rate" | sed -e 's/gbit/*1000000000/' -e 's/mbit/*1000000/' | bc)
  for w in $workloads; do
    # Each round runs every peer once, in turn; the row gives the medians over the
    # rounds, and the ratio the median of the rounds' own ratios.
    manifest=$tmp/$rate-$w.rounds
    : >"$manifest"
    for round in $(seq 1 "$rounds"); do
      csv=$tmp/$rate-$w.$round.csv
      log=$tmp/$rate-$w.$round.log
      # shellcheck disable=SC2086
      ip netns exec $tag-0 "$dprun" -np "$np" -H "$host_list" $ssh_flags \
        "$bench" --workload "$w" --layout "$layout" --iters "$iters" --warmup 12 \
        --peers "$bench_peers" "${run_args[@]}" --csv "$csv" >$log 2>&1 ||
        { echo "$0: $rate $w failed:" >&2; cat $log >&2; exit 1; }
      [ "$round" -gt 1 ] || grep -h "hvd: all-reduce of" $log | sed 's/^\[[0-9]*\]<stderr>://' >&2 || true
      # Each path forced, dprun alone.
      forced=()
      if [ "$slots" -gt 1 ]; then
        for mode in 1 0; do
          # shellcheck disable=SC2086
          ip netns exec $tag-0 "$dprun" -np "$np" -H "$host_list" $ssh_flags \
            -x HVD_HIERARCHICAL_ALLREDUCE=$mode "$bench" --workload "$w" --layout "$layout" --iters "$iters" \
            --peers dprun --csv "$csv.$mode" >$log.$mode 2>&1 ||
            { echo "$0: $rate $w HVD_HIERARCHICAL_ALLREDUCE=$mode failed:" >&2;
              cat $log.$mode >&2; exit 1; }
          forced+=("$csv.$mode")
        done
      fi
      # torch.distributed's Gloo on one flat buffer of the same size (no packing).
      elements=$(/usr/bin/python3 -c "import csv,sys; print(int(float(next(csv.DictReader(open(sys.argv[1])))['bytes']))//4)" "$csv")
      torch_ms=nan
      if [[ ",$peers," == *,torch,* ]] && /usr/bin/python3 -c "import torch.distributed" 2>/dev/null; then
        # shellcheck disable=SC2086
        ip netns exec $tag-0 "$dprun" -np "$np" -H "$host_list" $ssh_flags -x GLOO_SOCKET_IFNAME=eth0 \
          /usr/bin/python3 "$peer" --elements "$elements" --master "${addrs[0]}:29517" \
          --iters "$iters" >$log.torch 2>&1 || true
        torch_ms=$(awk '/<stdout>:torch_gloo [0-9]/ {print $NF}' $log.torch)
        [ -n "$torch_ms" ] || { echo "$0: torch peer failed:" >&2; tail -5 $log.torch >&2; torch_ms=nan; }
      fi
      echo "$csv $torch_ms ${forced[*]}" >>"$manifest"
      # torch's DDP over dprun and over Gloo, ResNet-50's gradient set.
      if [[ ",$peers," == *,ddp,* ]] && [ "$w" = resnet50 ]; then
        ddp_ms=()
        for backend in dprun gloo; do
          # shellcheck disable=SC2086
          ip netns exec $tag-0 "$dprun" -np "$np" -H "$host_list" $ssh_flags -x GLOO_SOCKET_IFNAME=eth0 \
            /usr/bin/python3 "$peer" --ddp-sizes "$sizes" --backend $backend \
            --master "${addrs[0]}:29518" --iters "$iters" >$log.ddp_$backend 2>&1 || true
          ms=$(awk '/<stdout>:torch_[a-z]*_ddp [0-9]/ {print $NF}' $log.ddp_$backend)
          [ -n "$ms" ] || { echo "$0: DDP over $backend failed:" >&2; tail -5 $log.ddp_$backend >&2; ms=nan; }
          ddp_ms+=("$ms")
        done
        echo "$rate $round ${ddp_ms[*]}" >>"$tmp/ddp.rounds"
      fi
    done
    /usr/bin/python3 - "$manifest" "$rate" "$w" "$bits" "$hosts" "$rounds_report" >>"$report" <<'PY'
import csv, math, statistics, sys
manifest, rate, workload, bits, hosts, rounds_report = sys.argv[1:7]
bits, hosts = float(bits), int(hosts)
def median(values):
    values = [v for v in values if not math.isnan(v)]
    return statistics.median(values) if values else float("nan")
rounds = []
for line in open(manifest):
    path, torch_ms, *forced = line.split()
    by = {r["peer"]: r for r in csv.DictReader(open(path))}
    ms = lambda p: float(by[p]["median_ms"]) if p in by else float("nan")
    t = float(torch_ms)
    f = ms("gloo_fused")
    rounds.append(dict(size=float(next(iter(by.values()))["bytes"]), d=ms("dprun"), f=f,
                       torch=t, per=ms("gloo_per_tensor"), best=min(f, t) if t == t else f,
                       forced=[float(next(csv.DictReader(open(x)))["median_ms"]) for x in forced]))
size = rounds[0]["size"]
limit_ms = size * 2 * (hosts - 1) / hosts * 8 / bits * 1000
d, f, t, per = (median(r[k] for r in rounds) for k in ("d", "f", "torch", "per"))
ratios = [r["d"] / r["best"] for r in rounds]
forced = [median(r["forced"][i] for r in rounds) for i in range(len(rounds[0]["forced"]))]
forced_cell = " / ".join("%.1f" % m for m in forced) if forced else "-"
print("| %s | %s | %.1f | %.1f | %.0f%% | %.1f | %.0f%% | %.1f | %.0f%% | %.1f | %.2f | %s |" % (
    rate, workload, size / 1e6, d, 100 * limit_ms / d, f, 100 * limit_ms / f, t,
    100 * limit_ms / t, per, median(ratios), forced_cell))
if len(rounds) > 1:
    with open(rounds_report, "a") as out:
        out.write("- %s %s by round: dprun %s ms; dprun / best peer %s; dprun / gloo fused %s\n" % (
            rate, workload, ", ".join("%.1f" % r["d"] for r in rounds),
            ", ".join("%.2f" % x for x in ratios),
            ", ".join("%.2f" % (r["d"] / r["f"]) for r in rounds)))
PY
  done
done
if [ -s "$tmp/ddp.rounds" ]; then
  /usr/bin/python3 - "$tmp/ddp.rounds" "$hosts" "$sizes" >>"$report" <<'PY'
import collections, math, statistics, sys
path, hosts, sizes = sys.argv[1], int(sys.argv[2]), sys.argv[3]
nbytes = 4 * sum(int(l.split()[0]) for l in open(sizes) if l.strip() and l[0] != "#")
by_rate = collections.OrderedDict()
for line in open(path):
    rate, _, d, g = line.split()
    by_rate.setdefault(rate, []).append((float(d), float(g)))
print()
print("torch DDP on ResNet-50's gradient set (%.1f MB), a step = backward with DDP's "
      "gradient averaging:" % (nbytes / 1e6))
print()
print("| rate | DDP over dprun ms | % of link | DDP over Gloo ms | % of link | dprun / gloo |")
print("|---|---|---|---|---|---|")
for rate, rows in by_rate.items():
    bits = float(rate.replace("gbit", "e9").replace("mbit", "e6"))
    limit_ms = nbytes * 2 * (hosts - 1) / hosts * 8 / bits * 1000
    d = statistics.median(r[0] for r in rows)
    g = statistics.median(r[1] for r in rows)
    print("| %s | %.1f | %.0f%% | %.1f | %.0f%% | %.2f |" % (
        rate, d, 100 * limit_ms / d, g, 100 * limit_ms / g,
        statistics.median(r[0] / r[1] for r in rows)))
PY
fi
if [ -s "$rounds_report" ]; then
  { echo; echo "$rounds rounds; each row gives medians over them, the ratio the median of the rounds' ratios:"; cat "$rounds_report"; } >>"$report"
fi
cat "$report"
