"""The package's version, the library's, and the error when they disagree."""
import os
import re
import subprocess
import sys

import pytest

import hvd
from hvd import _lib

PKG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
HEADER = os.path.join(PKG, "..", "c", "hvd.h")


def test_header_package_and_library_agree():
    if not os.path.isfile(HEADER):
        pytest.skip("not in a checkout: no bindings/c/hvd.h beside the package")
    with open(HEADER) as f:
        text = f.read()
    parts = [re.search(r"#define HVD_VERSION_%s (\d+)" % k, text).group(1)
             for k in ("MAJOR", "MINOR", "PATCH")]
    assert hvd.__version__ == ".".join(parts)
    loaded = _lib.lib()
    v = [_lib.ctypes.c_int(-1) for _ in range(4)]
    assert loaded.hvd_version(*[_lib.ctypes.byref(x) for x in v]) == 0
    assert "%d.%d.%d" % (v[0].value, v[1].value, v[2].value) == hvd.__version__
    assert v[3].value == int(re.search(r"#define HVD_ABI_VERSION (\d+)", text).group(1))


def _fake_library(tmp_path, body):
    src = tmp_path / "fake.c"
    src.write_text(body)
    out = tmp_path / "libhvd.so"
    cc = os.environ.get("CC", "cc")
    try:
        subprocess.run([cc, "-shared", "-fPIC", "-o", str(out), str(src)], check=True,
                       capture_output=True, timeout=120)
    except (OSError, subprocess.CalledProcessError) as e:
        pytest.skip("no C compiler to build a fake libhvd.so: %s" % e)
    return str(out)


def _import_with(library):
    env = dict(os.environ)
    env["HVD_LIBRARY"] = library
    env["PYTHONPATH"] = PKG
    code = ("import hvd.numpy as h\n"
            "try:\n    h.size()\nexcept h.HvdError as e:\n"
            "    print(type(e).__name__, isinstance(e, ValueError), e)\n")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_a_library_of_another_version_is_named_with_both_versions(tmp_path):
    library = _fake_library(tmp_path, """
        int hvd_version(int* a, int* b, int* c, int* d) {
          if (a) *a = 9; if (b) *b = 1; if (c) *c = 7; if (d) *d = 3; return 0; }""")
    out = _import_with(library)
    assert out.startswith("InvalidUsageError True"), out
    assert "the hvd package is version %s but %s is libhvd 9.1.7" % (hvd.__version__, library) \
        in out
    assert "must agree in major.minor" in out


def test_a_library_older_than_versioning_is_named(tmp_path):
    library = _fake_library(tmp_path, "int hvd_init(void) { return 0; }")
    out = _import_with(library)
    assert "has no hvd_version, so it is older" in out and library in out, out
