"""Test-time settings picked on held-out text (issue 51): each search scores its grid on a
tuning text and returns the setting of the lowest perplexity there, with every setting's
figure, so that the pick can be printed and stored. "Off" (a weight of 0) is always in the
grid, so a pick is never worse on the tuning text than the model alone, and a setting is
picked only if it gains on each half of the tuning text (its first sentences holding half
its predictions, and the rest): a gain that one kind of document makes alone does not
carry to other text (webtext's SRILM cache gained 3% on valid, all of it in one half, and
lost on test).

- SRILM's unigram cache (`-cache N -cache-lambda L`): the model's scores once, the cache's
  once per length, mixed as `ngram -cache` mixes them (nplmtk.cache.with_cache).
- The continuous cache (Grave et al. 2017, eq. 2-3; nplmtk.cache.ContinuousCache): the
  network's scores and states once; the dot products of each token with the `window`
  states before it once, for the largest window; every (window, theta) from running sums
  over the distance, every lambda from those. Over a DynamicModel: the adapted states.
- Dynamic evaluation (nplmtk.neural.dynamic): by successive halving, in worker processes
  that each get the model once (nplmtk.tuning_dynamic).
- The mixture's weights by EM; lattice-tool's history approximation order on held-out
  lattices (the smallest whose 1-best paths are the largest order's).

A pick on the edge of its grid goes on past it (a few times, while it stays there), and
what stayed on an edge is said in the pick's notes; a deadline (time.monotonic()) cuts a
search between settings, its notes saying what was skipped."""
import itertools
import time
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
EXTENSION_ROUNDS = 3  # a grid is extended past a pick on its edge at most this many times
BLOCK_TOKENS = 256  # tokens whose windows are scored at once


@dataclass
class Pick:
    """The chosen setting (by name), its perplexity on the tuning text, and every
    setting tried with its perplexity, in the grid's order."""
    setting: dict
    ppl: float
    tried: list = field(default_factory=list)
    notes: list = field(default_factory=list)  # what stderr says besides: grids extended, edges, budget cuts

    def describe(self):
        values = " ".join(f"{name} {value:g}" for name, value in self.setting.items())
        return f"{values} (ppl {self.ppl:.2f} on the tuning text, best of {len(self.tried)})"


class Ppl(float):
    """A tuning text's perplexity, with `halves`: those of its first sentences holding half
    its predictions and of the rest (() for a text of one sentence)."""

    def __new__(cls, value, halves=()):
        ppl = super().__new__(cls, value)
        ppl.halves = tuple(halves)
        return ppl


def text_ppl(log10, corpus, unk):
    """The perplexity a report prints (SRILM's: OOVs and zero probabilities left out), as
    a Ppl with its halves'."""
    sentence_logprob, oovs, zeroprobs, logprob = sentence_totals(
        np.ascontiguousarray(log10, dtype=np.float64), corpus.ids, corpus.offsets, unk)

    def ppl(first, last, total):
        words = int(corpus.offsets[last] - corpus.offsets[first])
        value = TextStats(last - first, words, int(oovs[first:last].sum()), int(zeroprobs[first:last].sum()),
                          total).ppl
        return float("inf") if value is None else value

    count = corpus.num_sentences
    halves = ()
    if count > 1:
        ends = prediction_ends(corpus)
        middle = min(max(int(np.searchsorted(ends, ends[-1] / 2)) + 1, 1), count - 1)
        halves = (ppl(0, middle, float(sentence_logprob[:middle].sum())),
                  ppl(middle, count, float(sentence_logprob[middle:].sum())))
    return Ppl(ppl(0, count, logprob), halves)


def prediction_ends(corpus):
    """The predictions (words and </s>) up to each sentence's end."""
    return corpus.offsets[1:] + np.arange(1, corpus.num_sentences + 1)


def _gains_on_each_half(ppl, off):
    """Whether `ppl` is below `off` on the whole tuning text and on each of its halves."""
    halves = getattr(ppl, "halves", ())
    return ppl < off and all(mine < theirs for mine, theirs in zip(halves, getattr(off, "halves", ())))


def _best(tried, is_off=None):
    """The Pick of the lowest ppl among `tried` ((setting, ppl) pairs); with `is_off` (true
    of a setting that leaves the model as it is), only among off and the settings that gain
    on each half of the tuning text over it, the notes saying what better setting lost on a half."""
    setting, ppl = min(tried, key=lambda pair: pair[1])
    off = next((figure for candidate, figure in tried if is_off(candidate)), None) if is_off else None
    if off is None or is_off(setting) or _gains_on_each_half(ppl, off):
        return Pick(dict(setting), ppl, tried)
    kept = [(candidate, figure) for candidate, figure in tried if is_off(candidate) or _gains_on_each_half(figure, off)]
    pick = _best(kept)
    values = " ".join(f"{name} {value:g}" for name, value in setting.items())
    halves = " and ".join(f"{mine:.2f} against {theirs:.2f}"
                          for mine, theirs in zip(getattr(ppl, "halves", ()), getattr(off, "halves", ())))
    pick.tried = tried
    pick.notes = [f"{values} had the lowest ppl ({ppl:.2f}) but not on each half of the tuning text ({halves} "
                  f"without it): the best that gains on both halves is kept"]
    return pick


