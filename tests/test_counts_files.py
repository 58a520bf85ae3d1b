"""Counts files read by `-read`. Binary ones (`ngram-count -write-binary`): the counts of
parts of a corpus made apart and merged give the model of the whole, byte for byte; a
hostile counts file (valid checksums, wrong content) is one line and exit status 2.
SRILM's text ones: read a block of lines at a time (the kernel encode_count_lines), the
same counts as a line-by-line reading, whatever the blocks."""
import subprocess

import numpy as np
import pytest

from nplmtk import container
from nplmtk._ext.text_kernels import count_line_words, encode_count_lines
from nplmtk.ngram.counts import MAX_ORDER
from nplmtk.ngram.store import COUNTS_KIND
from nplmtk.vocab import Vocabulary

from conftest import NPLM, assert_one_line_error

WORDS = [f"w{i}" for i in range(60)]


def nplm(*args):
    proc = subprocess.run([NPLM, *map(str, args)], capture_output=True, text=True)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.fixture(scope="module")
def parts(tmp_path_factory):
    folder = tmp_path_factory.mktemp("parts")
    rng = np.random.default_rng(3)
    p = 1 / np.arange(1, len(WORDS) + 1) ** 1.1
    lines = [" ".join(rng.choice(WORDS, size=n, p=p / p.sum())) for n in rng.integers(1, 15, 1500)]
    (folder / "all.txt").write_text("\n".join(lines) + "\n")
    (folder / "vocab.txt").write_text("\n".join(WORDS[:50]) + "\n")
    for i in range(3):
        (folder / f"part{i}.txt").write_text("\n".join(lines[i::3]) + "\n")
        status, _, err = nplm("ngram-count", "-text", folder / f"part{i}.txt", "-order", "4", "-vocab",
                              folder / "vocab.txt", "-unk", "-write-binary", folder / f"part{i}.counts")
        assert status == 0, err
    return folder


@pytest.mark.parametrize("memory", ["1M", "2G"])
def test_parts_counted_apart_merge_into_the_model_of_the_whole(parts, tmp_path, memory):
    status, _, err = nplm("ngram-count", "-text", parts / "all.txt", "-order", "4", "-vocab", parts / "vocab.txt",
                          "-unk", "-lm", tmp_path / "whole.arpa")
    assert status == 0, err
    reads = [arg for i in range(3) for arg in ("-read", parts / f"part{i}.counts")]
    status, _, err = nplm("ngram-count", *reads, "-order", "4", "-unk", "-memory", memory, "-lm",
                          tmp_path / "merged.arpa", "-write-binary", tmp_path / "merged.counts")
    assert status == 0, err
    assert (tmp_path / "merged.arpa").read_bytes() == (tmp_path / "whole.arpa").read_bytes()
    assert all((parts / f"part{i}.counts").exists() for i in range(3))  # read, merged, left as they were
    status, _, err = nplm("ngram-count", "-text", parts / "all.txt", "-order", "4", "-vocab", parts / "vocab.txt",
                          "-unk", "-write-binary", tmp_path / "whole.counts")
    assert status == 0, err
    assert (tmp_path / "merged.counts").read_bytes() == (tmp_path / "whole.counts").read_bytes()


def test_counts_of_another_vocabulary_are_refused(parts, tmp_path):
    (tmp_path / "v.txt").write_text("\n".join(WORDS[:40]) + "\n")
    status, _, err = nplm("ngram-count", "-read", parts / "part0.counts", "-vocab", tmp_path / "v.txt", "-order", "4",
                          "-lm", tmp_path / "m.arpa")
    assert_one_line_error(status, err, "part0.counts", "counted over another vocabulary")


def test_binary_and_text_counts_need_one_vocab(parts, tmp_path):
    (tmp_path / "c.txt").write_text("w1 w2\t3\n")
    status, _, err = nplm("ngram-count", "-read", parts / "part0.counts", "-read", tmp_path / "c.txt", "-order", "2",
                          "-lm", tmp_path / "m.arpa")
    assert_one_line_error(status, err, "give it")


def hostile(path, vocab, grams, counts, kind=COUNTS_KIND, order=None):
    arrays = {}
    for k, (g, c) in enumerate(zip(grams, counts), 1):
        arrays[f"grams.{k}"], arrays[f"counts.{k}"] = g, c
    container.save(str(path), kind, arrays, meta={"order": order or len(grams)}, vocab=vocab)


