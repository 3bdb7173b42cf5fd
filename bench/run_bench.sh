#!/usr/bin/env bash
# Runs the all-reduce benchmarks and writes CSV files, a markdown report and a plot.
#
#   bench/run_bench.sh BUILD_DIR [OUT_DIR]
#
# BUILD_DIR holds dprun and bench/allreduce_bench (and bench/mpi_allreduce_bench if
# MPI was found); OUT_DIR defaults to BUILD_DIR/bench-results. For each rank count
# in $BENCH_RANKS (default "2 4") it runs:
#   1. mpi_allreduce_bench under mpirun (shared memory: btl self,vader; loopback
#      only; waiting ranks yield), if both are present -> mpi_np<N>.csv;
#   2. allreduce_bench under dprun with the runtime's default CPU operations
#      -> dprun_np<N>_default.csv;
#   3. the same with HVD_CPU_OPERATIONS=gloo (forces the Gloo data plane)
#      -> dprun_np<N>_gloo.csv;
#   4. if MPI is there, $BENCH_PAIRS (default 3) alternating pairs of runs of
#      the ResNet-50 and 1000 x 4 KiB workloads, each peer alone: the MPI tool,
#      then allreduce_bench --peers dprun -> pairs/{mpi,dprun}_np<N>_<i>.csv
#      ($BENCH_ARGS apply, but not their --workload or --peers).
#      MPI never shares a run with dprun, so this compares like with like: in
#      steps 2 and 3 dprun's steps follow Gloo's, which leave the cores idle
#      while they wait in the kernel (see docs/benchmarks.md).
# Then bench/report.py writes OUT_DIR/results.md and bench/plot.py
# OUT_DIR/allreduce_busbw.png. $BENCH_ARGS is passed to both binaries (for example
# "--workload sizes --budget 0.5"). Each run prints its table as it finishes.
# $BENCH_BIND (default core) is dprun's --bind-to for every dprun run; MPI's ranks
# are bound to cores too when it is core and there are no more ranks than CPUs
# (mpirun --bind-to core; Open MPI's own default at 2 ranks), else not at all.
set -euo pipefail

. "$(dirname "$0")/bench_args.sh"
here=$(cd "$(dirname "$0")" && pwd)
ranks=${BENCH_RANKS:-2 4}
bind=${BENCH_BIND:-core}
read -r -a args <<<"${BENCH_ARGS:-}"

dprun=$build/dprun
bench=$build/bench/allreduce_bench
mpibench=$build/bench/mpi_allreduce_bench
for f in "$dprun" "$bench"; do
  [ -x "$f" ] || { echo "$0: $f not found: build it first (HVD_BUILD_BENCH=ON)" >&2; exit 1; }
done
have_mpi=0
if [ -x "$mpibench" ] && command -v mpirun.openmpi >/dev/null; then have_mpi=1; fi
[ $have_mpi = 1 ] || echo "$0: no mpi_allreduce_bench or mpirun.openmpi: skipping MPI" >&2

rm -f "$out"/dprun_np*.csv "$out"/mpi_np*.csv "$out"/pairs/*.csv
{
  echo "host: $(uname -n), $(nproc) cores, $(uname -sr)"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "git: $(git -C "$here/.." rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "dprun --bind-to: $bind"
} >"$out/machine.txt"
cat "$out/machine.txt"

# run_mpi NP CSV ARGS...: the MPI tool under mpirun. Waiting ranks yield the CPU
# instead of spinning (mpi_yield_when_idle), as dprun's and Gloo's threads
# block: on 2 cores shared with other work, a spinning rank otherwise waits a
# whole scheduler slice (~40 ms) for its peer. More ranks than cores also needs
# --oversubscribe.
run_mpi() {
  local np=$1 csv=$2
  shift 2
  local over=() mpibind=none
  [ "$np" -gt "$(nproc)" ] && over=(--oversubscribe)
  [ "$bind" = core ] && [ "$np" -le "$(nproc)" ] && mpibind=core
  mpirun.openmpi --allow-run-as-root "${over[@]}" --bind-to "$mpibind" -np "$np" \
    --mca btl self,vader --mca oob_tcp_if_include lo --mca mpi_yield_when_idle 1 \
    "$mpibench" --csv "$csv" "$@"
}

for np in $ranks; do
  if [ $have_mpi = 1 ]; then
    echo "== MPI_Allreduce, $np ranks (at ${SECONDS}s)"
    run_mpi "$np" "$out/mpi_np$np.csv" "${args[@]}"
  fi
  for ops in default gloo; do
    echo "== dprun, $np ranks, CPU operations: $ops (at ${SECONDS}s)"
    mpi_flag=()
    [ -f "$out/mpi_np$np.csv" ] && mpi_flag=(--mpi-csv "$out/mpi_np$np.csv")
    if [ $ops = gloo ]; then
      HVD_CPU_OPERATIONS=gloo "$dprun" -np "$np" --bind-to "$bind" "$bench" --csv "$out/dprun_np${np}_$ops.csv" \
        "${mpi_flag[@]}" "${args[@]}"
    else
      env -u HVD_CPU_OPERATIONS "$dprun" -np "$np" --bind-to "$bind" "$bench" --csv "$out/dprun_np${np}_$ops.csv" \
        "${mpi_flag[@]}" "${args[@]}"
    fi
  done
done

pairs=()
if [ $have_mpi = 1 ] && [ "${BENCH_PAIRS:-3}" -gt 0 ]; then
  mkdir -p "$out/pairs"
  for np in $ranks; do
    for i in $(seq 1 "${BENCH_PAIRS:-3}"); do
      echo "== pair $i, $np ranks: MPI alone, then dprun alone (at ${SECONDS}s)"
      # $BENCH_ARGS apply here too (--budget, --iters, --resnet50-sizes, ...);
      # the workload and peer flags after them win.
      run_mpi "$np" "$out/pairs/mpi_np${np}_$i.csv" "${args[@]}" --workload resnet50,small \
        >/dev/null
      env -u HVD_CPU_OPERATIONS "$dprun" -np "$np" --bind-to "$bind" "$bench" "${args[@]}" \
        --workload resnet50,small --peers dprun --csv "$out/pairs/dprun_np${np}_$i.csv" >/dev/null
    done
  done
  pairs=(--pairs "$out/pairs")
fi

echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg); all runs took ${SECONDS}s" >>"$out/machine.txt"
python3 "$here/report.py" --machine "$out/machine.txt" "${pairs[@]}" "$out"/*.csv >"$out/results.md"
echo "wrote $out/results.md"
# matplotlib comes from Debian (python3-matplotlib): a python3 earlier on PATH
# (pyenv, a venv) may not see it, so fall back to the system one.
py=python3
python3 -c 'import matplotlib' 2>/dev/null || py=/usr/bin/python3
if "$py" -c 'import matplotlib' 2>/dev/null; then
  "$py" "$here/plot.py" -o "$out/allreduce_busbw.png" "$out"/*.csv
  echo "wrote $out/allreduce_busbw.png"
else
  echo "$0: no matplotlib (python3-matplotlib): no plot" >&2
fi
