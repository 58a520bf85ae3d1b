"""Scoring a word at a time, for decoders (a beam search, an LM server, a lattice): every
model has a state for the start of a sentence and one for no context, and scores a word
after a state, giving log10 p and the state after the word:

    state = model.begin_state()
    logp, state = model.score_word(state, "the")         # one pair
    logps, states = model.score_words(states, word_ids)   # a beam's worth, through the kernels

States are immutable, hashable and compare by what the model reads of the history, so that
a decoder can merge hypotheses whose futures agree: a back-off n-gram's is its context cut
to what the model can still use (KenLM's State), a feed-forward network's its window, a
recurrent network's its vectors and the word it reads next, a mixture's its components'.
Copying one is taking a reference.

KenLM's Python module spells the same calls on a mutable `State`
(`model.BeginSentenceWrite(state)`, `model.BaseScore(in_state, word, out_state)`); nplm's
models answer them too (nplmtk/lm.py), so code written for `kenlm.Model` runs on
`nplmtk.load(path)` with `kenlm.State` replaced by `nplmtk.State`."""
import numpy as np

from .errors import ParameterError


class State:
    """KenLM's `kenlm.State`: a slot that BeginSentenceWrite, NullContextWrite and BaseScore
    write a model's state into (`value`); equal and hashed as that state."""
    __slots__ = ("value",)

    def __init__(self, value=None):
        self.value = value

    def __eq__(self, other):
        return isinstance(other, State) and self.value == other.value

    def __hash__(self):
        return hash(self.value)

    def __copy__(self):
        return State(self.value)

    def __deepcopy__(self, memo):
        return State(self.value)  # the value is immutable

    def __repr__(self):
        return f"State({self.value!r})"


def word_ids(vocab, words):
    """int32 ids of `words` (strings, read as the vocabulary's ids or <unk>, or ids already)."""
    if isinstance(words, np.ndarray) and words.dtype.kind in "iu":
        ids = words.astype(np.int32, copy=False)
    else:
        ids = np.fromiter((vocab.id(w) if isinstance(w, str) else w for w in words), dtype=np.int64,
                          count=len(words))
        ids = ids.astype(np.int32)
    if ids.ndim != 1 or (len(ids) and not (ids.min() >= 0 and ids.max() < len(vocab))):
        raise ParameterError(f"{{words}} must be words or word ids below {len(vocab)}")
    return ids


def checked_pairs(states, ids):
    if len(states) != len(ids):
        raise ParameterError(f"{{states}} and {{words}} differ in length ({len(states)} and {len(ids)})")


def padded_windows(states, ids, width):
    """(pairs, width) int32 rows: each state's words (a tuple of ids, recent last)
    right-aligned before its word, -1 to the left of them."""
    rows = np.full((len(ids), width), -1, dtype=np.int32)
    for row, context in zip(rows, states):
        if len(context) >= width:
            raise ParameterError(f"a state of {len(context)} words is none of this model's (at most {width - 1})")
        if context:
            row[width - 1 - len(context):width - 1] = context
    rows[:, -1] = ids
    return rows


class RecurrentState:
    """A recurrent network between two words: per layer its state and cell rows (float32,
    one flat array), and the word it reads next. Hashed by value once, when first asked."""
    __slots__ = ("vectors", "word", "_hash")

    def __init__(self, vectors, word):
        self.vectors, self.word, self._hash = vectors, int(word), None
        self.vectors.flags.writeable = False

    def __eq__(self, other):
        return (self is other or isinstance(other, RecurrentState) and self.word == other.word
                and np.array_equal(self.vectors, other.vectors))

    def __hash__(self):
        if self._hash is None:
            self._hash = hash((self.word, self.vectors.tobytes()))
        return self._hash

    def __repr__(self):
        return f"RecurrentState(word {self.word}, {len(self.vectors)} values)"


class HistoryState(tuple):
    """The words read since <s> (ids), for a model scored by whole sentences (the generic
    way, LanguageModel's; exact for any model, at a cost that grows with the sentence)."""
    __slots__ = ()


def history_scores(model, states, ids):
    """log10 p of each id after its HistoryState: the sentences (history, word) scored
    together, each on its own (as N-best hypotheses are), and the states after them."""
    from .corpus import Corpus
    eos = model.vocab.eos
    after = [HistoryState(history + (word,)) for history, word in zip(states, ids.tolist())]
    sentences = [state[:-1] if state[-1] == eos else state for state in after]
    lengths = np.array([len(s) for s in sentences], dtype=np.int64)
    flat = np.array([w for s in sentences for w in s], dtype=np.int32)
    corpus = Corpus(flat, np.concatenate([[0], np.cumsum(lengths)]), model.vocab, name="<states>")
    scores = model.log10probs_sharing_prefixes(corpus)
    # token j of sentence s sits at offsets[s] + s + j (each sentence has its </s>)
    positions = np.concatenate([[0], np.cumsum(lengths + 1)])[:-1] + np.array(
        [len(history) for history in states], dtype=np.int64)
    return scores[positions], after
