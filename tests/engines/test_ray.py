"""hvd.ray on a real local Ray cluster: a head (no CPUs: only the driver's) and two
worker nodes of 2 CPUs each, separate raylets started by ray.cluster_utils.Cluster,
all on 127.0.0.1. The nodes share this machine, so "a node lost" is its raylet
removed with its actors."""
import os
import signal
import tempfile
import time

import numpy as np
import pytest

import engines_util

# Ray on Linux binds the machine's address unless told this is not a cluster across
# machines: everything here stays on loopback. Its files go to a private folder.
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
os.environ.setdefault("RAY_TMPDIR", tempfile.mkdtemp(prefix="hvdray-"))
ray = pytest.importorskip("ray", reason="Ray is not installed (.ci/requirements/engines.txt)")
from ray.cluster_utils import Cluster  # noqa: E402

import hvd.ray  # noqa: E402

pytestmark = pytest.mark.slow

HVD_TIMEOUT = 20


@pytest.fixture(scope="module")
def cluster():
    os.environ.update({k: v for k, v in engines_util.worker_env().items()
                       if k in ("PYTHONPATH", "HVD_LIBRARY")})
    os.environ["HVD_TIMEOUT"] = str(HVD_TIMEOUT)
    c = Cluster(initialize_head=True, head_node_args=dict(num_cpus=0, include_dashboard=False))
    try:
        nodes = [c.add_node(num_cpus=2) for _ in range(2)]
        ray.init(address=c.address)
        c.nodes = nodes
        yield c
    finally:
        ray.shutdown()
        c.shutdown()


def _layout_and_sum(scale):
    import hvd.numpy as hvd
    hvd.init()
    total = hvd.allreduce(np.full(5, hvd.rank() + 1.0, dtype=np.float32) * scale, op=hvd.Sum)
    return dict(rank=hvd.rank(), size=hvd.size(), local_rank=hvd.local_rank(),
                local_size=hvd.local_size(), cross_rank=hvd.cross_rank(),
                cross_size=hvd.cross_size(), total=total.tolist(), pid=os.getpid(),
                horovod_rank=os.environ["HOROVOD_RANK"])


class Model:
    def __init__(self, base):
        self.base = base

    def step(self):
        import hvd.numpy as hvd
        hvd.init()
        return float(hvd.allreduce(np.array([self.base + hvd.rank()], dtype=np.float64),
                                   op=hvd.Sum)[0])


def test_run_execute_and_layout_over_two_nodes(cluster):
    settings = hvd.ray.RayExecutor.create_settings(timeout_s=30)
    executor = hvd.ray.RayExecutor(settings, num_workers=4, cpus_per_worker=1)
    executor.start(executable_cls=Model, executable_args=[10.0])
    try:
        out = executor.run(_layout_and_sum, kwargs=dict(scale=2.0))
        assert [o["rank"] for o in out] == [0, 1, 2, 3]
        assert all(o["size"] == 4 for o in out)
        # Two workers on each node, consecutive ranks per node (PACK fills a node first).
        assert [(o["local_rank"], o["local_size"]) for o in out] == [(0, 2), (1, 2)] * 2
        assert [(o["cross_rank"], o["cross_size"]) for o in out] == [(0, 2), (0, 2), (1, 2), (1, 2)]
        assert [o["horovod_rank"] for o in out] == ["0", "1", "2", "3"]
        want = (2.0 * sum(r + 1.0 for r in range(4)))
        for o in out:
            assert o["total"] == [want] * 5
        # The actors stay: the same processes, the runtime still up.
        again = executor.run(_layout_and_sum, args=[1.0])
        assert [o["pid"] for o in again] == [o["pid"] for o in out]
        assert executor.execute(lambda m: m.step()) == [4 * 10.0 + 6.0] * 4
        assert executor.execute_single(lambda m: m.base) == 10.0
    finally:
        executor.shutdown()


def _rank_dies(victim):
    import hvd.numpy as hvd
    hvd.init()
    hvd.allreduce(np.ones(3), op=hvd.Sum, name="before")
    if hvd.rank() == victim:
        os.kill(os.getpid(), signal.SIGKILL)
    hvd.allreduce(np.ones(3), op=hvd.Sum, name="after")
    return "unreachable"