@pytest.mark.parametrize("case, message", [
    ("unsorted", "not sorted and distinct"),
    ("repeated", "not sorted and distinct"),
    ("outside", "word ids outside the vocabulary"),
    ("zero count", "counted 0 times"),
    ("wrong dtype", "expected <i4 (n, 2) and <i8 (n,)"),
    ("missing order", "expected"),
    ("another kind", "not n-gram counts"),
    ("order", "of order 11"),
])
def test_hostile_counts_files_are_one_line(tmp_path, case, message):
    vocab = Vocabulary(WORDS[:5])
    n = len(vocab)
    unigrams = np.arange(n, dtype=np.int32)[:, None]
    bigrams = np.array([[3, 4], [4, 5], [5, 6]], dtype=np.int32)
    ones = [np.ones(n, dtype=np.int64), np.ones(3, dtype=np.int64)]
    grams, counts, kind, order = [unigrams, bigrams], ones, COUNTS_KIND, None
    if case == "unsorted":
        grams = [unigrams, bigrams[::-1].copy()]
    elif case == "repeated":
        grams = [unigrams, bigrams[[0, 0, 1]]]
    elif case == "outside":
        grams = [unigrams, bigrams + n]
    elif case == "zero count":
        counts = [ones[0], np.array([1, 0, 1], dtype=np.int64)]
    elif case == "wrong dtype":
        grams = [unigrams, bigrams.astype(np.int64)]
    elif case == "missing order":
        order = 3
    elif case == "another kind":
        kind = "backoff-ngram"
    elif case == "order":
        order = 11
    hostile(tmp_path / "h.counts", vocab, grams, counts, kind, order)
    status, _, err = nplm("ngram-count", "-read", tmp_path / "h.counts", "-order", "2", "-lm", tmp_path / "m.arpa")
    assert_one_line_error(status, err, "h.counts", message)
    assert not (tmp_path / "m.arpa").exists()


def test_a_corrupt_counts_file_is_refused(parts, tmp_path):
    data = bytearray((parts / "part1.counts").read_bytes())
    data[-100] ^= 0xFF  # inside the last array: its checksum no longer holds
    (tmp_path / "c.counts").write_bytes(bytes(data))
    status, _, err = nplm("ngram-count", "-read", tmp_path / "c.counts", "-order", "4", "-lm", tmp_path / "m.arpa")
    assert_one_line_error(status, err, "c.counts", "checksum mismatch")


def _line_by_line(lines, vocab, missing, longest):
    """What encode_count_lines gives, one line at a time in Python (the reference)."""
    ids, lengths, counts = [], [], []
    for number, line in enumerate(lines):
        fields = line.split()
        if not fields:
            continue
        words, count = fields[:-1], fields[-1]
        digits = count[1:] if count[:1] in ("+", "-") else count
        if (not words or len(words) > MAX_ORDER or any(len(w.encode()) > longest for w in words)
                or not (digits.isascii() and digits.isdigit()) or int(count) < 0 or int(count) >= 2 ** 63):
            return ids, lengths, counts, number
        ids += [vocab.index.get(w, missing) for w in words]
        lengths.append(len(words))
        counts.append(int(count))
    return ids, lengths, counts, -1


@pytest.mark.parametrize("seed", range(4))
def test_count_lines_are_encoded_as_a_line_by_line_reading(seed):
    rng = np.random.default_rng(seed)
    vocab = Vocabulary(WORDS[:40])
    fields = WORDS + ["Ä", "wordwordword", "7", "+3", "-0", "-2", "x1", "9223372036854775807",
                      "9223372036854775808", "1_0", ""]
    lines = []
    for _ in range(300):
        words = list(rng.choice(fields[:62], size=rng.integers(0, 13)))
        count = str(rng.integers(0, 10 ** 6)) if rng.random() < 0.97 else rng.choice(fields[60:])
        lines.append(rng.choice([" ", "\t", "  "]).join(words + [count]) if words or rng.random() < 0.5 else "")
    data = "\n".join(lines).encode()
    ids, lengths, counts, bad = encode_count_lines(data, vocab.encoded_words, -1, MAX_ORDER, 10)
    expected = _line_by_line(lines, vocab, -1, 10)
    assert (ids.tolist(), lengths.tolist(), counts.tolist(), bad) == expected


