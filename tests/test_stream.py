"""The out-of-core estimate (nplmtk/ngram/stream.py): the same ARPA and binary files, byte
for byte, as the in-memory estimate, whatever the memory (small memories cut every pass
into many windows, context runs and sorted runs)."""
import collections
import os
import subprocess
import weakref

import numpy as np
import pytest

from nplmtk._ext.ngram_sorting import bucket_order, key_order, merge_records, search_sorted_forward, sort_keys_carrying
from nplmtk.corpus import Corpus
from nplmtk.errors import NplmError
from nplmtk.ngram.arpa import arpa_bytes
from nplmtk.ngram.binary import write_binary
from nplmtk.ngram.count_runs import CountAccumulator
from nplmtk.ngram.counts import NgramCounts
from nplmtk.ngram.sorted_counts import ROW_BYTES, write_counts_streamed
from nplmtk.ngram.estimate import estimate, prune
from nplmtk.ngram.store import CountStore
from nplmtk.ngram.sorted_runs import BucketedRuns, sorted_records
from nplmtk.ngram.stream import StreamEstimate
from nplmtk.ngram.stream import writers
from nplmtk.ngram.stream.writers import write_arpa_streamed, write_binary_streamed
from nplmtk.vocab import Vocabulary

from conftest import NPLM

WORDS = [f"w{i}" for i in range(40)] + ["Ä", "b", "B", "a"]  # byte order differs from id order


def zipf_lines(seed, sentences, words=WORDS):
    rng = np.random.default_rng(seed)
    p = 1 / np.arange(1, len(words) + 1) ** 1.1
    return [" ".join(rng.choice(words, size=n, p=p / p.sum())) for n in rng.integers(0, 15, sentences)]


def zipf_counts(seed, order, vocab_words=30):
    """Counts of Zipf-like text over WORDS, the words past `vocab_words` read as <unk>."""
    vocab = Vocabulary(WORDS[:vocab_words] + WORDS[-4:])
    return NgramCounts.from_corpus(Corpus.from_lines(zipf_lines(seed, 300), vocab), order)


@pytest.mark.parametrize("order, memory, unk_is_word, options", [
    (1, 2000, True, {}), (2, 20000, False, {}), (3, 30000, True, {}), (3, 10 ** 8, False, {}),
    (4, 40000, False, {}), (5, 60000, True, {}),
    # cutoffs: suffixes of kept n-grams cut (the back-off walk), contexts fixed up, nodes closed under suffixes
    (2, 20000, True, {"min_counts": [1, 2]}), (3, 10 ** 8, False, {"min_counts": [1, 2, 2]}),
    (4, 40000, False, {"min_counts": [1, 2, 2, 2]}), (5, 60000, True, {"min_counts": [2, 1, 3, 2, 2]}),
    (5, 50000, False, {"min_counts": [1, 3, 1, 2, 1]}),
    # the other discountings, back-off and interpolated
    (5, 60000, False, {"interpolate": False, "min_counts": [1, 1, 2, 2, 2]}),
    (3, 30000, True, {"method": "ukn", "interpolate": False, "words": 300}),
    (4, 40000, False, {"method": "ukn", "min_counts": [1, 2, 2, 1], "words": 300}),
    (3, 30000, True, {"method": "wb", "interpolate": False}), (4, 40000, False, {"method": "wb"}),
    (4, 40000, False, {"method": "gt", "interpolate": False}),
    (4, 40000, True, {"method": "gt", "interpolate": False, "max_counts": [1, 3, 5, 2], "min_counts": [1, 1, 2, 2]}),
    (4, 40000, True, {"method": "cd", "constant": 0.7}),
    (3, 30000, False, {"method": "add", "constant": 0.1, "interpolate": False}),
    # entropy pruning (estimate.prune) of the model, with and without fixed-up contexts
    (3, 30000, True, {"prune": (1e-4, 2)}), (4, 40000, False, {"prune": (1e-4, 3)}),
    (5, 60000, True, {"min_counts": [1, 2, 2, 2, 2], "prune": (1e-4, 2)}),
    (5, 50000, False, {"min_counts": [1, 3, 1, 2, 1], "prune": (2e-4, 2)}),
    (4, 40000, True, {"method": "wb", "interpolate": False, "prune": (1e-3, 2)}),
    # lmplz's weights (-always-interpolate)
    (5, 60000, True, {"always_interpolate": True}), (4, 40000, False, {"always_interpolate": True}),
    (4, 40000, True, {"always_interpolate": True, "min_counts": [1, 2, 2, 2], "prune": (1e-4, 2)})])
