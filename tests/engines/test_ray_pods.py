"""hvd.ray across real addresses: a Ray cluster whose head and two worker nodes each run
in a pod (pods.py: a network namespace of its own, 10.232.0.x), started with `ray start`
as on real machines. The driver runs on the head: its store must be reached at the
head's address, and each node's workers bind their own. Then one node's processes are
all killed (the node lost), and the driver names the dead rank."""
import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import time

import pytest

import engines_util
import pods as pods_mod

pytestmark = pytest.mark.slow

DRIVER = r'''
import json, os, sys, time
import numpy as np
import ray
import hvd.ray

def where():
    import hvd.numpy as hvd, socket
    hvd.init()
    total = hvd.allreduce(np.full(2, hvd.rank() + 1.0), op=hvd.Sum)
    return dict(rank=hvd.rank(), local_size=hvd.local_size(), host=socket.gethostname(),
                gloo=os.environ["HVD_GLOO_HOSTNAME"], store=os.environ["HVD_STORE_ADDR"],
                sum=total.tolist())

def train():
    import hvd.numpy as hvd
    for step in range(600):
        hvd.allreduce(np.ones(2), op=hvd.Sum, name="step%d" % step)
        time.sleep(0.1)

ray.init(address=os.environ["RAY_ADDRESS"])
executor = hvd.ray.RayExecutor(hvd.ray.RayExecutor.create_settings(timeout_s=60), num_workers=4)
executor.start()
print("RESULT " + json.dumps(executor.run(where)), flush=True)
try:
    executor.run(train)
    print("RESULT null", flush=True)
except RuntimeError as e:
    print("RESULT " + json.dumps(dict(error=str(e), failures=e.failures)), flush=True)
executor.shutdown()
'''


def _python():
    import sys
    return sys.executable


def _result(lines):
    """The next "RESULT <json>" line of the driver's; None at the end."""
    for line in lines:
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    return None


def test_ray_cluster_of_three_pods():
    pytest.importorskip("ray", reason="Ray is not installed (.ci/requirements/engines.txt)")
    why = pods_mod.usable()
    if why:
        pytest.skip(why)
    names = ["rayhead", "raynode1", "raynode2"]
    # A cluster across addresses (test_ray.py, in the same process, turns that off).
    env = engines_util.worker_env({"RAY_USAGE_STATS_ENABLED": "0", "HVD_TIMEOUT": "20",
                                   "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "1"})
    ray_cmd = os.path.join(os.path.dirname(_python()), "ray")
    # Ray's socket paths must stay short (108 bytes): not under pytest's tmp_path.
    tmp = tempfile.mkdtemp(prefix="hvdrp-")
    with contextlib.ExitStack() as cleanup:
        cleanup.callback(shutil.rmtree, tmp, ignore_errors=True)
        pods = cleanup.enter_context(pods_mod.Pods(names))
        head = "%s:6379" % pods.addr["rayhead"]
        listening = [_python(), "-c", "import socket, sys; socket.create_connection("
                     "(sys.argv[1], 6379), timeout=2)", pods.addr["rayhead"]]
        # Every node's Ray files at one path, each pod's own folder mounted there, as
        # on separate machines (worker nodes take the head's temporary folder).
        ray_tmp = os.path.join(tmp, "ray")
        env["RAY_TMPDIR"] = ray_tmp
        own = {n: {ray_tmp: os.path.join(tmp, n)} for n in names}
        os.makedirs(ray_tmp)
        for i, n in enumerate(names):
            os.makedirs(own[n][ray_tmp])
            log = open(os.path.join(tmp, "%s.log" % n), "w")
            if i == 0:
                cmd = [ray_cmd, "start", "--head", "--port", "6379", "--num-cpus", "0",
                       "--include-dashboard", "false"]
            else:
                cmd = [ray_cmd, "start", "--address", head, "--num-cpus", "2"]
            cmd += ["--node-ip-address", pods.addr[n], "--block"]
            pods.popen(n, cmd, env, mounts=own[n], stdout=log, stderr=subprocess.STDOUT)
            if i == 0:  # the workers join a head that listens
                engines_util.wait_until(
                    lambda: subprocess.run(pods.command("rayhead", listening), timeout=30,
                                           stderr=subprocess.DEVNULL).returncode == 0,
                    90, "the Ray head's port", poll_s=1)
        # The driver's placement group waits for the worker nodes (up to 100 s).
        driver = pods.popen("rayhead", [_python(), "-c", DRIVER], dict(env, RAY_ADDRESS=head),
                            mounts=own["rayhead"])
        first = _result(driver.stdout)
        assert first is not None, driver.stderr.read()[-3000:]
        time.sleep(3)  # training
        lost = subprocess.run(["ip", "netns", "pids", pods.ns["raynode2"]],
                              stdout=subprocess.PIPE, universal_newlines=True).stdout.split()
        for pid in lost:
            try:
                os.kill(int(pid), 9)
            except OSError:
                pass
        out, err = driver.communicate(timeout=120)
    for o in first:
        assert o["store"].startswith(pods.addr["rayhead"] + ":")
        assert o["gloo"] == pods.addr[o["host"]]
        assert o["local_size"] == 2 and o["sum"] == [10.0, 10.0]
    assert sorted(o["host"] for o in first) == ["raynode1"] * 2 + ["raynode2"] * 2
    second = _result(out.splitlines())
    assert second is not None and "error" in second, out + err[-3000:]
    lost_ranks = [o["rank"] for o in first if o["host"] == "raynode2"]
    assert any("rank %d (Ray actor " % r in second["error"] and "on node %s) died"
               % pods.addr["raynode2"] in second["error"] for r in lost_ranks), second["error"]
