"""Corpora larger than memory: text read in blocks, ids memory-mapped, training windows
gathered on demand, counts merged from chunks and from sorted runs on disk."""
import gzip
import io
import os
import platform
import re
import stat
import subprocess
import sys

import numpy as np
import pytest

import nplmtk.io.reading
from nplmtk import container
from nplmtk.corpus import Corpus
from nplmtk.errors import InputError, NplmError
from nplmtk.io import long_line_start, read_bytes, read_lines
from nplmtk.neural.network import NeuralModel
from nplmtk.neural.sampling import proposal
from nplmtk.ngram.classes import WordClasses
from nplmtk.ngram.counts import NgramCounts
from nplmtk.vocab import Vocabulary, count_words

WORDS = ["the", "cat", "sat", "on", "a", "mat", "dog"]


@pytest.fixture
def vocab():
    return Vocabulary(WORDS[:5])


def random_text(seed=0, sentences=300):
    rng = np.random.default_rng(seed)
    return "".join(" ".join(rng.choice(WORDS, size=n)) + "\n" for n in rng.integers(0, 12, sentences))


@pytest.mark.parametrize("memory_map", [False, True])
@pytest.mark.parametrize("block_bytes", [7, 100, 1 << 20])
def test_blocks_and_memory_map_read_the_same_corpus(vocab, tmp_path, memory_map, block_bytes):
    text = random_text() + "no newline at the end"
    path = tmp_path / "t.txt.gz"
    with gzip.open(path, "wt") as f:
        f.write(text)
    whole = Corpus.from_lines(text.split("\n"), vocab, unk=False)
    read = Corpus.read(str(path), vocab, unk=False, memory_map=memory_map, block_bytes=block_bytes)
    np.testing.assert_array_equal(read.ids, whole.ids)
    np.testing.assert_array_equal(read.offsets, whole.offsets)
    blocks = list(Corpus.read_blocks(str(path), vocab, unk=False, block_bytes=block_bytes))
    assert isinstance(read.ids.base, np.memmap) == (memory_map and len(blocks) > 1)  # one block: no temporary file
    assert len(blocks) > 1 or block_bytes > len(text)
    np.testing.assert_array_equal(np.concatenate([b.ids for b in blocks]), whole.ids)


def test_streamed_stdin_is_read_once(vocab, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"the cat\nsat\n")))
    assert [b.ids.tolist() for b in Corpus.read_blocks("-", vocab, block_bytes=4)] == [[3, 4], [5]]
    with pytest.raises(InputError, match="stdin was read already"):
        Corpus.read("-", vocab)


def test_invalid_utf8_names_its_line_across_blocks(vocab, tmp_path):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"the cat\n" * 50 + b"sat \xe9t\xe9\n")
    with pytest.raises(InputError, match=r":51: invalid UTF-8"):
        Corpus.read(str(path), vocab, block_bytes=64)


@pytest.mark.parametrize("order", [1, 2, 5])
def test_window_examples_are_the_training_windows(vocab, order):
    corpus = Corpus.from_lines(random_text(1).split("\n"), vocab, unk=False)
    assert corpus.num_oovs > 0
    windows = corpus.windows(order)
    expected = windows[windows[:, -1] >= 0]
    expected[expected < 0] = vocab.unk
    examples = corpus.window_examples(order, vocab.unk)
    assert len(examples) == len(expected)
    np.testing.assert_array_equal(examples[:], expected)
    pick = np.random.default_rng(0).permutation(len(expected))[:50].astype(np.int32)
    np.testing.assert_array_equal(examples[pick], expected[pick])
    with pytest.raises(IndexError):
        examples[np.array([len(expected)])]


def test_the_shuffle_is_numpys_permutation_in_four_bytes_an_example():
    order = NeuralModel.example_order(None, np.random.default_rng(7), 100_003)
    assert order.dtype == np.int32
    np.testing.assert_array_equal(order, np.random.default_rng(7).permutation(100_003))


