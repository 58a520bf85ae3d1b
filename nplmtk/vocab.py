"""Vocabularies: word <-> id, with `<unk>`, `<s>` and `</s>` always at ids 0, 1, 2."""
import itertools
import queue
from collections import Counter

from ._ext import text_kernels
from .errors import InputError, NplmError, ParameterError
from .io import (check_tokens, check_words, comes_once, max_token_bytes, open_output, read_bytes, read_lines,
                 read_text_blocks, token_too_long)
from .text import Normalizer, sentence_tokens, split_words  # noqa: F401 (sentence_tokens: from here too)
from .threads import in_order

COUNT_BLOCK_BYTES = 16 << 20  # count_words' blocks, counted two at a time (three held at once)
COUNT_THREADS = 2

UNK, BOS, EOS = "<unk>", "<s>", "</s>"


class Vocabulary:
    """An ordered list of words. Ids 0, 1, 2 are the unknown word, `<s>` and `</s>`;
    the rest follow in the order given (built vocabularies: count descending, then
    byte order)."""

    def __init__(self, words, counts=None, unk=UNK):
        if unk in (BOS, EOS):
            raise ParameterError(f"{{unk}} cannot be {unk}: <s> and </s> mark where sentences begin and end")
        if not unk or unk != "".join(split_words(unk)):  # a model no reader could take back
            raise ParameterError(f"{{unk}} {unk!r} is not one word: no text can hold it")
        specials = [unk, BOS, EOS]
        special = set(specials).__contains__
        rest = list(itertools.filterfalse(special, words))
        check_tokens(rest)
        self.words = specials + rest
        self.index = dict(zip(self.words, range(len(self.words))))
        if len(self.index) != len(self.words):
            raise NplmError("vocabulary has duplicate words")
        self.counts = None
        if counts is not None:
            self.counts = [int(counts.get(w, 0)) for w in self.words]
        self.unk_word = unk
        self.unk, self.bos, self.eos = 0, 1, 2
        self._encoded = None

    @property
    def encoded_words(self):
        """The words as UTF-8 bytes, in id order (for the byte-level kernels)."""
        if self._encoded is None:  # one encode of the words joined, unless a word holds the separator
            encoded = "\n".join(self.words).encode("utf-8").split(b"\n")
            self._encoded = encoded if len(encoded) == len(self.words) else [w.encode("utf-8") for w in self.words]
        return self._encoded

    def __len__(self):
        return len(self.words)

    def __contains__(self, word):
        return word in self.index

    def __eq__(self, other):
        return isinstance(other, Vocabulary) and self.words == other.words

    def id(self, word):
        return self.index.get(word, self.unk)

    @classmethod
    def from_counts(cls, counts, min_count=1, max_size=None, unk=UNK):
        """Keep words seen at least `min_count` times, at most `max_size` of them (not
        counting the three specials); the rest fold into the unknown word's count."""
        specials = {unk, BOS, EOS}
        # by count, descending, then in byte order: a str's order is its UTF-8 bytes' order
        # (code points), and a sort keeps the order of equals (3x faster than one sort by tuples)
        ranked = sorted(sorted(w for w in counts if w not in specials), key=counts.__getitem__, reverse=True)
        kept = list(itertools.takewhile(lambda w: counts[w] >= min_count, ranked))
        if max_size is not None:
            kept = kept[:max_size]
        merged = {w: counts[w] for w in kept}
        merged[unk] = counts.get(unk, 0) + sum(map(counts.__getitem__, ranked[len(kept):]))
        merged[BOS] = counts.get(BOS, 0)
        merged[EOS] = counts.get(EOS, 0)
        return cls(kept, merged, unk=unk)

    @classmethod
    def read(cls, path, unk=UNK):
        """An SRILM vocabulary file: one word per line, optionally followed by a count."""
        words, counts, first_line, limit = [], {}, {}, max_token_bytes()
        for number, line in enumerate(read_lines(path), 1):
            fields = split_words(line)
            if not fields:
                continue
            if len(fields) > 2:
                raise InputError(f"expected 'word' or 'word count', got {len(fields)} fields", path=path, line=number)
            word = fields[0]
            check_words(line, fields, path, number, limit)
            if word in first_line:
                raise InputError(f"duplicate word '{word}' (first on line {first_line[word]})", path=path, line=number)
            first_line[word] = number
            if len(fields) == 2:
                try:
                    counts[word] = int(fields[1])
                except ValueError:
                    raise InputError(f"count '{fields[1]}' is not an integer", path=path, line=number) from None
            words.append(word)
        if not words:
            raise InputError("empty vocabulary", path=path)
        return cls(words, counts if len(counts) == len(words) else None, unk=unk)

    def write(self, path, with_counts=False):
        """One word per line in id order; `with_counts` adds a tab and the count."""
        if with_counts and self.counts is None:
            raise NplmError("this vocabulary has no counts to write", path=path)
        with open_output(path) as out:
            if with_counts:
                out.writelines(f"{w}\t{c}\n" for w, c in zip(self.words, self.counts))
            else:
                out.writelines(f"{w}\n" for w in self.words)


def count_words(paths, normalize=None):
    """Word counts over text files, one sentence per line; `<s>` and `</s>` are counted
    once per non-empty sentence, as SRILM's unigram counts do. Blocks are counted two at
    a time, each into one of two tables (text_kernels.WordCounts) that are joined at the end."""
    tables = queue.SimpleQueue()
    for _ in range(COUNT_THREADS):
        tables.put(text_kernels.WordCounts())
    limit = max_token_bytes()

    def counted(block):
        table = tables.get()  # a free one: as many as the blocks counted at once
        try:
            return block, table.add(block, limit)
        finally:
            tables.put(table)

    for path in paths:
        if comes_once(path):
            read_bytes(path)  # stdin or a pipe kept for the pass that encodes it
        lines = 0
        blocks = read_text_blocks(path, normalize or None, COUNT_BLOCK_BYTES)
        for block, (long_start, long_length) in in_order(counted, blocks, COUNT_THREADS):
            if long_start >= 0:
                raise token_too_long(path, lines + block.count(b"\n", 0, long_start) + 1, long_length, limit)
            lines += block.count(b"\n")
    counts, sentences = Counter(), 0
    while not tables.empty():
        table = tables.get()
        counts.update({word.decode("utf-8"): count for word, count in table.counts().items()})
        sentences += table.sentences
    if not counts:
        raise InputError("empty corpus (no words)", path=", ".join(paths))
    counts[BOS] += sentences
    counts[EOS] += sentences
    return counts
