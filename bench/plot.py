#!/usr/bin/env python3
"""Plots all-reduce bus bandwidth against buffer size from the benchmark CSVs.

    bench/plot.py -o docs/allreduce_busbw.png FILE.csv ...

One panel per rank count; in each, one line per peer over the single-buffer
workloads (4 KiB .. 256 MiB): dprun (each CPU-operations setting that was run),
raw Gloo ring on one buffer, and MPI_Allreduce. The ResNet-50 and 1000 x 4 KiB
workloads are drawn as single markers at their total size, so the cost of many
tensors shows against the one-buffer line.
"""
import argparse
import csv

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

STYLE = {
    "dprun": dict(color="tab:blue", marker="o"),
    "gloo_fused": dict(color="tab:orange", marker="s"),
    "mpi_fused": dict(color="tab:green", marker="^"),
}
LABEL = {"gloo_fused": "raw Gloo ring", "mpi_fused": "MPI_Allreduce"}
MULTI = {"resnet50": "P", "1000x4KiB": "X"}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("csv", nargs="+")
    a = ap.parse_args()
    rows = []
    for p in a.csv:
        with open(p, newline="") as f:
            rows += list(csv.DictReader(f))
    ranks = sorted({int(r["ranks"]) for r in rows})
    fig, axes = plt.subplots(1, len(ranks), figsize=(6.2 * len(ranks), 4.6), squeeze=False)
    for ax, n in zip(axes[0], ranks):
        # (peer, ops) -> sizes and bandwidths; the Gloo peer is taken from one dprun run.
        lines = {}
        gloo_from = None
        for r in rows:
            if int(r["ranks"]) != n:
                continue
            peer, ops = r["peer"], r["ops"]
            if peer == "gloo_fused":
                gloo_from = gloo_from or ops
                if ops != gloo_from:
                    continue
            if peer not in STYLE:
                continue
            key = (peer, ops if peer == "dprun" else "")
            lines.setdefault(key, []).append(r)
        for (peer, ops), rs in sorted(lines.items()):
            label = LABEL.get(peer, f"dprun ({ops})" if ops else peer)
            style = dict(STYLE[peer])
            if peer == "dprun" and ops == "gloo":
                style.update(linestyle="--", markerfacecolor="none")
            single = sorted((int(r["bytes"]), float(r["busbw_GBps"])) for r in rs if int(r["tensors"]) == 1)
            if single:
                ax.plot(*zip(*single), label=label, **style)
            for r in rs:
                if r["workload"] in MULTI:
                    ax.scatter(int(r["bytes"]), float(r["busbw_GBps"]), color=style["color"],
                               marker=MULTI[r["workload"]], s=70, zorder=3,
                               facecolors="none" if style.get("markerfacecolor") == "none" else None)
        for wl, m in MULTI.items():
            ax.scatter([], [], color="gray", marker=m, label=f"{wl} (many tensors)")
        ax.set_xscale("log", base=2)
        ticks = [4 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20, 256 << 20]
        ax.set_xticks(ticks, ["4K", "64K", "1M", "16M", "64M", "256M"])
        ax.set_xlabel("bytes per all-reduce (float32 sum)")
        ax.set_yscale("log")
        ax.set_ylabel("busbw (GB/s, log scale)")
        ax.set_title(f"{n} ranks, one host, loopback")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(a.output, dpi=110)


if __name__ == "__main__":
    main()
