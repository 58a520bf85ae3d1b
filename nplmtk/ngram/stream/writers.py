"""The out-of-core estimate's model (a DiskModel, model.py) written as an ARPA file,
in SRILM's order, and as a binary model, reading its files a piece at a time."""
import contextlib

import numpy as np

from ... import container
from ...io import open_output
from ..._ext.arpa_format import NO_WEIGHT as NO_WEIGHT_BITS
from ...threads import computed_ahead
from ..arpa import _BackgroundWriter, format_section
from ..binary import BINARY_KIND, TABLES, check_binary_name, stored_log10s
from ..counts import byte_ranks
from ..word_slots import WordSlots
from ..sorted_runs import BucketedRuns, SortedRuns
from .files import BACKWARD, MODEL_KEYS

# the sample of an order's keys that bounds its sort's buckets: blocks of rows spread evenly
SAMPLE_BLOCKS, SAMPLE_BLOCK_ROWS = 4096, 8
BUCKET_FILL = 0.8  # a bucket's expected records, a share of the records a sort holds
TAKEN_FAST_BYTES = 32  # the largest record numpy's take copies without a memmove each
# a sort record's back-off weight (float32 bits) where its row is no context, as
# format_section reads it: no flag byte (order 4's records 32 bytes, not 33)
NO_WEIGHT = np.uint32(NO_WEIGHT_BITS)


