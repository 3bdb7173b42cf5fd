#!/usr/bin/env python3
"""A model of one dprun step at N ranks, fitted to bench/scaling_bench.sh's runs.

    bench/scaling_model.py --csv scaling.csv [--machine scaling_machine.txt]
        [--multihost mh4/multihost.md ...] [--alpha-us 50] [--plot scaling.png]

Prints markdown (docs/scaling.md quotes it): the fitted constants, measured beside
predicted for every point that was run (local ranks, and netns hosts from
bench/multihost_bench.sh), the predictions at 256 to 4,096 ranks, and the targets.
Each point is the median of the sweep's rounds. docs/scaling.md, "The model",
explains each term; in short:

  Per-rank CPU per step (from getrusage, summed over the ranks: CPU time, so it does
  not depend on how many ranks share a core):
      w(N) = a + b log2(N)
  a: the per-tensor and per-byte work (enqueue, copies, reduction, completion), which
  does not depend on N; b: what each doubling of the ranks adds to a rank, the
  messages of the word all-reduce and of halving-doubling (one and two more a
  doubling) and the caches the ranks share. Fitted per path and workload.

  This machine, N ranks on its cores:
      T(N) = max(w(N) + H(N) h, N w(N) / P_eff)
  The work of N ranks shares the cores; P_eff is the cores the job actually got
  (fitted once per path; other engineers' jobs share the VM), the one term for
  oversubscription. Below that, with the cores to spare, a step is a rank's own
  work plus its hand-offs: H(N) of them (shared memory: 3 per 1 MiB round of the
  buffer and the word all-reduce's; Gloo: the messages of the chosen all-reduce),
  h each (a wake-up of the peer and the bytes it waits for; fitted per path and
  workload at 2 and 4 ranks).

  A cluster, a rank per core, links of bandwidth B and one-way latency alpha:
      T(N) = T_neg(N) + T_data(N)
      T_neg(N)  = R(N) (alpha + c)                    tree cycle (this change),
                  R(N) = log2 p (+2 when N is not a power of two, p <= N)
                = 2 (alpha + c) + 2 (N - 1) c         the gather at rank 0 (before)
      T_data(N) = steps(N) (alpha + c) + [2 (N - 1) / N S / B (+ 2 S / B to fold)] / eta
                  steps(N) = 2 log2 p (+2) halving-doubling, 2 (N - 1) ring, as
                  runtime/transport/allreduce_algorithm.h chooses
  c (the cost of a message beyond the link's latency) and eta (the share of the
  link's rate the data gets) are fitted to the netns hosts at 1 Gbit/s, where the
  link binds; c then holds the netns link's own latency and this VM's wake-ups
  too: an upper bound. On the netns hosts at 10 Gbit/s the hosts share this VM's
  cores, so there T = max(T(N), N w_gloo(N) / P_eff).
"""
import argparse
import csv
import math
import re
import statistics
import sys
from collections import defaultdict

MODES = {"tree": "tree, among peers", "alone": "tree, alone", "gather": "gather, alone"}
SMALL = "1000x4KiB"
RESNET = "resnet50"
BYTES = {SMALL: 4096000, RESNET: 102228128}


def core(n):
    p = 1
    while p * 2 <= n:
        p *= 2
    return p


def tree_rounds(n):
    """Messages a rank sends in a word all-reduce by recursive doubling."""
    if n <= 1:
        return 0
    return int(math.log2(core(n))) + (2 if core(n) < n else 0)


def halving_steps(n):
    if n <= 1:
        return 0
    return 2 * int(math.log2(core(n))) + (2 if core(n) < n else 0)


def data_steps(n, nbytes, per_step=64 << 10):
    """(steps, folds) under runtime/transport/allreduce_algorithm.h's rule."""
    if n <= 1:
        return 0, False
    ring = 2 * (n - 1)
    saved = ring - halving_steps(n)
    weight = 2 if core(n) < n else 1
    if saved > 0 and nbytes <= saved * per_step // weight:
        return halving_steps(n), core(n) < n
    return ring, False


