import gzip
import io
import sys

import numpy as np
import pytest

from nplmtk.corpus import OOV, Corpus
from nplmtk.errors import InputError, NplmError
from nplmtk.vocab import Vocabulary


@pytest.fixture
def vocab():
    return Vocabulary(["the", "cat", "sat"])


def reference_windows(corpus, order):
    rows = []
    for s in range(corpus.num_sentences):
        padded = [corpus.vocab.bos] * (order - 1) + list(corpus.sentence(s)) + [corpus.vocab.eos]
        rows += [padded[j:j + order] for j in range(len(padded) - order + 1)]
    return np.array(rows, dtype=np.int32).reshape(-1, order)


def test_encoding_maps_unknown_words_to_unk_or_marks_them(vocab):
    lines = ["the cat sat", "", "the dog sat on", "<s> cat </s>"]
    closed = Corpus.from_lines(lines, vocab, unk=True)
    assert closed.offsets.tolist() == [0, 3, 7, 8]
    assert closed.ids.tolist() == [3, 4, 5, 3, 0, 5, 0, 4]
    open_ = Corpus.from_lines(lines, vocab, unk=False)
    assert open_.ids.tolist() == [3, 4, 5, 3, OOV, 5, OOV, 4]
    assert open_.num_oovs == 2 and open_.num_words == 8 and open_.num_sentences == 3


@pytest.mark.parametrize("order", [1, 2, 3, 5])
def test_windows_match_padded_sentences(vocab, order):
    rng = np.random.default_rng(0)
    lines = [" ".join(rng.choice(["the", "cat", "sat", "dog"], size=n)) for n in rng.integers(1, 9, 200)]
    corpus = Corpus.from_lines(lines, vocab)
    windows = corpus.windows(order)
    assert windows.shape == (corpus.num_words + corpus.num_sentences, order)
    np.testing.assert_array_equal(windows, reference_windows(corpus, order))


def test_reads_gzip_and_stdin(vocab, tmp_path, monkeypatch):
    with gzip.open(tmp_path / "t.txt.gz", "wt") as f:
        f.write("the cat\nsat\n")
    from_gzip = Corpus.read(str(tmp_path / "t.txt.gz"), vocab)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"the cat\nsat\n")))
    from_stdin = Corpus.read("-", vocab)
    assert from_gzip.ids.tolist() == from_stdin.ids.tolist() == [3, 4, 5]


@pytest.mark.parametrize("content, message", [
    (b"", "empty corpus"),
    (b"  \n\n", "empty corpus"),
    (b"the cat\nsat \xe9t\xe9\n", ":2: invalid UTF-8"),
    (b"\x1f\x8bnot really gzip", "corrupt gzip data"),
])
def test_bad_corpora(vocab, tmp_path, content, message):
    path = tmp_path / "bad.txt"
    path.write_bytes(content)
    with pytest.raises(InputError, match=message) as caught:
        Corpus.read(str(path), vocab)
    assert caught.value.path == str(path)


def test_missing_file_and_directory(vocab, tmp_path):
    with pytest.raises(NplmError, match="no such file"):
        Corpus.read(str(tmp_path / "nope.txt"), vocab)
    with pytest.raises(NplmError, match="is a directory"):
        Corpus.read(str(tmp_path), vocab)


def test_sentence_totals_are_the_reports_sums_in_order(vocab):
    """The kernel's totals equal SRILM's way of counting, done word by word in Python: -inf
    is an OOV at <unk>, else a zeroprob (</s> included), and adds nothing to the sum."""
    from nplmtk._ext.corpus_kernels import sentence_totals
    corpus = Corpus.from_lines(["the cat zebra sat", "zebra", "the the the cat"], vocab)
    targets = corpus.targets()
    log10 = np.random.default_rng(0).uniform(-6, 0, len(targets))
    log10[[1, 2, 4, 5, 6, 11]] = -np.inf  # cat, zebra (<unk>), </s>; zebra (<unk>), </s>; </s>
    logprob, oovs, zeroprobs, total = sentence_totals(log10, corpus.ids, corpus.offsets, vocab.unk)
    bounds = corpus.offsets + np.arange(len(corpus.offsets))
    for s, (first, last) in enumerate(zip(bounds, bounds[1:])):
        values = log10[first:last].tolist()
        expected = 0.0
        for value in values:
            expected += value if value != -np.inf else 0.0
        assert logprob[s] == expected
        assert oovs[s] == sum(v == -np.inf and w == vocab.unk for v, w in zip(values, targets[first:last]))
        assert zeroprobs[s] == sum(v == -np.inf and w != vocab.unk for v, w in zip(values, targets[first:last]))
    assert (oovs.tolist(), zeroprobs.tolist()) == ([1, 1, 0], [2, 1, 1])
    assert total == (logprob[0] + logprob[1]) + logprob[2]
    with pytest.raises(ValueError, match="scores for"):
        sentence_totals(log10[:-1], corpus.ids, corpus.offsets, vocab.unk)
