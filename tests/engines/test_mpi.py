"""MPI beyond Open MPI's mpirun: MPICH's mpiexec (Hydra), with no variable of dprun's;
and hvd.init(comm=...) with an mpi4py communicator or a list of ranks (Debian's
python3-mpi4py, built against Open MPI, so those run under mpirun.openmpi). Every
test names its MPI's launcher explicitly: with both installed, `mpirun` is whichever
the alternatives system picked."""
import os
import time

import pytest

import engines_util

PYTHON = "/usr/bin/python3"
PROBE = os.path.join(engines_util.HERE, "programs", "probe.py")
HYDRA = "mpiexec.hydra"
OPENMPI = "mpirun.openmpi"


_lines = engines_util.json_lines


def _run(cmd, timeout_s=90, **extra):
    return engines_util.run(cmd, timeout_s, env=engines_util.worker_env(dict(HVD_TIMEOUT="20", **extra)))


def _check_job(lines, size, local_size=None):
    assert sorted(o["rank"] for o in lines) == list(range(size)), lines
    for o in lines:
        assert o["size"] == size
        assert o["local_size"] == (local_size or size)
        assert o["sum"] == [size * (size + 1) / 2.0] * 4


def test_mpich_hydra_needs_no_variable():
    engines_util.which_or_skip(pytest, HYDRA)
    r = _run([HYDRA, "-n", "3", PYTHON, PROBE])
    assert r.returncode == 0, r.stderr
    lines = _lines(r.stdout)
    _check_job(lines, 3)
    assert sorted(o["local_rank"] for o in lines) == [0, 1, 2]
    # Two jobs at once get different ports (each from its own Hydra proxy's pid).
    jobs = [engines_util.subprocess.Popen([HYDRA, "-n", "2", PYTHON, PROBE],
                                          stdout=engines_util.subprocess.PIPE,
                                          env=engines_util.worker_env({"HVD_TIMEOUT": "20"}),
                                          universal_newlines=True) for _ in range(2)]
    for j in jobs:
        out, _ = j.communicate(timeout=90)
        assert j.returncode == 0
        _check_job(_lines(out), 2)


def test_mpich_hydra_killed_rank_is_named(tmp_path):
    engines_util.which_or_skip(pytest, HYDRA)
    t = time.monotonic()
    # Hydra SIGKILLs its other processes as soon as one dies of a signal, so they never
    # say what they saw: run the ranks under a shell (rank 2's then exits 137, which
    # Hydra does not take for a signal), and keep their lines in files too.
    r = _run([HYDRA, "-n", "3", "sh", "-c", '"$@"; exit $?', "sh", PYTHON, PROBE],
             PROBE_KILL="2", PROBE_OUT=str(tmp_path))
    assert r.returncode != 0
    assert "Killed" in r.stdout + r.stderr
    engines_util.wait_until(lambda: len(os.listdir(tmp_path)) == 2, 20, "ranks 0 and 1's lines")
    lines = _lines("".join((tmp_path / f).read_text() for f in sorted(os.listdir(tmp_path))))
    assert sorted(o["rank"] for o in lines) == [0, 1]
    for o in lines:
        assert "rank 2" in o["error"], o["error"]
    assert time.monotonic() - t < 60


def test_mpich_hydra_across_nodes_without_master_addr_is_one_line():
    # What a rank on one of two nodes sees (Hydra's local variables say 1 of 2 here).
    engines_util.which_or_skip(pytest, HYDRA)
    r = _run([HYDRA, "-n", "2", "env", "MPI_LOCALNRANKS=1", "MPI_LOCALRANKID=0", PYTHON, PROBE],
             timeout_s=60)
    assert r.returncode != 0
    assert "PMI launch across nodes: set MASTER_ADDR to rank 0's node" in r.stderr, r.stderr


def _mpi4py_or_skip():
    engines_util.which_or_skip(pytest, OPENMPI)
    r = engines_util.run([PYTHON, "-c", "import mpi4py"], 30)
    if r.returncode != 0:
        pytest.skip("mpi4py is not installed (.ci/install installs python3-mpi4py)")


def _openmpi(n, **extra):
    return _run([OPENMPI, "--allow-run-as-root", "--oversubscribe", "-np", str(n), PYTHON, PROBE],
                **extra)


def test_init_with_an_mpi4py_communicator():
    _mpi4py_or_skip()
    r = _openmpi(3, PROBE_COMM="world")
    assert r.returncode == 0, r.stderr
    _check_job(_lines(r.stdout), 3)


def test_init_with_split_communicators_makes_two_jobs():
    _mpi4py_or_skip()
    r = _openmpi(4, PROBE_COMM="split")
    assert r.returncode == 0, r.stderr
    lines = _lines(r.stdout)
    assert len(lines) == 4
    # Ranks 0, 2 of the world are one job, 1, 3 another; each sums its own ranks 1 + 2.
    assert sorted(o["rank"] for o in lines) == [0, 0, 1, 1]
    for o in lines:
        assert o["size"] == 2 and o["sum"] == [3.0] * 4


def test_init_with_a_list_of_ranks():
    _mpi4py_or_skip()
    r = _openmpi(3, PROBE_COMM="ranks")
    assert r.returncode == 0, r.stderr
    lines = _lines(r.stdout)
    members = [o for o in lines if o.get("member", True)]
    assert len(lines) == 3 and len(members) == 2
    _check_job(members, 2)


def test_init_with_a_bad_comm_is_named():
    _mpi4py_or_skip()
    code = ("import hvd\n"
            "try:\n    hvd.init(comm=[5])\nexcept hvd.InvalidArgumentError as e:\n    print(e)\n"
            "try:\n    hvd.init(comm='world')\nexcept hvd.InvalidArgumentError as e:\n    print(e)\n")
    r = _run([OPENMPI, "--allow-run-as-root", "-np", "1", PYTHON, "-c", code])
    assert "comm=[5] must list ranks of MPI_COMM_WORLD, 0..0" in r.stdout, r.stdout + r.stderr
    assert "comm must be an mpi4py communicator or a list of ranks, got str" in r.stdout
