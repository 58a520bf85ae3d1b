"""The one interface every model implements (shared/DESIGN.md); nplmtk.models.load opens
any model file."""
import math
import sys

import numpy as np

from .corpus import Corpus
from .errors import InputError, NplmError, ParameterError
from .vocab import sentence_tokens

LN10 = math.log(10)
LOG_FLOAT_MAX = math.log(sys.float_info.max)  # about 709.78


def perplexity_of(mean_logprob):
    """exp(-mean log p), natural logs: inf where that overflows a float (a diverging network's
    mean of -1000 nats), not an OverflowError; nan stays nan."""
    return math.inf if -mean_logprob > LOG_FLOAT_MAX else math.exp(-mean_logprob)


class LanguageModel:
    """A model over `vocab`. Subclasses implement `log10probs` or `logprobs`.

    Both give, for an encoded corpus (built with this model's vocabulary), the log
    probability of every predicted token, sentence by sentence: each word, then `</s>`.
    A token the model cannot score (outside its vocabulary) is -inf, never a guess.
    """

    vocab = None
    kind = "model"
    order = None  # the longest n-gram the model reads (KenLM's Model.order); None: the whole history

    @property
    def described(self):
        """The model in a message: 'an nplm-lstm model', 'a mixture model'."""
        return f"{'an' if self.kind[:1] in 'aeinou' else 'a'} {self.kind} model"

    def log10probs(self, corpus):
        return self.logprobs(corpus) / LN10

    def logprobs(self, corpus):
        return self.log10probs(corpus) * LN10

    def log10probs_sharing_prefixes(self, corpus):
        """log10probs for sentences that share beginnings (N-best lists): a model may score
        each common prefix once (a recurrent network's trie of states)."""
        return self.log10probs(corpus)

    def next_distribution(self, history):
        """Probabilities of every vocabulary word after <s> and the word ids in `history`
        (the sentence so far)."""
        raise NplmError(f"{self.described} cannot list a next-word distribution")

    def ngram_logprobs(self, grams, progress=None):
        """Natural-log p(w | h) of each row (h..., w) of `grams`, for rewriting an n-gram
        model's probabilities with this model's (nplmtk/convert.py); networks have it."""
        raise NplmError(f"{self.described} does not score single n-grams (a network does)")

    def check_scores_ngrams(self):
        """Refuse, before any work, a model whose ngram_logprobs would refuse."""
        if type(self).ngram_logprobs is LanguageModel.ngram_logprobs:
            self.ngram_logprobs(None)

    def sampling_streams(self, count, start):
        """Up to `count` streams for drawing sentences side by side (nplmtk/generate.py), each
        after <s> and the word ids `start`: by default one, through next_distribution."""
        from .generate import HistoryStreams
        return HistoryStreams(self, start)

    def hit_orders(self, corpus):
        """Per token, the order of the n-gram that scored it (0: out of the vocabulary), for
        a back-off model; None for others."""
        return None

    def hit_tags(self, corpus):
        """Per-token tags for `ppl -debug 2` (SRILM prints the n-gram order used)."""
        return None

    # -- the Python API, as KenLM's (`nplmtk.load(path).score("a sentence")`) -----------------
    def full_scores(self, sentence, eos=True):
        """(log10 p, n-gram order used or None, whether out of vocabulary) of each word of
        `sentence` (a string) and then of </s>, each after <s> and the words before it; a
        word outside the vocabulary is scored as <unk> (-inf without one)."""
        words = _checked_tokens(sentence)
        ids = np.array([self.vocab.id(w) for w in words], dtype=np.int32)
        corpus = Corpus(ids, [0, len(ids)], self.vocab, name="<sentence>")
        scores = self.log10probs(corpus)
        orders = [order or None for order in self.hit_orders(corpus) or [None] * len(scores)]
        oov = [w not in self.vocab.index for w in words] + [False]
        triples = list(zip(scores.tolist(), orders, oov))
        return triples if eos else triples[:-1]

    def score(self, sentence, bos=True, eos=True):
        """log10 P(sentence) (with </s> unless eos is False)."""
        if not bos:
            raise ParameterError("{bos} False: every model here conditions a sentence's first word on <s>")
        return float(sum(score for score, _, _ in self.full_scores(sentence, eos)))

    def perplexity(self, sentence):
        """10^(-log10 P / (words + 1)), as KenLM's (the words and </s>)."""
        return 10.0 ** (-self.score(sentence) / (len(_checked_tokens(sentence)) + 1))

    # -- scoring a word at a time (nplmtk/incremental.py) ------------------------------------
    # The generic way, exact for any model: the state is the sentence so far, each pair
    # scored as a whole sentence. Every model of nplm's own has a state of its own instead.
    def begin_state(self):
        """The state after <s>."""
        from .incremental import HistoryState
        return HistoryState()

    def null_state(self):
        """The state with no context (a model that conditions on <s> has none: its start)."""
        return self.begin_state()

    def score_words(self, states, words):
        """log10 p of each word after its state (float64) and the state after it, for
        pairs of `states` and `words` (words or word ids; a word outside the vocabulary
        reads as <unk>), in one call through the model's kernels."""
        from .incremental import checked_pairs, history_scores, word_ids
        ids = word_ids(self.vocab, words)
        checked_pairs(states, ids)
        return history_scores(self, states, ids)

    def score_word(self, state, word):
        """(log10 p, the state after it) of one word (or word id) after `state`."""
        scores, states = self.score_words([state], [word])
        return float(scores[0]), states[0]

    # -- what a decoder merges on (SRILM's LM::contextID and contextBOW; nplmtk/server.py) ----
    def context_id(self, context, word=None):
        """(id, length): which part of `context` (word ids, oldest first) the model reads to
        predict `word` (any word when None), as SRILM's contextID: equal ids of equal length
        mean the same future. This generic answer, SRILM's LM's: every context is its own
        (id 0) and all of it is read."""
        return 0, len(context)

    def context_bow(self, context, length):
        """log10 of the back-off weight that cutting `context` to its last `length` words
        costs (SRILM's contextBOW); 0 for a model that does not back off."""
        return 0.0

    # KenLM's spelling (kenlm.Model), on nplmtk.State slots
    def BeginSentenceWrite(self, state):  # noqa: N802 (KenLM's names)
        state.value = self.begin_state()

    def NullContextWrite(self, state):  # noqa: N802
        state.value = self.null_state()

    def BaseScore(self, in_state, word, out_state):  # noqa: N802
        """log10 p(word | in_state), the state after it written into out_state."""
        if in_state.value is None:
            raise ParameterError("{in_state} is empty: write it with BeginSentenceWrite or NullContextWrite first")
        score, out_state.value = self.score_word(in_state.value, word)
        return score

    def __contains__(self, word):
        return word in self.vocab.index

    def check_vocab(self, corpus):
        if corpus.vocab is not self.vocab and corpus.vocab != self.vocab:
            raise InputError("encoded with a different vocabulary than the model", path=corpus.name)


def _checked_tokens(sentence):
    """The words of a sentence given to the Python API: a str that is valid text (a lone
    surrogate, "\\ud800", has no UTF-8 and so could never be a word of a model)."""
    if not isinstance(sentence, str):
        raise ParameterError(f"{{sentence}} must be a str, got {type(sentence).__name__}")
    try:
        return sentence_tokens(sentence)
    except UnicodeEncodeError as err:
        raise InputError(f"the sentence is not valid text: {err.object[err.start:err.end]!r} at character "
                         f"{err.start} ({err.reason})") from None
