"""Counting within -memory (count_runs.py): the hash counter measured a piece of text at a
time and spilled as sorted runs, the runs merged a block of rows at a time into a
CountStore; ngram-count's temporary files (-temp) gone after an error or SIGTERM."""
import os
import resource
import signal
import subprocess
import time

import numpy as np
import pytest

from nplmtk._ext.count_kernels import NgramHashCounter, tables_bytes
from nplmtk._ext.ngram_sorting import sort_counted
from nplmtk.corpus import Corpus
from nplmtk.errors import InputError
from nplmtk.ngram.count_runs import CountAccumulator, merge_stores
from nplmtk.ngram.counts import NgramCounts
from nplmtk.ngram.store import CountStore
from nplmtk.vocab import Vocabulary

from conftest import NPLM


def zipf_text(seed, sentences, words=400):
    rng = np.random.default_rng(seed)
    p = 1 / np.arange(1, words + 1) ** 1.1
    tokens = np.array([f"w{i}" for i in range(words)])[rng.choice(words, size=sentences * 20, p=p / p.sum())]
    ends = np.cumsum(rng.integers(1, 20, sentences))
    return "".join(" ".join(tokens[end - n:end]) + "\n" for n, end in zip(np.diff(ends, prepend=0), ends))


@pytest.fixture
def zipf(tmp_path):
    path = tmp_path / "z.txt"
    path.write_text(zipf_text(1, 3_000))
    return str(path), Vocabulary([f"w{i}" for i in range(400)])


def accumulated(path, vocab, order, memory, folder, block_bytes=1 << 20):
    accumulator = CountAccumulator(vocab, order, memory, str(folder))
    for chunk in Corpus.read_blocks(path, vocab, block_bytes=block_bytes):
        accumulator.add_text(chunk)
    return accumulator


def assert_same_counts(store, counts):
    assert store.order == counts.order
    for k in range(1, counts.order + 1):
        grams, values = store.read(k, 0, store.sizes[k - 1])
        np.testing.assert_array_equal(grams, counts.grams[k - 1])
        np.testing.assert_array_equal(values, counts.counts[k - 1])


@pytest.mark.parametrize("memory", [40_000, 1 << 30])
def test_the_store_of_runs_merged_is_the_counts_of_the_whole_text(zipf, tmp_path, memory):
    path, vocab = zipf
    work = tmp_path / "work"
    work.mkdir()
    accumulator = accumulated(path, vocab, 4, memory, work)
    # 40 kB: dozens of runs, merged two at a time (a block of 1024 rows each does not fit)
    assert (len(accumulator.runs) > 20) == (memory == 40_000), len(accumulator.runs)
    store = accumulator.store(str(tmp_path / "store"), path)
    assert_same_counts(store, NgramCounts.from_corpus(Corpus.read(path, vocab), 4))
    assert os.listdir(work) == []  # the runs removed once merged


@pytest.mark.parametrize("memory", [40_000, 1 << 30])
def test_once_counts_outgrow_memory_two_counters_count_the_blocks_left(zipf, tmp_path, memory):
    path, vocab = zipf
    (tmp_path / "work").mkdir()
    accumulator = CountAccumulator(vocab, 4, memory, str(tmp_path / "work"))
    blocks = list(Corpus.read_blocks(path, vocab, block_bytes=20_000))
    assert len(blocks) > 4
    accumulator.add_texts(blocks)
    helped = [run for run in accumulator.runs if os.sep + "helper" in run.folder]
    assert bool(helped) == (memory == 40_000), accumulator.runs  # counts in memory: one counter, no run
    assert bool(accumulator.runs) == (memory == 40_000)
    assert_same_counts(accumulator.store(str(tmp_path / "store"), path),
                       NgramCounts.from_corpus(Corpus.read(path, vocab), 4))


