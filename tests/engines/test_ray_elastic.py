"""hvd.ray.ElasticRayExecutor on a real local Ray cluster whose nodes come and go: two
worker nodes of 2 CPUs (4 slots) at the start, one removed mid-training (its 2 actors
lost with it), then a new node added (2 new actors join)."""
import contextlib
import os
import threading
import time

import numpy as np
import pytest

import engines_util
from test_ray import ray, Cluster, HVD_TIMEOUT  # noqa: F401  (sets Ray's environment)

import hvd.ray  # noqa: E402

pytestmark = pytest.mark.slow

MAX_STEPS = 400  # a bound: the job ends 5 steps after it is back at 4 workers


def _train():
    import hvd.numpy as hvd
    from hvd import elastic
    hvd.init()

    def bcast(obj):
        return hvd.broadcast_object(obj, root_rank=0)

    state = elastic.ObjectState(bcast, hvd.rank, step=0, total=0.0, sizes=[], changed=0)

    def train(state):
        # Every rank decides alike: the state is rank 0's after each reset.
        while state.step < MAX_STEPS and not (len(state.sizes) >= 3 and
                                              state.step - state.changed >= 5):
            # Each step adds the number of ranks; a step counts once, whatever the size.
            got = hvd.allreduce(np.ones(1), op=hvd.Sum, name="step%d" % state.step)[0]
            state.total += got / hvd.size()
            if not state.sizes or state.sizes[-1] != hvd.size():
                state.sizes.append(hvd.size())
                state.changed = state.step
            state.step += 1
            time.sleep(0.2)
            state.commit()
            if os.environ.get("PROGRESS") and hvd.rank() == 0:
                open(os.path.join(os.environ["PROGRESS"], "step%d" % state.step), "w").close()
        return dict(rank=hvd.rank(), size=hvd.size(), step=state.step, total=state.total,
                    sizes=list(state.sizes))

    return elastic.run_fn(train)(state)


def _reached(progress, step):
    return os.path.exists(os.path.join(progress, "step%d" % step))


@contextlib.contextmanager
def _elastic_job(progress, node_cpus, **settings):
    """A cluster of two worker nodes of node_cpus CPUs, and an elastic job of _train
    running on it in a thread. Yields (cluster, nodes, executor, out): out["r"] is
    run()'s value or exception once it returns."""
    os.environ.update({k: v for k, v in engines_util.worker_env().items()
                       if k in ("PYTHONPATH", "HVD_LIBRARY")})
    os.environ["HVD_TIMEOUT"] = str(HVD_TIMEOUT)
    cluster = Cluster(initialize_head=True, head_node_args=dict(num_cpus=0, include_dashboard=False))
    executor = None
    try:
        nodes = [cluster.add_node(num_cpus=node_cpus) for _ in range(2)]
        ray.init(address=cluster.address)
        executor = hvd.ray.ElasticRayExecutor(
            hvd.ray.ElasticRayExecutor.create_settings(**settings), cpus_per_slot=1,
            env_vars={"PROGRESS": str(progress)})
        executor.start()
        out = {}
        runner = threading.Thread(target=lambda: out.setdefault("r", _try(executor.run, _train)))
        runner.start()
        # Once the workers train (a failure inside hvd.init(), before hvd.elastic.run,
        # is not one a worker recovers from, here as in Horovod).
        engines_util.wait_until(lambda: _reached(progress, 2) or "r" in out, 90, "step 2")
        yield cluster, nodes, executor, out
        runner.join(120)
        assert not runner.is_alive(), "the elastic job did not finish"
    finally:
        if executor is not None:
            executor.shutdown()
        ray.shutdown()
        cluster.shutdown()


def test_workers_lost_with_their_node_and_new_ones_from_a_new_node(tmp_path):
    with _elastic_job(tmp_path, 2, min_num_proc=2, max_num_proc=4, elastic_timeout=60) as job:
        cluster, nodes, executor, out = job
        cluster.remove_node(nodes[1])
        engines_util.wait_until(lambda: executor.generation >= 1 or "r" in out, 60,
                                "a generation without the node")
        assert "r" not in out, out
        step = max(int(f[4:]) for f in os.listdir(tmp_path))
        engines_util.wait_until(lambda: _reached(tmp_path, step + 3) or "r" in out, 90,
                                "3 steps on 2 workers")
        cluster.add_node(num_cpus=2)
        engines_util.wait_until(lambda: executor.generation >= 2, 60, "a generation with the new node")
    results = out["r"]
    assert not isinstance(results, Exception), results
    assert [r["rank"] for r in results] == [0, 1, 2, 3]
    steps = results[0]["step"]
    assert steps < MAX_STEPS
    for r in results:
        assert r["step"] == steps and r["size"] == 4
        assert r["total"] == pytest.approx(steps)  # each step once, after every reset
    # Rank 0 (a survivor) trained at 4, then 2, then 4 again.
    assert results[0]["sizes"] == [4, 2, 4], results[0]["sizes"]


def test_too_few_workers_left_is_named(tmp_path):
    with _elastic_job(tmp_path, 1, min_num_proc=2, elastic_timeout=30) as job:
        cluster, nodes, _, out = job
        cluster.remove_node(nodes[1])
    assert isinstance(out.get("r"), RuntimeError), out
    text = str(out["r"])
    assert "(Ray actor " in text and "died" in text, text
    assert "1 worker(s) left, fewer than min_num_proc=2" in text, text


def _try(fn, *args):
    try:
        return fn(*args)
    except Exception as e:  # noqa: B902 -- the test asserts on it
        return e
