"""A network as a back-off n-gram model (issue 37, item 2): the batched sampler of `nplm
generate` (distribution, seeds, batches), the variational approximation (Deoras et al. 2011),
the network's own probabilities for the n-grams (Arisoy et al. 2014), pruning to an entry
budget, and `nplm convert-lm`."""
import numpy as np
import pytest

from conftest import assert_one_line_error, run_main
from nplmtk.convert import (MAX_SENTENCE_WORDS, entries, fitted_weight, network_probabilities, prune_to_entries,
                            variational_model)
from nplmtk.corpus import Corpus
from nplmtk.generate import sample_sentences, sampled_ids, uniforms
from nplmtk.lm import LanguageModel
from nplmtk.models import ARCHITECTURES, load
from nplmtk.ngram.counts import NgramCounts
from nplmtk.ngram.estimate import estimate, prune
from nplmtk.toy import ToyGrammar
from nplmtk.vocab import Vocabulary


@pytest.fixture(scope="module")
def toy():
    grammar = ToyGrammar()
    vocab = Vocabulary(grammar.words)
    lines = [" ".join(s) for s in grammar.sentences(1500, 1)]
    corpus = Corpus.from_lines(lines, vocab)
    counts = np.bincount(corpus.ids, minlength=len(vocab)).astype(np.float64) + 1
    return vocab, lines, corpus, counts


def lstm(vocab, counts, output="class", seed=3):
    return ARCHITECTURES["lstm"].initial(vocab, features=6, hidden=6, seed=seed, output=output, counts=counts,
                                         classes=4 if output == "class" else None)


def network(arch, vocab, counts, output):
    if arch == "lstm":
        return lstm(vocab, counts, output)
    return ARCHITECTURES["mlp"].initial(vocab, order=3, features=4, hidden=5, seed=2, output=output, counts=counts,
                                        classes=4 if output == "class" else None, direct=output == "full")


def assert_frequencies_follow(drawn, p, draws):
    """Pearson's chi-square of the drawn words against p (words expected 5 times or more
    pooled with the rest), below its mean + 6 standard deviations (about p < 1e-6)."""
    observed = np.bincount(drawn, minlength=len(p)).astype(np.float64)
    expected = p / p.sum() * draws
    big = expected >= 5
    observed = np.append(observed[big], observed[~big].sum())
    expected = np.append(expected[big], expected[~big].sum())
    keep = expected > 0
    chi2 = (((observed - expected) ** 2)[keep] / expected[keep]).sum()
    freedom = keep.sum() - 1
    assert chi2 < freedom + 6 * np.sqrt(2 * freedom), (chi2, freedom)


@pytest.mark.parametrize("arch, output", [("lstm", "class"), ("lstm", "full"), ("mlp", "class"), ("mlp", "full")])
def test_sampled_words_follow_the_network(toy, arch, output):
    """Class then word (class output) or word (full softmax; the MLP's with direct
    connections), over batched streams: the first word, and the word after a prefix, drawn
    as often as next_distribution says."""
    vocab, _, _, counts = toy
    model = network(arch, vocab, counts, output)
    draws = 6000
    for prefix, history in (("", []), ("the cat", [vocab.index["the"], vocab.index["cat"]])):
        words = [s[-1] for s in sampled_ids(model, draws, seed=11, prefix=prefix, max_words=len(history) + 1)
                 if len(s) > len(history)]
        eos = draws - len(words)
        p = model.next_distribution(history)
        p[vocab.bos] = 0
        assert_frequencies_follow(np.append(words, [vocab.eos] * eos).astype(np.int64), p, draws)


def test_sampling_at_a_temperature_follows_the_powers(toy):
    vocab, _, _, counts = toy
    model = lstm(vocab, counts)
    draws = 6000
    first = [s[0] if s else vocab.eos for s in sampled_ids(model, draws, seed=2, temperature=0.5, max_words=1)]
    p = model.next_distribution([])
    p[vocab.bos] = 0
    assert_frequencies_follow(np.array(first), p ** 2, draws)


