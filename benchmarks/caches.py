"""`make brown-caches`: caches and dynamic evaluation on Brown (issue 36, items 2 and 3),
written to BENCHMARKS.md.

Models: KN5 of Brown train (the runs' vocabulary) and our best LSTM (lstm-class of
`make brown-lstm`, trained first when missing: about 15 min). Each setting is picked on
Brown valid by a grid (scored through the library, whose numbers are `nplm ppl`'s), then
the chosen one is scored on Brown test by the `nplm ppl` command shown, timed as a whole
process. SRILM's `ngram` scores the unigram-cache row too when SRILM_BIN is set (the two
reports compared byte for byte)."""
import argparse
import itertools
import math
import os
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from run import machine_stamp, write_sections  # noqa: E402
from runs import RUNS, RUNS_DIR, VOCAB_MIN_COUNT, VOCAB_PATH  # noqa: E402

from nplmtk.cache import ContinuousCache, continuous_cache_probabilities, with_cache  # noqa: E402
from nplmtk.corpus import Corpus  # noqa: E402
from nplmtk.lm import LN10  # noqa: E402
from nplmtk.models import load  # noqa: E402
from nplmtk.neural.dynamic import DynamicEvaluation, dynamic_logprobs, gradient_scale  # noqa: E402

HEADING = "## Caches and dynamic evaluation on Brown (issue 36)"
LSTM = RUNS["lstm-class"]
UNIGRAM_GRID = dict(length=(200, 500, 700, 1000, 2000), weight=(0.05, 0.1, 0.15, 0.2))
NEURAL_GRID = dict(window=(1000, 2000, 3000), theta=(0.2, 0.3, 0.4), weight=(0.1, 0.15, 0.2, 0.25, 0.3))
SEGMENT = 20
SGD_GRID = dict(lr=(0.1, 0.3, 1.0))
RMS_GRID = dict(lr=(0.001, 0.003, 0.01), decay=(0.0, 0.02))
RMS_WORDS = 20000
MIX_GRID = (0.6, 0.7, 0.8, 0.9)
TUNE_SENTENCES = 500  # of valid, for dynamic evaluation's grid (each setting a pass of backpropagation)


METHODS = ("The unigram cache is SRILM's (`ngram -cache N -cache-lambda L`); the continuous cache is Grave, Joulin "
           "& Usunier 2017 (the words that followed the last W top-layer states, weighted by exp(theta h_t . h_i), "
           "mixed in with weight L); dynamic evaluation is Krause et al. 2018 (segments of 20 predictions, each "
           "scored before a gradient step on it: SGD, and the RMS-normalised step whose scale comes from segments "
           f"of the first {RMS_WORDS:,} words of Brown train, with a decay toward the trained weights).")


def ppl(log_natural):
    finite = log_natural[np.isfinite(log_natural)]
    return math.exp(-finite.mean())


def mixed(logp_a, logp_b, weight_a):
    with np.errstate(divide="ignore"):
        return np.log(weight_a * np.exp(logp_a) + (1 - weight_a) * np.exp(logp_b))


def timed_report(args):
    """(wall seconds, the report's ppl, stdout) of one whole command."""
    start = time.perf_counter()
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    seconds = time.perf_counter() - start
    return seconds, float(out.split("ppl= ")[1].split()[0]), out


