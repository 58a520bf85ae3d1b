"""The mixture of softmaxes against one softmax at equal wall time on Brown (issue 51, item 3):
a network of benchmarks/runs.py (brown-best's lstm-awd by default, or brown-fast's
lstm-fast) trained for the same -max-time without and with `-mos K` (each K given), the
runs side by side or one after the other, then each model's valid ppl (`nplm ppl`; test only
with --test, once the settings are fixed) and its training words/s and epochs from the -log.
Writes a markdown table to --out (a scratch file: the merger inserts it in BENCHMARKS.md).
-max-time counts whole epochs (train-nplm starts no epoch it expects to end past the budget,
and always runs the first), so the budget must hold several epochs of the slower variant for
the comparison to be one at equal time; the table gives each run's epochs.

    python benchmarks/mos_ablation.py --run lstm-awd --budget 7000 --mos 3 5 --threads 2 --out mos.md
"""
import argparse
import dataclasses
import json
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from runs import RUNS, RUNS_DIR, VOCAB_MIN_COUNT, VOCAB_PATH  # noqa: E402


def replaced(options, flag, value):
    """`options` with `flag`'s value set (added when absent)."""
    options = list(options)
    if flag in options:
        options[options.index(flag) + 1] = value
        return options
    return options + [flag, value]


def variant(run, components, budget, threads, dropout):
    extra = replaced(run.extra, "-max-time", str(budget))
    if components:
        extra += ["-mos", str(components), "-dropout-mos", str(dropout)]
    name = f"{run.name}-{budget}s-t{threads}-" + (f"mos{components}" if components else "softmax")
    return dataclasses.replace(run, name=name, threads=threads, extra=tuple(extra))


def log_summary(path):
    """(best valid ppl, mean training words/s, epochs) of a train-nplm -log."""
    epochs = [json.loads(line) for line in open(path) if line.startswith("{")]
    valid = [e["valid_ppl"] for e in epochs if e.get("valid_ppl")]
    speeds = [e["words_per_s"] for e in epochs if e.get("words_per_s")]
    return (min(valid) if valid else float("nan"), sum(speeds) / len(speeds) if speeds else float("nan"),
            len(epochs))


def ppl_of(nplm, model, text):
    out = subprocess.run([nplm, "ppl", "-lm", model, "-ppl", text], capture_output=True, text=True,
                         check=True).stdout
    return float(re.search(r"ppl= *([0-9.]+)", out).group(1))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", default="lstm-awd", choices=("lstm-awd", "lstm-fast"))
    parser.add_argument("--budget", type=int, default=None, help="seconds of -max-time (default: the run's)")
    parser.add_argument("--mos", type=int, nargs="+", default=[3])
    parser.add_argument("--dropout-mos", type=float, default=0.1)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--side-by-side", action="store_true", help="train the variants at the same time")
    parser.add_argument("--test", action="store_true", help="also score Brown test (settings already fixed)")
    parser.add_argument("--brown", default="/work/shared/data/brown")
    parser.add_argument("--nplm", default="nplm")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    run = RUNS[args.run]
    budget = args.budget or int(run.extra[run.extra.index("-max-time") + 1])
    os.makedirs(RUNS_DIR, exist_ok=True)
    subprocess.run([args.nplm, "vocab", "-text", os.path.join(args.brown, "train.txt"), "-min-count",
                    str(VOCAB_MIN_COUNT), "-write-vocab", VOCAB_PATH], check=True)
    variants = [variant(run, k, budget, args.threads, args.dropout_mos) for k in [0] + args.mos]
    load_before = open("/proc/loadavg").read().split()[:3]
    started = time.time()
    processes = []
    for v in variants:
        if os.path.exists(v.model_path):
            print(f"{v.model_path} exists: not trained again", file=sys.stderr)
            continue
        command = v.command(args.nplm, args.brown)
        print(" ".join(command), file=sys.stderr, flush=True)
        process = subprocess.Popen(command)
        if args.side_by_side:
            processes.append(process)
        elif process.wait():
            sys.exit(f"{v.name}: train-nplm failed")
    if any(p.wait() for p in processes):
        sys.exit("a train-nplm run failed")
    load_after = open("/proc/loadavg").read().split()[:3]
    rows = []
    for v in variants:
        best_valid, speed, epochs = log_summary(v.log_path)
        valid = ppl_of(args.nplm, v.model_path, os.path.join(args.brown, "valid.txt"))
        test = ppl_of(args.nplm, v.model_path, os.path.join(args.brown, "test.txt")) if args.test else None
        rows.append(f"| {v.name} | {epochs} | {speed:,.0f} | {valid:.2f} |" + (f" {test:.2f} |" if args.test else ""))
    header = "| run | epochs | training words/s | valid ppl |" + (" test ppl |" if args.test else "")
    text = (f"Mixture of softmaxes at equal wall time ({budget} s of -max-time each, -threads {args.threads}, "
            f"{'side by side' if args.side_by_side else 'one after the other'}; -dropout-mos {args.dropout_mos}; "
            f"load average {' '.join(load_before)} before, {' '.join(load_after)} after; "
            f"{(time.time() - started) / 60:.1f} min in all):\n\n")
    table = "\n".join([header, "|" + "---|" * (header.count("|") - 1), *rows])
    with open(args.out, "a") as out:
        out.write(text + table + "\n\n" + "\n".join(f"- {v.name}: nplm train-nplm {' '.join(v.options())}"
                                                    for v in variants) + "\n")
    print(table)


if __name__ == "__main__":
    main()
