"""Kneser-Ney estimation checked against Chen & Goodman's formulas computed here, plus
normalisation, counts files, ARPA round trips and the KenLM cross-check."""
import math
import os
import time
from collections import Counter

import numpy as np
import pytest

from nplmtk.corpus import Corpus
from nplmtk.ngram.arpa import read_arpa, write_arpa
from nplmtk.ngram.count_runs import CountAccumulator
from nplmtk.ngram.counts import NgramCounts
from nplmtk.ngram.estimate import estimate
from nplmtk.toy import ToyGrammar
from nplmtk.vocab import Vocabulary, count_words

DATA = os.path.join(os.path.dirname(__file__), "data", "srilm")


@pytest.fixture(scope="module")
def sentences():
    with open(f"{DATA}/train.txt", encoding="utf-8") as f:
        return [line.split() for line in f if line.split()]


def build(lines, order=3, unk=False, **kwargs):
    vocab = Vocabulary.from_counts(Counter(w for s in lines for w in s))
    corpus = Corpus.from_lines([" ".join(s) for s in lines], vocab)
    return estimate(NgramCounts.from_corpus(corpus, order), unk_is_word=unk, **kwargs), vocab


def kneser_ney_reference(lines):
    """Interpolated modified Kneser-Ney trigram (Chen & Goodman 1998, sec. 3.5 and eq. 26)
    written from the paper with dictionaries: returns p(w | u, v) for any words."""
    counts = {k: Counter() for k in (1, 2, 3)}
    for words in lines:
        padded = ["<s>"] + words + ["</s>"]
        for k in (1, 2, 3):
            for i in range(len(padded) - k + 1):
                counts[k][tuple(padded[i:i + k])] += 1
    adjusted = {3: counts[3]}
    for k in (2, 1):  # continuation counts N1+(. x), except n-grams starting with <s>
        preceders = Counter(y[1:] for y in counts[k + 1])
        adjusted[k] = {x: c if x[0] == "<s>" else preceders[x] for x, c in counts[k].items()}
    discounts = {}
    for k in (1, 2, 3):
        n = Counter(c for x, c in adjusted[k].items() if x[-1] != "<s>")
        y = n[1] / (n[1] + 2 * n[2])
        discounts[k] = (0.0, 1 - 2 * y * n[2] / n[1], 2 - 3 * y * n[3] / n[2], 3 - 4 * y * n[4] / n[3])
    predictable = sorted({x[0] for x in counts[1]} - {"<s>"})

    def distribution(k, context):
        seen = {x[-1]: c for x, c in adjusted[k].items() if x[:-1] == context and x[-1] != "<s>"}
        total = sum(seen.values())
        d = discounts[k]
        gamma = sum(d[min(c, 3)] for c in seen.values()) / total if total else 1.0
        return seen, total, gamma

    tables = {}

    def prob(k, context, word):
        if k == 0:
            return 1.0 / len(predictable)
        key = (k, context)
        if key not in tables:
            tables[key] = distribution(k, context)
        seen, total, gamma = tables[key]
        if not total:
            return prob(k - 1, context[1:], word)
        d = discounts[k]
        own = (seen[word] - d[min(seen[word], 3)]) / total if word in seen else 0.0
        return own + gamma * prob(k - 1, context[1:], word)

    return lambda u, v, w: prob(3, (u, v), w), predictable


def test_kneser_ney_matches_chen_goodman_formulas(sentences):
    model, vocab = build(sentences)
    reference, predictable = kneser_ney_reference(sentences)
    rng = np.random.default_rng(0)
    seen = sorted({tuple((["<s>"] + s + ["</s>"])[i:i + 3]) for s in sentences for i in range(len(s))})
    picks = [seen[i] for i in rng.choice(len(seen), 300, replace=False)]
    picks += [tuple(rng.choice(predictable, 3)) for _ in range(300)]  # mostly unseen: back-off path
    rows = np.array([[vocab.index[w] for w in trigram] for trigram in picks], dtype=np.int32)
    ours = model.score_rows(rows).astype(np.float64)
    expected = np.log10([reference(*trigram) for trigram in picks])
    np.testing.assert_allclose(ours, expected, atol=2e-6)