def lstsq(rows, ys):
    """Least squares for a few columns, by the normal equations (no numpy)."""
    k = len(rows[0])
    a = [[sum(r[i] * r[j] for r in rows) for j in range(k)] for i in range(k)]
    b = [sum(r[i] * y for r, y in zip(rows, ys)) for i in range(k)]
    for i in range(k):
        piv = max(range(i, k), key=lambda r: abs(a[r][i]))
        a[i], a[piv] = a[piv], a[i]
        b[i], b[piv] = b[piv], b[i]
        if abs(a[i][i]) < 1e-300:
            continue
        for r in range(k):
            if r != i:
                f = a[r][i] / a[i][i]
                a[r] = [x - f * y for x, y in zip(a[r], a[i])]
                b[r] -= f * b[i]
    return [b[i] / a[i][i] if abs(a[i][i]) > 1e-300 else 0.0 for i in range(k)]


def load(path):
    """(ranks, ops) -> {(workload, metric): median over the rounds}."""
    raw = defaultdict(lambda: defaultdict(list))
    with open(path) as f:
        for row in csv.DictReader(f):
            raw[(int(row["ranks"]), row["ops"])][(row["workload"], row["metric"])].append(
                float(row["value"]))
    return {k: {m: statistics.median(v) for m, v in d.items()} for k, d in raw.items()}


def path_of(ops):
    return "gloo" if ops.startswith("gloo") else "shm"


def mode_of(ops):
    """"tree" (dprun among the other peers), "alone" or "gather" (dprun alone, with
    and without the tree cycle)."""
    for mode in ("alone", "gather"):
        if ops.endswith(" " + mode):
            return mode
    return "tree"


def parse_multihost(paths):
    """(hosts, rate_bits, workload, dprun_ms, gloo_fused_ms) from multihost_bench.sh."""
    out = []
    for p in paths:
        text = open(p).read()
        m = re.search(r"across (\d+) hosts", text)
        if not m:
            continue
        hosts = int(m.group(1))
        for line in text.splitlines():
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) < 7 or not re.match(r"[\d.]+[gm]bit$", cells[0]):
                continue
            bits = float(re.match(r"[\d.]+", cells[0]).group()) * (1e9 if "gbit" in cells[0] else 1e6)
            wl = {"resnet50": RESNET, "small": SMALL}.get(cells[1], cells[1])
            try:
                out.append((hosts, bits, wl, float(cells[3]), float(cells[5])))
            except ValueError:
                pass
    return out


def handoffs(path, n, nbytes):
    """H(N): the waits on a peer in one step."""
    if path == "shm":
        return 3 * math.ceil(nbytes / (1 << 20)) + tree_rounds(n) + 1
    steps, _ = data_steps(n, nbytes)
    if steps == 2 * (n - 1):  # the ring: segments of each block (ring_schedule.h)
        block = nbytes / n
        seg = 4 << 20 if block <= 8 << 20 else 1 << 20
        steps *= max(1, math.ceil(block / seg))
    return steps + tree_rounds(n)


class LocalModel:
    def __init__(self, data):
        self.data = data
        self.w = {}      # (path, workload, mode) -> (a, b), ms
        self.peff = {}   # path -> cores
        self.h = {}      # path -> ms per hand-off

    def points(self, path, wl, mode):
        """(n, per-rank CPU ms, step ms, ops) of every run of the key."""
        pts = []
        for (n, ops), m in sorted(self.data.items()):
            if path_of(ops) != path or mode_of(ops) != mode:
                continue
            cpu, step = m.get((wl, "job_cpu_ms_per_step")), m.get((wl, "step_ms:dprun"))
            if cpu is not None and step is not None:
                pts.append((n, cpu / n, step, ops))
        return pts

    def fit(self):
        for path in ("shm", "gloo"):
            for wl in (SMALL, RESNET):
                for mode in ("tree", "alone", "gather"):
                    pts = self.points(path, wl, mode)
                    if len(pts) >= 2:
                        self.w[(path, wl, mode)] = lstsq(
                            [[1.0, math.log2(n)] for n, _, _, _ in pts], [w for _, w, _, _ in pts])
            # 1 / P_eff: the slope of T against the ranks' work N w(N), from 8 ranks up.
            rows, ys = [], []
            for key in self.w:
                if key[0] == path:
                    for n, _, step, _ in self.points(*key):
                        if n >= 8:
                            rows.append([n * self.cpu(key, n)])
                            ys.append(step)
            if rows:
                self.peff[path] = 1 / lstsq(rows, ys)[0]
            # h: what a step at 2 and 4 ranks takes beyond a rank's work, per hand-off
            # (the runs there are all "tree": the other modes start at 8 ranks).
            for wl in (SMALL, RESNET):
                hs = [(step - self.cpu(key, n)) / handoffs(path, n, BYTES[wl])
                      for key in self.w if key[0] == path and key[1] == wl
                      for n, _, step, _ in self.points(*key) if n <= 4]
                self.h[(path, wl)] = max(statistics.median(hs), 0.0) if hs else 0.0

    def cpu(self, key, n):
        a, b = self.w[key]
        return a + b * math.log2(n)

    def step(self, key, n):
        w = self.cpu(key, n)
        return max(w + handoffs(key[0], n, BYTES[key[1]]) * self.h.get(key[:2], 0.0),
                   n * w / self.peff[key[0]])


