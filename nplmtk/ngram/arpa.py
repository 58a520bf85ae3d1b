"""ARPA back-off files, read and written as SRILM and KenLM do: log10 values with 7
significant digits, -99 for log 0, gzip-aware, every defect reported with its line."""
import io
import queue
import re
import threading

import numpy as np

from .._ext.arpa_format import format_section
from .._ext.arpa_parse import SectionError, next_header, parse_section, row_offset, word_table
from .._ext.backoff_kernels import children_runs
from .._ext.ngram_sorting import sort_keys_carrying, srilm_order
from .._ext.text_kernels import checked_utf8
from ..container import MAGIC as CONTAINER_MAGIC
from ..errors import InputError
from ..io import GZIP_MAGIC, READ_BYTES, check_tokens, open_output, read_mapped, release_mapped
from ..text import split_words
from ..threads import computed_ahead, usable_cores
from ..vocab import UNK, Vocabulary
from .backoff import BackoffModel, log10_fault, outside_log10_domain
from .counts import MAX_ORDER, byte_ranks
from .index import NgramIndex
from .word_slots import WordSlots

KENLM_BINARY_MAGIC = b"mmap lm http://kheafield.com/code"  # KenLM's lm/binary_format.cc
_COUNT_LINE = re.compile(r"ngram\s+(\d+)\s*=\s*(\d+)\s*$")
_SECTION = re.compile(r"\\(\d+)-grams:\s*$")
_PIECE = 1 << 20


def write_arpa(model, path):
    """The model as SRILM writes it, line for line (the same n-grams in the same order)."""
    with open_output(path, binary=True) as out:
        _write_arpa_to(model, out)


def arpa_bytes(model):
    """The ARPA text `write_arpa` writes, as bytes."""
    out = io.BytesIO()
    _write_arpa_to(model, out)
    return out.getvalue()


def _write_arpa_to(model, out):
    with _BackgroundWriter(out) as write:
        _write_sections(model, write)


def _write_sections(model, write):
    rank = byte_ranks(model.vocab.words)
    words = WordSlots(model.vocab.words)
    write(b"\n\\data\\\n")
    for k, grams in enumerate(model.grams, 1):
        write(f"ngram {k}={len(grams)}\n".encode())
    orders = computed_ahead(_srilm_orders(model, rank))  # sorting the next section while this one is formatted
    for k, (grams, logp, bow, has_bow, order) in enumerate(zip(model.grams, model.logp, model.bow, model.has_bow,
                                                              orders), 1):
        write(f"\n\\{k}-grams:\n".encode())
        for piece in format_section(np.ascontiguousarray(grams, dtype=np.int32),
                                    np.ascontiguousarray(logp, dtype=np.float32),
                                    np.ascontiguousarray(bow, dtype=np.float32),
                                    np.ascontiguousarray(has_bow, dtype=bool).view(np.uint8), order, words):
            write(piece)
    write(b"\n\\end\\\n")


def _srilm_orders(model, rank):
    """The order SRILM writes each section in: by the context read backwards (its trie
    stores contexts so), then the word."""
    reversed_places = None
    for k, keys in enumerate(model.index.keys, 1):
        order, reversed_places = srilm_order(keys, len(rank), rank, reversed_places, k < model.order)
        yield order


class _BackgroundWriter:
    """Writes pieces to `out` in a thread of its own, in the order given, so that the
    write calls (copying into the page cache) overlap sorting and formatting the next
    section; at most MAX_PENDING pieces wait (their memory). The first error of a write is
    raised when the block ends. When the block fails, what waits is given up."""

    MAX_PENDING = 3
    POLL_SECONDS = 0.05  # how soon the thread sees that the block failed
    GIVE_UP_SECONDS = 1.0  # the longest a failed block waits for the piece being written

    def __init__(self, out):
        self.out, self.failure, self.given_up = out, None, False
        self.pending = queue.Queue(maxsize=self.MAX_PENDING)
        self.thread = threading.Thread(target=self._drain, daemon=True)

    def _drain(self):
        while not self.given_up:
            try:
                piece = self.pending.get(timeout=self.POLL_SECONDS)
            except queue.Empty:
                continue
            if piece is None:
                return
            if self.failure is None and not self.given_up:
                try:
                    self.out.write(piece)
                except BaseException as err:  # raised in the caller's thread at the end
                    self.failure = err

    def __enter__(self):
        self.thread.start()
        return self.pending.put

    def __exit__(self, *exc):
        if exc[0] is not None:
            # A signal's exception may have struck inside the queue's own locks, so the
            # queue is not used again (waiting on it once hung the process for good): the
            # thread stops by itself after the piece it is writing.
            self.given_up = True
            self.thread.join(self.GIVE_UP_SECONDS)
            return
        self.pending.put(None)
        self.thread.join()
        if self.failure is not None:
            raise self.failure


