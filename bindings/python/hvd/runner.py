"""hvd.run: Horovod's `horovod.run(func, ...)` over dprun.

    import hvd
    results = hvd.run(train, args=(cfg,), num_proc=4)   # train(cfg) on 4 ranks

Starts a dprun job whose ranks call func(*args, **kwargs) (func calls hvd.init()
itself, as under horovodrun) and returns what each rank returned, in rank order. The
arguments are horovod.run's (0.28); those that name dprun flags become them
(num_proc is -np, hosts -H, min_num_proc --min-np, ...).

How: the function and its arguments are pickled (cloudpickle, Debian's
python3-cloudpickle, so that lambdas and functions of a script's __main__ travel;
without it plain pickle, which sends a function by its module and name; either way a
rank adds this process's sys.path after its own, so it imports what this one can, a
test module included) and handed to every rank through a variable (HVD_RUN_FUNC),
or a file in a temporary directory when they are large (over _ENV_LIMIT; the
directory must then be one every host sees). Each rank (hvd._run_task) prints its
pickled return value, or its exception, on its stdout in marked lines; this process
reads dprun's stdout, keeps the marked lines and passes every other line on to
sys.stdout, as it comes (and dprun's stderr to sys.stderr: in a notebook both show
in the cell). So results need no shared filesystem. A rank that raised makes run()
raise RuntimeError naming the rank and the exception, with its traceback; a job
dprun failed otherwise (a rank killed, a lost host) raises RuntimeError with dprun's
exit code (its own messages, on stderr, say why).
"""
import base64
import os
import pickle
import re
import shutil
import subprocess
import sys
import tempfile
import threading


# What a rank's result line starts with (after dprun's "[rank]<stdout>:").
MARK = "\x1ehvd.run "
# A result's base64 text per line: dprun cuts lines at 64 KiB.
CHUNK = 48 * 1024
# Largest payload (base64) passed in the environment: Linux takes at most 128 KiB
# in one argument or variable, and ssh puts a remote rank's variables on its
# command line.
_ENV_LIMIT = 96 * 1024

# What a rank raises when another rank failed or left (hvd.errors): not a cause.
_CONSEQUENCES = ("RemoteError", "ShutDownError", "HvdTimeoutError")

_RESULT_LINE = re.compile(r"^\[(\d+)\]<stdout>:" + re.escape(MARK) + r"(\d+) ([RE]) (\d+) (\d+) (.*)$")


def pickler():
    """cloudpickle if installed (imported on first use), else pickle."""
    try:
        import cloudpickle
        return cloudpickle
    except ImportError:  # plain pickle: functions travel by reference
        return pickle


def dumps(obj):
    return pickler().dumps(obj)


def launcher_path():
    """The dprun that belongs with the libhvd.so this package loads: beside it (a
    build tree, or hvd/_native of an installed package), in ../bin of an installed
    prefix, else the first on PATH."""
    from hvd import _lib
    lib = _lib.find_library()
    where = os.path.dirname(lib)
    if where:
        for candidate in (os.path.join(where, "dprun"), os.path.join(where, "..", "bin", "dprun"),
                          os.path.join(where, "..", "..", "bin", "dprun")):
            if os.access(candidate, os.X_OK):
                return os.path.normpath(candidate)
    found = shutil.which("dprun")
    if found:
        return found
    raise RuntimeError("hvd.run: dprun not found beside %s nor on PATH" % lib)


def _command(num_proc, min_num_proc, max_num_proc, slots, reset_limit, cooldown_range,
             hosts, hostfile, host_discovery_script, start_timeout, ssh_port,
             ssh_identity_file, output_filename, verbose, network_interfaces):
    cmd = [launcher_path(), "-np", str(int(num_proc))]
    # Elastic as in horovodrun: with a minimum or a discovery script (the minimum then
    # defaults to num_proc); a maximum alone changes nothing.
    if min_num_proc is not None or host_discovery_script is not None:
        cmd += ["--min-np", str(int(num_proc if min_num_proc is None else min_num_proc))]
        if max_num_proc is not None:
            cmd += ["--max-np", str(int(max_num_proc))]
    if slots is not None:
        cmd += ["--slots-per-host", str(int(slots))]
    if reset_limit is not None:
        cmd += ["--reset-limit", str(int(reset_limit))]
    if cooldown_range is not None:
        lo, hi = cooldown_range
        cmd += ["--blacklist-cooldown-range", str(int(lo)), str(int(hi))]
    if hosts is not None:
        cmd += ["-H", hosts]
    if hostfile is not None:
        cmd += ["--hostfile", hostfile]
    if host_discovery_script is not None:
        cmd += ["--host-discovery-script", host_discovery_script]
    if start_timeout is not None:
        cmd += ["--start-timeout", str(start_timeout)]
    if ssh_port is not None:
        cmd += ["-p", str(int(ssh_port))]
    if ssh_identity_file is not None:
        cmd += ["--ssh-identity-file", ssh_identity_file]
    if output_filename is not None:
        cmd += ["--output-filename", output_filename]
    if verbose:
        cmd += ["--verbose"]
    if network_interfaces:
        nics = list(network_interfaces)
        if len(nics) != 1:
            raise ValueError("hvd.run: dprun uses one network interface, got %s" % nics)
        cmd += ["--network-interface", nics[0]]
    return cmd


