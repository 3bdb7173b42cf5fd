#!/usr/bin/env bash
# HVD_AUTOTUNE against the best fixed setting, per workload.
#
#   bench/autotune_bench.sh BUILD_DIR [OUT_DIR]
#
# For each workload in $AUTOTUNE_WORKLOADS (default "resnet50 small"), at
# $AUTOTUNE_RANKS ranks (default 2), it times the dprun peer of allreduce_bench:
#   1. at every fixed setting the autotuner searches (HVD_FUSION_THRESHOLD x
#      HVD_CYCLE_TIME, the candidates in controller/autotuner.h), one run each;
#   2. then, alternating, $AUTOTUNE_REPEATS (default 3) runs at the best fixed
#      setting of step 1 and as many with HVD_AUTOTUNE=1, each autotuned run
#      first letting the search finish (--settle; HVD_AUTOTUNE_WINDOW=0.2 s) and
#      logging what it scored (HVD_AUTOTUNE_LOG).
# Step 2 re-measures the best fixed setting, so its figure is not the minimum of
# 30 noisy runs. Writes OUT_DIR/autotune.md (default BUILD_DIR/bench-results) and
# prints it: autotuned median / best fixed median, per workload.
set -euo pipefail

. "$(dirname "$0")/bench_args.sh"
np=${AUTOTUNE_RANKS:-2}
repeats=${AUTOTUNE_REPEATS:-3}
workloads=${AUTOTUNE_WORKLOADS:-resnet50 small}
thresholds_mib=(1 4 16 32 64 128)
cycles_ms=(0.25 0.5 1 2.5 5)
dprun=$build/dprun
bench=$build/bench/allreduce_bench
for f in "$dprun" "$bench"; do
  [ -x "$f" ] || { echo "$0: $f not found: build it first (HVD_BUILD_BENCH=ON)" >&2; exit 1; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# median_ms of the dprun peer in a CSV written by allreduce_bench --csv.
median_of() { awk -F, 'NR > 1 && $6 == "dprun" { printf "%.3f\n", $8 }' "$1"; }

# run WORKLOAD CSV [ENV...] [-- EXTRA_ARGS...]: one allreduce_bench run.
run() {
  local workload=$1 csv=$2
  shift 2
  local envs=() extra=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do envs+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  extra=("$@")
  env "${envs[@]}" "$dprun" -np "$np" "$bench" --workload "$workload" --peers dprun \
    --budget 1 --csv "$csv" "${extra[@]}" >/dev/null 2>"$tmp/stderr" || {
    cat "$tmp/stderr" >&2
    exit 1
  }
}

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

report=$out/autotune.md
{
  echo "HVD_AUTOTUNE against the best fixed setting, $np ranks, $(date -u +%Y-%m-%dT%H:%M:%SZ)," \
       "git $(git -C "$build/.." rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo
  echo "| workload | best fixed setting | best fixed ms | autotuned ms | autotuned / best | default (128 MiB, 1 ms) ms | settings the autotuner kept |"
  echo "|---|---|---:|---:|---:|---:|---|"
} >"$report.head"
: >"$report.rows"
for w in $workloads; do
  echo "== $w: fixed settings" >&2
  best="" best_ms=""
  default_ms=""
  : >"$tmp/grid"
  for t in "${thresholds_mib[@]}"; do
    for c in "${cycles_ms[@]}"; do
      run "$w" "$tmp/fixed.csv" HVD_FUSION_THRESHOLD=$((t << 20)) HVD_CYCLE_TIME="$c"
      ms=$(median_of "$tmp/fixed.csv")
      echo "$t MiB, $c ms: $ms ms" >&2
      echo "$t $c $ms" >>"$tmp/grid"
      if [ "$t" = 128 ] && [ "$c" = 1 ]; then default_ms=$ms; fi
    done
  done
  read -r best_t best_c _ < <(sort -g -k3 "$tmp/grid" | head -1)
  echo "== $w: best fixed $best_t MiB, $best_c ms; alternating with HVD_AUTOTUNE=1" >&2
  : >"$tmp/fixed_ms" ; : >"$tmp/tuned_ms"
  kept=""
  for i in $(seq "$repeats"); do
    run "$w" "$tmp/fixed.csv" HVD_FUSION_THRESHOLD=$((best_t << 20)) HVD_CYCLE_TIME="$best_c"
    median_of "$tmp/fixed.csv" >>"$tmp/fixed_ms"
    log=$out/autotune_${w}_$i.csv
    run "$w" "$tmp/tuned.csv" HVD_AUTOTUNE=1 HVD_AUTOTUNE_WINDOW=0.2 HVD_AUTOTUNE_LOG="$log" -- --settle 25
    median_of "$tmp/tuned.csv" >>"$tmp/tuned_ms"
    # The log's best-scoring line is the setting the search kept.
    kept+="$(awk -F, 'NR > 1 && $3 > b { b = $3; s = sprintf("%.0f MiB, %s ms", $1 / 1048576, $2) } END { print s }' "$log"); "
    echo "   fixed $(tail -1 "$tmp/fixed_ms") ms, autotuned $(tail -1 "$tmp/tuned_ms") ms" >&2
  done
  fixed=$(median <"$tmp/fixed_ms")
  tuned=$(median <"$tmp/tuned_ms")
  ratio=$(awk -v a="$tuned" -v b="$fixed" 'BEGIN { printf "%.2f", a / b }')
  echo "| $w | $best_t MiB, $best_c ms | $fixed | $tuned | $ratio | $default_ms | ${kept%; } |" >>"$report.rows"
done
cat "$report.head" "$report.rows" >"$report"
rm -f "$report.head" "$report.rows"
cat "$report"
echo "wrote $report" >&2
