"""Issue 19's n-best section: test sentences of Brown among perturbed copies of themselves
(two words swapped, one dropped, one replaced by a frequent word), re-ranked by KN5, MLP9,
our best LSTM and their mixtures with KN5 (nplmtk.rescore, as `nplm rescore`); and the
recurrent network's trie of prefixes on long lists."""
import os
import time

import numpy as np

from log_bilinear import _kn5
from nplmtk.corpus import Corpus
from nplmtk.mixture import Mixture
from nplmtk.models import load
from nplmtk.rescore import Hypothesis, rescore
from runs import RUNS

SENTENCES, SEED = 500, 7


def perturbed_lists(test, rng):
    """For each test sentence of 4 words or more: [reference, swapped, dropped, replaced]."""
    lists = []
    for line in open(test, encoding="utf-8"):
        words = line.split()
        if len(words) < 4:
            continue
        i = int(rng.integers(len(words) - 1))
        swapped = words[:i] + [words[i + 1], words[i]] + words[i + 2:]
        j = int(rng.integers(len(words)))
        dropped = words[:j] + words[j + 1:]
        k = int(rng.integers(len(words)))
        replaced = words[:k] + ["the" if words[k] != "the" else "of"] + words[k + 1:]
        lists.append([words, swapped, dropped, replaced])
        if len(lists) == SENTENCES:
            break
    return lists


def nbest_rescoring(brown, peak):
    lines = ["## N-best rescoring on Brown (issue 19)", ""]
    lstm = next((run for run in (RUNS["lstm-class"], RUNS["lstm-best"]) if os.path.exists(run.model_path)), None)
    if lstm is None:
        return lines + ["Not measured in this run: `make brown-lstm` trains the LSTM."]
    lists = perturbed_lists(os.path.join(brown, "test.txt"), np.random.default_rng(SEED))
    kn5, network = load(_kn5(brown)), load(lstm.model_path)
    models = [("KN5", kn5)]
    if os.path.exists(RUNS["mlp9"].model_path):
        mlp9 = load(RUNS["mlp9"].model_path)
        models += [("MLP9", mlp9), ("KN5 + MLP9, 0.5 each", Mixture([kn5, mlp9], [0.5, 0.5], ["kn5", "mlp9"]))]
    models += [(f"LSTM ({lstm.name})", network),
               ("KN5 + LSTM, 0.5 each", Mixture([kn5, network], [0.5, 0.5], ["kn5", lstm.name]))]
    lines += [f"The first {len(lists)} sentences of Brown test with 4 words or more, each in a list with three "
              "perturbed copies (two neighbouring words swapped, one word dropped, one replaced by 'the'), all "
              "of acoustic score 0, re-ranked by the model's log10 P alone (`nplm rescore -lm-weight 1`; the Python "
              f"API, one list at a time; seed {SEED}).", "",
              "| model | reference first | its mean rank (1-4) | reference first, word penalty 2 | its mean rank | "
              "hypotheses/s |", "| --- | --- | --- | --- | --- | --- |"]
    for name, model in models:
        ranks, start = {0: [], 2: []}, time.perf_counter()
        for hypotheses in lists:
            scored = rescore(model, [Hypothesis(0.0, 0.0, words) for words in hypotheses], lm_weight=1.0)
            for penalty in ranks:  # the same scores, ranked again with a word penalty
                ranked = sorted(scored, key=lambda h: -(h.lscore + penalty * len(h.words)))
                ranks[penalty].append(1 + next(i for i, h in enumerate(ranked) if h.words is hypotheses[0]))
        seconds = time.perf_counter() - start
        cells = " | ".join(f"{np.mean(np.array(r) == 1):.1%} | {np.mean(r):.2f}" for r in ranks.values())
        lines.append(f"| {name} | {cells} | {4 * len(lists) / seconds:,.0f} |")
    lines += ["", "Without a word penalty the copy with a word dropped usually wins (one factor fewer); "
              "a penalty of 2 (about the models' mean -log10 p per word) compensates."]
    full = RUNS["lstm-best"]  # the full softmax, where the output layer dominates
    return lines + [""] + (_prefix_sharing(brown, load(full.model_path), full.name)
                           if os.path.exists(full.model_path) else _prefix_sharing(brown, network, lstm.name))


def _prefix_sharing(brown, network, name, lists=10, size=100, rounds=3):
    """Long lists as a recognizer writes them: each of `lists` test sentences of 13 words or
    more with `size` - 1 copies that differ in one or two words of their second half; the
    plain pass against the trie of prefixes, in turn, `rounds` times."""
    rng = np.random.default_rng(SEED)
    words = [w for w in network.vocab.words[3:3000]]
    corpora = []
    for line in open(os.path.join(brown, "test.txt"), encoding="utf-8"):
        sentence = line.split()
        if len(sentence) < 13 or len(corpora) == lists:
            continue
        hypotheses = [sentence]
        while len(hypotheses) < size:
            copy = list(sentence)
            for _ in range(int(rng.integers(1, 3))):
                copy[int(rng.integers(len(copy) // 2, len(copy)))] = words[int(rng.integers(len(words)))]
            hypotheses.append(copy)
        corpora.append(Corpus.from_lines([" ".join(h) for h in hypotheses], network.vocab))
    times = {"plain": [], "trie": []}
    for _ in range(rounds):
        for name, score in (("plain", network.log10probs), ("trie", network.log10probs_sharing_prefixes)):
            start = time.perf_counter()
            results = [score(corpus) for corpus in corpora]
            times[name].append(time.perf_counter() - start)
            if name == "plain":
                plain = results
    difference = max(float(np.abs(a - b).max()) for a, b in zip(plain, results))
    tokens = sum(c.num_words + c.num_sentences for c in corpora)
    plain_s, trie_s = np.median(times["plain"]), np.median(times["trie"])
    return [f"Prefix sharing ({name}, one thread): {lists} "
            f"lists of {size} hypotheses ({tokens:,} tokens), a test sentence of 13 words or more and copies that "
            "differ in one or two words of its second half, as a recognizer's lists do: the plain pass "
            f"{plain_s:.2f} s, the trie of prefixes {trie_s:.2f} s ({plain_s / trie_s:.1f}x; median of {rounds} "
            f"rounds in turn), scores within {difference:.1e} (log10)."]