@pytest.mark.parametrize("kind", ["unigram", "bigram"])
def test_the_proposal_counted_in_blocks_is_the_proposal(vocab, kind, monkeypatch):
    corpus = Corpus.from_lines(random_text(2).split("\n"), vocab, unk=True)
    windows = corpus.windows(3)
    whole = proposal(windows, len(vocab), kind)
    monkeypatch.setattr("nplmtk.neural.sampling.PROPOSAL_BLOCK", 37)
    blocks = proposal(corpus.window_examples(3, vocab.unk), len(vocab), kind)
    np.testing.assert_array_equal(blocks.log_q, whole.log_q)
    for a, b in zip(blocks.bigram or (), whole.bigram or ()):
        np.testing.assert_array_equal(a, b)


def brown_like_text(seed, sentences):
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(60)]
    p = 1 / np.arange(1, 61)
    return "".join(" ".join(rng.choice(words, size=n, p=p / p.sum())) + "\n" for n in rng.integers(1, 15, sentences))


@pytest.mark.parametrize("memory", [100_000, 3_000_000, 1 << 30])
def test_counts_of_chunks_spilled_and_merged_are_the_counts_of_the_whole(tmp_path, memory):
    from nplmtk.ngram.count_runs import CountAccumulator
    from nplmtk.ngram.counts import NgramCounts
    text = brown_like_text(3, 2_000)
    vocab = Vocabulary([f"w{i}" for i in range(50)])
    path = tmp_path / "t.txt"
    path.write_text(text)
    whole = NgramCounts.from_corpus(Corpus.read(str(path), vocab), 4)
    accumulator = CountAccumulator(vocab, 4, memory, str(tmp_path))
    for chunk in Corpus.read_blocks(str(path), vocab, block_bytes=2_000):
        accumulator.add_text(chunk)
    spilled = len(accumulator.runs)
    counts = accumulator.result()
    chunks = len(list(Corpus.read_blocks(str(path), vocab, block_bytes=2_000)))
    # 100 kB: the tables of one chunk already fill their share, so each chunk after the first spills the one before
    assert spilled == {100_000: chunks - 1, 3_000_000: spilled or -1, 1 << 30: 0}[memory], (spilled, chunks)
    for k in range(4):
        np.testing.assert_array_equal(counts.grams[k], whole.grams[k])
        np.testing.assert_array_equal(counts.counts[k], whole.counts[k])


def test_hash_counts_are_the_counts_of_every_window():
    from nplmtk.ngram.counts import NgramCounts
    vocab = Vocabulary(WORDS[:5])
    corpus = Corpus.from_lines(random_text(5).split("\n"), vocab, unk=False)
    counts = NgramCounts.from_corpus(corpus, 3)
    for k in (1, 2, 3):
        expected = {}
        for s in range(corpus.num_sentences):
            padded = [vocab.bos] + [w if w >= 0 else vocab.unk for w in corpus.sentence(s)] + [vocab.eos]
            for i in range(len(padded) - k + 1):
                expected[tuple(padded[i:i + k])] = expected.get(tuple(padded[i:i + k]), 0) + 1
        assert sorted(expected) == [tuple(row) for row in counts.grams[k - 1].tolist()]
        assert [expected[tuple(row)] for row in counts.grams[k - 1].tolist()] == counts.counts[k - 1].tolist()


def test_ngram_count_in_a_small_memory_writes_the_same_files(tmp_path, nplm):
    (tmp_path / "t.txt").write_text(brown_like_text(4, 3_000))
    outputs = []
    for memory in ("1M", "2G"):
        status, _, err = nplm("ngram-count", "-text", "-", "-order", "4", "-memory", memory, "-debug", 2,
                              "-write", tmp_path / f"c{memory}.txt", "-lm", tmp_path / f"lm{memory}.arpa",
                              stdin=(tmp_path / "t.txt").read_text())
        assert status == 0, err
        assert ("sorted runs on disk" in err) == (memory == "1M"), err
        if memory == "1M":  # each stage's line says the process's peak memory so far, which only rises
            peaks = [int(p.replace(",", "")) for p in re.findall(r" s, peak ([0-9,]+) MiB", err)]
            assert "prefix and suffix rows: " in err and len(peaks) >= 6 and peaks == sorted(peaks), err
        outputs.append(((tmp_path / f"c{memory}.txt").read_text(), (tmp_path / f"lm{memory}.arpa").read_text()))
    assert outputs[0] == outputs[1]


