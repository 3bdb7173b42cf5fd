"""Builds the native half of the `hvd` package (see pyproject.toml for the rest).

`pip install --no-build-isolation .` (or `pip wheel`) runs CMake on this checkout
for the two targets the package needs, libhvd.so and dprun, and puts them in the
package as hvd/_native/, where hvd._lib and the `dprun` command find them. When
the Python running the build can import tensorflow, the TensorFlow kernels of
hvd.tensorflow (libhvd_tensorflow.so) are built against that TensorFlow and go
beside them. Nothing else is built (no tests, no benchmarks). Settings, from the
environment:
  HVD_WITH_CUDA          AUTO (default), ON or OFF: the NCCL backend;
  HVD_CMAKE_ARGS         more CMake arguments, space-separated;
  HVD_BUILD_PARALLEL     build jobs (default: the number of CPUs).
The wheel is tagged for this platform (it holds a native library).
"""
import importlib.util
import os
import shutil
import subprocess
import sys

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

try:
    from wheel.bdist_wheel import bdist_wheel
except ImportError:  # Without wheel, pip install still works; only `pip wheel` needs it.
    bdist_wheel = None

ROOT = os.path.dirname(os.path.abspath(__file__))


class BuildNative(build_py):
    """build_py, plus libhvd.so and dprun built by CMake into hvd/_native/."""

    def run(self):
        super().run()
        # In the checkout (ignored by git, like build/), so a second install is quick.
        build_dir = os.path.join(ROOT, "build-pip")
        cuda = os.environ.get("HVD_WITH_CUDA", "AUTO")
        args = ["cmake", "-S", ROOT, "-B", build_dir, "-DCMAKE_BUILD_TYPE=Release",
                "-DHVD_BUILD_TESTS=OFF", "-DHVD_BUILD_BENCH=OFF", "-DHVD_WITH_CUDA=" + cuda]
        # The TensorFlow kernels: against this Python's TensorFlow, if it has one.
        with_tf = importlib.util.find_spec("tensorflow") is not None
        args += ["-DHVD_WITH_TENSORFLOW=" + ("ON" if with_tf else "OFF"),
                 "-DHVD_TF_PYTHON=" + sys.executable]
        args += os.environ.get("HVD_CMAKE_ARGS", "").split()
        if shutil.which("ninja"):
            args += ["-G", "Ninja"]
        subprocess.check_call(args)
        jobs = os.environ.get("HVD_BUILD_PARALLEL", str(os.cpu_count() or 1))
        targets = ["hvd", "dprun"] + (["hvd_tensorflow"] if with_tf else [])
        subprocess.check_call(["cmake", "--build", build_dir, "--target"] + targets +
                              ["--parallel", jobs])
        native = os.path.join(self.build_lib, "hvd", "_native")
        os.makedirs(native, exist_ok=True)
        # The real file under the plain name: ctypes loads it by path.
        shutil.copyfile(os.path.realpath(os.path.join(build_dir, "libhvd.so")),
                        os.path.join(native, "libhvd.so"))
        shutil.copy2(os.path.join(build_dir, "dprun"), os.path.join(native, "dprun"))
        if with_tf:
            shutil.copyfile(os.path.join(build_dir, "libhvd_tensorflow.so"),
                            os.path.join(native, "libhvd_tensorflow.so"))
        os.chmod(os.path.join(native, "dprun"), 0o755)


class BinaryDistribution(Distribution):
    """A distribution with native code, so its wheel names the platform."""

    def has_ext_modules(self):
        return True


cmdclass = {"build_py": BuildNative}
if bdist_wheel is not None:
    class PlatformWheel(bdist_wheel):
        def finalize_options(self):
            super().finalize_options()
            self.root_is_pure = False

        def get_tag(self):
            _, _, plat = super().get_tag()
            # Pure Python otherwise: any CPython 3, this platform.
            return "py3", "none", plat

    cmdclass["bdist_wheel"] = PlatformWheel

setup(cmdclass=cmdclass, distclass=BinaryDistribution)