def evaluate(network, args):
    """KN5 and the network of the run `network` (trained first when missing) with caches,
    dynamic evaluation and KN5, each setting picked on Brown valid, then scored on test by
    its command: (notes on the picks, picks, rows (label, test ppl, seconds, command),
    SRILM's line, whether the network was trained now)."""
    train, valid, test = (os.path.join(args.brown, f"{name}.txt") for name in ("train", "valid", "test"))
    os.makedirs(RUNS_DIR, exist_ok=True)
    if not os.path.exists(VOCAB_PATH):
        subprocess.run([args.nplm, "vocab", "-text", train, "-min-count", str(VOCAB_MIN_COUNT), "-write-vocab",
                        VOCAB_PATH], check=True)
    kn5_path = os.path.join(RUNS_DIR, "kn5.arpa")
    if not os.path.exists(kn5_path):
        subprocess.run([args.nplm, "ngram-count", "-text", train, "-order", "5", "-vocab", VOCAB_PATH, "-unk",
                        "-lm", kn5_path], check=True)
    trained_now = not os.path.exists(network.model_path)
    if trained_now:
        subprocess.run(network.command(args.nplm, args.brown), check=True)
    kn5, lstm = load(kn5_path), load(network.model_path)
    valid_kn5, valid_lstm = Corpus.read(valid, kn5.vocab), Corpus.read(valid, lstm.vocab)
    picked, notes = {}, []

    # the unigram cache on KN5
    kn5_logp = kn5.logprobs(valid_kn5)
    grid = []
    for length in UNIGRAM_GRID["length"]:
        cache_logp = with_cache(kn5, "kn5", length, 0.1, True).components[1].logprobs(valid_kn5)
        for weight in UNIGRAM_GRID["weight"]:
            model = with_cache(kn5, "kn5", length, weight, True)
            log10 = model.log10probs_from(np.array([kn5_logp, cache_logp]), valid_kn5)
            grid.append((ppl(log10 * LN10), length, weight))
    best = min(grid)
    picked["unigram"] = best[1:]
    notes.append(f"unigram cache on KN5 (N x L over {len(grid)} settings): valid {ppl(kn5_logp):.2f} alone, "
                 f"{best[0]:.2f} at N = {best[1]}, L = {best[2]} (worst {max(grid)[0]:.2f})")

    # the continuous cache on the LSTM
    lstm_logp, states = lstm.logprobs_and_states(valid_lstm)
    targets = np.asarray(valid_lstm.targets())
    grid = []
    for window, theta in itertools.product(NEURAL_GRID["window"], NEURAL_GRID["theta"]):
        cache_p = continuous_cache_probabilities(states, targets, window, theta)
        for weight in NEURAL_GRID["weight"]:
            with np.errstate(divide="ignore"):
                grid.append((ppl(np.log((1 - weight) * np.exp(lstm_logp) + weight * cache_p)), window, theta, weight))
    best = min(grid)
    picked["neural"] = best[1:]
    notes.append(f"continuous cache on the LSTM (W x theta x L over {len(grid)} settings): valid {ppl(lstm_logp):.2f} "
                 f"alone, {best[0]:.2f} at W = {best[1]}, theta = {best[2]}, L = {best[3]} "
                 f"(worst {max(grid)[0]:.2f})")
    neural = ContinuousCache(lstm, *picked["neural"]).logprobs(valid_lstm)
    weights = [(ppl(mixed(neural, kn5_logp, w)), w) for w in MIX_GRID]
    picked["neural+kn5"] = min(weights)[1]
    weights = [(ppl(mixed(lstm_logp, kn5_logp, w)), w) for w in MIX_GRID]
    picked["lstm+kn5"] = min(weights)[1]

    # dynamic evaluation of the LSTM on the first sentences of valid
    tune = valid_lstm.first_sentences(TUNE_SENTENCES)
    base = ppl(lstm.logprobs(tune))
    sgd = [(ppl(dynamic_logprobs(lstm, tune, DynamicEvaluation(SEGMENT, lr))), lr) for lr in SGD_GRID["lr"]]
    picked["sgd"] = min(sgd)[1]
    scale = gradient_scale(lstm, Corpus.read(train, lstm.vocab).within_words(RMS_WORDS), SEGMENT)  # as ppl takes it
    rms = [(ppl(dynamic_logprobs(lstm, tune, DynamicEvaluation(SEGMENT, lr, decay), scale=scale)), lr, decay)
           for lr, decay in itertools.product(RMS_GRID["lr"], RMS_GRID["decay"])]
    picked["rms"] = min(rms)[1:]
    notes.append(f"dynamic evaluation of the LSTM (segments of {SEGMENT}) on valid's first {TUNE_SENTENCES} "
                 f"sentences ({len(tune.targets()):,} tokens; {base:.2f} without): SGD "
                 + ", ".join(f"lr {lr} {p:.2f}" for p, lr in sorted(sgd, key=lambda x: x[1]))
                 + "; RMS " + ", ".join(f"lr {lr} decay {d} {p:.2f}" for p, lr, d in sorted(rms, key=lambda x: x[1:])))

    # each picked setting scored on test by the command
    n, u, neural_args = args.nplm, picked["unigram"], picked["neural"]
    cache_flags = ["-neural-cache", str(neural_args[0]), "-neural-cache-theta", str(neural_args[1]),
                   "-neural-cache-lambda", str(neural_args[2])]
    rows = [
        ("KN5", [n, "ppl", "-lm", kn5_path, "-ppl", test]),
        ("KN5 + unigram cache", [n, "ppl", "-lm", kn5_path, "-unk", "-cache", str(u[0]), "-cache-lambda", str(u[1]),
                                 "-ppl", test]),
        ("LSTM", [n, "ppl", "-lm", network.model_path, "-ppl", test]),
        ("LSTM + KN5", [n, "ppl", "-lm", network.model_path, "-mix-lm", kn5_path, "-bayes", "0", "-lambda",
                        str(picked["lstm+kn5"]), "-ppl", test]),
        ("LSTM + continuous cache", [n, "ppl", "-lm", network.model_path, *cache_flags, "-ppl", test]),
        ("(LSTM + continuous cache) + KN5", [n, "ppl", "-lm", network.model_path, *cache_flags, "-mix-lm", kn5_path,
                                             "-bayes", "0", "-lambda", str(picked["neural+kn5"]), "-ppl", test]),
        ("LSTM, dynamic evaluation (SGD)", [n, "ppl", "-lm", network.model_path, "-dynamic-eval", str(SEGMENT),
                                            "-dynamic-lr", str(picked["sgd"]), "-ppl", test]),
        ("LSTM, dynamic evaluation (RMS)", [n, "ppl", "-lm", network.model_path, "-dynamic-eval", str(SEGMENT),
                                            "-dynamic-lr", str(picked["rms"][0]), "-dynamic-decay",
                                            str(picked["rms"][1]), "-dynamic-rms-text", train, "-dynamic-rms-words",
                                            str(RMS_WORDS), "-ppl", test]),
    ]
    results = []
    for label, command in rows:
        seconds, value, out = timed_report(command)
        results.append((label, value, seconds, command))
        print(label, value, f"{seconds:.1f} s", flush=True)
    srilm_line = "SRILM_BIN not set: SRILM's `ngram -cache` not run."
    srilm = os.environ.get("SRILM_BIN")
    if srilm:
        theirs = subprocess.run([os.path.join(srilm, "ngram"), "-lm", kn5_path, "-order", "5", "-unk", "-cache",
                                 str(u[0]), "-cache-lambda", str(u[1]), "-ppl", test], check=True,
                                capture_output=True, text=True).stdout
        ours = subprocess.run(rows[1][1], check=True, capture_output=True, text=True).stdout
        srilm_line = ("SRILM 1.7.3's `ngram -order 5 -unk -cache ... -ppl` on the same files: its report "
                      + ("identical to ours, byte for byte." if theirs == ours else f"DIFFERS: {theirs!r}"))

    return notes, picked, results, srilm_line, trained_now


