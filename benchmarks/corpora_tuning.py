"""Issue 51, item 4: brown-fast's recipe on corpora besides Brown, and each test-time
addition auto-tuned on valid only (`nplm ppl ... auto -tune-text valid.txt -ppl test.txt`):
the network alone, + the continuous cache, + dynamic evaluation, + both, + SRILM's cache,
mixed with the corpus's KN5, and all of them together. Each row: the picks (stderr), the
ppl on valid the last pick reports, the test ppl, its ratio to KN5's and the wall time.

    python benchmarks/corpora_tuning.py --nplm .venv/bin/nplm --corpus abc=/work/bench/corpora/abc \\
        --model abc=runs/abc-fast.nplm --out table.md

A corpus folder holds train.txt, valid.txt, test.txt, vocab.txt and kn5.arpa. With
--train, the model is trained first on train.txt (valid.txt for early stopping) as a user
would: `-recipe fast` (the default, make brown-fast's), `-recipe best`, or with --recipe
auto `-max-time SECONDS` and no other option (train-nplm picks the recipe); --max-time
overrides a named recipe's budget. A model that exists is not trained again, and a run cut
short resumes from its checkpoint."""
import argparse
import os
import re
import subprocess
import sys
import time


AUTO = ["-tune-text", "{valid}", "-quiet"]
SETTINGS = [  # (row, options after -lm MODEL)
    ("network alone", []),
    ("+ -neural-cache auto", ["-neural-cache", "auto"] + AUTO),
    ("+ -dynamic-eval auto", ["-dynamic-eval", "auto"] + AUTO),
    ("+ both", ["-dynamic-eval", "auto", "-neural-cache", "auto"] + AUTO),
    ("+ -cache auto", ["-cache", "auto"] + AUTO),
    ("mixed with KN5, -lambda auto", ["-mix-lm", "{kn5}", "-bayes", "0", "-lambda", "auto"] + AUTO),
    ("all: dynamic + neural cache + KN5 + cache", ["-dynamic-eval", "auto", "-neural-cache", "auto", "-mix-lm", "{kn5}",
                                                    "-bayes", "0", "-lambda", "auto", "-cache", "auto"] + AUTO),
]
PPL = re.compile(r"\bppl= *([0-9.]+|undefined)")
PICK = re.compile(r"^nplm ppl: -(\S+) auto on \S+: (.*) \(ppl ([0-9.]+) on the tuning text")


def train_command(nplm, folder, model, recipe="fast", budget=None):
    """`nplm train-nplm` on the corpus's files by `recipe` (fast, best, or auto: the one
    train-nplm picks for `budget` seconds); a named recipe's run resumes from its checkpoint
    (train-nplm picks an auto run's recipe only when it starts)."""
    if recipe == "auto" and not budget:
        raise SystemExit("--recipe auto needs --max-time")
    chosen = [] if recipe == "auto" else ["-recipe", recipe]
    checkpoint = model + "-ckpt"
    resume = ["-resume"] if chosen and os.path.exists(os.path.join(checkpoint, "checkpoint.nplm")) else []
    return [nplm, "train-nplm", "-text", os.path.join(folder, "train.txt"), "-vocab", os.path.join(folder, "vocab.txt"),
            "-valid", os.path.join(folder, "valid.txt"), "-checkpoint", checkpoint, *resume, *chosen,
            *(["-max-time", f"{budget:g}"] if budget else []), "-log", model + ".log", "-lm", model]


def ppl_of(nplm, model, text, options):
    started = time.monotonic()
    done = subprocess.run([nplm, "ppl", "-lm", model, "-ppl", text, *options], capture_output=True, text=True)
    seconds = time.monotonic() - started
    if done.returncode:
        raise SystemExit(f"{' '.join([nplm, 'ppl', '-lm', model, '-ppl', text, *options])}: {done.stderr.strip()}")
    return float(PPL.findall(done.stdout)[-1]), done.stderr, seconds