def test_peak_resident_bytes_sees_an_array_touched():
    """In a process of its own: the peak only rises, and this one's tests have raised it."""
    script = ("import numpy as np; from nplmtk.threads import peak_resident_bytes as peak\n"
              "before = peak(); held = np.ones(96 << 20, dtype=np.uint8); print(peak() - before)")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert int(done.stdout) >= 90 << 20  # 96 MiB, every page written


def test_the_peak_said_never_falls(monkeypatch):
    """Linux's VmHWM is the larger of a mark recorded at some events and the current set,
    counted per thread and summed late: it can read lower than it did (36 MiB after 37, a
    stage's line under the one before it). The peak given is the most seen so far."""
    import io
    from nplmtk import threads
    marks = iter([37 << 10, 36 << 10, 38 << 10])
    monkeypatch.setattr(threads, "_highest_seen", 0)
    monkeypatch.setattr(threads, "open", lambda *args: io.BytesIO(b"VmPeak: 1 kB\nVmHWM: %d kB\n" % next(marks)),
                        raising=False)
    assert [threads.peak_resident_bytes() >> 20 for _ in range(3)] == [37, 37, 38]


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc" or not os.path.exists("/proc/self/statm"),
                    reason="glibc's heap, Linux's /proc")
def test_the_heaps_freed_chunks_go_back_to_the_system_when_asked():
    """In a process of its own, with ngram-count's malloc settings: chunks freed below a live
    one stay resident until give_back_freed_memory (called after the counting, before the
    out-of-core estimate's first stage)."""
    script = ("import os, numpy as np\n"
              "from nplmtk.threads import give_back_freed_memory, reuse_freed_memory\n"
              "rss = lambda: int(open('/proc/self/statm').read().split()[1]) * os.sysconf('SC_PAGE_SIZE')\n"
              "reuse_freed_memory()\n"
              "chunks = [np.ones(4 << 20, dtype=np.uint8) for _ in range(64)]  # 256 MiB from the heap\n"
              "above = np.ones(1 << 16, dtype=np.uint8)\n"
              "del chunks; freed = rss(); give_back_freed_memory(); print(freed - rss())")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert int(done.stdout) >= 200 << 20


def test_chunks_too_short_for_an_order_are_fine_the_whole_text_is_not(tmp_path, nplm):
    (tmp_path / "t.txt").write_text("a\nb\n" * 40_000 + "a b c\n")  # three chunks, the last has 4-grams
    assert nplm("ngram-count", "-text", tmp_path / "t.txt", "-order", "4", "-memory", "1M",
                "-write", tmp_path / "c.txt")[0] == 0
    (tmp_path / "s.txt").write_text("a\nb\n" * 3_000)
    status, _, err = nplm("ngram-count", "-text", tmp_path / "s.txt", "-order", "4", "-memory", "1M",
                          "-write", tmp_path / "c.txt")
    assert status == 2 and "no sentence is long enough for 4-grams" in err and "Traceback" not in err


@pytest.mark.parametrize("size", ["12", "0.5M", "lots", "-2G"])
def test_memory_sizes_are_checked(tmp_path, nplm, size):
    (tmp_path / "t.txt").write_text("a b\n")
    status, _, err = nplm("ngram-count", "-text", tmp_path / "t.txt", "-memory", size, "-write", tmp_path / "c")
    assert status == 2 and "-memory" in err and "Traceback" not in err


def test_scratch_folders_of_killed_processes_are_removed(tmp_path, monkeypatch):
    import subprocess
    import tempfile

    from nplmtk.scratch import scratch_folder
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = tmp_path / f"nplm-counts.{dead.pid}-abc"
    stale.mkdir()
    (stale / "grams1.npy").write_bytes(b"x" * 100)
    with scratch_folder("counts") as folder:
        assert not stale.exists() and folder.startswith(str(tmp_path))
    assert not tmp_path.joinpath(folder).exists()