def _check_log10s(data, k, logp, bow, line_start, path, line_of):
    """Refuse the first line of a k-gram section whose probability or back-off weight no
    estimator writes (the parser has refused what is not a number); `line_start(row)`:
    the offset of a row's line."""
    for values, weight in ((logp, False), (bow, True)):
        outside = np.flatnonzero(outside_log10_domain(values, weight))
        if len(outside):
            row = outside[0]
            start = line_start(row)
            end = data.find(b"\n", start)
            words = " ".join(split_words(data[start:len(data) if end < 0 else end].decode("utf-8"))[1:k + 1])
            what = "back-off weight" if weight else "probability"
            raise InputError(f"the {k}-gram '{words}' has the log10 {what} {values[row]:g}: "
                             f"{log10_fault(values[row], weight)}", path=path, line=line_of(start))


BLANK_LINES = 100  # blank or comment lines an ARPA model may have around each section, read from a stream


def _lines_promised(start, at):
    """(the most lines an ARPA model whose \\data\\ line is at offset `at` of its first bytes
    `start` may have, the n-grams its header declares), or (None, 0) when its header does
    not end within `start`: the lines up to the header's end, one a declared n-gram and a
    section's title, and BLANK_LINES around each section."""
    lines = start[at:].split(b"\n", MAX_ORDER + BLANK_LINES)[1:-1]  # after \data\; the last may be cut
    grams = orders = 0
    for seen, line in enumerate(lines, 1):
        text = line.decode("utf-8", "replace").strip()
        match = _COUNT_LINE.match(text)
        if match:
            grams, orders = grams + int(match.group(2)), orders + 1
        elif text:  # the first section's title (or a line the parser will refuse): the header ends
            return start.count(b"\n", 0, at) + seen + grams + orders + BLANK_LINES * (orders + 2), grams
    return None, 0


def _section_end(data, buffer, start):
    """The end of the section whose lines start at `start`: after the last newline before
    a line that starts with a backslash (or the end of `data`; `buffer` its bytes). Searched
    a piece at a time, each handed back once searched: a section of a large model is some
    100 MB."""
    for piece in range(start, len(data), _PIECE):
        found = next_header(buffer, piece, min(piece + _PIECE, len(data)))
        release_mapped(data, min(piece + _PIECE, len(data)))
        if found >= 0:
            return found
    return len(data)


def _second_line(buffer, start, end, k, room, words, keys, children, vocab, repeated_key):
    """The offset of the second line of the section buffer[start:end] whose n-gram has the
    key `repeated_key`: the section parsed again (its sorted keys kept no line numbers)."""
    key = parse_section(buffer, start, end, k, room, words, keys, children, len(vocab) if vocab else 0)[1]
    return row_offset(buffer, start, end, int(np.flatnonzero(key == repeated_key)[1]))


