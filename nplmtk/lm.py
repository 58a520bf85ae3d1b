"""The one interface every model implements (shared/DESIGN.md), and `load`."""
import math

import numpy as np

from .errors import NplmError

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
            raise NplmError(f"{corpus.name}: encoded with a different vocabulary than the model")


def load(path):
    """Open any model file: ARPA text (optionally gzipped) or an nplm container."""
    from . import container, mixture  # noqa: F401  (registers the mixture kind)
    from .neural import mlp, train  # noqa: F401  (register their model kinds)
    from .ngram import deleted_interpolation  # noqa: F401
    from .ngram.arpa import read_arpa
    if container.is_container(path):
        model_file = container.load(path)
        loader = MODEL_KINDS.get(model_file.kind)
        if loader is None:
            raise NplmError(f"{path}: model kind '{model_file.kind}' is not supported by this version")
        return loader(model_file)
    return read_arpa(path)


# container kind -> function(ModelFile) -> LanguageModel; filled by the model modules.
MODEL_KINDS = {}


def register(kind):
    def decorator(loader):
        MODEL_KINDS[kind] = loader
        return loader
    return decorator