def evaluation_lines(notes, picked, results, srilm_line):
    """evaluate's picks and test rows as BENCHMARKS.md lines."""
    return ([f"- {note}" for note in notes]
            + [f"- mixtures with KN5: the network's weight from {', '.join(map(str, MIX_GRID))}, on valid: "
               f"{picked['lstm+kn5']} for the network, {picked['neural+kn5']} for the network with its cache.", "",
               "On Brown test (161,059 words, 10,121 sentences), each row the whole command, timed once:", "",
               *results_table(results), "", srilm_line])


def results_table(results):
    """The test rows as a markdown table, against KN5 (the first row) and the network alone (the third)."""
    kn5_test, lstm_test = results[0][1], results[2][1]
    lines = ["| model | test ppl | vs KN5 | vs the LSTM | wall time | command |", "| --- | --- | --- | --- | --- | --- |"]
    for label, value, seconds, command in results:
        shown = " ".join(os.path.basename(a) if os.path.sep in a else a for a in command[1:])
        lines.append(f"| {label} | {value:.2f} | {value / kn5_test:.3f} | {value / lstm_test:.3f} | {seconds:.1f} s "
                     f"| `nplm {shown}` |")
    return lines


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--brown", default="../shared/data/brown")
    parser.add_argument("--nplm", default="nplm")
    parser.add_argument("--out", default="BENCHMARKS.md")
    args = parser.parse_args()
    notes, picked, results, srilm_line, trained_now = evaluate(LSTM, args)
    body = [HEADING, "", machine_stamp(), "",
            "`make brown-caches` (benchmarks/caches.py). Models: KN5 of Brown train (`nplm ngram-count -order 5 "
            f"-vocab vocab.txt -unk`, vocabulary `nplm vocab -min-count {VOCAB_MIN_COUNT}`) and our best LSTM "
            f"({LSTM.name} of `make brown-lstm`: `{' '.join(LSTM.options())}`"
            + (", trained in this run" if trained_now else "") + f"). {METHODS} Every setting was picked on Brown "
            "valid:", ""]
    body += evaluation_lines(notes, picked, results, srilm_line)
    write_sections(args.out, [body])
    print("\n".join(body))


if __name__ == "__main__":
    main()
