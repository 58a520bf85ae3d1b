"""Test-time settings picked on held-out text (issue 51): each search scores its grid on a
tuning text and returns the setting of the lowest perplexity there, with every setting's
figure, so that the pick can be printed and stored. "Off" (a weight of 0) is always in the
grid, so a pick is never worse on the tuning text than the model alone.

- SRILM's unigram cache (`-cache N -cache-lambda L`): the model's scores once, the cache's
  once per length, mixed as `ngram -cache` mixes them (nplmtk.cache.with_cache).
- The continuous cache (Grave et al. 2017, eq. 2-3; nplmtk.cache.ContinuousCache): the
  network's scores and states once; the dot products of each token with the `window`
  states before it once, for the largest window; every (window, theta) from running sums
  over the distance, every lambda from those."""
import concurrent.futures
import itertools
import multiprocessing
from dataclasses import dataclass, field

import numpy as np

from ._ext.corpus_kernels import sentence_totals
from .cache import UnigramCache
from .errors import ParameterError
from .lm import LN10
from .mixture import Mixture, fit_weights, mix_logprobs
from .ppl import TextStats

CACHE_LENGTHS = (50, 100, 200, 500, 1000, 2000)
CACHE_WEIGHTS = (0.0, 0.01, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3)
NEURAL_CACHE_WINDOWS = (100, 200, 500, 1000, 2000, 4000)
NEURAL_CACHE_THETAS = (0.05, 0.1, 0.2, 0.3, 0.5, 0.8)
NEURAL_CACHE_WEIGHTS = (0.0, 0.02, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4)
BLOCK_TOKENS = 256  # tokens whose windows are scored at once
DYNAMIC_LENGTHS = (10, 20, 50)
DYNAMIC_SGD_RATES = (0.01, 0.03, 0.1, 0.3, 1.0)
DYNAMIC_RMS_RATES = (0.0003, 0.001, 0.003, 0.01)
DYNAMIC_DECAYS = (0.0, 0.01, 0.02, 0.05)
DYNAMIC_STAGES = (8, 2, 1)  # the text's share (1 / this) each stage scores
DYNAMIC_MARGIN = 0.02  # a setting this much worse in ppl than a stage's best stops there
OFF = {"length": 0, "lr": 0.0, "decay": 0.0}  # dynamic evaluation's "off": the model as trained


@dataclass
class Pick:
    """The chosen setting (by name), its perplexity on the tuning text, and every
    setting tried with its perplexity, in the grid's order."""
    setting: dict
    ppl: float
    tried: list = field(default_factory=list)

    def describe(self):
        values = " ".join(f"{name} {value:g}" for name, value in self.setting.items())
        return f"{values} (ppl {self.ppl:.2f} on the tuning text, best of {len(self.tried)})"


def text_ppl(log10, corpus, unk):
    """The perplexity a report prints (SRILM's: OOVs and zero probabilities left out)."""
    _, oovs, zeroprobs, logprob = sentence_totals(np.ascontiguousarray(log10, dtype=np.float64), corpus.ids,
                                                  corpus.offsets, unk)
    ppl = TextStats(corpus.num_sentences, corpus.num_words, int(oovs.sum()), int(zeroprobs.sum()), logprob).ppl
    return float("inf") if ppl is None else ppl


def _best(tried):
    setting, ppl = min(tried, key=lambda pair: pair[1])
    return Pick(dict(setting), ppl, tried)


def _check_grid(name, values, low, high):
    if not values or any(not low <= value <= high for value in values):
        raise ParameterError(f"{{{name}}}: a grid of values in [{low}, {high}], got {list(values)}")


