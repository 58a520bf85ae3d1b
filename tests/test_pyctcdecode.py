"""nplm models inside pyctcdecode's beam search (issue 48, nplmtk/integrations/pyctcdecode.py):
with the same ARPA file, the beams over nplm's model equal those over KenLM's own module,
text and scores; a binary model and a network decode through the same adapter."""
import numpy as np
import pytest

import nplmtk
from conftest import toy_decoder_models
from nplmtk.models import ARCHITECTURES
from nplmtk.ngram.binary import write_binary

pyctcdecode = pytest.importorskip("pyctcdecode")
kenlm = pytest.importorskip("kenlm")
from nplmtk.integrations.pyctcdecode import LanguageModel  # noqa: E402 (needs pyctcdecode)

BLANK = ""


def emissions(sentence, labels, rng, confusion=0.35, frames_per_char=2):
    """Per-frame natural-log probabilities over `labels` (the blank first) for `sentence`:
    each character held for a few frames then a blank, the right label's share drawn around
    1 - confusion, the rest spread at random (a noisy acoustic model)."""
    index = {label: i for i, label in enumerate(labels)}
    path = []
    for char in sentence:
        path += [index[char]] * frames_per_char + [0]
    logits = rng.dirichlet(np.full(len(labels), 0.3), size=len(path)) * confusion
    logits[np.arange(len(path)), path] += 1 - confusion
    return np.log(logits / logits.sum(axis=1, keepdims=True))


@pytest.fixture(scope="module")
def toy_lm(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ctc")
    vocab, sentences = toy_decoder_models(folder)
    write_binary(nplmtk.load(str(folder / "kn3.arpa")), str(folder / "kn3.nplm"))
    labels = [BLANK] + sorted(set((folder / "train.txt").read_text() + "".join(sentences)) - {" ", "\n"}) + [" "]
    return folder, vocab, sentences, labels


def beams(decoder, logits):
    """(text, logit score, lm score) of each beam, to the digits pyctcdecode's users print."""
    return [(text, round(logit, 4), round(lm, 4))
            for text, _, _, logit, lm in decoder.decode_beams(logits, beam_width=16)]


@pytest.mark.parametrize("order,boundary", [(3, True), (5, True), (3, False)])
def test_beams_equal_those_over_kenlms_module(toy_lm, order, boundary):
    folder, vocab, sentences, labels = toy_lm
    arpa = str(folder / f"kn{order}.arpa")
    unigrams = [w for w in vocab.words[3:]]
    settings = dict(unigrams=unigrams, alpha=0.5, beta=1.0, unk_score_offset=-10.0, score_boundary=boundary)
    alphabet = pyctcdecode.Alphabet.build_alphabet(labels)
    theirs = pyctcdecode.BeamSearchDecoderCTC(alphabet, pyctcdecode.LanguageModel(kenlm.Model(arpa), **settings))
    ours = pyctcdecode.BeamSearchDecoderCTC(alphabet, LanguageModel(nplmtk.load(arpa), **settings))
    rng = np.random.default_rng(order)
    differ_from_no_lm = 0
    plain = pyctcdecode.BeamSearchDecoderCTC(alphabet)
    for sentence in sentences:
        logits = emissions(sentence, labels, rng)
        expected = beams(theirs, logits)
        assert beams(ours, logits) == expected, sentence
        differ_from_no_lm += plain.decode(logits, beam_width=16) != expected[0][0]
    assert differ_from_no_lm  # the language model changes some decodes


def test_binary_models_and_networks_decode(toy_lm):
    folder, vocab, sentences, labels = toy_lm
    alphabet = pyctcdecode.Alphabet.build_alphabet(labels)
    settings = dict(unigrams=vocab.words[3:], alpha=0.5, beta=1.0)
    arpa = pyctcdecode.BeamSearchDecoderCTC(alphabet, LanguageModel(nplmtk.load(str(folder / "kn3.arpa")), **settings))
    binary = pyctcdecode.BeamSearchDecoderCTC(alphabet,
                                              LanguageModel(nplmtk.load(str(folder / "kn3.nplm")), **settings))
    lstm = ARCHITECTURES["lstm"].initial(vocab, features=6, hidden=8, seed=2)
    network = LanguageModel(lstm, **settings)
    assert network.order > 1000  # the whole history: pyctcdecode merges no beams early
    recurrent = pyctcdecode.BeamSearchDecoderCTC(alphabet, network)
    rng = np.random.default_rng(7)
    for sentence in sentences[:4]:
        logits = emissions(sentence, labels, rng)
        assert beams(binary, logits) == beams(arpa, logits)
        text, state, _, _, lm_score = recurrent.decode_beams(logits, beam_width=8)[0]
        assert text and np.isfinite(lm_score)
