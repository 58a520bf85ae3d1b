"""`make bench-vs BASELINE=...`: training speed of this build against a baseline build.

Runs `nplm train-nplm` for one epoch with the baseline ("old") and this build ("new")
alternately, old, new, old, new, ... `--pairs` pairs per setting after one uncounted
warm-up run of each, reads words/s from each run's `-log`, and writes (replaces) one
section of BENCHMARKS.md: the median words/s of each build and the median and range of the
pair-by-pair ratios new/old. Run after run alternation keeps a drift of the machine (other
work, frequency) from favouring one build. `--at-once` runs a pair's two builds at the same
time instead, each on a core of its own (the cores swapped pair by pair), so that both see
the same moment of a machine whose speed drifts within seconds. `--baseline` equal to
`--nplm` measures the noise.
"""
import argparse
import csv
import json
import os
import random
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from run import checkout_commit, cpu_model, stamp, write_sections  # noqa: E402
from runs import RUNS, VOCAB_MIN_COUNT  # noqa: E402
from sections import BLAS_VARIABLES, NPLM, OUT  # noqa: E402

HEADING = "## Side by side: this build against a baseline build"
WORK = os.path.join(OUT, "side-by-side")
MLP9, IS = RUNS["mlp9"], RUNS["is-full"]
N0 = RUNS["is-adaptive"].samples
# After the network's shape; the same in every setting (one thread: a seed fixes the model).
COMMON = ["-epochs", "1", "-threads", "1", "-lr", "0.001", "-quiet", "-seed", "1"]
BUILD_PATHS = ("nplmtk", "cli", "cython_ext", "setup.py", "pyproject.toml")  # what a checkout's nplm is made of


class Setting:
    """One row of the table: `run`'s network trained with `options` on the first `lines`
    lines of Brown train (None: all of train.txt twice). The sizes make each run about
    10-20 s on a 2-core Xeon with one BLAS thread."""

    def __init__(self, name, label, run, options, lines):
        self.name, self.label, self.run, self.options, self.lines = name, label, run, options, lines

    @property
    def text(self):
        return os.path.join(WORK, f"train-{self.lines or 'x2'}.txt")

    def command(self, nplm, vocab, log, model):
        return [nplm, "train-nplm", "-text", self.text, "-vocab", vocab, *self.run.shape_options(), *COMMON,
                *self.options, "-log", log, "-lm", model]


LSTM_CLASS, LBL1 = RUNS["lstm-class"], RUNS["lbl1-h100"]
SETTINGS = [Setting(f"mlp9-b{batch}", f"MLP9, `-batch {batch}`", MLP9, ["-batch", str(batch)], lines)
            for batch, lines in ((1, 1000), (32, 5000), (256, 8000))] + [
    Setting("is-b1", f"IS, `-batch {IS.batch} -criterion is -samples {N0}`", IS,
            ["-batch", str(IS.batch), "-criterion", "is", "-samples", str(N0)], None),
    # the recurrent kernel (m = h = 256, class output, Adam) and the log-bilinear family's
    # blocked one (Model 1, h = 100, mini-batches of 1,000, momentum), each on its own settings
    Setting("lstm-class", "LSTM m=h=256, `-output class`, Adam", LSTM_CLASS,
            ["-tie", "-dropout", "0.3", "-output", "class", "-optimizer", "adam", "-lr", "0.002"], 4000),
    Setting("lbl1", "log-bilinear Model 1, h=100, `-batch 1000`", LBL1,
            ["-batch", "1000", *[o for o in LBL1.extra if o != "-freeze-features"]], 8000)]
WARM_UP = Setting("warm-up", "", MLP9, ["-batch", "32"], 200)


def make_texts(brown):
    """The settings' texts (and the warm-up's) in WORK; their word counts by file."""
    train = os.path.join(brown, "train.txt")
    lines = open(train).read().splitlines(keepends=True)
    words = {}
    for setting in SETTINGS + [WARM_UP]:
        chosen = lines[:setting.lines] if setting.lines else lines + lines
        with open(setting.text, "w") as f:
            f.writelines(chosen)
        words[setting.text] = sum(len(line.split()) for line in chosen)
    return words


def build_identity(nplm):
    """`nplm`'s path, and the commit of the checkout whose .venv holds it (if any)."""
    path = os.path.abspath(nplm)
    parts = path.split(os.sep)
    if ".venv" in parts:
        commit = checkout_commit(os.sep.join(parts[:parts.index(".venv")]) or os.sep, BUILD_PATHS)
        if commit:
            return f"`{path}`, checkout {commit}"
    return f"`{path}`"