@pytest.mark.filterwarnings("ignore::nplmtk.errors.NplmWarning")
def test_streamed_estimate_writes_the_in_memory_estimates_files(tmp_path, order, memory, unk_is_word, options):
    options = dict(options)
    words = options.pop("words", None)  # original Kneser-Ney needs words seen once and twice after others
    counts = zipf_counts(order, order) if words is None else NgramCounts.from_corpus(Corpus.from_lines(
        zipf_lines(order, 300, [f"w{i}" for i in range(words)]), Vocabulary([f"w{i}" for i in range(words)])), order)
    pruning = options.pop("prune", None)
    model = estimate(counts, unk_is_word=unk_is_word, **options)
    if pruning:
        model = prune(model, *pruning)
        options["prune"] = pruning
    folder = tmp_path / "work"
    folder.mkdir()
    streamed = StreamEstimate(CountStore.save(counts, str(folder)), str(folder), memory, unk_is_word,
                              **options).run()
    write_arpa_streamed(streamed, str(tmp_path / "got.arpa"), memory, str(folder))
    assert (tmp_path / "got.arpa").read_bytes() == arpa_bytes(model)
    write_binary(model, str(tmp_path / "expected.nplm"))
    write_binary_streamed(streamed, str(tmp_path / "got.nplm"), memory)
    assert (tmp_path / "got.nplm").read_bytes() == (tmp_path / "expected.nplm").read_bytes()
    assert not [name for name in os.listdir(folder) if ".run" in name]  # the sorted runs are gone
    # consumed: the same file, each order's files removed once sorted
    write_arpa_streamed(streamed, str(tmp_path / "consumed.arpa"), memory, str(folder), consume=True)
    assert (tmp_path / "consumed.arpa").read_bytes() == arpa_bytes(model)
    assert not [name for name in os.listdir(folder) if name.startswith(("fgrams", "fkeys", "flogp", "fbow", "fnode"))]


@pytest.mark.filterwarnings("ignore::nplmtk.errors.NplmWarning")
def test_a_windows_arrays_are_let_go_before_the_next_window_is_loaded(tmp_path, monkeypatch):
    """Two windows' arrays (at 200M words, -memory 2G: 700 MB of keys) are never held at once:
    each window's fill is gone when the next window is loaded."""
    counts = zipf_counts(5, 5)
    folder = tmp_path / "work"
    folder.mkdir()
    windowed, held = StreamEstimate.filled_by_windows, []

    def watched(self, name, k, unset, window_rows, chunk_rows, window, finished=None):
        fills = []

        def watched_window(low, high, last):
            held.append((name, k, sum(fill() is not None for fill in fills), len(fills)))
            fill = window(low, high, last)
            fills.append(weakref.ref(fill))
            return fill
        windowed(self, name, k, unset, window_rows, chunk_rows, watched_window, finished)

    monkeypatch.setattr(StreamEstimate, "filled_by_windows", watched)
    streamed = StreamEstimate(CountStore.save(counts, str(folder)), str(folder), 20_000, True).run()
    write_arpa_streamed(streamed, str(tmp_path / "got.arpa"), 20_000, str(folder))
    assert (tmp_path / "got.arpa").read_bytes() == arpa_bytes(estimate(counts, unk_is_word=True))
    assert {name for name, k, alive, before in held if before} >= {"suffix", "lower"}  # several windows
    assert [(name, k) for name, k, alive, before in held if alive] == []