def test_every_context_sums_to_one(sentences):
    for unk in (False, True):
        model, vocab = build(sentences, unk=unk)
        contexts = [[vocab.bos], [vocab.index["The"]], [vocab.index["of"], vocab.index["the"]],
                    [vocab.index["said"], vocab.index["."]], [vocab.unk, vocab.unk], []]
        for history in contexts:
            dist = model.next_distribution(history)
            assert dist[vocab.bos] == 0
            assert abs(dist.sum() - 1) < 1e-5, history


def test_degenerate_counts_fall_back_to_fixed_discounts():
    lines = [s.split() for s in ["the cat sat", "a dog ran", "the dog sat down"]] * 40
    warnings = []
    model, vocab = build(lines, order=4, warn=warnings.append)
    assert any("fallback discounts 0.5 1.0 1.5" in w for w in warnings)
    for history in ([vocab.index["the"]], [vocab.index["the"], vocab.index["dog"]]):
        assert abs(model.next_distribution(history).sum() - 1) < 1e-5


def test_counts_of_parts_merge_to_the_counts_of_the_whole(sentences, tmp_path):
    vocab = Vocabulary.from_counts(Counter(w for s in sentences for w in s))
    whole = NgramCounts.from_corpus(Corpus.from_lines([" ".join(s) for s in sentences], vocab), 4)
    halves = [NgramCounts.from_corpus(Corpus.from_lines([" ".join(s) for s in part], vocab), 4)
              for part in (sentences[:100], sentences[100:])]
    halves[1].write(str(tmp_path / "half.counts.gz"))
    accumulator = CountAccumulator(vocab, 4, 1 << 20, str(tmp_path))
    accumulator.add_counts(halves[0])
    accumulator.add_counts(NgramCounts.read(str(tmp_path / "half.counts.gz"), vocab))
    merged = accumulator.result()
    for k in range(4):
        np.testing.assert_array_equal(merged.grams[k], whole.grams[k])
        np.testing.assert_array_equal(merged.counts[k], whole.counts[k])


def test_arpa_round_trip_is_exact(sentences, tmp_path):
    model, vocab = build(sentences)
    write_arpa(model, str(tmp_path / "a.arpa.gz"))
    again = read_arpa(str(tmp_path / "a.arpa.gz"))
    write_arpa(again, str(tmp_path / "b.arpa"))
    import gzip
    assert gzip.open(tmp_path / "a.arpa.gz").read() == open(tmp_path / "b.arpa", "rb").read()
    corpus = Corpus.from_lines([" ".join(s) for s in sentences[:50]], again.vocab)
    original = Corpus.from_lines([" ".join(s) for s in sentences[:50]], vocab)
    # 7 printed digits do not round-trip every float32: agreement to the printed digit.
    np.testing.assert_allclose(again.log10probs(corpus), model.log10probs(original), atol=1e-6)


def test_kenlm_scores_our_arpa_files_like_we_do(tmp_path):
    kenlm = pytest.importorskip("kenlm")
    grammar = ToyGrammar()
    train = [" ".join(s) for s in grammar.sentences(3000, seed=11)]
    test = [" ".join(s) for s in grammar.sentences(200, seed=12)] + ["the zebra is walking in the igloo"]
    (tmp_path / "train.txt").write_text("\n".join(train) + "\n")
    vocab = Vocabulary.from_counts(count_words([str(tmp_path / "train.txt")]), min_count=3)
    for order in (2, 3, 5):
        counts = NgramCounts.from_corpus(Corpus.from_lines(train, vocab), order)
        path = str(tmp_path / f"toy{order}.arpa")
        write_arpa(estimate(counts, unk_is_word=True), path)
        ours = read_arpa(path)
        corpus = Corpus.from_lines(test, ours.vocab)
        log10 = ours.log10probs(corpus)
        bounds = corpus.offsets + np.arange(len(corpus.offsets))
        theirs = kenlm.Model(path)
        for s, sentence in enumerate(test):
            assert abs(theirs.score(sentence, bos=True, eos=True) - log10[bounds[s]:bounds[s + 1]].sum()) < 1e-4


