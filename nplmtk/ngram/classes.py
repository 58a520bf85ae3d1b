"""Word classes and class n-gram models, as SRILM's `ngram-class`, `ngram-count` on
`replace-words-with-classes` output and `ngram -classes -simple-classes` use them.

A classes file (SRILM's classes-format) holds `class [prob] word` per line: the word is a
member of the class with p(word | class) = prob. Each word belongs to at most one class.
A class n-gram model is a back-off model over class names (and the words of no class) with
p(w | h) = p(w | c(w)) p(c(w) | c(h)), every word of h replaced by its class.
"""
import math
import os

import numpy as np

from .. import container
from ..errors import InputError
from ..io import check_words, max_token_bytes, open_output, read_lines
from ..lm import LanguageModel
from .arpa import arpa_bytes, read_arpa
from ..text import split_words
from ..vocab import BOS, EOS, Vocabulary

CLASS_NAME = "CLASS-{:05d}"  # ngram-class's names
# p(word | class) over a class's members sums to 1 at most; SRILM and nplm write 16 digits,
# so a sum above 1 + 1e-6 is no rounding (it would make the model give more than 1 in all)
CLASS_MASS_SLACK = 1e-6


class WordClasses:
    """`class_of[word]` (a class name) and `prob[word]` = p(word | its class)."""

    def __init__(self, class_of, prob):
        self.class_of, self.prob = dict(class_of), dict(prob)

    @property
    def names(self):
        return list(dict.fromkeys(self.class_of.values()))

    @classmethod
    def read(cls, path, lines=None):
        """An SRILM classes file (or its `lines`, `path` naming them); a member without a
        probability gets an equal share of what its class's other members leave (SRILM's
        rule)."""
        class_of, prob, first_line, missing, mass, longest = {}, {}, {}, {}, {}, max_token_bytes()
        for number, line in enumerate(read_lines(path) if lines is None else lines, 1):
            fields = split_words(line)
            if not fields:
                continue
            check_words(line, fields, path, number, longest)
            name, rest = fields[0], fields[1:]
            value = None
            if rest:
                try:
                    value = float(rest[0])
                    rest = rest[1:]
                except ValueError:
                    pass
            if len(rest) != 1:
                raise InputError("expected 'class [prob] word' (one word per class member)", path=path, line=number)
            word = rest[0]
            if word in first_line:
                raise InputError(f"word '{word}' is in a class already (line {first_line[word]}): nplm's classes "
                                 "give each word one class", path=path, line=number)
            if value is not None and not (math.isfinite(value) and 0 < value <= 1):
                raise InputError(f"class membership probability {rest and value} is not in (0, 1]", path=path,
                                 line=number)
            if word in (BOS, EOS):
                raise InputError(f"{word} cannot be a class member", path=path, line=number)
            first_line[word] = number
            class_of[word] = name
            if value is None:
                missing.setdefault(name, []).append(word)
            else:
                prob[word] = value
                mass[name] = mass.get(name, 0.0) + value
                if mass[name] > 1 + CLASS_MASS_SLACK:
                    raise InputError(f"class '{name}': the probabilities of its members up to '{word}' sum to "
                                     f"{mass[name]:.7g}, above 1", path=path, line=number)
        if not class_of:
            raise InputError("no classes", path=path)
        overlap = set(class_of.values()) & set(class_of)
        if overlap:
            raise InputError(f"'{sorted(overlap)[0]}' is both a class and a word", path=path)
        for name, words in missing.items():
            left = 1 - sum(p for w, p in prob.items() if class_of[w] == name)
            for word in words:
                prob[word] = max(left, 0.0) / len(words)
        return cls(class_of, prob)

    def write(self, path):
        """SRILM's classes-format, one `class prob word` per line, classes in order."""
        with open_output(path) as out:
            out.write(self.text())

    def text(self):
        by_class = {}
        for word, name in self.class_of.items():
            by_class.setdefault(name, []).append(word)
        return "".join(f"{name} {self.prob[w]!r} {w}\n" for name in sorted(by_class) for w in by_class[name])

    def replace(self, words):
        """The token of each word: its class, or the word itself if it has none."""
        return [self.class_of.get(w, w) for w in words]


def token_vocabulary(vocab, classes):
    """The vocabulary of a class n-gram over `vocab`'s words: the classes, then the words
    of no class (the specials first, as every Vocabulary)."""
    tokens = [w for w in vocab.words if w not in classes.class_of] + sorted(set(classes.class_of.values()))
    return Vocabulary(tokens, unk=vocab.unk_word)


def token_ids(vocab, classes, tokens):
    """Per word id of `vocab`, the id of its token in `tokens` (-1 if none)."""
    ids = np.full(len(vocab), -1, dtype=np.int32)
    for word, i in vocab.index.items():
        ids[i] = tokens.index.get(classes.class_of.get(word, word), -1)
    return ids


