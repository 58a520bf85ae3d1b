"""Encoded corpora: int32 word ids plus sentence offsets, and n-gram windows over them."""
import numpy as np

from ._ext.checksum_kernels import xxh64
from ._ext.corpus_kernels import gather_stream_steps, gather_windows, ngram_windows
from ._ext.text_kernels import encode_words
from .errors import InputError, NplmError, ParameterError
from .io import BLOCK_BYTES, read_text_blocks, read_text_range
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
    def read(cls, path, vocab, unk=True, normalize=None, memory_map=False, block_bytes=BLOCK_BYTES):
        """The whole text of `path`. With `memory_map` the ids go to an unnamed temporary
        file (in TMPDIR) mapped into memory, so a corpus larger than memory can be
        trained on: the text streams through in blocks, and only the pages in use stay."""
        if not memory_map:
            blocks = list(cls.read_blocks(path, vocab, unk, normalize, block_bytes, allow_empty=True))
            ids = (blocks[0].ids if len(blocks) == 1 else
                   np.concatenate([b.ids for b in blocks]) if blocks else np.zeros(0, np.int32))
            lengths = [np.diff(b.offsets) for b in blocks]
        else:
            ids, lengths = _mapped_ids(cls.read_blocks(path, vocab, unk, normalize, block_bytes, allow_empty=True),
                                       path)
        if len(ids) == 0:
            raise InputError("empty corpus (no words)", path=path)
        lengths = np.concatenate(lengths)
        offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        return cls(ids, offsets, vocab, name=path)

    @classmethod
    def read_blocks(cls, path, vocab, unk=True, normalize=None, block_bytes=BLOCK_BYTES, allow_empty=False,
                    byte_range=None):
        """The text of `path` as corpora of whole sentences, one per block of about
        `block_bytes` of text (for counting a text larger than memory); with `byte_range`
        (start, stop), only the lines of those bytes of a regular file (read_text_range)."""
        missing, any_words = vocab.unk if unk else OOV, False
        blocks = (read_text_blocks(path, normalize or None, block_bytes) if byte_range is None
                  else read_text_range(path, *byte_range, normalize or None, block_bytes))
        for data in blocks:
            ids, lengths = encode_words(data, vocab.encoded_words, missing, vocab.bos, vocab.eos)
            if len(ids):
                any_words = True
                offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
                np.cumsum(lengths, out=offsets[1:])
                yield cls(ids, offsets, vocab, name=path)
        if not any_words and not allow_empty:
            raise InputError("empty corpus (no words)", path=path)

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

    def fingerprint(self):
        """The text as the network reads it (through its vocabulary and normalisation): its
        size and the XXH64 of its word ids and sentence bounds; a few ms for 10^6 words. A
        checkpoint records its training text's; dynamic evaluation knows a text it scored."""
        offsets_hash = xxh64(np.ascontiguousarray(self.offsets).view(np.uint8))
        return {"sentences": self.num_sentences, "words": len(self.ids),
                "xxh64": xxh64(np.ascontiguousarray(self.ids).view(np.uint8), offsets_hash)}

    @property
    def num_sentences(self):
        return len(self.offsets) - 1

    @property
    def num_words(self):
        return len(self.ids)

    @property
    def num_oovs(self):
        return int(np.count_nonzero(self.ids == OOV))

    def word_counts(self, block=1 << 24):
        """How often each vocabulary id occurs (OOVs left out), counted a block of ids at a
        time: bincount of the whole would widen every id to 8 bytes at once."""
        counts = np.zeros(len(self.vocab), dtype=np.int64)
        for start in range(0, len(self.ids), block):
            ids = self.ids[start:start + block]
            counts += np.bincount(ids[ids >= 0], minlength=len(self.vocab))
        return counts

    def sentence(self, s):
        return self.ids[self.offsets[s]:self.offsets[s + 1]]

    def first_sentences(self, count):
        """The corpus of its first `count` sentences."""
        count = min(count, self.num_sentences)
        return Corpus(self.ids[:self.offsets[count]], self.offsets[:count + 1], self.vocab, self.name)

    def within_words(self, words):
        """Its first sentences that hold at most `words` words (at least one sentence)."""
        return self.first_sentences(max(int(np.searchsorted(self.offsets, words, side="right")) - 1, 1))

    def targets(self):
        """The predicted tokens: each sentence's words, then `</s>` (the last column of
        `windows`, without building them)."""
        return np.insert(self.ids, self.offsets[1:], self.vocab.eos)

    def window_examples(self, order, unk):
        """The rows of `windows(order)` whose target is in the vocabulary, made on demand
        (context OOVs read as `unk`): what training shuffles, without the windows in memory."""
        return WindowExamples(self, order, unk)

    def stream_steps(self, streams, unk):
        """The text as (input, target) steps of `streams` parallel streams, made on demand
        (what a recurrent model trains on, without the steps in memory)."""
        return StreamSteps(self, streams, unk)

    def windows(self, order):
        """One row per predicted token (every word and each `</s>`): the n-1 previous
        ids (`<s>`-padded) then the token. Shape (words + sentences, order), int32."""
        if order < 1:
            raise ParameterError(f"{{order}} must be at least 1, got {order}")
        return ngram_windows(self.ids, self.offsets, order, self.vocab.bos, self.vocab.eos)


