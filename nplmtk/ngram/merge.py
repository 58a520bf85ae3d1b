"""Static interpolation of back-off models: one back-off model holding the union of the
components' n-grams, each probability the components' mixture, the back-off weights
recomputed so that it sums to one. This is SRILM's `ngram -lm A -mix-lm B [-mix-lm2 C ..]
-lambda L [-mix-lambda2 L2 ..]` without `-bayes` (ngram.cc's makeStaticMixLM, NgramLM.cc's
destructive Ngram::mixProbs, then recomputeBOWs), reproduced to the printed digit:

- the models are merged pairwise, in the order given: (A + B) + C ..., A + B with the
  weight lambda_A of A, the result + C with 1 - lambda_C / (lambda_A + lambda_B + lambda_C),
  and so on (each step's merged model, float32 and renormalised, is the next one's input);
- in each step every n-gram of either model gets
  p(w | h) = lambda p_A(w | h) + (1 - lambda) p_B(w | h)   (Prob.h's MixLogP)
  where p_A and p_B are each model's own back-off estimate (its stored probability, or
  its back-off walk), read from float32 log10s and stored as one;
- the contexts are A's and those of B's n-grams (SRILM's trie after the insertions), and
  every back-off weight is recomputed from the mixed probabilities, shortest contexts
  first, left-over unigram mass going to the words of probability 0 (recomputeBOWs).

The result is an approximation of the exact (dynamic) mixture `nplmtk.mixture.Mixture`:
where neither model lists (h, w) the merged model backs off with a weight fitted to the
mixed probabilities, not with each model's own weight.
"""
import numpy as np

from ..errors import NplmError, ParameterError
from ..vocab import Vocabulary
from .backoff import BackoffModel
from .estimate import log10_to_prob, renormalise
from .index import NgramIndex


def merge_backoff(models, weights, words=()):
    """One BackoffModel from back-off `models` and their mixture `weights` (SRILM's
    mixLambda[0..n-1], each in [0, 1], summing to 1), merged pairwise as SRILM does.
    `words` (SRILM's -vocab) join the vocabulary: those no model has get unigrams of
    the left-over mass (SRILM's distributeProb gives every word of its vocabulary one)."""
    models, weights = list(models), [float(w) for w in weights]
    if len(models) < 2 or len(models) != len(weights):
        raise ParameterError(f"{{models}}: a static mixture needs two or more models and one weight each, got "
                             f"{len(models)} models and {len(weights)} weights")
    for model in models:
        if not isinstance(model, BackoffModel):
            raise NplmError(f"a static mixture merges back-off n-gram models only, not {model.described}")
    if any(not 0 <= w <= 1 for w in weights) or abs(sum(weights) - 1) > 1e-6:
        raise ParameterError("{weights} must lie in [0, 1] and sum to 1, got "
                             + " ".join(f"{w:g}" for w in weights))
    merged, total = models[0], weights[0]
    for model, weight in zip(models[1:], weights[1:]):
        total += weight
        share = 0.0 if weight == 0.0 else weight / total  # ngram.cc: "make sure 0/0 = 0"
        merged = mix_pair(merged, model, 1.0 - share, words)
    return merged


def mix_pair(first, second, weight, words=()):
    """SRILM's Ngram::mixProbs(lm2, lambda) then recomputeBOWs: `first` and `second`
    merged, `weight` (a double, SRILM's lambda) the weight of `first`; `words` as
    merge_backoff's."""
    vocab, second_ids = _union_vocabulary(first.vocab, second.vocab, words)
    added = np.array([vocab.index[w] for w in words if w not in vocab.words[:3]], dtype=np.int64)
    keys, first_rows = _union_keys(first, second, second_ids, len(vocab), added)
    index = NgramIndex(len(vocab), [], keys)
    grams = index.rows()
    logp = []
    for k, rows in enumerate(grams):
        # p_first(w | h) and p_second(w | h) of every n-gram of the union (MixLogP, eq. in the docstring)
        mass = weight * log10_to_prob(_scores(first, rows, len(first.vocab)))
        mass += (1 - weight) * log10_to_prob(_scores(second, _in_ids(rows, second_ids, len(vocab)),
                                                     len(second.vocab)))
        with np.errstate(divide="ignore"):
            logp.append(np.log10(mass).astype(np.float32))
    # SRILM's trie: first's contexts, and those its insertions of second's n-grams make
    # (prefixes and their suffixes, which BackoffModel.node adds); then recomputeBOWs
    has_bow = [np.zeros(len(k), dtype=bool) for k in keys]
    for k, (node, rows) in enumerate(zip(first.node, first_rows)):
        has_bow[k][rows[node]] = True
    has_bow[-1][:] = False
    return renormalise(BackoffModel(vocab, grams, logp, [np.zeros(len(k), dtype=np.float32) for k in keys],
                                    has_bow, index=index))


def _union_vocabulary(first, second, words):
    """The words of both and `words` (first's in its order, ids unchanged, then the
    others) and the id of each of second's words in it."""
    if second.unk_word != first.unk_word:
        raise NplmError(f"the models name the unknown word differently ({first.unk_word} and {second.unk_word}): "
                        "a static mixture needs one")
    others = [w for w in list(second.words) + list(words) if w not in first.index]
    vocab = Vocabulary(first.words + list(dict.fromkeys(others)), unk=first.unk_word) if others else first
    return vocab, np.array([vocab.index[w] for w in second.words], dtype=np.int64)


def _union_keys(first, second, second_ids, vocab_size, added):
    """The sorted keys (nplmtk/ngram/index.py) of the union's n-grams of each order, and
    the row in them of each of first's n-grams; the unigrams include the words `added`."""
    keys, first_rows, second_rows = [], [], []
    for k in range(max(first.order, second.order)):
        parts = []
        for model, rows, ids in ((first, first_rows, None), (second, second_rows, second_ids)):
            if k >= model.order:
                parts.append(np.zeros(0, dtype=np.int64))
                continue
            own = model.index.keys[k]
            last = own % len(model.vocab) if k else own
            last = last if ids is None else ids[last]
            parts.append(last if k == 0 else rows[k - 1][own // len(model.vocab)] * vocab_size + last)
        union = np.union1d(*parts) if k else np.union1d(np.union1d(*parts), added)
        keys.append(union)
        for model, rows, part in ((first, first_rows, parts[0]), (second, second_rows, parts[1])):
            if k < model.order:
                rows.append(np.searchsorted(union, part))
    return keys, first_rows


def _in_ids(rows, ids, vocab_size):
    """Rows of union ids in a model's own ids (-1 for words it does not have)."""
    own = np.full(vocab_size, -1, dtype=np.int32)
    own[ids] = np.arange(len(ids), dtype=np.int32)
    return own[rows]


def _scores(model, rows, own_size):
    """The model's float32 log10 p(w | h) of rows (h..., w) in its own ids: its stored
    probability, else its back-off walk (SRILM's wordProbBO); -inf for a word it lacks."""
    rows = np.where(rows < own_size, rows, -1).astype(np.int32)
    return model.score_rows(np.ascontiguousarray(rows))
