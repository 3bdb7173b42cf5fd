#!/usr/bin/env python3
"""Memory per rank and step time of data parallelism in hvd.torch: DistributedOptimizer
(replicated), ShardedOptimizer stage 1 and 2 (ZeRO-1/2), and FullyShardedDataParallel
with SHARD_GRAD_OP, FULL_SHARD (ZeRO-3) and HYBRID_SHARD; the overlap of FSDP's
collectives with compute, from the runtime's timeline; and training under a per-rank
memory cap that the replicated training state does not fit.

Under dprun, measures this job's size and prints one table:

    build/dprun -np 4 /usr/bin/python3 bench/sharded_memory.py

Started without dprun, it runs itself under `dprun -np N` for N = 1, 2, 4 (or
--sizes) and prints the combined table, then the timeline overlap at the largest N:

    /usr/bin/python3 bench/sharded_memory.py [--dprun build/dprun]

The memory-capped run (each configuration in its own `dprun -np 4` job, every rank
limited to --cap-mib MiB of data beyond what it had after hvd.init(), by
setrlimit(RLIMIT_DATA), so that going over is a real allocation failure):

    /usr/bin/python3 bench/sharded_memory.py --cap-mib 150 [--cap-ranks 4]

Capped-run columns: what each rank holds between steps and its peak during a step
(as in the table), and how much its data segment (what the cap limits) had grown
at the end, or when the allocation failed.

Table columns, per rank (the largest over ranks): the bytes held between steps of
parameters (full, or the shards), gradients and optimizer state, their total and
its ratio to DistributedOptimizer's at the same N; the peak during a step (the
held bytes plus what a step adds: the gradient staging buffers of stage 2, FSDP's
gathered units and flat gradients in reduce-scatters), the most FSDP units gathered
at once (prefetched ones included), the median ms per training step, and its ratio
to DistributedOptimizer's (configs run in interleaved rounds; the ratio is taken
within each round, then the median over rounds, so that load on a shared machine
weighs on both sides of it; the largest over ranks). Bytes are
counted from the tensors that exist (and, for FSDP's transient ones, its own
high-water marks), not from formulas.
"""
import argparse
import ctypes
import json
import os
import statistics
import subprocess
import sys
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(REPO, "bindings", "python"))

LAYERS = (256,) + (512,) * 6 + (10,)
BATCH = 32
ROUNDS, STEPS = 8, 2
CONFIGS = ("distributed", "sharded-1", "sharded-2", "fsdp-grad-op", "fsdp-full", "fsdp-hybrid")
CAP_CONFIGS = ("distributed", "sharded-2", "fsdp-full")


def fixed_mmap_threshold():
    """Large allocations always mmap'ed, so freed tensors leave the process (RSS and
    the RLIMIT_DATA count then follow the live tensors)."""
    try:
        ctypes.CDLL("libc.so.6").mallopt(-3, 1 << 16)  # M_MMAP_THRESHOLD
    except OSError:
        pass


def build(layers, meta=False):
    import torch
    torch.manual_seed(0)
    mods = []
    for a, b in zip(layers[:-1], layers[1:]):
        mods += [torch.nn.Linear(a, b, device="meta" if meta else None), torch.nn.ReLU()]
    return torch.nn.Sequential(*mods[:-1])


def tensor_bytes(ts):
    return sum(t.numel() * t.element_size() for t in ts if t is not None)


def state_bytes(opt):
    import torch
    return sum(v.numel() * v.element_size() for s in opt.state.values() for v in s.values()
               if torch.is_tensor(v))


