#!/usr/bin/env bash
# Packs the GPU test binaries of a CUDA build (HVD_WITH_CUDA=ON) with the shared
# libraries a bare GPU machine lacks (protobuf and whatever else ldd names beyond
# the C/C++ runtime, the driver and NCCL), for tests/gpu/device_check.sh --prebuilt.
# NCCL is left out (over 200 MB): device_check.sh finds the GPU machine's own.
#
#   tests/gpu/make_prebuilt.sh BUILD_DIR [DEST]    (DEST defaults to build-gpu-prebuilt)
#
# DEST stays under a few tens of MB (debug info stripped), small enough to carry.
set -euo pipefail
build=${1:?usage: $0 BUILD_DIR [DEST]}
dest=${2:-build-gpu-prebuilt}
bins=(gpu_allreduce_test gpu_collectives_test gpu_bandwidth)
rm -rf "$dest"
mkdir -p "$dest/lib"
for b in "${bins[@]}"; do
  cp "$build/tests/gpu/$b" "$dest/"
  strip --strip-debug "$dest/$b"
done
for lib in $(ldd "${bins[@]/#/$dest/}" | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u); do
  case "$(basename "$lib")" in
    libc.so* | libm.so* | libpthread.so* | libdl.so* | librt.so* | ld-linux* | libgcc_s.so* | \
      libstdc++.so* | libcuda.so* | libnccl.so*) continue ;;
  esac
  cp -L "$lib" "$dest/lib/"
done
du -sh "$dest"
ls "$dest" "$dest/lib"
