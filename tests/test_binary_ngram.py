"""Binary back-off models (`-write-bin-lm`, issue 21): the same model as the ARPA file it
came from (the same ARPA back, byte for byte; the same reports), accepted wherever a model
is, and a crafted binary with valid checksums refused in one line before any kernel sees it."""
import glob
import gzip
import json
import os

import numpy as np
import pytest

import nplmtk
from conftest import assert_one_line_error, run_nplm
from nplmtk import container
from nplmtk.ngram.binary import BINARY_KIND, write_binary

DATA = os.path.join(os.path.dirname(__file__), "data", "srilm")
REFERENCE_ARPA = sorted(glob.glob(f"{DATA}/*.arpa.gz"))


@pytest.mark.parametrize("arpa", REFERENCE_ARPA, ids=os.path.basename)
def test_a_binary_model_gives_back_its_arpa_file_byte_for_byte(arpa, tmp_path):
    binary, back = tmp_path / "m.nplm", tmp_path / "back.arpa"
    status, _, err = run_nplm("ppl", "-lm", arpa, "-write-bin-lm", binary)
    assert status == 0, err
    status, _, err = run_nplm("ppl", "-lm", binary, "-write-lm", back)
    assert status == 0, err
    assert back.read_bytes() == gzip.open(arpa).read()


@pytest.mark.parametrize("options", [["-debug", "2"], ["-order", "2", "-debug", "1"], ["-unk-prob", "-5"]])
def test_a_binary_model_reports_as_its_arpa_file(options, tmp_path):
    binary = tmp_path / "kn3.nplm"
    assert run_nplm("ppl", "-lm", f"{DATA}/kn3-unk.arpa.gz", "-write-bin-lm", binary)[0] == 0
    from_arpa = run_nplm("ppl", "-lm", f"{DATA}/kn3-unk.arpa.gz", "-text", "test.txt", *options, cwd=DATA)
    from_binary = run_nplm("ppl", "-lm", binary, "-text", "test.txt", *options, cwd=DATA)
    assert from_arpa[0] == 0, from_arpa[2]
    assert from_binary == from_arpa


def test_ngram_count_writes_the_binary_of_its_arpa_file(tmp_path):
    arpa, binary = tmp_path / "kn3.arpa", tmp_path / "kn3.nplm"
    status, _, err = run_nplm("ngram-count", "-text", f"{DATA}/train.txt", "-order", 3, "-vocab",
                              f"{DATA}/vocab.txt", "-unk", "-lm", arpa, "-write-bin-lm", binary)
    assert status == 0, err
    status, _, err = run_nplm("ppl", "-lm", binary, "-write-lm", tmp_path / "back.arpa")
    assert status == 0, err
    assert (tmp_path / "back.arpa").read_bytes() == arpa.read_bytes()
    assert run_nplm("ppl", "-lm", binary, "-text", "test.txt", "-debug", 2, cwd=DATA) == \
        run_nplm("ppl", "-lm", arpa, "-text", "test.txt", "-debug", 2, cwd=DATA)
    status, _, err = run_nplm("ngram-count", "-text", f"{DATA}/train.txt", "-order", 3, "-deleted-interpolation",
                              "-heldout", f"{DATA}/test.txt", "-write-bin-lm", tmp_path / "di.nplm")
    assert_one_line_error(status, err, "-write-bin-lm writes back-off models of words")
    for command in (["ngram-count", "-text", f"{DATA}/train.txt"], ["ppl", "-lm", arpa]):
        status, _, err = run_nplm(*command, "-write-bin-lm", tmp_path / "m.nplm.gz")
        assert_one_line_error(status, err, "m.nplm.gz: a binary model is memory-mapped, not compressed")