class Run:
    """One run started: `core` pins it to that core (None: anywhere)."""

    def __init__(self, setting, nplm, vocab, pair, side, env, core=None):
        self.setting, self.pair, self.side = setting, pair, side
        self.stem = os.path.join(WORK, "logs", f"{setting.name}.{pair}.{side}")
        self.log = self.stem + ".log"
        if os.path.exists(self.log):
            os.remove(self.log)
        self.command = setting.command(nplm, vocab, self.log, os.path.join(WORK, "logs", f"{setting.name}.{side}.nplm"))
        self.load = os.getloadavg()[0]
        self.start = time.perf_counter()
        pin = None if core is None else (lambda: os.sched_setaffinity(0, {core}))
        with open(self.stem + ".out", "w") as out:
            self.process = subprocess.Popen(self.command, stdout=out, stderr=subprocess.STDOUT, env=env,
                                            preexec_fn=pin)

    def finish(self):
        """Waits for the run; its row for runs.csv (words_per_s and train_ppl empty if it
        failed) and its command."""
        rc = self.process.wait()
        row = dict(setting=self.setting.name, pair=self.pair, side=self.side, words_per_s="", seconds="",
                   wall=f"{time.perf_counter() - self.start:.2f}", load1=f"{self.load:.2f}", train_ppl="", rc=rc)
        try:
            record = json.loads(open(self.log).read().splitlines()[-1])
            row.update(words_per_s=record["words_per_s"], seconds=record["seconds"],
                       train_ppl=repr(record["train_ppl"]))
        except (OSError, IndexError, KeyError, ValueError):
            pass
        failed = f"  FAILED (exit status {rc}), see {self.stem}.out" if rc or row["words_per_s"] == "" else ""
        print(f"  {self.setting.name:9} pair {self.pair} {self.side:3} {row['words_per_s'] or 0:>10,.0f} words/s  "
              f"wall {row['wall']:>6} s  load {row['load1']}{failed}", file=sys.stderr)
        return row, self.command


def train_once(setting, nplm, vocab, pair, side, env):
    """One run, alone; its row for runs.csv and its command."""
    return Run(setting, nplm, vocab, pair, side, env).finish()


def train_at_once(setting, builds, vocab, pair, env, cores):
    """A pair's runs at the same time, old on cores[0] and new on cores[1]."""
    runs = [Run(setting, nplm, vocab, pair, side, env, core) for (side, nplm), core in zip(builds.items(), cores)]
    return [run.finish() for run in runs]


def table_row(setting, words, rows):
    """The markdown row of one setting from its runs' rows."""
    pairs = {}
    for row in rows:
        pairs.setdefault(row["pair"], {})[row["side"]] = row
    complete = [p for p in pairs.values() if all(side in p and p[side]["words_per_s"] != "" for side in ("old", "new"))]
    if not complete:
        return f"| {setting.label} | {words:,} | - | - | - | - | - | no run of both builds succeeded |"
    old = [float(p["old"]["words_per_s"]) for p in complete]
    new = [float(p["new"]["words_per_s"]) for p in complete]
    ratios = [n / o for o, n in zip(old, new)]
    differ = [p for p in complete if p["old"]["train_ppl"] != p["new"]["train_ppl"]]
    same = (f"NO (old {differ[0]['old']['train_ppl']}, new {differ[0]['new']['train_ppl']})" if differ
            else "yes")
    missing = f" ({len(pairs) - len(complete)} pairs failed)" if len(complete) < len(pairs) else ""
    low, high = median_interval(ratios)
    return (f"| {setting.label} | {words:,} | {statistics.median(old):,.0f} | {statistics.median(new):,.0f} | "
            f"**{statistics.median(ratios):.3f}**{missing} | {low:.3f}-{high:.3f} | {min(ratios):.3f}-{max(ratios):.3f} "
            f"| {same} |")


