"""`make brown-transformer`: the Transformer on Brown within the 2-hour budget (issue 52,
item 4): its ablation at a shorter budget, the best variant on valid trained for the whole
budget, then scored on test alone, mixed with KN5 and mixed with brown-best's LSTM (each
mixture's weight picked on valid, the test score by `nplm ppl -mix-lm`), written to
BENCHMARKS.md.

The ablation (ABLATION_BUDGET seconds each, `-max-time`, early stopping on valid): the base
(Transformer-XL's relative positions with a memory of MEMORY steps, cosine schedule), without
the memory, with learned and with sinusoidal positions, and with the inverse and the inverse
square-root schedules. The cosine schedule reaches 0 at the end of each run's budget (`-lr-horizon 0`
with `-max-time`: the trainer foretells the updates from the epochs' pace); the warm-up and
the inverse schedule's decay follow the updates the budget allows at the speed measured
(WORDS_PER_S before any run; the base ablation run's for the long run). The ablation's table
and the long run's go to sections of their own: the whole job takes about 4 hours, so
--ablation-only stops after the first, and --picked VARIANT runs the second alone.
Models and logs go to --runs (trained when missing: delete them to train again); brown-best's
LSTM (runs/lstm-awd.nplm) is trained first when missing, at its own budget. --budget-scale
scales every budget, so that a smoke run on a cut of Brown takes a minute or two."""
import argparse
import json
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from caches import mixed, ppl  # noqa: E402
from run import machine_stamp, write_sections  # noqa: E402
from runs import RUNS, VOCAB_MIN_COUNT  # noqa: E402

HEADING = "## The Transformer on Brown within the 2-hour budget (issue 52)"
ABLATION_HEADING = "## The Transformer's ablation on Brown (issue 52)"
BUDGET = 7000  # seconds of training and validation (-max-time): the 2 hours, less room to start
ABLATION_BUDGET = 900
STREAMS, BPTT, MEMORY = 16, 64, 64
SHAPE = ("-arch", "transformer", "-m", "256", "-layers", "4", "-heads", "4", "-ff", "1024", "-bptt", str(BPTT),
         "-streams", str(STREAMS), "-tie", "-output", "class")
TRAINING = ("-optimizer", "adam", "-lr", "1e-3", "-threads", "2", "-epochs", "500", "-patience", "3")
# dropout on the embeddings, residual branches and attention weights: 0.1 (Transformer-XL's
# WikiText-103 setting) for the ablation's 900 s; 0.3 for the long run. Its schedule: a cosine
# over 2 hours keeps the rate high past the epoch where the network starts to overfit Brown
# (PTB-sized): valid stalled after epoch 3 at dropout 0.1 (111.0) and after epoch 5 at 0.3
# (108.6, better), both with the training ppl below valid's. So the long run holds the rate
# after its warm-up and halves it, back at the best weights, when valid stalls or gains less
# than 0.3% (brown-best's LSTM's -lr-halve -min-improvement 1.003)
ABLATION_DROPOUT, LONG_DROPOUT = "0.1", "0.3"
WARMUP = 400  # updates of the linear warm-up (fewer when the budget allows few updates)
LONG_SCHEDULE = ("-lr-schedule", "inverse", "-lr-decay", "0", "-warmup", str(WARMUP), "-lr-halve",
                 "-min-improvement", "1.003")
WORDS_PER_S = 3000  # training speed of SHAPE on 2 cores, for the first ablation run's warm-up and decay
XL = ("-positions", "relative", "-memory", str(MEMORY))
VARIANTS = {  # name: (options, schedule)
    "base": (XL, "cosine"),
    "no-memory": (("-positions", "relative"), "cosine"),
    "learned": (("-positions", "learned"), "cosine"),
    "sinusoidal": (("-positions", "sinusoidal"), "cosine"),
    "inverse": (XL, "inverse"),
    "inv-sqrt": (XL, "inv-sqrt"),
}
MIX_WEIGHTS = tuple(round(0.1 * k, 1) for k in range(1, 10))  # the Transformer's weight in a mixture