def save_class_model(path, arpa, classes):
    """ClassNgramModel's file of the class n-gram's ARPA text `arpa` (uint8: an array, or a
    container.PiecedArray read from a file larger than memory) and WordClasses `classes`."""
    container.save(path, ClassNgramModel.kind, {
        "arpa": arpa, "classes": np.frombuffer(classes.text().encode("utf-8"), dtype=np.uint8)})


def file_bytes(path, piece_bytes=1 << 24):
    """A file's bytes as a container.PiecedArray (uint8), read a piece at a time."""
    def pieces():
        with open(path, "rb") as source:
            while piece := source.read(piece_bytes):
                yield np.frombuffer(piece, dtype=np.uint8)
    return container.PiecedArray(np.uint8, (os.path.getsize(path),), pieces)


class ClassNgramModel(LanguageModel):
    """p(w | h) = p(w | c(w)) p(c(w) | c(h)) over a back-off model `tokens` of classes and
    words (SRILM's SimpleClassNgram: a word whose class the model lacks stays itself)."""

    kind = "class-ngram"

    def __init__(self, tokens, classes):
        self.tokens, self.classes = tokens, classes
        names = set(classes.class_of.values())
        words = [w for w in tokens.vocab.words if w not in names] + list(classes.class_of)
        self.vocab = Vocabulary(list(dict.fromkeys(words)), unk=tokens.vocab.unk_word)
        unigram = set(tokens.vocab.words[i] for i in tokens.grams[0][:, 0])
        self.token_of = np.full(len(self.vocab), -1, dtype=np.int32)
        self.member_log10 = np.zeros(len(self.vocab), dtype=np.float32)
        for word, i in self.vocab.index.items():
            name = classes.class_of.get(word)
            if name is not None and name in unigram:
                self.token_of[i] = tokens.vocab.index[name]
                self.member_log10[i] = np.float32(math.log10(classes.prob[word]))  # SRILM's ProbToLogP
            else:
                self.token_of[i] = tokens.vocab.index.get(word, -1)

    @property
    def order(self):
        return self.tokens.order

    def save(self, path):
        """One file for `load`, `mix` and `-mix-lm`: the class n-gram's ARPA text and the
        classes file, each read back by its own (validating) reader."""
        save_class_model(path, np.frombuffer(arpa_bytes(self.tokens), dtype=np.uint8), self.classes)

    @classmethod
    def from_file(cls, model_file):
        arrays = model_file.arrays
        if set(arrays) != {"arpa", "classes"} or any(a.dtype != np.uint8 or a.ndim != 1 for a in arrays.values()):
            raise InputError("a class n-gram holds exactly the uint8 arrays 'arpa' and 'classes'", path=model_file.path)
        try:
            lines = bytes(arrays["classes"]).decode("utf-8").split("\n")
        except UnicodeDecodeError:
            raise InputError("its classes are not UTF-8 text", path=model_file.path) from None
        return cls(read_arpa(model_file.path, data=arrays["arpa"]), WordClasses.read(model_file.path, lines))

    def _token_windows(self, corpus):
        windows = corpus.windows(self.order)
        tokens = self.token_of[windows]
        return windows[:, -1], np.where(tokens < 0, self.tokens.vocab.unk, tokens).astype(np.int32), tokens[:, -1] < 0

    def log10probs(self, corpus):
        self.check_vocab(corpus)
        targets, rows, unknown = self._token_windows(corpus)
        scores = self.member_log10[targets] + self.tokens.score_rows(rows)  # float32, as SRILM's LogP
        return np.where(unknown, -np.inf, scores).astype(np.float64)

    def hit_orders(self, corpus):
        targets, rows, unknown = self._token_windows(corpus)
        _, used = self.tokens.score_rows(rows, with_order=True)
        return np.where(unknown, 0, used).tolist()

    def hit_tags(self, corpus):
        return [f"[{n}gram]" if n else "[OOV]" for n in self.hit_orders(corpus)]

    # a word at a time (nplmtk/incremental.py): the state is the token model's
    def begin_state(self):
        return self.tokens.begin_state()

    def null_state(self):
        return self.tokens.null_state()

    def score_words(self, states, words):
        from ..incremental import word_ids
        ids = word_ids(self.vocab, words)
        tokens = self.token_of[ids]
        scores, after = self.tokens.score_words(states, np.where(tokens < 0, self.tokens.vocab.unk, tokens))
        scores = self.member_log10[ids] + scores.astype(np.float32)  # float32, as log10probs
        return np.where(tokens < 0, -np.inf, scores).astype(np.float64), after

    def next_distribution(self, history):
        context = [self.token_of[w] for w in history]
        tokens = self.tokens.next_distribution([t if t >= 0 else self.tokens.vocab.unk for t in context])
        probs = np.where(self.token_of >= 0, tokens[np.maximum(self.token_of, 0)], 0.0)
        return probs * 10.0 ** self.member_log10.astype(np.float64)