def test_bad_text_in_a_later_block_while_two_counters_count_is_one_line_and_leaves_no_file(tmp_path):
    text = zipf_text(3, 20_000).encode()
    (tmp_path / "t.txt").write_bytes(text[:300_000] + b"\xff" + text[300_000:])  # blocks of 32 kB at 1M
    line = text[:300_000].count(b"\n") + 1
    (tmp_path / "v.txt").write_text("".join(f"w{i}\n" for i in range(400)))
    temp = tmp_path / "temp"
    temp.mkdir()
    proc = subprocess.run([NPLM, "ngram-count", "-text", tmp_path / "t.txt", "-vocab", tmp_path / "v.txt",
                           "-order", "3", "-memory", "1M", "-temp", temp, "-lm", tmp_path / "lm.arpa"],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr == f"nplm: {tmp_path / 't.txt'}:{line}: invalid UTF-8\n", proc.stderr
    assert os.listdir(temp) == [] and not (tmp_path / "lm.arpa").exists()


def test_result_in_memory_is_the_store_loaded(zipf, tmp_path):
    path, vocab = zipf
    counts = accumulated(path, vocab, 3, 40_000, tmp_path).result(path)
    whole = NgramCounts.from_corpus(Corpus.read(path, vocab), 3)
    for k in range(3):
        np.testing.assert_array_equal(counts.grams[k], whole.grams[k])
        np.testing.assert_array_equal(counts.counts[k], whole.counts[k])
        np.testing.assert_array_equal(counts.index.keys[k], whole.index.keys[k])


def test_the_tables_stay_within_their_share_of_memory_whatever_the_block(zipf, tmp_path):
    path, vocab = zipf
    accumulator = CountAccumulator(vocab, 4, 2_000_000, str(tmp_path))
    for chunk in Corpus.read_blocks(path, vocab, block_bytes=1 << 30):  # the whole text in one block
        accumulator.add_text(chunk)
        assert 0 < accumulator.counter.bytes() <= accumulator.table_memory
    assert accumulator.runs


def test_a_counter_after_a_spill_begins_with_the_tables_of_the_one_before(zipf, tmp_path):
    path, vocab = zipf
    accumulator = CountAccumulator(vocab, 4, 2_000_000, str(tmp_path))
    before, chunks = None, list(Corpus.read_blocks(path, vocab, block_bytes=2_000))
    for chunk in chunks[:-20]:
        runs, capacities = len(accumulator.runs), accumulator.counter.capacities()
        accumulator.add_text(chunk)
        if len(accumulator.runs) > runs and before is None:
            before = capacities  # the tables just spilled (the piece after the spill may grow the new ones)
            assert all(now >= then for now, then in zip(accumulator.counter.capacities(), before))
        assert accumulator.counter.bytes() <= accumulator.table_memory
    assert before is not None and max(before) > 4096, before
    # tables too large for the share (halved: two counters side by side) begin at the smallest
    accumulator.table_memory = tables_bytes(accumulator.counter.capacities()) - 1
    accumulator.runs.append(accumulator._spill(accumulator._new_folder("run"), more_text=True))
    assert accumulator.counter.capacities() == [4096] * 4
    accumulator.table_memory = 1 << 30
    for chunk in chunks[-20:]:
        accumulator.add_text(chunk)
    # the last run's spill (no more text: store), no large tables kept through the merge
    capacities = accumulator.counter.capacities()
    accumulator.runs.append(accumulator._spill(accumulator._new_folder("run")))
    assert max(capacities) > 4096 and accumulator.counter.capacities() == [4096] * 4
    assert_same_counts(accumulator.store(str(tmp_path / "store"), path),
                       NgramCounts.from_corpus(Corpus.read(path, vocab), 4))


def test_a_counter_begun_with_capacities_counts_the_same():
    rng = np.random.default_rng(5)
    ids, offsets = rng.integers(0, 300, 50_000).astype(np.int32), np.arange(0, 50_001, 10, dtype=np.int64)
    plain, sized = NgramHashCounter(3, 303), NgramHashCounter(3, 303, [5000, 1 << 16, 70_000])
    assert sized.capacities() == [8192, 1 << 16, 1 << 17]  # powers of two, at least those
    for counter in (plain, sized):
        counter.add(ids, offsets, 300, 301, 302)
    for ours, theirs in zip(sized.tables(), plain.tables()):
        for a, b in zip(ours, theirs):
            np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="capacities"):
        NgramHashCounter(3, 303, [4096, 4096])


