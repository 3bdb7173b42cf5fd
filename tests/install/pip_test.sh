#!/usr/bin/env bash
# pip-installs the hvd package from this checkout into a fresh virtual environment
# (offline, Debian's setuptools and wheel through --system-site-packages, torch too),
# then runs a 2-rank hvd.torch allreduce from a directory outside the checkout with
# the installed `dprun` and no HVD_LIBRARY; and checks that `pip wheel` makes a
# platform wheel holding the library and the launcher.   Usage: pip_test.sh
# Environment: PYTHON (default /usr/bin/python3), HVD_WITH_CUDA (default OFF here:
# the test is about packaging, and the CPU build is quicker).
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
python=${PYTHON:-/usr/bin/python3}
work=$(mktemp -d "${TMPDIR:-/tmp}/hvd-pip.XXXXXX")
trap 'rm -rf "$work"' EXIT
export HVD_WITH_CUDA=${HVD_WITH_CUDA:-OFF}
unset HVD_LIBRARY PYTHONPATH

"$python" -m venv --system-site-packages "$work/venv"
pip=("$work/venv/bin/python" -m pip --disable-pip-version-check)
"${pip[@]}" install -q --no-build-isolation --no-deps --no-index "$repo"
[ -x "$work/venv/bin/dprun" ] || { echo "no dprun on the venv's PATH" >&2; exit 1; }

mkdir "$work/elsewhere" && cd "$work/elsewhere"
out=$(timeout 180 "$work/venv/bin/dprun" -np 2 "$work/venv/bin/python" -c '
import torch
import hvd.torch as hvd
from hvd import _lib
hvd.init()
s = hvd.allreduce(torch.full((4,), float(hvd.rank() + 1)), op=hvd.Sum)
print("rank", hvd.rank(), "sum", s.tolist(), "lib", _lib.lib().path, "version", hvd.__version__)
')
echo "$out"
[ "$(grep -c 'sum \[3.0, 3.0, 3.0, 3.0\]' <<<"$out")" = 2 ]
grep -q "lib $work/venv/.*/site-packages/hvd/_native/libhvd.so" <<<"$out"

"${pip[@]}" wheel -q --no-build-isolation --no-deps --no-index -w "$work/wheels" "$repo"
wheel=$(ls "$work"/wheels/hvd-*.whl)
echo "wheel: $(basename "$wheel")"
case "$(basename "$wheel")" in
  *-py3-none-linux_*.whl) ;;
  *) echo "the wheel does not name the platform" >&2; exit 1 ;;
esac
listing=$("$python" -m zipfile -l "$wheel")
for f in hvd/_native/libhvd.so hvd/_native/dprun hvd/torch/__init__.py; do
  grep -q "$f" <<<"$listing" || { echo "the wheel lacks $f" >&2; exit 1; }
done
echo "pip test passed"
