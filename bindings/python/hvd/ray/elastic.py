"""ElasticRayExecutor: Horovod 0.28's horovod.ray.ElasticRayExecutor over dprun's
elastic generations (docs/elastic.md), with the driver in dprun's place.

    settings = ElasticRayExecutor.create_settings(min_num_proc=2, max_num_proc=8)
    executor = ElasticRayExecutor(settings, cpus_per_slot=1)
    executor.start()
    results = executor.run(train)   # train() calls hvd.init() and an hvd.elastic.run function

The workers are the cluster's resources: every alive node holds CPU // cpus_per_slot
slots (and GPU // gpus_per_slot with use_gpu), and the driver keeps one actor on each
free slot, up to max_num_proc, pinned to its node. Each actor is an elastic worker
(HVD_ELASTIC_ID w0, w1, ...); the driver publishes a generation (every member's
rank, its workers grouped by node, and the generation's number) in the store it
serves, and hvd.init() in the worker joins the latest one. Then, polled every
half second:
  - an actor that dies (killed, or lost with its node) is recorded as the dead rank
    in its generation's scope, so the others' collectives fail at once naming it, and
    a generation of the rest follows: hvd.elastic.run restores their last commit and
    goes on; with fewer than min_num_proc left the job fails naming it;
  - new slots (a node added) get new actors and a generation with them, which the
    running workers join at their next commit (HostsUpdatedInterrupt);
  - a worker that asks for a new generation (its runtime failed with nobody dead)
    gets one of the workers still running, a second later;
  - a worker that returns is done: the job is finishing, no worker starts after it;
    run() returns the values of the workers of the last generation, in rank order;
  - a function that raises fails the job naming its rank.
Every generation after the first counts against reset_limit. Waiting for the first
min_num_proc slots is bounded by elastic_timeout.
"""
import dataclasses
import os
import time

from hvd import _job_driver
from hvd.ray import runner

ray = runner.ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy  # noqa: E402


@dataclasses.dataclass
class ElasticSettings:
    min_num_proc: int = 1
    max_num_proc: int = None
    reset_limit: int = None
    elastic_timeout: int = 600
    timeout_s: int = 30
    cooldown_range: tuple = None
    nics: set = None
    verbose: int = 1