@pytest.mark.parametrize("arch", ["lstm", "mlp"])
def test_the_seed_decides_whatever_the_batch(toy, arch):
    """Sentence i is a function of the seed and i: the same for any batch and any count."""
    vocab, _, _, counts = toy
    model = network(arch, vocab, counts, "class")
    sentences = list(sample_sentences(model, 40, seed=7, batch=1))
    assert list(sample_sentences(model, 40, seed=7, batch=9)) == sentences
    assert list(sample_sentences(model, 40, seed=7)) == sentences
    assert list(sample_sentences(model, 5, seed=7, batch=3)) == sentences[:5]
    assert list(sample_sentences(model, 40, seed=8)) != sentences
    prefixed = list(sample_sentences(model, 10, seed=7, prefix="the dog", batch=4))
    assert all(s[:2] == ["the", "dog"] for s in prefixed)
    assert list(sample_sentences(model, 10, seed=7, prefix="the dog", batch=1)) == prefixed
    capped = list(sample_sentences(model, 30, seed=7, max_words=3, batch=5))
    assert all(len(s) <= 3 for s in capped) and any(len(s) == 3 for s in capped)


@pytest.mark.parametrize("arch", ["lstm", "mlp"])
def test_a_network_samples_as_its_distribution_through_history_streams(toy, arch):
    """At a temperature the streams give each stream's whole distribution, the same draws
    as the one-stream path through next_distribution (the default for any model)."""
    vocab, _, _, counts = toy
    model = network(arch, vocab, counts, "class")
    streams = model.sampling_streams(3, [vocab.index["the"]])
    generic = LanguageModel.sampling_streams(model, 3, [vocab.index["the"]])
    np.testing.assert_allclose(streams.distributions(np.arange(3)),
                               np.repeat(generic.distributions(np.arange(1)), 3, axis=0), rtol=1e-5, atol=1e-9)
    assert (list(sample_sentences(model, 8, seed=4, temperature=0.7, batch=4))
            == list(sample_sentences(model, 8, seed=4, temperature=0.7, batch=1)))


def test_the_numbers_are_uniform_and_counter_based():
    u = uniforms(5, np.arange(2000), np.zeros(2000, dtype=np.int64), 2)
    assert u.shape == (2000, 2) and 0 <= u.min() and u.max() < 1
    assert abs(u.mean() - 0.5) < 0.02 and abs(np.corrcoef(u[:, 0], u[:, 1])[0, 1]) < 0.1
    np.testing.assert_array_equal(uniforms(5, [17], [1], 1)[0, 0], u[17, 1])  # draw 1 of sentence 17


def contexts_sum_to_one(model):
    """Every context of the model (each n-gram below the highest order, and the empty one):
    its next-word distribution sums to one."""
    vocab = model.vocab
    histories = [[]] + [list(g) for k in range(model.order - 1) for g in model.grams[k]
                        if vocab.eos not in g and (g[0] == vocab.bos or vocab.bos not in g)]
    for history in histories:
        if history and history[0] == vocab.bos:
            history = history[1:]
        total = model.next_distribution(history).sum()
        assert abs(total - 1) < 1e-4, (history, total)
    return len(histories)


def test_the_variational_model_is_kneser_ney_of_the_sampled_text(toy, tmp_path):
    vocab, _, _, counts = toy
    model = lstm(vocab, counts)
    converted = variational_model(model, 3000, 3, str(tmp_path), seed=5, batch=64)
    lines, words = [], 0
    for s in sample_sentences(model, 10 ** 6, seed=5, max_words=MAX_SENTENCE_WORDS):
        lines.append(" ".join(s))
        words += len(s)
        if words >= 3000:
            break
    expected = estimate(NgramCounts.from_corpus(Corpus.from_lines(lines, vocab), 3), unk_is_word=True)
    assert [len(g) for g in converted.grams] == [len(g) for g in expected.grams]
    for ours, theirs in zip(converted.logp, expected.logp):
        np.testing.assert_array_equal(ours, theirs)
    assert contexts_sum_to_one(converted) > 100


def test_the_rewrite_gives_a_feed_forward_network_its_own_probabilities(toy):
    """Arisoy et al. 2014 with a trigram MLP and a KN3 of the toy text: every trigram, and
    every bigram after <s>, holds the network's log10 p exactly; every context sums to one."""
    vocab, _, corpus, _ = toy
    kn3 = estimate(NgramCounts.from_corpus(corpus, 3), unk_is_word=True)
    mlp = ARCHITECTURES["mlp"].initial(vocab, order=3, features=4, hidden=5, seed=2)
    rewritten = network_probabilities(kn3, mlp)
    rows = rewritten.grams[2]
    network = np.array([np.log10(mlp.next_distribution([w for w in row[:2] if w != vocab.bos])[row[2]])
                        for row in rows[:300]])
    np.testing.assert_allclose(rewritten.logp[2][:300], network, rtol=1e-5)
    starts = rewritten.grams[1][:, 0] == vocab.bos
    p = mlp.next_distribution([])
    np.testing.assert_allclose(rewritten.logp[1][starts], np.log10(p[rewritten.grams[1][starts, 1]]), rtol=1e-5)
    np.testing.assert_array_equal(rewritten.logp[0], kn3.logp[0])
    assert contexts_sum_to_one(rewritten) > 100


