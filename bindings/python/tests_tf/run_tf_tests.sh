#!/usr/bin/env bash
# The TensorFlow suite of hvd (this folder): builds libhvd_tensorflow.so in BUILD_DIR
# against the TensorFlow of the `tf` venv (.ci/requirements/tf.txt, made by
# `.ci/install --test-envs`), then runs the suite through ../run_tests.sh with that
# venv's Python: Keras 3 (TensorFlow's default keras) in one process and under
# dprun -np 2 and -np 3, then the Keras tests again on tf-keras (TF_USE_LEGACY_KERAS=1)
# at 2 ranks.
#
#   bindings/python/tests_tf/run_tf_tests.sh BUILD_DIR
#
# Environment: PYTHON (default: the tf venv's), PYTEST_ARGS (e.g. "-m 'not slow'").
# Exits non-zero if any run failed.
set -u -o pipefail

if [ $# -lt 1 ]; then
  echo "usage: $0 BUILD_DIR" >&2
  exit 2
fi
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
BUILD_DIR=$1
# shellcheck source=.ci/venvs.sh
source "$ROOT/.ci/venvs.sh"
PYTHON=${PYTHON:-$(hvd_venv tf)} || {
  echo "$0: no 'tf' Python environment: run .ci/install --test-envs" >&2
  exit 2
}
export PYTHON TF_CPP_MIN_LOG_LEVEL=3

cmake -S "$ROOT" -B "$BUILD_DIR" -DHVD_WITH_TENSORFLOW=ON -DHVD_TF_PYTHON="$PYTHON" >/dev/null ||
  exit 1
cmake --build "$BUILD_DIR" --target hvd dprun hvd_tensorflow -- -j "$(nproc)" >/dev/null || {
  echo "$0: building libhvd_tensorflow.so failed" >&2
  exit 1
}

status=0
echo "=== Keras 3 (TensorFlow's default keras)"
HVD_TEST_PATHS="$HERE" HVD_TEST_RANKS="2 3" bash "$HERE/../run_tests.sh" "$BUILD_DIR" || status=1
echo "=== tf-keras (TF_USE_LEGACY_KERAS=1)"
TF_USE_LEGACY_KERAS=1 HVD_TEST_SINGLE=0 HVD_TEST_PATHS="$HERE/test_tf_keras.py" \
  HVD_TEST_RANKS="2" bash "$HERE/../run_tests.sh" "$BUILD_DIR" || status=1
exit "$status"