def test_always_interpolate_differs_only_where_srilm_stops_interpolating(sentences):
    # "y !!" is always followed by </s>, and so is "!!" after 1500 other words: the
    # context "y !!" leaves no mass; SRILM stops interpolating there, KenLM does not.
    lines = sentences + [["y", "!!"]] * 3000 + [[f"w{i}", "!!"] for i in range(1500)]
    srilm, vocab = build(lines, unk=True)
    kenlm_like, _ = build(lines, unk=True, always_interpolate=True)
    changed = 0
    for k in range(3):
        np.testing.assert_array_equal(srilm.grams[k], kenlm_like.grams[k])
        changed += int(np.count_nonzero(srilm.logp[k] != kenlm_like.logp[k]))
    assert 0 < changed < 0.05 * sum(len(g) for g in srilm.grams)
    for history in ([vocab.index["!!"]], [vocab.index["y"], vocab.index["!!"]]):
        assert abs(kenlm_like.next_distribution(history).sum() - 1) < 1e-5


def test_reads_kenlm_arpa_files_and_scores_as_kenlm_query_does():
    kenlm_dir = os.path.join(os.path.dirname(__file__), "data", "kenlm")
    model = read_arpa(f"{kenlm_dir}/lmplz3.arpa.gz")
    with open(f"{DATA}/test.txt", encoding="utf-8") as f:
        lines = f.read().splitlines()[:40]
    corpus = Corpus.from_lines(lines, model.vocab)
    log10 = model.log10probs(corpus)
    bounds = corpus.offsets + np.arange(len(corpus.offsets))
    totals = [log10[bounds[s]:bounds[s + 1]].sum() for s in range(corpus.num_sentences)]
    with open(f"{kenlm_dir}/query-sentence-totals.txt") as f:
        expected = [float(x) for x in f.read().split()]
    np.testing.assert_allclose(totals, expected, atol=1e-4)


def test_a_large_section_is_formatted_in_two_pieces_that_join_to_the_one_text():
    from nplmtk._ext.arpa_format import format_section
    from nplmtk.ngram.word_slots import WordSlots
    rng = np.random.default_rng(3)
    # words in their slots (up to 15 bytes) and past them (16 and more)
    words = [f"w{i}" * (i % 3 + 1) for i in range(50)] + ["ü", "</s>", "x" * 15, "y" * 16, "é" * 20]
    table = WordSlots(words)
    rows = 150_001
    grams = rng.integers(0, len(words), size=(rows, 3)).astype(np.int32)
    logp = rng.uniform(-7, 0, rows).astype(np.float32)
    logp[::1000] = -np.inf
    bow = rng.uniform(-2, 1, rows).astype(np.float32)
    has_bow = (rng.random(rows) < 0.5).astype(np.uint8)
    pieces = format_section(grams, logp, bow, has_bow, np.arange(rows), table)
    assert len(pieces) == 2
    halves = [b"".join(format_section(grams[s], logp[s], bow[s], has_bow[s], np.arange(len(grams[s])), table))
              for s in (slice(0, 75_000), slice(75_000, None))]  # below the size formatted in two
    assert b"".join(pieces) == halves[0] + halves[1]
    # rows taken in an order: the same text as the rows gathered in that order
    order = rng.permutation(rows)
    assert b"".join(format_section(grams, logp, bow, has_bow, order, table)) == b"".join(
        format_section(grams[order], logp[order], bow[order], has_bow[order], np.arange(rows), table))
    lines = b"".join(pieces).decode().split("\n")
    assert len(lines) == rows + 1 and lines[0].split("\t")[1] == " ".join(words[w] for w in grams[0])
    # records' fields read where they are: no order, the weights' NaN bits in place of has_bow, no weights
    from nplmtk._ext.arpa_format import NO_WEIGHT
    records = np.empty(rows, dtype=[("key", "<i8"), ("logp", "<f4"), ("bow", "<u4"), ("grams", "<i4", (3,))])
    records["logp"], records["grams"] = logp, grams
    records["bow"] = np.where(has_bow, bow.view(np.uint32), np.uint32(NO_WEIGHT))
    strided = format_section(records["grams"], records["logp"], records["bow"].view(np.float32), None, None, table)
    assert b"".join(strided) == b"".join(pieces)
    unweighted = format_section(records["grams"], records["logp"], None, None, None, table)
    assert b"".join(unweighted) == b"".join(format_section(grams, logp, bow, np.zeros(rows, dtype=np.uint8),
                                                           np.arange(rows), table))
    with pytest.raises(ValueError, match="differ in rows"):
        format_section(grams, logp[:-1], bow, has_bow, None, table)