def tune_cache(model, corpus, lengths=CACHE_LENGTHS, weights=CACHE_WEIGHTS, unk_is_word=False):
    """SRILM's unigram cache for `model` on the tuning `corpus`: (length, weight)."""
    _check_grid("lengths", lengths, 1, 1e9)
    _check_grid("weights", weights, 0, 1)
    own = model.logprobs(corpus)
    tried = []
    for length in lengths:
        logp = np.array([own, UnigramCache(model.vocab, length, unk_is_word).logprobs(corpus)])
        for weight in weights:
            mixed = mix_logprobs(logp, np.tile([1 - weight, weight], (logp.shape[1], 1))) / LN10
            log10 = mixed.astype(np.float32).astype(np.float64)  # SRILM's LogP, as Mixture rounds it
            tried.append(({"length": length, "weight": weight}, text_ppl(log10, corpus, model.vocab.unk)))
    return _best(tried)


def tune_mixture(models, names, corpus, iterations=200, tolerance=1e-7):
    """The weights of a mixture of `models` (named `names`) on the tuning `corpus`, by
    EM from uniform weights: setting {name: weight}; tried holds each EM iteration's
    starting weights and the ppl the text had with them."""
    mixture = Mixture(models, np.full(len(models), 1 / len(models)), names)
    logp = mixture.component_logprobs(corpus)
    steps = []
    weights, _ = fit_weights(logp, np.zeros(logp.shape[1], dtype=np.int64), 1, iterations, tolerance,
                             log=lambda iteration, w, likelihood, tokens: steps.append(w[0].copy()))
    tried = []
    for w in steps + [weights[0]]:
        mixture.weights = np.asarray(w, dtype=np.float64).reshape(1, -1)
        tried.append((dict(zip(names, map(float, w))), text_ppl(mixture.log10probs_from(logp, corpus), corpus,
                                                                 mixture.vocab.unk)))
    return Pick(tried[-1][0], tried[-1][1], tried)


def neural_cache_probabilities(states, targets, windows, thetas, block=BLOCK_TOKENS, progress=None):
    """p_cache of each token for every (window, theta): an array (windows, thetas,
    tokens), as nplmtk.cache.continuous_cache_probabilities gives them one at a time."""
    windows = sorted(windows)
    widest = windows[-1]
    count = len(targets)
    states = np.asarray(states)
    targets = np.asarray(targets)
    p = np.zeros((len(windows), len(thetas), count))
    distance = np.arange(1, widest + 1)
    for start in range(0, count, block):
        stop = min(count, start + block)
        low = max(0, start - widest)
        dots = (states[start:stop] @ states[low:stop].T).astype(np.float64)
        t = np.arange(start, stop)[:, None]
        key = t - distance[None, :]  # the token `distance` before each one
        seen = key >= 0
        column = np.where(seen, key - low, 0)
        rows = np.arange(stop - start)[:, None]
        scores = np.where(seen, dots[rows, column], -np.inf)
        match = seen & (targets[np.maximum(key, 0)] == targets[start:stop][:, None])
        top = scores.max(axis=1, keepdims=True)
        shift = np.where(np.isfinite(top), top, 0.0)
        for j, theta in enumerate(thetas):
            weights = np.exp(theta * (scores - shift))  # max-subtracted: the shift cancels
            total = np.cumsum(weights, axis=1)
            hits = np.cumsum(weights * match, axis=1)
            for i, window in enumerate(windows):
                denominator = total[:, window - 1]
                p[i, j, start:stop] = np.where(denominator > 0, hits[:, window - 1] / np.maximum(denominator, 1e-300),
                                               0.0)
        if progress is not None:
            progress(stop - start)
    return p


def tune_neural_cache(model, corpus, windows=NEURAL_CACHE_WINDOWS, thetas=NEURAL_CACHE_THETAS,
                      weights=NEURAL_CACHE_WEIGHTS, progress=None):
    """The continuous cache for the recurrent `model` on the tuning `corpus`: (window,
    theta, weight), as nplmtk.cache.ContinuousCache scores it."""
    _check_grid("windows", windows, 1, 1e7)
    _check_grid("thetas", thetas, 0, 1e3)
    _check_grid("weights", weights, 0, 1)
    logp, states = model.logprobs_and_states(corpus)
    cache = neural_cache_probabilities(states, np.asarray(corpus.targets()), windows, thetas, progress=progress)
    finite = np.isfinite(logp)
    model_p = np.exp(np.where(finite, logp, -np.inf))
    tried = []
    for i, window in enumerate(sorted(windows)):
        for j, theta in enumerate(thetas):
            for weight in weights:
                with np.errstate(divide="ignore"):
                    mixed = np.log((1 - weight) * model_p + weight * cache[i, j])
                log10 = np.where(finite, mixed, -np.inf) / LN10
                tried.append(({"window": window, "theta": theta, "weight": weight},
                              text_ppl(log10, corpus, model.vocab.unk)))
    return _best(tried)