def test_a_killed_actor_is_named_like_a_dead_rank(cluster):
    executor = hvd.ray.RayExecutor(hvd.ray.RayExecutor.create_settings(), num_workers=3)
    executor.start()
    try:
        t = time.monotonic()
        with pytest.raises(RuntimeError) as e:
            executor.run(_rank_dies, args=[2])
        took = time.monotonic() - t
        text = str(e.value)
        assert "rank 2 (Ray actor " in text and "on node 127.0.0.1) died" in text, text
        # The others were told, not left to their HVD_TIMEOUT.
        assert took < HVD_TIMEOUT, text
        assert "rank(s) 0, 1 failed too" in text, text
        # Their own errors name it too: the driver recorded it in the job's store.
        for r in (0, 1):
            assert "rank 2 (Ray actor " in e.value.failures[r], e.value.failures[r]
    finally:
        executor.shutdown()


def _raises_on(bad_rank):
    import hvd.numpy as hvd
    hvd.init()
    if hvd.rank() == bad_rank:
        raise ValueError("bad batch on rank %d" % hvd.rank())
    return hvd.rank()


def test_an_exception_names_its_rank(cluster):
    executor = hvd.ray.RayExecutor(hvd.ray.RayExecutor.create_settings(), num_workers=2)
    executor.start()
    try:
        with pytest.raises(RuntimeError, match=r"rank 1 raised ValueError: bad batch on rank 1"):
            executor.run(_raises_on, args=[1])
    finally:
        executor.shutdown()


def test_more_workers_than_the_cluster_holds_is_one_line(cluster):
    settings = hvd.ray.RayExecutor.create_settings(placement_group_timeout_s=3)
    executor = hvd.ray.RayExecutor(settings, num_workers=5, cpus_per_worker=1)
    t = time.monotonic()
    with pytest.raises(RuntimeError, match=r"could not place 5 bundle\(s\) of \{'CPU': 1\} "
                                           r"\(5 worker\(s\)\) within 3s .*'CPU': 4\.0"):
        executor.start()
    assert time.monotonic() - t < 30
    with pytest.raises(RuntimeError, match="call RayExecutor.start"):
        executor.run(_raises_on, args=[0])


def test_num_hosts_puts_as_many_workers_on_each_node(cluster):
    settings = hvd.ray.RayExecutor.create_settings(placement_group_timeout_s=30)
    executor = hvd.ray.RayExecutor(settings, num_hosts=2, num_workers_per_host=1)
    executor.start()
    try:
        out = executor.run(_layout_and_sum, args=[1.0])
        assert [(o["local_size"], o["cross_size"]) for o in out] == [(1, 2), (1, 2)]
    finally:
        executor.shutdown()
    # Three hosts of a two-node cluster: one line.
    executor = hvd.ray.RayExecutor(hvd.ray.RayExecutor.create_settings(placement_group_timeout_s=2),
                                   num_hosts=3, num_workers_per_host=1)
    with pytest.raises(RuntimeError, match=r"could not place 3 bundle\(s\) .*one per node"):
        executor.start()


def test_arguments_are_checked():
    s = hvd.ray.RayExecutor.create_settings()
    with pytest.raises(ValueError, match="give num_workers"):
        hvd.ray.RayExecutor(s)
    with pytest.raises(ValueError, match="positive min_workers"):
        hvd.ray.RayExecutor(s, num_workers=2, min_workers=1)
    with pytest.raises(ValueError, match="positive min_workers"):
        hvd.ray.RayExecutor(s, max_workers=4)


def test_an_elastic_ray_executor_through_min_workers(cluster):
    executor = hvd.ray.RayExecutor(hvd.ray.RayExecutor.create_settings(), min_workers=2,
                                   max_workers=3, cpus_per_worker=1)
    executor.start()
    try:
        out = executor.run(_layout_and_sum, args=[1.0])
        assert [o["rank"] for o in out] == [0, 1, 2] and out[0]["total"] == [6.0] * 5
        with pytest.raises(RuntimeError, match="run\\(\\) only"):
            executor.execute(lambda m: 0)
    finally:
        executor.shutdown()