def test_lines_longer_than_the_room_guessed_for_them_are_written_whole():
    """The room for a section's text is guessed from the vocabulary's mean word length and
    grown where a part runs out: here a tenth of the rows hold a word of 3,000 bytes."""
    from nplmtk._ext.arpa_format import format_section, format_values
    from nplmtk.ngram.word_slots import WordSlots
    rng = np.random.default_rng(5)
    words = [f"a{i}" for i in range(1000)] + ["ß" * 1500, "z" * 15]
    rows = 120_000
    grams = rng.integers(0, len(words), size=(rows, 3)).astype(np.int32)
    grams[::10] = len(words) - 2
    logp = rng.uniform(-7, 0, rows).astype(np.float32)
    bow = rng.uniform(-2, 1, rows).astype(np.float32)
    has_bow = (rng.random(rows) < 0.5).astype(np.uint8)
    pieces = format_section(grams, logp, bow, has_bow, None, WordSlots(words))
    assert len(pieces) == 2
    printed_logp, printed_bow = format_values(logp), format_values(bow)
    expected = "".join(f"{printed_logp[i]}\t{' '.join(words[w] for w in grams[i])}"
                       + (f"\t{printed_bow[i]}" if has_bow[i] else "") + "\n" for i in range(rows))
    assert b"".join(pieces).decode() == expected


def test_the_counters_suffixes_are_the_rows_that_lookups_find(sentences):
    from nplmtk.ngram.estimate import _full_unigrams, suffix_positions
    # words of the vocabulary that never occur: the unigram table is filled in first
    vocab = Vocabulary.from_counts(Counter([w for s in sentences for w in s] + ["never", "seen"]))
    counts = _full_unigrams(NgramCounts.from_corpus(Corpus.from_lines([" ".join(s) for s in sentences], vocab), 4))
    looked_up = suffix_positions(NgramCounts(counts.vocab, counts.grams, counts.counts))
    assert counts.suffix is not None and len(counts.suffix) == len(looked_up) == 4
    for kept, found in zip(counts.suffix[1:], looked_up[1:]):
        np.testing.assert_array_equal(kept, found)


def test_srilm_order_is_by_the_context_read_backwards_then_the_word():
    from nplmtk._ext.ngram_sorting import srilm_order
    from nplmtk.ngram.counts import byte_ranks
    from nplmtk.ngram.index import NgramIndex
    rng = np.random.default_rng(5)
    words = [f"w{rng.integers(1000)}x{i}" for i in range(40)]  # ids not in byte order
    rank = byte_ranks(words)
    grams = [np.arange(len(words), dtype=np.int32)[:, None]]
    for k in (2, 3, 4):
        rows = np.unique(np.hstack([grams[-1][rng.integers(len(grams[-1]), size=3000)],
                                    rng.integers(len(words), size=(3000, 1), dtype=np.int32)]), axis=0)
        grams.append(rows)
    index = NgramIndex(len(words), grams)
    reversed_places = None
    for k, rows in enumerate(grams, 1):
        order, reversed_places = srilm_order(index.keys[k - 1], len(words), rank, reversed_places, k < 4)
        expected = np.lexsort([rank[rows[:, -1]]] + [rank[rows[:, j]] for j in range(k - 1)])  # last key first
        np.testing.assert_array_equal(order, expected)


def test_an_arpa_write_that_fails_raises_in_the_caller(sentences):
    from nplmtk.ngram.arpa import _write_arpa_to
    model, _ = build(sentences)

    class Full:
        def write(self, data):
            raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left"):
        _write_arpa_to(model, Full())


def test_arpa_values_are_printed_as_printf_prints_them_at_every_exponent():
    """format_g7 (ARPA values as %.7g) against printf on floats of every exponent."""
    from nplmtk._ext.arpa_format import format_values
    rng = np.random.default_rng(7)
    bits = (rng.integers(0, 1 << 23, 200_000) | (rng.integers(0, 255, 200_000) << 23)
            | (rng.integers(0, 2, 200_000) << 31)).astype(np.uint32)
    values = bits.view(np.float32)
    assert format_values(values) == ["-99" if np.isneginf(v) else "%.7g" % float(v) for v in values]


