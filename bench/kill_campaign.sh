#!/usr/bin/env bash
# The kill campaign at full size: SIGKILL of a random rank at a random moment (half
# of them within 60 ms of the start, mostly during hvd_init), at 2-4 ranks, over
# shared memory and Gloo; every trial checked for dprun naming the victim, every
# survivor naming it, exit status 137, no hang and no process left behind.
#
#   bench/kill_campaign.sh BUILD_DIR [OUT_DIR]
#
# $KILL_TRIALS trials (default 40) with seed $KILL_SEED (default 1); the test
# (tests/process/kill_campaign_test.cc, 8 trials in the suite) is the campaign.
# Writes OUT_DIR/kill_campaign.txt and prints its counts line.
set -euo pipefail

. "$(dirname "$0")/bench_args.sh"
test_bin=$build/tests/kill_campaign_test
[ -x "$test_bin" ] || { echo "$0: $test_bin not found: build the tests first" >&2; exit 1; }
status=0
HVD_KILL_TRIALS=${KILL_TRIALS:-40} HVD_KILL_SEED=${KILL_SEED:-1} \
  "$test_bin" >"$out/kill_campaign.txt" 2>&1 || status=$?
grep -E "^kill campaign:" "$out/kill_campaign.txt" || true
[ "$status" -eq 0 ] || echo "$0: some trials failed; see $out/kill_campaign.txt" >&2
exit "$status"