def test_a_spill_sorts_without_the_keys_and_ranks_it_does_not_write():
    rng = np.random.default_rng(7)
    ids, offsets = rng.integers(0, 50, 5_000).astype(np.int32), np.arange(0, 5_001, 10, dtype=np.int64)
    counter = NgramHashCounter(2, 53)
    counter.add(ids, offsets, 50, 51, 52)
    (unigram_keys, unigram_counts, _), (keys, counts, _) = counter.tables()
    lower_rows, _, _, lower_rank, _ = sort_counted(unigram_keys, unigram_counts, None, None, None, 53)
    full = sort_counted(keys, counts, None, lower_rank, lower_rows, 53)
    spilled = sort_counted(keys, counts, None, lower_rank, lower_rows, 53, want_keys=False, want_rank=False)
    assert spilled[1] is None and spilled[3] is None and full[1] is not None and full[3] is not None
    np.testing.assert_array_equal(spilled[0], full[0])
    np.testing.assert_array_equal(spilled[2], full[2])


def test_counts_files_are_merged_with_the_text(zipf, tmp_path):
    path, vocab = zipf
    whole = NgramCounts.from_corpus(Corpus.read(path, vocab), 3)
    whole.write(str(tmp_path / "c.txt"))
    accumulator = accumulated(path, vocab, 2, 40_000, tmp_path)  # orders up to the counts file's
    accumulator.add_counts(NgramCounts.read(str(tmp_path / "c.txt"), vocab))
    store = accumulator.store(str(tmp_path / "store"))
    bigrams = NgramCounts.from_corpus(Corpus.read(path, vocab), 2)
    doubled = NgramCounts(vocab, whole.grams, [c * 2 for c in bigrams.counts] + [whole.counts[2]])
    assert_same_counts(store, doubled)


def runs_of(tmp_path, vocab, rows_and_counts):
    stores = []
    for i, (grams, counts) in enumerate(rows_and_counts):
        folder = tmp_path / f"r{i}"
        folder.mkdir()
        unigrams = np.unique(grams[:, :1], axis=0)
        stores.append(CountStore.save(NgramCounts(vocab, [unigrams, grams], [np.ones(len(unigrams), np.int64),
                                                                          counts]), str(folder)))
    return stores


@pytest.mark.parametrize("sizes", [(0, 1, 50, 300, 7), tuple(range(0, 111, 3))])  # 5 and 37 runs
@pytest.mark.parametrize("memory", [1, 10_000])
def test_merge_sums_equal_rows_of_any_runs_whatever_the_blocks(tmp_path, memory, sizes):
    vocab = Vocabulary([f"w{i}" for i in range(20)])
    rng = np.random.default_rng(5)
    parts = []
    for n in sizes:
        grams = np.unique(rng.integers(0, len(vocab), (n, 2)).astype(np.int32), axis=0)
        parts.append((grams, rng.integers(1, 1 << 40, len(grams))))
    out = tmp_path / "out"
    out.mkdir()
    merged = merge_stores(runs_of(tmp_path, vocab, parts), str(out), memory)  # 1 byte: blocks of one row
    everything = np.concatenate([g for g, _ in parts])
    expected, where = np.unique(everything, axis=0, return_inverse=True)
    sums = np.zeros(len(expected), np.int64)
    np.add.at(sums, where.ravel(), np.concatenate([c for _, c in parts]))
    grams, counts = merged.read(2, 0, merged.sizes[1])
    np.testing.assert_array_equal(grams, expected)
    np.testing.assert_array_equal(counts, sums)


