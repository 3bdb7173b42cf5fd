"""RayExecutor: a static job of Ray actors (hvd.ray's module comment says how)."""
import dataclasses
import os
import socket

from hvd import _job_driver

try:
    import ray
    from ray.util.placement_group import placement_group, remove_placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy
except ImportError as e:  # one line, not a traceback from deep inside
    raise ImportError("hvd.ray needs Ray: pip install ray (%s)" % e) from None


@dataclasses.dataclass
class MiniSettings:
    """What RayExecutor.create_settings makes (horovod.ray's MiniSettings)."""
    timeout_s: int = 30
    ssh_identity_file: str = None
    placement_group_timeout_s: int = 100
    nics: set = None
    verbose: int = 1
    elastic: bool = False


class BaseHorovodWorker:
    """The actor each rank runs in (horovod.ray.BaseHorovodWorker): holds the
    executable made by start(executable_cls=...) and runs functions on it."""
    executable = None

    def __init__(self, world_rank=0, world_size=1):
        os.environ["HOROVOD_RANK"] = str(world_rank)
        os.environ["HOROVOD_SIZE"] = str(world_size)

    def node_id(self):
        return ray.get_runtime_context().get_node_id()

    def hostname(self):
        return socket.gethostname()

    def node_ip(self):
        return ray.util.get_node_ip_address()

    def pid(self):
        return os.getpid()

    def facts(self):
        """Where this actor runs: node_id, node_ip, pid, hostname."""
        return dict(node_id=self.node_id(), node_ip=self.node_ip(), pid=self.pid(),
                    hostname=self.hostname())

    def get_gpu_ids(self):
        return ray.get_gpu_ids()

    def update_env_vars(self, env_vars):
        os.environ.update({k: str(v) for k, v in env_vars.items()})

    def env_vars(self):
        return dict(os.environ)

    def start_executable(self, executable_cls=None, executable_args=None,
                         executable_kwargs=None):
        if executable_cls is not None:
            self.executable = executable_cls(*(executable_args or []),
                                             **(executable_kwargs or {}))

    def execute(self, func):
        """func(self.executable)."""
        return func(self.executable)


def _describe(worker):
    return "Ray actor %s, pid %s on node %s" % (worker["actor_id"], worker["pid"], worker["node_ip"])


def _cause(error):
    """The first line of a Ray error that says why an actor died."""
    text = str(error).strip()
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("Traceback"):
            return line[:300]
    return type(error).__name__


