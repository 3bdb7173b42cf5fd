"""Kubernetes, replayed (no cluster here): each pod is a network namespace (pods.py)
with its own host name, /dev/shm and an /etc/hosts standing in for the cluster's DNS,
and gets the environment and files its operator makes (examples/kubernetes/ has the
manifests). The ranks set no variable of dprun's.

- Kubeflow PyTorchJob (training-operator): one process per pod, MASTER_ADDR = the
  master's Service name, MASTER_PORT, WORLD_SIZE, RANK; no LOCAL_RANK.
- MPI Operator MPIJob: the launcher pod runs mpirun with the operator's
  OMPI_MCA_orte_default_hostfile=/etc/mpi/hostfile (its ConfigMap, mounted on the
  launcher only; "<job>-worker-<i>.<job>-worker.<ns>.svc slots=N" lines) and
  OMPI_MCA_plm_rsh_agent=/etc/mpi/kubexec.sh, which starts orted in a worker pod
  (here: into its namespace, as `kubectl exec` would)."""
import os
import shlex
import shutil
import time

import pytest

import engines_util
import pods as pods_mod

pytestmark = pytest.mark.slow

PYTHON = "/usr/bin/python3"
PROBE = os.path.join(engines_util.HERE, "programs", "probe.py")


@pytest.fixture(autouse=True)
def _need_pods():
    why = pods_mod.usable()
    if why:
        pytest.skip(why)


def _line(proc, timeout_s=90):
    out, err = proc.communicate(timeout=timeout_s)
    lines = engines_util.json_lines(out)
    return (lines[0] if lines else None), out + err, proc.returncode


