"""Pods for the Kubernetes replays: each pod is a network namespace of its own
(hvdk<pid>-<i>, 10.232.0.<i+1>/24 on eth0, linked through a bridge in pod 0), and a
command run "in a pod" also gets that pod's host name (its own UTS namespace), its
own /dev/shm (a tmpfs), and an /etc/hosts that resolves every pod's name, as the
cluster's DNS would. Nothing leaves the namespaces. stop() kills what runs in them
and deletes them.

    with Pods(["job-master-0", "job-worker-0"]) as pods:
        pods.popen("job-worker-0", ["python3", "train.py"], env={...})
"""
import os
import shutil
import subprocess
import tempfile

SUBNET = "10.232.0"


def usable():
    """None if pods can be made here, else why not (one line)."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    for tool in ("ip", "nsenter", "unshare", "mount"):
        if shutil.which(tool) is None:
            return "%s is not installed" % tool
    r = subprocess.run(["ip", "netns", "list"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       universal_newlines=True)
    if r.returncode != 0:
        return "ip netns does not work here: %s" % r.stderr.strip()
    return None


class Pods:
    def __init__(self, names, aliases=None):
        """names: the pods' host names; aliases: {pod name: [more names]} (a Service's
        DNS names, say)."""
        self.names = list(names)
        self.ns = {n: "hvdk%d-%d" % (os.getpid(), i) for i, n in enumerate(self.names)}
        self.addr = {n: "%s.%d" % (SUBNET, i + 1) for i, n in enumerate(self.names)}
        self.dir = tempfile.mkdtemp(prefix="hvd-pods-")
        self.hosts = os.path.join(self.dir, "hosts")
        with open(self.hosts, "w") as f:
            f.write("127.0.0.1 localhost\n")
            for n in self.names:
                f.write("%s %s %s\n" % (self.addr[n], n, " ".join((aliases or {}).get(n, []))))
        self.procs = []

    def __enter__(self):
        try:
            self._create()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc):
        self.stop()

    def _sh(self, cmd):
        subprocess.run(cmd, shell=True, check=True, timeout=30, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE)

    def _create(self):
        first = self.ns[self.names[0]]
        for i, n in enumerate(self.names):
            ns = self.ns[n]
            self._sh("ip netns add %s && ip -n %s link set lo up" % (ns, ns))
            if i == 0:
                self._sh("ip -n {0} link add eth0 type bridge && ip -n {0} addr add {1}/24 dev eth0 "
                         "&& ip -n {0} link set eth0 up".format(ns, self.addr[n]))
            else:
                peer = "p%d" % i
                self._sh("ip link add {p} netns {a} type veth peer name eth0 netns {b} && "
                         "ip -n {a} link set {p} master eth0 && ip -n {a} link set {p} up && "
                         "ip -n {b} addr add {addr}/24 dev eth0 && ip -n {b} link set eth0 up"
                         .format(p=peer, a=first, b=ns, addr=self.addr[n]))

    def command(self, pod, argv, mounts=None):
        """argv run in `pod`: its namespace, host name, /dev/shm and /etc/hosts;
        mounts: {path in the pod: path here} bind-mounted (a ConfigMap's volume)."""
        binds = "".join("mkdir -p %s && mount --bind %s %s && " % (dst, src, dst)
                        for dst, src in (mounts or {}).items())
        setup = ("mount -t tmpfs -o size=256m pod-shm /dev/shm && mount --bind %s /etc/hosts && "
                 "%shostname %s && exec \"$@\"" % (self.hosts, binds, pod))
        # nsenter, not ip netns exec, which mounts a /sys of its own without the cgroup
        # file systems (slurmd wants them); unshare -m makes the mounts the pod's alone.
        return (["nsenter", "--net=/var/run/netns/" + self.ns[pod], "unshare", "-m", "-u",
                 "sh", "-c", setup, "sh"] + list(argv))

    def popen(self, pod, argv, env, mounts=None, **kwargs):
        """Starts argv in `pod`; its output is piped unless kwargs say otherwise."""
        kwargs.setdefault("stdout", subprocess.PIPE)
        kwargs.setdefault("stderr", subprocess.PIPE)
        p = subprocess.Popen(self.command(pod, argv, mounts), env=env, universal_newlines=True,
                             **kwargs)
        self.procs.append(p)
        return p

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait(10)
        for ns in self.ns.values():
            pids = subprocess.run(["ip", "netns", "pids", ns], stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, universal_newlines=True).stdout.split()
            for pid in pids:
                try:
                    os.kill(int(pid), 9)
                except OSError:
                    pass
            subprocess.run(["ip", "netns", "del", ns], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
        shutil.rmtree(self.dir, ignore_errors=True)