def rows(nplm, folder, model, budget=None, jobs=1):
    """The table's rows of one corpus: (setting, picks, valid ppl, test ppl, seconds);
    `budget` is each row's -tune-max-time, `jobs` rows run side by side."""
    from concurrent.futures import ThreadPoolExecutor
    names = {"valid": os.path.join(folder, "valid.txt"), "kn5": os.path.join(folder, "kn5.arpa")}
    test = os.path.join(folder, "test.txt")
    kn5_valid, _, _ = ppl_of(nplm, names["kn5"], names["valid"], [])
    kn5_test, _, seconds = ppl_of(nplm, names["kn5"], test, [])
    found = [("KN5 alone", "", kn5_valid, kn5_test, seconds)]
    alone_valid, _, _ = ppl_of(nplm, model, names["valid"], [])
    limit = ["-tune-max-time", str(budget)] if budget else []
    with ThreadPoolExecutor(jobs) as pool:
        done = list(pool.map(lambda options: ppl_of(nplm, model, test, [option.format(**names) for option in options]
                                                      + (limit if "auto" in options else [])),
                             [options for _, options in SETTINGS]))
    for (setting, options), (test_ppl, err, seconds) in zip(SETTINGS, done):
        picks, valid = [], alone_valid
        for line in err.splitlines():
            match = PICK.match(line)
            if match:
                picks.append(f"-{match[1]}: {match[2]}")
                valid = float(match[3])
            elif line.startswith("nplm ppl: -") and " auto: " in line:
                picks.append("(" + line.split(" auto: ", 1)[1] + ")")
        found.append((setting, "; ".join(picks), valid, test_ppl, seconds))
        print(f"{os.path.basename(folder)}: {setting}: valid {valid:.2f} test {test_ppl:.2f} ({seconds:.0f} s) "
              f"{'; '.join(picks)}", file=sys.stderr, flush=True)
    return found, kn5_test


def table(corpora):
    lines = ["| corpus | setting | picked on valid | valid ppl | test ppl | test / KN5 | test / network alone | "
             "wall time |", "|---|---|---|---|---|---|---|---|"]
    for corpus, (found, kn5_test) in corpora.items():
        alone = next(test for setting, _, _, test, _ in found if setting == "network alone")
        for setting, picks, valid, test, seconds in found:
            lines.append(f"| {corpus} | {setting} | {picks or '—'} | {valid:.2f} | {test:.2f} | "
                         f"{test / kn5_test:.3f} | {test / alone:.3f} | {seconds:.0f} s |")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nplm", required=True)
    parser.add_argument("--corpus", action="append", required=True, help="NAME=FOLDER")
    parser.add_argument("--model", action="append", required=True, help="NAME=MODEL (the network of that corpus)")
    parser.add_argument("--train", action="store_true", help="Train each model first, unless it exists")
    parser.add_argument("--recipe", choices=["fast", "best", "auto"], default="fast",
                        help="How --train trains: -recipe fast or best, or auto: -max-time alone")
    parser.add_argument("--max-time", type=float, default=None, help="--train's budget in seconds (-max-time)")
    parser.add_argument("--out", required=True, help="The markdown table is written here")
    parser.add_argument("--tune-max-time", type=float, default=None, help="Each row's -tune-max-time")
    parser.add_argument("--jobs", type=int, default=1, help="Rows run side by side")
    args = parser.parse_args()
    folders = dict(item.split("=", 1) for item in args.corpus)
    models = dict(item.split("=", 1) for item in args.model)
    corpora = {}
    for name, folder in folders.items():
        if args.train and not os.path.exists(models[name]):
            subprocess.run(train_command(args.nplm, folder, models[name], args.recipe, args.max_time), check=True)
        corpora[name] = rows(args.nplm, folder, models[name], args.tune_max_time, args.jobs)
        with open(args.out, "w") as out:
            out.write(table(corpora))


if __name__ == "__main__":
    main()