class ElasticRayExecutor:
    """See the module comment."""

    @staticmethod
    def create_settings(min_num_proc=1, max_num_proc=None, reset_limit=None,
                        elastic_timeout=600, timeout_s=30, ssh_identity_file=None, nics=None,
                        cooldown_range=None, min_np=None, max_np=None, **kwargs):
        del ssh_identity_file, kwargs  # Ray starts the workers: no ssh
        return ElasticSettings(min_num_proc=min_np if min_np is not None else min_num_proc,
                               max_num_proc=max_np if max_np is not None else max_num_proc,
                               reset_limit=reset_limit, elastic_timeout=elastic_timeout,
                               timeout_s=timeout_s, cooldown_range=cooldown_range, nics=nics)

    def __init__(self, settings, use_gpu=False, cpus_per_slot=1, gpus_per_slot=None,
                 env_vars=None, override_discovery=True):
        del override_discovery
        if settings.min_num_proc < 1:
            raise ValueError("hvd.ray: min_num_proc must be at least 1")
        self.settings = settings
        self.use_gpu = use_gpu
        self.cpus_per_slot = cpus_per_slot
        self.gpus_per_slot = (gpus_per_slot or 1) if use_gpu else 0
        self.env_vars = {k: str(v) for k, v in (env_vars or {}).items()}
        self.generation = -1
        self._store = None
        self._workers = {}  # id -> dict(actor, node_id, node_ip, ref, place)
        self._next_id = 0

    def start(self):
        self._store = _job_driver.JobStore(ray.util.get_node_ip_address())
        self._job_id = _job_driver.new_job_id("ray-elastic")

    def shutdown(self):
        for w in self._workers.values():
            _kill(w["actor"])
        self._workers = {}
        if self._store is not None:
            self._store.close()
            self._store = None

    # ---- The cluster's slots.

    def _slots(self):
        """{node_id: (node_ip, slots)} of the alive nodes."""
        out = {}
        for node in ray.nodes():
            if not node.get("Alive", node.get("alive")):
                continue
            res = node.get("Resources", {})
            slots = int(res.get("CPU", 0) // self.cpus_per_slot)
            if self.use_gpu:
                slots = min(slots, int(res.get("GPU", 0) // self.gpus_per_slot))
            if slots > 0:
                out[node["NodeID"]] = (node["NodeManagerAddress"], slots)
        return out

    def _max(self):
        return self.settings.max_num_proc or 1 << 30

    def _add_workers(self, worker_fn):
        """Starts actors on free slots; returns how many."""
        added = 0
        for node_id, (node_ip, slots) in self._slots().items():
            used = sum(1 for w in self._workers.values() if w["node_id"] == node_id)
            while used < slots and len(self._workers) < self._max():
                self._start_worker(node_id, node_ip, worker_fn)
                used += 1
                added += 1
        return added

    def _start_worker(self, node_id, node_ip, worker_fn):
        wid = "w%d" % self._next_id
        self._next_id += 1
        Worker = ray.remote(runner.BaseHorovodWorker)
        actor = Worker.options(
            num_cpus=self.cpus_per_slot, num_gpus=self.gpus_per_slot, max_restarts=0,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False)).remote()
        # Its place until it joins a generation (hvd.init() takes the generation's).
        place = dict(rank=0, size=1, local_rank=0, local_size=1, cross_rank=0, cross_size=1)
        env = _job_driver.rank_env(place, self._store, self._job_id, node_ip,
                                   gloo_address=node_ip, elastic_id=wid)
        env["HVD_ELASTIC_TIMEOUT"] = str(self.settings.elastic_timeout)
        env["HVD_TIMEOUT"] = os.environ.get("HVD_TIMEOUT", str(self.settings.timeout_s))
        env.update(self.env_vars)
        actor.update_env_vars.remote(env)
        pid_ref = actor.pid.remote()  # before the function, which holds the actor
        self._workers[wid] = dict(actor=actor, node_id=node_id, node_ip=node_ip, pid="?",
                                  pid_ref=pid_ref, actor_id=actor._actor_id.hex()[:12],
                                  ref=actor.execute.remote(lambda _: worker_fn()))

    def _publish(self):
        """A new generation of the running workers, in the order they started."""
        if self.generation >= 0 and self.settings.reset_limit is not None and \
                self.generation >= self.settings.reset_limit:
            raise RuntimeError("hvd.ray: the workers changed, but the job was reset %d time(s) "
                               "(reset_limit %d)" % (self.generation, self.settings.reset_limit))
        ids = sorted(self._workers, key=lambda w: int(w[1:]))
        places = _job_driver.place_ranks([self._workers[w]["node_id"] for w in ids])
        for wid, place in zip(ids, places):
            self._workers[wid]["place"] = place
        self.generation += 1
        self._store.publish_generation(self.generation, dict(zip(ids, places)))

    # ---- Running.

    def _wait_for_min(self, worker_fn):
        deadline = time.monotonic() + self.settings.elastic_timeout
        while True:
            self._add_workers(worker_fn)
            if len(self._workers) >= self.settings.min_num_proc:
                return
            if time.monotonic() > deadline:
                raise RuntimeError("hvd.ray: the cluster has %d slot(s) of %d CPU(s), fewer than "
                                   "min_num_proc=%d, after %d s (elastic_timeout)"
                                   % (len(self._workers), self.cpus_per_slot,
                                      self.settings.min_num_proc, self.settings.elastic_timeout))
            time.sleep(1)

    def _describe(self, wid):
        w = self._workers[wid]
        try:
            w["pid"] = ray.get(w["pid_ref"], timeout=1) if w["pid"] == "?" else w["pid"]
        except Exception:  # noqa: B902 -- dead before it told its pid
            pass
        rank = w.get("place", {}).get("rank", "?")
        return "rank %s (Ray actor %s, worker %s, pid %s on node %s)" % (
            rank, w["actor_id"], wid, w["pid"], w["node_ip"])

    def run(self, worker_fn, callbacks=None):
        """Runs worker_fn() on the elastic workers; returns the values of the last
        generation's workers in rank order. Raises RuntimeError naming the cause when
        the job cannot go on."""
        del callbacks
        if self._store is None:
            raise RuntimeError("hvd.ray: call ElasticRayExecutor.start() first")
        self._wait_for_min(worker_fn)
        self._publish()
        results = {}
        finishing = False
        requests_seen = self._store.add(_job_driver.ELASTIC_RESET_REQUEST, 0)
        while True:
            refs = {w["ref"]: wid for wid, w in self._workers.items() if wid not in results}
            if not refs:
                break
            done, _ = ray.wait(list(refs), num_returns=1, timeout=0.5)
            changed = False
            for ref in done:
                wid = refs[ref]
                try:
                    results[wid] = ray.get(ref)
                    finishing = True
                except ray.exceptions.RayActorError as e:
                    why = "%s died: %s" % (self._describe(wid), runner._cause(e))
                    self._store.abort(why, self.generation)
                    del self._workers[wid]
                    left = len(self._workers) - len(results)
                    if left < self.settings.min_num_proc:
                        raise RuntimeError("hvd.ray: %s; %d worker(s) left, fewer than "
                                           "min_num_proc=%d" % (why, left,
                                                                self.settings.min_num_proc))
                    changed = True
                except ray.exceptions.RayTaskError as e:
                    cause = e.cause if getattr(e, "cause", None) is not None else e
                    raise RuntimeError("hvd.ray: %s raised %s: %s" % (
                        self._describe(wid), type(cause).__name__, str(cause).strip()[:2000]))
            if not finishing:
                requests = self._store.add(_job_driver.ELASTIC_RESET_REQUEST, 0)
                if requests > requests_seen:
                    requests_seen = requests
                    time.sleep(1)  # a worker that raised may be about to die: one reset
                    changed = True
                elif not changed and self._add_workers(worker_fn):
                    changed = True
            if changed and not finishing:
                self._publish()
        order = sorted(results, key=lambda wid: self._workers[wid]["place"]["rank"])
        return [results[wid] for wid in order]


def _kill(actor):
    try:
        ray.kill(actor, no_restart=True)
    except Exception:  # noqa: B902 -- already gone
        pass
