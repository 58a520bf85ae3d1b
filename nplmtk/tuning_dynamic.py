"""Dynamic evaluation's settings picked on held-out text (issue 51; nplmtk.neural.dynamic):
(segment length, rate, decay) by successive halving, each stage scoring the settings left
on a longer share of the tuning text, in worker processes that each get the model once;
the pick, as nplmtk.tuning's grids, extended past a grid's edge it lands on and kept only
if it gains on each half of the text over the model as trained."""
import concurrent.futures
import itertools
import multiprocessing

import numpy as np

from .errors import ParameterError
from .lm import LN10
from .tuning import (EXTENSION_ROUNDS, _best, _check_grid, _edge_notes, _extension_note, _extensions, _past,
                     _predictions, prediction_ends, text_ppl)

DYNAMIC_LENGTHS = (10, 20, 50)
DYNAMIC_SGD_RATES = (0.01, 0.03, 0.1, 0.3, 1.0)
DYNAMIC_RMS_RATES = (0.0003, 0.001, 0.003, 0.01)
DYNAMIC_DECAYS = (0.0, 0.01, 0.02, 0.05)
DYNAMIC_STAGES = (8, 2, 1)  # the text's share (1 / this) each stage scores
DYNAMIC_MARGIN = 0.02  # a setting this much worse in ppl than a stage's best stops there
OFF = {"length": 0, "lr": 0.0, "decay": 0.0}  # dynamic evaluation's "off": the model as trained


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
    ends = prediction_ends(corpus)
    return corpus.first_sentences(max(1, int(np.searchsorted(ends, wanted)) + 1))


_WORKER = {}  # a worker process's model, tuning text and RMS scale, handed once by _start_worker


def _start_worker(model, corpus, scale, epsilon):
    _WORKER.update(model=model, corpus=corpus, scale=scale, epsilon=epsilon)


def _worker_ppl(share, setting):
    return _dynamic_ppl(_WORKER["model"], _prefix(_WORKER["corpus"], share), setting, _WORKER["scale"],
                        _WORKER["epsilon"])


class _Scorer:
    """Dynamic evaluation settings scored on a share of the tuning text, in this process or
    in `workers` processes that each get the model once (not with every setting); a
    setting not started by `deadline` is skipped (one already running ends)."""

    def __init__(self, model, corpus, scale, epsilon, workers, bar):
        self.model, self.corpus, self.scale, self.epsilon, self.bar = model, corpus, scale, epsilon, bar
        self.pool = None
        if workers > 1:
            self.pool = concurrent.futures.ProcessPoolExecutor(
                workers, mp_context=multiprocessing.get_context("spawn"), initializer=_start_worker,
                initargs=(model, corpus, scale, epsilon))

    def figures(self, settings, share, deadline):
        """{index in `settings`: ppl} of those scored before the deadline."""
        size = _predictions(_prefix(self.corpus, share))
        if self.bar is not None:
            self.bar.total += len(settings) * size
            self.bar.refresh()
        found = {}
        if self.pool is None:
            for index, setting in enumerate(settings):
                if _past(deadline):
                    break
                found[index] = _dynamic_ppl(self.model, _prefix(self.corpus, share), setting, self.scale, self.epsilon)
                self._done(size)
            return found
        futures = {self.pool.submit(_worker_ppl, share, setting): index for index, setting in enumerate(settings)}
        for future in concurrent.futures.as_completed(futures):
            if future.cancelled():
                continue
            found[futures[future]] = future.result()
            self._done(size)
            if _past(deadline):
                for waiting in futures:
                    waiting.cancel()  # those not started; the running ones end and count
        return found

    def _done(self, size):
        if self.bar is not None:
            self.bar.update(size)

    def close(self):
        if self.pool is not None:
            self.pool.shutdown(cancel_futures=True)
        if self.bar is not None:
            self.bar.close()


def _is_off(setting):
    return setting == OFF


DYNAMIC_KINDS = {"length": ("count", None), "lr": ("scale", None), "decay": ("decay", None)}