def test_later_windows_fill_the_file_in_place(tmp_path, monkeypatch):
    """Each window's pass after the first writes its values over the file the first one
    wrote (the same file, no new version of it: a new file's pages cost their first
    touch), and the model is the in-memory estimate's."""
    counts = zipf_counts(5, 5)
    folder = tmp_path / "work"
    folder.mkdir()
    windowed, seen = StreamEstimate.filled_by_windows, []

    def watched(self, name, k, unset, window_rows, chunk_rows, window, finished=None):
        def watched_window(low, high, last):
            path = self.files.path(name, k)
            inode = os.stat(path).st_ino if os.path.exists(path) else None
            seen.append((name, k, inode, sorted(os.listdir(folder))))
            return window(low, high, last)
        windowed(self, name, k, unset, window_rows, chunk_rows, watched_window, finished)
        seen.append((name, k, os.stat(self.files.path(name, k)).st_ino, sorted(os.listdir(folder))))

    monkeypatch.setattr(StreamEstimate, "filled_by_windows", watched)
    streamed = StreamEstimate(CountStore.save(counts, str(folder)), str(folder), 20_000, True).run()
    write_arpa_streamed(streamed, str(tmp_path / "got.arpa"), 20_000, str(folder))
    assert (tmp_path / "got.arpa").read_bytes() == arpa_bytes(estimate(counts, unk_is_word=True))
    passes = collections.defaultdict(list)
    for name, k, inode, listing in seen:
        passes[(name, k)].append((inode, listing))
    several = {key: got for key, got in passes.items() if len(got) > 2}
    assert {name for name, k in several} >= {"suffix", "lower"}
    for (name, k), got in several.items():
        inodes = {inode for inode, _ in got[1:]}  # from the second window on, and at the end
        assert len(inodes) == 1 and None not in inodes, (name, k, got)
        assert all(listing == got[1][1] for _, listing in got[1:]), (name, k)  # no file made beside it


@pytest.mark.parametrize("memory", [16_000, 40_000])
def test_places_read_backwards_in_memory_or_by_buckets_give_the_same_file(tmp_path, monkeypatch, memory):
    """The writer inverts the places' permutation in memory where they fit in its share (4
    bytes a row) and by buckets of rows where not: the same ARPA bytes either way."""
    counts = zipf_counts(4, 4)
    folder = tmp_path / "work"
    folder.mkdir()
    streamed = StreamEstimate(CountStore.save(counts, str(folder)), str(folder), 40_000, False).run()
    names, bucketed = [], writers.BucketedRuns
    monkeypatch.setattr(writers, "BucketedRuns", lambda *args: names.append(args[-1]) or bucketed(*args))
    write_arpa_streamed(streamed, str(tmp_path / "got.arpa"), memory, str(folder))
    assert (tmp_path / "got.arpa").read_bytes() == arpa_bytes(estimate(counts, unk_is_word=False))
    by_buckets = sorted(name for name in names if name.startswith("backward-places"))
    assert by_buckets == (["backward-places3"] if memory == 16_000 else []), names


