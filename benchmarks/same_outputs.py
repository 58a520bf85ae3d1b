"""`make outputs-vs BASELINE=...`: does this build train the same models as a baseline build?

Trains every architecture with each output layer it has (and the criteria, optimizers and
block settings that take other paths through the kernels) for one epoch with one thread
and a fixed seed on a slice of Brown, with the baseline build ("old") and this one ("new"),
scores Brown test's first lines with each model, and writes (replaces) one section of
BENCHMARKS.md: the test ppl of both to 6 significant digits (SRILM's report prints 6) and
whether the training perplexities in the logs agree to the last bit, and the largest
difference between the two models' parameters. A refactoring of the
trainer or the kernels should leave every row "same".
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from run import checkout_commit, cpu_model, stamp, write_sections  # noqa: E402
from sections import BLAS_VARIABLES, NPLM, OUT  # noqa: E402
from side_by_side import BUILD_PATHS, build_identity  # noqa: E402

HEADING = "## Same outputs: this build against a baseline build"
WORK = os.path.join(OUT, "same-outputs")
TRAIN_LINES, TEST_LINES = 3000, 1000
COMMON = ["-epochs", "1", "-threads", "1", "-seed", "1", "-quiet"]
WINDOWS = ["-order", "4", "-m", "30", "-batch", "16"]
STREAMS = ["-m", "32", "-h", "32", "-bptt", "10", "-streams", "8"]
IS = ["-criterion", "is", "-samples", "50"]

# (name, options): every architecture with each output layer it has, then the other paths
SETTINGS = (
    [(f"mlp {out}", ["-arch", "mlp", *WINDOWS, "-h", "60", "-output", out]) for out in ("full", "class", "hs")]
    + [("mlp full -batch 1", ["-arch", "mlp", "-order", "4", "-m", "30", "-h", "60", "-batch", "1"]),
       ("mlp full -direct -criterion is", ["-arch", "mlp", *WINDOWS, "-h", "60", "-direct", *IS]),
       ("energy full", ["-arch", "energy", *WINDOWS, "-h", "30"]),
       ("energy full -batch 1 -criterion is", ["-arch", "energy", "-order", "4", "-m", "30", "-h", "30", *IS])]
    + [(f"{arch} {out}", ["-arch", arch, *WINDOWS, *([] if arch == "lbl" else ["-h", "30"]), "-output", out])
       for arch in ("lbl", "lbl1", "lbl2", "lbl3") for out in ("full", "class", "hs")]
    + [("lbl full -criterion is", ["-arch", "lbl", *WINDOWS, *IS]),
       ("lbl full -momentum 0.5 -block-lr C=0.01", ["-arch", "lbl", *WINDOWS, "-momentum", "0.5", "-block-lr",
                                                    "C=0.01"]),
       ("lbl1 full -freeze-features -decay-biases", ["-arch", "lbl1", *WINDOWS, "-h", "30", "-freeze-features",
                                                     "-decay-biases", "-block-weight-decay", "A=1e-3"])]
    + [(f"{arch} {out}", ["-arch", arch, *STREAMS, "-output", out])
       for arch in ("rnn", "lstm") for out in ("full", "class", "hs")]
    + [("rnn full -layers 2 -dropout 0.2", ["-arch", "rnn", *STREAMS, "-layers", "2", "-dropout", "0.2"]),
       ("lstm full -criterion is", ["-arch", "lstm", *STREAMS, *IS]),
       ("lstm class -optimizer adam -clip 0.5", ["-arch", "lstm", *STREAMS, "-output", "class", "-optimizer",
                                                 "adam", "-lr", "0.002", "-clip", "0.5", "-peephole", "-tie"])])


def run(command, env):
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    if done.returncode:
        raise SystemExit(f"{' '.join(command)}: exit status {done.returncode}\n{done.stderr}")
    return done.stdout


def model_path(name, side):
    return os.path.join(WORK, re.sub(r"[^a-z0-9]+", "-", name) + "." + side + ".nplm")


def largest_difference(name):
    """The largest absolute difference between the two builds' parameters ("0": identical)."""
    from nplmtk import container
    old, new = (container.load(model_path(name, side)).arrays for side in ("old", "new"))
    largest = max((float(np.max(np.abs(old[k].astype(np.float64) - new[k]))) for k in old), default=0.0)
    return f"{largest:.1e}" if largest else "0"


