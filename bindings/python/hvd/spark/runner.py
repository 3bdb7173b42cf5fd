"""hvd.spark.run and run_elastic (hvd.spark's module comment says how)."""
import base64
import json
import os
import pickle
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

from hvd import _job_driver
from hvd import runner as _runner

try:
    import pyspark
except ImportError as e:
    raise ImportError("hvd.spark needs pyspark: pip install pyspark (%s)" % e) from None

_RESULT = re.compile(re.escape(_runner.MARK) + r"(\d+) ([RE]) (\d+) (\d+) (.*)$")


def _register_key(index):
    return "hvd_spark/register/%d" % index


def _place_key(index):
    return "hvd_spark/place/%d" % index


def _attempt_key(index):
    return "hvd_spark/attempts/%d" % index


def ended_key(index):
    """Set by task `index` when its rank ended: "R", "E", or "D <why it died>"."""
    return "hvd_spark/ended/%d" % index


# ---- The task: runs in a Spark executor's Python worker.

def _how_it_ended(code):
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = "signal %d" % -code
        return "was killed by signal %d (%s)" % (-code, name)
    return "exited with code %d without a result" % code


def _run_rank(payload, env, executable):
    """Runs the rank's process; returns (exit code, its marked lines, its pid)."""
    with tempfile.TemporaryDirectory(prefix="hvd-spark-") as tmp:
        if len(payload) <= _runner._ENV_LIMIT:
            env["HVD_RUN_FUNC"] = payload
        else:
            path = os.path.join(tmp, "func")
            with open(path, "w") as f:
                f.write(payload)
            env["HVD_RUN_FUNC_FILE"] = path
        proc = subprocess.Popen([executable, "-m", "hvd._run_task"], env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, universal_newlines=True, errors="replace")
        marked = []
        for line in proc.stdout:
            if line.startswith(_runner.MARK):
                marked.append(line.rstrip("\n"))
            else:
                sys.stdout.write(line)
        sys.stdout.flush()
        return proc.wait(), marked, proc.pid


def _task(index, job):
    """One Spark task: registers, waits for its place, runs its rank. Returns one
    (index, rank, kind, text) tuple: kind "R"/"E" with the rank's marked lines, or
    "D" with why the rank died."""
    store = _job_driver.JobStore.connect(job["store"], job["secret"], job["start_timeout"])
    try:
        attempt = store.add(_attempt_key(index), 1)
        host = socket.gethostname()
        address = job["gloo_address"] or _source_address(job["store_host"])
        store.set(_register_key(index), json.dumps(dict(host=host, address=address, pid=os.getpid(),
                                                        attempt=attempt)))
        place = json.loads(store.get(_place_key(index), job["start_timeout"]).decode())
        rank = place["rank"]
        if attempt > 1:
            why = ("rank %d (Spark task %d on host %s) is a retry (attempt %d): Spark lost the "
                   "first attempt's executor" % (rank, index, host, attempt))
            store.set(ended_key(index), "D " + why)
            return [(index, rank, "D", why)]
        env = dict(os.environ)
        env.update(job["env"])
        env.update(_job_driver.rank_env(place, store, job["job_id"], host, gloo_address=address,
                                        elastic_id=place.get("elastic_id")))
        env["HVD_STORE_ADDR"], env["HVD_STORE_SECRET"] = job["store"], job["secret"]
        code, marked, pid = _run_rank(job["payload"], env, job["executable"])
        if marked:
            kind = _RESULT.match(marked[0]).group(2)
            store.set(ended_key(index), kind if kind == "R" else "E " + "\n".join(marked))
            return [(index, rank, kind, "\n".join(marked))]
        # "rank R " comes first; in an elastic job the driver knows R at that time.
        who = "(Spark task %d, pid %d on host %s) %s" % (index, pid, host, _how_it_ended(code))
        if place.get("elastic_id") is None:
            store.abort("rank %d %s" % (rank, who))
        store.set(ended_key(index), "D " + who)
        return [(index, rank, "D", "rank %d %s" % (rank, who))]
    finally:
        store.close()