def test_sorted_records_merge_runs_of_any_size(tmp_path):
    rng = np.random.default_rng(0)
    record = np.dtype([("key", "<i8"), ("value", "<i4"), ("flag", "u1")])  # 13 bytes: unaligned keys
    keys = rng.permutation(5000)
    pieces = []
    for part in np.array_split(keys, 37):
        piece = np.empty(len(part), dtype=record)
        piece["key"] = part
        piece["value"] = part
        pieces.append(piece)
    out = list(sorted_records(iter(pieces), 300, str(tmp_path), "test"))
    assert len(out) > 1
    assert np.concatenate(out)["value"].tolist() == list(range(5000))
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("bounds", [[], [1000, 2500, 2600, 4000], [-5, 10 ** 6], list(range(0, 5000, 7))])
def test_bucketed_runs_sort_whatever_the_bounds(tmp_path, bounds):
    """Buckets of any fill: empty ones, ones past OVERFULL rows (sorted by SortedRuns)."""
    rng = np.random.default_rng(1)
    record = np.dtype([("key", "<i8"), ("value", "<i4"), ("flag", "u1")])
    keys = rng.permutation(5000)
    pieces = []
    for part in np.array_split(keys, 37):
        piece = np.empty(len(part), dtype=record)
        piece["key"], piece["value"] = part, part
        pieces.append(piece)
    out = list(BucketedRuns(iter(pieces), bounds, 300, str(tmp_path), "test").pieces())
    assert np.concatenate(out)["value"].tolist() == list(range(5000))
    assert os.listdir(tmp_path) == []
    # buckets(): each bucket's records as they lie, bucket after bucket (an overfull one in pieces)
    buckets = list(BucketedRuns(iter(pieces), bounds, 300, str(tmp_path), "test").buckets())
    numbers = [np.unique(np.searchsorted(bounds, bucket["key"], side="right")).tolist() for bucket in buckets]
    assert all(len(number) == 1 for number in numbers) and numbers == sorted(numbers)
    assert sorted(np.concatenate(buckets)["key"].tolist()) == list(range(5000))
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("radix", [None, True, False])
@pytest.mark.parametrize("size, spread", [(0, 5), (1, 5), (2, 1), (1000, 3), (1000, 1 << 40), (5000, 1 << 62)])
def test_key_order_is_a_stable_argsort(size, spread, radix):
    """Packed keys (spread and places within 63 bits), by numpy's sort or the radix sort,
    and argsort's fallback (wider) alike; equal keys keep their places' order, negative
    keys sort below the rest."""
    keys = np.random.default_rng(size).integers(-spread, spread, size)
    assert key_order(keys, radix).tolist() == np.argsort(keys, kind="stable").tolist()


def _digit_cases():
    rng = np.random.default_rng(7)
    high, low = rng.integers(0, 1 << 10, 3000), rng.integers(0, 1 << 10, 3000)
    return {"one key": np.full(1000, 7), "three values": rng.integers(0, 3, 100_000),
            "low digits shared": rng.integers(0, 1 << 20, 3000) << 20,  # passes that move nothing skipped
            "middle digits shared": (high << 30) | low,
            "63 bits: radix": rng.integers(0, 1 << 53, 1000) | (1 << 52),  # 10 place bits
            "64 bits: argsort": rng.integers(0, 1 << 54, 1000) | (1 << 53)}


@pytest.mark.parametrize("case", _digit_cases())
def test_key_order_radix_digits(case):
    """The radix sort's digits: some shared by every key, the widest keys it takes, equal keys
    by the thousand."""
    keys = _digit_cases()[case].astype(np.int64)
    assert key_order(keys, radix=True).tolist() == np.argsort(keys, kind="stable").tolist()


@pytest.mark.parametrize("bounds", [[], [0], [-50, 50], [1, 2, 3], [-3, 4, 4, 90], [-9, -3, 0, 2, 7, 8, 40],
                                    list(range(-100, 100, 7)), list(range(-119, 121, 3))])
def test_bucket_order_groups_keys_by_bucket_stably(bounds):
    keys = np.random.default_rng(len(bounds)).integers(-120, 120, 3000)
    bounds = np.array(bounds, dtype=np.int64)
    bucket = np.searchsorted(bounds, keys, side="right")
    counts = np.zeros(len(bounds) + 1, dtype=np.int64)
    assert bucket_order(keys, bounds, counts).tolist() == np.argsort(bucket, kind="stable").tolist()
    assert counts.tolist() == np.bincount(bucket, minlength=len(bounds) + 1).tolist()


def test_merge_records_keeps_equal_keys_in_the_order_of_their_pieces():
    record = np.dtype([("key", "<i8"), ("piece", "u1")])
    pieces = [np.array([(k, p) for k in keys], dtype=record)
              for p, keys in enumerate([[1, 5, 5, 9], [], [0, 5, 9, 12], [5]])]
    out = np.empty(sum(map(len, pieces)), dtype=record)
    merge_records([piece.view(np.uint8) for piece in pieces], out.view(np.uint8), record.itemsize)
    assert out.tolist() == [(0, 2), (1, 0), (5, 0), (5, 0), (5, 2), (5, 3), (9, 0), (9, 2), (12, 2)]


