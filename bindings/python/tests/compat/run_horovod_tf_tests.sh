#!/usr/bin/env bash
# Runs Horovod's own TensorFlow suite, test/parallel/test_tensorflow.py of a Horovod
# checkout (v0.28.1: git clone -b v0.28.1 https://github.com/horovod/horovod), unchanged,
# against hvd.tensorflow: the `horovod` package here makes horovod.tensorflow import
# hvd.tensorflow (see horovod/__init__.py). Each test runs alone, in its own dprun
# job of N ranks, for each N given (default 2 and 4); the tests that need a GPU (a
# name with "gpu") run together in one job, as they all skip without one.
#
#   bindings/python/tests/compat/run_horovod_tf_tests.sh HOROVOD_CHECKOUT [N ...]
#
# Environment: BUILD_DIR (default build; libhvd.so, dprun, libhvd_tensorflow.so),
# PYTHON (default: the `tf` venv's), EACH=0 to run the whole file in one job per N
# instead, HVD_COMPAT_TIMEOUT (seconds per job, default 300), TF_USE_LEGACY_KERAS=1
# for tf-keras, TESTS (a space-separated list of test names, default all).
# Prints one line per test and job (PASS, FAIL with its first error line, SKIP with
# the reason) and the counts per N; every rank's log is kept in the log folder named
# at the end. Exits non-zero if a test failed.
set -u -o pipefail

if [ $# -lt 1 ]; then
  echo "usage: $0 HOROVOD_CHECKOUT [N ...]" >&2
  exit 2
fi
HOROVOD=$(cd "$1" && pwd) || exit 2
shift
RANKS=("$@")
[ ${#RANKS[@]} -gt 0 ] || RANKS=(2 4)
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../../.." && pwd)
BUILD_DIR=$(cd "${BUILD_DIR:-$ROOT/build}" && pwd) || exit 2
SUITE_DIR=$HOROVOD/test/parallel
[ -f "$SUITE_DIR/test_tensorflow.py" ] || {
  echo "$0: no test/parallel/test_tensorflow.py in $HOROVOD" >&2
  exit 2
}
# shellcheck source=.ci/venvs.sh
source "$ROOT/.ci/venvs.sh"
PYTHON=${PYTHON:-$(hvd_venv tf)} || {
  echo "$0: no 'tf' Python environment: run .ci/install --test-envs" >&2
  exit 2
}
export HVD_LIBRARY="$BUILD_DIR/libhvd.so" TF_CPP_MIN_LOG_LEVEL=3
export PYTHONPATH="$HERE:$ROOT/bindings/python:$SUITE_DIR${PYTHONPATH:+:$PYTHONPATH}"
export HVD_STALL_CHECK_TIME=${HVD_STALL_CHECK_TIME:-20} HVD_STALL_SHUTDOWN_TIME=${HVD_STALL_SHUTDOWN_TIME:-40}
TIMEOUT=${HVD_COMPAT_TIMEOUT:-300}
LOG_DIR=$(mktemp -d "${TMPDIR:-/tmp}/hvd-horovod-tf.XXXXXX")
cd "$SUITE_DIR" || exit 2

if [ -n "${TESTS:-}" ]; then
  read -r -a names <<<"$TESTS"
else
  mapfile -t names < <("$PYTHON" -m pytest --collect-only -q -p no:cacheprovider \
    test_tensorflow.py 2>/dev/null | sed -n 's/^test_tensorflow.py::TensorFlowTests:://p')
fi
[ ${#names[@]} -gt 0 ] || { echo "$0: collected no tests" >&2; exit 2; }
cpu=() gpu=()
for t in "${names[@]}"; do
  if [[ $t == *gpu* ]]; then gpu+=("$t"); else cpu+=("$t"); fi
done

# One job: `dprun -np N pytest ids...`; every rank logs to DIR/rank<r>.log.
run_job() {
  local n=$1 dir=$2
  shift 2
  mkdir -p "$dir"
  timeout "$TIMEOUT" "$BUILD_DIR/dprun" -np "$n" bash -c \
    'd=$1; shift; exec "$@" >"$d/rank$HVD_RANK.log" 2>&1' job "$dir" \
    "$PYTHON" -m pytest -q -rs -p no:cacheprovider "$@" >"$dir/dprun.log" 2>&1
}

# Each test id's outcome on rank 0, from pytest's -rs and failure lines.
report() {
  local n=$1 dir=$2 test=$3 rc=$4 log="$2/rank0.log" why
  if [ "$rc" = 0 ] && grep -qE '[0-9]+ passed' "$log"; then
    echo "np $n PASS $test"
    pass=$((pass + 1))
  elif [ "$rc" = 0 ] && grep -qE '[0-9]+ skipped' "$log"; then
    why=$(grep -m1 '^SKIPPED' "$log" | sed 's/^SKIPPED \[[0-9]*\] [^:]*:[0-9]*: //')
    echo "np $n SKIP $test ($why)"
    skip=$((skip + 1))
  else
    why=$(grep -hm1 -E '^E  ' "$dir"/rank*.log | head -n 1 | sed 's/^E *//' | cut -c1-160)
    [ "$rc" = 124 ] && why="timed out after $TIMEOUT s"
    echo "np $n FAIL $test (${why:-exit $rc; see $dir})"
    fail=$((fail + 1))
  fi
}

status=0
for n in "${RANKS[@]}"; do
  pass=0 fail=0 skip=0
  if [ "${EACH:-1}" = 0 ]; then
    run_job "$n" "$LOG_DIR/np$n" test_tensorflow.py
    echo "np $n (one job): $(grep -E '(passed|failed)' "$LOG_DIR/np$n/rank0.log" | tail -n 1)"
    grep -h '^FAILED' "$LOG_DIR/np$n"/rank*.log | sort -u
    grep -q '^FAILED' "$LOG_DIR/np$n"/rank*.log && status=1
    continue
  fi
  for t in "${cpu[@]}"; do
    run_job "$n" "$LOG_DIR/np$n/$t" "test_tensorflow.py::TensorFlowTests::$t"
    report "$n" "$LOG_DIR/np$n/$t" "$t" $?
  done
  if [ ${#gpu[@]} -gt 0 ]; then
    ids=("${gpu[@]/#/test_tensorflow.py::TensorFlowTests::}")
    run_job "$n" "$LOG_DIR/np$n/gpu" "${ids[@]}"
    rc=$?
    g=$(grep -E '[0-9]+ (passed|skipped|failed)' "$LOG_DIR/np$n/gpu/rank0.log" | tail -n 1)
    echo "np $n GPU tests together (${#gpu[@]}): $g"
    p=$(grep -oE '[0-9]+ passed' <<<"$g" | cut -d' ' -f1)
    s=$(grep -oE '[0-9]+ skipped' <<<"$g" | cut -d' ' -f1)
    f=$(grep -oE '[0-9]+ failed' <<<"$g" | cut -d' ' -f1)
    pass=$((pass + ${p:-0})) skip=$((skip + ${s:-0})) fail=$((fail + ${f:-0}))
    [ "$rc" = 0 ] || [ -n "$f" ] || fail=$((fail + 1))
  fi
  echo "np $n: $pass passed, $fail failed, $skip skipped"
  [ "$fail" = 0 ] || status=1
done
echo "logs: $LOG_DIR"
exit "$status"