def _source_address(host):
    """The address this host would send from to reach `host` (a UDP connect sends
    nothing)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect((host, 9))
            return s.getsockname()[0]
        except OSError:
            return "127.0.0.1"


# ---- The driver.

def _decode(lines):
    """A rank's value from its marked lines (hvd._run_task's format)."""
    chunks = {}
    for line in lines.split("\n"):  # not splitlines(): the mark holds \x1e
        m = _RESULT.match(line)
        if m:
            chunks[int(m.group(3))] = m.group(5)
            count = int(m.group(4))
    if len(chunks) != count:
        raise RuntimeError("hvd.spark: a result arrived in %d of %d pieces" % (len(chunks), count))
    return pickle.loads(base64.b64decode("".join(chunks[i] for i in range(count))))


def _spark_context():
    sc = pyspark.SparkContext._active_spark_context
    if sc is None:
        raise RuntimeError("hvd.spark: no active SparkContext: start one first "
                           "(SparkSession.builder.getOrCreate())")
    return sc


def _driver_host(sc):
    host = sc.getConf().get("spark.driver.host") or socket.gethostname()
    try:
        return socket.gethostbyname(host)
    except OSError:
        raise RuntimeError("hvd.spark: the driver's host %r (spark.driver.host) does not "
                           "resolve" % host) from None


class _SparkJob:
    """The Spark job of one run: its tasks run in a thread of the driver."""

    def __init__(self, sc, num_proc, job):
        self.group = "hvd.spark.%s" % job["job_id"]
        self.results = None
        self.error = None
        self._sc = sc

        def body():
            try:
                sc.setJobGroup(self.group, "hvd.spark.run", interruptOnCancel=True)
                rdd = sc.parallelize(range(num_proc), num_proc)
                self.results = rdd.mapPartitionsWithIndex(lambda i, _: _task(i, job)).collect()
            except Exception as e:  # noqa: B902 -- reported by the driver
                self.error = e

        self.thread = threading.Thread(target=body, name=self.group, daemon=True)
        self.thread.start()

    def cancel(self):
        self._sc.cancelJobGroup(self.group)
        self.thread.join(60)


def _await_registrations(store, spark_job, num_proc, timeout_s):
    """Each task's registration, in index order; RuntimeError naming the missing."""
    deadline = time.monotonic() + timeout_s
    got = {}
    while len(got) < num_proc:
        for i in range(num_proc):
            if i not in got:
                value = store.try_get(_register_key(i))
                if value is not None:
                    got[i] = json.loads(value.decode())
        if len(got) == num_proc:
            break
        if spark_job.error is not None:
            raise RuntimeError("hvd.spark: the Spark job failed before every task registered: %s"
                               % str(spark_job.error).strip().splitlines()[0])
        if time.monotonic() > deadline:
            missing = [i for i in range(num_proc) if i not in got]
            spark_job.cancel()
            raise RuntimeError(
                "hvd.spark: %d of %d task(s) registered within %d s (start_timeout); tasks %s "
                "never started: the cluster has too few free executor cores for num_proc=%d "
                "(each rank is one task)" % (len(got), num_proc, timeout_s,
                                             ", ".join(map(str, missing[:16])), num_proc))
        time.sleep(0.1)
    return [got[i] for i in range(num_proc)]


def _payload(fn, args, kwargs):
    if _runner.pickler() is pickle and getattr(fn, "__module__", None) == "__main__":
        raise ValueError("hvd.spark: %r is defined in __main__; install cloudpickle to send it, "
                         "or import it from a module" % (fn,))
    return base64.b64encode(pickle.dumps(
        (list(sys.path), _runner.dumps((fn, tuple(args), dict(kwargs or {})))))).decode("ascii")


def _outcome(results, ranks):
    """Returns the values in rank order, or raises naming the first cause."""
    by_rank = {r[1]: r for r in results}
    failed = [r for r in results if r[2] != "R"]
    if failed:
        died = [r for r in failed if r[2] == "D"]
        reports = {r[1]: _decode(r[3]) for r in failed if r[2] == "E"}
        cause = died[0] if died else next(
            (r for r in failed if reports[r[1]][0] not in _job_driver.CONSEQUENCES), failed[0])
        if cause[2] == "D":
            text = cause[3]
        else:
            kind, message, trace = reports[cause[1]]
            text = "rank %d raised %s: %s\n\nThe rank's traceback:\n%s" % (cause[1], kind, message,
                                                                          trace)
        others = sorted(r[1] for r in failed if r is not cause)
        error = RuntimeError("hvd.spark: %s%s" % (text, " (rank(s) %s failed too)" % ", ".join(
            map(str, others)) if others else ""))
        # Every failed rank's own line: its exception's message, or how it died.
        error.failures = {r[1]: r[3] if r[2] == "D" else "%s: %s" % reports[r[1]][:2]
                          for r in failed}
        raise error
    missing = [r for r in range(ranks) if r not in by_rank]
    if missing:
        raise RuntimeError("hvd.spark: no result from rank(s) %s" % missing)
    return [_decode(by_rank[r][3]) for r in range(ranks)]


