"""Encoded corpora: int32 word ids plus sentence offsets, and n-gram windows over them."""
import numpy as np

from ._ext.corpus_kernels import ngram_windows
from ._ext.text_kernels import encode_words
from .errors import InputError, ParameterError
from .io import read_text_bytes
from .vocab import sentence_tokens

OOV = -1  # id of a word outside the vocabulary when it is not mapped to <unk>


class Corpus:
    """Sentences of one text as ids. `ids[offsets[s]:offsets[s+1]]` is sentence s
    (without `<s>`/`</s>`); words outside the vocabulary are `<unk>` when `unk` is set,
    else `OOV` (-1) so that scoring can count them as SRILM does."""

    def __init__(self, ids, offsets, vocab, name="<corpus>"):
        self.ids = np.ascontiguousarray(ids, dtype=np.int32)
        self.offsets = np.ascontiguousarray(offsets, dtype=np.int64)
        self.vocab = vocab
        self.name = name

    @classmethod
    def read(cls, path, vocab, unk=True, normalize=None):
        data = read_text_bytes(path, normalize or None)
        ids, lengths = encode_words(data, vocab.encoded_words, vocab.unk if unk else OOV, vocab.bos, vocab.eos)
        if len(ids) == 0:
            raise InputError("empty corpus (no words)", path=path)
        offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        return cls(ids, offsets, vocab, name=path)

    @classmethod
    def from_lines(cls, lines, vocab, unk=True, name="<corpus>"):
        tokens, lengths = [], []
        for line in lines:
            words = sentence_tokens(line)
            if words:
                tokens += words
                lengths.append(len(words))
        if not tokens:
            raise InputError("empty corpus (no words)", path=name)
        get, missing = vocab.index.get, vocab.unk if unk else OOV
        ids = np.array([get(w, missing) for w in tokens], dtype=np.int32)
        offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        return cls(ids, offsets, vocab, name=name)

    @classmethod
    def concatenate(cls, corpora):
        """One corpus holding the sentences of several (same vocabulary)."""
        ids = np.concatenate([c.ids for c in corpora])
        lengths = np.concatenate([np.diff(c.offsets) for c in corpora])
        offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        return cls(ids, offsets, corpora[0].vocab, name="+".join(c.name for c in corpora))

    @property
    def num_sentences(self):
        return len(self.offsets) - 1

    @property
    def num_words(self):
        return len(self.ids)

    @property
    def num_oovs(self):
        return int(np.count_nonzero(self.ids == OOV))

    def sentence(self, s):
        return self.ids[self.offsets[s]:self.offsets[s + 1]]

    def targets(self):
        """The predicted tokens: each sentence's words, then `</s>` (the last column of
        `windows`, without building them)."""
        return np.insert(self.ids, self.offsets[1:], self.vocab.eos)

    def windows(self, order):
        """One row per predicted token (every word and each `</s>`): the n-1 previous
        ids (`<s>`-padded) then the token. Shape (words + sentences, order), int32."""
        if order < 1:
            raise ParameterError(f"{{order}} must be at least 1, got {order}")
        return ngram_windows(self.ids, self.offsets, order, self.vocab.bos, self.vocab.eos)