def read_arpa(path, unk=UNK, data=None):
    """A BackoffModel from an ARPA file (or its bytes `data`, `path` naming them); its
    vocabulary is the words of the 1-grams."""
    def refuse_binary(start):
        if start[:len(CONTAINER_MAGIC)] == CONTAINER_MAGIC:  # through a pipe: is_container opens no pipe
            raise InputError("an nplm model must be a regular file (it is memory-mapped), not a pipe or a device",
                             path=path)
        if start[:len(KENLM_BINARY_MAGIC)] == KENLM_BINARY_MAGIC:
            raise InputError("a KenLM binary model (written by KenLM's build_binary), not ARPA text: build_binary "
                             "has no inverse, so give the ARPA file it was built from", path=path)

    bound = []  # (the most lines the stream's header allows or None, its n-grams), once its first piece is seen

    def refuse_stream(piece, lines_before):
        """A model read from a stream, refused as it comes: by a binary magic or no \\data\\
        line in its first piece, then once it has more lines than its header promises (an
        endless text, `yes`, would otherwise be read until memory runs out)."""
        if bound:
            if bound[0] is not None and lines_before > bound[0]:
                raise InputError(f"more lines than the \\data\\ header's {bound[1]} n-grams and {bound[0] - bound[1]} "
                                 "other lines: not an ARPA model", path=path, line=bound[0] + 1)
            return
        refuse_binary(piece)
        at = piece.find(b"\\data\\")
        if at < 0 and len(piece) == READ_BYTES and piece[:2] != GZIP_MAGIC:
            raise InputError(f"not an ARPA model (no \\data\\ line in its first {READ_BYTES} bytes) nor an nplm model",
                             path=path)
        bound.extend(_lines_promised(piece, at) if at >= 0 else (None, 0))

    data = read_mapped(path, check_piece=refuse_stream) if data is None else bytes(data)
    refuse_binary(data[:len(KENLM_BINARY_MAGIC)])

    def line_of(offset):
        return data[:offset].count(b"\n") + 1

    buffer = np.frombuffer(data, dtype=np.uint8)
    checked = 0  # checked a piece at a time, each handed back once checked
    while checked < len(data):
        stop = min(checked + _PIECE, len(data))
        invalid, checked = checked_utf8(buffer, checked, stop, stop == len(data))
        if invalid >= 0:
            raise InputError("invalid UTF-8", path=path, line=line_of(invalid))
        release_mapped(data, checked)

    def next_line(offset):
        end = data.find(b"\n", offset)
        return len(data) if end < 0 else end + 1

    def line_text(offset):
        end = data.find(b"\n", offset)
        return data[offset:len(data) if end < 0 else end].decode("utf-8").strip()

    pos = 0
    while pos < len(data) and line_text(pos) != "\\data\\":
        pos = next_line(pos)
    if pos >= len(data):
        raise InputError("not an ARPA file (no \\data\\ line) nor an nplm model", path=path)
    declared = {}
    pos = next_line(pos)
    while pos < len(data) and not line_text(pos).startswith("\\"):
        line = line_text(pos)
        if line:
            match = _COUNT_LINE.match(line)
            if not match:
                raise InputError(f"expected 'ngram N=count', got '{line[:60]}'", path=path, line=line_of(pos))
            k, n = int(match.group(1)), int(match.group(2))
            if k != len(declared) + 1:
                raise InputError(f"expected the count of {len(declared) + 1}-grams", path=path, line=line_of(pos))
            if k > MAX_ORDER:
                raise InputError(f"order {k} is above the maximum {MAX_ORDER}", path=path, line=line_of(pos))
            declared[k] = n
        pos = next_line(pos)
    if not declared:
        raise InputError("the \\data\\ header declares no n-grams", path=path)

    vocab, words, one_grams = None, None, None
    keys, logps, bows, has_bows, children = [], [], [], [], []
    for k in range(1, len(declared) + 1):
        while pos < len(data) and not line_text(pos):
            pos = next_line(pos)
        header = line_text(pos) if pos < len(data) else "end of file"
        match = _SECTION.match(header)
        if not match or int(match.group(1)) != k:
            raise InputError(f"expected the \\{k}-grams: section, got '{header[:60]}'", path=path,
                             line=line_of(min(pos, len(data))))
        start = next_line(pos)
        end = _section_end(data, buffer, start)
        try:
            # a k-gram line takes at least 2k + 1 bytes: no more room than that for a header's count
            room = min(declared[k], (end - start) // (2 * k + 1) + 1)
            count, key, logp, bow, has_bow, new_words = parse_section(
                buffer, start, end, k, room, words, keys, children, len(vocab) if vocab else 0,
                lambda offset: release_mapped(data, offset))
        except SectionError as err:
            raise InputError(err.args[1], path=path, line=line_of(err.args[0])) from None
        if count != declared[k]:
            raise InputError(f"\\{k}-grams: section has {count} entries, the header says {declared[k]}",
                             path=path, line=line_of(pos))

        def line_start(row, start=start, end=end):  # kept by no array: found again for an error
            return row_offset(buffer, start, end, row)

        _check_log10s(data, k, logp, bow, line_start, path, line_of)
        if k == 1:
            one_grams = new_words  # the table below points into these bytes
            check_tokens(one_grams, path, data)
            names = [w.decode("utf-8") for w in one_grams]
            vocab = Vocabulary(names, unk=unk)
            if len(vocab) != len(names) + sum(s not in names for s in vocab.words[:3]):
                raise InputError("a 1-gram appears twice", path=path, line=line_of(pos))
            key = np.array([vocab.index[name] for name in names], dtype=np.int64)
            words = word_table(one_grams, key.tolist())  # the higher orders' words are 1-grams
        # sorted in place, the values carried along (no permutation, no gathered copies);
        # a section without back-off weights (the highest) keeps its zeros untouched: no memory
        weighted = has_bow.any()
        sort_keys_carrying(key, logp, bow if weighted else None, has_bow.view(np.uint8) if weighted else None,
                           threads=usable_cores(2))
        repeated = np.flatnonzero(key[1:] == key[:-1])
        if len(repeated):
            raise InputError(f"this {k}-gram appears twice", path=path,
                             line=line_of(_second_line(buffer, start, end, k, room, words, keys, children, vocab,
                                                       key[repeated[0]])))
        if k > 1:
            children.append(children_runs(len(keys[-1]), key, len(vocab)))
        keys.append(key)
        logps.append(logp)
        bows.append(bow)
        has_bows.append(has_bow)
        del key, logp, bow, has_bow  # before the next section is parsed
        release_mapped(data, end)
        pos = end
    while pos < len(data) and not line_text(pos):
        pos = next_line(pos)
    if pos >= len(data) or line_text(pos) != "\\end\\":
        found = line_text(pos)[:60] if pos < len(data) else "end of file"
        raise InputError(f"expected \\end\\, got '{found}'", path=path, line=line_of(min(pos, len(data))))
    return BackoffModel(vocab, None, logps, bows, has_bows, NgramIndex(len(vocab), [], keys), children=children,
                        as_read=True)
