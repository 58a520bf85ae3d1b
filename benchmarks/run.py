"""`make bench`: measure nplmtk on Brown and write BENCHMARKS.md.

Every figure is a median over repeats measured in this one run, beside the machine's
numpy sgemm peak measured in the same run (machines here differ from day to day).
"""
import argparse
import os
import platform
import statistics
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from sections import SECTIONS  # noqa: E402


def cpu_model():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def sgemm_peak(size=2048, repeats=7):
    """Median GFLOP/s of a float32 square matrix product through numpy's BLAS."""
    a = np.random.default_rng(0).standard_normal((size, size)).astype(np.float32)
    b = a.copy()
    a @ b
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        a @ b
        times.append(time.perf_counter() - start)
    return 2 * size ** 3 / statistics.median(times) / 1e9


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--brown", default="../shared/data/brown")
    parser.add_argument("--out", default="BENCHMARKS.md")
    parser.add_argument("--only", nargs="*", help="run only these sections")
    args = parser.parse_args()
    peak = sgemm_peak()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip() or "unknown"
    lines = ["# Benchmarks", "",
             "Written by `make bench` (benchmarks/run.py); data: Brown split of ../shared/data/brown.",
             "Medians of repeated runs in one session; ratios are measured side by side.", "",
             f"- machine: {cpu_model()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
             f"numpy {np.__version__}",
             f"- commit: {commit}, date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
             f"- numpy sgemm peak (2048x2048 float32, median of 7): **{peak:.1f} GFLOP/s**", ""]
    sections = {}
    if args.only and os.path.exists(args.out):
        # Keep the sections not re-run, each with the stamp of the run that measured it.
        current = None
        for line in open(args.out).read().split("\n"):
            if line.startswith("## "):
                current = line
                sections[current] = []
            if current:
                sections[current].append(line)
    stamp = (f"_Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, commit {commit}, "
             f"sgemm peak in that run {peak:.1f} GFLOP/s._")
    for name, section in SECTIONS:
        if args.only and name not in args.only:
            continue
        print(f"bench: {name} ...", file=sys.stderr)
        body = section(args.brown, peak)
        sections[body[0]] = body[:1] + ["", stamp] + body[1:] + [""]
    for body in sections.values():
        lines += body
    with open(args.out + ".tmp", "w") as f:
        f.write("\n".join(lines).rstrip("\n") + "\n")
    os.replace(args.out + ".tmp", args.out)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
