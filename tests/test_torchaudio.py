"""nplm models inside torchaudio's CTC beam search (issue 48, nplmtk/integrations/torchaudio.py):
with the same ARPA file, the hypotheses through nplm's adapter equal those of torchaudio's
built-in KenLM (`ctc_decoder(lm=path)`), words and scores; a network decodes through the
same adapter. Not part of `make test`: torch and torchaudio are several GB."""
import numpy as np
import pytest

import nplmtk
from conftest import toy_decoder_models
from nplmtk.errors import ParameterError
from nplmtk.models import ARCHITECTURES

torch = pytest.importorskip("torch")
decoder_module = pytest.importorskip("torchaudio.models.decoder")
from nplmtk.integrations.torchaudio import LanguageModel  # noqa: E402 (needs torchaudio)

BLANK, SILENCE = "-", "|"  # ctc_decoder's defaults; the silence token ends a word


def probabilities(sentence, tokens, rng, confusion=0.5, frames_per_char=2):
    """(frames, tokens) probabilities for `sentence` (words apart by the silence token):
    each character held for a few frames then a blank, the right token's share drawn
    around 1 - confusion, the rest spread at random (a noisy acoustic model), as
    tests/test_pyctcdecode.py makes them."""
    index = {token: i for i, token in enumerate(tokens)}
    path = []
    for char in sentence.replace(" ", SILENCE) + SILENCE:
        path += [index[char]] * frames_per_char + [index[BLANK]]
    probs = rng.dirichlet(np.full(len(tokens), 0.3), size=len(path)) * confusion
    probs[np.arange(len(path)), path] += 1 - confusion
    return probs / probs.sum(axis=1, keepdims=True)


def emissions(probs):
    """The decoder's input: (1, frames, tokens) float32 natural-log probabilities."""
    return torch.from_numpy(np.log(probs).astype(np.float32))[None]


@pytest.fixture(scope="module")
def toy_lm(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ctc")
    vocab, sentences = toy_decoder_models(folder)
    # the lexicon: the model's words and those of the test sentences (some outside the
    # model's vocabulary, which both language models score as <unk>)
    words = sorted(set(vocab.words[3:]) | set(" ".join(sentences).split()))
    (folder / "lexicon.txt").write_text("".join(f"{w}\t{' '.join(w)} {SILENCE}\n" for w in words))
    tokens = [BLANK, SILENCE] + sorted(set("".join(words)))
    return folder, vocab, sentences, tokens


def hypotheses(decoder, logits):
    """(words, score) of each hypothesis, the score to the digits torchaudio's users print."""
    return [(tuple(h.words), round(h.score, 4)) for h in decoder(logits)[0]]


@pytest.mark.parametrize("order", [3, 5])
def test_hypotheses_equal_those_over_the_built_in_kenlm(toy_lm, order):
    folder, vocab, sentences, tokens = toy_lm
    arpa, lexicon = str(folder / f"kn{order}.arpa"), str(folder / "lexicon.txt")
    settings = dict(lexicon=lexicon, tokens=tokens, nbest=5, beam_size=16, lm_weight=2.0, word_score=-0.5)
    theirs = decoder_module.ctc_decoder(lm=arpa, **settings)
    ours = decoder_module.ctc_decoder(lm=LanguageModel(nplmtk.load(arpa), lexicon=lexicon), **settings)
    plain = decoder_module.ctc_decoder(lm=None, **settings)
    rng = np.random.default_rng(order)
    for sentence in sentences:
        logits = emissions(probabilities(sentence, tokens, rng))
        assert hypotheses(ours, logits) == hypotheses(theirs, logits), sentence
    # sounds between "is" and "in", leaning to "in": the decoder without a language
    # model hears "in", with either language model the grammar's "is"
    said, heard = "a cat is sleeping", "a cat in sleeping"
    logits = emissions(0.45 * probabilities(said, tokens, rng, confusion=0.2)
                       + 0.55 * probabilities(heard, tokens, rng, confusion=0.2))
    assert " ".join(plain(logits)[0][0].words) == heard
    assert hypotheses(ours, logits) == hypotheses(theirs, logits)
    assert " ".join(hypotheses(ours, logits)[0][0]) == said


def test_a_network_decodes(toy_lm):
    folder, vocab, sentences, tokens = toy_lm
    lexicon = str(folder / "lexicon.txt")
    lstm = ARCHITECTURES["lstm"].initial(vocab, features=6, hidden=8, seed=2)
    decoder = decoder_module.ctc_decoder(lexicon=lexicon, tokens=tokens, lm=LanguageModel(lstm, lexicon=lexicon),
                                         nbest=3, beam_size=8, lm_weight=1.0)
    rng = np.random.default_rng(7)
    for sentence in sentences[:3]:
        best = decoder(emissions(probabilities(sentence, tokens, rng)))[0][0]
        assert best.words and np.isfinite(best.score)


def test_the_words_come_from_the_decoders_arguments(toy_lm):
    folder, vocab, sentences, tokens = toy_lm
    model = nplmtk.load(str(folder / "kn3.arpa"))
    (folder / "lm_dict.txt").write_text("the\ncat\n")
    assert LanguageModel(model, lm_dict=str(folder / "lm_dict.txt")).words == ["the", "cat"]
    assert LanguageModel(model, tokens=tokens).words == tokens  # lexicon-free: tokens are the words
    assert set(LanguageModel(model, lexicon=str(folder / "lexicon.txt")).words) >= set(vocab.words[3:])
    with pytest.raises(ParameterError) as error:
        LanguageModel(model)
    assert set(error.value.parameters) == {"lexicon", "lm_dict", "tokens"}
    with pytest.raises(ParameterError):
        LanguageModel(model, tokens=tokens, words=["the"])
    with pytest.raises(ParameterError):
        LanguageModel("kn3.arpa", words=["the"])
    lm = LanguageModel(model, words=["the"])
    with pytest.raises(ParameterError):
        lm.score(lm.start(False), 1)