class RayExecutor:
    """horovod.ray.RayExecutor (0.28): see the module comment of hvd.ray.

    Args: settings (create_settings); num_workers, or num_hosts times
    num_workers_per_host (one bundle per worker, placed PACK); cpus_per_worker,
    use_gpu, gpus_per_worker. With min_workers (and max_workers, reset_limit,
    elastic_timeout) instead of num_workers the job is elastic, as in Horovod: an
    ElasticRayExecutor whose slots are cpus_per_worker CPUs, with run() only.
    """

    @classmethod
    def create_settings(cls, timeout_s=30, ssh_identity_file=None, ssh_str=None,
                        placement_group_timeout_s=100, nics=None):
        del ssh_str  # Ray starts the workers: no ssh
        return MiniSettings(timeout_s=timeout_s, ssh_identity_file=ssh_identity_file,
                            placement_group_timeout_s=placement_group_timeout_s, nics=nics)

    def __init__(self, settings, num_workers=None, num_hosts=None, num_workers_per_host=1,
                 cpus_per_worker=1, use_gpu=False, gpus_per_worker=None,
                 use_current_placement_group=True, min_workers=None, max_workers=None,
                 reset_limit=None, cooldown_range=None, elastic_timeout=600,
                 override_discovery=True):
        self._elastic = None
        if min_workers is not None or max_workers is not None:
            if not min_workers or min_workers <= 0 or num_workers is not None:
                raise ValueError("hvd.ray.RayExecutor: an elastic job takes a positive "
                                 "min_workers (and max_workers), without num_workers")
            from hvd.ray.elastic import ElasticRayExecutor, ElasticSettings
            self._elastic = ElasticRayExecutor(
                ElasticSettings(min_num_proc=min_workers, max_num_proc=max_workers,
                                reset_limit=reset_limit, elastic_timeout=elastic_timeout,
                                timeout_s=settings.timeout_s, cooldown_range=cooldown_range),
                use_gpu=use_gpu, cpus_per_slot=cpus_per_worker, gpus_per_slot=gpus_per_worker)
            return
        if num_workers is None and num_hosts is None:
            raise ValueError("hvd.ray.RayExecutor: give num_workers (or num_hosts with "
                             "num_workers_per_host)")
        if num_workers is not None and num_hosts is not None:
            raise ValueError("hvd.ray.RayExecutor: give num_workers or num_hosts, not both")
        self.settings = settings
        self.num_workers = int(num_workers if num_workers is not None
                               else num_hosts * num_workers_per_host)
        if self.num_workers < 1:
            raise ValueError("hvd.ray.RayExecutor: num_workers must be at least 1, got %d"
                             % self.num_workers)
        self.strict_hosts = num_hosts is not None
        self.num_workers_per_host = num_workers_per_host
        self.cpus_per_worker = cpus_per_worker
        self.use_gpu = use_gpu
        self.gpus_per_worker = (gpus_per_worker or 1) if use_gpu else 0
        self.use_current_placement_group = use_current_placement_group
        self.workers = []
        self._info = []
        self._pg = None
        self._store = None

    # ---- Starting.

    def _per_bundle(self):
        """Workers per bundle: num_workers_per_host with num_hosts (one bundle per
        host, STRICT_SPREAD), else 1 (PACK)."""
        return self.num_workers_per_host if self.strict_hosts else 1

    def _bundles(self):
        n = self._per_bundle()
        bundle = {"CPU": self.cpus_per_worker * n}
        if self.gpus_per_worker:
            bundle["GPU"] = self.gpus_per_worker * n
        return [dict(bundle) for _ in range(self.num_workers // n)]

    def _reserve(self):
        bundles = self._bundles()
        pg = placement_group(bundles, strategy="STRICT_SPREAD" if self.strict_hosts else "PACK")
        timeout = self.settings.placement_group_timeout_s
        ready, _ = ray.wait([pg.ready()], timeout=timeout)
        if not ready:
            remove_placement_group(pg)
            raise RuntimeError(
                "hvd.ray: the cluster could not place %d bundle(s) of %s (%s) within %ds "
                "(placement_group_timeout_s); it has %s in all, %s free"
                % (len(bundles), bundles[0], "one per node" if self.strict_hosts else
                   "%d worker(s)" % self.num_workers, timeout, ray.cluster_resources(),
                   ray.available_resources()))
        return pg

    def _create_actors(self, pg):
        Worker = ray.remote(BaseHorovodWorker)
        options = dict(num_cpus=self.cpus_per_worker, num_gpus=self.gpus_per_worker,
                       max_restarts=0, max_concurrency=2)
        return [Worker.options(scheduling_strategy=PlacementGroupSchedulingStrategy(
            placement_group=pg, placement_group_bundle_index=i // self._per_bundle()),
            **options).remote(i, self.num_workers)
                for i in range(self.num_workers)]

    def start(self, executable_cls=None, executable_args=None, executable_kwargs=None,
              extra_env_vars=None):
        """Places the workers, serves the store and gives every worker its rank; then
        makes executable_cls(*executable_args, **executable_kwargs) on each."""
        if self._elastic is not None:
            self._elastic.env_vars.update({k: str(v) for k, v in (extra_env_vars or {}).items()})
            return self._elastic.start()
        if self.workers:
            raise RuntimeError("hvd.ray: RayExecutor.start() was already called")
        self._pg = self._reserve()
        actors = self._create_actors(self._pg)
        timeout = self.settings.timeout_s
        try:
            facts = ray.get([a.facts.remote() for a in actors], timeout=timeout)
        except ray.exceptions.GetTimeoutError:
            self._release(actors)
            raise RuntimeError("hvd.ray: the %d worker actor(s) did not start within %ds "
                               "(create_settings(timeout_s=...))" % (len(actors), timeout)) from None
        places = _job_driver.place_ranks([f["node_id"] for f in facts])
        order = sorted(range(len(actors)), key=lambda i: places[i]["rank"])
        self.workers = [actors[i] for i in order]
        self._info = [dict(facts[i], **places[i]) for i in order]
        for info, actor in zip(self._info, self.workers):
            info["actor_id"] = actor._actor_id.hex()[:12]
        self._store = _job_driver.JobStore(ray.util.get_node_ip_address())
        job_id = _job_driver.new_job_id("ray")
        updates = []
        for info, actor in zip(self._info, self.workers):
            env = _job_driver.rank_env(info, self._store, job_id, info["node_ip"],
                                       gloo_address=info["node_ip"])
            env["HVD_TIMEOUT"] = os.environ.get("HVD_TIMEOUT", str(self.settings.timeout_s))
            env.update({k: str(v) for k, v in (extra_env_vars or {}).items()})
            updates.append(actor.update_env_vars.remote(env))
        self._get(updates, "setting the workers' environment")
        self._get([a.start_executable.remote(executable_cls, executable_args, executable_kwargs)
                   for a in self.workers], "starting the executable")

    # ---- Running.

    def execute(self, fn, callbacks=None):
        """fn(executable) on every worker; their results in rank order."""
        del callbacks
        return self._get([w.execute.remote(fn) for w in self._started()], "running %s" % _name(fn))

    def run(self, fn, args=None, kwargs=None, callbacks=None):
        """fn(*args, **kwargs) on every worker; their results in rank order."""
        del callbacks
        args, kwargs = list(args or []), dict(kwargs or {})
        if self._elastic is not None:  # Horovod's elastic RayExecutor: run() only
            return self._elastic.run(lambda: fn(*args, **kwargs))
        return self._get([w.execute.remote(lambda _: fn(*args, **kwargs)) for w in self._started()],
                         "running %s" % _name(fn))

    def run_remote(self, fn, args=None, kwargs=None):
        """As run, returning the ObjectRefs (ray.get them) without waiting."""
        args, kwargs = list(args or []), dict(kwargs or {})
        return [w.execute.remote(lambda _: fn(*args, **kwargs)) for w in self._started()]

    def execute_single(self, fn):
        """fn(executable) on the rank 0 worker."""
        return self._get([self._started()[0].execute.remote(fn)], "running %s" % _name(fn))[0]

    def shutdown(self):
        """Ends the workers, the placement group and the store."""
        if self._elastic is not None:
            return self._elastic.shutdown()
        self._release(self.workers)
        self.workers = []
        if self._store is not None:
            self._store.close()
            self._store = None

    def _release(self, actors):
        for a in actors:
            try:
                ray.kill(a, no_restart=True)
            except Exception:  # noqa: B902 -- already gone
                pass
        if self._pg is not None:
            remove_placement_group(self._pg)
            self._pg = None

    def _started(self):
        if self._elastic is not None:
            raise RuntimeError("hvd.ray: an elastic RayExecutor (min_workers) has run() only")
        if not self.workers:
            raise RuntimeError("hvd.ray: call RayExecutor.start() first")
        return self.workers

    def _get(self, refs, what):
        """ray.get of one ref per rank that names a dead actor's rank at once (and
        records it for the other ranks) and waits for the rest, which then fail
        naming it within HVD_TIMEOUT."""
        results, failures = _collect(refs, self._info, self._store)
        if failures:
            rank, kind, text = _first_cause(failures)
            others = sorted(r for r, _, _ in failures if r != rank)
            error = RuntimeError("hvd.ray: %s: rank %d %s%s" % (
                what, rank, text, " (rank(s) %s failed too)" % ", ".join(map(str, others))
                if others else ""))
            error.failures = {r: t for r, _, t in failures}  # every failed rank's own line
            raise error
        return results


def _name(fn):
    return getattr(fn, "__name__", repr(fn))


def _collect(refs, info, store, poll_s=0.5):
    """Waits for one ref per rank. Returns (results, failures): failures lists (rank,
    kind, text), kind "died" for an actor lost, "raised" for an exception."""
    pending = {ref: rank for rank, ref in enumerate(refs)}
    results = [None] * len(refs)
    failures = []
    while pending:
        done, _ = ray.wait(list(pending), num_returns=1, timeout=poll_s)
        for ref in done:
            rank = pending.pop(ref)
            try:
                results[rank] = ray.get(ref)
            except ray.exceptions.RayActorError as e:
                text = "(%s) died: %s" % (_describe(info[rank]), _cause(e))
                failures.append((rank, "died", text))
                if store is not None:
                    store.abort("rank %d %s" % (rank, text))
            except ray.exceptions.RayTaskError as e:
                cause = e.cause if getattr(e, "cause", None) is not None else e
                failures.append((rank, "raised",
                                 "raised %s: %s" % (type(cause).__name__, str(cause).strip()[:2000])))
    return results, failures


def _first_cause(failures):
    """The failure to report: a dead actor, else the first exception that is not hvd's
    report of another rank's failure."""
    for f in failures:
        if f[1] == "died":
            return f
    for f in failures:
        if not any(f[2].startswith("raised %s" % c) for c in _job_driver.CONSEQUENCES):
            return f
    return failures[0]