def _mapped_ids(blocks, path):
    """(ids, [lengths of each block]): a text of one block (`block_bytes`) as it was read, a
    longer one memory-mapped from an unnamed temporary file (in TMPDIR) written whole."""
    blocks = iter(blocks)
    first, second = next(blocks, None), next(blocks, None)
    if second is None:  # no temporary file: a full TMPDIR cannot fail a small text
        return (first.ids, [np.diff(first.offsets)]) if first else (np.zeros(0, np.int32), [np.zeros(0, np.int64)])
    import itertools
    import tempfile  # here, as in nplmtk.io: scoring starts without it
    lengths = []
    try:
        with tempfile.TemporaryFile(prefix="nplm-corpus-") as store:
            for block in itertools.chain((first, second), blocks):
                # file.write, not ndarray.tofile: tofile lost its last bytes on a full disk without an
                # error, and the next block left a hole, whose page faults as SIGBUS on a full tmpfs
                store.write(memoryview(block.ids).cast("B"))
                lengths.append(np.diff(block.offsets))
            store.flush()
            ids = np.memmap(store, dtype=np.int32, mode="r", shape=(store.tell() // 4,))
    except OSError as err:
        raise NplmError(f"cannot keep the corpus in a temporary file ({err.strerror or err}): set TMPDIR to a "
                        "folder with room", path=path) from None
    return ids, lengths


def _checked_index(index, size):
    """An index array or slice of examples made on demand, as an array within 0..size-1
    (the gathering kernels do not check)."""
    index = np.arange(*index.indices(size)) if isinstance(index, slice) else np.asarray(index)
    if len(index) and (index.min() < 0 or index.max() >= size):
        raise IndexError(f"example index out of range 0..{size - 1}")
    return index


class WindowExamples:
    """Training examples of a feed-forward model: row r is row `rows[r]` of
    `corpus.windows(order)` (all of them when every target is in the vocabulary), with
    context OOVs as `unk`. `examples[index]` gathers the windows of an index array or
    slice, so an epoch's shuffled chunks come from the ids alone (4 bytes per word
    besides an int32 permutation) instead of order x 4 bytes per window."""

    def __init__(self, corpus, order, unk):
        if order < 1:
            raise ParameterError(f"{{order}} must be at least 1, got {order}")
        self.corpus, self.order, self.unk = corpus, order, unk
        self.total = corpus.num_words + corpus.num_sentences
        self.rows = None
        if np.any(corpus.ids < 0):  # OOV targets are not examples
            targets = np.ones(self.total, dtype=bool)
            oov = np.flatnonzero(corpus.ids < 0)  # word i of sentence s is row i + s
            targets[oov + np.searchsorted(corpus.offsets, oov, side="right") - 1] = False
            self.rows = np.flatnonzero(targets)

    def __len__(self):
        return self.total if self.rows is None else len(self.rows)

    def __getitem__(self, index):
        index = _checked_index(index, len(self))
        rows = index if self.rows is None else self.rows[index]
        c = self.corpus
        return gather_windows(c.ids, c.offsets, np.ascontiguousarray(rows, dtype=np.int64), self.order, c.vocab.bos,
                              c.vocab.eos, self.unk)


class StreamSteps:
    """The text as (input, target) pairs, (<s>, w1) .. (wn, </s>) sentence after sentence
    (input OOVs as `unk`, target OOVs -1), cut at sentence starts into `streams` streams of
    about equal length: `steps[index]` gathers rows (len(index), 2, streams) int32 of those
    steps, padding past a stream's end with <s> and -1. `words`: the targets in the
    vocabulary, all steps together."""

    def __init__(self, corpus, streams, unk):
        if streams < 1:
            raise ParameterError(f"{{streams}} must be at least 1, got {streams}")
        self.corpus, self.streams, self.unk = corpus, streams, unk
        sentences, total = corpus.num_sentences, corpus.num_words + corpus.num_sentences
        starts = corpus.offsets[:-1] + np.arange(sentences)  # each sentence's first pair
        wanted = np.arange(1, streams) * total / streams
        cuts = np.concatenate([[0], starts[np.minimum(np.searchsorted(starts, wanted), sentences - 1)]])
        cuts = np.unique(cuts) if sentences else np.zeros(1, dtype=np.int64)
        self.bounds = np.ascontiguousarray(np.append(cuts, total), dtype=np.int64)
        self.steps = int(np.diff(self.bounds).max()) if total else 0
        self.words = total - corpus.num_oovs

    def __len__(self):
        return self.steps

    def __getitem__(self, index):
        index = _checked_index(index, len(self))
        c = self.corpus
        return gather_stream_steps(c.ids, c.offsets, self.bounds, np.ascontiguousarray(index, dtype=np.int64),
                                   self.streams, c.vocab.bos, c.vocab.eos, self.unk)