def schedule_options(schedule, budget, words_per_s):
    """-lr-schedule and its numbers for a run of `budget` seconds at `words_per_s`."""
    updates = max(int(budget * words_per_s / (STREAMS * BPTT)), 8)
    warmup = min(WARMUP, updates // 4)
    options = ["-lr-schedule", schedule, "-warmup", str(warmup)]
    if schedule == "cosine":  # to 0 at the budget's end, as the trainer foretells it from the epochs' pace
        options += ["-lr-horizon", "0"]
    elif schedule == "inverse":
        options += ["-lr-decay", str(round(4.0 / updates, 8))]  # the rate at a fifth of -lr after `updates`
    return options


def train(args, name, options, budget):
    """runs/NAME.nplm trained with `options` for `budget` seconds (unless it exists): its log's records."""
    model, log = (os.path.join(args.runs, f"{name}.{ext}") for ext in ("nplm", "log"))
    if not os.path.exists(model):
        command = [args.nplm, "train-nplm", "-text", args.train, "-valid", args.valid, "-vocab", args.vocab,
                   *SHAPE, *TRAINING, *options, "-max-time", str(budget), "-checkpoint",
                   os.path.join(args.runs, f"{name}-ckpt"), "-log", log, "-lm", model, "-quiet"]
        print(" ".join(command), flush=True)
        subprocess.run(command, check=True)
    return read_log(log)


def read_log(log):
    return [json.loads(line) for line in open(log) if line.strip()]


def median_speed(records):
    return sorted(r["words_per_s"] for r in records)[len(records) // 2]


def test_ppl(args, *options):
    out = subprocess.run([args.nplm, "ppl", *options, "-ppl", args.test], check=True, capture_output=True,
                         text=True).stdout
    return float(out.split("ppl= ")[1].split()[0])


def mixture_weight(transformer, other, valid):
    """The Transformer's weight in its mixture with `other`, picked on the text `valid`: (weight, valid ppl)."""
    from nplmtk import load
    from nplmtk.corpus import Corpus
    a, b = load(transformer), load(other)
    logp_a, logp_b = (model.logprobs(Corpus.read(valid, model.vocab)) for model in (a, b))
    return min((ppl(mixed(logp_a, logp_b, weight)), weight) for weight in MIX_WEIGHTS)[::-1]


def ablation_table(ablation, seconds):
    """The ablation's lines: each variant's epochs, speed, best valid and test ppl."""
    lines = [f"The ablation, each for {seconds} s on 2 cores with dropout {ABLATION_DROPOUT} "
             "(`-max-time`, early stopping on valid):", "",
             "| variant | options | epochs | words/s | best valid ppl | test ppl | vs base |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    base = ablation["base"][1]
    for name, (records, test) in ablation.items():
        options, schedule = VARIANTS[name]
        lines.append(f"| {name} | `{' '.join(options)} -lr-schedule {schedule}` | {len(records)} | "
                     f"{median_speed(records):,.0f} | {min(r['valid_ppl'] for r in records):.2f} | {test:.2f} | "
                     f"{test / base:.3f} |")
    return lines


def lstm_model(args):
    """brown-best's LSTM (runs/lstm-awd.nplm under --runs), trained when missing at its budget times the scale."""
    lstm = RUNS["lstm-awd"]
    path = os.path.join(args.runs, os.path.basename(lstm.model_path))
    if not os.path.exists(path):
        options = list(lstm.options())
        at = options.index("-max-time") + 1
        options[at] = str(max(1, round(float(options[at]) * args.budget_scale)))
        command = [args.nplm, "train-nplm", "-text", args.train, "-valid", args.valid, "-vocab", args.vocab, *options,
                   "-log", os.path.join(args.runs, "lstm-awd.log"), "-lm", path, "-quiet"]
        print(" ".join(command), flush=True)
        subprocess.run(command, check=True)
    return path


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--brown", default="../shared/data/brown")
    parser.add_argument("--nplm", default="nplm")
    parser.add_argument("--out", default="BENCHMARKS.md")
    parser.add_argument("--runs", default="runs", help="where the models and logs go (and are found)")
    parser.add_argument("--budget-scale", type=float, default=1.0,
                        help="every training budget times this (a smoke run: 0.01 on a cut of Brown)")
    parser.add_argument("--ablation-only", action="store_true",
                        help="stop after the ablation, its table written (the whole job takes about 4 hours)")
    parser.add_argument("--picked", choices=tuple(VARIANTS),
                        help="the ablation's pick, from its run before: the 2-hour run alone")
    args = parser.parse_args()
    args.train, args.valid, args.test = (os.path.join(args.brown, f"{n}.txt") for n in ("train", "valid", "test"))
    os.makedirs(args.runs, exist_ok=True)
    args.vocab, kn5 = os.path.join(args.runs, "vocab.txt"), os.path.join(args.runs, "kn5.arpa")
    if not os.path.exists(args.vocab):
        subprocess.run([args.nplm, "vocab", "-text", args.train, "-min-count", str(VOCAB_MIN_COUNT), "-write-vocab",
                        args.vocab], check=True)
    if not os.path.exists(kn5):
        subprocess.run([args.nplm, "ngram-count", "-text", args.train, "-order", "5", "-vocab", args.vocab, "-unk",
                        "-lm", kn5], check=True)
    short, budget = (max(1, round(b * args.budget_scale)) for b in (ABLATION_BUDGET, BUDGET))
    if args.picked:  # the ablation run before (its section in --out): its base run's log gives the speed, if kept
        picked, base_log = args.picked, os.path.join(args.runs, "transformer-base.log")
        speed = median_speed(read_log(base_log)) if os.path.exists(base_log) else WORDS_PER_S
    else:
        ablation = {}
        for name, (options, schedule) in VARIANTS.items():
            speed = median_speed(ablation["base"][0]) if "base" in ablation else WORDS_PER_S
            records = train(args, f"transformer-{name}",
                            [*options, "-dropout", ABLATION_DROPOUT, *schedule_options(schedule, short, speed)], short)
            ablation[name] = (records, test_ppl(args, "-lm", os.path.join(args.runs, f"transformer-{name}.nplm")))
        picked = min(VARIANTS, key=lambda name: min(r["valid_ppl"] for r in ablation[name][0]))
        speed = median_speed(ablation["base"][0])
        body = [ABLATION_HEADING, "", machine_stamp(), "",
                f"`make brown-transformer` (benchmarks/brown_transformer.py, budget scale {args.budget_scale:g}): "
                f"the variant best on valid, {picked}, is the one the 2-hour run trains (section \"{HEADING[3:]}\").",
                "", *ablation_table(ablation, short)]
        write_sections(args.out, [body])
        print("\n".join(body))
        if args.ablation_only:
            return
    options, _ = VARIANTS[picked]  # the long run keeps its positions and memory; LONG_SCHEDULE replaces its schedule
    long_options = [*options, "-dropout", LONG_DROPOUT, *LONG_SCHEDULE]
    records = train(args, "transformer", long_options, budget)
    long_valid = min(r["valid_ppl"] for r in records)
    # the model the budget gives: the long run, or the ablation's run of the variant when it is better on valid
    short_records = read_log(os.path.join(args.runs, f"transformer-{picked}.log"))
    short_valid = min(r["valid_ppl"] for r in short_records)
    chosen = "transformer" if long_valid <= short_valid else f"transformer-{picked}"
    model, lstm = os.path.join(args.runs, f"{chosen}.nplm"), lstm_model(args)
    label = "Transformer" + ("" if chosen == "transformer" else f" (the ablation's {picked} run)")
    rows = [("KN5", test_ppl(args, "-lm", kn5), ""), ("brown-best's LSTM", test_ppl(args, "-lm", lstm), ""),
            (label, test_ppl(args, "-lm", model), f"valid {min(long_valid, short_valid):.2f}")]
    for name, other in (("KN5", kn5), ("brown-best's LSTM", lstm)):
        weight, valid = mixture_weight(model, other, args.valid)
        rows.append((f"{label} + {name}", test_ppl(args, "-lm", model, "-mix-lm", other, "-lambda", str(weight)),
                     f"weight {weight} (valid {valid:.2f})"))
    command = " ".join(["nplm train-nplm -text train.txt -valid valid.txt -vocab vocab.txt", *SHAPE, *TRAINING,
                        *long_options, "-max-time", str(budget)])
    body = [HEADING, "", machine_stamp(), "",
            f"`make brown-transformer` (benchmarks/brown_transformer.py, budget scale {args.budget_scale:g}): the "
            f"variant best on valid in the ablation (section \"{ABLATION_HEADING[3:]}\"), {picked}, trained for "
            f"{budget} s of training and validation on 2 cores ({len(records)} epochs, "
            f"{records[-1]['elapsed'] / 60:.1f} min, median {median_speed(records):,.0f} words/s, best valid "
            f"{long_valid:.2f}; the ablation's {picked} run: {short_valid:.2f}):", "",
            f"    {command}", "", f"The model better on valid, {chosen}.nplm, is scored. Test ppl by `nplm ppl -lm "
            "MODEL [-mix-lm OTHER -lambda W] -ppl test.txt`, W (the Transformer's weight) picked on valid:", "",
            "| model | test ppl | vs brown-best's LSTM | notes |", "| --- | --- | --- | --- |"]
    lstm_ppl = rows[1][1]
    body += [f"| {label} | {value:.2f} | {value / lstm_ppl:.3f} | {notes} |" for label, value, notes in rows]
    write_sections(args.out, [body])
    print("\n".join(body))


if __name__ == "__main__":
    main()
