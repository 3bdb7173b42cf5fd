#!/usr/bin/env bash
# Runs the torch.distributed backend's suite (bindings/python/tests_dist) with every
# torch there is here: Debian's (/usr/bin/python3, torch 1.13) and the torch 2.x of
# the torch2 environment (.ci/venvs.sh), when it is installed. For each: the
# collective and training tests alone and under `dprun -np 2`, `-np 3` and `-np 4`
# (every rank runs the whole suite), then the job tests (test_jobs.py), which start
# jobs of their own.
#
#   bindings/python/run_dist_tests.sh BUILD_DIR
#
# BUILD_DIR holds libhvd.so and dprun. Every rank's output goes to
# <log dir>/<torch>/np<N>/rank<R>.log; a failing rank's log is printed. Exits non-zero
# if any run failed. Environment: HVD_TEST_TIMEOUT (seconds per run, default 300),
# PYTEST_ARGS (extra pytest arguments).
set -u -o pipefail

if [ $# -lt 1 ]; then
  echo "usage: $0 BUILD_DIR" >&2
  exit 2
fi
BUILD_DIR=$(cd "$1" && pwd) || exit 2
HERE=$(cd "$(dirname "$0")" && pwd)
TIMEOUT=${HVD_TEST_TIMEOUT:-300}
for f in "$BUILD_DIR/libhvd.so" "$BUILD_DIR/dprun"; do
  [ -e "$f" ] || { echo "$0: $f not found (build it first)" >&2; exit 2; }
done
# shellcheck source=../../.ci/venvs.sh
source "$HERE/../../.ci/venvs.sh"

export HVD_LIBRARY="$BUILD_DIR/libhvd.so" HVD_DPRUN="$BUILD_DIR/dprun"
export PYTHONPATH="$HERE${PYTHONPATH:+:$PYTHONPATH}"
# A rank that falls out of step fails the others' stalled collectives instead of
# hanging them.
export HVD_STALL_CHECK_TIME=${HVD_STALL_CHECK_TIME:-10} HVD_STALL_SHUTDOWN_TIME=${HVD_STALL_SHUTDOWN_TIME:-20}
export OMP_NUM_THREADS=1

LOG_DIR=$(mktemp -d "${TMPDIR:-/tmp}/hvd-dist-pytest.XXXXXX")
failures=0
summary=()

RANK_SCRIPT='dir=$1; shift; log="$dir/rank$HVD_RANK.log"; exec "$@" >"$log" 2>&1'

summary_line() {
  local line
  line=$(grep -E '^=*.* (passed|failed|error|errors|skipped|no tests ran).* in [0-9.]+s' "$1" | tail -n 1)
  echo "${line:-no pytest summary (killed or crashed)}" | sed 's/^=* *//; s/ *=*$//'
}

run_suite() {  # python label np
  local py=$1 label=$2 n=$3 rc r
  local dir="$LOG_DIR/$label/np$n"
  mkdir -p "$dir"
  # shellcheck disable=SC2206
  local pytest=("$py" -m pytest -q -p no:cacheprovider -o faulthandler_timeout=120 ${PYTEST_ARGS:-}
                "$HERE/tests_dist/test_collectives.py" "$HERE/tests_dist/test_training.py")
  timeout "$TIMEOUT" "$BUILD_DIR/dprun" -np "$n" bash -c "$RANK_SCRIPT" rank "$dir" "${pytest[@]}"
  rc=$?
  for ((r = 0; r < n; r++)); do
    if [ "$rc" != 0 ]; then
      echo "----- $label np $n rank $r -----"
      tail -n 60 "$dir/rank$r.log"
    fi
  done
  summary+=("$label dprun -np $n: rank 0: $(summary_line "$dir/rank0.log") (job exit $rc)")
  [ "$rc" = 0 ] || failures=$((failures + 1))
}

run_jobs() {  # python label
  local py=$1 label=$2 rc
  local log="$LOG_DIR/$label/jobs.log"
  mkdir -p "$LOG_DIR/$label"
  # shellcheck disable=SC2086
  HVD_DIST_TESTS_NO_INIT=1 timeout "$TIMEOUT" "$py" -m pytest -q -rs -p no:cacheprovider \
    ${PYTEST_ARGS:-} "$HERE/tests_dist/test_jobs.py" >"$log" 2>&1
  rc=$?
  [ "$rc" = 0 ] || cat "$log"
  summary+=("$label jobs: $(summary_line "$log") (exit $rc)")
  [ "$rc" = 0 ] || failures=$((failures + 1))
}

start=$(date +%s)
pythons=("/usr/bin/python3")
labels=("torch-$(/usr/bin/python3 -c 'import torch; print(torch.__version__)' 2>/dev/null)")
if py2=$(hvd_venv torch2); then
  pythons+=("$py2")
  labels+=("torch-$("$py2" -c 'import torch; print(torch.__version__)' 2>/dev/null)")
else
  echo "=== the torch2 environment is not installed (.ci/install --test-envs): torch 1.13 only"
fi
for i in "${!pythons[@]}"; do
  for n in 1 2 3 4; do
    echo "=== ${labels[$i]}: dprun -np $n"
    run_suite "${pythons[$i]}" "${labels[$i]}" "$n"
  done
  echo "=== ${labels[$i]}: jobs"
  run_jobs "${pythons[$i]}" "${labels[$i]}"
done
echo "=== summary ($(( $(date +%s) - start )) s; logs in $LOG_DIR)"
printf '%s\n' "${summary[@]}"
if [ "$failures" != 0 ]; then
  echo "FAILED: $failures runs"
  exit 1
fi
echo "OK: all runs passed"
