"""hvd.ray.ElasticRayExecutor on a real local Ray cluster whose nodes come and go: two
worker nodes of 2 CPUs (4 slots) at the start, one removed mid-training (its 2 actors
lost with it), then a new node added (2 new actors join)."""
import os
import threading
import time

import numpy as np
import pytest

import engines_util
from test_ray import ray, Cluster, HVD_TIMEOUT  # noqa: F401  (sets Ray's environment)

import hvd.ray  # noqa: E402

pytestmark = pytest.mark.slow

STEPS = 40


def _train():
    import hvd.numpy as hvd
    from hvd import elastic
    hvd.init()

    def bcast(obj):
        return hvd.broadcast_object(obj, root_rank=0)

    state = elastic.ObjectState(bcast, hvd.rank, step=0, total=0.0, sizes=[])

    def train(state):
        while state.step < STEPS:
            # Each step adds the number of ranks; a step counts once, whatever the size.
            got = hvd.allreduce(np.ones(1), op=hvd.Sum, name="step%d" % state.step)[0]
            state.total += got / hvd.size()
            if not state.sizes or state.sizes[-1] != hvd.size():
                state.sizes.append(hvd.size())
            state.step += 1
            time.sleep(0.25)
            state.commit()
        return dict(rank=hvd.rank(), size=hvd.size(), step=state.step, total=state.total,
                    sizes=list(state.sizes))

    return elastic.run_fn(train)(state)


def test_workers_lost_with_their_node_and_new_ones_from_a_new_node():
    os.environ.update({k: v for k, v in engines_util.worker_env().items()
                       if k in ("PYTHONPATH", "HVD_LIBRARY")})
    os.environ["HVD_TIMEOUT"] = str(HVD_TIMEOUT)
    cluster = Cluster(initialize_head=True, head_node_args=dict(num_cpus=0, include_dashboard=False))
    executor = None
    try:
        nodes = [cluster.add_node(num_cpus=2) for _ in range(2)]
        ray.init(address=cluster.address)
        settings = hvd.ray.ElasticRayExecutor.create_settings(min_num_proc=2, max_num_proc=4,
                                                              elastic_timeout=60)
        executor = hvd.ray.ElasticRayExecutor(settings, cpus_per_slot=1)
        executor.start()
        out = {}
        runner = threading.Thread(target=lambda: out.setdefault("r", _try(executor.run, _train)))
        runner.start()
        engines_util.wait_until(lambda: executor.generation >= 0, 60, "generation 0")
        time.sleep(3)
        cluster.remove_node(nodes[1])
        engines_util.wait_until(lambda: executor.generation >= 1 or "r" in out, 60,
                                "a generation without the node")
        assert "r" not in out, out
        time.sleep(2)
        cluster.add_node(num_cpus=2)
        engines_util.wait_until(lambda: executor.generation >= 2, 60, "a generation with the new node")
        runner.join(120)
        assert not runner.is_alive(), "the elastic job did not finish"
        results = out["r"]
        assert not isinstance(results, Exception), results
        assert [r["rank"] for r in results] == [0, 1, 2, 3]
        for r in results:
            assert r["step"] == STEPS and r["size"] == 4
            assert r["total"] == pytest.approx(STEPS)  # each step once, after every reset
        # Rank 0 (a survivor) trained at 4, then 2, then 4 again.
        assert results[0]["sizes"] == [4, 2, 4], results[0]["sizes"]
    finally:
        if executor is not None:
            executor.shutdown()
        ray.shutdown()
        cluster.shutdown()


def test_too_few_workers_left_is_named():
    os.environ.update({k: v for k, v in engines_util.worker_env().items()
                       if k in ("PYTHONPATH", "HVD_LIBRARY")})
    cluster = Cluster(initialize_head=True, head_node_args=dict(num_cpus=0, include_dashboard=False))
    executor = None
    try:
        nodes = [cluster.add_node(num_cpus=1) for _ in range(2)]
        ray.init(address=cluster.address)
        settings = hvd.ray.ElasticRayExecutor.create_settings(min_num_proc=2, elastic_timeout=30)
        executor = hvd.ray.ElasticRayExecutor(settings, cpus_per_slot=1)
        executor.start()
        out = {}
        runner = threading.Thread(target=lambda: out.setdefault("r", _try(executor.run, _train)))
        runner.start()
        engines_util.wait_until(lambda: executor.generation >= 0, 60, "generation 0")
        time.sleep(2)
        cluster.remove_node(nodes[1])
        runner.join(60)
        assert isinstance(out.get("r"), RuntimeError), out
        text = str(out["r"])
        assert "(Ray actor " in text and "died" in text, text
        assert "1 worker(s) left, fewer than min_num_proc=2" in text, text
    finally:
        if executor is not None:
            executor.shutdown()
        ray.shutdown()
        cluster.shutdown()


def _try(fn, *args):
    try:
        return fn(*args)
    except Exception as e:  # noqa: B902 -- the test asserts on it
        return e