def reference_stream_rows(corpus, streams, vocab):
    """The recurrent models' steps as numpy built them before they were gathered on demand."""
    ids, offsets = corpus.ids, corpus.offsets
    sentences = len(offsets) - 1
    targets = np.insert(ids, offsets[1:], vocab.eos)
    inputs = np.insert(ids, offsets[:-1], vocab.bos)
    inputs[inputs < 0] = vocab.unk
    total = len(targets)
    starts = offsets[:-1] + np.arange(sentences)
    cuts = np.concatenate([[0], starts[np.minimum(np.searchsorted(starts, np.arange(1, streams) * total / streams),
                                                  sentences - 1)]])
    cuts = np.unique(cuts)
    stream = np.searchsorted(cuts, np.arange(total), side="right") - 1
    step = np.arange(total) - cuts[stream]
    rows = np.full((int(step.max()) + 1, 2, streams), -1, dtype=np.int32)
    rows[:, 0, :] = vocab.bos
    rows[step, 0, stream] = inputs
    rows[step, 1, stream] = targets
    return rows


@pytest.mark.parametrize("streams", [1, 3, 32, 400])
def test_stream_steps_are_the_recurrent_training_rows(vocab, streams):
    corpus = Corpus.from_lines(random_text(6).split("\n"), vocab, unk=False)
    expected = reference_stream_rows(corpus, streams, vocab)
    steps = corpus.stream_steps(streams, vocab.unk)
    assert len(steps) == len(expected)
    np.testing.assert_array_equal(steps[:], expected)
    pick = np.array([len(expected) - 1, 0, 2])
    np.testing.assert_array_equal(steps[pick], expected[pick])
    assert steps.words == int(np.count_nonzero(expected[:, 1] >= 0))


def test_word_counts_in_blocks(vocab):
    corpus = Corpus.from_lines(random_text(7).split("\n"), vocab, unk=False)
    expected = np.bincount(corpus.ids[corpus.ids >= 0], minlength=len(vocab))
    np.testing.assert_array_equal(corpus.word_counts(block=17), expected)


# -- endless or absurd input: lines and words have a limit ---------------------------------

def longest_line(data):
    return max(len(line) for line in data.split(b"\n"))


@pytest.mark.parametrize("seed", range(20))
def test_the_long_line_found_is_the_first_line_past_the_limit(seed):
    rng = np.random.default_rng(seed)
    data = b"\n".join(b"x" * n for n in rng.integers(0, 40, rng.integers(1, 30)))
    for limit in (1, 5, 20, 39, 40):
        where = long_line_start(data, limit)
        too_long = [start for start, line in zip(np.cumsum([0] + [len(x) + 1 for x in data.split(b"\n")]),
                                                 data.split(b"\n")) if len(line) > limit]
        assert where == (too_long[0] if too_long else -1), (data, limit)


def test_a_line_past_the_limit_is_refused_with_its_line_in_every_reader(tmp_path, monkeypatch, vocab):
    monkeypatch.setenv("NPLM_MAX_LINE_BYTES", "100")
    text = b"the cat\n" * 30 + b"a" * 100 + b"\n" + b"sat\n" * 30
    path = tmp_path / "t.txt"
    path.write_bytes(text)
    with gzip.open(tmp_path / "t.txt.gz", "wb") as f:
        f.write(text)
    assert len(read_bytes(str(path))) == len(text)  # 100 bytes: at the limit
    monkeypatch.setenv("NPLM_MAX_LINE_BYTES", "99")
    monkeypatch.setattr(nplmtk.io.reading, "READ_BYTES", 7)  # the long line across pieces of a stream
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text)))
    for name in (str(path), str(tmp_path / "t.txt.gz"), "-"):
        with pytest.raises(InputError) as caught:
            read_lines(name)
        assert (caught.value.path, caught.value.line) == (name, 31)
        assert caught.value.message.startswith("a line longer than 99 bytes (the limit: set NPLM_MAX_LINE_BYTES")
    for name in (str(path), str(tmp_path / "t.txt.gz")):
        for block_bytes in (5, 64, 1 << 20):
            with pytest.raises(InputError, match=f"^{name}:31: a line longer than 99 bytes"):
                Corpus.read(name, vocab, block_bytes=block_bytes)


@pytest.mark.skipif(not (os.path.exists("/dev/zero") and stat.S_ISCHR(os.stat("/dev/zero").st_mode)),
                    reason="no /dev/zero device")
