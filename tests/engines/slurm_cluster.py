"""A Slurm cluster of its own, for a test: munged, slurmctld and slurmd (Debian's
slurm-wlm and munge) started as root from a private folder, with their own munge
socket and key, ports and state, so nothing of the machine's is used or touched.

- SlurmCluster(): one node, "hvdnode" at 127.0.0.1 with 4 CPUs (config_overrides:
  Slurm takes the count from the config, so 4 tasks fit on a 2-core machine).
- SlurmCluster(pods=Pods(["ctl", "node1", "node2"])): slurmctld in the first pod and
  one slurmd in each other pod (pods.py: a network namespace, host name, /dev/shm),
  2 CPUs each; run() runs the client commands (srun, sbatch) in the first pod.
Every daemon is ended on stop(), on every exit path of the `with`.

    with SlurmCluster() as slurm:
        slurm.run(["srun", "-n", "4", "python3", "train.py"], timeout_s=60)
"""
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

NODE = "hvdnode"
CPUS = 4


def _free_ports(n):
    """n distinct ports free now (held together while chosen, so never the same twice)."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def installed():
    """None if Slurm and munge can run here, else why not (one line)."""
    for p in ("slurmctld", "slurmd", "srun", "sbatch", "munged", "mungekey"):
        if shutil.which(p) is None and not os.path.exists("/usr/sbin/" + p):
            return "%s is not installed (.ci/install installs slurm-wlm and munge)" % p
    if os.geteuid() != 0:
        return "the Slurm daemons are started as root, and this is uid %d" % os.geteuid()
    return None


def _sbin(name):
    return shutil.which(name) or "/usr/sbin/" + name


class SlurmCluster:
    def __init__(self, pods=None):
        self.pods = pods
        self.dir = tempfile.mkdtemp(prefix="hvd-slurm-")
        self.procs = []
        self.conf = os.path.join(self.dir, "slurm.conf")
        self.env = dict(os.environ, SLURM_CONF=self.conf)

    def __enter__(self):
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc):
        self.stop()

    def _path(self, name):
        return os.path.join(self.dir, name)

    def _start(self):
        d = self.dir
        os.makedirs(self._path("state"))
        subprocess.run([_sbin("mungekey"), "-c", "-f", "-k", self._path("munge.key")], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=30)
        os.chmod(self._path("munge.key"), 0o400)
        socket_path = self._path("munge.socket")
        self._daemon([_sbin("munged"), "-F", "--force", "--socket=" + socket_path,
                      "--key-file=" + self._path("munge.key"), "--pid-file=" + self._path("munged.pid"),
                      "--log-file=" + self._path("munged.log"), "--seed-file=" + self._path("munge.seed")])
        _wait(lambda: os.path.exists(socket_path), 20, "munged's socket")
        ctld_port, slurmd_port = _free_ports(2)
        if self.pods is None:
            ctl, ctl_addr = socket.gethostname().split(".")[0], "127.0.0.1"
            nodes = ["NodeName=%s NodeAddr=127.0.0.1 NodeHostname=%s CPUs=%d State=UNKNOWN"
                     % (NODE, socket.gethostname(), CPUS)]
            names = [NODE]
        else:
            ctl, names = self.pods.names[0], self.pods.names[1:]
            ctl_addr = self.pods.addr[ctl]
            nodes = ["NodeName=%s NodeAddr=%s NodeHostname=%s CPUs=2 State=UNKNOWN"
                     % (n, self.pods.addr[n], n) for n in names]
        with open(self.conf, "w") as f:
            f.write("\n".join([
                "ClusterName=hvdtest",
                "SlurmctldHost=%s(%s)" % (ctl, ctl_addr),
                "MailProg=/bin/true",
                "SlurmctldPort=%d" % ctld_port, "SlurmdPort=%d" % slurmd_port,
                "SlurmUser=root", "SlurmdUser=root",
                "AuthType=auth/munge", "CredType=cred/munge",
                "AuthInfo=socket=%s" % socket_path,
                "StateSaveLocation=%s/state" % d, "SlurmdSpoolDir=%s/spool-%%n" % d,
                "SlurmctldPidFile=%s/slurmctld.pid" % d, "SlurmdPidFile=%s/slurmd-%%n.pid" % d,
                "SlurmctldLogFile=%s/slurmctld.log" % d, "SlurmdLogFile=%s/slurmd.log" % d,
                "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none",
                "MpiDefault=none", "SchedulerType=sched/builtin",
                "SelectType=select/cons_tres", "SelectTypeParameters=CR_CPU",
                "SlurmdParameters=config_overrides", "ReturnToService=2",
                "JobAcctGatherType=jobacct_gather/none",
                "AccountingStorageType=accounting_storage/none",
                "KillWait=5", "MessageTimeout=20", "InactiveLimit=0",
            ] + nodes + [
                "PartitionName=debug Nodes=%s Default=YES MaxTime=INFINITE State=UP" % ",".join(names),
            ]) + "\n")
        self._daemon([_sbin("slurmctld"), "-D", "-i", "-f", self.conf], ctl if self.pods else None)
        for n in names:
            self._daemon([_sbin("slurmd"), "-D", "-N", n, "-f", self.conf], n if self.pods else None)
        _wait(lambda: self._nodes_idle(len(names)), 60,
              "slurmd's node(s) to be idle (see %s/slurmd.log)" % d)

    def _daemon(self, cmd, pod=None):
        name = os.path.basename(cmd[0])
        log = open(os.path.join(self.dir, name + ".out"), "a")
        if pod is not None:
            cmd = self.pods.command(pod, cmd)
        proc = subprocess.Popen(cmd, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        proc.hvd_name = name
        self.procs.append(proc)

    def _nodes_idle(self, count):
        for p in self.procs:
            if p.poll() is not None:
                raise RuntimeError("%s exited with code %d: %s" % (
                    p.hvd_name, p.returncode, " | ".join(
                        self._tail(p.hvd_name + ".log") + self._tail(p.hvd_name + ".out"))))
        r = self.run(["sinfo", "-h", "-N", "-o", "%t"], 20)
        return r.stdout.split() == ["idle"] * count

    def _tail(self, name, lines=6):
        try:
            with open(self._path(name), errors="replace") as f:
                return [l.strip() for l in f.readlines()[-lines:]]
        except OSError:
            return []

    def run(self, cmd, timeout_s, env=None, **kwargs):
        """Runs a Slurm client command (srun, sbatch, ...) against this cluster."""
        e = dict(self.env)
        e.update(env or {})
        if self.pods is not None:
            cmd = self.pods.command(self.pods.names[0], cmd)
        return subprocess.run(cmd, env=e, timeout=timeout_s, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, universal_newlines=True, **kwargs)

    def stop(self):
        # slurmd first (it ends its steps' tasks), then slurmctld, then munged.
        for p in reversed(self.procs):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
                try:
                    p.wait(15)
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait(10)
        self.procs = []
        shutil.rmtree(self.dir, ignore_errors=True)


def _wait(predicate, timeout_s, what):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise RuntimeError("waited %d s for %s" % (timeout_s, what))
