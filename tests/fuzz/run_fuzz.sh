#!/usr/bin/env bash
# Runs each libFuzzer target for SECONDS (default 20), starting from the committed seed
# corpus in tests/fuzz/corpus/<target>/ (read only; new inputs go to a scratch dir).
# Exits non-zero if any target crashes, trips a sanitizer, leaks, or hangs past 30 s
# on one input; the offending input is kept as BUILD_DIR/fuzz-artifacts/<target>-*.
#
#   tests/fuzz/run_fuzz.sh build-fuzz 20
# Reproduce a finding: BUILD_DIR/tests/fuzz/<target> BUILD_DIR/fuzz-artifacts/<file>
set -euo pipefail
build=${1:?usage: run_fuzz.sh BUILD_DIR [SECONDS]}
seconds=${2:-20}
here=$(cd "$(dirname "$0")" && pwd)
artifacts="$build/fuzz-artifacts"
mkdir -p "$artifacts"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
status=0
for target in store_protocol_fuzz control_message_fuzz; do
  binary="$build/tests/fuzz/$target"
  if [ ! -x "$binary" ]; then
    echo "run_fuzz: $binary is missing (configure with -DHVD_FUZZ=ON, see tests/fuzz/CMakeLists.txt)"
    status=1
    continue
  fi
  mkdir -p "$scratch/$target"
  log="$scratch/$target.log"
  if "$binary" -max_total_time="$seconds" -timeout=30 -print_final_stats=1 \
      -artifact_prefix="$artifacts/$target-" "$scratch/$target" "$here/corpus/$target" >"$log" 2>&1; then
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    echo "run_fuzz: $target: clean, ${execs:-?} inputs in ${seconds} s"
    grep -m 5 ": warning: " "$log" || true
  else
    echo "run_fuzz: $target FAILED; the end of its log:"
    tail -n 80 "$log"
    status=1
  fi
done
exit $status