def _start(fn, args, kwargs, num_proc, start_timeout, env, executable):
    sc = _spark_context()
    num_proc = int(num_proc or sc.defaultParallelism)
    if start_timeout is None:
        start_timeout = int(os.environ.get("HOROVOD_SPARK_START_TIMEOUT", "600"))
    store = _job_driver.JobStore(_driver_host(sc))
    job = dict(store=store.address, store_host=store.host, secret=store.secret,
               job_id=_job_driver.new_job_id("spark"), start_timeout=start_timeout,
               payload=_payload(fn, args, kwargs), env={k: str(v) for k, v in (env or {}).items()},
               executable=executable or sys.executable, gloo_address=None)
    if "HVD_TIMEOUT" not in job["env"] and "HVD_TIMEOUT" in os.environ:
        job["env"]["HVD_TIMEOUT"] = os.environ["HVD_TIMEOUT"]
    return sc, num_proc, store, job


def run(fn, args=(), kwargs={}, num_proc=None, start_timeout=None, use_mpi=None, use_gloo=None,
        extra_mpi_args=None, env=None, stdout=None, stderr=None, verbose=1, nics=None,
        prefix_output_with_timestamp=False, executable=None):
    """horovod.spark.run (0.28): fn(*args, **kwargs) on num_proc ranks, one Spark task
    each (num_proc defaults to spark.default.parallelism); returns their values in rank
    order. use_mpi and extra_mpi_args are refused (no MPI); use_gloo, stdout, stderr,
    verbose, nics and prefix_output_with_timestamp are accepted (the ranks' output goes
    to their executors' stdout)."""
    del use_gloo, stdout, stderr, verbose, nics, prefix_output_with_timestamp
    if use_mpi or extra_mpi_args:
        raise ValueError("hvd.spark: the ranks run without MPI (drop use_mpi and extra_mpi_args)")
    sc, num_proc, store, job = _start(fn, args, kwargs, num_proc, start_timeout, env, executable)
    try:
        spark_job = _SparkJob(sc, num_proc, job)
        registered = _await_registrations(store, spark_job, num_proc, job["start_timeout"])
        places = _job_driver.place_ranks([r["host"] for r in registered])
        for i, p in enumerate(places):
            store.set(_place_key(i), json.dumps(p))
        spark_job.thread.join()
        if spark_job.error is not None:
            raise RuntimeError("hvd.spark: the Spark job failed: %s"
                               % str(spark_job.error).strip().splitlines()[0])
        return _outcome(spark_job.results, num_proc)
    finally:
        store.close()


def run_elastic(fn, args=(), kwargs={}, num_proc=None, min_num_proc=None, max_num_proc=None,
                start_timeout=None, elastic_timeout=None, reset_limit=None, env=None,
                stdout=None, stderr=None, verbose=1, nics=None,
                prefix_output_with_timestamp=False, min_np=None, max_np=None):
    """horovod.spark.run_elastic (0.28): fn (an hvd.elastic.run function that calls
    hvd.init()) on num_proc tasks; a task whose rank dies leaves the job, which goes on
    with the rest (a new generation, docs/elastic.md) while at least min_num_proc
    remain. Returns the values of the ranks that finished, in their last rank order."""
    from hvd.spark import _elastic
    del stdout, stderr, verbose, nics, prefix_output_with_timestamp
    min_num_proc = min_np if min_np is not None else min_num_proc
    max_num_proc = max_np if max_np is not None else max_num_proc
    sc, num_proc, store, job = _start(fn, args, kwargs, num_proc, start_timeout, env, None)
    try:
        return _elastic.run(sc, num_proc, store, job, min_num_proc or num_proc,
                            max_num_proc, elastic_timeout, reset_limit)
    finally:
        store.close()