def write_arpa_streamed(model, path, memory, folder, consume=False):
    """A DiskModel as write_arpa writes the same model, each order sorted into SRILM's
    order (the context read backwards, then the word, words in byte order) by sorted
    runs on disk merged, within about `memory` bytes; the next order's runs are sorted in
    a thread while this order's are merged and written. With `consume`, each order's files
    are removed once sorted (the model is written nowhere else)."""
    vocab = model.vocab
    rank = byte_ranks(vocab.words)
    words = WordSlots(vocab.words)

    files, vocab_size = model.files, len(vocab)

    def rows_for(record):
        # three sorts at once (see below); a row's key in each: a copy, packed, and the radix sort's scratch
        return max(1, memory // 12 // (3 * record.itemsize + 24))

    def sampled_keys(k, key):
        """`key(words, context places)` of a sample of order k's rows, sorted."""
        size = model.sizes[k - 1]
        starts = np.linspace(0, max(0, size - SAMPLE_BLOCK_ROWS), SAMPLE_BLOCKS).astype(np.int64)
        rows = np.unique(starts[:, None] + np.arange(SAMPLE_BLOCK_ROWS))
        keys = files.read_at("fkeys", k, rows[rows < size])
        places = (np.zeros(len(keys), dtype=np.int64) if k == 1
                  else files.read_at("backward", k - 1, keys // vocab_size))
        return np.sort(key(keys % vocab_size, places))

    def sorted_by_key(records, size, rows, name, sample):
        """The records (`size` of them) sorted by key, `rows` in memory at a time: in one
        batch, or by buckets whose bounds `sample()` (sorted keys) gives."""
        if size <= rows:
            return SortedRuns(records, rows, folder, name)
        buckets = -(-size // max(1, int(rows * BUCKET_FILL)))
        keys = sample()
        bounds = np.unique(keys[np.arange(1, buckets) * len(keys) // buckets])
        return BucketedRuns(records, bounds, rows, folder, name)

    def context_places(k, keys):
        """The places of the contexts of order k's rows whose keys (`fkeys`, in row order)
        are `keys` among the order below read backwards (srilm_order's `lower_reversed`),
        from `backward{k-1}`."""
        prefix = keys // vocab_size
        places = files.read("backward", k - 1, int(prefix[0]), int(prefix[-1]) + 1)
        return places[prefix - prefix[0]]

    def backward_places(k):
        """`backward{k}`: each row's place among the order's rows read backwards (its last
        word, then its prefix read backwards); for 1-grams the word's byte rank."""
        size = model.sizes[k - 1]
        if k == 1:
            files.write("backward", 1, rank[model.read(1, 0, size)[0][:, 0]].astype(np.int64))
            return
        record = np.dtype([("key", "<i8"), ("row", "<i8")])
        rows = rows_for(record)
        below = len(vocab) if k == 2 else model.sizes[k - 2]

        def records():
            for start in range(0, size, rows):
                keys = model.keys(k, start, start + rows)  # a row's last word and its prefix's row: nothing else read
                out = np.empty(len(keys), dtype=record)
                out["key"] = rank[keys % vocab_size].astype(np.int64) * below + context_places(k, keys)
                out["row"] = np.arange(start, start + len(keys))
                yield out

        def sample():
            return sampled_keys(k, lambda words, places: rank[words].astype(np.int64) * below + places)

        backward_sorted = sorted_by_key(records(), size, rows, f"backward{k}", sample)
        # the places fit in memory (4 bytes each below 2^31 rows): the permutation inverted in place
        held = np.dtype(np.int32) if size < 2**31 else BACKWARD.dtype
        if size * held.itemsize <= memory // 4:
            place, at = np.empty(size, dtype=held), 0
            for piece in backward_sorted.pieces():
                place[piece["row"]] = np.arange(at, at + len(piece))
                at += len(piece)
            with files.writer("backward", k) as out:
                for start in range(0, size, rows):
                    out.append(place[start:start + rows].astype(BACKWARD.dtype))
            return

        def places():
            """(row, its place) in the order of places: distributed by row below into
            buckets of equal ranges of rows, each bucket then a scatter (a window at a
            time took n^2 / memory; sorting each bucket, n log n)."""
            place = 0
            for piece in backward_sorted.pieces():
                out = np.empty(len(piece), dtype=record)
                out["key"], out["row"] = piece["row"], np.arange(place, place + len(piece))
                place += len(piece)
                yield out

        out = files.writer("backward", k)
        chunk = max(1, int(rows * BUCKET_FILL))  # the rows are 0..size-1: buckets of equal ranges
        done = 0  # each bucket holds every row of its range, once: rows done..done+len-1
        for bucket in BucketedRuns(places(), np.arange(chunk, size, chunk), rows, folder,
                                   f"backward-places{k}").buckets():
            place = np.empty(len(bucket), dtype=np.int64)
            place[bucket["key"] - done] = bucket["row"]
            out.append(place)
            done += len(bucket)
        out.close()

    def sorted_order(k):
        """Order k's rows in SRILM's order: the context's place read backwards, then the
        word's byte rank (srilm_order's keys), by sorted runs, once the places of order
        k-1 read backwards (which these keys need) are known. The highest order's records
        carry no back-off weights (it has none)."""
        if k > 1:
            next(backward)  # order k-1's places, computed beside order k-1's sort; order k's begun
            if consume:
                model.remove(k - 1)  # order k-1 sorted, its places known: its records are in its runs
        weights = [("bow", "<u4")] if k < model.order else []  # NO_WEIGHT where the row is no context
        record = padded_record(np.dtype([("key", "<i8"), ("logp", "<f4")] + weights + [("grams", "<i4", (k,))]))
        rows = rows_for(record)

        def records():
            for start in range(0, model.sizes[k - 1], rows):
                grams, logp, bow, node = model.read(k, start, start + rows)
                out = np.empty(len(grams), dtype=record)
                out["key"] = rank[grams[:, -1]].astype(np.int64)
                if k > 1:
                    out["key"] += context_places(k, model.keys(k, start, start + rows)) * len(vocab)
                out["logp"], out["grams"] = logp, grams
                if weights:
                    out["bow"] = np.where(node, bow.view(np.uint32), NO_WEIGHT)
                yield out

        def sample():
            return sampled_keys(k, lambda words, places: places * len(vocab) + rank[words])

        runs = sorted_by_key(records(), model.sizes[k - 1], rows, f"arpa{k}", sample)
        if consume and k == model.order:
            model.remove(k)
        return runs

    with open_output(path, binary=True) as stream, _BackgroundWriter(stream) as write:
        write(b"\n\\data\\\n")
        for k, size in enumerate(model.sizes, 1):
            write(f"ngram {k}={size}\n".encode())
        # three threads: order k merged and written, order k+1 sorted, order k+1's places found
        with contextlib.closing(computed_ahead(backward_places(k) for k in range(1, model.order))) as backward, \
                contextlib.closing(computed_ahead(sorted_order(k) for k in range(1, model.order + 1))) as orders:
            for k, runs in enumerate(orders, 1):
                write(f"\n\\{k}-grams:\n".encode())
                # the next piece read and sorted in a thread while this one is formatted
                with contextlib.closing(computed_ahead(runs.pieces())) as pieces:
                    for piece in pieces:
                        for text in formatted_records(piece, k, words):
                            write(text)
        write(b"\n\\end\\\n")


def padded_record(record):
    """`record` padded to TAKEN_FAST_BYTES when shorter: numpy's take (the sorts' copies)
    copies records of that size by assignment, others by a memmove each (2x slower at
    20 to 28 bytes: orders 1 to 3 of the ARPA writer)."""
    if record.itemsize >= TAKEN_FAST_BYTES:
        return record
    fields = [record.fields[name] for name in record.names]
    return np.dtype({"names": list(record.names), "formats": [dtype for dtype, _ in fields],
                     "offsets": [offset for _, offset in fields], "itemsize": TAKEN_FAST_BYTES})


def formatted_records(piece, k, words):
    """ARPA lines of sorted records of order k (format_section's pieces), read from the
    records' fields where they are (no copies)."""
    bow = piece["bow"].view(np.float32) if "bow" in piece.dtype.names else None
    return format_section(piece["grams"].reshape(-1, k), piece["logp"], bow, None, None, words)


def write_binary_streamed(model, path, memory):
    """A DiskModel as write_binary writes the same model, its arrays read in pieces."""
    rows = max(1, memory // 4 // (MODEL_KEYS.row_bytes(1) + 8))  # the keys and a copy made of them
    arrays = {}
    for k, size in enumerate(model.sizes, 1):
        def pieces(k=k, size=size, part=None):
            for start in range(0, size, rows):
                if part == "keys":
                    yield model.keys(k, start, start + rows)
                    continue
                if part == "node":
                    yield model.contexts(k, start, start + rows)
                    continue
                grams, logp, bow, node = model.read(k, start, start + rows)
                if part in ("logp", "bow"):
                    yield from stored_log10s(logp if part == "logp" else bow, printed=True)
                else:
                    yield node  # has_bow

        for name, dtype in TABLES.items():
            arrays[f"{name}.{k}"] = container.PiecedArray(dtype, (size,),
                                                          lambda pieces=pieces, name=name: pieces(part=name))
    check_binary_name(path)
    container.save(path, BINARY_KIND, arrays, meta={"order": model.order}, vocab=model.vocab)
