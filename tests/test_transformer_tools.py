"""The tools of nplm with a tiny Transformer trained once on the toy grammar (issue 52,
item 2): ppl -debug 2, mix, rescore, generate, embeddings, convert-lm, nplmtk.load, the
word-at-a-time API, -neural-cache, -dynamic-eval, -checkpoint and -resume."""
import math

import numpy as np
import pytest

import nplmtk
from conftest import run_nplm, scored_as_ppl_says
from nplmtk.corpus import Corpus

TINY = ("-arch", "transformer", "-m", 16, "-layers", 1, "-heads", 2, "-ff", 32, "-bptt", 10, "-streams", 4,
        "-lr", 3e-3, "-warmup", 10, "-dropout", 0, "-quiet")


@pytest.fixture(scope="module")
def trained(toy_texts, tmp_path_factory):
    folder, _ = toy_texts
    out = tmp_path_factory.mktemp("transformer")
    model = out / "t.nplm"
    status, _, err = run_nplm("train", *TINY, "-text", folder / "train.txt", "-epochs", 1, "-lm", model,
                              "-positions", "relative", "-memory", 5, "-output", "class")
    assert status == 0, err
    status, _, err = run_nplm("ngram-count", "-text", folder / "train.txt", "-order", 3, "-lm", out / "kn3.arpa")
    assert status == 0, err
    return folder, out, model


def test_ppl_with_debug_2_and_mix(trained):
    folder, out, model = trained
    loaded, ppl = scored_as_ppl_says(model, folder / "valid.txt")
    status, text, err = run_nplm("ppl", "-lm", model, "-ppl", folder / "valid.txt", "-debug", 2)
    assert status == 0 and text.count("p( ") > 100, err
    status, text, err = run_nplm("ppl", "-lm", model, "-mix-lm", out / "kn3.arpa", "-lambda", 0.5, "-ppl",
                                 folder / "valid.txt")
    assert status == 0 and "ppl=" in text, err


def test_the_python_api_and_a_word_at_a_time_score_sentences_alone(trained):
    _, _, model = trained
    loaded = nplmtk.load(str(model))
    sentence = "the cat is walking"
    state, total = loaded.begin_state(), 0.0
    for word in sentence.split() + ["</s>"]:
        score, state = loaded.score_word(state, word)
        total += score
    assert math.isclose(total, loaded.score(sentence), rel_tol=1e-5)
    ids = np.array([loaded.vocab.id(w) for w in sentence.split()], dtype=np.int32)
    alone = loaded.log10probs(Corpus(ids, [0, len(ids)], loaded.vocab))
    assert math.isclose(alone.sum(), total, rel_tol=1e-5)


def test_rescore_generate_embeddings_and_convert(trained, tmp_path):
    folder, out, model = trained
    lines = (folder / "valid.txt").read_text().splitlines()[:3]
    (tmp_path / "list").write_text("".join(f"0 0 {len(h.split())} {h}\n" for h in lines))
    status, text, err = run_nplm("rescore", "-lm", model, "-nbest", tmp_path / "list")
    assert status == 0 and len(text.splitlines()) == 3, err
    status, text, err = run_nplm("generate", "-lm", model, "-n", 5, "-seed", 3)
    assert status == 0 and len(text.splitlines()) == 5, err
    assert run_nplm("generate", "-lm", model, "-n", 5, "-seed", 3, "-batch", 2)[1] == text  # the seed decides
    status, text, err = run_nplm("embeddings", "-lm", model, "-write", "-", "-format", "tsv")
    assert status == 0 and len(text.splitlines()) >= 10, err
    for args in (("-order", 2, "-sample-words", 3000, "-quiet"), ("-ngrams", out / "kn3.arpa", "-rewrite", "-quiet")):
        status, _, err = run_nplm("convert-lm", "-lm", model, *args, "-write-lm", tmp_path / "c.arpa")
        assert status == 0 and "\\data\\" in (tmp_path / "c.arpa").read_text(), err


def test_neural_cache_and_dynamic_evaluation(trained):
    folder, _, model = trained
    status, text, err = run_nplm("ppl", "-lm", model, "-ppl", folder / "valid.txt", "-neural-cache", 50)
    assert status == 0 and "ppl=" in text, err
    status, text, err = run_nplm("ppl", "-lm", model, "-ppl", folder / "valid.txt", "-dynamic-eval", 10,
                                 "-dynamic-lr", 0.01)
    assert status == 0 and "ppl=" in text, err


def test_the_neural_cache_over_dynamic_evaluation_reads_the_adapted_top_states(trained):
    from nplmtk.neural.dynamic import DynamicEvaluation, dynamic_logprobs
    folder, _, model = trained
    network = nplmtk.load(str(model))
    corpus = Corpus.read(str(folder / "valid.txt"), network.vocab)
    first = corpus.offsets[1] + 1  # the first sentence's predictions: the same context on both paths
    plain_logp, plain_states = network.logprobs_and_states(corpus)
    still, keys = dynamic_logprobs(network, corpus, DynamicEvaluation(8, 1e-12), keys=True)
    assert keys.shape == (len(still), network.top_width())
    np.testing.assert_allclose(keys[:min(first, 8)], plain_states[:min(first, 8)], atol=1e-4)
    adapted, keys = dynamic_logprobs(network, corpus, DynamicEvaluation(8, 0.5), keys=True)
    assert not np.allclose(keys[8:], plain_states[8:], atol=1e-3)  # the adapted network's states
    status, text, err = run_nplm("ppl", "-lm", model, "-ppl", folder / "valid.txt", "-neural-cache", 50,
                                 "-dynamic-eval", 8, "-dynamic-lr", 0.01)
    assert status == 0 and "ppl=" in text, err


def test_a_resumed_run_ends_as_an_uninterrupted_one(toy_texts, tmp_path):
    """Checkpoints hold each worker's Adam moments and step count and its dropout generators."""
    from nplmtk.neural.train import Trainer, TrainingConfig
    from nplmtk.neural.transformer import TransformerModel
    folder, vocab = toy_texts
    train, valid = (Corpus.read(str(folder / f"{name}.txt"), vocab) for name in ("train", "valid"))
    settings = dict(epochs=2, lr=3e-3, warmup=5, streams=4, dropout=0.1, dropout_attention=0.1, progress=False,
                    checkpoint_dir=str(tmp_path), checkpoint_every=7)

    def fresh():
        return TransformerModel.initial(vocab, features=8, layers=1, heads=2, ff=16, context=6, seed=1)
    straight = Trainer(fresh(), TrainingConfig.of(TransformerModel, **settings)).run(train, valid)
    Trainer(fresh(), TrainingConfig.of(TransformerModel, **{**settings, "epochs": 1})).run(train, valid)
    resumed = Trainer.resume(str(tmp_path / "checkpoint.nplm"), TrainingConfig.of(TransformerModel, **settings))
    resumed = resumed.run(train, valid)
    for name in straight.params:
        assert np.array_equal(straight.params[name], resumed.params[name]), name
