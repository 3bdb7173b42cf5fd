#!/usr/bin/env bash
# Device check for the CUDA backend: builds dprun with HVD_WITH_CUDA=ON, runs the
# GPU tests (tests/gpu/*_test.cc), the allreduce bandwidth benchmark
# (gpu_bandwidth: NCCL at one rank, 1 MB to 1 GB; host staging with 2 and 4 ranks
# sharing the GPU) and, where torch with CUDA and torchvision are importable, the
# training-step benchmark bench/gpu_step.py (plain torch, hvd, DDP). Sized for one
# H200: about 3 to 5 minutes with the build, under 2 without it; each step has its own timeout, the whole stays under 6 minutes.
#
#   tests/gpu/device_check.sh                  build in build-gpu, then run
#   tests/gpu/device_check.sh --prebuilt DIR   run the binaries that
#       tests/gpu/make_prebuilt.sh packed on a machine with the build dependencies
#       (a GPU machine without Gloo, protobuf and GoogleTest cannot build dprun)
#   --build-dir DIR                            build somewhere else
#
# Results go to $OUT when set, else to <build dir>/device_check: summary.txt,
# build.log, gpu_tests.log, one gtest XML per test binary, bandwidth.md and
# bandwidth.log (7 files), and gpu_step.md with gpu_step.log. Exit status: 0 everything passed; 1 a test or the
# benchmark failed; 2 no GPU; 3 the build failed.
set -uo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 3
build="build-gpu"
prebuilt=""
while [ $# -gt 0 ]; do
  case "$1" in
    --prebuilt) prebuilt=$2; shift 2 ;;
    --build-dir) build=$2; shift 2 ;;
    *) echo "usage: $0 [--prebuilt DIR] [--build-dir DIR]" >&2; exit 64 ;;
  esac
done
out=${OUT:-$build/device_check}
mkdir -p "$out"
summary=$out/summary.txt
: >"$summary"
note() { echo "[device_check +${SECONDS}s] $*" | tee -a "$summary"; }

note "GPU: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -1)"
if ! nvidia-smi -L >/dev/null 2>&1; then
  note "no GPU (nvidia-smi failed): nothing to check"
  exit 2
fi

# The CUDA runtime and NCCL: the toolkit's, else the wheels beside PyTorch.
libdirs=()
[ -n "$prebuilt" ] && libdirs+=("$(cd "$prebuilt" && pwd)/lib")
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  [ -d "$d" ] && libdirs+=("$d")
done
for py in python3 /opt/torch/.venv/bin/python3; do
  for mod in nccl cuda_runtime; do
    d=$("$py" -c "import os, nvidia.$mod as m; print(os.path.join(list(m.__path__)[0], 'lib'))" 2>/dev/null) &&
      [ -d "$d" ] && libdirs+=("$d")
  done
done
LD_LIBRARY_PATH=$(IFS=:; echo "${libdirs[*]}")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export LD_LIBRARY_PATH
nccl=""
for d in "${libdirs[@]}"; do
  [ -e "$d/libnccl.so.2" ] && nccl="$d/libnccl.so.2" && break
done
note "library path: $LD_LIBRARY_PATH"
note "NCCL: ${nccl:-not found in the library path; the dynamic linker searches the system}"

if [ -n "$prebuilt" ]; then
  bindir=$prebuilt
  note "using prebuilt binaries in $bindir"
  : >"$out/build.log"
else
  bindir=$build/tests/gpu
  note "configuring $build (HVD_WITH_CUDA=ON, sm_90)"
  if ! timeout 120 cmake -S . -B "$build" -DHVD_WITH_CUDA=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCMAKE_CUDA_ARCHITECTURES=90 -DHVD_BUILD_BENCH=OFF >"$out/build.log" 2>&1; then
    note "configure failed: see build.log"; tail -20 "$out/build.log"; exit 3
  fi
  note "building the GPU tests and gpu_bandwidth with $(nproc) jobs"
  if ! timeout 270 cmake --build "$build" -j"$(nproc)" \
      --target gpu_allreduce_test gpu_collectives_test gpu_bandwidth hvd >>"$out/build.log" 2>&1; then
    note "build failed: see build.log"; tail -30 "$out/build.log"; exit 3
  fi
  note "built"
fi

status=0
: >"$out/gpu_tests.log"
for t in gpu_allreduce_test gpu_collectives_test; do
  note "running $t"
  timeout 150 "$bindir/$t" --gtest_output="xml:$out/$t.xml" >>"$out/gpu_tests.log" 2>&1
  rc=$?
  passed=$(grep -c '^\[       OK \]' "$out/gpu_tests.log")
  how="exit $rc"
  [ $rc -eq 124 ] && how="timed out after 150 s"
  note "$t: $how ($passed tests passed so far)"
  [ $rc -ne 0 ] && status=1
done
# Only the join test at one NCCL rank may skip here; more means CUDA did not start.
skipped=$(grep -cE '^\[  SKIPPED \] .*\([0-9]+ ms\)$' "$out/gpu_tests.log")
note "tests skipped: $skipped (expected 1: the join test at one NCCL rank)"
[ "$skipped" -gt 1 ] && status=1
grep -E '^\[  (FAILED|SKIPPED) \] .*\([0-9]+ ms\)$' "$out/gpu_tests.log" | tee -a "$summary"

note "running gpu_bandwidth"
timeout 150 "$bindir/gpu_bandwidth" --out "$out/bandwidth.md" >"$out/bandwidth.log" 2>&1
rc=$?
note "gpu_bandwidth: exit $rc"
[ $rc -ne 0 ] && status=1
[ -s "$out/bandwidth.md" ] && tee -a "$summary" <"$out/bandwidth.md"

# The training step: plain torch, hvd.DistributedOptimizer and DDP,
# interleaved in one process; needs the Python binding's libhvd with CUDA.
libhvd=$build/libhvd.so
[ -n "$prebuilt" ] && libhvd=$prebuilt/libhvd.so
py=""
for cand in /opt/torch/.venv/bin/python3 python3 /usr/bin/python3; do
  if "$cand" -c "import torch, torchvision; assert torch.cuda.is_available()" 2>/dev/null; then
    py=$cand; break
  fi
done
if [ -z "$py" ] || [ ! -e "$libhvd" ]; then
  note "gpu_step: skipped (no python with torch+CUDA+torchvision, or no $libhvd)"
else
  note "running bench/gpu_step.py with $py"
  HVD_LIBRARY=$libhvd timeout 200 "$py" bench/gpu_step.py --rounds 5 --steps 20 \
    >"$out/gpu_step.log" 2>&1
  rc=$?
  note "gpu_step: exit $rc"
  [ $rc -ne 0 ] && status=1
  grep -E '^(\||resnet)' "$out/gpu_step.log" >"$out/gpu_step.md"
  tee -a "$summary" <"$out/gpu_step.md"
fi

verdict=FAILED
[ $status -eq 0 ] && verdict=PASSED
note "done: $verdict in ${SECONDS} s"
exit $status
