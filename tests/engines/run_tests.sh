#!/usr/bin/env bash
# The engines' tests: Ray, Spark, Slurm, MPICH and mpi4py, Kubernetes replays. Each
# test starts its engine for real and skips itself, with one line, when the engine is
# not installed (.ci/install --test-envs installs them all). Ray and Spark run in the
# 'engines' Python environment (.ci/requirements/engines.txt), the rest in Debian's.
#
#   tests/engines/run_tests.sh BUILD_DIR        (libhvd.so and dprun)
#
# PYTEST_ARGS adds pytest arguments (-m "not slow" leaves out those that start a
# cluster: all but a few). Exits non-zero if any run failed.
set -u -o pipefail
[ $# -ge 1 ] || { echo "usage: $0 BUILD_DIR" >&2; exit 2; }
BUILD_DIR=$(cd "$1" && pwd) || exit 2
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
for f in "$BUILD_DIR/libhvd.so" "$BUILD_DIR/dprun"; do
  [ -e "$f" ] || { echo "$0: $f not found (build it first)" >&2; exit 2; }
done
export HVD_BUILD_DIR="$BUILD_DIR" HVD_LIBRARY="$BUILD_DIR/libhvd.so"
# shellcheck source=.ci/venvs.sh
source "$REPO/.ci/venvs.sh"
engines_python=$(hvd_venv engines) || {
  echo "$0: the 'engines' Python environment is not installed (.ci/install --test-envs):" \
       "the Ray and Spark tests skip themselves" >&2
  engines_python=/usr/bin/python3
}

status=0
run() {  # run PYTHON FILE...
  local python=$1
  shift
  # shellcheck disable=SC2086
  timeout 900 "$python" -m pytest -q -p no:cacheprovider -rs ${PYTEST_ARGS:-} "$@"
  local rc=$?
  # 5: every test was deselected (-m); a skip is reported by pytest itself.
  if [ $rc -ne 0 ] && [ $rc -ne 5 ]; then status=1; fi
}
run /usr/bin/python3 "$HERE/test_mpi.py" "$HERE/test_slurm.py" "$HERE/test_kubernetes.py"
run "$engines_python" "$HERE/test_ray.py" "$HERE/test_ray_elastic.py" "$HERE/test_ray_pods.py" \
  "$HERE/test_spark.py"
exit $status