def test_the_rewrite_reads_a_recurrent_network_from_sentence_starts(toy, monkeypatch):
    """Each context read from <s> (a trie of states, level by level, 7 streams at a time)."""
    monkeypatch.setattr("nplmtk.neural.recurrent.NGRAM_STREAMS", 7)
    vocab, _, corpus, counts = toy
    kn3 = estimate(NgramCounts.from_corpus(corpus, 3), unk_is_word=True)
    model = lstm(vocab, counts)
    rewritten = network_probabilities(kn3, model)
    for row, logp in list(zip(rewritten.grams[2], rewritten.logp[2]))[::50]:
        history = [w for w in row[:2] if w != vocab.bos] if row[0] == vocab.bos else list(row[:2])
        assert abs(logp - np.log10(model.next_distribution(history)[row[2]])) < 1e-5
    contexts_sum_to_one(rewritten)


def test_pruning_to_an_entry_budget(toy):
    vocab, _, corpus, _ = toy
    kn3 = estimate(NgramCounts.from_corpus(corpus, 3), unk_is_word=True)
    budget = entries(kn3) * 2 // 3
    pruned, threshold = prune_to_entries(kn3, budget)
    assert 0.99 * budget <= entries(pruned) <= budget
    assert [len(g) for g in pruned.grams] == [len(g) for g in prune(kn3, threshold).grams]
    assert prune_to_entries(kn3, entries(kn3)) == (kn3, 0.0)


def test_the_em_weight_prefers_the_better_model(toy):
    vocab, lines, corpus, _ = toy
    kn3 = estimate(NgramCounts.from_corpus(corpus, 3), unk_is_word=True)
    uniform = estimate(NgramCounts.from_corpus(Corpus.from_lines(lines[:3], vocab), 1), unk_is_word=True)
    heldout = Corpus.from_lines(lines[-100:], vocab)
    assert 0.9 < fitted_weight(kn3, uniform, heldout) <= 1


def test_convert_lm_end_to_end(toy, tmp_path, capsys):
    """Sample, estimate, merge with a KN2 (weight by EM), prune to a budget: an ARPA file
    whose ppl SRILM's reader gives back as nplm's; the sampled text as generate draws it."""
    vocab, lines, corpus, counts = toy
    (tmp_path / "train.txt").write_text("\n".join(lines[:1000]) + "\n")
    (tmp_path / "valid.txt").write_text("\n".join(lines[1000:]) + "\n")
    model = lstm(vocab, counts)
    model.save(str(tmp_path / "lstm.nplm"))
    assert run_main(capsys, "ngram-count", "-text", tmp_path / "train.txt", "-order", 2, "-unk",
                    "-lm", tmp_path / "kn2.arpa")[0] == 0
    status, _, err = run_main(capsys, "convert-lm", "-lm", tmp_path / "lstm.nplm", "-order", 3, "-sample-words", 2000,
                              "-seed", 4, "-write-text", tmp_path / "s.txt", "-mix-lm", tmp_path / "kn2.arpa",
                              "-heldout", tmp_path / "valid.txt", "-prune-to-entries", 1500,
                              "-write-lm", tmp_path / "out.arpa")
    assert status == 0, err
    assert "-lambda" in err and "n-grams" in err
    converted = load(str(tmp_path / "out.arpa"))
    assert entries(converted) <= 1500
    contexts_sum_to_one(converted)
    status, _, err = run_main(capsys, "ppl", "-lm", tmp_path / "kn2.arpa", "-prune-to-entries", 400,
                              "-write-lm", tmp_path / "kn2-400.arpa")
    assert status == 0 and "-prune-to-entries 400: -prune " in err, err
    assert 396 <= entries(load(str(tmp_path / "kn2-400.arpa"))) <= 400
    assert_one_line_error(*run_main(capsys, "ppl", "-lm", tmp_path / "kn2.arpa", "-prune", "1e-7",
                                    "-prune-to-entries", 400, "-write-lm", tmp_path / "x.arpa")[::2],
                          "choose one of -prune and -prune-to-entries")
    sampled = (tmp_path / "s.txt").read_text().splitlines()
    assert sampled == [" ".join(s) for s in sample_sentences(model, len(sampled), seed=4,
                                                              max_words=MAX_SENTENCE_WORDS)]
    assert sum(len(s.split()) for s in sampled[:-1]) < 2000 <= sum(len(s.split()) for s in sampled)