@pytest.mark.parametrize("keys, queries", [(0, 5), (5, 0), (1, 3), (1000, 10), (10, 1000), (3000, 100_000)])
def test_search_sorted_forward_is_numpys_searchsorted(keys, queries):
    rng = np.random.default_rng(keys + queries)
    table = np.sort(rng.integers(0, 5000, keys))
    for wanted in (np.sort(rng.integers(-10, 5100, queries)), rng.integers(-10, 5100, queries)):  # sorted or not
        out = np.empty(queries, dtype=np.int64)
        search_sorted_forward(table, wanted, out)
        np.testing.assert_array_equal(out, np.searchsorted(table, wanted))


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("make_keys", [
    lambda rng, n: rng.permutation(n) * 7 + 3,  # distinct, shuffled
    lambda rng, n: rng.integers(0, 40, n),      # many equal keys
    lambda rng, n: np.arange(n),                # sorted already
    lambda rng, n: np.arange(n)[::-1],          # reversed
    lambda rng, n: np.zeros(n),                 # all equal
])
@pytest.mark.parametrize("size", [0, 1, 2, 3, 23, 24, 25, 1000, 200_000])
def test_sort_keys_carrying_moves_the_values_with_their_keys(threads, make_keys, size):
    rng = np.random.default_rng(size)
    keys = np.ascontiguousarray(make_keys(rng, size), dtype=np.int64)
    # each value names its key's original row: any permutation of equal keys is right
    first = np.arange(size, dtype=np.float32)
    second, flags = -first, (np.arange(size) % 3 == 0).astype(np.uint8)
    sorted_keys, moved, moved_second, moved_flags = keys.copy(), first.copy(), second.copy(), flags.copy()
    sort_keys_carrying(sorted_keys, moved, moved_second, moved_flags, threads=threads)
    np.testing.assert_array_equal(sorted_keys, np.sort(keys))
    rows = moved.astype(np.int64)
    np.testing.assert_array_equal(np.sort(rows), np.arange(size))  # a permutation
    np.testing.assert_array_equal(keys[rows], sorted_keys)
    np.testing.assert_array_equal(moved_second, -moved)
    np.testing.assert_array_equal(moved_flags, flags[rows])
    alone_keys, alone = keys.copy(), first.copy()  # the first values only
    sort_keys_carrying(alone_keys, alone, threads=threads)
    np.testing.assert_array_equal(alone_keys, sorted_keys)
    np.testing.assert_array_equal(keys[alone.astype(np.int64)], alone_keys)


def test_a_full_disk_is_one_error_naming_the_folder(tmp_path):
    counts = zipf_counts(0, 3)
    folder = tmp_path / "work"
    folder.mkdir()
    store = CountStore.save(counts, str(folder))
    os.symlink("/dev/full", folder / "suffix3")  # writes there fail with ENOSPC
    with pytest.raises(NplmError, match=r"cannot keep temporary files \(No space left on device\): set TMPDIR or "
                                        r"-temp"):
        StreamEstimate(store, str(folder), 10 ** 6).run()


@pytest.mark.parametrize("options", [[], ["-unk"], ["-gt2min", "2", "-gt3min", "3", "-gt4min", "2"], ["-wbdiscount"],
                                     ["-kndiscount", "-gt3min", "2"], ["-gtdiscount", "-gt4max", "3"],
                                     ["-prune", "1e-5", "-gt3min", "2"], ["-prune", "1e-4", "-minprune", "3"],
                                     ["-always-interpolate"], ["-classes", "{classes}", "-wbdiscount"]])
