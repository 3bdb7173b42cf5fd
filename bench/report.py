#!/usr/bin/env python3
"""Combines allreduce_bench and mpi_allreduce_bench CSV files into markdown tables.

    bench/report.py [--machine machine.txt] FILE.csv ... > results.md

One table per (rank count, CPU operations) of the dprun runs. Each row is a
workload: dprun's time per step and busbw, raw Gloo's (fused buffer and one
all-reduce per tensor), MPI's (the faster of fused and per-tensor, from the MPI
run with the same rank count), and the ratios dprun/peer of the median times
(> 1: dprun is slower). dprun and Gloo come from one run on the same buffers;
MPI is a separate run, so its ratio is across runs. For a single buffer, fused
and per-tensor are the same operation and share one measurement.

--pairs DIR adds a table of alternating runs, each peer alone: DIR holds
dprun_np<N>_<i>.csv (allreduce_bench --peers dprun) and mpi_np<N>_<i>.csv, run
in turn; per workload and rank count it lists each run's median and the ratio
of the medians over the runs (dprun against MPI's faster variant per run).
"""
import argparse
import csv
import glob
import os
import statistics
import sys
from collections import OrderedDict


def read(paths):
    rows = []
    for p in paths:
        with open(p, newline="") as f:
            for r in csv.DictReader(f):
                r["ranks"] = int(r["ranks"])
                r["tensors"] = int(r["tensors"])
                r["bytes"] = int(r["bytes"])
                for k in ("median_ms", "min_ms", "max_ms", "algbw_GBps", "busbw_GBps"):
                    r[k] = float(r[k])
                rows.append(r)
    return rows


def human(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if n == int(n) else f"{n:.1f} {unit}"
        n /= 1024


def ratio(a, b):
    return f"{a['median_ms'] / b['median_ms']:.2f}" if a and b and b["median_ms"] > 0 else "-"


def cell(r):
    return (f"{r['median_ms']:.3f}", f"{r['busbw_GBps']:.2f}") if r else ("-", "-")


def table(rows, mpi_rows):
    by = OrderedDict()
    for r in rows:
        by.setdefault(r["workload"], {})[r["peer"]] = r
    best_mpi = {}
    for r in mpi_rows:
        b = best_mpi.get(r["workload"])
        if b is None or r["median_ms"] < b["median_ms"]:
            best_mpi[r["workload"]] = r
    out = [
        "| workload | bytes | tensors | dprun ms | dprun busbw | Gloo fused ms | Gloo fused busbw "
        "| Gloo per-tensor ms | MPI ms | MPI busbw | dprun/Gloo fused | dprun/Gloo per-tensor "
        "| dprun/MPI |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for wl, peers in by.items():
        d = peers.get("dprun")
        gf = peers.get("gloo_fused")
        gt = peers.get("gloo_per_tensor", gf)
        mp = best_mpi.get(wl)
        any_row = d or gf
        mpi_ms, mpi_bw = cell(mp)
        if mp and mp["tensors"] > 1:
            mpi_ms += " (fused)" if mp["peer"] == "mpi_fused" else " (per-tensor)"
        out.append(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |".format(
                wl, human(any_row["bytes"]), any_row["tensors"], *cell(d), *cell(gf),
                cell(gt)[0], mpi_ms, mpi_bw, ratio(d, gf), ratio(d, gt), ratio(d, mp)))
    return "\n".join(out)


def pairs_table(directory):
    """Alternating runs, each peer alone: per (ranks, workload), every run's median."""
    runs = {}  # (ranks, workload) -> {"dprun": [ms...], "mpi": [ms...]}
    for path in sorted(glob.glob(os.path.join(directory, "*_np*_*.csv"))):
        who = os.path.basename(path).split("_")[0]
        best = {}
        for r in read([path]):
            if who == "dprun" and r["peer"] != "dprun":
                continue
            key = (r["ranks"], r["workload"])
            best[key] = min(best.get(key, float("inf")), r["median_ms"])
        for key, ms in best.items():
            runs.setdefault(key, {"dprun": [], "mpi": []})[who].append(ms)
    out = [
        "| ranks | workload | dprun alone, per run (ms) | MPI best, per run (ms) | "
        "dprun/MPI (medians over runs) |",
        "|---:|---|---|---|---:|",
    ]
    for (ranks, wl), v in sorted(runs.items()):
        if not v["dprun"] or not v["mpi"]:
            continue
        r = statistics.median(v["dprun"]) / statistics.median(v["mpi"])
        out.append("| {} | {} | {} | {} | {:.2f} |".format(
            ranks, wl, ", ".join(f"{x:.3f}" for x in v["dprun"]),
            ", ".join(f"{x:.3f}" for x in v["mpi"]), r))
    return "\n".join(out) if len(out) > 2 else ""


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--machine", help="a text file describing the machine, quoted first")
    ap.add_argument("--pairs", help="a directory of alternating runs, each peer alone")
    ap.add_argument("csv", nargs="+")
    a = ap.parse_args()
    rows = read(a.csv)
    if a.machine:
        with open(a.machine) as f:
            print("```\n" + f.read().rstrip() + "\n```\n")
    mpi = [r for r in rows if r["ops"] == "mpi"]
    groups = OrderedDict()
    for r in sorted((r for r in rows if r["ops"] != "mpi"), key=lambda r: (r["ranks"], r["ops"])):
        groups.setdefault((r["ranks"], r["ops"]), []).append(r)
    if not groups:
        sys.exit("report.py: no dprun rows in the input")
    for (ranks, ops), g in groups.items():
        print(f"### {ranks} ranks, CPU operations: {ops}\n")
        print(table(g, [r for r in mpi if r["ranks"] == ranks]))
        print()
    pt = pairs_table(a.pairs) if a.pairs else ""
    if pt:
        print("### dprun and MPI each alone, in alternating runs\n")
        print(pt)
        print()


if __name__ == "__main__":
    main()
