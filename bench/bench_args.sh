# Sourced by the bench scripts (bash): their arguments BUILD_DIR [OUT_DIR] into
# $build and $out (absolute; OUT_DIR defaults to BUILD_DIR/bench-results and is
# created).
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  echo "usage: $0 BUILD_DIR [OUT_DIR]" >&2
  exit 2
fi
build=$(cd "$1" && pwd)
out=${2:-$build/bench-results}
mkdir -p "$out"
out=$(cd "$out" && pwd)