def test_ngram_count_estimates_out_of_core_what_outgrows_memory(tmp_path, options):
    (tmp_path / "t.txt").write_text("\n".join(zipf_lines(7, 4000, [f"w{i}" for i in range(300)])) + "\n")
    (tmp_path / "v.txt").write_text("\n".join(f"w{i}" for i in range(250)) + "\n")
    (tmp_path / "c.classes").write_text("".join(f"C{i % 60} w{i}\n" for i in range(0, 250, 2)))  # half the words
    options = [str(tmp_path / "c.classes") if option == "{classes}" else option for option in options]
    temp = tmp_path / "temp"
    temp.mkdir()
    outputs = {}
    for memory in ("1M", "2G"):
        # a class model's binary is the class n-gram and its classes in one file, -lm X.nplm
        for lm in ([[f"{memory}.arpa"], [f"{memory}.nplm"]] if "-classes" in options
                   else [[f"{memory}.arpa", "-write-bin-lm", tmp_path / f"{memory}.nplm"]]):
            proc = subprocess.run([NPLM, "ngram-count", "-text", tmp_path / "t.txt", "-order", "4", "-vocab",
                                   tmp_path / "v.txt", *options, "-memory", memory, "-temp", temp, "-debug", "2",
                                   "-lm", tmp_path / lm[0], *lm[1:]], capture_output=True, text=True)
            assert proc.returncode == 0, proc.stderr
            assert ("estimated out of core" in proc.stderr) == (memory == "1M"), proc.stderr
        outputs[memory] = [(tmp_path / f"{memory}.{kind}").read_bytes() for kind in ("arpa", "nplm")]
    assert outputs["1M"] == outputs["2G"]
    assert os.listdir(temp) == []