def test_a_merge_lets_go_of_the_pages_of_spent_runs_only(tmp_path):
    """The runs a merge reads for the last time (`spent`: the counter's own) are punched out
    as read, for the merged store's writes to take their pages; any other store (a user's
    counts) is left as it was, byte for byte; the sums are the same either way."""
    from nplmtk.scratch import let_go_of
    probe = tmp_path / "probe"
    probe.write_bytes(b"x" * (1 << 20))
    with open(probe, "r+b") as handle:
        let_go_of(handle.fileno(), 0, 1 << 20)
    if os.stat(probe).st_blocks * 512 >= 1 << 20:
        pytest.skip("no holes punched on this file system")
    vocab = Vocabulary([f"w{i}" for i in range(300)])
    rng = np.random.default_rng(7)
    parts = [(np.unique(rng.integers(0, len(vocab), (60_000, 2)).astype(np.int32), axis=0), None) for _ in range(3)]
    parts = [(grams, rng.integers(1, 1000, len(grams))) for grams, _ in parts]
    merged = []
    for spent_ones in ([], [0, 2]):
        folder = tmp_path / f"spent{len(spent_ones)}"
        folder.mkdir()
        stores = runs_of(folder, vocab, parts)
        files = [os.path.join(store.folder, f"{name}2") for store in stores for name in ("grams", "counts")]
        before = [open(path, "rb").read() for path in files]
        out = folder / "out"
        out.mkdir()
        result = merge_stores(stores, str(out), 2_000_000, spent=[stores[i] for i in spent_ones])
        merged.append(result.read(2, 0, result.sizes[1]))
        for i, path in enumerate(files):
            held = os.stat(path).st_blocks * 512
            if i // 2 in spent_ones:
                assert held <= 4096, (path, held, len(before[i]))  # the last page, partly the file's end
            else:
                assert open(path, "rb").read() == before[i]
    np.testing.assert_array_equal(merged[0][0], merged[1][0])
    np.testing.assert_array_equal(merged[0][1], merged[1][1])


def test_merge_refuses_counts_that_sum_past_int64(tmp_path):
    vocab = Vocabulary(["a", "b"])
    row = np.array([[3, 4]], np.int32)
    stores = runs_of(tmp_path, vocab, [(row, np.array([2 ** 62])), (row, np.array([2 ** 62]))])
    with pytest.raises(InputError, match="2-gram counts that sum above 2"):
        merge_stores(stores, str(tmp_path), 1 << 20, "c.txt")


def test_a_full_disk_while_counting_is_one_line_and_leaves_no_file(tmp_path):
    (tmp_path / "t.txt").write_text(zipf_text(2, 20_000))
    temp = tmp_path / "temp"
    temp.mkdir()
    limit = 200_000  # bytes a file may have: the runs' files pass it

    def small_files():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))  # Python ignores SIGXFSZ: writes fail (EFBIG)

    proc = subprocess.run([NPLM, "ngram-count", "-text", tmp_path / "t.txt", "-order", "3", "-memory", "1M",
                           "-temp", temp, "-lm", tmp_path / "lm.arpa"], capture_output=True, text=True,
                          preexec_fn=small_files)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "cannot keep temporary files" in proc.stderr, proc.stderr
    assert str(temp) in proc.stderr and "(File too large)" in proc.stderr  # the write's errno, as ENOSPC's would be
    assert os.listdir(temp) == [] and not (tmp_path / "lm.arpa").exists()


def test_a_missing_temp_folder_is_refused_before_counting(tmp_path, nplm):
    (tmp_path / "t.txt").write_text("a b\n")
    status, _, err = nplm("ngram-count", "-text", tmp_path / "t.txt", "-temp", tmp_path / "none",
                          "-write", tmp_path / "c")
    assert status == 2 and "no such folder" in err and "Traceback" not in err


@pytest.mark.parametrize("signum, status", [(signal.SIGTERM, 128 + signal.SIGTERM), (signal.SIGINT, 130)])
def test_sigterm_or_ctrl_c_while_counting_removes_the_temporary_files(tmp_path, signum, status):
    (tmp_path / "v.txt").write_text("a\nb\n")
    fifo, temp = tmp_path / "text", tmp_path / "temp"
    os.mkfifo(fifo)
    temp.mkdir()
    # the text, a FIFO with no writer, holds the command in its open with the folder made;
    # Ctrl-C as a terminal sends it: a test run in the background of a shell (`make test &`)
    # would hand its children SIGINT ignored, which Python keeps ignored
    proc = subprocess.Popen([NPLM, "ngram-count", "-text", fifo, "-vocab", tmp_path / "v.txt", "-temp", temp,
                             "-write", tmp_path / "c"], stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 20
    while not os.listdir(temp) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.02)
    assert os.listdir(temp), proc.poll()
    proc.send_signal(signum)
    assert proc.wait(20) == status
    assert "Traceback" not in proc.stderr.read()
    assert os.listdir(temp) == []