def test_an_endless_line_is_refused_without_reading_it_all(vocab, bounded_memory):
    # /dev/zero never ends: each reader must stop once the line passes the limit
    with pytest.raises(InputError, match="^/dev/zero:1: a line longer than 1048576 bytes"):
        Corpus.read("/dev/zero", vocab)
    with pytest.raises(InputError, match="^/dev/zero:1: a line longer than 1048576 bytes"):
        read_lines("/dev/zero")
    with pytest.raises(InputError, match="^/dev/zero:1: a line longer than"):
        count_words(["/dev/zero"])
    with pytest.raises(InputError, match="^/dev/zero: not a regular file: an nplm model is memory-mapped"):
        container.load("/dev/zero")


class EndlessBytes(io.RawIOBase):
    """A stream that never ends: `start`, then `pattern` again and again."""

    def __init__(self, pattern, start=b""):
        self.pattern, self.start = pattern, start

    def readable(self):
        return True

    def readinto(self, buffer):
        n = len(buffer)
        data = self.start[:n]
        self.start = self.start[n:]
        data += (self.pattern * ((n - len(data)) // len(self.pattern) + 1))[:n - len(data)]
        buffer[:n] = data
        return n


@pytest.mark.parametrize("start, message", [
    (b"", "-: not an ARPA model (no \\data\\ line in its first 1048576 bytes) nor an nplm model"),
    (b"\n\\data\\\nngram 1=3\nngram 2=2\n\n\\1-grams:\n",
     "-:413: more lines than the \\data\\ header's 5 n-grams and 407 other lines: not an ARPA model"),
])
def test_an_endless_model_through_a_pipe_is_refused_by_its_header(monkeypatch, bounded_memory, start, message):
    from nplmtk.models import load
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BufferedReader(EndlessBytes(b"y\n", start))))
    with pytest.raises(InputError) as caught:  # 1 line before \\data\\, 4 of header, 5 n-grams, 2 titles, 400 blank
        load("-")
    assert str(caught.value) == message


def test_an_endless_stream_that_is_not_text_is_refused_at_its_first_piece(monkeypatch, bounded_memory):
    # short lines, so only the UTF-8 check can stop it (as /dev/urandom)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BufferedReader(EndlessBytes(b"ok\nno \xff\n"))))
    with pytest.raises(InputError) as caught:
        read_lines("-")
    assert (caught.value.path, caught.value.line, caught.value.message) == ("-", 2, "invalid UTF-8")


def test_a_word_past_the_limit_is_refused_with_its_line(tmp_path, monkeypatch):
    monkeypatch.setenv("NPLM_MAX_TOKEN_BYTES", "10")
    long_word = "caf\u00e9\u00e9\u00e9\u00e9"  # 7 characters, 11 bytes in UTF-8
    text, vocab = tmp_path / "t.txt", tmp_path / "vocab.txt"
    text.write_text(f"the cat\nsat on\na mat\nthe {long_word} sat\n")
    vocab.write_text(f"the\ncat\n{long_word} 3\n")
    with pytest.raises(InputError, match=f"^{text}:4: a word of 11 bytes, longer than 10 "
                                         r"\(the limit: set NPLM_MAX_TOKEN_BYTES to raise it\)$"):
        count_words([str(text)])
    with pytest.raises(InputError, match=f"^{vocab}:3: a word of 11 bytes"):
        Vocabulary.read(str(vocab))
    with pytest.raises(InputError, match="^a word of 11 bytes"):
        Vocabulary([long_word])
    counts, classes = tmp_path / "t.counts", tmp_path / "t.classes"
    counts.write_text(f"the\t3\nthe cat\t2\nthe {long_word}\t1\n")
    classes.write_text(f"C1 the\nC1 {long_word}\n")
    with pytest.raises(InputError, match=f"^{counts}:3: a word of 11 bytes"):
        NgramCounts.read(str(counts), Vocabulary(["the", "cat"]))
    with pytest.raises(InputError, match=f"^{classes}:2: a word of 11 bytes"):
        WordClasses.read(str(classes))
    monkeypatch.setenv("NPLM_MAX_TOKEN_BYTES", "11")
    assert long_word in Vocabulary.from_counts(count_words([str(text)]))
    assert long_word in Vocabulary.read(str(vocab))


