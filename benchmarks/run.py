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

from classes import class_models  # noqa: E402
from energy import energy_network  # noqa: E402
from estimation import kn5_against_lmplz  # noqa: E402
from srilm_options import srilm_options  # noqa: E402
from faster_rnnlm import faster_rnnlm  # noqa: E402
from large import large_corpora  # noqa: E402
from log_bilinear import lbl_quality, lbl_training_speed  # noqa: E402
from mlp9_pytorch import mlp9_against_pytorch, mlp9_scoring_against_pytorch  # noqa: E402
from recurrent import lbl_output_layers, lstm_quality, lstm_speed, output_layers, survey_table  # noqa: E402
from scoring import ngram_scoring  # noqa: E402
from sections import SECTIONS  # noqa: E402
from using import nbest_rescoring  # noqa: E402

SECTIONS = SECTIONS + [("lbl-quality", lbl_quality), ("lbl-speed", lbl_training_speed), ("survey", survey_table),
                       ("lstm-quality", lstm_quality), ("lstm-speed", lstm_speed), ("output-layers", output_layers),
                       ("nbest", nbest_rescoring), ("classes", class_models), ("srilm-options", srilm_options),
                       ("large", large_corpora), ("faster-rnnlm", faster_rnnlm), ("ngram-scoring", ngram_scoring),
                       ("energy", energy_network), ("mlp9-pytorch", mlp9_against_pytorch),
                       ("lbl-outputs", lbl_output_layers), ("kn5-lmplz", kn5_against_lmplz),
                       ("mlp9-scoring", mlp9_scoring_against_pytorch)]


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


def now():
    """The date and time as the benchmark stamps write it."""
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())


def checkout_commit(directory=None, paths=()):
    """`git rev-parse --short HEAD` of the checkout holding `directory` (the current one by
    default), "+ uncommitted changes" when tracked files (under `paths`, if given) differ
    from it; None outside git."""
    git = ["git"] + (["-C", directory] if directory else [])
    head = subprocess.run(git + ["rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    if head.returncode != 0:
        return None
    changed = subprocess.run(git + ["status", "--porcelain", "--untracked-files=no", "--", *paths],
                             capture_output=True, text=True).stdout.strip()
    return head.stdout.strip() + (f" + uncommitted changes{' to ' + ', '.join(paths) if paths else ''}"
                                  if changed else "")


def stamp(commit, peak=None):
    """The line under a section's heading: when and from which commit it was measured."""
    return (f"_Measured {now()}, commit {commit}"
            + (f", sgemm peak in that run {peak:.1f} GFLOP/s._" if peak is not None else "._"))


def machine_stamp(*notes):
    """stamp() of this checkout with `notes`, the cores and the load average at the end
    (the other jobs that shared the machine)."""
    return (stamp(checkout_commit() or "unknown")[:-2] + "".join(f", {note}" for note in notes)
            + f", {os.cpu_count()} cores (load average {os.getloadavg()[0]:.1f} at the end)._")


def write_sections(path, bodies, head=None):
    """Write the markdown file `path` with each of `bodies` (lists of lines, a `## ` heading
    first) in place of the section of the same heading, or after the last section; every
    other section is kept as it is. `head` replaces the lines before the first section
    (kept, or "# Benchmarks", when None). Returns the text written."""
    sections = {}
    lines = open(path).read().split("\n") if os.path.exists(path) else ["# Benchmarks", ""]
    first = next((k for k, line in enumerate(lines) if line.startswith("## ")), len(lines))
    head = lines[:first] if head is None else head
    for line in lines[first:]:
        if line.startswith("## "):
            current = line
            sections[current] = []
        sections[current].append(line)
    for body in bodies:
        sections[body[0]] = body
    text = "\n".join(head).rstrip("\n") + "\n"
    for body in sections.values():
        text += "\n" + "\n".join(body).strip("\n") + "\n"
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)
    return text


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--brown", default="../shared/data/brown")
    parser.add_argument("--out", default="BENCHMARKS.md")
    parser.add_argument("--only", nargs="*", help="run only these sections")
    args = parser.parse_args()
    peak = sgemm_peak()
    commit = checkout_commit() or "unknown"
    head = ["# Benchmarks", "",
            "Written by `make bench` (benchmarks/run.py); data: Brown split of ../shared/data/brown.",
            "Medians of repeated runs in one session; ratios are measured side by side. Each section "
            "carries the stamp of the run that measured it: sections not re-run (`--only`), and "
            "sections other tools write (`make bench-vs`), are kept as they were.", "",
            f"- machine: {cpu_model()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
            f"numpy {np.__version__}",
            f"- commit: {commit}, date: {now()}",
            f"- numpy sgemm peak (2048x2048 float32, median of 7): **{peak:.1f} GFLOP/s**"]
    bodies = []
    for name, section in SECTIONS:
        if args.only and name not in args.only:
            continue
        print(f"bench: {name} ...", file=sys.stderr)
        body = section(args.brown, peak)
        bodies.append(body[:1] + ["", stamp(commit, peak)] + body[1:])
    print(write_sections(args.out, bodies, head), end="")

if __name__ == "__main__":
    main()
