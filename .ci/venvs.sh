# Sourced by .ci/install and the test scripts: the Python environments beside
# Debian's, one per purpose, each a venv made with --system-site-packages (Debian's
# torch 1.13, numpy and pytest stay visible unless a pinned package replaces them
# inside it) from a pinned list in .ci/requirements/NAME.txt.
#
#   HVD_VENV_ROOT   where they live (default ~/.cache/dprun/venvs): made once per
#                   machine, remade when NAME.txt changes.
#   hvd_venv NAME   prints the venv's python (exit 1 if it is not installed).
#   hvd_make_venv NAME   installs it from NAME.txt if missing or out of date.
HVD_VENV_ROOT=${HVD_VENV_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/dprun/venvs}
HVD_REQUIREMENTS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/requirements

hvd_venv() {
  local py="$HVD_VENV_ROOT/$1/bin/python"
  [ -x "$py" ] && [ -f "$HVD_VENV_ROOT/$1/.installed" ] || return 1
  echo "$py"
}

hvd_make_venv() {
  local name=$1 req="$HVD_REQUIREMENTS_DIR/$1.txt" dir="$HVD_VENV_ROOT/$1"
  [ -f "$req" ] || { echo "hvd_make_venv: no $req" >&2; return 2; }
  if [ -f "$dir/.installed" ] && cmp -s "$req" "$dir/.installed"; then
    return 0
  fi
  echo "dprun: making the '$name' Python environment in $dir (from $req)"
  rm -rf "$dir"
  mkdir -p "$HVD_VENV_ROOT"
  /usr/bin/python3 -m venv --system-site-packages "$dir"
  "$dir/bin/python" -m pip install -q --disable-pip-version-check -r "$req"
  cp "$req" "$dir/.installed"
}
