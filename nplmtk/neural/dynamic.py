"""Dynamic evaluation (Krause, Kahembwe, Murray & Renals 2018, "Dynamic evaluation of
neural sequence models"): the network adapts to the text as it scores it. The text's
predictions, in order, are cut into segments of `length`; each segment is scored first,
then the gradient of its mean -log p moves the parameters:

- SGD (their sec. 3):  theta <- theta - lr g + decay (theta_0 - theta);
- RMS (their sec. 4, "RMS with a global decay prior"), with ms the root of the mean
  squared gradient of segments of a training text and r = ms / (the mean of ms over the
  parameter blocks), capped at 1 / decay:
      theta <- theta + lr (decay r (theta_0 - theta) - g / (ms + epsilon)).

theta_0 are the trained parameters, which the model has again when scoring ends. A
recurrent network carries its state through the text (one stream), from the pass that
scored each segment."""
from dataclasses import dataclass

import numpy as np

from ..errors import ParameterError
from ..lm import LanguageModel
from .blas import blas_threads
from .network import MAX_PARAMETER, check_fits

# the kernels' buffers of a segment: about this many bytes per prediction and word (scores
# and their gradients, float32)
SEGMENT_BYTES_PER_WORD = 8


@dataclass(frozen=True)
class DynamicEvaluation:
    length: int  # predictions a segment
    lr: float
    decay: float = 0.0
    epsilon: float = 1e-3  # RMS only

    def check(self):
        if self.length < 1:
            raise ParameterError(f"{{length}} must be at least 1, got {self.length}")
        if not self.lr > 0:
            raise ParameterError(f"{{lr}} must be above 0, got {self.lr}")
        if not 0 <= self.decay < 1:
            raise ParameterError(f"{{decay}} must be in [0, 1), got {self.decay}")
        if not self.epsilon > 0:
            raise ParameterError(f"{{epsilon}} must be above 0, got {self.epsilon}")


def _float_blocks(model):
    return {name: array for name, array in model.params.items() if array.dtype == np.float32}


def _segment_gradients(model, corpus, length, keys=None):
    """(positions, log p, gradient of -sum log p, the predictions it sums) of each segment
    in order, each gradient computed at the parameters as they are when its segment comes
    (the caller moves them, dividing by the count: the mean's gradient). `keys` (a
    row a prediction, the network's top_width()), when given, gets the
    state that predicted each token."""
    blocks = _float_blocks(model)
    grads = {name: np.zeros_like(array) for name, array in blocks.items()}
    step = model.adaptation(length)
    states = None if keys is None else np.zeros((length, keys.shape[1]), dtype=np.float32)
    for rows, positions in model.adaptation_segments(corpus, length):
        for array in grads.values():
            array[...] = 0
        if keys is None:
            logp = step(rows, grads)
        else:
            logp = step(rows, grads, states[:len(rows)])
            predicted = positions >= 0
            keys[positions[predicted]] = states[:len(rows)][predicted]
        yield positions, logp, grads, max(int(np.isfinite(logp).sum()), 1)


def gradient_scale(model, corpus, length):
    """RMS's ms of each parameter block: the root of the mean squared mean gradient of the
    segments of `corpus` (a training text), at the trained parameters."""
    squares = {name: np.zeros(array.shape) for name, array in _float_blocks(model).items()}
    count = 0
    with blas_threads(1):
        for _, _, grads, scored in _segment_gradients(model, corpus, length):
            for name, g in grads.items():
                squares[name] += np.square(g, dtype=np.float64) / scored ** 2
            count += 1
    if not count:
        raise ParameterError("{rms_text}: no words to take the gradients' scale from")
    return {name: np.sqrt(total / count).astype(np.float32) for name, total in squares.items()}


def dynamic_logprobs(model, corpus, settings, scale=None, progress=None, keys=False):
    """Natural-log probability of every predicted token of `corpus` (as model.logprobs
    orders them) under dynamic evaluation; `scale` (gradient_scale's) selects RMS.
    `progress(total)`, when given, makes a bar (update(n)) or None. With `keys` (a
    recurrent network), (log p, the adapted network's state that predicted each token),
    as model.logprobs_and_states gives them: the continuous cache over dynamic evaluation."""
    settings.check()
    predictions = corpus.num_words + corpus.num_sentences
    # a segment longer than the text is the text: its buffers are sized by what is scored
    length = max(1, min(settings.length, predictions))
    check_fits(SEGMENT_BYTES_PER_WORD * length * len(model.vocab),
               f"{{length}} {length:,} predictions a segment ({len(model.vocab):,} words)")
    settings = DynamicEvaluation(length, settings.lr, settings.decay, settings.epsilon)
    bar = progress(predictions) if progress else None
    blocks = _float_blocks(model)
    trained = {name: array.copy() for name, array in blocks.items()}
    rates = None
    if scale is not None:
        mean = np.mean([float(ms.mean()) for ms in scale.values()])
        rates = {name: np.minimum(ms / mean, 1 / settings.decay if settings.decay else np.inf).astype(np.float32)
                 for name, ms in scale.items()}
    out = np.full(predictions, -np.inf)
    states = np.zeros((predictions, model.top_width()), dtype=np.float32) if keys else None
    try:
        with blas_threads(1):  # a segment's products are small: more threads only wait on each other
            _adapt(model, corpus, settings, scale, rates, blocks, trained, out, bar, states)
    finally:
        for name, array in blocks.items():
            array[...] = trained[name]
        if bar is not None:
            bar.close()
    return (out, states) if keys else out