def test_every_tool_takes_a_binary_model_where_it_takes_an_arpa_file(tmp_path):
    binary = tmp_path / "kn3.nplm"
    assert run_nplm("ppl", "-lm", f"{DATA}/kn3-unk.arpa.gz", "-write-bin-lm", binary)[0] == 0
    text = f"{DATA}/test.txt"
    for arpa_args, binary_args in [
            (["ppl", "-lm", f"{DATA}/wb3-unk.arpa.gz", "-mix-lm", f"{DATA}/kn3-unk.arpa.gz", "-text", text],
             ["ppl", "-lm", f"{DATA}/wb3-unk.arpa.gz", "-mix-lm", binary, "-text", text]),
            (["mix", "-lm", f"{DATA}/kn3-unk.arpa.gz", "-lm", f"{DATA}/wb3-unk.arpa.gz", "-text", text],
             ["mix", "-lm", binary, "-lm", f"{DATA}/wb3-unk.arpa.gz", "-text", text]),
            (["generate", "-lm", f"{DATA}/kn3-unk.arpa.gz", "-n", 5, "-seed", 3],
             ["generate", "-lm", binary, "-n", 5, "-seed", 3]),
            (["ppl", "-lm", f"{DATA}/kn3-unk.arpa.gz", "-gen", 5, "-seed", 3],
             ["ppl", "-lm", binary, "-gen", 5, "-seed", 3])]:
        expected = run_nplm(*arpa_args)
        assert expected[0] == 0, expected[2]
        status, out, _ = run_nplm(*binary_args)
        assert (status, out.replace(str(binary), f"{DATA}/kn3-unk.arpa.gz")) == expected[:2]  # mix names its models
    nbest = tmp_path / "list.nbest"
    nbest.write_text("-10 0 3 the cat sat\n-12 0 2 a dog\n")
    expected = run_nplm("rescore", "-lm", f"{DATA}/kn3-unk.arpa.gz", "-nbest", nbest)
    assert expected[0] == 0, expected[2]
    assert run_nplm("rescore", "-lm", binary, "-nbest", nbest)[:2] == expected[:2]
    sentence = "the cat sat on the mat"
    assert nplmtk.load(str(binary)).full_scores(sentence) == \
        nplmtk.load(f"{DATA}/kn3-unk.arpa.gz").full_scores(sentence)


def crafted(tmp_path, change):
    """A binary of a small model with `change(arrays, meta)` applied, saved with valid checksums."""
    model = nplmtk.load(f"{DATA}/kn3-unk.arpa.gz")
    write_binary(model, str(tmp_path / "good.nplm"))
    loaded = container.load(str(tmp_path / "good.nplm"))
    arrays = {name: np.array(array) for name, array in loaded.arrays.items()}
    meta = dict(loaded.meta)
    change(arrays, meta)
    path = tmp_path / "crafted.nplm"
    container.save(str(path), BINARY_KIND, arrays, meta=meta, vocab=None if meta.pop("no_vocab", False) else
                   loaded.vocab)
    return path


def setter(name, value):
    def change(arrays, meta):
        arrays[name] = value(arrays[name])
    return change


def swap_first_keys(keys):
    keys[[0, 1]] = keys[[1, 0]]
    return keys


def set_at(index, value):
    def change(array):
        array[index] = value
        return array
    return change


@pytest.mark.parametrize("change, fragment", [
    (setter("keys.2", lambda a: a.astype(np.int32)), "array 'keys.2' is int32"),
    (setter("logp.1", lambda a: a.astype(np.float64)), "array 'logp.1' is float64"),
    (setter("bow.3", lambda a: a[:-1]), "array 'bow.3' is float32"),
    (setter("node.2", lambda a: a.astype(np.uint8)), "array 'node.2' is uint8"),
    (setter("keys.2", swap_first_keys), "2-gram keys are not increasing"),
    (setter("keys.3", lambda a: np.sort(np.concatenate([a[:1], a[:-1]]))), "3-gram keys are not increasing"),
    (setter("keys.2", lambda a: np.array(7, dtype=np.int64)), "array 'keys.2' has the shape (), not one dimension"),
    (setter("keys.1", set_at(-1, 10 ** 6)), "1-gram keys are not increasing keys of n-grams of its"),
    (setter("keys.3", set_at(-1, 2 ** 62)), "3-gram keys"),
    (setter("keys.2", set_at(0, -5)), "2-gram keys"),
    (setter("logp.2", set_at(4, 0.5)), "array 'logp.2' gives the 2-gram '<unk> (' the log10 probability 0.5: above 0"),
    (setter("logp.3", set_at(0, np.nan)), "array 'logp.3'"),
    (setter("logp.1", set_at(3, -np.inf)), "array 'logp.1'"),
    (setter("bow.1", set_at(5, np.inf)), "array 'bow.1' gives the 1-gram"),
    (lambda arrays, meta: arrays.pop("has_bow.2"), "with no array 'has_bow.2'"),
    (lambda arrays, meta: arrays.update({"keys.4": arrays["keys.3"]}), "an unexpected array 'keys.4'"),
    (lambda arrays, meta: meta.update(order=4), "with no array 'bow.4'"),
    (lambda arrays, meta: meta.update(order=0), "with order 0"),
    (lambda arrays, meta: meta.update(order="3"), "with order '3'"),
    (lambda arrays, meta: meta.update(no_vocab=True), "without a vocabulary"),
])
def test_a_crafted_binary_model_is_refused_in_one_line(tmp_path, change, fragment):
    path = crafted(tmp_path, change)
    status, out, err = run_nplm("ppl", "-lm", path, "-text", f"{DATA}/test.txt")
    assert_one_line_error(status, err, str(path), fragment)
    assert out == ""


