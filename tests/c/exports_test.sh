#!/usr/bin/env bash
# libhvd.so exports the C API and nothing else (bindings/c/libhvd.map): its defined
# dynamic symbols are exactly the functions hvd.h declares, each under the ABI's
# version node.
#
#   tests/c/exports_test.sh LIBHVD HVD_H
set -euo pipefail
lib=$1 header=$2
declared=$(grep -v '^#define' "$header" | grep -oE '\bhvd_[a-z0-9_]+\(' | tr -d '(' | sort -u)
abi=$(awk '/^#define HVD_ABI_VERSION/ {print $3}' "$header")
exported=$(nm -D --defined-only "$lib" | awk '{print $3}')
status=0
# Every symbol: an hvd_* function of the header, versioned LIBHVD_<abi>, or the node.
while read -r sym; do
  case $sym in
    "LIBHVD_$abi") ;;
    hvd_*@@LIBHVD_"$abi")
      grep -qx "${sym%@@*}" <<<"$declared" || { echo "exported but not in hvd.h: $sym"; status=1; } ;;
    *) echo "exported, not part of the C API: $sym"; status=1 ;;
  esac
done <<<"$exported"
# Every declared function is exported.
while read -r fn; do
  grep -qx "$fn@@LIBHVD_$abi" <<<"$exported" || { echo "declared in hvd.h, not exported: $fn"; status=1; }
done <<<"$declared"
[ "$status" = 0 ] && echo "libhvd exports the $(wc -l <<<"$declared") functions of hvd.h, nothing else"
exit "$status"