def _check_grid(name, values, low, high):
    if not values or any(not low <= value <= high for value in values):
        raise ParameterError(f"{{{name}}}: a grid of values in [{low}, {high}], got {list(values)}")


def _past(deadline):
    return deadline is not None and time.monotonic() > deadline


def _beyond(value, edge, kind, limit=None):
    """The next value past `value` at the `edge` ("largest" or "smallest") of a grid of
    `kind`, or None where the domain (or `limit`) ends: a "weight" (of a mixture) steps by
    0.1 up to 0.9, a "decay" doubles up to 0.5, a "count" (an integer from 1) and a "scale"
    (a positive real) double or halve. A weight's or decay's 0 is "off", not an edge."""
    if kind in ("weight", "decay"):
        if edge == "smallest":
            return None
        new = round(value + 0.1, 6) if kind == "weight" else value * 2
        return new if 0 < new <= (0.9 if kind == "weight" else 0.5) + 1e-9 else None
    new = value * 2 if edge == "largest" else value / 2
    if kind == "count":
        new = int(new)
        if new < 1 or new == value or (limit is not None and value >= limit):
            return None
    return new


def _edges(setting, grids, kinds):
    """(name, "largest" or "smallest") of each value of `setting` on the edge of its grid
    (of two values or more; a weight's or decay's 0 is off, no edge); none when the pick
    is off (every mixture weight 0: the other values do not matter)."""
    if any(kinds[name][0] == "weight" and setting[name] == 0 for name in grids if name in kinds):
        return []
    found = []
    for name, values in grids.items():
        if len(values) < 2 or name not in kinds:
            continue
        if setting[name] == max(values):
            found.append((name, "largest"))
        elif setting[name] == min(values) and not (kinds[name][0] in ("weight", "decay") and setting[name] == 0):
            found.append((name, "smallest"))
    return found


def _extensions(setting, grids, kinds):
    """{name: the value past the pick's} for each grid the pick is on an edge of and that
    extends there."""
    extended = {}
    for name, edge in _edges(setting, grids, kinds):
        new = _beyond(setting[name], edge, *kinds[name])
        if new is not None:
            extended[name] = new
    return extended


def _edge_notes(setting, grids, kinds, budget_cut=False):
    """What stderr says of the pick's values still on an edge of their (extended) grid."""
    notes = []
    for name, edge in _edges(setting, grids, kinds):
        why = "the budget stopped the extension" if budget_cut else \
            "the domain ends there" if _beyond(setting[name], edge, *kinds[name]) is None else \
            f"after {EXTENSION_ROUNDS} extensions"
        notes.append(f"{name} {setting[name]:g} is the {edge} of its grid ({why}): a value past it may be better")
    return notes


def _grid_search(grids, score, deadline, kinds):
    """The best of the product of `grids` ({name: values}), scored by `score(settings)`
    (ppls of a list of settings), each grid extended past the pick while it lands on its
    edge (up to EXTENSION_ROUNDS times; `kinds` {name: (kind, limit)}, as _beyond takes);
    the pick's notes say what was extended and what stays on an edge. A setting with a
    "weight" of 0 is off: the pick gains on each half of the tuning text over it (_best)."""
    weights = [name for name in grids if kinds.get(name, ("",))[0] == "weight"]

    def is_off(setting):
        return any(setting[name] == 0 for name in weights)

    grids = {name: tuple(values) for name, values in grids.items()}
    figures, notes, cut = {}, [], False
    for round_ in range(EXTENSION_ROUNDS + 1):
        settings = [dict(zip(grids, values)) for values in itertools.product(*grids.values())]
        missing = [setting for setting in settings if tuple(setting.items()) not in figures]
        figures.update(zip((tuple(setting.items()) for setting in missing), score(missing)))
        pick = _best([(setting, figures[tuple(setting.items())]) for setting in settings], is_off)
        extended = _extensions(pick.setting, grids, kinds)
        if not extended or round_ == EXTENSION_ROUNDS:
            break
        if _past(deadline):
            cut = True
            break
        for name, new in extended.items():
            notes.append(_extension_note(name, pick.setting[name], grids[name], new))
            grids[name] = tuple(sorted(grids[name] + (new,)))
    pick.notes = notes + pick.notes + _edge_notes(pick.setting, grids, kinds, cut)
    return pick