def train_and_score(nplm, name, options, side, texts, env):
    """(test ppl as the report prints it, the log's train ppl as written, seconds)."""
    stem = model_path(name, side)[:-len(".nplm")]
    start = time.perf_counter()
    run([nplm, "train-nplm", "-text", texts["train"], "-vocab", texts["vocab"], *options, *COMMON,
         "-log", stem + ".log", "-lm", stem + ".nplm"], env)
    seconds = time.perf_counter() - start
    report = run([nplm, "ppl", "-lm", stem + ".nplm", "-text", texts["test"]], env)
    ppl = re.search(r"ppl= (\S+)", report).group(1)
    train_ppl = repr(json.loads(open(stem + ".log").read().splitlines()[-1])["train_ppl"])
    print(f"  {name:42} {side}: ppl {ppl:>10}  train {train_ppl}  {seconds:.1f} s", file=sys.stderr)
    return ppl, train_ppl, seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", required=True, help="the other build's nplm, e.g. ../old/.venv/bin/nplm")
    parser.add_argument("--nplm", default=NPLM, help="this build's nplm (default: beside this Python)")
    parser.add_argument("--brown", default="../shared/data/brown")
    parser.add_argument("--out", default="BENCHMARKS.md")
    args = parser.parse_args()
    env = dict(os.environ, **{name: "1" for name in BLAS_VARIABLES})
    os.makedirs(WORK, exist_ok=True)
    texts = {name: os.path.join(WORK, f"{name}.txt") for name in ("train", "test", "vocab")}
    for name, lines in (("train", TRAIN_LINES), ("test", TEST_LINES)):
        with open(os.path.join(args.brown, f"{name}.txt")) as f, open(texts[name], "w") as out:
            out.writelines(line for _, line in zip(range(lines), f))
    run([args.nplm, "vocab", "-text", texts["train"], "-min-count", "2", "-write-vocab", texts["vocab"]], env)
    started = time.perf_counter()
    rows, moved = [], 0
    for name, options in SETTINGS:
        old = train_and_score(args.baseline, name, options, "old", texts, env)
        new = train_and_score(args.nplm, name, options, "new", texts, env)
        same = "same" if old[:2] == new[:2] else ("test ppl same, train ppl differs" if old[0] == new[0]
                                                  else "**differs**")
        moved += same != "same"
        rows.append(f"| `{name}` | {old[0]} | {new[0]} | {same} | {largest_difference(name)} | {old[2]:.1f} | "
                    f"{new[2]:.1f} |")
    body = [HEADING, "", stamp(checkout_commit(paths=BUILD_PATHS) or "unknown"), "",
            "Written by `make outputs-vs BASELINE=...` (benchmarks/same_outputs.py).", "",
            f"- new (this build): {build_identity(args.nplm)}",
            f"- old (baseline): {build_identity(args.baseline)}",
            f"- machine: {cpu_model()}, {os.cpu_count()} cores",
            f"- data: the first {TRAIN_LINES} lines of Brown train (vocabulary: its words seen twice or more), "
            f"the ppl of the first {TEST_LINES} lines of Brown test",
            f"- every run: `nplm train-nplm -text TRAIN -vocab VOCAB OPTIONS {' '.join(COMMON)}`, then "
            "`nplm ppl -lm MODEL -text TEST`; \"same\": the same test ppl and the same training perplexity in "
            "the log, to the last digit of its repr; the largest difference of a parameter between the two models",
            "",
            "| options | old test ppl | new test ppl | | largest parameter difference | old s | new s |",
            "| --- | --- | --- | --- | --- | --- | --- |",
            *rows, "",
            f"{len(rows) - moved} of {len(rows)} settings the same; {time.perf_counter() - started:,.0f} s."]
    write_sections(args.out, [body])
    print("\n".join(body))
    return 1 if moved else 0


if __name__ == "__main__":
    sys.exit(main())