@pytest.mark.parametrize("value", ["0", "-5", "1M", "lots", "\u00b2", "\u0663", ""])
def test_a_limit_that_is_not_a_number_of_bytes_is_refused(monkeypatch, tmp_path, value):
    monkeypatch.setenv("NPLM_MAX_LINE_BYTES", value)
    (tmp_path / "t.txt").write_text("the cat\n")
    with pytest.raises(NplmError, match=f"^NPLM_MAX_LINE_BYTES must be a positive number of bytes, got '{value}'$"):
        read_lines(str(tmp_path / "t.txt"))


FULL_TMPDIR_SCRIPT = """
import resource, sys
from nplmtk.corpus import Corpus
from nplmtk.errors import NplmError
from nplmtk.vocab import Vocabulary
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))  # EFBIG past 4 KiB, as ENOSPC on a full TMPDIR
try:
    ids = Corpus.read(sys.argv[1], Vocabulary(sys.argv[2].split()), memory_map=True, block_bytes=300).ids
    print(len(ids), int(ids.sum()))
except NplmError as error:
    print(error)
"""


def test_a_corpus_that_its_temporary_file_cannot_hold_is_one_error(tmp_path):
    """Blocks of ids smaller than a stdio buffer: ndarray.tofile lost them on a full disk without an
    error (the map then past the file's end, a ValueError, or over a hole: SIGBUS on a full tmpfs)."""
    import subprocess
    text = tmp_path / "t.txt"
    text.write_text(random_text(sentences=1000))
    run = subprocess.run([sys.executable, "-c", FULL_TMPDIR_SCRIPT, str(text), " ".join(WORDS)], capture_output=True,
                         text=True, timeout=60, env={**os.environ, "TMPDIR": str(tmp_path)})
    assert run.returncode == 0 and run.stderr == "", run.stderr
    assert run.stdout == (f"{text}: cannot keep the corpus in a temporary file (File too large): set TMPDIR to a "
                          "folder with room\n")


# -- pipes: their bytes come once ----------------------------------------------------------

FIFO_SCRIPT = """
import sys, threading
from nplmtk.io import check_readable
from nplmtk.corpus import Corpus
from nplmtk.models import load
from nplmtk.vocab import Vocabulary
from nplmtk.errors import NplmError
fifo, text, model, container = sys.argv[1:5]

def written(path):
    def write():
        with open(fifo, "wb") as out:
            out.write(open(path, "rb").read())
    threading.Thread(target=write, daemon=True).start()

check_readable(fifo)  # must not open it (with no writer yet, an open would wait for ever)
written(text)
print(Corpus.read(fifo, Vocabulary(["the", "cat"])).num_words)
written(model)
print(len(load(fifo).vocab))  # is_container must not take the first bytes of an ARPA model
written(container)
try:
    load(fifo)
except NplmError as error:
    print(error)
"""


def test_a_pipe_loses_no_bytes_to_checks_and_a_model_through_one_is_named(tmp_path):
    import subprocess
    from nplmtk.ngram.arpa import write_arpa
    from nplmtk.ngram.estimate import estimate
    text, model, fifo = tmp_path / "t.txt", tmp_path / "m.arpa", tmp_path / "fifo"
    text.write_text(random_text())
    vocab = Vocabulary.from_counts(count_words([str(text)]))
    with pytest.warns(Warning):  # the degenerate counts of a random text
        write_arpa(estimate(NgramCounts.from_corpus(Corpus.read(str(text), vocab), 2)), str(model))
    container.save(str(tmp_path / "c.nplm"), "mixture", {}, vocab=vocab)
    os.mkfifo(fifo)
    # in a process of its own, with a bound on its time: a reader that hangs on the pipe fails the test
    run = subprocess.run([sys.executable, "-c", FIFO_SCRIPT, str(fifo), str(text), str(model), str(tmp_path / "c.nplm")],
                         capture_output=True, text=True, timeout=20)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == [str(Corpus.read(str(text), vocab).num_words), str(len(vocab)),
                                       f"{fifo}: an nplm model must be a regular file (it is memory-mapped), not a "
                                       "pipe or a device"]
