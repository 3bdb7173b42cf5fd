#!/usr/bin/env bash
# Runs the hvd Python test suite four ways: in a single process, then under
# `dprun -np 2`, `-np 3` and `-np 4`, where every rank runs the whole suite.
#
#   bindings/python/run_tests.sh BUILD_DIR        (e.g. build-py)
#
# BUILD_DIR holds libhvd.so and dprun. Rank 0's pytest output streams to the
# terminal; every rank's output also goes to <log dir>/np<N>/rank<R>.log, and after
# each job one summary line per rank is printed, with the full log of any rank
# that did not pass. Every rank's pytest exit code counts: dprun fails the job if
# any rank fails. Exits non-zero if any run failed. Environment: PYTHON (default
# /usr/bin/python3), HVD_TEST_TIMEOUT (seconds per run, default 300), extra pytest
# arguments in PYTEST_ARGS; HVD_TEST_PATHS (default tests/), the rank counts in
# HVD_TEST_RANKS (default "2 3 4"), HVD_TEST_SINGLE=0 to skip the single process.
set -u -o pipefail

if [ $# -lt 1 ]; then
  echo "usage: $0 BUILD_DIR" >&2
  exit 2
fi
BUILD_DIR=$(cd "$1" && pwd) || exit 2
HERE=$(cd "$(dirname "$0")" && pwd)
PYTHON=${PYTHON:-/usr/bin/python3}
TIMEOUT=${HVD_TEST_TIMEOUT:-300}
for f in "$BUILD_DIR/libhvd.so" "$BUILD_DIR/dprun"; do
  [ -e "$f" ] || { echo "$0: $f not found (build it first)" >&2; exit 2; }
done

export HVD_LIBRARY="$BUILD_DIR/libhvd.so"
export PYTHONPATH="$HERE${PYTHONPATH:+:$PYTHONPATH}"
# A rank that falls out of step fails the others' stalled collectives instead of
# hanging them.
export HVD_STALL_CHECK_TIME=${HVD_STALL_CHECK_TIME:-20}
export HVD_STALL_SHUTDOWN_TIME=${HVD_STALL_SHUTDOWN_TIME:-40}

LOG_DIR=$(mktemp -d "${TMPDIR:-/tmp}/hvd-pytest.XXXXXX")
# shellcheck disable=SC2206
# shellcheck disable=SC2206
TEST_PATHS=(${HVD_TEST_PATHS:-$HERE/tests})
PYTEST=("$PYTHON" -m pytest -q -p no:cacheprovider ${PYTEST_ARGS:-} "${TEST_PATHS[@]}")
failures=0
summary=()

# Each rank: rank 0 streams and logs, the others only log.
RANK_SCRIPT='dir=$1; shift; log="$dir/rank$HVD_RANK.log"
if [ "$HVD_RANK" = 0 ]; then "$@" 2>&1 | tee "$log"; exit "${PIPESTATUS[0]}"; fi
exec "$@" >"$log" 2>&1'

summary_line() {  # The pytest summary of a log, or why there is none.
  local line
  line=$(grep -E '^=*.* (passed|failed|error|errors|skipped|no tests ran).* in [0-9.]+s' "$1" | tail -n 1)
  echo "${line:-no pytest summary (killed or crashed)}" | sed 's/^=* *//; s/ *=*$//'
}

run_single() {
  echo "=== single process"
  local log="$LOG_DIR/single.log" rc
  timeout "$TIMEOUT" "${PYTEST[@]}" 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  summary+=("single process: $(summary_line "$log") (exit $rc)")
  [ "$rc" = 0 ] || failures=$((failures + 1))
}

run_ranks() {
  local n=$1 dir="$LOG_DIR/np$1" rc r bad=()
  mkdir -p "$dir"
  echo "=== dprun -np $n (rank 0 shown; logs in $dir)"
  timeout "$TIMEOUT" "$BUILD_DIR/dprun" -np "$n" bash -c "$RANK_SCRIPT" rank "$dir" "${PYTEST[@]}"
  rc=$?
  for ((r = 0; r < n; r++)); do
    local log="$dir/rank$r.log" line
    line=$(summary_line "$log")
    echo "np $n rank $r: $line"
    if [ "$rc" != 0 ] && grep -qE 'failed|error|no pytest summary' <<<"$line"; then
      bad+=("$r")
      if [ "$r" != 0 ]; then  # Rank 0's output was shown as it ran.
        echo "----- np $n rank $r log -----"
        cat "$log"
        echo "----- end of np $n rank $r log -----"
      fi
    fi
  done
  local failed_ranks=""
  [ ${#bad[@]} = 0 ] || failed_ranks="; failing ranks: ${bad[*]}"
  summary+=("dprun -np $n: rank 0: $(summary_line "$dir/rank0.log") (job exit $rc$failed_ranks)")
  [ "$rc" = 0 ] || failures=$((failures + 1))
}

start=$(date +%s)
runs=0
if [ "${HVD_TEST_SINGLE:-1}" != 0 ]; then
  run_single
  runs=$((runs + 1))
fi
for n in ${HVD_TEST_RANKS:-2 3 4}; do
  run_ranks "$n"
  runs=$((runs + 1))
done
echo "=== summary ($(( $(date +%s) - start )) s; logs in $LOG_DIR)"
printf '%s\n' "${summary[@]}"
if [ "$failures" != 0 ]; then
  echo "FAILED: $failures of $runs runs"
  exit 1
fi
echo "OK: all $runs runs passed"