def test_an_arpa_write_that_fails_gives_up_what_waits_and_its_thread():
    """A signal's exception in the writing block: the pieces still queued are not written
    and the writing thread ends (waiting on the queue after such an exception once hung
    ngram-count -memory for good)."""
    from nplmtk.ngram.arpa import _BackgroundWriter

    class SlowFile:
        def __init__(self):
            self.pieces = []

        def write(self, piece):
            time.sleep(0.3)
            self.pieces.append(piece)

    out = SlowFile()
    writer = _BackgroundWriter(out)
    with pytest.raises(KeyboardInterrupt):
        with writer as write:
            for piece in (b"a", b"b", b"c", b"d"):
                write(piece)
            raise KeyboardInterrupt
    assert not writer.thread.is_alive()
    assert out.pieces in ([b"a"], [b"a", b"b"])


def test_the_estimates_context_sums_are_numpys_to_the_bit():
    """The kernels that sum rows per context give np.bincount's values bit for bit (its
    order of additions), NaN and inf included, and refuse a context out of range."""
    from nplmtk._ext.estimate_kernels import context_counts, context_sums, interpolated_probabilities
    rng = np.random.default_rng(11)
    rows, size = 50_000, 9_000
    group = np.sort(rng.integers(0, size, rows))
    count = rng.zipf(1.6, rows).astype(np.int64) - rng.integers(0, 2, rows)  # some 0 counts
    eligible = rng.random(rows) < 0.9
    values = rng.random(rows) * 10.0 ** rng.integers(-12, 3, rows)
    values[::997], values[5::1999] = np.nan, np.inf

    def per_context(weights):
        return np.bincount(group, weights=weights, minlength=size)

    def same(a, b):
        np.testing.assert_array_equal(a.view(np.uint64), b.view(np.uint64))

    same(context_sums(values, eligible.view(np.uint8), group, size), per_context(np.where(eligible, values, 0.0)))
    same(context_sums(values, None, group, size), per_context(values))
    counts = context_counts(count, eligible.view(np.uint8), group, size)
    for got, want in zip(counts, (np.where(eligible, count, 0), eligible, eligible & (count >= 2),
                                  eligible & (count >= 3))):
        same(got, per_context(want))
    factor = rng.random(rows)
    factor[::7] = 0
    lower = rng.random(rows)
    denominator = counts[0].copy()  # contexts with no eligible rows: 0 / 0
    gamma, interpolating = rng.random(size), rng.random(size) < 0.7
    counted = eligible & (factor != 0)
    prob, total = interpolated_probabilities(factor, count, lower, group, denominator, gamma,
                                             interpolating.view(np.uint8), counted.view(np.uint8))
    with np.errstate(divide="ignore", invalid="ignore"):
        want = factor * count / denominator[group]
    want = np.where(interpolating[group], want + gamma[group] * lower, want)
    same(prob, want)
    same(total, per_context(np.where(counted, want, 0.0)))
    with pytest.raises(ValueError, match="outside 0..8999"):
        context_sums(values, None, np.where(np.arange(rows) == 7, size, group), size)
    with pytest.raises(ValueError, match="outside"):
        context_counts(count, eligible.view(np.uint8), np.where(np.arange(rows) == 3, -1, group), size)
    with pytest.raises(ValueError, match=f"group {size} of row 9 outside"):
        interpolated_probabilities(factor, count, lower, np.where(np.arange(rows) == 9, size, group), denominator,
                                   gamma, interpolating.view(np.uint8), counted.view(np.uint8))


def test_word_slots_hold_each_short_word_and_its_length_across_blocks(monkeypatch):
    from nplmtk.ngram import word_slots
    monkeypatch.setattr(word_slots, "BLOCK_WORDS", 3)  # blocks that end inside the list
    words = ["a", "ü", "x" * 15, "y" * 16, "</s>", "é" * 9, "b", "zz"]
    table = word_slots.WordSlots(words)
    for w, word in enumerate(words):
        encoded = word.encode()
        assert bytes(table.data[table.start[w]:table.start[w + 1]]) == encoded
        if len(encoded) < 16:
            assert table.slots[w, -1] == len(encoded)
            assert bytes(table.slots[w, :len(encoded)]) == encoded and not table.slots[w, len(encoded):-1].any()
        else:
            assert table.slots[w, -1] == word_slots.LONG_WORD
    assert table.longest == 18  # "é" * 9