class Config:
    """One configuration's model and optimizer, and its memory accounting."""

    def __init__(self, name, layers, hybrid=None, meta=False):
        import torch
        import hvd.torch as hvd
        self.name = name
        adam = dict(lr=1e-3)
        if name.startswith("fsdp"):
            strategy = {"fsdp-grad-op": hvd.ShardingStrategy.SHARD_GRAD_OP,
                        "fsdp-full": hvd.ShardingStrategy.FULL_SHARD,
                        "fsdp-hybrid": hvd.ShardingStrategy.HYBRID_SHARD}[name]
            ps = (hybrid.shard, hybrid.replicate) if name == "fsdp-hybrid" else \
                hvd.global_process_set
            self.model = hvd.FullyShardedDataParallel(
                build(layers, meta), process_set=ps, sharding_strategy=strategy,
                auto_wrap_policy={torch.nn.Linear}, sync_module_states=meta)
            self.opt = torch.optim.Adam(self.model.parameters(), **adam)
        else:
            self.model = build(layers)
            if name == "distributed":
                self.opt = hvd.DistributedOptimizer(torch.optim.Adam(self.model.parameters(),
                                                                     **adam),
                                                    named_parameters=self.model.named_parameters())
            else:
                self.opt = hvd.ShardedOptimizer(torch.optim.Adam, self.model.parameters(),
                                                stage=int(name[-1]), bucket_bytes=1 << 20,
                                                **adam)

    def step(self, x, y):
        import torch.nn.functional as F
        self.opt.zero_grad()
        F.cross_entropy(self.model(x), y).backward()
        self.opt.step()

    def reset_peaks(self):
        if self.name.startswith("fsdp"):
            self.model.reset_peak_stats()
        elif self.name == "sharded-2":
            self.opt.peak_staging_bytes = 0

    def memory(self):
        """(params, grads, state, peak during a step, peak units) bytes held now."""
        m, opt = self.model, self.opt
        state = state_bytes(opt)
        if self.name.startswith("fsdp"):
            params, grads = m.shard_bytes(), m.gradient_bytes()
            held = params + grads + state
            return params, grads, state, held + m.peak_unsharded_bytes, m.peak_units
        params = tensor_bytes(p.data for p in m.parameters())
        if self.name == "distributed":
            grads = tensor_bytes(p.grad for p in m.parameters())
            extra = 0
        else:
            grads = opt.gradient_bytes()
            extra = opt.peak_staging_bytes if self.name == "sharded-2" else 0
        return params, grads, state, params + grads + state + extra, 0


def data(n_in, n_out, rank):
    import torch
    g = torch.Generator().manual_seed(100 + rank)
    return torch.randn(BATCH, n_in, generator=g), torch.randint(0, n_out, (BATCH,), generator=g)


def measure(layers):
    import torch
    import hvd.torch as hvd
    hvd.init()
    torch.set_num_threads(1)
    n = hvd.size()
    names = [c for c in CONFIGS if c != "fsdp-hybrid" or (n >= 4 and n % 2 == 0)]
    hybrid = hvd.hybrid_process_sets(2) if "fsdp-hybrid" in names else None
    configs = [Config(c, layers, hybrid) for c in names]
    x, y = data(layers[0], layers[-1], hvd.rank())
    for c in configs:
        c.step(x, y)  # The first step allocates the state.
        c.reset_peaks()
    times = {c.name: [] for c in configs}   # [round][step] ms
    for _ in range(ROUNDS):
        for c in configs:
            times[c.name].append([])
            hvd.barrier()
            for _ in range(STEPS):
                t0 = time.perf_counter()
                c.step(x, y)
                times[c.name][-1].append(1000 * (time.perf_counter() - t0))
    # Per round, each config against DistributedOptimizer (run moments apart, so a
    # load burst on the machine weighs on both); the median over rounds.
    ref = [statistics.median(r) for r in times["distributed"]]
    ratio = {name: statistics.median(statistics.median(r) / d for r, d in zip(t, ref))
             for name, t in times.items()}
    rows = []
    for c in configs:
        params, grads, state, peak, units = c.memory()
        unit_max = max(c.model.unit_bytes().values()) if c.name.startswith("fsdp") else 0
        ms = statistics.median(t for r in times[c.name] for t in r)
        worst = hvd.allreduce(torch.tensor([params, grads, state, peak, units, unit_max,
                                            ms, ratio[c.name]], dtype=torch.float64),
                              op=hvd.Max, name="bench.%s" % c.name)
        rows.append({"size": n, "config": c.name, "params_numel": sum(
            a * b + b for a, b in zip(layers[:-1], layers[1:])),
            "params": int(worst[0]), "grads": int(worst[1]), "state": int(worst[2]),
            "peak": int(worst[3]), "units": int(worst[4]), "unit_max": int(worst[5]),
            "ms": float(worst[6]), "ratio": float(worst[7])})
    if hybrid is not None:
        hybrid.remove()
    hvd.shutdown()
    return rows


