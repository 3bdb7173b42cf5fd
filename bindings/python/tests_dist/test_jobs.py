"""Whole jobs through the backend, each started here (run alone, not under dprun):
a rank that calls out of order, a killed and a frozen rank, destroy and init again,
and init_process_group("dprun") under each launcher with no variable of dprun's."""
import os
import re
import subprocess
import sys

import pytest
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
JOBS = os.path.join(HERE, "jobs")
DPRUN = os.environ.get("HVD_DPRUN", os.path.join(os.path.dirname(
    os.environ.get("HVD_LIBRARY", "build/libhvd.so")), "dprun"))
PY = sys.executable


def run(cmd, timeout=90, **env):
    full = dict(os.environ, PYTHONPATH=os.path.dirname(HERE), **env)
    full.pop("HVD_DIST_TESTS_NO_INIT", None)
    p = subprocess.run(cmd, env=full, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=timeout, text=True)
    return p.returncode, p.stdout


def rank_lines(out, rank):
    return [line for line in out.splitlines() if line.startswith("[%d]<stdout>:" % rank)]


@pytest.fixture(autouse=True)
def _alone():
    if not os.environ.get("HVD_DIST_TESTS_NO_INIT"):
        pytest.skip("starts jobs of its own: run alone (run_dist_tests.sh does)")


def test_a_rank_out_of_order_gets_a_mismatch_naming_both_calls():
    rc, out = run([DPRUN, "-np", "3", PY, os.path.join(JOBS, "mismatch.py")])
    assert rc == 0, out
    for r in range(3):
        lines = "\n".join(rank_lines(out, r))
        assert "MismatchError" in lines, out
        assert "rank 0 has allreduce; ranks 1, 2 have allgather" in lines, out
        mine = "all_reduce(float32[4])" if r == 0 else "all_gather(float32[4])"
        assert mine in lines, out
        assert "after: [3.0, 3.0]" in lines, out  # the group goes on


@pytest.mark.parametrize("how", ["kill", "stop"])
def test_a_dead_or_frozen_rank_is_named_on_every_survivor(how):
    timeout_s = 8
    rc, out = run([DPRUN, "-np", "3", PY, os.path.join(JOBS, "killed.py"), how],
                  HVD_TIMEOUT=str(timeout_s))
    assert rc != 0, out
    for r in (0, 1):
        lines = "\n".join(rank_lines(out, r))
        m = re.search(r"caught after ([0-9.]+) s", lines)
        assert m, out
        assert float(m.group(1)) <= timeout_s + 5, out  # within HVD_TIMEOUT
        if how == "kill":
            assert re.search(r"rank 2 \(pid \d+\) was killed by signal 9", lines), out
        else:
            assert "rank 2 is gone or frozen" in lines, out


def test_destroy_and_init_again():
    rc, out = run([DPRUN, "-np", "2", PY, os.path.join(JOBS, "reinit.py")])
    assert rc == 0, out
    for round in range(3):
        for r in range(2):
            assert "round %d rank %d: [3.0, 3.0, 3.0] [2.0]" % (round, r) in out, out


def _launched(out, n):
    for r in range(n):
        assert "rank %d of %d, hvd %d of %d, sum %g" % (r, n, r, n, n * (n + 1) / 2) in out, out


def test_under_dprun():
    rc, out = run([DPRUN, "-np", "3", PY, os.path.join(JOBS, "launched.py")])
    assert rc == 0, out
    _launched(out, 3)


def test_under_torchrun():
    rc, out = run([PY, "-m", "torch.distributed.run", "--nproc_per_node", "2",
                   "--master_port", str(29600 + os.getpid() % 300),
                   os.path.join(JOBS, "launched.py")])
    if rc != 0 and "has no attribute 'get'" in out and torch.__version__.startswith("1."):
        pytest.skip("this torch's torchrun fails by itself on this Python (Debian's 1.13 on "
                    "3.11), before any backend runs")
    assert rc == 0, out
    _launched(out, 2)


def test_under_mpirun_with_no_variable_of_dprun():
    mpirun = "/usr/bin/mpirun.openmpi"
    if not os.path.exists(mpirun):
        pytest.skip("Open MPI's mpirun is not installed")
    rc, out = run([mpirun, "--allow-run-as-root", "--oversubscribe", "-np", "2",
                   "-x", "PYTHONPATH", "-x", "HVD_LIBRARY", PY,
                   os.path.join(JOBS, "launched.py")])
    assert rc == 0, out
    _launched(out, 2)
