#!/usr/bin/env bash
# cmake --install into a temporary prefix, moved elsewhere afterwards (the install
# must be relocatable); then a separate C++ project with find_package(hvd) and a C
# program built with `pkg-config --cflags --libs hvd`, both run under the installed
# dprun -np 2.   Usage: install_test.sh BUILD_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/hvd-install.XXXXXX")
trap 'rm -rf "$work"' EXIT

cmake --install "$build" --prefix "$work/staged" >/dev/null
mv "$work/staged" "$work/prefix"
prefix=$work/prefix
for f in bin/dprun include/hvd.h lib/cmake/hvd/hvdConfig.cmake lib/cmake/hvd/hvdConfigVersion.cmake \
         lib/pkgconfig/hvd.pc; do
  [ -e "$prefix/$f" ] || { echo "missing $f in the installed tree" >&2; exit 1; }
done
so=$(readlink "$prefix/lib/libhvd.so")
soname=$(objdump -p "$prefix/lib/$so" | awk '/SONAME/ {print $2}')
echo "libhvd.so -> $so, SONAME $soname"
[ "$soname" = "libhvd.so.0" ] || { echo "unexpected SONAME $soname" >&2; exit 1; }

# find_package(hvd) from a project that knows nothing of dprun's tree.
cmake -S "$here/consumer" -B "$work/consumer" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
  | grep "hvd 0" 
ninja -C "$work/consumer" >/dev/null
# pkg-config, with an rpath so the program finds libhvd outside the system's paths.
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
libdir=$(pkg-config --variable=libdir hvd)
# shellcheck disable=SC2046
cc "$here/hello.c" -o "$work/hello" $(pkg-config --cflags --libs hvd) -Wl,-rpath,"$libdir"

cd "$work"  # anywhere but the checkout
out=$(env -u HVD_LIBRARY timeout 120 "$prefix/bin/dprun" -np 2 "$work/consumer/consumer")
echo "$out"
[ "$(grep -c 'sum 3 (want 3)' <<<"$out")" = 2 ]
out=$(timeout 120 "$prefix/bin/dprun" -np 2 "$work/hello")
echo "$out"
[ "$(grep -c 'sum 3$' <<<"$out")" = 2 ]
echo "install test passed"
