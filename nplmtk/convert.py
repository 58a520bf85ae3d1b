"""Any model as a back-off n-gram model of a chosen order and size, for a decoder's first
pass (`nplm convert-lm`). Two ways, as the papers give them:

- the variational approximation (Deoras, Mikolov, Kombrink, Karafiat & Khudanpur 2011,
  "Variational approximation of long-span language models for LVCSR"): the n-gram model
  nearest the network in KL divergence over the n-gram family is approached by estimating an
  n-gram model (here interpolated modified Kneser-Ney) on a large text sampled from the network;
- the network's own probabilities (Arisoy, Chen, Ramabhadran & Sethy 2014, "Converting neural
  network language models into back-off language models for efficient decoding in automatic
  speech recognition"): every n-gram of a back-off model keeps its place, its probability
  becomes the network's p(w | h), and the back-off weights are recomputed so that each context
  sums to one (the network's distribution sums to one, so the listed words of a context never
  take more than all the mass).

Either is then interpolated with a background n-gram model into one back-off model
(nplmtk/ngram/merge.py, SRILM's static mixture) and pruned to size (Stolcke's entropy pruning,
nplmtk/ngram/estimate.py's prune), to a threshold or to an entry budget."""
import math

import numpy as np

from .corpus import Corpus
from .errors import NplmError, ParameterError
from .generate import DEFAULT_BATCH, sampled_ids
from .ngram.backoff import BackoffModel
from .ngram.count_runs import CountAccumulator
from .ngram.counts import check_order
from .ngram.estimate import estimate, prune, renormalise
from .threads import raise_if_stopping

CHUNK_TOKENS = 1 << 20  # sampled words counted a chunk at a time
MAX_SENTENCE_WORDS = 50_000  # SRILM's bound on a generated sentence (`nplm generate -max-words`'s largest)
PRUNE_SEARCH_STEPS = 16  # prunings tried for an entry budget


def sampled_counts(model, words, order, folder, seed=1, batch=DEFAULT_BATCH, memory=2 << 30, text=None,
                   progress=None):
    """The n-gram counts (orders 1 .. `order`) of sentences sampled from `model` until they
    hold `words` words (</s> not counted), drawn as `nplm generate` draws them (the same
    seed, the same text); `text`: a file object that also receives them, one a line;
    `progress(k)`: told of each k words drawn. Counting spills to `folder` past `memory`."""
    check_order(order)
    if words < 1:
        raise ParameterError(f"{{words}} must be at least 1, got {words}")
    vocab = model.vocab
    accumulator = CountAccumulator(vocab, order, memory, folder)
    ids, offsets, drawn = [], [0], 0
    for sentence in sampled_ids(model, 1 << 62, seed=seed, batch=batch, max_words=MAX_SENTENCE_WORDS):
        raise_if_stopping()  # a signal in the scratch folder's block: between two sentences
        ids.extend(sentence)
        offsets.append(len(ids))
        drawn += len(sentence)
        if text is not None:
            text.write(" ".join(vocab.words[w] for w in sentence) + "\n")
        if progress is not None:
            progress(len(sentence))
        if len(ids) >= CHUNK_TOKENS or drawn >= words:
            accumulator.add_text(Corpus(np.array(ids, dtype=np.int32), offsets, vocab, name="<sampled>"))
            ids, offsets = [], [0]
        if drawn >= words:
            break
    return accumulator.result(source="<sampled>")


def variational_model(model, words, order, folder, seed=1, batch=DEFAULT_BATCH, memory=2 << 30, text=None,
                      progress=None):
    """Deoras et al. 2011: interpolated modified Kneser-Ney of order `order` estimated on
    `words` words sampled from `model` (<unk> a word like any other, as the network's)."""
    counts = sampled_counts(model, words, order, folder, seed, batch, memory, text, progress)
    return estimate(counts, method="kn", interpolate=True, unk_is_word=True)


