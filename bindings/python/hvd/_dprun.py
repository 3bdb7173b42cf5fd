"""The `dprun` command of an installed hvd package: runs the dprun launcher that
came with it (hvd/_native/dprun), so `dprun -np 2 python3 train.py` works from any
directory once the package is installed. The ranks' `import hvd` then loads the
libhvd.so beside that launcher (hvd._lib's search order)."""
import os
import sys


def native_dir():
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "_native")


def main():
    exe = os.path.join(native_dir(), "dprun")
    if not os.access(exe, os.X_OK):
        sys.stderr.write("dprun: %s is missing: this hvd package was not installed with its "
                         "native part (pip install . from a dprun checkout builds it)\n" % exe)
        return 127
    os.execv(exe, [exe] + sys.argv[1:])
    return 127  # not reached


if __name__ == "__main__":
    sys.exit(main())