def tune_dynamic(model, corpus, lengths=DYNAMIC_LENGTHS, rates=None, decays=DYNAMIC_DECAYS, scale=None,
                 epsilon=1e-3, workers=1, margin=DYNAMIC_MARGIN, stages=DYNAMIC_STAGES, progress=None,
                 deadline=None):
    """Dynamic evaluation of the network `model` on the tuning `corpus`: (length, lr,
    decay), or OFF when no setting beats the model as trained. `scale` (gradient_scale's)
    selects the RMS step; `rates` defaults to the SGD or RMS grid. Successive halving:
    each stage scores the settings left on a longer share of the text (1 / `stages`), and
    those more than `margin` worse than its best stop. A pick on a grid's edge is then
    tried past it on the whole text (up to EXTENSION_ROUNDS times). `deadline`
    (time.monotonic()) cuts the search: the pick is then the best of the last share every
    setting left was scored on (said in its notes). `progress(total)` makes a bar
    (update(n)) over the predictions scored, or None."""
    rates = rates or (DYNAMIC_SGD_RATES if scale is None else DYNAMIC_RMS_RATES)
    _check_grid("lengths", lengths, 1, 1e7)
    _check_grid("rates", rates, 1e-12, 1e6)
    _check_grid("decays", decays, 0, 0.999)
    grids = {"length": tuple(lengths), "lr": tuple(rates), "decay": tuple(decays)}
    # decay by decay, the smallest first: a budget that cuts the first stage has scored every
    # length and rate without decay, not a few rates with every decay
    candidates = [OFF] + [{"length": length, "lr": lr, "decay": decay}
                          for decay, length, lr in itertools.product(sorted(grids["decay"]), grids["length"], grids["lr"])]
    scorer = _Scorer(model, corpus, scale, epsilon, workers, progress(0) if progress else None)
    notes = []
    try:
        tried, share = _halving(scorer, candidates, stages, margin, deadline, notes)
        if share == stages[-1]:
            tried = _extend_dynamic(scorer, tried, grids, share, deadline, notes)
    finally:
        scorer.close()
    pick = _best(tried, _is_off)
    pick.notes = notes + pick.notes
    return pick


def _halving(scorer, candidates, stages, margin, deadline, notes):
    """Successive halving: (setting, ppl) of the settings the last share scored, and that
    share; "off" goes to the end, so that a pick beats it on the text it is picked on."""
    tried, done_share = [], None
    for stage, share in enumerate(stages):
        found = scorer.figures(candidates, share, deadline)
        if len(found) < len(candidates):
            skipped = len(candidates) - len(found)
            if 0 in found and len(found) > 1:  # off and another on this share: pick among those
                tried, done_share = [(candidates[index], found[index]) for index in sorted(found)], share
            notes.append(f"the budget cut the search at 1/{share:g} of the tuning text: {skipped} of "
                         f"{len(candidates)} settings not scored there" + (
                             f"; the rest of the stages ({', '.join(f'1/{s:g}' for s in stages[stage + 1:])}) "
                             "skipped" if stage + 1 < len(stages) else "") +
                         (f"; picked on 1/{done_share:g} of the text" if done_share else
                          "; no setting scored: the model as trained"))
            break
        figures = [found[index] for index in range(len(candidates))]
        tried, done_share = list(zip(candidates, figures)), share
        if stage == len(stages) - 1:
            break
        best = min(figures)
        ranked = sorted(zip(figures, range(len(candidates))))
        kept = {index for figure, index in ranked if figure <= best * (1 + margin)} | \
            {index for _, index in ranked[:2]} | {0}
        candidates = [candidates[index] for index in sorted(kept)]
    if not tried:  # the budget ran out before any setting: the model as trained
        tried = [(OFF, scorer.figures([OFF], stages[-1], None)[0])]
        done_share = stages[-1]
    return tried, done_share


def _extend_dynamic(scorer, tried, grids, share, deadline, notes):
    """The pick's neighbours past each grid edge it is on, scored on the whole text, while
    the pick lands on an edge (up to EXTENSION_ROUNDS times)."""
    grids = dict(grids)
    cut = False
    for _ in range(EXTENSION_ROUNDS):
        pick = _best(tried, _is_off)
        if pick.setting == OFF:
            return tried
        extended = _extensions(pick.setting, grids, DYNAMIC_KINDS)
        if not extended:
            break
        if _past(deadline):
            cut = True
            break
        neighbours = []
        for name, new in extended.items():
            notes.append(_extension_note(name, pick.setting[name], grids[name], new))
            grids[name] = tuple(sorted(grids[name] + (new,)))
            neighbours.append({**pick.setting, name: new})
        found = scorer.figures(neighbours, share, deadline)
        tried = tried + [(neighbours[index], found[index]) for index in sorted(found)]
    pick = _best(tried, _is_off)
    if pick.setting != OFF:
        notes.extend(_edge_notes(pick.setting, grids, DYNAMIC_KINDS, cut))
    return tried