def _pytorchjob_env(rank, world_size, extra=None):
    """What the training operator gives each replica's container."""
    env = engines_util.worker_env({"HVD_TIMEOUT": "20", "HVD_STORE_SECRET": "from-a-k8s-secret"})
    env.update(MASTER_ADDR="mnist-master-0", MASTER_PORT="23456", WORLD_SIZE=str(world_size),
               RANK=str(rank), PYTHONUNBUFFERED="0")
    env.update(extra or {})
    for k in ("LOCAL_RANK", "HVD_RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "PMI_RANK"):
        env.pop(k, None)
    return env


PYTORCHJOB_PODS = ["mnist-master-0", "mnist-worker-0", "mnist-worker-1"]


def test_pytorchjob_three_pods():
    with pods_mod.Pods(PYTORCHJOB_PODS) as pods:
        procs = [pods.popen(p, [PYTHON, PROBE], _pytorchjob_env(r, 3))
                 for r, p in enumerate(PYTORCHJOB_PODS)]
        results = [_line(p) for p in procs]
    for r, (line, text, code) in enumerate(results):
        assert code == 0 and line is not None, text
        assert (line["rank"], line["size"]) == (r, 3)
        assert (line["local_rank"], line["local_size"]) == (0, 1)
        assert (line["cross_rank"], line["cross_size"]) == (r, 3)
        assert line["host"] == PYTORCHJOB_PODS[r]
        assert line["sum"] == [6.0] * 4


def test_pytorchjob_killed_pod_is_named():
    with pods_mod.Pods(PYTORCHJOB_PODS) as pods:
        t = time.monotonic()
        procs = [pods.popen(p, [PYTHON, PROBE], _pytorchjob_env(r, 3, {"PROBE_KILL": "2"}))
                 for r, p in enumerate(PYTORCHJOB_PODS)]
        results = [_line(p) for p in procs]
    assert time.monotonic() - t < 60
    for r in (0, 1):
        line, text, code = results[r]
        assert code == 1 and "rank 2" in line["error"], text


def test_pytorchjob_without_master_addr_is_one_line():
    with pods_mod.Pods(PYTORCHJOB_PODS[:2]) as pods:
        env = _pytorchjob_env(1, 2)
        del env["MASTER_ADDR"]
        _, text, code = _line(pods.popen(PYTORCHJOB_PODS[1], [PYTHON, PROBE], env))
    assert code != 0
    assert "PyTorchJob launch across nodes: set MASTER_ADDR to rank 0's node" in text, text


# ---- MPIJob.

JOB = "mpijob"
WORKERS = ["%s-worker-%d" % (JOB, i) for i in range(2)]
FQDN = {w: "%s.%s-worker.default.svc" % (w, JOB) for w in WORKERS}


def _mpi_config(tmp_path, pods, workers_see_it):
    """The operator's ConfigMap (hostfile, discover_hosts.sh, kubexec.sh), mounted at
    /etc/mpi. orted checks that plm_rsh_agent exists on the workers too, so with
    kubexec.sh the workers mount it as well (workers_see_it); otherwise they get only
    kubexec.sh, as with v2beta1, whose agent is ssh and whose hostfile is the
    launcher's alone."""
    config = tmp_path / "etc-mpi"
    config.mkdir()
    empty = tmp_path / "agent-only"
    empty.mkdir()
    (config / "hostfile").write_text("".join("%s slots=2\n" % FQDN[w] for w in WORKERS))
    (config / "discover_hosts.sh").write_text(
        "#!/bin/sh\n" + "".join("echo %s:2\n" % FQDN[w] for w in WORKERS))
    seen = {"/etc/mpi": str(config if workers_see_it else empty)}
    cases = "".join('  %s|%s) exec %s /bin/sh -c "$*" ;;\n' % (
        FQDN[w], w, shlex.join(pods.command(w, [], mounts=seen))) for w in WORKERS)
    (config / "kubexec.sh").write_text(
        "#!/bin/sh\n# kubectl exec $POD -- /bin/sh -c \"$*\", into the pod's namespace\n"
        "POD=$1\nshift\ncase $POD in\n%s  *) echo \"kubexec: no pod $POD\" >&2; exit 1 ;;\nesac\n" % cases)
    for f in ("discover_hosts.sh", "kubexec.sh"):
        os.chmod(config / f, 0o755)
    shutil.copy(config / "kubexec.sh", empty / "kubexec.sh")
    return str(config)


def _mpijob(tmp_path, extra_args=(), workers_see_it=False):
    """Runs the MPIJob's launcher command; returns its rank lines, output, exit code."""
    names = ["%s-launcher" % JOB] + WORKERS
    with pods_mod.Pods(names, aliases={w: [FQDN[w]] for w in WORKERS}) as pods:
        config = _mpi_config(tmp_path, pods, workers_see_it)
        env = engines_util.worker_env({
            "HVD_TIMEOUT": "20", "HVD_STORE_SECRET": "from-a-k8s-secret",
            "OMPI_MCA_plm_rsh_agent": "/etc/mpi/kubexec.sh",
            "OMPI_MCA_orte_default_hostfile": "/etc/mpi/hostfile",
            "OMPI_MCA_orte_keep_fqdn_hostnames": "true",
            "OMPI_MCA_oob_tcp_if_include": "eth0"})
        cmd = ["mpirun.openmpi", "--allow-run-as-root", "-np", "4", "--bind-to", "none",
               "-x", "PYTHONPATH", "-x", "HVD_LIBRARY", "-x", "HVD_TIMEOUT", "-x", "HVD_STORE_SECRET"]
        cmd += list(extra_args) + [PYTHON, PROBE]
        proc = pods.popen(names[0], cmd, env, mounts={"/etc/mpi": config})
        out, err = proc.communicate(timeout=150)
    return engines_util.json_lines(out), out + err, proc.returncode


def _check_mpijob(lines, text):
    assert sorted(o["rank"] for o in lines) == [0, 1, 2, 3], text
    for o in lines:
        assert o["size"] == 4 and o["local_size"] == 2 and o["cross_size"] == 2
        assert o["host"] == WORKERS[o["rank"] // 2], o
        assert o["sum"] == [10.0] * 4


def test_mpijob_with_master_addr(tmp_path):
    engines_util.which_or_skip(pytest, "mpirun.openmpi")
    lines, text, code = _mpijob(tmp_path, ["-x", "MASTER_ADDR=" + FQDN[WORKERS[0]],
                                           "-x", "MASTER_PORT=29500"])
    assert code == 0, text
    _check_mpijob(lines, text)


def test_mpijob_reads_rank_0s_host_from_the_hostfile(tmp_path):
    engines_util.which_or_skip(pytest, "mpirun.openmpi")
    lines, text, code = _mpijob(tmp_path, workers_see_it=True)
    assert code == 0, text
    _check_mpijob(lines, text)


def test_mpijob_without_master_addr_is_one_line(tmp_path):
    # The workers cannot read the launcher's hostfile: one line says what to set.
    engines_util.which_or_skip(pytest, "mpirun.openmpi")
    lines, text, code = _mpijob(tmp_path)
    assert code != 0
    assert ("Open MPI launch across nodes: set MASTER_ADDR to rank 0's node" in text and
            "OMPI_MCA_orte_default_hostfile=/etc/mpi/hostfile is not readable here" in text), text
