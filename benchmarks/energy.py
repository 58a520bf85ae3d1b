"""The energy network of Bengio & Senecal (2003) sec. 4.2 as the paper ran it (issue 21):
Algorithm 4 on all of Brown train for 8 epochs (`make brown-energy`), the exact gradient
against it where the exact one fits (the first 1,000 sentences), and the two training
steps side by side; the exact run on all of Brown (`make brown-energy-exact`, about 5
hours of one core) is reported when its model exists."""
import json
import os
import statistics

from runs import RUNS
from sections import _ppl, _train_words_per_second, _training_texts, sampled_step_side_by_side, samples_trajectory

FULL_IS, FULL_EXACT = RUNS["energy-is-adaptive"], RUNS["energy-full"]
SMALL_EXACT, SMALL_IS = RUNS["energy-small-full"], RUNS["energy-small-is-adaptive"]


def _finished(run):
    return os.path.exists(run.log_path) and os.path.exists(run.model_path)


def energy_network(brown, peak):
    lines = ["## The energy network of Bengio & Senecal sec. 4.2 (issue 21)", ""]
    if not (_finished(FULL_IS) and _finished(SMALL_EXACT) and _finished(SMALL_IS)):
        return lines + ["Not measured in this run: `make brown-energy` trains the models (about 20 minutes of one "
                        "core)."]
    test = os.path.join(brown, "test.txt")
    runs = [run for run in (FULL_IS, FULL_EXACT, SMALL_EXACT, SMALL_IS) if _finished(run)]
    logs = {run: [json.loads(line) for line in open(run.log_path)] for run in runs}
    seconds = {run: sum(r["seconds"] for r in logs[run]) for run in runs}
    words = {run: sum(r["seconds"] * r["words_per_s"] for r in logs[run]) for run in runs}
    ppl = {run: _ppl(run.model_path, test) for run in runs}
    lines += [f"`make brown-energy`: `nplm train-nplm -text TEXT -vocab vocab.txt {' '.join(FULL_IS.shape_options())} "
              f"{' '.join(FULL_IS.training_options())} OPTIONS`: the paper's network (the next word's features enter "
              f"the hidden layer), {FULL_IS.order - 1} words of context, no direct connections, per-example SGD for a "
              "fixed 8 epochs, no validation set; Algorithm 4 from N0 = 100 with the unigram proposal, the tiny set "
              "(1,000 training examples) checked every 200,000 examples. TEXT is Brown train, or its first 1,000 "
              "sentences where the exact gradient must fit (|V| hidden layers per word). Test ppl: `nplm ppl -lm "
              "MODEL -text test.txt`. Seconds: the epochs' wall-clock time from the log (tiny-set checks "
              "included).", "",
              "| run | TEXT | OPTIONS | training seconds | words/s (mean) | N at the end | mean ESS, last epoch | "
              "test ppl |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for run in runs:
        last = logs[run][-1]
        text = "Brown train" if run.train_sentences is None else f"first {run.train_sentences:,} sentences"
        ess = f"{last['mean_ess']:.1f}" if "mean_ess" in last else ""
        lines.append(f"| {run.name} | {text} | `{' '.join(run.criterion_options())}` | {seconds[run]:,.0f} | "
                     f"{words[run] / seconds[run]:,.0f} | {last.get('samples', 'all words')} | {ess} | "
                     f"{ppl[run]:.2f} |")
    _, vocab, texts = _training_texts(brown)
    side, speeds, _ = sampled_step_side_by_side(SMALL_EXACT, FULL_IS, logs[FULL_IS][-1]["samples"], vocab,
                                                texts["short"], "400")
    small_gap = ppl[SMALL_IS] / ppl[SMALL_EXACT] - 1
    small_speedup = seconds[SMALL_EXACT] / seconds[SMALL_IS]
    lines += ["", f"Where both fit (the first 1,000 sentences, 8 epochs each): Algorithm 4 took "
              f"**{small_speedup:.1f}x** less time than the exact gradient, at test ppl {small_gap:+.2%} against "
              f"it (aim: 25x within 2%; the paper: 15x at equal ppl)."]
    if FULL_EXACT in runs:
        lines.append(f"On all of Brown train: **{seconds[FULL_EXACT] / seconds[FULL_IS]:.1f}x** less time, at test "
                     f"ppl {ppl[FULL_IS] / ppl[FULL_EXACT] - 1:+.2%} against the exact gradient.")
    else:
        exact_hours = words[FULL_IS] / speeds["full"] / 3600
        lines.append(f"On all of Brown train the exact gradient was not run (`make brown-energy-exact`): at the "
                     f"exact step's speed measured below ({speeds['full']:,.0f} words/s) its 8 epochs "
                     f"({words[FULL_IS]:,.0f} words) would take about {exact_hours:.0f} hours, "
                     f"{exact_hours * 3600 / seconds[FULL_IS]:.0f}x Algorithm 4's {seconds[FULL_IS] / 60:.0f} minutes "
                     f"(N = {logs[FULL_IS][-1]['samples']} at the end). Test ppl by Algorithm 4: {ppl[FULL_IS]:.2f} "
                     "(the paper's network: 278 on its split, where its Kneser-Ney 5-gram had 321).")
    full_speedup = (seconds[FULL_EXACT] if FULL_EXACT in runs else words[FULL_IS] / speeds["full"]) / seconds[FULL_IS]
    met = min(small_speedup, full_speedup) >= 25 and abs(small_gap) <= 0.02
    lines.append(f"Aim (25x within 2% of the exact gradient's test ppl): {'met' if met else 'not met'} "
                 f"({small_speedup:.0f}x at {small_gap:+.2%} where both ran, about {full_speedup:.0f}x on all of "
                 "Brown train).")
    lines += ["", *side, "", *exact_threads(vocab, texts["short"]), "", *samples_trajectory(FULL_IS, logs[FULL_IS])]
    return lines


def exact_threads(vocab, text, rounds=3):
    """The exact step with 2 threads sharing each window against 1, in alternating runs."""
    runs = [[_train_words_per_second(text, vocab, SMALL_EXACT, 1, threads, ("-criterion", "full")) for threads in (1, 2)]
            for _ in range(rounds)]
    return [f"The exact step on both cores (`-threads 2`: the two threads share each window, each on its blocks of 128 "
            f"of the vocabulary's rows; sequential SGD, as one thread): {statistics.median(r[1] for r in runs):,.0f} "
            f"words/s, **{statistics.median(r[1] / r[0] for r in runs):.2f}x** one thread's "
            f"({statistics.median(r[0] for r in runs):,.0f}; {rounds} alternating runs of the same epoch). Algorithm 4's "
            "runs above use one thread, as the exact ones they are set against."]