def print_table(rows, layers):
    held = {(r["size"], r["config"]): r["params"] + r["grads"] + r["state"] for r in rows}
    print("model %s (%d parameters, one FSDP unit per Linear), Adam, batch %d per rank"
          % ("-".join(map(str, layers)), rows[0]["params_numel"], BATCH))
    print("%2s %-13s %11s %11s %11s %11s %6s %11s %5s %8s %6s" % (
        "N", "config", "params B", "grads B", "optim B", "held B", "vs DO", "peak B",
        "units", "ms/step", "vs DO"))
    for r in rows:
        total = held[(r["size"], r["config"])]
        print("%2d %-13s %11d %11d %11d %11d %6.3f %11d %5s %8.1f %6.2f" % (
            r["size"], r["config"], r["params"], r["grads"], r["state"], total,
            total / held[(r["size"], "distributed")], r["peak"],
            r["units"] if r["config"].startswith("fsdp") else "-", r["ms"], r["ratio"]))
    fsdp = [r for r in rows if r["config"].startswith("fsdp") and r["unit_max"]]
    if fsdp:
        print("largest unit (gathered, float32): %d B" % fsdp[0]["unit_max"])


# ---- the timeline: overlap of FSDP's collectives with compute -----------------------------

def _union(spans):
    out = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out


def _subtract(spans, holes):
    """The parts of the (merged) `spans` outside the (merged) `holes`."""
    out = []
    for a, b in spans:
        for x, y in holes:
            if y <= a or x >= b:
                continue
            if x > a:
                out.append([a, x])
            a = max(a, y)
            if a >= b:
                break
        if a < b:
            out.append([a, b])
    return out


def _overlap(a, b, merged):
    return sum(max(0, min(b, y) - max(a, x)) for x, y in merged)