class ClusterModel:
    """T(N) = T_neg(N) + steps(N) (alpha + c) + wire(N) / eta, fitted to netns hosts."""

    def __init__(self, multihost, alpha_ms):
        self.alpha = alpha_ms
        self.c = 0.05   # ms per message, until fitted
        self.eta = 1.0  # the share of the link's rate the data moves at
        self.fitted = 0
        pts = [(h, bits, wl, ms) for h, bits, wl, ms, _ in multihost if bits <= 1e9]
        if len(pts) >= 3:
            # At 1 Gbit/s the link binds: T = messages * c + wire / eta.
            rows, ys = [], []
            for h, bits, wl, ms in pts:
                steps, fold = data_steps(h, BYTES[wl])
                rows.append([tree_rounds(h) + steps, self.wire(h, BYTES[wl], bits, fold)])
                ys.append(ms)
            c, inv_eta = lstsq(rows, ys)
            self.c, self.eta, self.fitted = max(c, 0.0), 1 / inv_eta, len(pts)

    @staticmethod
    def wire(n, nbytes, bits, fold):
        t = 2 * (n - 1) / n * nbytes * 8 / bits * 1e3
        return t + (2 * nbytes * 8 / bits * 1e3 if fold else 0)

    def step(self, n, wl, bits, alpha=None, gather=False):
        """(T, T_neg) in ms."""
        lam = (self.alpha if alpha is None else alpha) + self.c
        neg = 2 * lam + 2 * (n - 1) * self.c if gather else tree_rounds(n) * lam
        steps, fold = data_steps(n, BYTES[wl])
        return neg + steps * lam + self.wire(n, BYTES[wl], bits, fold) / self.eta, neg