def network_probabilities(backoff, model, min_order=2, progress=None):
    """Arisoy et al. 2014: `backoff`'s n-grams of `min_order` words and more with the
    network's log10 p(w | h) (model.ngram_logprobs: exact for a feed-forward network whose
    window the n-gram fills; a recurrent one reads <s> and then h), its unigrams as they are,
    the back-off weights recomputed (SRILM's recomputeBOWs) so that it sums to one."""
    if not isinstance(backoff, BackoffModel):
        raise NplmError(f"the n-grams to rewrite come from a back-off n-gram model, not {backoff.described}")
    index = model.vocab.index
    missing = [w for w in backoff.vocab.words if w not in index]
    if missing:
        raise NplmError(f"{len(missing)} words of the back-off model are not the network's (e.g. "
                        f"{' '.join(missing[:3])}): rewrite needs n-grams over the network's words (estimate the "
                        "n-gram model with the network's vocabulary)")
    in_network = np.array([index[w] for w in backoff.vocab.words], dtype=np.int64)
    logp = [np.array(v, dtype=np.float32) for v in backoff.logp]
    for k in range(max(min_order, 2) - 1, backoff.order):
        grams = in_network[backoff.grams[k]]
        logp[k] = (model.ngram_logprobs(grams, progress=progress) / math.log(10)).astype(np.float32)
    rewritten = BackoffModel(backoff.vocab, backoff.grams, logp, [np.array(b) for b in backoff.bow],
                             [n.copy() for n in backoff.node], index=backoff.index)
    return renormalise(rewritten)


def fitted_weight(first, second, heldout, iterations=200):
    """The weight of `first` in the mixture with `second` that maximises the likelihood of
    the `heldout` corpus (compute-best-mix's EM, as `nplm mix`), over the tokens both score."""
    from .mixture import Mixture, fit_weights
    logp = Mixture([first, second], np.array([[0.5, 0.5]]), ["first", "second"]).component_logprobs(heldout)
    logp = logp[:, np.isfinite(logp).all(axis=0)]
    if logp.shape[1] == 0:
        raise NplmError(f"{heldout.name}: no token that both models score")
    weights, _ = fit_weights(logp, np.zeros(logp.shape[1], dtype=np.int64), 1, iterations)
    return float(weights[0, 0])


def entries(model):
    """The n-grams a back-off model lists, of every order (its size in an ARPA file)."""
    return int(sum(len(g) for g in model.grams))


def prune_to_entries(model, budget, min_order=2, tolerance=0.01, progress=None):
    """The entropy-pruned `model` (Stolcke 1998) at a threshold whose model lists at most
    `budget` n-grams and, where the search gets there, at least (1 - tolerance) of it:
    (pruned model, threshold). The search interpolates log(entries) linearly in
    log(threshold) between a threshold that keeps too many and one that keeps few enough
    (regula falsi, each step kept within the inner 80% of the bracket); the model itself
    (threshold 0) when it fits already."""
    if budget < 1:
        raise ParameterError(f"{{budget}} must be at least 1, got {budget}")
    size = entries(model)
    if size <= budget:
        return model, 0.0
    # brackets: (log10 threshold, log entries); threshold 0 keeps everything
    low, high, best = (-12.0, math.log(size)), None, None
    guess = -8.0
    for _ in range(PRUNE_SEARCH_STEPS):
        pruned = prune(model, 10 ** guess, min_order)
        kept = entries(pruned)
        if progress is not None:
            progress(10 ** guess, kept)
        if kept <= budget:
            high, best = (guess, math.log(max(kept, 1))), (pruned, 10 ** guess)
            if kept >= (1 - tolerance) * budget:
                break
        else:
            low = (guess, math.log(kept))
        if high is None:  # nothing small enough yet: a thousand times higher, up to 1
            if guess >= 0:
                break
            guess = min(guess + 3.0, 0.0)
            continue
        (x0, y0), (x1, y1) = low, high
        share = (y0 - math.log(budget)) / (y0 - y1) if y0 != y1 else 0.5
        guess = x0 + min(max(share, 0.1), 0.9) * (x1 - x0)
    if best is None:
        raise NplmError(f"even entropy pruning at threshold 1 leaves {kept} n-grams, above the budget of {budget} "
                        "(orders below the pruned ones are kept whole: raise the budget or lower the orders pruned)")
    return best
