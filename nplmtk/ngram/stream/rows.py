"""The first stage: where each row's prefix and suffix lie among the order below
(`prefix{k}`, `suffix{k}`), each row's last word (`word{k}`: the keys' part that the
later passes read, not the row's k words) and its words' flags (`flags{k}`: what the
discounts and probabilities ask of them), and Kneser-Ney's continuation counts
(`continuation{k}`: how many words come before each row), from the store's sorted rows."""
import contextlib
import threading

import numpy as np

from ..._ext.ngram_sorting import find_sorted_rows, key_order, search_sorted_forward
from ...errors import NplmError
from ...threads import in_order
from ..row_files import row_bytes
from .files import CONTINUATION, FLAGS, GRAMS, PREFIX, ROW, SUFFIX, WORD

NO_ROW = -1
# a search's keys, queries, their order (and its sort's scratch), places and hits a row (suffix rows)
SEARCH_TEMPORARIES = 5 * (ROW,)
# the bits of `flags{k}`
FIRST_NON_EVENT, LAST_NON_EVENT, SKIPPED_CONTEXT = 1, 2, 4


def prefix_rows(grams, k, size, chunk_rows, block_rows):
    """(start, stop, rows, chunk) for chunks of the `size` order-k rows: the row of each
    one's first k-1 words among the order-(k-1) rows (NO_ROW where none is), both orders'
    sorted rows (`grams(order, start, stop)`) read forward once and merged; `chunk` the
    chunk's n-grams as read."""
    table, table_start = np.empty((0, k - 1), dtype=np.int32), 0
    for start in range(0, size, chunk_rows):
        stop = min(start + chunk_rows, size)
        chunk = grams(k, start, stop)
        queries = np.ascontiguousarray(chunk[:, :-1])
        found, done = np.full(len(queries), NO_ROW, dtype=np.int64), 0
        while True:
            resolved = find_sorted_rows(queries[done:], table, found[done:])
            placed = found[done:done + resolved]
            placed[placed >= 0] += table_start
            done += resolved
            if done == len(queries):
                break
            table_start += len(table)  # the queries left lie past every row held
            del table  # before the next block comes: one block held, not two
            table = grams(k - 1, table_start, table_start + block_rows)
            if not len(table):
                break
        yield start, stop, found, chunk
        if found[-1] >= 0:
            drop = int(found[-1]) - table_start  # the next queries come at or after the last one
            table, table_start = table[drop:], table_start + drop


def prefix_and_suffix_rows(estimate):
    """`prefix{k}` of every order (orders side by side), then `suffix{k}` and the
    continuation counts, order by order (each order's suffix rows need the order below's)."""
    for _ in in_order(lambda k: write_prefix_rows(estimate, k), range(2, estimate.order + 1)):
        pass
    for k in range(2, estimate.order + 1):
        if k == 2:  # a bigram's suffix row is its second word's id: the words' continuation counts
            estimate.word_continuation = estimate.exchange.word_continuation(bigram_words(estimate, "suffix", 1))
        else:
            estimate.exchange.suffix_rows(estimate, k)


def write_prefix_rows(estimate, k):
    """`prefix{k}`: the row of each order-k row's first k-1 words among the order-(k-1)
    rows, both read forward once and merged; and `word{k}` and `flags{k}`, each row's
    last word and its words' flags."""
    if k == 2:
        return bigram_words(estimate, "prefix", 0, last_words=True)
    with estimate.files.writer("prefix", k) as out, estimate.files.writer("word", k) as words, \
            estimate.files.writer("flags", k) as flags:
        for start, stop, found, grams in prefix_rows(
                estimate.grams, k, estimate.sizes[k - 1],
                estimate.pass_rows(row_bytes(k, GRAMS, PREFIX, WORD, FLAGS) + row_bytes(k - 1, GRAMS)),
                estimate.pass_rows(row_bytes(k - 1, GRAMS))):
            if np.any(found < 0):
                not_closed(estimate, k, grams[np.argmax(found < 0)][:-1], "prefix")
            out.append(found + estimate.first_rows[k - 2])
            words.append(grams[:, -1])
            flags.append(row_flags(estimate, grams))


def row_flags(estimate, grams):
    """The flags of n-grams `grams` (rows of k words): FIRST_NON_EVENT and LAST_NON_EVENT
    where the first or last word is no event (`<s>`, or `<unk>` unless it is a word),
    SKIPPED_CONTEXT where the context gets no probabilities (SRILM: it ends in `</s>`, or
    holds `<unk>` unless it is a word)."""
    events, vocab = estimate.events, estimate.vocab
    flags = events.non_event(grams[:, 0]).astype(np.uint8) * np.uint8(FIRST_NON_EVENT)
    flags |= events.non_event(grams[:, -1]).astype(np.uint8) * np.uint8(LAST_NON_EVENT)
    if grams.shape[1] > 1:
        skipped = grams[:, -2] == vocab.eos
        if not events.unk_is_word:
            for column in range(grams.shape[1] - 1):  # column by column: np.any(axis=1) over k-1 columns is slow
                skipped |= grams[:, column] == vocab.unk
        flags |= skipped.astype(np.uint8) * np.uint8(SKIPPED_CONTEXT)
    return flags


