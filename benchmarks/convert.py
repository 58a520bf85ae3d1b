"""`make brown-convert`: the LSTM as a back-off n-gram model for a decoder's first pass
(issue 37, item 2), written to BENCHMARKS.md.

The lstm-class LSTM of benchmarks/runs.py (runs/lstm-class.nplm, trained first when
missing) converted by `nplm convert-lm` two ways: the variational approximation (Deoras et
al. 2011: KN5 estimated on text sampled from the LSTM) and Arisoy et al. 2014's rewrite (KN5's
n-grams with the LSTM's own probabilities); each alone, merged with KN5 of Brown train into one
back-off model (`nplm ppl -mix-lm -write-lm`, the weight by EM on Brown valid with `nplm mix`)
and entropy-pruned at several thresholds and to KN5's own size (`-prune-to-entries`): test
perplexity against entries. The goal: 5% below KN5 (146.84) at no more entries than KN5.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from run import machine_stamp, write_sections  # noqa: E402
from runs import RUNS, VOCAB_MIN_COUNT, VOCAB_PATH  # noqa: E402

HEADING = "## A neural model as a back-off n-gram on Brown (issue 37)"
LSTM = RUNS["lstm-class"]
GOAL_BELOW = 0.05  # the converted model's test ppl at least 5% below KN5's, at no more entries
THRESHOLDS = (1e-9, 1e-8, 3e-8, 1e-7)


def run(args, what):
    """Run an nplm command: (wall seconds, stdout, stderr)."""
    print(f"convert: {what} ...", file=sys.stderr, flush=True)
    start = time.perf_counter()
    done = subprocess.run(args, check=True, capture_output=True, text=True)
    return time.perf_counter() - start, done.stdout, done.stderr


def entries(arpa):
    """The n-grams an ARPA file lists, by order (its \\data\\ header)."""
    sizes = []
    with open(arpa, encoding="utf-8") as f:
        for line in f:
            if line.startswith("ngram "):
                sizes.append(int(line.split("=")[1]))
            elif line.startswith("\\1-grams:"):
                return sizes
    return sizes


def ppl_of(stdout):
    return float(re.search(r" ppl= ([0-9.e+]+)", stdout).group(1))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--brown", default="../shared/data/brown")
    parser.add_argument("--nplm", default=os.path.join(os.path.dirname(sys.executable), "nplm"))
    parser.add_argument("--lstm", default=LSTM.model_path,
                        help="the LSTM to convert (default: runs/lstm-class.nplm, trained when missing)")
    parser.add_argument("--words", type=int, default=5_000_000, help="words sampled from the LSTM")
    parser.add_argument("--order", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--work", default=os.path.join("bench", "out", "convert"))
    parser.add_argument("--out", default="BENCHMARKS.md")
    args = parser.parse_args()
    nplm, order = args.nplm, args.order
    train, valid, test = (os.path.join(args.brown, f"{name}.txt") for name in ("train", "valid", "test"))
    work = args.work
    if os.path.exists(work):
        shutil.rmtree(work)
    os.makedirs(work)
    path = lambda name: os.path.join(work, name)  # noqa: E731

    trained = ""
    if not os.path.exists(args.lstm):
        if args.lstm != LSTM.model_path:
            sys.exit(f"convert: {args.lstm}: no such file")
        os.makedirs(os.path.dirname(VOCAB_PATH), exist_ok=True)
        subprocess.run([nplm, "vocab", "-text", train, "-min-count", str(VOCAB_MIN_COUNT), "-write-vocab",
                        VOCAB_PATH], check=True)
        print(f"convert: training {LSTM.model_path} ...", file=sys.stderr)
        start = time.perf_counter()
        subprocess.run(LSTM.command(nplm, args.brown), check=True)
        trained = f" (trained by this run in {(time.perf_counter() - start) / 60:.1f} min)"
    lstm = path("lstm.nplm")
    shutil.copyfile(args.lstm, lstm)

    steps = []  # (what, seconds)
    seconds, _, _ = run([nplm, "vocab", "-text", train, "-min-count", str(VOCAB_MIN_COUNT), "-write-vocab",
                         path("vocab.txt")], "vocabulary")
    seconds, _, _ = run([nplm, "ngram-count", "-text", train, "-order", str(order), "-vocab", path("vocab.txt"),
                         "-unk", "-kndiscount", "-interpolate", "-lm", path("kn.arpa")], "KN of Brown train")
    steps.append((f"KN{order} of Brown train (`nplm ngram-count`)", seconds))
    budget = sum(entries(path("kn.arpa")))
    rows = []  # (model, sampled words, entries by order, test ppl, note)

    def score(label, arpa, words=None, note=""):
        seconds, out, _ = run([nplm, "ppl", "-lm", arpa, "-text", test], f"scoring {label}")
        rows.append((label, words, entries(arpa), ppl_of(out), note))
        return rows[-1][3]

    kn_ppl = score(f"KN{order} of Brown train", path("kn.arpa"))
    goal = kn_ppl * (1 - GOAL_BELOW)
    seconds, out, _ = run([nplm, "ppl", "-lm", lstm, "-text", test], "scoring the LSTM")
    lstm_ppl = ppl_of(out)
    steps.append(("the LSTM's test ppl (`nplm ppl`)", seconds))

    # the sampler's speed alone: 20,000 sentences, one core's BLAS
    seconds, out, _ = run(["env", "OPENBLAS_NUM_THREADS=1", nplm, "generate", "-lm", lstm, "-n", "20000", "-seed",
                           str(args.seed), "-max-words", "50000"], "sampling speed")
    speed = sum(len(line.split()) + 1 for line in out.splitlines()) / seconds

    seconds, _, _ = run(["env", "OPENBLAS_NUM_THREADS=1", nplm, "convert-lm", "-lm", lstm, "-order", str(order),
                         "-sample-words", str(args.words), "-seed", str(args.seed), "-write-text", path("sampled.txt"),
                         "-write-lm", path("va.arpa"), "-quiet"], "variational approximation")
    steps.append((f"`convert-lm -sample-words {args.words:,}`: sampling and KN{order} (one core)", seconds))
    seconds, _, _ = run([nplm, "convert-lm", "-lm", lstm, "-ngrams", path("kn.arpa"), "-rewrite", "-write-lm",
                         path("arisoy.arpa"), "-quiet"], "Arisoy's rewrite")
    steps.append((f"`convert-lm -ngrams kn{order}.arpa -rewrite`: the LSTM's probabilities for KN{order}'s n-grams",
                  seconds))
    score(f"variational: KN{order} of the sampled text", path("va.arpa"), args.words)
    score(f"Arisoy: KN{order}'s n-grams, the LSTM's probabilities", path("arisoy.arpa"))

    components = {"va": ("variational", path("va.arpa")), "arisoy": ("Arisoy", path("arisoy.arpa"))}
    for names in (("va",), ("arisoy",), ("va", "arisoy")):
        label = " + ".join(components[n][0] for n in names) + f" + KN{order}"
        arpas = [components[n][1] for n in names] + [path("kn.arpa")]
        seconds, out, _ = run([nplm, "mix", *[a for arpa in arpas for a in ("-lm", arpa)], "-text", valid],
                              f"EM weights of {label}")
        weights = [float(w) for w in re.search(r"weights all contexts, \d+ tokens: ([0-9. ]+)", out).group(1).split()]
        name = "+".join(names) + "+kn"
        mix = ["-mix-lm", arpas[1], "-lambda", f"{weights[0]:.6f}"] + (
            ["-mix-lm2", arpas[2], "-mix-lambda2", f"{weights[2]:.6f}"] if len(arpas) == 3 else [])
        seconds, _, _ = run([nplm, "ppl", "-lm", arpas[0], *mix, "-write-lm", path(f"{name}.arpa")],
                            f"merging {label}")
        steps.append((f"{label} merged into one model (`ppl -mix-lm -write-lm`)", seconds))
        words = args.words if "va" in names else None
        lambdas = " ".join(f"{w:.3f}" for w in weights)
        score(f"{label}, merged (weights {lambdas} by EM on valid)", path(f"{name}.arpa"), words)
        seconds, _, err = run([nplm, "ppl", "-lm", path(f"{name}.arpa"), "-prune-to-entries", str(budget),
                               "-write-lm", path(f"{name}-budget.arpa")], f"pruning {label} to KN's size")
        steps.append((f"{label} pruned to {budget:,} entries (`ppl -prune-to-entries`)", seconds))
        threshold = re.search(r"-prune ([0-9.e+-]+)", err).group(1)
        score(f"{label}, pruned to KN{order}'s size", path(f"{name}-budget.arpa"), words, f"-prune {threshold}")
        if len(names) < 2:
            continue
        for t in THRESHOLDS:  # size against ppl, for the three together
            run([nplm, "ppl", "-lm", path(f"{name}.arpa"), "-prune", str(t), "-write-lm", path(f"{name}-{t}.arpa")],
                f"pruning {label} at {t}")
            score(f"{label}, pruned", path(f"{name}-{t}.arpa"), words, f"-prune {t:g}")
            os.remove(path(f"{name}-{t}.arpa"))

    body = [HEADING, "", machine_stamp(), "",
            f"`make brown-convert` (benchmarks/convert.py): the LSTM of `make brown-lstm` ({LSTM.name} in "
            f"benchmarks/runs.py: {LSTM.architecture}, `{' '.join(LSTM.options())}`, Brown train{trained}; test ppl "
            f"{lstm_ppl:.2f}) as a back-off model of order {order} over its vocabulary (`nplm vocab -min-count "
            f"{VOCAB_MIN_COUNT}`), two ways:", "",
            f"- **variational** (Deoras et al. 2011): {args.words:,} words sampled from the LSTM (seed {args.seed}; "
            f"`nplm generate`'s sampler: 1,024 sentences side by side, class then word; {speed:,.0f} words/s on one "
            f"core), interpolated modified Kneser-Ney of order {order} estimated on them;",
            f"- **Arisoy** (Arisoy et al. 2014): the n-grams of KN{order} of Brown train, each with the LSTM's own "
            "probability p(w | h) (the LSTM reads `<s>`, then h: an n-gram's context is read as if it began a "
            "sentence), the unigrams KN's, the back-off weights recomputed;", "",
            f"each, and the two together, then merged with KN{order} of Brown train into one back-off model "
            "(SRILM's static interpolation, pairwise in the order named; the weights by EM on Brown valid, `nplm "
            f"mix`), and the merged model entropy-pruned (Stolcke 1998) to KN{order}'s own size ({budget:,} "
            "entries) by `-prune-to-entries`, and the three together at fixed thresholds too:", "",
            f"    nplm convert-lm -lm lstm.nplm -order {order} -sample-words {args.words} -seed {args.seed} "
            "-write-lm va.arpa",
            f"    nplm convert-lm -lm lstm.nplm -ngrams kn{order}.arpa -rewrite -write-lm arisoy.arpa",
            f"    nplm mix -lm va.arpa -lm kn{order}.arpa -text valid.txt",
            f"    nplm ppl -lm va.arpa -mix-lm kn{order}.arpa -lambda L -write-lm va+kn.arpa",
            f"    nplm mix -lm va.arpa -lm arisoy.arpa -lm kn{order}.arpa -text valid.txt",
            f"    nplm ppl -lm va.arpa -mix-lm arisoy.arpa -mix-lm2 kn{order}.arpa -lambda L1 -mix-lambda2 L3 "
            "-write-lm va+arisoy+kn.arpa",
            f"    nplm ppl -lm va+kn.arpa -prune-to-entries {budget} -write-lm va+kn-budget.arpa",
            "    nplm ppl -lm MODEL.arpa -text test.txt", "",
            f"The goal: test ppl at most {goal:.2f} (5% below KN{order}'s {kn_ppl:.2f}) with at most {budget:,} "
            "entries; **goal** marks the rows that meet it.", "",
            "| model | sampled words | entries (by order) | test ppl | vs KN | pruning | |",
            "| --- | --- | --- | --- | --- | --- | --- |"]
    for label, words, sizes, ppl, note in rows:
        meets = ppl <= goal and sum(sizes) <= budget
        body.append(f"| {label} | {f'{words:,}' if words else '—'} | {sum(sizes):,} ({'/'.join(map(str, sizes))}) | "
                    f"{ppl:.2f} | {(ppl / kn_ppl - 1) * 100:+.1f}% | {note or '—'} | {'**goal**' if meets else ''} |")
    body += ["", "Time of each step (wall, the whole command):", "",
             "| step | seconds |", "| --- | --- |"]
    body += [f"| {what} | {seconds:.1f} |" for what, seconds in steps]
    write_sections(args.out, [body])
    print("\n".join(body))


if __name__ == "__main__":
    main()
