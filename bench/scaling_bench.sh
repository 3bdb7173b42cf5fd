#!/usr/bin/env bash
# How dprun's cost grows with the ranks on this host: 2 to 128 local ranks, over
# shared memory and over Gloo, oversubscribed beyond the cores; then the model
# (bench/scaling_model.py) fitted to them, its predictions beside the measurements
# and at 256 to 4,096 ranks, and the plot. docs/scaling.md has the method and the
# figures.
#
#   bench/scaling_bench.sh BUILD_DIR [OUT_DIR]
#
# For each CPU path in $SCALE_OPS (default "default gloo": shared memory, and
# HVD_CPU_OPERATIONS=gloo) and each rank count in $SCALE_RANKS (default
# "2 4 8 16 32 64 128"), one run of allreduce_bench under dprun, itself under
# bench/dprun_usage.py (dprun's own CPU and memory), appending to
# OUT_DIR/scaling.csv (allreduce_bench --scaling-csv: init, shutdown, each peer's
# step, rank 0's negotiation per cycle, every rank's CPU per step):
#   - 1000 x 4 KiB at every count; ResNet-50's gradients up to $SCALE_RESNET_MAX
#     ranks (default 16: each rank holds ~300 MB of buffers);
#   - dprun and dprun's own Gloo all-reduce with each algorithm forced (ring,
#     halving_doubling), interleaved on the same buffers: the side by side of the
#     old and the new small-message algorithm in one run; up to $SCALE_GLOO_PEERS_MAX
#     ranks (default 64) raw Gloo's ring on one packed buffer (gloo_fused) too;
#   - from 8 ranks, two more runs of dprun alone (--comm dprun) on 1000 x 4 KiB,
#     back to back: with the tree cycle (labelled "alone") and with
#     HVD_NEGOTIATION_TREE_RANKS=0 (every cycle gathered at rank 0, the old path,
#     "gather"): the tree cycle's side by side ($SCALE_NEGOTIATION_ONLY=1 runs only
#     these);
# $SCALE_ITERS timed steps per peer (default 5, after 2 warm-up steps), the whole
# sweep $SCALE_ROUNDS times (default 2; the model takes each point's median: the
# machine is shared and noisy). Every result is checked on every rank (a wrong one
# fails the run). Each run holds /tmp/dprun-bench.lock, so no two engineers'
# benchmarks overlap on the machine.
# With SCALE_MULTIHOST=1 (root), bench/multihost_bench.sh then runs dprun and Gloo's
# ring across $SCALE_HOSTS netns hosts (default "2 4 8"), one rank each, at 1 and
# 10 Gbit/s, into OUT_DIR/mh<H>/multihost.md; every such file there feeds the
# model's check against hosts. Needs python3-matplotlib for the plot. A full run
# takes ~25 minutes on the 2-core machine, ~10 more with the hosts.
set -euo pipefail

. "$(dirname "$0")/bench_args.sh"
here=$(cd "$(dirname "$0")" && pwd)
ops_list=${SCALE_OPS:-default gloo}
ranks=${SCALE_RANKS:-2 4 8 16 32 64 128}
resnet_max=${SCALE_RESNET_MAX:-16}
peers_max=${SCALE_GLOO_PEERS_MAX:-64}
iters=${SCALE_ITERS:-5}
rounds=${SCALE_ROUNDS:-2}
dprun=$build/dprun
bench=$build/bench/allreduce_bench
for f in "$dprun" "$bench"; do
  [ -x "$f" ] || { echo "$0: $f not found: build it first (HVD_BUILD_BENCH=ON)" >&2; exit 1; }
done
csv=$out/scaling.csv
rm -f "$csv"
{
  echo "host: $(uname -n), $(nproc) cores, $(uname -sr)"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "git: $(git -C "$here/.." rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$out/scaling_machine.txt"
cat "$out/scaling_machine.txt"

# run OPS NP LABEL ARGS...: one allreduce_bench run, dprun's usage recorded.
run() {
  local ops=$1 np=$2 label=$3
  shift 3
  local env_ops=()
  [ "$ops" = default ] || env_ops=(HVD_CPU_OPERATIONS="$ops")
  echo "== $ops, $np ranks${label:+, $label} (at ${SECONDS}s)"
  local log=$out/scaling_${ops}_np${np}${label:+_$label}_r$round.log
  if ! flock /tmp/dprun-bench.lock env "${env_ops[@]}" python3 "$here/dprun_usage.py" \
      --csv "$csv" --ranks "$np" --ops "$ops${label:+ $label}" -- \
      "$dprun" -np "$np" "$bench" --iters "$iters" --warmup 2 --scaling-csv "$csv" \
      ${label:+--scaling-label "$label"} "$@" >"$log" 2>&1; then
    echo "$0: $ops at $np ranks failed:" >&2
    grep -v '<stdout>' "$log" | tail -20 >&2
    exit 1
  fi
  grep -h '^\[0\]<stderr>:\(1000x4KiB\|resnet50\)' "$log" | sed 's/^\[0\]<stderr>://' || true
}

for round in $(seq 1 "$rounds"); do
for ops in $ops_list; do
  for np in $ranks; do
    workloads=small
    [ "$np" -le "$resnet_max" ] && workloads=small,resnet50
    peers=dprun,ring,halving_doubling
    [ "$np" -le "$peers_max" ] && peers=dprun,gloo_fused,ring,halving_doubling
    [ "${SCALE_NEGOTIATION_ONLY:-0}" = 1 ] ||
      run "$ops" "$np" "" --workload "$workloads" --peers "$peers"
    if [ "$np" -ge 8 ]; then
      run "$ops" "$np" alone --workload small --comm dprun
      HVD_NEGOTIATION_TREE_RANKS=0 run "$ops" "$np" gather --workload small --comm dprun
    fi
  done
done
done
if [ "${SCALE_MULTIHOST:-0}" = 1 ]; then
  for hosts in ${SCALE_HOSTS:-2 4 8}; do
    echo "== multihost_bench.sh, $hosts hosts (at ${SECONDS}s)"
    mkdir -p "$out/mh$hosts"
    flock /tmp/dprun-bench.lock env MH_HOSTS="$hosts" MH_PEERS=dprun,gloo_fused MH_ITERS=5 \
      "$here/multihost_bench.sh" "$build" "$out/mh$hosts" >"$out/mh$hosts/log" 2>&1 ||
      { echo "$0: multihost_bench.sh at $hosts hosts failed:" >&2; tail -20 "$out/mh$hosts/log" >&2; exit 1; }
  done
fi
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg); all runs took ${SECONDS}s" \
  >>"$out/scaling_machine.txt"

multihost=()
for f in "$out"/mh*/multihost.md; do [ -f "$f" ] && multihost+=(--multihost "$f"); done
py=python3
python3 -c 'import matplotlib' 2>/dev/null || py=/usr/bin/python3
"$py" "$here/scaling_model.py" --csv "$csv" --machine "$out/scaling_machine.txt" \
  "${multihost[@]}" --plot "$out/scaling.png" >"$out/scaling.md"
cat "$out/scaling.md"
echo "wrote $out/scaling.md and $out/scaling.png"