@pytest.mark.parametrize("seed", range(2))
def test_the_words_of_count_lines_come_once_in_the_order_they_first_come(seed):
    rng = np.random.default_rng(seed)
    lines = [" ".join(list(rng.choice(WORDS + ["Ä", "7"], size=rng.integers(0, 6))) + [str(rng.integers(9))])
             for _ in range(500)] + ["", "  ", "w1"]
    words, bad = count_line_words("\n".join(lines).encode(), 10, [b"w3", b"w7"])
    assert bad == -1
    expected = [w for w in dict.fromkeys(w for line in lines for w in line.split()[:-1]) if w not in ("w3", "w7")]
    assert [w.decode() for w in words] == expected
    assert count_line_words(b"a 1\nb abcdefghijk 2\n", 10, [])[1] == 1


def test_counts_on_stdin_without_a_vocabulary_give_the_files_model(parts, tmp_path):
    status, _, err = nplm("ngram-count", "-text", parts / "all.txt", "-order", "3", "-write", tmp_path / "all.counts")
    assert status == 0, err
    for source in ("file", "stdin"):
        args = ["-read", tmp_path / "all.counts"] if source == "file" else ["-read", "-"]
        with open(tmp_path / "all.counts") as stdin:
            proc = subprocess.run([NPLM, "ngram-count", *map(str, args), "-order", "3", "-lm",
                                   str(tmp_path / f"{source}.arpa")], stdin=stdin, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "file.arpa").read_bytes() == (tmp_path / "stdin.arpa").read_bytes()


def test_text_counts_larger_than_memory_are_read_a_block_at_a_time(parts, tmp_path):
    """A counts file of many blocks at -memory 1M, its lines shuffled and some repeated
    in another block: the model of the counts read at once, summed as SRILM sums them."""
    status, _, err = nplm("ngram-count", "-text", parts / "all.txt", "-order", "4", "-vocab", parts / "vocab.txt",
                          "-unk", "-write", tmp_path / "all.counts")
    assert status == 0, err
    lines = (tmp_path / "all.counts").read_text().splitlines()
    rng = np.random.default_rng(0)
    repeated = lines[::7]
    shuffled = [lines[i] for i in rng.permutation(len(lines))] + repeated
    (tmp_path / "shuffled.counts").write_text("\n".join(shuffled) + "\n")
    assert (tmp_path / "shuffled.counts").stat().st_size > 3 * 65536  # blocks of 64 KiB at -memory 1M
    outputs = {}
    for memory in ("1M", "2G"):
        status, _, err = nplm("ngram-count", "-read", tmp_path / "shuffled.counts", "-order", "4", "-vocab",
                              parts / "vocab.txt", "-unk", "-memory", memory, "-lm", tmp_path / f"{memory}.arpa",
                              "-write", tmp_path / f"{memory}.counts")
        assert status == 0, err
        outputs[memory] = [(tmp_path / f"{memory}.{kind}").read_bytes() for kind in ("arpa", "counts")]
    assert outputs["1M"] == outputs["2G"]
    expected = {}
    for line in shuffled:  # the counts files' words are all in the vocabulary
        *words, count = line.split()
        expected[tuple(words)] = expected.get(tuple(words), 0) + int(count)
    got = {}
    for line in (tmp_path / "1M.counts").read_text().splitlines():
        *words, count = line.split()
        got[tuple(words)] = int(count)
    assert got == expected


def test_a_bad_line_in_a_later_block_names_its_line(tmp_path):
    lines = [f"w{i % 50} w{i % 7}\t{i + 1}" for i in range(40000)] + [f"w{i}\t3" for i in range(50)]
    lines[31234] = "w1 w2\tmany"
    (tmp_path / "bad.counts").write_text("\n".join(lines) + "\n")
    status, _, err = nplm("ngram-count", "-read", tmp_path / "bad.counts", "-memory", "1M", "-order", "2",
                          "-lm", tmp_path / "x.arpa")
    assert_one_line_error(status, err, "bad.counts:31235: count 'many' is not an integer")
    assert not (tmp_path / "x.arpa").exists()
