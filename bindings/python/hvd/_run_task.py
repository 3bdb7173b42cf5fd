"""A rank of an hvd.run job (hvd/runner.py): loads the function and its arguments
from HVD_RUN_FUNC (or the file HVD_RUN_FUNC_FILE names), calls it, and prints its
pickled return value, or the exception it raised, on stdout in marked lines for
hvd.run to collect. Exits 1 after an exception, so dprun fails the job as it would
for any failing rank."""
import base64
import os
import pickle
import sys
import traceback

from hvd import runner


def _load():
    text = os.environ.get("HVD_RUN_FUNC")
    if text is None:
        path = os.environ.get("HVD_RUN_FUNC_FILE")
        if path is None:
            raise RuntimeError("hvd._run_task runs the ranks of hvd.run: HVD_RUN_FUNC is not set")
        try:
            with open(path) as f:
                text = f.read()
        except OSError as e:
            raise RuntimeError("hvd.run: cannot read the function from %s (%s); a large "
                               "function or arguments travel in a file, in a directory every "
                               "host must see (set TMPDIR to a shared one)" % (path, e)) from None
    path, blob = pickle.loads(base64.b64decode(text))
    sys.path.extend(p for p in path if p not in sys.path)  # after the rank's own
    return pickle.loads(blob)


def _rank():
    import hvd
    if hvd.is_initialized():
        return hvd.rank()
    return int(os.environ.get("HVD_RANK", "0"))


def _emit(kind, obj):
    text = base64.b64encode(runner.dumps(obj)).decode("ascii")
    chunks = [text[i:i + runner.CHUNK] for i in range(0, len(text), runner.CHUNK)] or [""]
    rank = _rank()
    out = sys.stdout
    for i, chunk in enumerate(chunks):
        out.write("%s%d %s %d %d %s\n" % (runner.MARK, rank, kind, i, len(chunks), chunk))
    out.flush()


def _fail(e, why=None):
    sys.stdout.flush()
    _emit("E", (type(e).__name__, why or str(e), traceback.format_exc()))
    traceback.print_exc()
    return 1


def main():
    try:
        func, args, kwargs = _load()
        result = func(*args, **kwargs)
    except SystemExit as e:  # sys.exit() in the function: 0 or None is a return
        if e.code not in (None, 0):
            return _fail(e, "the function called sys.exit(%r)" % (e.code,))
        result = None
    except BaseException as e:  # noqa: B902 -- every failure is reported, then exit 1
        return _fail(e)
    try:
        _emit("R", result)
    except Exception as e:  # noqa: B902 -- nothing was written: report it instead
        return _fail(e, "its return value cannot be pickled: %s" % e)
    return 0


if __name__ == "__main__":
    sys.exit(main())