def _dynamic_ppl(model, corpus, setting, scale, epsilon):
    """The tuning text's ppl under one dynamic evaluation setting (inf when it diverges)."""
    from .neural.dynamic import DynamicEvaluation, dynamic_logprobs
    if setting == OFF:
        logp = model.logprobs(corpus)
    else:
        try:
            logp = dynamic_logprobs(model, corpus, DynamicEvaluation(setting["length"], setting["lr"],
                                                                     setting["decay"], epsilon), scale)
        except ParameterError:  # the adaptation diverged: the worst setting there is
            return float("inf")
    return text_ppl(logp / LN10, corpus, model.vocab.unk)


def _prefix(corpus, share):
    """The corpus's first sentences holding about 1 / share of its predictions."""
    if share == 1:
        return corpus
    wanted = (corpus.num_words + corpus.num_sentences) / share
    ends = corpus.offsets[1:] + np.arange(1, corpus.num_sentences + 1)  # predictions up to each sentence's end
    return corpus.first_sentences(max(1, int(np.searchsorted(ends, wanted)) + 1))


def tune_dynamic(model, corpus, lengths=DYNAMIC_LENGTHS, rates=None, decays=DYNAMIC_DECAYS, scale=None,
                 epsilon=1e-3, workers=1, margin=DYNAMIC_MARGIN, stages=DYNAMIC_STAGES, progress=None):
    """Dynamic evaluation of the network `model` on the tuning `corpus`: (length, lr,
    decay), or OFF when no setting beats the model as trained. `scale` (gradient_scale's)
    selects the RMS step; `rates` defaults to the SGD or RMS grid. `progress(total)` makes
    a bar (update(n)) over the predictions scored, or None."""
    rates = rates or (DYNAMIC_SGD_RATES if scale is None else DYNAMIC_RMS_RATES)
    _check_grid("lengths", lengths, 1, 1e7)
    _check_grid("rates", rates, 1e-12, 1e6)
    _check_grid("decays", decays, 0, 0.999)
    candidates = [OFF] + [{"length": length, "lr": lr, "decay": decay}
                          for length, lr, decay in itertools.product(lengths, rates, decays)]
    texts = [_prefix(corpus, share) for share in stages]
    sizes = [text.num_words + text.num_sentences for text in texts]
    bar = progress(0) if progress else None
    tried = []
    pool = concurrent.futures.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) \
        if workers > 1 else None
    try:
        for stage, (text, size) in enumerate(zip(texts, sizes)):
            if bar is not None:
                bar.total += len(candidates) * size
                bar.refresh()
            if pool is None:
                figures = []
                for setting in candidates:
                    figures.append(_dynamic_ppl(model, text, setting, scale, epsilon))
                    if bar is not None:
                        bar.update(size)
            else:
                futures = [pool.submit(_dynamic_ppl, model, text, setting, scale, epsilon) for setting in candidates]
                for future in concurrent.futures.as_completed(futures):
                    if bar is not None:
                        bar.update(size)
                figures = [future.result() for future in futures]
            best = min(figures)
            if stage == len(texts) - 1:
                tried = list(zip(candidates, figures))
                break
            ranked = sorted(zip(figures, range(len(candidates))))
            kept = {index for figure, index in ranked if figure <= best * (1 + margin)} | \
                {index for _, index in ranked[:2]} | {0}  # "off" goes to the end: the pick must beat it there
            candidates = [candidates[index] for index in sorted(kept)]
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
        if bar is not None:
            bar.close()
    return _best(tried)
