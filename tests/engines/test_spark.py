"""hvd.spark on a real local Spark: `local-cluster[2,2,1024]`, a standalone master, two
workers and two executor JVMs of 2 cores each, on 127.0.0.1 (pyspark from the Python
package registry, Java from Debian). Each rank is one Spark task."""
import os
import signal
import sys
import time

import numpy as np
import pytest

import engines_util

pyspark = pytest.importorskip("pyspark", reason="pyspark is not installed "
                                                 "(.ci/requirements/engines.txt)")
import hvd.spark  # noqa: E402

pytestmark = pytest.mark.slow

HVD_TIMEOUT = 20


def test_no_spark_context_is_one_line():
    with pytest.raises(RuntimeError, match="no active SparkContext"):
        hvd.spark.run(lambda: 0, num_proc=1)


@pytest.fixture(scope="module")
def spark():
    engines_util.which_or_skip(pytest, "java")
    from pyspark.sql import SparkSession
    env = engines_util.worker_env({"HVD_TIMEOUT": str(HVD_TIMEOUT)})
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    builder = (SparkSession.builder.master("local-cluster[2,2,1024]").appName("hvd-spark-test")
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.ui.enabled", "false")
               .config("spark.pyspark.python", sys.executable))
    for k in ("PYTHONPATH", "HVD_LIBRARY", "HVD_TIMEOUT"):
        builder = builder.config("spark.executorEnv." + k, env[k])
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    os.environ["HVD_TIMEOUT"] = str(HVD_TIMEOUT)
    yield session
    session.stop()


def _layout_and_sum(scale):
    import hvd.numpy as hvd
    hvd.init()
    total = hvd.allreduce(np.full(3, hvd.rank() + 1.0) * scale, op=hvd.Sum)
    return dict(rank=hvd.rank(), size=hvd.size(), local_rank=hvd.local_rank(),
                local_size=hvd.local_size(), total=total.tolist(), pid=os.getpid(),
                horovod_rank=os.environ["HOROVOD_RANK"], extra=os.environ.get("EXTRA"))


def test_run_four_ranks_in_four_tasks(spark):
    out = hvd.spark.run(_layout_and_sum, args=(2.0,), num_proc=4, env={"EXTRA": "yes"})
    assert [o["rank"] for o in out] == [0, 1, 2, 3]
    assert all(o["size"] == 4 and o["local_size"] == 4 for o in out)  # one host
    assert sorted(o["local_rank"] for o in out) == [0, 1, 2, 3]
    assert [o["horovod_rank"] for o in out] == ["0", "1", "2", "3"]
    assert all(o["extra"] == "yes" for o in out)
    for o in out:
        assert o["total"] == [2.0 * (1 + 2 + 3 + 4)] * 3
    assert len({o["pid"] for o in out}) == 4


def _rank_dies(victim):
    import hvd.numpy as hvd
    hvd.init()
    hvd.allreduce(np.ones(2), op=hvd.Sum, name="before")
    if hvd.rank() == victim:
        os.kill(os.getpid(), signal.SIGKILL)
    try:
        hvd.allreduce(np.ones(2), op=hvd.Sum, name="after")
    except hvd.HvdError as e:
        raise RuntimeError("survivor saw: %s" % e) from None


def test_a_killed_rank_is_named(spark):
    t = time.monotonic()
    with pytest.raises(RuntimeError) as e:
        hvd.spark.run(_rank_dies, args=(1,), num_proc=3)
    text = str(e.value)
    assert "rank 1 (Spark task 1, pid " in text and "was killed by signal 9 (SIGKILL)" in text, text
    assert "rank(s) 0, 2 failed too" in text, text
    # The survivors' own errors name it: the task recorded it in the driver's store.
    for r in (0, 2):
        assert "rank 1 (Spark task 1, pid " in e.value.failures[r], e.value.failures[r]
    assert time.monotonic() - t < HVD_TIMEOUT + 30


def _raises_on(bad_rank):
    import hvd.numpy as hvd
    hvd.init()
    if hvd.rank() == bad_rank:
        raise ValueError("bad shard %d" % hvd.rank())
    return hvd.rank()


def test_an_exception_names_its_rank(spark):
    with pytest.raises(RuntimeError, match=r"rank 0 raised ValueError: bad shard 0"):
        hvd.spark.run(_raises_on, args=(0,), num_proc=2)


def test_more_ranks_than_executor_cores_is_one_line(spark):
    t = time.monotonic()
    with pytest.raises(RuntimeError, match=r"4 of 6 task\(s\) registered within 3 s "
                                           r"\(start_timeout\); tasks 4, 5 never started"):
        hvd.spark.run(_raises_on, args=(-1,), num_proc=6, start_timeout=3)
    assert time.monotonic() - t < 60


def test_mpi_is_refused():
    with pytest.raises(ValueError, match="without MPI"):
        hvd.spark.run(_raises_on, num_proc=1, use_mpi=True)


STEPS = 20


def _elastic_train():
    import hvd.numpy as hvd
    from hvd import elastic
    hvd.init()
    state = elastic.ObjectState(lambda o: hvd.broadcast_object(o, root_rank=0), hvd.rank,
                                step=0, total=0.0, sizes=[])

    def train(state):
        while state.step < STEPS:
            if os.environ["HVD_ELASTIC_ID"] == "w3" and state.step == 4:
                os.kill(os.getpid(), signal.SIGKILL)
            got = hvd.allreduce(np.ones(1), op=hvd.Sum, name="step%d" % state.step)[0]
            state.total += got / hvd.size()
            if not state.sizes or state.sizes[-1] != hvd.size():
                state.sizes.append(hvd.size())
            state.step += 1
            time.sleep(0.1)
            state.commit()
        return dict(rank=hvd.rank(), size=hvd.size(), step=state.step, total=state.total,
                    sizes=state.sizes)

    return elastic.run_fn(train)(state)


def test_run_elastic_goes_on_without_a_killed_rank(spark):
    out = hvd.spark.run_elastic(_elastic_train, num_proc=4, min_num_proc=2, elastic_timeout=60)
    assert [o["rank"] for o in out] == [0, 1, 2]
    for o in out:
        assert o["size"] == 3 and o["step"] == STEPS
        assert o["total"] == pytest.approx(STEPS)  # every step once
    assert out[0]["sizes"] == [4, 3]


def test_run_elastic_below_the_minimum_is_named(spark):
    with pytest.raises(RuntimeError, match=r"rank 3 \(Spark task 3, pid \d+ on host .*\) was "
                                           r"killed by signal 9 .*; 3 rank\(s\) left, fewer than "
                                           r"min_num_proc=4"):
        hvd.spark.run_elastic(_elastic_train, num_proc=4, min_num_proc=4, elastic_timeout=60)