def flags_of(estimate, k, start, stop):
    """`flags{k}` of order-k rows start..stop-1 (a unigram's from its word)."""
    if k == 1:
        return row_flags(estimate, estimate.grams(1, start, stop))
    return estimate.files.read("flags", k, start, stop)


def bigram_words(estimate, name, column, last_words=False):
    """`name2`: a bigram's word `column`, which is its row among the unigrams (word ids),
    and with `last_words` `word2` and `flags2` too; returns how many bigrams each word is the word
    `column` of. Its chunks are a pass's share: the prefix rows of the orders above run beside it."""
    counted = np.zeros(len(estimate.vocab), dtype=np.int64)
    with estimate.files.writer(name, 2) as out, \
            (estimate.files.writer("word", 2) if last_words else contextlib.nullcontext()) as last, \
            (estimate.files.writer("flags", 2) if last_words else contextlib.nullcontext()) as flags:
        for start, stop in estimate.chunks(2, estimate.pass_rows(row_bytes(2, GRAMS, PREFIX, WORD, FLAGS))):
            grams = estimate.grams(2, start, stop)
            words = grams[:, column].astype(np.int64)
            counted += np.bincount(words, minlength=len(counted))
            out.append(words)
            if last is not None:
                last.append(grams[:, -1])
                flags.append(row_flags(estimate, grams))
    return counted


def suffix_rows_by_windows(estimate, k):
    """`suffix{k}`: the row of each order-k row's last k-1 words among the order-(k-1)
    rows. Its key there is (the row of the prefix's suffix) * V + the last word: the
    prefix's suffix row comes from `suffix{k-1}` in order, the key is searched
    among the order-(k-1) keys a window at a time. The rows found are counted into
    `continuation{k-1}` (Kneser-Ney's continuation counts: each order-k row is one
    distinct word before its suffix)."""
    continuation = estimate.files.writer("continuation", k - 1)
    counted, counting = [], threading.Lock()
    search_rows = estimate.pass_rows(row_bytes(k, PREFIX, SUFFIX, *SEARCH_TEMPORARIES))

    def window(low, high, last):
        keys = np.empty(high - low, dtype=np.int64)  # made a chunk at a time: 8 bytes a row at the peak
        for start in range(low, high, search_rows):
            keys[start - low:start - low + search_rows] = row_keys(estimate, k - 1, start,
                                                                   min(start + search_rows, high))
        counted[:] = [np.zeros(high - low, dtype=CONTINUATION.dtype)]

        def fill(start, stop, found):
            query = suffix_keys(estimate, k, start, stop)
            inside = np.flatnonzero((query >= keys[0]) & (query <= keys[-1]))
            by_key = inside[key_order(query[inside])]  # sorted queries: a search that runs forward
            place = np.empty(len(by_key), dtype=np.int64)
            search_sorted_forward(keys, query[by_key], place)
            np.minimum(place, len(keys) - 1, out=place)
            hit = keys[place] == query[by_key]
            found[by_key[hit]] = estimate.first_rows[k - 2] + low + place[hit]
            rows, hits = _runs_of_sorted(place[hit])  # not a window-long bincount per chunk
            with counting:  # chunks are filled side by side
                counted[0][rows] += hits
            if last and np.any(found < 0):
                not_closed(estimate, k, estimate.grams(k, start, stop)[np.argmax(found < 0)][1:], "suffix")
        return fill

    # the window (keys and counts) in a third of the memory: one pass at 20M words, -memory 1G
    estimate.filled_by_windows("suffix", k, NO_ROW,
                               max(1, estimate.memory // 3 // row_bytes(k - 1, ROW, CONTINUATION)), search_rows,
                               window, finished=lambda: continuation.append(counted[0]))
    continuation.close()


def suffix_keys(estimate, k, start, stop):
    """The keys of rows start..stop-1 of order k's suffixes among order k-1 (the row of
    the prefix's suffix * V + the last word)."""
    prefix = estimate.files.read("prefix", k, start, stop) - estimate.first_rows[k - 2]
    inner = estimate.files.read("suffix", k - 1, int(prefix[0]), int(prefix[-1]) + 1)
    return inner[prefix - prefix[0]] * len(estimate.vocab) + last_words(estimate, k, start, stop)


def row_keys(estimate, k, start, stop):
    """NgramIndex's keys of order-k rows start..stop-1 (their prefix row * V + word)."""
    words = last_words(estimate, k, start, stop).astype(np.int64)
    if k == 1:
        return words
    return estimate.files.read("prefix", k, start, stop) * len(estimate.vocab) + words


def last_words(estimate, k, start, stop):
    """The last word of each order-k row start..stop-1 (`word{k}`; a unigram's row is its word)."""
    if k == 1:
        return estimate.grams(1, start, stop)[:, 0]
    return estimate.files.read("word", k, start, stop)


def not_closed(estimate, k, words, part):
    text = " ".join(estimate.vocab.words[w] for w in words)
    raise NplmError(f"counts are not closed under {part}es: the {k - 1}-gram '{text}' of a {k}-gram has no count")


def _runs_of_sorted(values):
    """(the distinct values, how many times each comes) of sorted `values`."""
    if not len(values):
        return values, values
    starts = np.flatnonzero(np.concatenate([[True], values[1:] != values[:-1]]))
    return values[starts], np.diff(np.append(starts, len(values)))