@pytest.mark.parametrize("order", [3, 5])
def test_counts_that_outgrow_memory_are_written_as_in_memory(tmp_path, order):
    """-write in SRILM's sorted order (each n-gram followed by its extensions, words as
    bytes: Ä after B) by sorted runs, line numbers and windows, with -lm beside it."""
    words = [f"w{i}" for i in range(300)] + ["Ä", "b", "B", "a"]
    (tmp_path / "t.txt").write_text("\n".join(zipf_lines(7, 4000, words)) + "\n")
    outputs = {}
    for memory in ("1M", "2G"):
        proc = subprocess.run([NPLM, "ngram-count", "-text", tmp_path / "t.txt", "-order", str(order), "-memory",
                               memory, "-temp", tmp_path, "-write", tmp_path / f"{memory}.counts", "-debug", "2",
                               "-lm", tmp_path / f"{memory}.arpa"], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        assert ("counts written out of core" in proc.stderr) == (memory == "1M"), proc.stderr
        outputs[memory] = [(tmp_path / f"{memory}.{kind}").read_bytes() for kind in ("counts", "arpa")]
    assert outputs["1M"] == outputs["2G"]
    assert sorted(os.listdir(tmp_path)) == ["1M.arpa", "1M.counts", "2G.arpa", "2G.counts", "t.txt"]


def test_streamed_counts_order_nests_extensions_after_each_ngram(tmp_path):
    """The streamed writer at a memory of a few rows: SortedRuns, the sparse reads of
    line numbers and many windows; -write's own reader reads the file back."""
    counts = zipf_counts(3, 4)
    folder = tmp_path / "store"
    folder.mkdir()
    accumulator = CountAccumulator(counts.vocab, 4, 2 ** 30, str(folder))
    accumulator.add_counts(counts)
    store = accumulator.store(str(folder / "counts"))
    counts.write(str(tmp_path / "memory.counts"))
    write_counts_streamed(store, str(tmp_path / "streamed.counts"), 4 * ROW_BYTES * 50, str(folder))
    assert (tmp_path / "streamed.counts").read_bytes() == (tmp_path / "memory.counts").read_bytes()
    assert os.listdir(folder) == ["counts"]


def test_one_distinct_word_a_line_at_a_tiny_memory_writes_the_in_memory_model(tmp_path):
    """A degenerate shape (issue 49): every line one word of its own, the n-grams of each
    order already in the order the ARPA file wants, at -memory 1M: dozens of sorted runs an
    order, merged two by two over several levels (a merge of them all at once read each run
    a few records at a time and grew quadratic)."""
    (tmp_path / "t.txt").write_text("".join(f"w{i}\n" for i in range(12000)))
    for memory in ("1M", "2G"):
        proc = subprocess.run([NPLM, "ngram-count", "-text", tmp_path / "t.txt", "-memory", memory, "-temp", tmp_path,
                               "-debug", "2", "-lm", tmp_path / f"{memory}.arpa"], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        assert ("estimated out of core" in proc.stderr) == (memory == "1M"), proc.stderr
    assert (tmp_path / "1M.arpa").read_bytes() == (tmp_path / "2G.arpa").read_bytes()
    assert sorted(os.listdir(tmp_path)) == ["1M.arpa", "2G.arpa", "t.txt"]


def test_rows_read_at_scattered_places_equal_the_whole_file_indexed(tmp_path):
    """RowFiles.read_at (the ARPA writer's key sample, the sorted counts' sparse rows):
    rows in any order, repeated, near and far apart (shared and separate reads)."""
    from nplmtk.ngram.row_files import RowFiles
    from nplmtk.ngram.stream.files import STREAM_FILES
    files = RowFiles(str(tmp_path), STREAM_FILES)
    values = np.random.default_rng(3).integers(-2**40, 2**40, 50_000)
    files.write("backward", 4, values)
    rows = np.random.default_rng(4).integers(0, len(values), 3_000)
    rows = np.concatenate([rows, rows[:50], np.arange(100, 140), [0, len(values) - 1]])
    for gap in (8, 512, 1 << 20):
        assert np.array_equal(files.read_at("backward", 4, rows, gap_bytes=gap), values[rows])
    assert files.read_at("backward", 4, np.zeros(0, dtype=np.int64)).shape == (0,)
    with pytest.raises(EOFError):
        files.read_at("backward", 4, [len(values)])
    with pytest.raises(ValueError):
        files.read_at("fgrams", 3, [0])


def test_a_working_file_takes_only_values_of_its_declared_kind(tmp_path):
    from nplmtk.ngram.row_files import RowFiles
    from nplmtk.ngram.stream.files import STREAM_FILES
    files = RowFiles(str(tmp_path), STREAM_FILES)
    with files.writer("continuation", 2) as out:
        out.append(np.array([1, 2], dtype=np.int32))
        with pytest.raises(TypeError, match="continuation2: int64 values for a file of int32"):
            out.append(np.array([3], dtype=np.int64))
    np.testing.assert_array_equal(files.read("continuation", 2, 0, 5), [1, 2])


@pytest.mark.parametrize("rows", [1, 5, 17, 1000])
def test_context_runs_end_at_the_first_context_end_past_their_rows(tmp_path, monkeypatch, rows):
    from types import SimpleNamespace
    from nplmtk.ngram.row_files import RowFiles
    from nplmtk.ngram.stream import pipeline
    from nplmtk.ngram.stream.files import STREAM_FILES
    monkeypatch.setattr(pipeline, "CONTEXT_LOOK_ROWS", 2)  # contexts longer than the look-ahead, doubled
    lengths = np.random.default_rng(5).choice([1, 2, 3, 40], 300)
    prefix = np.repeat(np.arange(len(lengths)), lengths).astype(np.int64)  # contexts of 1 to 40 rows
    files = RowFiles(str(tmp_path), STREAM_FILES)
    files.write("prefix", 3, prefix)
    estimate = SimpleNamespace(files=files, sizes=[0, 0, len(prefix)], pass_rows=lambda row_bytes: rows)
    runs = list(pipeline.StreamEstimate.context_runs(estimate, 3))
    assert runs[0][0] == 0 and runs[-1][1] == len(prefix) and all(a[1] == b[0] for a, b in zip(runs, runs[1:]))
    for start, stop in runs:
        assert stop == len(prefix) or prefix[stop] != prefix[stop - 1]  # whole contexts
        assert not any(prefix[r] != prefix[r - 1] for r in range(start + rows, stop))  # the first end past the rows
