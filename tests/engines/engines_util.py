"""What the engines' tests share: the build, the Python path the workers need, and
bounded waits."""
import json
import os
import shutil
import subprocess
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
PYTHON_DIR = os.path.join(REPO, "bindings", "python")
BUILD = os.environ.get("HVD_BUILD_DIR", os.path.join(REPO, "build"))
LIBHVD = os.path.join(BUILD, "libhvd.so")
DPRUN = os.path.join(BUILD, "dprun")


def worker_env(extra=None):
    """The environment a worker process needs to import hvd from this checkout."""
    env = dict(os.environ)
    # The tests' own modules too: functions and classes they define travel by name.
    env["PYTHONPATH"] = ":".join([PYTHON_DIR, HERE] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env["HVD_LIBRARY"] = LIBHVD
    env.update(extra or {})
    return env


def which_or_skip(pytest, *programs):
    for p in programs:
        if shutil.which(p) is None and not os.access(p, os.X_OK):
            pytest.skip("%s is not installed (.ci/install installs it)" % p)


def wait_until(predicate, timeout_s, what, poll_s=0.1):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(poll_s)
    raise AssertionError("waited %d s for %s" % (timeout_s, what))


def run(cmd, timeout_s, **kwargs):
    """subprocess.run with a bound; returns the CompletedProcess (text)."""
    return subprocess.run(cmd, timeout=timeout_s, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, **kwargs)


def json_lines(text):
    """The JSON objects in a job's output, in order: a launcher that merges its ranks'
    output may join two ranks' lines into one."""
    decoder, out, pos = json.JSONDecoder(), [], text.find("{")
    while pos >= 0:
        obj, end = decoder.raw_decode(text, pos)
        out.append(obj)
        pos = text.find("{", end)
    return out
