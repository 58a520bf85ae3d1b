"""Scoring a word at a time (issue 48, nplmtk/incremental.py): for every kind of model the
steps from the sentence-start state add up to what `full_scores` gives the whole sentence,
the batched form equals the single steps, and a back-off model's states are equal exactly
when the model's future predictions are; KenLM's spelling of the same calls."""
import copy
import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nplmtk
from nplmtk.cache import ContinuousCache, UnigramCache, with_cache
from nplmtk.corpus import Corpus
from nplmtk.errors import ParameterError
from nplmtk.mixture import ContextBins, Mixture
from nplmtk.models import ARCHITECTURES
from nplmtk.ngram.classes import ClassNgramModel, WordClasses
from nplmtk.ngram.counts import NgramCounts
from nplmtk.ngram.deleted_interpolation import DeletedInterpolation
from nplmtk.ngram.estimate import estimate
from nplmtk.toy import ToyGrammar
from nplmtk.vocab import Vocabulary, sentence_tokens

GRAMMAR = ToyGrammar()
VOCAB = Vocabulary(GRAMMAR.words)
LINES = [" ".join(s) for s in GRAMMAR.sentences(800, 1)]
CORPUS = Corpus.from_lines(LINES, VOCAB)


def random_sentences(count, seed, longest=12):
    """Sentences of random words of the vocabulary (and some it lacks), not the grammar's:
    contexts the model never saw as well as those it did."""
    rng = random.Random(seed)
    words = VOCAB.words[3:] + ["zyzzyva", "<unk>"]
    sentences = [rng.choice(LINES) for _ in range(count // 2)]
    sentences += [" ".join(rng.choice(words) for _ in range(rng.randint(0, longest))) for _ in range(count - count // 2)]
    return sentences


def stepped(model, sentence):
    """log10 p of each word of `sentence` and of </s>, one score_word at a time."""
    state, scores = model.begin_state(), []
    for word in sentence_tokens(sentence) + ["</s>"]:
        score, state = model.score_word(state, word)
        scores.append(score)
    return scores


def batched(model, sentences):
    """The same, every sentence's next word scored in one score_words call per position."""
    tokens = [sentence_tokens(s) + ["</s>"] for s in sentences]
    states = [model.begin_state() for _ in sentences]
    scores = [[] for _ in sentences]
    for position in range(max(len(t) for t in tokens)):
        live = [i for i, t in enumerate(tokens) if position < len(t)]
        logp, after = model.score_words([states[i] for i in live], [tokens[i][position] for i in live])
        for i, score, state in zip(live, logp.tolist(), after):
            scores[i].append(score)
            states[i] = state
    return scores


def check_steps_add_up(model, exact=True, count=40, seed=1):
    sentences = random_sentences(count, seed)
    together = batched(model, sentences)
    for sentence, in_batch in zip(sentences, together):
        whole = [score for score, _, _ in model.full_scores(sentence)]
        one_by_one = stepped(model, sentence)
        if exact:
            assert one_by_one == whole, sentence
            assert in_batch == whole, sentence
        else:  # a network's products differ in their last bits with the batch's shape
            np.testing.assert_allclose(one_by_one, whole, rtol=2e-5, atol=1e-6, err_msg=sentence)
            np.testing.assert_allclose(in_batch, whole, rtol=2e-5, atol=1e-6, err_msg=sentence)
        assert sum(one_by_one) == pytest.approx(model.score(sentence), rel=1e-5, abs=1e-5)


@pytest.fixture(scope="module")
def kn(request):
    return {order: estimate(NgramCounts.from_corpus(CORPUS, order)) for order in (1, 2, 3, 5)}


@pytest.mark.parametrize("order", [1, 2, 3, 5])
def test_backoff_steps_equal_whole_sentences(kn, order):
    check_steps_add_up(kn[order])


def test_backoff_steps_with_cutoffs_and_from_files(kn, tmp_path):
    """Cutoffs leave n-grams whose suffixes are gone (SRILM's walk over them); the ARPA and
    binary files score as the estimate."""
    counts = NgramCounts.from_corpus(CORPUS, 4)
    cut = estimate(counts, min_counts=[1, 1, 2, 3])
    check_steps_add_up(cut)
    from nplmtk.ngram.arpa import write_arpa
    from nplmtk.ngram.binary import write_binary
    write_arpa(cut, str(tmp_path / "cut.arpa"))
    write_binary(cut, str(tmp_path / "cut.nplm"))
    for name in ("cut.arpa", "cut.nplm"):
        check_steps_add_up(nplmtk.load(str(tmp_path / name)))


def test_backoff_states_are_equal_exactly_when_futures_are(kn):
    """Histories whose states are equal predict alike, now and after more words; and a state
    holds no word it could do without: with its oldest word dropped, some prediction changes
    within two words. (Two different states may still predict alike by the numbers, as the
    toy grammar's `happy birds` and `white birds` do; KenLM's states differ there too.)"""
    model = kn[3]
    rng = random.Random(5)
    histories = [s.split()[:rng.randint(0, 6)] for s in random_sentences(300, 7)]
    by_state = {}
    for history in histories:
        state = model.begin_state()
        for word in history:
            _, state = model.score_word(state, word)
        by_state.setdefault(state, []).append(history)
    assert 10 < len(by_state) < len(histories)  # some merge, some do not
    probes = [[], ["the"], ["</s>"], [VOCAB.words[5]], [VOCAB.words[9], VOCAB.words[4]]]

    def future(state):
        signature = []
        for probe in probes:
            for word in probe:
                _, state = model.score_word(state, word)
            signature.append(model.score_words([state] * len(VOCAB), np.arange(len(VOCAB)))[0].tolist())
        return signature

    for state, members in by_state.items():
        assert len(state) <= model.order - 1
        predicted = future(state)
        for history in members:  # every history of a state predicts as the state does
            context = [VOCAB.id(w) for w in history]
            np.testing.assert_array_equal(np.log10(model.next_distribution(context)).astype(np.float32),
                                          np.array(predicted[0], dtype=np.float32))
            stepped_state = model.begin_state()
            for word in history + ["the"]:
                _, stepped_state = model.score_word(stepped_state, word)
            np.testing.assert_array_equal(np.log10(model.next_distribution(context + [VOCAB.id("the")])).astype(
                np.float32), np.array(model.score_words([stepped_state] * len(VOCAB), np.arange(len(VOCAB)))[0],
                                      dtype=np.float32))
        if state:
            assert future(state[1:]) != predicted, state


def test_backoff_states_are_kenlms(kn):
    """A state is the context cut to what the model can use: no longer than order - 1 words,
    hashable, and copied by reference."""
    model = kn[5]
    state = model.begin_state()
    assert state == (VOCAB.bos,)
    assert model.null_state() == ()
    for word in "the cat saw a dog".split():
        _, state = model.score_word(state, word)
        assert isinstance(state, tuple) and len(state) <= 4
        hash(state)
    _, after_unknown = model.score_word(state, "zyzzyva")  # <unk> is no context of the toy model
    assert after_unknown == ()


def test_class_model_steps(tmp_path):
    classes = WordClasses({w: f"C{i % 4}" for i, w in enumerate(VOCAB.words[3:])},
                          {w: 1.0 / len(VOCAB.words[3 + i % 4::4]) for i, w in enumerate(VOCAB.words[3:])})
    tokens = [" ".join(classes.replace(s.split())) for s in LINES]
    token_vocab = Vocabulary(sorted(set(" ".join(tokens).split())))
    token_model = estimate(NgramCounts.from_corpus(Corpus.from_lines(tokens, token_vocab), 3))
    model = ClassNgramModel(token_model, classes)
    check_steps_add_up(model)


def test_deleted_interpolation_steps():
    model = DeletedInterpolation.train(CORPUS)
    model.fit_weights(Corpus.from_lines(LINES[:100], VOCAB))
    check_steps_add_up(model)
    assert model.null_state() == (-1, -1)


NETWORKS = [("mlp", {"order": 3, "features": 4, "hidden": 5}),
            ("mlp", {"order": 4, "features": 4, "hidden": 5, "output": "class", "counts": None}),
            ("energy", {"order": 3, "features": 4, "hidden": 5}),
            ("lbl", {"order": 3, "features": 4}),
            ("lbl3", {"order": 3, "features": 4, "hidden": 5}),
            ("rnn", {"features": 4, "hidden": 5}),
            ("lstm", {"features": 4, "hidden": 5, "layers": 2}),
            ("lstm", {"features": 6, "hidden": 5, "direct": True}),
            ("rnn", {"features": 4, "hidden": 5, "output": "class", "counts": None}),
            ("lstm", {"features": 4, "hidden": 5, "output": "hs", "counts": None})]


def network(arch, shape):
    counts = np.bincount(CORPUS.targets(), minlength=len(VOCAB)) + 1
    shape = {**shape, "counts": counts} if "counts" in shape else shape
    return ARCHITECTURES[arch].initial(VOCAB, seed=3, **shape)


@pytest.mark.parametrize("arch,shape", NETWORKS, ids=[f"{a}-{i}" for i, (a, _) in enumerate(NETWORKS)])
def test_network_steps(arch, shape):
    model = network(arch, shape)
    check_steps_add_up(model, exact=False, count=16)
    state = model.begin_state()
    _, after = model.score_word(state, "the")
    assert after == model.score_word(state, "the")[1] and hash(after) == hash(model.score_word(state, "the")[1])
    assert after != state


def test_mixtures_and_caches(kn):
    lstm = network("lstm", {"features": 4, "hidden": 5})
    mixture = Mixture([kn[3], lstm, kn[2]], [0.5, 0.3, 0.2], ["kn3", "lstm", "kn2"])
    check_steps_add_up(mixture, exact=False, count=16)
    binned = Mixture([kn[3], kn[2]], [0.6, 0.4], ["kn3", "kn2"])
    binned.use_bins(CORPUS, Corpus.from_lines(LINES[:200], VOCAB), 3)
    binned.weights = np.array([[0.9, 0.1], [0.5, 0.5], [0.2, 0.8]])[:binned.num_bins]
    binned.weights /= binned.weights.sum(axis=1, keepdims=True)
    check_steps_add_up(binned)
    assert binned.begin_state()[1] == (VOCAB.bos, VOCAB.bos)
    check_steps_add_up(with_cache(kn[3], "kn3", 5, 0.2, unk_is_word=True))
    check_steps_add_up(with_cache(kn[3], "kn3", 5, 0.2, unk_is_word=False))
    check_steps_add_up(ContinuousCache(lstm, 4, 0.5, 0.3), exact=False, count=16)


WORDS = VOCAB.words[3:] + ["zyzzyva", "<unk>", "</s>"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(words=st.lists(st.sampled_from(WORDS), max_size=14), order=st.sampled_from([2, 3, 5]))
def test_any_sentence_steps_as_it_scores(kn, words, order):
    """hypothesis's sentences of any words, </s> and unknown words among them."""
    model = kn[order]
    sentence = " ".join(words)
    whole = [score for score, _, _ in model.full_scores(sentence)]
    assert stepped(model, sentence) == whole
    assert batched(model, [sentence, "the cat", sentence])[2] == whole


def test_the_generic_way_for_a_model_of_anyones():
    """A model that only scores whole sentences still steps, its state the sentence so far."""
    kn3 = estimate(NgramCounts.from_corpus(CORPUS, 3))

    class Wrapped(type(kn3).__mro__[-2]):  # LanguageModel itself
        vocab = VOCAB

        def log10probs(self, corpus):
            return kn3.log10probs(corpus)

    model = Wrapped()
    check_steps_add_up(model)
    state = model.begin_state()
    _, state = model.score_word(state, "the")
    assert state == (VOCAB.index["the"],)


def test_kenlms_spelling(kn):
    """Code written for kenlm.Model, with kenlm.State replaced by nplmtk.State."""
    model = kn[3]
    start, out = nplmtk.State(), nplmtk.State()
    model.BeginSentenceWrite(start)
    total, state = 0.0, start
    for word in "the cat saw a dog </s>".split():
        out = nplmtk.State()
        total += model.BaseScore(state, word, out)
        state = out
    assert total == pytest.approx(model.score("the cat saw a dog"), abs=1e-6)
    null = nplmtk.State()
    model.NullContextWrite(null)
    assert model.BaseScore(null, "the", nplmtk.State()) == model.score_word((), "the")[0]
    assert copy.copy(start) == start and copy.deepcopy(start) == start and hash(copy.copy(start)) == hash(start)
    assert start != null and len({start, copy.copy(start), null}) == 2
    assert model.order == 3 and "the" in model and "zyzzyva" not in model
    with pytest.raises(ParameterError, match="in_state"):
        model.BaseScore(nplmtk.State(), "the", nplmtk.State())


def test_bad_states_and_words_are_refused(kn):
    model = kn[3]
    with pytest.raises(ParameterError, match="words"):
        model.score_words([model.begin_state()], [len(VOCAB) + 5])
    with pytest.raises(ParameterError, match="states"):
        model.score_words([model.begin_state()], ["a", "b"])
    with pytest.raises(ParameterError):
        model.score_words([(1, 2, 3, 4)], ["the"])  # longer than order - 1
    mlp = network("mlp", {"order": 3, "features": 4, "hidden": 5})
    with pytest.raises(ParameterError, match="state"):
        mlp.score_words([(1,)], ["the"])
    with pytest.raises(ParameterError, match="state"):
        mlp.score_words([(1, 10 ** 6)], ["the"])
    lstm = network("lstm", {"features": 4, "hidden": 5})
    with pytest.raises(ParameterError, match="state"):
        lstm.score_words([(1, 2)], ["the"])
