"""A binary back-off model (nplmtk/ngram/binary.py) scored from its file without numpy: the
fast path of `nplm ppl -lm MODEL -ppl TEXT`, whose start-up is most of its time. The file is
opened and its header checked by nplmtk.container, its tables checked in one compiled pass
over the memory map (nplmtk/_ext/ngram_fast_score: XXH64, keys, log10 values) and walked
there; the report is nplmtk/ppl_report.py's, as nplmtk/ppl.py writes it.

Every check of container.load and load_binary is made here too, and a file that fails one,
or that this path does not take (another kind of model, a file written before XXH64, a
vocabulary not in id order), gives None: the caller then takes the usual path, which reports
the fault in its own words. So a file is never accepted here that the usual loader refuses."""
import os
import stat

from .. import container
from .._ext.ngram_fast_score import MAX_LEVELS, MappedTables
from ..errors import NplmError
from ..io.reading import GZIP_MAGIC, decoded_lines, long_line_start, max_line_bytes, max_token_bytes
from ..ppl_report import TextStats, order_tag, write_sentences, write_totals
from ..text import sentences_as_read, split_words
from .layout import BINARY_KIND, MAX_LOG10_BACKOFF, PSEUDO_ZERO, TABLES

SPECIALS = ("<s>", "</s>")  # ids 1 and 2, after the unknown word (nplmtk.vocab)


class MappedModel:
    """The checked tables of a binary back-off model (`tables`, a MappedTables) and its
    words in id order."""

    def __init__(self, path, tables, words):
        self.path, self.tables, self.words = path, tables, words


def open_mapped(path):
    """The MappedModel of the binary back-off model at `path`, or None (see the module's
    docstring)."""
    try:
        header, buffer = container.opened(path)
    except NplmError:
        return None
    if header["kind"] != BINARY_KIND:
        return None
    words = _words_in_id_order(header.get("vocab"))
    order = header["meta"].get("order")
    if words is None or type(order) is not int or not 1 <= order <= MAX_LEVELS:
        return None
    entries = {entry["name"]: entry for entry in header["arrays"]}
    if set(entries) != {f"{name}.{k}" for name in TABLES for k in range(1, order + 1)} \
            or not all("xxh64" in entry for entry in entries.values()):
        return None
    try:
        tables = MappedTables(buffer, len(words))
        longest = max_token_bytes()
    except (MemoryError, NplmError):
        return None
    try:
        joined = "\n".join(words).encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate
        return None
    if not tables.hash_words(joined, len(words), longest):
        return None
    # no key past (rows of the order below) x (words) may reach 2^63: the kernel counts rows up to it
    rows_below = 1
    for k in range(1, order + 1):
        table = [entries[f"{name}.{k}"] for name in TABLES]
        count = table[0]["shape"][0] if len(table[0]["shape"]) == 1 else -1
        if count < 0 or rows_below * len(words) >= 1 << 62 or any(
                entry["dtype"] != TABLES[name] or entry["shape"] != [count]
                or entry["offset"] % container.ITEM_BYTES[entry["dtype"]] for name, entry in zip(TABLES, table)):
            return None
        if not tables.add_order(count, tuple(entry["offset"] for entry in table),
                                tuple(entry["xxh64"] for entry in table), PSEUDO_ZERO, MAX_LOG10_BACKOFF):
            return None
        rows_below = count
    return MappedModel(path, tables, words)


def _words_in_id_order(vocab):
    """The header's words when they are the ids' order (the unknown word, <s>, </s>, then the
    rest, as a vocabulary writes them) and the unknown word is one a vocabulary takes; else
    None. (hash_words checks the words themselves.)"""
    if vocab is None:
        return None
    words, unk = vocab["words"], vocab["unk"]
    if unk in SPECIALS or not unk or unk != "".join(split_words(unk)) or tuple(words[:3]) != (unk, *SPECIALS):
        return None
    return words


def read_plain_text(path):
    """The bytes of the text at `path` when it is a regular file of plain UTF-8 (no gzip) whose
    lines are within max_line_bytes(), else None (the usual reader reports what is wrong)."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None
        with open(path, "rb") as f:
            data = f.read()
        if data[:2] == GZIP_MAGIC or long_line_start(data, max_line_bytes()) >= 0:
            return None
        data.decode("utf-8")
    except (OSError, ValueError, NplmError):  # ValueError: a NUL in the name, or UnicodeDecodeError
        return None
    return data


def perplexity(model, path, data, debug, write):
    """SRILM's report of the text `data` (read from `path`) scored by `model` (a MappedModel),
    as nplmtk.ppl.perplexity writes it at -debug `debug` (0, 1 or 2); the file's TextStats,
    or None (nothing written) for a text without words, or whose lines Python splits into
    other sentences than the kernel does (the usual path's affair)."""
    scored = model.tables.score_text(data, debug >= 1)
    if scored is None:
        return None
    sentences, words, oovs, zeroprobs, logprob = scored[:5]
    if debug == 0:
        total = TextStats(sentences, words, oovs, zeroprobs, logprob)
    else:
        (sentence_logprob, sentence_oovs, sentence_zeroprobs, bounds), (targets, log10, orders) = scored[5:]
        raw = sentences_as_read(decoded_lines(data, path))  # as nplmtk.ppl.read_scored_text reads them
        if len(raw) != sentences:  # split otherwise than the kernel splits: the usual path's affair
            return None
        tokens = {}
        if debug >= 2:
            tokens = {"words": model.words, "targets": targets, "tags": [order_tag(n) for n in orders],
                      "log10": log10.tolist()}
        total = write_sentences(raw, bounds, sentence_logprob, sentence_oovs, sentence_zeroprobs, write, **tokens)
    write_totals(path, total, write)
    return total