def test_the_unchanged_crafted_model_is_accepted(tmp_path):
    """The refusals above come from the changes, not from the crafting."""
    path = crafted(tmp_path, lambda arrays, meta: None)
    expected = run_nplm("ppl", "-lm", f"{DATA}/kn3-unk.arpa.gz", "-text", f"{DATA}/test.txt")
    assert run_nplm("ppl", "-lm", path, "-text", f"{DATA}/test.txt") == expected


def test_children_runs_are_found_and_checked_in_one_pass():
    """The runs of the children of each row of the order below, or None for keys that are
    not increasing, start below 0 or reach past the rows below (what load_binary refuses)."""
    from nplmtk._ext.backoff_kernels import children_runs
    vocab_size = 10
    keys = np.array([3, 7, 21, 25, 29, 40], dtype=np.int64)  # rows 0, 0, 2, 2, 2, 4
    assert children_runs(5, keys, vocab_size).tolist() == [0, 2, 2, 5, 5, 6]
    assert children_runs(3, np.zeros(0, dtype=np.int64), vocab_size).tolist() == [0, 0, 0, 0]
    for bad, parents in [([3, 3, 21], 5), ([7, 3, 21], 5), ([-1, 3, 21], 5), ([3, 7, 50], 5), ([3, 7, 21], 2)]:
        assert children_runs(parents, np.array(bad, dtype=np.int64), vocab_size) is None, bad


