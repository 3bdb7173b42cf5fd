"""Slurm for real: slurmctld, slurmd and munged started by the test (slurm_cluster.py:
one node of 4 CPUs; and two nodes, each slurmd in a network namespace of its own), jobs
submitted with srun and sbatch. The ranks set no variable of dprun's: they read
Slurm's."""
import os
import sys
import time

import pytest

import engines_util
import pods as pods_mod
import slurm_cluster

pytestmark = pytest.mark.slow

PYTHON = "/usr/bin/python3"  # Debian's, with torch for the elastic example
PROBE = os.path.join(engines_util.HERE, "programs", "probe.py")


@pytest.fixture(scope="module")
def slurm():
    why = slurm_cluster.installed()
    if why:
        pytest.skip(why)
    with slurm_cluster.SlurmCluster() as cluster:
        yield cluster


def _env(**extra):
    env = engines_util.worker_env({"HVD_TIMEOUT": "20"})
    env.update(extra)
    return {k: env[k] for k in ("PYTHONPATH", "HVD_LIBRARY", "HVD_TIMEOUT", "PATH")} | extra


_lines = engines_util.json_lines


def _check_job(lines, size):
    assert sorted(o["rank"] for o in lines) == list(range(size)), lines
    for o in lines:
        assert o["size"] == size and o["local_size"] == size and o["cross_size"] == 1
        assert o["sum"] == [size * (size + 1) / 2.0] * 4


def test_srun_four_tasks(slurm):
    r = slurm.run(["srun", "-n", "4", PYTHON, PROBE], 90, env=_env())
    assert r.returncode == 0, r.stderr
    lines = _lines(r.stdout)
    _check_job(lines, 4)
    assert sorted(o["local_rank"] for o in lines) == [0, 1, 2, 3]


def test_srun_pmi2(slurm):
    # srun --mpi=pmi2 adds PMI_RANK, PMI_SIZE and PMI_FD: still Slurm's layout.
    r = slurm.run(["srun", "--mpi=pmi2", "-n", "3", PYTHON, PROBE], 90, env=_env())
    assert r.returncode == 0, r.stderr
    _check_job(_lines(r.stdout), 3)


def test_srun_torch_distributed_over_dprun(slurm):
    # init_process_group("dprun") under srun, with no variable: hvd.torch fills
    # torch's env:// variables from Slurm's (hvd_detect_launcher).
    launched = os.path.join(engines_util.HERE, "..", "..", "bindings", "python", "tests_dist",
                            "jobs", "launched.py")
    r = slurm.run(["srun", "-n", "3", PYTHON, launched], 120, env=_env())
    assert r.returncode == 0, r.stdout + r.stderr
    for rank in range(3):
        assert "rank %d of 3, hvd %d of 3, sum 6" % (rank, rank) in r.stdout, r.stdout


def test_sbatch_with_two_steps(slurm, tmp_path):
    script = tmp_path / "job.sh"
    out = tmp_path / "job.out"
    script.write_text("#!/bin/sh\n"
                      "srun -n 2 %s %s\n"
                      "srun -n 3 %s %s\n" % (PYTHON, PROBE, PYTHON, PROBE))
    r = slurm.run(["sbatch", "--wait", "-n", "3", "-o", str(out), str(script)], 180, env=_env())
    assert r.returncode == 0, r.stderr + out.read_text()
    lines = _lines(out.read_text())
    _check_job([o for o in lines if o["size"] == 2], 2)
    _check_job([o for o in lines if o["size"] == 3], 3)


def test_a_killed_task_is_named_and_the_step_ends(slurm):
    t = time.monotonic()
    r = slurm.run(["srun", "-n", "3", PYTHON, PROBE], 120, env=_env(PROBE_KILL="1"))
    took = time.monotonic() - t
    assert r.returncode != 0
    lines = _lines(r.stdout)
    assert sorted(o["rank"] for o in lines) == [0, 2], r.stdout + r.stderr
    for o in lines:
        assert "rank 1" in o["error"], o["error"]
    assert "task 1" in r.stderr and "Killed" in r.stderr, r.stderr
    assert took < 60, took


def test_srun_of_an_elastic_job(slurm, tmp_path):
    # One task runs dprun, whose ranks are elastic: worker w1 dies, the job goes on.
    example = os.path.join(engines_util.REPO, "examples", "elastic", "train_elastic.py")
    env = _env(ELASTIC_EPOCHS="1", ELASTIC_SAMPLES="192", ELASTIC_KILL="w1:0:2",
               ELASTIC_LOG=str(tmp_path))
    r = slurm.run(["srun", "-n", "1", "-c", "3", engines_util.DPRUN, "-np", "3", "--min-np", "2",
                   PYTHON, example], 240, env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "the job goes on with 2 rank(s)" in r.stdout + r.stderr
    finals = [f for f in os.listdir(tmp_path)]
    assert finals, "no worker log"


def test_batch_script_without_srun_is_one_rank(slurm, tmp_path):
    # A program run in the batch script itself is one process: rank 0 of 1 here
    # (the batch step's SLURM_STEP_NUM_TASKS is unset), not a job that waits.
    script = tmp_path / "job.sh"
    out = tmp_path / "job.out"
    script.write_text("#!/bin/sh\n%s %s\n" % (PYTHON, PROBE))
    r = slurm.run(["sbatch", "--wait", "-n", "1", "-o", str(out), str(script)], 120, env=_env())
    assert r.returncode == 0, r.stderr + out.read_text()
    _check_job(_lines(out.read_text()), 1)


def test_srun_across_two_nodes():
    why = slurm_cluster.installed() or pods_mod.usable()
    if why:
        pytest.skip(why)
    with pods_mod.Pods(["ctl", "node1", "node2"]) as pods:
        with slurm_cluster.SlurmCluster(pods=pods) as slurm:
            r = slurm.run(["srun", "-N", "2", "-n", "4", PYTHON, PROBE], 120,
                          env=_env(HVD_STORE_SECRET="s"))
            killed = slurm.run(["srun", "-N", "2", "-n", "4", PYTHON, PROBE], 120,
                               env=_env(HVD_STORE_SECRET="s", PROBE_KILL="3"))
    assert r.returncode == 0, r.stdout + r.stderr
    lines = _lines(r.stdout)
    assert sorted(o["rank"] for o in lines) == [0, 1, 2, 3], r.stdout + r.stderr
    for o in lines:
        # Ranks 0-1 on node1, 2-3 on node2: the store at node1 (SLURM_STEP_NODELIST).
        assert o["host"] == ("node1" if o["rank"] < 2 else "node2")
        assert (o["local_size"], o["cross_size"]) == (2, 2)
        assert o["cross_rank"] == o["rank"] // 2
        assert o["sum"] == [10.0] * 4
    assert killed.returncode != 0
    lines = _lines(killed.stdout)
    assert sorted(o["rank"] for o in lines) == [0, 1, 2], killed.stdout + killed.stderr
    for o in lines:
        assert "rank 3" in o["error"], o["error"]


del sys