def _extension_note(name, value, values, new):
    edge = "largest" if value == max(values) else "smallest"
    return f"{name} {value:g} was the {edge} of its grid: {new:g} tried too"


def tune_cache(model, corpus, lengths=CACHE_LENGTHS, weights=CACHE_WEIGHTS, unk_is_word=False, deadline=None):
    """SRILM's unigram cache for `model` on the tuning `corpus`: (length, weight), the
    grids extended where the pick lands on an edge."""
    _check_grid("lengths", lengths, 1, 1e9)
    _check_grid("weights", weights, 0, 1)
    own = model.logprobs(corpus)
    cached = {}  # each length's cache probabilities

    def score(settings):
        figures = []
        for setting in settings:
            length, weight = setting["length"], setting["weight"]
            if length not in cached:
                cached[length] = UnigramCache(model.vocab, length, unk_is_word).logprobs(corpus)
            logp = np.array([own, cached[length]])
            mixed = mix_logprobs(logp, np.tile([1 - weight, weight], (logp.shape[1], 1))) / LN10
            log10 = mixed.astype(np.float32).astype(np.float64)  # SRILM's LogP, as Mixture rounds it
            figures.append(text_ppl(log10, corpus, model.vocab.unk))
        return figures

    tokens = corpus.num_words + corpus.num_sentences
    return _grid_search({"length": tuple(lengths), "weight": tuple(weights)}, score, deadline,
                        {"length": ("count", tokens), "weight": ("weight", None)})


def tune_mixture(models, names, corpus, iterations=200, tolerance=1e-7):
    """The weights of a mixture of `models` (named `names`) on the tuning `corpus`, by
    EM from uniform weights: setting {name: weight}; tried holds each EM iteration's
    starting weights and the ppl the text had with them, then EM's weights and the first
    model alone. Where EM's mixture does not gain on each half of the text over that model
    alone, the pick is that model alone."""
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
    alone = dict.fromkeys(names, 0.0)
    alone[names[0]] = 1.0
    mixture.weights = np.array([list(alone.values())])
    tried.append((alone, text_ppl(mixture.log10probs_from(logp, corpus), corpus, mixture.vocab.unk)))
    pick = _best(tried[-2:], lambda setting: setting == alone)
    pick.tried = tried
    return pick


def neural_cache_probabilities(states, targets, windows, thetas, block=BLOCK_TOKENS, progress=None, workers=2,
                               deadline=None, finished=None, at_least=1):
    """p_cache of each token for every (window, theta): an array (windows, thetas,
    tokens), as nplmtk.cache.continuous_cache_probabilities gives them one at a time; the
    blocks of tokens shared among `workers` threads (numpy's loops release the GIL). Past
    `deadline` the blocks not started are skipped (those of the first `at_least` tokens are
    always scored); the set `finished`, when given, gets the first token of each block scored."""
    from .neural.blas import on_workers
    windows = sorted(windows)
    count = len(targets)
    states = np.asarray(states)
    targets = np.asarray(targets)
    p = np.zeros((len(windows), len(thetas), count))
    starts = range(0, count, block)
    workers = max(1, min(workers, len(starts)))

    def work(q):
        for start in starts[q::workers]:
            if start >= at_least and _past(deadline):
                break
            _cache_block(states, targets, windows, thetas, start, min(count, start + block), p)
            if finished is not None:
                finished.add(start)
            if progress is not None:
                progress(min(count, start + block) - start)
    on_workers(work, workers)
    return p


def _cache_block(states, targets, windows, thetas, start, stop, p):
    """p[:, :, start:stop] of neural_cache_probabilities."""
    widest = windows[-1]
    distance = np.arange(1, widest + 1)
    low = max(0, start - widest)
    dots = (states[start:stop] @ states[low:stop].T).astype(np.float64)
    key = np.arange(start, stop)[:, None] - distance[None, :]  # the token `distance` before each one
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
            p[i, j, start:stop] = np.where(denominator > 0, hits[:, window - 1] / np.maximum(denominator, 1e-300), 0.0)