def analyze(path):
    """Overlap figures from a merged trace (see timeline()): for each kind of FSDP
    collective, its time in the runtime (first submission to copy-out, per instance,
    on rank 0) and the part of it during which rank 0 ran FSDP compute (unit
    forward/backward spans, less the time blocked waiting for a collective)."""
    with open(path) as f:
        events = json.load(f)
    names = {e["tid"]: e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    spans = [e for e in events if e.get("ph") == "X" and e.get("tid") in names]
    pick = lambda row: [(e["ts"], e["ts"] + e["dur"]) for e in spans  # noqa: E731
                        if names[e["tid"]] == row and not e["name"].endswith("<root>")]
    busy = _subtract(_union(pick("fsdp compute")), _union(pick("fsdp wait")))
    stats = {}
    for tid, row in names.items():
        if "fsdp" not in row or row.startswith("fsdp "):
            continue
        kind = row.split(".", 1)[0]
        inst, cur = [], None  # A row's instances start at each NEGOTIATE.
        for e in sorted((e for e in spans if e["tid"] == tid), key=lambda e: e["ts"]):
            if e["name"] == "NEGOTIATE":
                cur = [e["ts"], e["ts"] + e["dur"]]
                inst.append(cur)
            elif cur is not None:
                cur[1] = max(cur[1], e["ts"] + e["dur"])
        for a, b in inst:
            st = stats.setdefault(kind, {"n": 0, "us": 0.0, "overlap": 0.0})
            st["n"] += 1
            st["us"] += b - a
            st["overlap"] += _overlap(a, b, busy)
    return {"collectives": stats,
            "compute_us": sum(b - a for a, b in busy),
            "wait_us": sum(b - a for a, b in _union(pick("fsdp wait")))}


def timeline(layers, path, steps=4):
    """Rank 0 writes `path` (the runtime's trace plus FSDP's compute and wait spans,
    for Perfetto/chrome://tracing) and returns the overlap figures."""
    import torch
    import hvd.torch as hvd
    hvd.init()
    torch.set_num_threads(1)
    c = Config("fsdp-full", layers)
    x, y = data(layers[0], layers[-1], hvd.rank())
    for _ in range(2):
        c.step(x, y)
    raw = path + ".runtime.json"
    hvd.start_timeline(raw)
    c.model.trace = []
    t0 = time.time()
    for _ in range(steps):
        c.step(x, y)
    t1 = time.time()
    hvd.barrier()
    hvd.stop_timeline()
    trace = c.model.trace
    c.model.trace = None
    out = None
    if hvd.rank() == 0:
        with open(raw) as f:
            text = f.read().rstrip()
        if not text.endswith("]"):
            text = text.rstrip(",") + "]"
        events = json.loads(text)
        start = [e for e in events if e.get("name") == "start_time"][0]["args"][
            "start_time_since_epoch_in_micros"]
        us = lambda t: t * 1e6 - start  # noqa: E731
        merged = events + [{"name": "thread_name", "ph": "M", "pid": 0, "tid": 100000 + i,
                            "args": {"name": "fsdp %s" % row}}
                           for i, row in enumerate(("compute", "wait"))]
        for s in trace:
            if "span" in s:
                merged.append({"name": s["span"], "ph": "X", "pid": 0,
                               "tid": 100000 + (s["row"] == "wait"), "ts": int(us(s["t0"])),
                               "dur": max(1, int((s["t1"] - s["t0"]) * 1e6))})
        with open(path, "w") as f:
            json.dump(merged, f)
        os.remove(raw)
        a = analyze(path)
        out = {"steps": steps, "step_ms": (t1 - t0) * 1000 / steps, "size": hvd.size(),
               "collectives": a["collectives"], "wait_ms_per_step": a["wait_us"] / steps / 1000,
               "compute_ms_per_step": a["compute_us"] / steps / 1000}
    hvd.shutdown()
    return out


def print_timeline(t, path):
    print("\ntimeline at %d ranks, FULL_SHARD, rank 0, %d steps of %.1f ms (merged trace: %s)"
          % (t["size"], t["steps"], t["step_ms"], path))
    print("  FSDP unit compute per step %.1f ms, blocked waiting for collectives %.1f ms"
          % (t["compute_ms_per_step"], t["wait_ms_per_step"]))
    for kind, s in sorted(t["collectives"].items()):
        print("  %-13s %3d collectives, %7.1f ms in the runtime (submit to copy-out), "
              "%5.1f %% of it overlapped by compute" % (kind, s["n"], s["us"] / 1000,
                                                         100 * s["overlap"] / max(s["us"], 1)))


def plot_timeline(path, png, step_ms):
    """Draws the last step of the merged trace: FSDP's compute and waits, and each
    unit's collectives (light: negotiation and queueing; dark: the transfer)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    with open(path) as f:
        events = json.load(f)
    names = {e["tid"]: e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    spans = [e for e in events if e.get("ph") == "X" and e.get("tid") in names]
    end = max(e["ts"] + e["dur"] for e in spans if names[e["tid"]].startswith("fsdp "))
    begin = end - step_ms * 1000 * 1.02
    rows = ["fsdp compute", "fsdp wait"]
    coll = sorted({names[e["tid"]] for e in spans if "fsdp" in names[e["tid"]]
                   and not names[e["tid"]].startswith("fsdp ")},
                  key=lambda n: (not n.startswith("allgather"), int(n.rsplit("ag", 1)[-1].rsplit(
                      "rs", 1)[-1])))
    rows += coll
    fig, ax = plt.subplots(figsize=(11, 0.32 * len(rows) + 1.2))
    for e in spans:
        if e["ts"] + e["dur"] < begin:
            continue
        row = names[e["tid"]]
        if row not in rows:
            continue
        y = len(rows) - 1 - rows.index(row)
        x, w = (e["ts"] - begin) / 1000, max(e["dur"], 1) / 1000
        if row == "fsdp compute":
            color = "tab:green" if e["name"].startswith("forward") else "tab:blue"
            if e["name"].endswith("<root>"):
                continue
        elif row == "fsdp wait":
            color = "tab:red"
        elif e["name"] in ("ALLGATHER", "REDUCESCATTER", "COPY_IN", "COPY_OUT"):
            color = "tab:orange"
        else:
            color = "navajowhite"
        ax.broken_barh([(x, w)], (y - 0.4, 0.8), color=color, edgecolor="none")
    ax.set_xlim(0, (end - begin) / 1000)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([r.replace("allgather.", "").replace("reducescatter.", "")
                        for r in reversed(rows)], fontsize=7)
    ax.set_xlabel("ms (one training step, rank 0)")
    ax.set_title("FULL_SHARD: compute (green forward, blue backward), waits (red), "
                 "collectives (light: queued/negotiating, dark: running)", fontsize=9)
    fig.tight_layout()
    fig.savefig(png, dpi=110)


# ---- the memory cap -------------------------------------------------------------------------

def _vm(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1]) * 1024
    return 0


def capped(config, layers, cap_mib, steps=3):
    """Runs `config` with every rank's data limited to cap_mib MiB beyond its size after
    hvd.init(); prints this rank's row as JSON (also when an allocation fails)."""
    import resource
    import torch
    import hvd.torch as hvd
    hvd.init()
    torch.set_num_threads(1)
    row = {"config": config, "rank": hvd.rank(), "size": hvd.size(), "ok": False}
    base_data = _vm("VmData")
    resource.setrlimit(resource.RLIMIT_DATA, (base_data + (cap_mib << 20),
                                              resource.RLIM_INFINITY))
    phase = "building the model"
    try:
        c = Config(config, layers, meta=config.startswith("fsdp"))
        x, y = data(layers[0], layers[-1], hvd.rank())
        phase = "the first step"
        c.step(x, y)
        phase = "training"
        t0 = time.perf_counter()
        for _ in range(steps):
            c.step(x, y)
        row["ms"] = 1000 * (time.perf_counter() - t0) / steps
        params, grads, state, peak, units = c.memory()
        row.update(ok=True, params=params, grads=grads, state=state, peak=peak, units=units)
    except RuntimeError as e:
        if "can't allocate memory" not in str(e) and "not enough memory" not in str(e):
            raise
        row["error"] = "out of memory in %s" % phase
    row["data_mib"] = (_vm("VmData") - base_data) / 2 ** 20
    print("ROW " + json.dumps(row), flush=True)
    if not row["ok"]:
        os._exit(0)  # Collectives of the failed step may be half-enqueued: leave now.
    hvd.shutdown()


def print_cap(rows, layers, cap_mib):
    numel = sum(a * b + b for a, b in zip(layers[:-1], layers[1:]))
    print("model %s x %d (%d parameters), Adam; replicated training state (parameters, "
          "gradients, Adam moments, float32) %.1f MiB per rank; cap %d MiB of data per rank"
          % (layers[1], len(layers) - 1, numel, 16 * numel / 2 ** 20, cap_mib))
    print("%2s %-12s %-34s %9s %9s %9s %10s %8s" % (
        "N", "config", "result (every rank)", "held MiB", "peak MiB", "data MiB", "max units",
        "ms/step"))
    for config in CAP_CONFIGS:
        rs = [r for r in rows if r["config"] == config]
        if not rs:
            continue
        ok = all(r["ok"] for r in rs)
        errors = [r.get("error", "killed") for r in rs if not r["ok"]]
        res = "trained" if ok else "; ".join("%s (%d)" % (e, errors.count(e))
                                             for e in sorted(set(errors)))
        worst = lambda k: max(r.get(k, 0) for r in rs)  # noqa: E731
        held = max(r.get("params", 0) + r.get("grads", 0) + r.get("state", 0) for r in rs)
        print("%2d %-12s %-34s %9s %9s %9.1f %10s %8s" % (
            rs[0]["size"], config, res, "%.1f" % (held / 2 ** 20) if ok else "-",
            "%.1f" % (worst("peak") / 2 ** 20) if ok else "-", worst("data_mib"),
            worst("units") if ok and config.startswith("fsdp") else "-",
            "%.0f" % worst("ms") if ok else "-"))


# ---- launching ---------------------------------------------------------------------------

def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", action="store_true", help="print rank 0's rows as JSON")
    parser.add_argument("--sizes", default="1,2,4")
    parser.add_argument("--layers", default=",".join(map(str, LAYERS)),
                        help="widths of the Linear stack (default %(default)s)")
    parser.add_argument("--timeline", default="/tmp/fsdp_timeline.json",
                        help="where the merged trace goes ('' to skip the timeline)")
    parser.add_argument("--plot", default="", help="also draw one step of the timeline to "
                        "this PNG (needs matplotlib)")
    parser.add_argument("--timeline-only", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--cap-mib", type=int, default=0,
                        help="run the memory-capped comparison with this cap instead")
    parser.add_argument("--cap-ranks", type=int, default=4)
    parser.add_argument("--cap-layers", default=",".join(["1024"] * 25))
    parser.add_argument("--cap-config", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--dprun", default=None, help="dprun to launch with (default: beside "
                        "the libhvd.so that the hvd package finds)")
    args = parser.parse_args()
    layers = tuple(int(s) for s in args.layers.split(","))
    cap_layers = tuple(int(s) for s in args.cap_layers.split(","))
    fixed_mmap_threshold()
    if "HVD_RANK" in os.environ:
        if args.cap_config:
            capped(args.cap_config, cap_layers, args.cap_mib)
            return 0
        if args.timeline_only:
            t = timeline(layers, args.timeline)
            if t is not None:
                print("TIMELINE " + json.dumps(t), flush=True)
            return 0
        rows = measure(layers)
        if int(os.environ["HVD_RANK"]) == 0:
            print(json.dumps(rows) if args.json else "", flush=True)
            if not args.json:
                print_table(rows, layers)
        return 0
    from hvd import _lib
    dprun = args.dprun or os.path.join(os.path.dirname(_lib.find_library()), "dprun")
    env = dict(os.environ, HVD_LIBRARY=os.path.join(os.path.dirname(os.path.abspath(dprun)),
                                                    "libhvd.so"))
    me = [sys.executable, os.path.abspath(__file__), "--layers", args.layers]

    def run(n, extra):
        out = subprocess.run([dprun, "-np", str(n)] + me + extra, env=env, capture_output=True,
                             text=True)
        return out

    if args.cap_mib:
        rows = []
        for config in CAP_CONFIGS:
            out = run(args.cap_ranks, ["--cap-config", config, "--cap-mib", str(args.cap_mib),
                                       "--cap-layers", args.cap_layers])
            got = [json.loads(ln.split("ROW ", 1)[1]) for ln in out.stdout.splitlines()
                   if "ROW {" in ln]
            for r in range(args.cap_ranks):
                if not any(g["rank"] == r for g in got):
                    got.append({"config": config, "rank": r, "size": args.cap_ranks,
                                "ok": False, "error": "killed (exit %d)" % out.returncode})
            rows += got
        print_cap(rows, cap_layers, args.cap_mib)
        return 0
    rows = []
    sizes = [int(s) for s in args.sizes.split(",")]
    for n in sizes:
        out = run(n, ["--json"])
        if out.returncode != 0:
            sys.stderr.write(out.stdout + out.stderr)
            return out.returncode
        line = [ln for ln in out.stdout.splitlines() if ln.startswith("[0]<stdout>:[")][0]
        rows += json.loads(line.split(":", 1)[1])
    print_table(rows, layers)
    if args.timeline and max(sizes) > 1:
        out = run(max(sizes), ["--timeline-only", "--timeline", args.timeline])
        lines = [ln for ln in out.stdout.splitlines() if "TIMELINE {" in ln]
        if out.returncode != 0 or not lines:
            sys.stderr.write(out.stdout + out.stderr)
            return out.returncode or 1
        t = json.loads(lines[0].split("TIMELINE ", 1)[1])
        print_timeline(t, args.timeline)
        if args.plot:
            plot_timeline(args.timeline, args.plot, t["step_ms"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