def _adapt(model, corpus, settings, scale, rates, blocks, trained, out, bar, keys):
    """Score each segment, then move the parameters by its gradient. Without decay only
    the rows with a gradient move: a segment touches few of the embedding's rows."""
    total, count, done = 0.0, 0, 0
    for positions, logp, grads, scored in _segment_gradients(model, corpus, settings.length, keys):
        lr = settings.lr / scored  # the step of the mean's gradient, without dividing every block
        predicted = positions >= 0
        out[positions[predicted]] = logp[predicted]
        done += int(predicted.sum())
        if bar is not None:
            scored = logp[predicted & np.isfinite(logp)]
            total, count = total + scored.sum(), count + len(scored)
            bar.set_postfix_str(f"ppl {np.exp(-total / max(count, 1)):.2f}", refresh=False)
            bar.update(int(predicted.sum()))
        for name, array in blocks.items():
            g = grads[name]
            rows = slice(None)
            if not settings.decay and g.ndim == 2:
                rows = np.flatnonzero(g.any(axis=1))
                g = g[rows]
            with np.errstate(over="ignore", invalid="ignore"):  # a diverging step is said below, not warned
                if scale is None:
                    step = lr * g
                    if settings.decay:
                        step += settings.decay * (array - trained[name])
                else:
                    step = lr * g / (scale[name][rows] + settings.epsilon)
                    if settings.decay:
                        step += settings.lr * settings.decay * rates[name] * (array - trained[name])
                array[rows] -= step
                moved = array[rows]
                largest = float(np.abs(moved).max()) if moved.size else 0.0
            if not largest <= MAX_PARAMETER:  # nan fails too
                raise ParameterError(f"{{lr}} {settings.lr:g}: the adaptation diverged after {done:,} predictions (a "
                                     f"weight of {name} reached {largest:g}, where trained networks stay within "
                                     f"{MAX_PARAMETER:g}): give a smaller {{lr}}")


class DynamicModel(LanguageModel):
    """A network scored by dynamic evaluation: a model like the others to ppl and mixtures.
    The last text scored is remembered (its fingerprint, log p and states): picking
    settings on held-out text scores it with the adapted network once for the continuous
    cache's grid, the mixture's EM and the cache's grid, not once for each (each pass
    adapts from the trained weights again, so it would give the same numbers). The last text's
    states stay until another text is scored."""

    kind = "dynamic"

    def __init__(self, model, settings, scale=None, progress=None):
        self.model, self.vocab, self.settings, self.scale, self.progress = model, model.vocab, settings, scale, progress
        self._scored = None  # (fingerprint, log p, states or None) of the last text

    def logprobs(self, corpus):
        return self._scores(corpus, keys=False)[0]

    def logprobs_and_states(self, corpus):
        """log p and the adapted network's state that predicted each token (a recurrent
        network's): the continuous cache's keys, as the network's own logprobs_and_states."""
        return self._scores(corpus, keys=True)

    def _scores(self, corpus, keys):
        """(log p, states or None) of `corpus`, from the last pass when it scored the same
        text (and kept the states if `keys` asks for them); the states are read-only."""
        self.check_vocab(corpus)  # the fingerprint is of ids: the same ids in another vocabulary are refused
        fingerprint = corpus.fingerprint()
        if self._scored is None or self._scored[0] != fingerprint or (keys and self._scored[2] is None):
            self._scored = None  # the last text's states freed before this pass
            scored = dynamic_logprobs(self.model, corpus, self.settings, self.scale, self.progress, keys=keys)
            logp, states = scored if keys else (scored, None)
            logp.flags.writeable = False
            if states is not None:
                states.flags.writeable = False
            self._scored = (fingerprint, logp, states)
        return self._scored[1].copy(), self._scored[2]