def tune_neural_cache(model, corpus, windows=NEURAL_CACHE_WINDOWS, thetas=NEURAL_CACHE_THETAS,
                      weights=NEURAL_CACHE_WEIGHTS, progress=None, deadline=None):
    """The continuous cache for the recurrent `model` on the tuning `corpus`: (window,
    theta, weight), as nplmtk.cache.ContinuousCache scores it, the grids extended where
    the pick lands on an edge. `model` may be a DynamicModel: the cache over the adapted
    network's states. `progress(total)` makes a bar over the tokens each grid of windows
    and thetas scores, or None."""
    _check_grid("windows", windows, 1, 1e7)
    _check_grid("thetas", thetas, 0, 1e3)
    _check_grid("weights", weights, 0, 1)
    logp, states = model.logprobs_and_states(corpus)
    targets = np.asarray(corpus.targets())
    finite = np.isfinite(logp)
    model_p = np.exp(np.where(finite, logp, -np.inf))
    cached = {}  # (window, theta): p_cache of every token
    text = [corpus, len(targets)]  # what the grid is scored on: the budget may cut it to its first sentences

    def score(settings):
        missing = {(setting["window"], setting["theta"]) for setting in settings} - set(cached)
        if missing:
            new_windows = sorted({window for window, _ in missing})
            new_thetas = sorted({theta for _, theta in missing})
            bar = progress(len(targets)) if progress else None
            finished = set()
            # only the first grid is cut (an extension's figures must be on the text of the others'),
            # never inside the first sentence
            p = neural_cache_probabilities(states, targets, new_windows, new_thetas,
                                           deadline=None if cached else deadline, finished=finished,
                                           progress=bar.update if bar is not None else None,
                                           at_least=corpus.offsets[1] + 1 if corpus.num_sentences else 1)
            if bar is not None:
                bar.close()
            text[:] = _scored_sentences(corpus, finished, text[1])
            for i, window in enumerate(new_windows):
                for j, theta in enumerate(new_thetas):
                    cached[window, theta] = p[i, j]
        scored, tokens = text
        figures = []
        for setting in settings:
            weight = setting["weight"]
            with np.errstate(divide="ignore"):
                cache = cached[setting["window"], setting["theta"]][:tokens]
                mixed = np.log((1 - weight) * model_p[:tokens] + weight * cache)
            figures.append(text_ppl(np.where(finite[:tokens], mixed, -np.inf) / LN10, scored, model.vocab.unk))
        return figures

    pick = _grid_search({"window": tuple(sorted(windows)), "theta": tuple(thetas), "weight": tuple(weights)}, score,
                        deadline, {"window": ("count", len(targets)), "theta": ("scale", None),
                                   "weight": ("weight", None)})
    if text[1] < len(targets):
        pick.notes.insert(0, f"the budget cut the grid's scoring: picked on the first {text[0].num_sentences:,} "
                             f"sentences ({text[1]:,} of {len(targets):,} tokens) of the tuning text")
    return pick


def _predictions(corpus):
    return corpus.num_words + corpus.num_sentences


def _scored_sentences(corpus, finished, tokens, block=BLOCK_TOKENS):
    """(the corpus's first sentences whose tokens the blocks `finished` all scored, their
    token count), within the first `tokens`; the whole corpus when every block was."""
    done = 0
    while done in finished:
        done += block
    done = min(done, tokens)
    if done >= _predictions(corpus):
        return [corpus, _predictions(corpus)]
    ends = prediction_ends(corpus)
    count = int(np.searchsorted(ends, done, side="right"))  # at least 1: the first sentence is always scored
    return [corpus.first_sentences(count), int(ends[count - 1])]


APPROX_ORDERS = (2, 3, 4, 5, 6, 7)
APPROX_TOLERANCE = 0.005  # word edits between an order's 1-bests and the largest order's, per word


def tune_approx_order(one_bests, orders=APPROX_ORDERS, tolerance=APPROX_TOLERANCE):
    """The order of a recurrent network's n-gram history approximation in a lattice
    decoder, on held-out lattices and without their references: the smallest order whose
    1-best paths differ from the largest order's (the nearest to exact decoding tried) in
    at most `tolerance` word edits per word of those. `one_bests(order)` gives the tuning
    lattices' 1-best word lists at an order (None: no path). Pick.ppl holds that share
    (not a perplexity); tried each order scored, the largest first."""
    orders = sorted(set(orders))
    if len(orders) < 2 or orders[0] < 2:
        raise ParameterError(f"{{orders}}: two orders or more, each at least 2, got {orders}")
    if not 0 <= tolerance < 1:
        raise ParameterError(f"{{tolerance}} must be in [0, 1), got {tolerance}")
    from .lattice.wer import word_error_rate
    reference = [words or [] for words in one_bests(orders[-1])]
    tried = [({"order": orders[-1]}, 0.0)]
    for order in orders[:-1]:
        share, _, _ = word_error_rate(reference, [words or [] for words in one_bests(order)])
        tried.append(({"order": order}, share))
        if share <= tolerance:
            return Pick({"order": order}, share, tried)
    return Pick({"order": orders[-1]}, 0.0, tried,
                [f"order {orders[-1]} is the largest of its grid: no smaller order's 1-best paths are within "
                 f"{tolerance:g} word edits per word of its own; a larger order may change them still"])