@pytest.mark.parametrize("args, message", [
    (["-write-lm", "{out}"], "-sample-words 0: nothing to estimate"),
    (["-ngrams", "{kn2}", "-write-lm", "{out}"], "-ngrams names the n-grams that -rewrite rewrites"),
    ([], "nothing to do"),
    (["-heldout", "{kn2}", "-write-lm", "{out}"], "-lambda and -heldout weight the merge with -mix-lm"),
    (["-mix-lm", "{lstm}", "-write-lm", "{out}"], "-mix-lm takes a back-off n-gram model"),
    (["-rewrite", "-ngrams", "{missing}", "-write-lm", "{out}"], "missing.arpa"),
    (["-rewrite", "-ngrams", "{kn2}", "-order", "3", "-write-lm", "{out}"], "-ngrams MODEL keeps its own"),
    (["-prune", "1e-7", "-prune-to-entries", "10", "-write-lm", "{out}"],
     "choose one of -prune and -prune-to-entries"),
])
def test_bad_conversions_are_one_line(toy, tmp_path, capsys, args, message):
    vocab, lines, _, counts = toy
    lstm(vocab, counts).save(str(tmp_path / "lstm.nplm"))
    (tmp_path / "train.txt").write_text("\n".join(lines[:50]) + "\n")
    assert run_main(capsys, "ngram-count", "-text", tmp_path / "train.txt", "-order", 2,
                    "-lm", tmp_path / "kn2.arpa")[0] == 0
    names = {"out": tmp_path / "out.arpa", "kn2": tmp_path / "kn2.arpa", "lstm": tmp_path / "lstm.nplm",
             "missing": tmp_path / "missing.arpa"}
    extra = ["-sample-words", 0] if message.startswith("-sample-words 0") else []
    status, _, err = run_main(capsys, "convert-lm", "-lm", tmp_path / "lstm.nplm",
                              *extra, *[str(a).format(**names) for a in args])
    assert_one_line_error(status, err, message)


def test_convert_lm_rewrites_a_models_ngrams(toy, tmp_path, capsys):
    """-ngrams MODEL -rewrite from the command line: a bigram MLP's own probabilities for a
    KN2's bigrams (exact: the window is the bigram), whatever order the ARPA file lists the
    words in."""
    vocab, lines, _, _ = toy
    (tmp_path / "train.txt").write_text("\n".join(lines[:300]) + "\n")
    mlp = ARCHITECTURES["mlp"].initial(vocab, order=2, features=4, hidden=5, seed=2)
    mlp.save(str(tmp_path / "mlp.nplm"))
    assert run_main(capsys, "ngram-count", "-text", tmp_path / "train.txt", "-order", 2, "-unk",
                    "-lm", tmp_path / "kn2.arpa")[0] == 0
    status, _, err = run_main(capsys, "convert-lm", "-lm", tmp_path / "mlp.nplm", "-ngrams", tmp_path / "kn2.arpa",
                              "-rewrite", "-write-lm", tmp_path / "out.arpa")
    assert status == 0, err
    rewritten = load(str(tmp_path / "out.arpa"))
    for (h, w), logp in zip(rewritten.grams[1], rewritten.logp[1]):
        history = [] if h == rewritten.vocab.bos else [vocab.index[rewritten.vocab.words[h]]]
        expected = np.log10(mlp.next_distribution(history)[vocab.index[rewritten.vocab.words[w]]])
        assert abs(logp - expected) < 1e-5
    contexts_sum_to_one(rewritten)


def test_rewriting_with_an_ngram_model_names_its_kind(toy, tmp_path, capsys):
    """The message said 'a arpa model'."""
    _, lines, _, _ = toy
    (tmp_path / "train.txt").write_text("\n".join(lines[:50]) + "\n")
    assert run_main(capsys, "ngram-count", "-text", tmp_path / "train.txt", "-order", 2,
                    "-lm", tmp_path / "kn2.arpa")[0] == 0
    status, _, err = run_main(capsys, "convert-lm", "-lm", tmp_path / "kn2.arpa", "-rewrite", "-ngrams",
                              tmp_path / "kn2.arpa", "-write-lm", tmp_path / "out.arpa")
    assert_one_line_error(status, err, "a back-off n-gram model does not score single n-grams (a network does)")
    # without -ngrams the rewrite would follow 10M sampled words: refused before them
    status, _, err = run_main(capsys, "convert-lm", "-lm", tmp_path / "kn2.arpa", "-rewrite",
                              "-write-lm", tmp_path / "out.arpa")
    assert_one_line_error(status, err, "a back-off n-gram model does not score single n-grams (a network does)")
