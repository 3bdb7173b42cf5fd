#!/usr/bin/env python3
"""Runs a command (dprun ...) and reports the launcher's own cost while it ran.

    bench/dprun_usage.py --csv FILE --ranks N --ops OPS -- dprun -np N ...

Polls /proc/<pid> of the command itself every 20 ms: its own CPU (utime + stime,
all its threads, its children excluded), its peak resident memory (VmHWM) and its
threads; at the end appends to FILE, in allreduce_bench --scaling-csv's long form
(ranks,ops,workload,metric,value): dprun_cpu_s, dprun_cpu_ms_per_rank_s (its CPU per
rank per second of the job: the supervision, the store and the output relay),
dprun_maxrss_mb, job_wall_s. The last sample is at most 20 ms before the command
ends. Exits with the command's status.
"""
import argparse
import os
import subprocess
import sys
import time


def sample(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        ticks = os.sysconf("SC_CLK_TCK")
        cpu = (int(fields[11]) + int(fields[12])) / ticks  # utime, stime (fields 14, 15)
        hwm = 0
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    hwm = int(line.split()[1]) / 1024
        return cpu, hwm
    except (OSError, IndexError, ValueError):
        return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--csv", required=True)
    ap.add_argument("--ranks", type=int, required=True)
    ap.add_argument("--ops", required=True)
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.command[1:] if a.command and a.command[0] == "--" else a.command
    start = time.monotonic()
    proc = subprocess.Popen(cmd)
    cpu, hwm = 0.0, 0.0
    while proc.poll() is None:
        s = sample(proc.pid)
        if s:
            cpu, hwm = s[0], max(hwm, s[1])
        time.sleep(0.02)
    wall = time.monotonic() - start
    fresh = not os.path.exists(a.csv)
    with open(a.csv, "a") as out:
        if fresh:
            out.write("ranks,ops,workload,metric,value\n")
        for metric, value in (("dprun_cpu_s", cpu),
                              ("dprun_cpu_ms_per_rank_s", 1e3 * cpu / a.ranks / max(wall, 1e-9)),
                              ("dprun_maxrss_mb", hwm), ("job_wall_s", wall)):
            out.write(f"{a.ranks},{a.ops},-,{metric},{value:.6g}\n")
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
