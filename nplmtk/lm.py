"""The one interface every model implements (shared/DESIGN.md); nplmtk.models.load opens
any model file."""
import math

import numpy as np

from .errors import InputError, NplmError

LN10 = math.log(10)


class LanguageModel:
    """A model over `vocab`. Subclasses implement `log10probs` or `logprobs`.

    Both give, for an encoded corpus (built with this model's vocabulary), the log
    probability of every predicted token, sentence by sentence: each word, then `</s>`.
    A token the model cannot score (outside its vocabulary) is -inf, never a guess.
    """

    vocab = None
    kind = "model"

    def log10probs(self, corpus):
        return self.logprobs(corpus) / LN10

    def logprobs(self, corpus):
        return self.log10probs(corpus) * LN10

    def next_distribution(self, history):
        """Probabilities of every vocabulary word after the word ids in `history`."""
        raise NplmError(f"{self.kind} models cannot list a next-word distribution")

    def hit_tags(self, corpus):
        """Per-token tags for `ppl -debug 2` (SRILM prints the n-gram order used)."""
        return None

    def check_vocab(self, corpus):
        if corpus.vocab is not self.vocab and corpus.vocab != self.vocab:
            raise InputError("encoded with a different vocabulary than the model", path=corpus.name)
