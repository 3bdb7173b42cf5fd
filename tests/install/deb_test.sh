#!/usr/bin/env bash
# Builds the Debian package with cpack in BUILD_DIR and checks its contents and
# Depends. With HVD_TEST_DEB_INSTALL=1 (CI; needs root), also installs it with apt,
# builds a C program against /usr with pkg-config, runs it under /usr/bin/dprun -np 2,
# and removes the package again.   Usage: deb_test.sh BUILD_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/hvd-deb.XXXXXX")
trap 'rm -rf "$work"' EXIT

(cd "$work" && cpack -G DEB --config "$build/CPackConfig.cmake" >/dev/null)
deb=$(ls "$work"/dprun_*.deb)
echo "package: $(basename "$deb")"
contents=$(dpkg-deb -c "$deb" | awk '{print $6}')
for f in ./usr/bin/dprun ./usr/include/hvd.h ./usr/lib/libhvd.so.0 ./usr/lib/pkgconfig/hvd.pc \
         ./usr/lib/cmake/hvd/hvdConfig.cmake; do
  grep -qx "$f" <<<"$contents" || { echo "the package lacks $f" >&2; exit 1; }
done
depends=$(dpkg-deb -f "$deb" Depends)
echo "Depends: $depends"
for d in libgloo0 libprotobuf libstdc++6 libc6; do
  grep -q "$d" <<<"$depends" || { echo "Depends lacks $d" >&2; exit 1; }
done
[ "$(dpkg-deb -f "$deb" Package)" = dprun ]

if [ "${HVD_TEST_DEB_INSTALL:-0}" != 1 ]; then
  echo "deb test passed (not installed: set HVD_TEST_DEB_INSTALL=1 to install it too)"
  exit 0
fi
[ "$(id -u)" = 0 ] || { echo "HVD_TEST_DEB_INSTALL=1 needs root" >&2; exit 1; }
DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$deb" >/dev/null
trap 'DEBIAN_FRONTEND=noninteractive apt-get remove -y -q dprun >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
# shellcheck disable=SC2046
cc "$here/hello.c" -o "$work/hello" $(pkg-config --cflags --libs hvd)
cd "$work"
out=$(env -u HVD_LIBRARY timeout 120 /usr/bin/dprun -np 2 "$work/hello")
echo "$out"
[ "$(grep -c 'sum 3$' <<<"$out")" = 2 ]
DEBIAN_FRONTEND=noninteractive apt-get remove -y -q dprun >/dev/null
[ ! -e /usr/bin/dprun ] || { echo "/usr/bin/dprun left after removal" >&2; exit 1; }
echo "deb test passed (installed, ran, removed)"