def fmt(x):
    if x is None or x != x:
        return "-"
    for limit, f in ((100, "%.0f"), (10, "%.1f"), (0, "%.2f")):
        if abs(x) >= limit:
            return f % x
    return "%.2f" % x


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--csv", required=True)
    ap.add_argument("--machine")
    ap.add_argument("--multihost", action="append", default=[])
    ap.add_argument("--alpha-us", type=float, default=50.0)
    ap.add_argument("--cores", type=float, default=2.0)
    ap.add_argument("--plot")
    a = ap.parse_args()
    data = load(a.csv)
    local = LocalModel(data)
    local.fit()
    mh = parse_multihost(a.multihost)
    cl = ClusterModel(mh, a.alpha_us / 1e3)
    out = []
    p = out.append
    if a.machine:
        p("```\n" + open(a.machine).read().strip() + "\n```\n")
    p("#### Fitted constants\n")
    p("Per-rank CPU per step w(N) = a + b log2(N), ms (CPU time, every rank's, summed and divided by N):\n")
    p("| path | workload | negotiation | a | b |")
    p("|---|---|---|---:|---:|")
    for (path, wl, mode), (ca, cb) in sorted(local.w.items()):
        p("| %s | %s | %s | %.3f | %.3f |" % (path, wl, MODES[mode], ca, cb))
    p("")
    for path in sorted(local.peff):
        p("- %s: P_eff = %.2f of %g cores; h = %s ms per hand-off" % (
            path, local.peff[path], a.cores,
            ", ".join("%.3f (%s)" % (v, k[1]) for k, v in sorted(local.h.items()) if k[0] == path)))
    p("- cluster: c = %.3f ms per message, data at %.0f%% of the link (fitted to %d netns host "
      "points at 1 Gbit/s; c holds the netns link's latency and this VM's wake-ups too, an "
      "upper bound)" % (cl.c, 100 * cl.eta, cl.fitted))
    p("")

    p("#### This machine: measured and predicted (one host, 2 cores: oversubscribed beyond 2 ranks)\n")
    p("| path | workload | negotiation | ranks | measured ms | predicted ms | error | job CPU ms/step "
      "| rank 0 controller us/cycle | cycles/step | init s | shutdown s | dprun CPU ms/rank/s | dprun MB |")
    p("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    errors, plot = [], defaultdict(list)
    for key in sorted(local.w):
        for n, w, step, ops in local.points(*key):
            pred = local.step(key, n)
            errors.append((abs(pred / step - 1), key, n))
            m = data[(n, ops)]
            usage = data.get((n, ops.split(" (")[0] + ("" if key[2] == "tree" else " " + key[2])), {})
            g = lambda metric, wl="-", src=m: src.get((wl, metric))
            p("| %s | %s | %s | %d | %s | %s | %+.0f%% | %s | %s | %s | %s | %s | %s | %s |" % (
                key[0], key[1], MODES[key[2]], n, fmt(step), fmt(pred),
                100 * (pred / step - 1), fmt(w * n), fmt(g("controller_cpu_us_per_cycle", key[1])),
                fmt(g("cycles_per_step", key[1])), fmt(g("init_s")), fmt(g("shutdown_s")),
                fmt(g("dprun_cpu_ms_per_rank_s", src=usage)), fmt(g("dprun_maxrss_mb", src=usage))))
            plot[key].append((n, step, pred))
    worst = max(errors) if errors else (0, None, 0)
    p("\nLargest error: %.0f%% (%s at %d ranks).\n" % (100 * worst[0], worst[1], worst[2]))

    p("#### The tree cycle against the gather at rank 0 (dprun alone, back to back runs)\n")
    p("| path | ranks | step ms, tree | step ms, gather | tree / gather | rank 0 controller us/cycle, tree | gather | rank 0's Coordinate us/cycle, tree | gather |")
    p("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for (n, ops), m in sorted(data.items()):
        if mode_of(ops) != "alone":
            continue
        g = data.get((n, ops[:-len("alone")] + "gather"), {})
        t, gt = m.get((SMALL, "step_ms:dprun")), g.get((SMALL, "step_ms:dprun"))
        if t is None or gt is None:
            continue
        p("| %s | %d | %s | %s | %.2f | %s | %s | %s | %s |" % (
            path_of(ops), n, fmt(t), fmt(gt), t / gt,
            fmt(m.get((SMALL, "controller_cpu_us_per_cycle"))), fmt(g.get((SMALL, "controller_cpu_us_per_cycle"))),
            fmt(m.get((SMALL, "coordinate_cpu_us_per_cycle"))), fmt(g.get((SMALL, "coordinate_cpu_us_per_cycle")))))
    p("")
    p("#### The ring against halving-doubling (dprun's Gloo all-reduce, each forced, in one run)\n")
    p("| path of the run | workload | ranks | ring ms | halving-doubling ms | halving / ring | auto chooses |")
    p("|---|---|---:|---:|---:|---:|---|")
    for (n, ops), m in sorted(data.items()):
        if mode_of(ops) != "tree":
            continue
        for wl in (SMALL, RESNET):
            r, h = m.get((wl, "step_ms:ring")), m.get((wl, "step_ms:halving_doubling"))
            if r is None or h is None:
                continue
            steps, _ = data_steps(n, BYTES[wl])
            p("| %s | %s | %d | %s | %s | %.2f | %s |" % (
                path_of(ops), wl, n, fmt(r), fmt(h), h / r,
                "ring" if steps == 2 * (n - 1) and n > 2 else "halving-doubling" if n > 2 else "ring (2 ranks)"))
    p("")

    if mh:
        p("#### Netns hosts (bench/multihost_bench.sh, one rank per host): measured and predicted\n")
        p("| hosts | link | workload | measured ms | predicted ms | error | Gloo ring, one buffer, ms |")
        p("|---:|---|---|---:|---:|---:|---:|")
        for hosts, bits, wl, ms, fused in sorted(mh):
            pred, _ = cl.step(hosts, wl, bits, alpha=0.0)
            key = ("gloo", wl, "tree")
            if key in local.w and "gloo" in local.peff:  # the hosts share this VM's cores
                pred = max(pred, hosts * local.cpu(key, hosts) / local.peff["gloo"])
            errors.append((abs(pred / ms - 1), ("hosts", wl, bits), hosts))
            p("| %d | %g Gbit/s | %s | %s | %s | %+.0f%% | %s |" % (
                hosts, bits / 1e9, wl, fmt(ms), fmt(pred), 100 * (pred / ms - 1), fmt(fused)))
        p("")

    p("#### A cluster: predicted (a rank per core; alpha = %g us, c = %.3f ms)\n" % (a.alpha_us, cl.c))
    p("| ranks | link | workload | step ms | negotiation ms, tree | share | negotiation ms, gather (before) | share |")
    p("|---:|---|---|---:|---:|---:|---:|---:|")
    for n in (8, 64, 128, 256, 512, 1024, 2048, 4096):
        for bits in (1e9, 10e9):
            for wl in (RESNET, SMALL):
                t, neg = cl.step(n, wl, bits)
                tg, negg = cl.step(n, wl, bits, gather=True)
                p("| %d | %g Gbit/s | %s | %s | %s | %.1f%% | %s | %.1f%% |" % (
                    n, bits / 1e9, wl, fmt(t), fmt(neg), 100 * neg / t, fmt(negg), 100 * negg / tg))
    p("")

    p("#### Targets\n")
    # The ideal the model gives this machine: the 128 ranks' work (w(128), fitted)
    # sharing all its cores without loss. Against dprun alone where that was run.
    for mode, ops in (("alone", "default (shm) alone"), ("tree", "default (shm)")):
        key = ("shm", SMALL, mode)
        step128 = data.get((128, ops), {}).get((SMALL, "step_ms:dprun"))
        if key not in local.w or step128 is None:
            continue
        ideal = 128 * local.cpu(key, 128) / a.cores
        w2 = [w for n, w, _, _ in local.points("shm", SMALL, "tree") if n == 2]
        p("- 1000 x 4 KiB at 128 local ranks (%s): %s ms; the model's ideal for this machine, "
          "the 128 ranks' work (%.2f ms a rank) on all %g cores without loss, %s ms: %.2fx "
          "(target 2x)%s" % (
              MODES[mode], fmt(step128), local.cpu(key, 128), a.cores, fmt(ideal), step128 / ideal,
              "; at the 2-rank cost of a rank's work (%.2f ms, its buffers in cache), %s ms: %.1fx" % (
                  w2[0], fmt(128 * w2[0] / a.cores), step128 / (128 * w2[0] / a.cores)) if w2 else ""))
        break
    p("- largest prediction error over every measured point: %.0f%% (target 25%%)" % (
        100 * max(errors)[0] if errors else 0))
    t, neg = cl.step(4096, RESNET, 10e9)
    tg, negg = cl.step(4096, RESNET, 10e9, gather=True)
    p("- negotiation at 4,096 ranks, ResNet-50 at 10 Gbit/s: %s ms of a %s ms step, %.2f%% "
      "(target < 10%%; the gather before: %s ms, %.0f%%)" % (fmt(neg), fmt(t), 100 * neg / t,
                                                          fmt(negg), 100 * negg / tg))
    init = data.get((128, "default (shm)"), {}).get(("-", "init_s"))
    init_g = data.get((128, "gloo (gloo)"), {}).get(("-", "init_s"))
    p("- init of 128 local ranks: %s s over shared memory, %s s over Gloo (target < 5 s)" % (
        fmt(init), fmt(init_g)))
    print("\n".join(out))

    if a.plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(8.5, 5.5))
        for key, pts in sorted(plot.items()):
            pts.sort()
            label = "%s %s, %s" % (key[0], key[1], MODES[key[2]])
            line, = ax.plot([x for x, _, _ in pts], [y for _, y, _ in pts], "o",
                            label=label + ", measured")
            ax.plot([x for x, _, _ in pts], [z for _, _, z in pts], "-", color=line.get_color(),
                    label=label + ", model")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("ranks on one 2-core host (oversubscribed beyond 2)")
        ax.set_ylabel("ms per step (median)")
        ax.set_title("dprun: step time against ranks, measured (dots) and model (lines)")
        ax.legend(fontsize=6, ncol=2)
        ax.grid(True, which="both", alpha=0.3)
        fig.tight_layout()
        fig.savefig(a.plot, dpi=110)


if __name__ == "__main__":
    sys.exit(main())