def median_interval(ratios, draws=10000):
    """A 95% bootstrap interval of the median of the pairs' ratios (seeded: the same pairs give
    the same interval): the precision a table row can claim."""
    rng = random.Random(0)
    medians = sorted(statistics.median(rng.choices(ratios, k=len(ratios))) for _ in range(draws))
    return medians[int(0.025 * draws)], medians[int(0.975 * draws) - 1]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", required=True, help="the other build's nplm, e.g. ../old/.venv/bin/nplm")
    parser.add_argument("--nplm", default=NPLM, help="this build's nplm (default: beside this Python)")
    parser.add_argument("--brown", default="../shared/data/brown")
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--blas-threads", type=int, default=1,
                        help="OPENBLAS/OMP/MKL_NUM_THREADS of the runs (0: leave the environment as it is)")
    parser.add_argument("--at-once", action="store_true",
                        help="run each pair's builds at the same time, one a core (the cores swapped pair by pair)")
    parser.add_argument("--settings", default=",".join(setting.name for setting in SETTINGS),
                        help="the rows to run, by name (default: every one)")
    parser.add_argument("--out", default="BENCHMARKS.md")
    args = parser.parse_args()
    by_name = {setting.name: setting for setting in SETTINGS}
    unknown = [name for name in args.settings.split(",") if name not in by_name]
    if unknown:
        parser.error(f"--settings: unknown {', '.join(unknown)} (choose from {', '.join(by_name)})")
    settings = [by_name[name] for name in args.settings.split(",")]
    builds = {"old": args.baseline, "new": args.nplm}
    for side, nplm in builds.items():
        if not (os.path.isfile(nplm) and os.access(nplm, os.X_OK)):
            parser.error(f"{nplm} ({side} build) is not an executable file")
    if args.pairs < 1:
        parser.error("--pairs must be at least 1")
    cores = sorted(os.sched_getaffinity(0))
    if args.at_once and len(cores) < 2:
        parser.error("--at-once needs two cores")
    env = dict(os.environ)
    if args.blas_threads:
        # -threads 1 still lets OpenBLAS start one thread per core; on a shared 2-core machine
        # that made runs up to 10x slower whenever other work was busy.
        env.update({name: str(args.blas_threads) for name in BLAS_VARIABLES})
    os.makedirs(os.path.join(WORK, "logs"), exist_ok=True)
    started = time.perf_counter()
    vocab = os.path.join(WORK, "vocab.txt")
    vocab_command = [args.nplm, "vocab", "-text", os.path.join(args.brown, "train.txt"), "-min-count",
                     str(VOCAB_MIN_COUNT), "-write-vocab", vocab]
    subprocess.run(vocab_command, check=True, env=env)
    words = make_texts(args.brown)
    print(f"side by side: old {args.baseline}, new {args.nplm}, {args.pairs} pairs; warm-up (not counted)",
          file=sys.stderr)
    for side, nplm in builds.items():
        train_once(WARM_UP, nplm, vocab, 0, side, env)
    rows, commands = [], {}
    for setting in settings:
        for pair in range(1, args.pairs + 1):
            if args.at_once:
                done = train_at_once(setting, builds, vocab, pair, env, cores[:2] if pair % 2 else [cores[1], cores[0]])
            else:
                done = [train_once(setting, nplm, vocab, pair, side, env) for side, nplm in builds.items()]
            for (row, command), side in zip(done, builds):
                commands.setdefault((setting, side), command)
                rows.append(row)
    with open(os.path.join(WORK, "runs.csv"), "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    loads = [float(row["load1"]) for row in rows]

    def shown(command):
        return " ".join(["$NPLM"] + command[1:]).replace(args.brown.rstrip("/") + "/", "BROWN/")

    texts = [f"head -n {s.lines} BROWN/train.txt > {s.text}" if s.lines else
             f"cat BROWN/train.txt BROWN/train.txt > {s.text}" for s in settings]
    blas = " ".join(f"{name}={env[name]}" for name in BLAS_VARIABLES if name in env) or "unset"
    body = [HEADING, "", stamp(checkout_commit(paths=BUILD_PATHS) or "unknown"), "",
            "Written by `make bench-vs BASELINE=...` (benchmarks/side_by_side.py); `make bench` keeps this section "
            "as it is.", "",
            f"- new (this build): {build_identity(args.nplm)}",
            f"- old (baseline): {build_identity(args.baseline)}",
            f"- machine: {cpu_model()}, {os.cpu_count()} cores; {blas} (`-threads 1` alone still lets OpenBLAS "
            "start one thread per core, which on a shared machine made runs up to 10x slower)",
            f"- method: per setting {args.pairs} pairs of one-epoch runs, "
            + ("old and new at the same time, each pinned to a core of its own, the cores swapped pair by pair, "
               if args.at_once else "old then new, one after another, ")
            + "after one uncounted warm-up run of each build (MLP9, `-batch 32`, 200 lines); words/s from each "
            "run's `-log`; new/old is taken pair by pair (above 1: this build is faster): its median, a 95% "
            "bootstrap interval of that median, and the range. "
            "Same train ppl: both builds logged the same training perplexity, to the last digit, in every pair.",
            f"- networks from benchmarks/runs.py: MLP9 is `mlp9` ({MLP9.architecture}); IS is `is-full`'s network "
            f"({IS.architecture}) trained by importance sampling with `is-adaptive`'s N0 = {N0} samples.", "",
            f"Commands (`$NPLM` is each build's nplm, `BROWN` is {args.brown}; pair 1 of this build, the "
            "other runs differ in `-log` and `-lm` only):", "",
            "```sh", shown(vocab_command), *texts,
            *(shown(commands[s, "new"]) for s in settings), "```", "",
            "| setting | words | old words/s | new words/s | new/old median | its 95% interval | min-max "
            "| same train ppl |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    body += [table_row(s, words[s.text], [row for row in rows if row["setting"] == s.name]) for s in settings]
    body += ["", f"1-minute load average at the runs' starts: min {min(loads):.2f}, median "
             f"{statistics.median(loads):.2f}, max {max(loads):.2f}; {len(rows) + 2} runs in "
             f"{time.perf_counter() - started:,.0f} s. Per run: {WORK}/runs.csv (not kept in git)."]
    write_sections(args.out, [body])
    print("\n".join(body))
    failed = [row for row in rows if row["rc"] or row["words_per_s"] == ""]
    if failed:
        sys.exit(f"side by side: {len(failed)} runs failed (logs in {WORK}/logs)")


if __name__ == "__main__":
    main()