def run(func, args=(), kwargs=None, num_proc=1, min_num_proc=None, max_num_proc=None,
        slots=None, reset_limit=None, cooldown_range=None, hosts=None, hostfile=None,
        host_discovery_script=None, start_timeout=None, ssh_port=None, ssh_identity_file=None,
        disable_cache=None, output_filename=None, verbose=None, use_gloo=None, use_mpi=None,
        mpi_args=None, network_interface=None, network_interfaces=None, executable=None,
        np=None, min_np=None, max_np=None, dprun_args=None):
    """Runs func(*args, **kwargs) on num_proc ranks of a dprun job and returns the
    list of their return values, indexed by rank (horovod.run's contract; in an
    elastic job, by the ranks of the last generation, as many as ended it).
    disable_cache and use_gloo are accepted (dprun has no check cache and always
    coordinates over Gloo); use_mpi and mpi_args are refused. dprun_args, not
    Horovod's, is a list of further dprun flags (`["--ssh-option", "Port=2222"]`).
    The ranks get this process's environment (dprun passes it to other hosts too, as
    horovodrun does), PYTHONPATH included."""
    del disable_cache, use_gloo  # nothing to do in dprun
    num_proc = np if np is not None else num_proc
    min_num_proc = min_np if min_np is not None else min_num_proc
    max_num_proc = max_np if max_np is not None else max_num_proc
    if network_interface and not network_interfaces:
        network_interfaces = network_interface.split(",")
    if hosts is not None and hostfile is not None:
        raise ValueError("hvd.run: give hosts or hostfile, not both")
    if use_mpi or mpi_args:
        raise ValueError("hvd.run: dprun starts its ranks itself and does not run MPI "
                         "(drop use_mpi and mpi_args)")
    if pickler() is pickle and getattr(func, "__module__", None) == "__main__":
        raise ValueError("hvd.run: %r is defined in __main__, which the ranks do not run; "
                         "install cloudpickle (Debian: python3-cloudpickle) to send it, or "
                         "import it from a module" % (func,))
    cmd = _command(num_proc, min_num_proc, max_num_proc, slots, reset_limit, cooldown_range,
                   hosts, hostfile, host_discovery_script, start_timeout, ssh_port,
                   ssh_identity_file, output_filename, verbose, network_interfaces)
    cmd += [str(a) for a in (dprun_args or [])]
    # This process's import path goes first, plainly pickled: a function that pickles
    # by reference (its module importable here) is then importable on the ranks too.
    payload = base64.b64encode(pickle.dumps(
        (list(sys.path), dumps((func, tuple(args), dict(kwargs or {})))))).decode("ascii")
    with tempfile.TemporaryDirectory(prefix="hvd-run-") as tmp:
        if len(payload) <= _ENV_LIMIT:
            cmd += ["-x", "HVD_RUN_FUNC=" + payload]
        else:
            path = os.path.join(tmp, "func")
            with open(path, "w") as f:
                f.write(payload)
            cmd += ["-x", "HVD_RUN_FUNC_FILE=" + path]
        cmd += [executable or sys.executable, "-m", "hvd._run_task"]
        return _collect(cmd)


def _relay(source, sink):
    for line in source:
        sink.write(line)
        sink.flush()


def _collect(cmd):
    """Runs the job, passing its output on, and gathers the ranks' marked lines."""
    pieces = {}  # (rank, kind) -> {index: text}
    counts = {}
    failed = []  # the ranks' complete error reports, as they arrived
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, universal_newlines=True, errors="replace")
    # stderr too goes through sys.stderr, not the inherited descriptor: in a notebook
    # that is where the user looks.
    relay = threading.Thread(target=_relay, args=(proc.stderr, sys.stderr), daemon=True)
    relay.start()
    try:
        for line in proc.stdout:
            m = _RESULT_LINE.match(line.rstrip("\n"))
            if not m:
                sys.stdout.write(line)
                sys.stdout.flush()
                continue
            rank, kind, index, count, text = (int(m.group(2)), m.group(3), int(m.group(4)),
                                              int(m.group(5)), m.group(6))
            got = pieces.setdefault((rank, kind), {})
            got[index] = text
            counts[(rank, kind)] = count
            if kind == "E" and len(got) == count:
                failed.append((rank, kind))  # in the order they came: the first is the cause
        code = proc.wait()
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    finally:
        relay.join()

    def value(key):
        got = pieces[key]
        if len(got) != counts[key]:
            raise RuntimeError("hvd.run: rank %d's %s arrived in %d of %d pieces"
                               % (key[0], "result" if key[1] == "R" else "error", len(got),
                                  counts[key]))
        return pickle.loads(base64.b64decode("".join(got[i] for i in range(counts[key]))))

    if failed:
        reports = {k: value(k) for k in failed}
        # The cause: the first error that is not hvd's report of a peer lost or gone.
        cause = next((k for k in failed if reports[k][0] not in _CONSEQUENCES), failed[0])
        kind, text, trace = reports[cause]
        others = [str(k[0]) for k in failed if k != cause]
        raise RuntimeError("hvd.run: rank %d raised %s: %s%s\n\nThe rank's traceback:\n%s"
                           % (cause[0], kind, text,
                              " (rank(s) %s failed too)" % ", ".join(others) if others else "",
                              trace))
    if code != 0:
        raise RuntimeError("hvd.run: the job failed (dprun exited with code %d; its "
                           "messages above say why)" % code)
    results = {k[0]: value(k) for k in pieces if k[1] == "R"}
    ranks = sorted(results)
    if ranks != list(range(len(ranks))):
        raise RuntimeError("hvd.run: results came from ranks %s, not 0..%d"
                           % (ranks, len(ranks) - 1))
    return [results[r] for r in ranks]