def test_children_runs_of_a_large_order():
    """300,000 keys: the same runs as a binary search of every row's first key, and None
    when one key repeats the one before it, wherever that is."""
    from nplmtk._ext.backoff_kernels import children_runs
    rng = np.random.default_rng(3)
    vocab_size, parents = 50, 40000
    keys = np.unique(rng.integers(0, parents * vocab_size, size=300000)).astype(np.int64)
    expected = np.searchsorted(keys, np.arange(parents + 1) * vocab_size)
    assert np.array_equal(children_runs(parents, keys, vocab_size), expected)
    for at in (len(keys) // 2, len(keys) // 4, len(keys) - 1):
        bad = keys.copy()
        bad[at] = bad[at - 1]
        assert children_runs(parents, bad, vocab_size) is None, at


def test_children_runs_at_the_edges_of_rows():
    """Each key's row comes from a float product: keys one below, at and one past a row's
    first key, rows up to 10^6 of a 14,119-word vocabulary, and keys past 2^53 (rows by
    integer division) find the runs a binary search finds."""
    from nplmtk._ext.backoff_kernels import children_runs
    for vocab_size, parents, rows in [(14119, 10 ** 6, np.arange(1, 10 ** 6, 997)), (2 ** 50 + 3, 40, np.arange(1, 40))]:
        keys = np.unique(np.concatenate([rows * vocab_size - 1, rows * vocab_size, rows * vocab_size + 1]))
        expected = np.searchsorted(keys, np.arange(parents + 1, dtype=np.int64) * vocab_size)
        assert np.array_equal(children_runs(parents, keys.astype(np.int64), vocab_size), expected), vocab_size


def _nodes_by_definition(grams, has_bow):
    """SRILM's context trie from the n-grams' words: every n-gram with a weight or with longer
    n-grams, then, from the longest contexts down, each one's suffix (the highest order's
    n-grams pass no context on)."""
    order, present = len(grams), [{tuple(row): i for i, row in enumerate(g.tolist())} for g in grams]
    node = [np.array(h, dtype=bool) for h in has_bow]
    for j in range(order - 1):
        for row in grams[j + 1].tolist():
            node[j][present[j][tuple(row[:-1])]] = True
    for j in range(order - 2, 0, -1):
        for i in np.flatnonzero(node[j]):
            suffix = present[j - 1].get(tuple(grams[j][i].tolist()[1:]))
            if suffix is not None:
                node[j - 1][suffix] = True
    return node


@pytest.mark.parametrize("order, seed", [(2, 0), (3, 1), (4, 2), (5, 3), (5, 4)])
def test_context_nodes_are_the_context_trie(order, seed):
    """Sparse random tables (suffixes often missing, as in pruned models), more rows than
    one chunk of the kernel: its marks are the trie's, whatever the threads' turns."""
    from nplmtk._ext.backoff_kernels import children_runs, context_nodes
    from nplmtk.ngram.index import NgramIndex
    rng = np.random.default_rng(seed)
    vocab_size = 60
    grams = [np.arange(vocab_size, dtype=np.int32)[:, None]]
    for k in range(2, order + 1):  # each k-gram extends a (k-1)-gram: its prefix is there
        parents = grams[-1][rng.integers(0, len(grams[-1]), 90000)]
        rows = np.hstack([parents, rng.integers(0, vocab_size, (len(parents), 1)).astype(np.int32)])
        grams.append(np.unique(rows, axis=0))
    has_bow = [rng.random(len(g)) < 0.2 for g in grams[:-1]] + [np.zeros(len(grams[-1]), dtype=bool)]
    keys = NgramIndex(vocab_size, grams).keys
    children = [children_runs(len(keys[j]), keys[j + 1], vocab_size) for j in range(order - 1)]
    found = context_nodes(keys, has_bow, children, vocab_size)
    expected = _nodes_by_definition(grams, has_bow)
    assert order < 4 or len(grams[-2]) > 1 << 16
    for j in range(order):
        np.testing.assert_array_equal(found[j], expected[j], err_msg=f"order {j + 1}")


@pytest.mark.parametrize("table", ["keys.3", "logp.2", "node.3"])
def test_a_damaged_table_is_refused_in_one_line(tmp_path, table):
    """One flipped bit in a table's bytes, its values still plausible: the checksum finds it."""
    path = tmp_path / "kn3.nplm"
    write_binary(nplmtk.load(f"{DATA}/kn3-unk.arpa.gz"), str(path))
    data = bytearray(path.read_bytes())
    _, _, length, _ = container._PREAMBLE.unpack(data[:container._PREAMBLE.size])
    header = json.loads(data[container._PREAMBLE.size:container._PREAMBLE.size + length])
    entry = next(e for e in header["arrays"] if e["name"] == table)
    data[entry["offset"] + entry["nbytes"] // 2] ^= 1
    path.write_bytes(bytes(data))
    status, out, err = run_nplm("ppl", "-lm", path, "-text", f"{DATA}/test.txt")
    assert_one_line_error(status, err, str(path), f"array '{table}' checksum mismatch")
    assert out == ""



def test_sentences_scored_by_several_threads_score_as_one_window_at_a_time():
    """score_sentences shares a long text's sentences among OpenMP threads (each with its
    own buffers): every score and order as score_rows gives them, row by row."""
    from nplmtk.corpus import Corpus
    model = nplmtk.load(f"{DATA}/kn3-unk.arpa.gz")
    with open(f"{DATA}/test.txt", encoding="utf-8") as f:
        lines = [line for line in f.read().splitlines() if line.strip()]
    corpus = Corpus.from_lines((lines * (2000 // len(lines) + 1))[::-1], model.vocab)
    assert corpus.num_sentences >= 2000
    scores, orders = model.tables.score_sentences(corpus.ids, corpus.offsets, model.vocab.bos, model.vocab.eos)
    by_rows, row_orders = model.score_rows(corpus.windows(model.order), with_order=True)
    assert np.array_equal(scores, by_rows) and np.array_equal(orders, row_orders)
