import numpy as np
import pytest

from nplmtk.corpus import Corpus
from nplmtk.models import load
from nplmtk.ngram.deleted_interpolation import DeletedInterpolation
from nplmtk.toy import ToyGrammar
from nplmtk.vocab import Vocabulary


@pytest.fixture(scope="module")
def corpora():
    grammar = ToyGrammar()
    vocab = Vocabulary(grammar.words[:-6])  # a few words stay out of the vocabulary
    lines = [[" ".join(s) for s in grammar.sentences(n, seed)] for n, seed in ((2000, 1), (400, 2), (300, 3))]
    return vocab, lines


@pytest.mark.parametrize("unk", [True, False])
def test_em_never_lowers_heldout_likelihood_and_weights_sum_to_one(corpora, unk):
    vocab, (train, heldout, _) = corpora
    model = DeletedInterpolation.train(Corpus.from_lines(train, vocab, unk=unk), unk_is_word=unk)
    history = model.fit_weights(Corpus.from_lines(heldout, vocab, unk=unk), iterations=8)
    assert all(b >= a - 1e-9 for a, b in zip(history, history[1:]))
    np.testing.assert_allclose(model.weights.sum(axis=1), 1.0)
    assert np.all(model.weights >= 0)


def test_probabilities_sum_to_one_over_the_vocabulary(corpora):
    vocab, (train, heldout, _) = corpora
    for unk in (True, False):
        model = DeletedInterpolation.train(Corpus.from_lines(train, vocab, unk=unk), unk_is_word=unk)
        model.fit_weights(Corpus.from_lines(heldout, vocab, unk=unk))
        targets = np.arange(len(vocab))
        for a, b in [(vocab.bos, vocab.bos), (vocab.index["the"], vocab.index["cat"]), (vocab.unk, vocab.index["is"])]:
            windows = np.stack([np.full_like(targets, a), np.full_like(targets, b), targets], axis=1)
            p, bins = model.components(windows)
            probs = (model.weights[bins] * p).sum(axis=1)
            probs[vocab.bos] = 0
            assert abs(probs.sum() - 1) < 1e-9


def test_save_and_load_give_identical_scores(corpora, tmp_path):
    vocab, (train, heldout, test) = corpora
    model = DeletedInterpolation.train(Corpus.from_lines(train, vocab), unk_is_word=True)
    model.fit_weights(Corpus.from_lines(heldout, vocab))
    model.save(str(tmp_path / "di.nplm"))
    loaded = load(str(tmp_path / "di.nplm"))
    corpus = Corpus.from_lines(test, vocab)
    np.testing.assert_array_equal(loaded.logprobs(corpus), model.logprobs(corpus))
    assert np.all(np.isfinite(model.logprobs(corpus)))
