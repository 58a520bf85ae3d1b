"""AWD-LSTM's schedule (Merity et al. 2018; nplmtk/neural/regularisation.py): segments of
random lengths, drawn by the optimizer and walked by the kernel, and NT-ASGD's trigger
and averaging in the trainer; the regularisers' settings refused in one line. (Their
gradients: test_recurrent.py, against the float64 reference.)"""
import json

import numpy as np
import pytest

import nplmtk.neural.train as train_module
from conftest import assert_one_line_error, run_nplm, scored_as_ppl_says
from nplmtk.corpus import Corpus
from nplmtk.models import ARCHITECTURES
from nplmtk.neural.optimizer import Optimizer, sgd_steps, update_schedule
from nplmtk.neural.recurrent import RecurrentSettings, RNNModel, stream_rows
from nplmtk.neural.regularisation import Regularisers, nonmonotone_trigger, random_segment_lengths
from nplmtk.neural.train import Trainer, TrainingConfig
from test_recurrent import ROLES, TEXT, VOCAB, random_model


def test_random_segment_lengths_are_awd_lstms():
    """bptt, or bptt / 2 one time in twenty, plus N(0, 5) rounded down, at least 5 and at
    most bptt + 20 steps; together they cover the chunk, the last one possibly cut."""
    lengths = random_segment_lengths(400_000, 70, np.random.default_rng(1))
    assert lengths.sum() == 400_000
    assert lengths.min() >= 5 and lengths.max() <= 90
    halved = lengths < 52  # 35 + noise, the others 70 + noise: 3.5 standard deviations apart
    assert abs(np.mean(halved) - 0.05) < 0.01
    assert abs(lengths[~halved].mean() - 69.5) < 0.2 and abs(lengths[~halved].std() - 5) < 0.3  # floor(N(70, 5))
    assert abs(lengths[halved].mean() - 34.5) < 1
    np.testing.assert_array_equal(random_segment_lengths(400_000, 70, np.random.default_rng(1)), lengths)
    assert random_segment_lengths(10_000, 8, np.random.default_rng(1)).min() == 5  # max(5, ...)
    assert random_segment_lengths(7, 3, np.random.default_rng(2)).min() >= 3  # no floor of 5 above bptt
    assert len(random_segment_lengths(0, 35, np.random.default_rng(2))) == 0


def test_a_chunk_ends_in_a_short_segment_only_when_the_draws_leave_half_of_one():
    """A round of 4 x 35 steps: about 140 / 33.6 segments, not one more for the steps left."""
    chunks = [random_segment_lengths(140, 35, np.random.default_rng(seed)) for seed in range(2000)]
    assert all(chunk.sum() == 140 and chunk.max() <= 55 for chunk in chunks)
    assert abs(np.mean([len(chunk) for chunk in chunks]) - 140 / 33.6) < 0.15
    assert np.mean([chunk.min() >= 15 for chunk in chunks]) > 0.9


def test_the_optimizer_draws_a_chunks_lengths_again_on_resuming():
    model = random_model("lstm", {})
    optimizer = Optimizer(model, TrainingConfig.of(model, bptt=10, random_bptt=True, weight_decay=0.01, seed=3))
    steps = optimizer.steps(500, first_update=7)
    assert steps.lengths.sum() == 500 and steps.rates.shape == (1, len(steps.lengths))
    np.testing.assert_array_equal(optimizer.steps(500, first_update=7).lengths, steps.lengths)
    assert not np.array_equal(optimizer.steps(500, first_update=8).lengths[:5], steps.lengths[:5])
    assert Optimizer(model, TrainingConfig.of(model, bptt=10)).steps(500).lengths is None


def test_update_schedule_of_sizes_is_that_of_batches_when_they_are_equal():
    sizes = np.array([10] * 9 + [7], dtype=np.int32)
    for a, b in zip(update_schedule(97, 10, 0.1, 1e-3, 0.05, 32, 4, 2),
                    update_schedule(97, 10, 0.1, 1e-3, 0.05, 32, 4, 2, sizes=sizes)):
        np.testing.assert_array_equal(a, b)
    _, _, dense_keep = update_schedule(20, 10, 0.1, 0.0, 0.05, 1000, sizes=np.array([3, 12, 9], dtype=np.int32))
    assert np.isclose(dense_keep[-1], 0.995 ** 20)  # each example's decay, the last segment cut to 5


def test_segments_of_given_lengths_train_as_one_update_each():
    """The kernel walks the lengths: one chunk equals a call per segment (the state, the
    dropout generator and the masks carried from call to call)."""
    rows, _ = stream_rows(Corpus.from_lines(TEXT * 3, VOCAB), 2, VOCAB)
    lengths = np.array([3, 6, 1, 5, 4, 6, 2, 6, 6, 4], dtype=np.int32)
    assert lengths[:-1].sum() < len(rows) <= lengths.sum()
    regularisers = Regularisers.of(RecurrentSettings(dropout_input=0.2, dropout_output=0.3, weight_drop=0.3, ar=1,
                                                     tar=1))
    results = []
    for together in (True, False):
        model = random_model("lstm", {"layers": 2})
        network = model._network(2, 6, trainable=True, regularisers=regularisers, seed=3)
        roles = model.array_roles(None)
        if together:
            network.train(rows, sgd_steps(4, np.full(len(lengths), 0.01), None, np.ones(len(lengths), np.float32),
                                          clip=0.5, lengths=lengths, roles=roles))
        else:
            start = 0
            for size in lengths:
                part = np.ascontiguousarray(rows[start:start + size])
                network.train(part, sgd_steps(len(part), [0.01], None, [1.0], clip=0.5, roles=roles))
                start += size
        results.append(model.params)
    for name in results[0]:
        np.testing.assert_array_equal(results[0][name], results[1][name])
    network = random_model("rnn", {})._network(2, 6, trainable=True)
    with pytest.raises(ValueError, match="segment lengths"):
        network.train(rows, sgd_steps(4, np.full(3, 0.01), None, np.ones(3, np.float32), lengths=np.array(
            [6, 6, 7], dtype=np.int32)))


def test_the_nonmonotone_trigger_is_awd_lstms():
    """main.py: len(before) > n and the last > min(before[:-n]), before: the earlier ones."""
    assert not nonmonotone_trigger([9, 8, 7, 6.9], 2)
    assert not nonmonotone_trigger([9, 8, 9.5], 2)  # only 2 before it
    assert nonmonotone_trigger([9, 8, 7, 7.1, 7.2, 9.5], 2)  # worse than min(9, 8, 7)
    assert not nonmonotone_trigger([9, 8, 7, 7.1, 7.2, 6.95], 2)
    assert nonmonotone_trigger([9, 8, 9.5], 1) and not nonmonotone_trigger([9, 8, 8.5], 1)


def test_nt_asgd_validates_and_keeps_the_mean_of_the_parameters_after_each_round(toy_texts, monkeypatch):
    """Once triggered (here after the first epoch) the parameters after each round are
    averaged; the average is what is validated and kept, training goes on from the raw
    parameters, and only epochs since count towards -patience."""
    folder, vocab = toy_texts
    train, valid = (Corpus.read(str(folder / f"{name}.txt"), vocab) for name in ("train", "valid"))
    model = ARCHITECTURES["lstm"].initial(vocab, features=6, hidden=6, seed=1)
    trainer = Trainer(model, TrainingConfig.of(model, epochs=3, lr=0.05, streams=4, bptt=5, optimizer="nt-asgd", patience=1,
                                            dropout_output=0.2, random_bptt=True, progress=False))
    monkeypatch.setattr(train_module, "nonmonotone_trigger", lambda ppls, interval: True)
    snapshots, averaged = [], trainer._average_parameters

    def keep_snapshot():
        snapshots.append({k: v.copy() for k, v in model.params.items()})
        averaged()
    trainer._average_parameters = keep_snapshot
    trainer.run(train, valid)
    history = trainer.state["history"]
    assert history[0]["averaging_from"] == history[0]["updates"] and "averaged" not in history[0]
    assert all(r["averaged"] for r in history[1:]) and trainer.state["averaged_rounds"] == len(snapshots) >= 2
    mean = {k: np.mean([s[k].astype(np.float64) for s in snapshots], axis=0) for k in model.params}
    for name, array in trainer.average.items():
        np.testing.assert_allclose(array, mean[name], rtol=0, atol=1e-5)
        assert not np.allclose(array, snapshots[-1][name], rtol=0, atol=1e-5)  # not the raw parameters
    best = min(range(3), key=lambda e: history[e]["valid_ppl"])
    if best == 2:
        for name in model.params:
            np.testing.assert_array_equal(model.params[name], trainer.average[name])
    # a validation scores the average in place of the raw parameters, which it leaves as they were
    raw = {k: v.copy() for k, v in model.params.items()}
    trainer.average = {k: v + np.float32(0.01) for k, v in raw.items()}
    trainer.state["best_valid"] = None
    record = {}
    trainer._validate(record, valid)
    for name in raw:
        np.testing.assert_array_equal(model.params[name], raw[name])
        np.testing.assert_array_equal(trainer.best[name], trainer.average[name])
    shifted = ARCHITECTURES["lstm"](vocab, trainer.average, None, model.activation, model.meta)
    logp = shifted.logprobs(valid)
    assert np.isclose(record["valid_ppl"], np.exp(-logp[np.isfinite(logp)].mean()), rtol=1e-9)


def test_a_resumed_nt_asgd_run_finishes_like_an_uninterrupted_one(toy_texts, tmp_path, monkeypatch):
    """Checkpoints keep the average and its count (and the random lengths are drawn again)."""
    folder, vocab = toy_texts
    train, valid = (Corpus.read(str(folder / f"{name}.txt"), vocab) for name in ("train", "valid"))
    monkeypatch.setattr(train_module, "nonmonotone_trigger", lambda ppls, interval: True)
    settings = dict(epochs=3, lr=0.05, streams=4, bptt=5, optimizer="nt-asgd", random_bptt=True, dropout_input=0.2,
                    weight_drop=0.2, progress=False, checkpoint_dir=str(tmp_path), checkpoint_every=7)

    def fresh():
        return ARCHITECTURES["lstm"].initial(vocab, features=6, hidden=6, layers=2, seed=1)
    straight = Trainer(fresh(), TrainingConfig.of(RNNModel, **settings))
    straight.run(train, valid)
    Trainer(fresh(), TrainingConfig.of(RNNModel, **{**settings, "epochs": 2})).run(train, valid)
    resumed = Trainer.resume(str(tmp_path / "checkpoint.nplm"), TrainingConfig.of(RNNModel, **settings))
    assert resumed.average is not None
    resumed.run(train, valid)
    for name in straight.model.params:
        assert np.array_equal(straight.model.params[name], resumed.model.params[name]), name
        assert np.array_equal(straight.average[name], resumed.average[name]), name


def test_nt_asgd_trains_saves_and_scores_from_the_command_line(toy_texts, tmp_path):
    """Every regulariser at once, NT-ASGD triggered after the third epoch at the latest
    (-nonmono 1 and a rate high enough to wander): the model kept scores as the log's best."""
    texts, vocab = toy_texts
    model_path, log = tmp_path / "m.nplm", tmp_path / "log.jsonl"
    status, _, err = run_nplm("train", "-arch", "lstm", "-text", texts / "train.txt", "-valid", texts / "valid.txt",
                              "-m", 8, "-h", 8, "-layers", 2, "-tie", "-bptt", 8, "-streams", 4, "-epochs", 4,
                              "-lr", 0.05, "-optimizer", "nt-asgd", "-nonmono", 1, "-random-bptt",
                              "-dropout-input", 0.1, "-dropout-hidden", 0.1, "-dropout-output", 0.1,
                              "-dropout-embedding", 0.05, "-weight-drop", 0.2, "-ar", 1, "-tar", 1,
                              "-lm", model_path, "-log", log, "-quiet")
    assert status == 0, err
    records = [json.loads(line) for line in log.read_text().splitlines()]
    model, reported = scored_as_ppl_says(model_path, texts / "valid.txt")
    assert np.isclose(reported, min(r["valid_ppl"] for r in records), rtol=1e-4)
    assert reported < len(vocab) / 3


@pytest.mark.parametrize("args, fragment", [
    (["-dropout", 0.3, "-dropout-output", 0.4], "-dropout draws a mask per step on every non-recurrent connection"),
    (["-optimizer", "nt-asgd", "-lr-halve"], "-optimizer nt-asgd averages the parameters once the valid ppl stalls"),
    (["-optimizer", "nt-asgd"], "-optimizer nt-asgd starts averaging when the valid ppl stops improving: give a "
                                "-valid text"),
    (["-dropout-hidden", 0.3], "-dropout-hidden applies between stacked layers: with one layer give -dropout-output"),
    (["-min-improvement", 1.003], "-min-improvement 1.003: a ratio of at least 1, and above 1 only with -lr-halve"),
    (["-weight-drop", 1], "-weight-drop"),
    (["-dropout-embedding", -0.1], "-dropout-embedding"),
    (["-tar", -1], "-tar"),
    (["-nonmono", 0], "-nonmono"),
    (["-arch", "mlp", "-ar", 1], "-ar is an option of -arch rnn, lstm, not of -arch mlp"),
    (["-arch", "mlp", "-optimizer", "nt-asgd"], "-optimizer is an option of -arch rnn, lstm, transformer, not of -arch mlp"),
])
def test_regularisers_refused_in_one_line(tmp_path, args, fragment):
    (tmp_path / "t.txt").write_text("a b c\n")
    arch = [] if "-arch" in args else ["-arch", "lstm"]
    status, _, err = run_nplm("train", "-text", tmp_path / "t.txt", "-lm", tmp_path / "m.nplm", *arch, *args)
    assert_one_line_error(status, err, fragment)
    assert not (tmp_path / "m.nplm").exists()


def test_an_update_whose_gradient_is_not_finite_is_skipped():
    """A segment whose backward pass overflows (here AR's gradient, at a weight of 3e38)
    leaves every parameter as it was and is counted; applied, even clipped, it made every
    parameter NaN (make brown-best's LSTM, in its fourth epoch). Finite ones still train."""
    rows, _ = stream_rows(Corpus.from_lines(TEXT * 2, VOCAB), 2, VOCAB)
    model = random_model("lstm", {"layers": 2})
    before = {name: value.copy() for name, value in model.params.items()}
    overflowing = Regularisers.of(RecurrentSettings(ar=3e38))
    network = model._network(2, 4, trainable=True, regularisers=overflowing)
    updates = -(-len(rows) // 4)
    total, done, _ = network.train(rows, sgd_steps(4, np.full(updates, 0.01), None, np.ones(updates, np.float32),
                                                   clip=0.25, roles=model.array_roles(None)))
    assert np.isfinite(total) and network.skipped_updates == updates
    for name, value in model.params.items():
        np.testing.assert_array_equal(value, before[name])
    network = model._network(2, 4, trainable=True, regularisers=Regularisers.of(RecurrentSettings(ar=2)))
    network.train(rows, sgd_steps(4, np.full(updates, 0.01), None, np.ones(updates, np.float32), clip=0.25,
                                  roles=model.array_roles(None)))
    assert network.skipped_updates == 0 and not np.array_equal(model.params["W0"], before["W0"])


def test_adam_steps_stay_finite_when_its_second_moments_are_denormal():
    """Adam's v decays into denormal floats where a gradient stays near 0; -ffast-math's
    vectorised square root of a denormal is NaN, which made 6 weights of brown-best's LSTM
    NaN in its fourth epoch (and the network with them)."""
    from nplmtk.neural.optimizer import Adam
    rows, _ = stream_rows(Corpus.from_lines(TEXT * 2, VOCAB), 2, VOCAB)
    model = random_model("lstm", {"hidden": 16, "features": 16})
    # the input features a segment's locked mask drops get no gradient: their v only decays
    network = model._network(2, 4, trainable=True, adam=Adam(),
                             regularisers=Regularisers.of(RecurrentSettings(dropout_input=0.9)))
    for name, moment in network.carried.items():
        if name.startswith("adam_v."):
            moment[...] = np.float32(1e-44)
    updates = -(-len(rows) // 4)
    network.train(rows, sgd_steps(4, np.full(updates, 0.001), None, np.ones(updates, np.float32), clip=0.25,
                                  roles=model.array_roles(None)))
    assert all(np.isfinite(value).all() for value in model.params.values())


def test_a_new_pass_zeroes_the_streams_state_but_keeps_adams_moments():
    """The trainer resets its networks at each epoch's start: the streams start from a zero
    state, and Adam goes on with its moments and step count (it once restarted each epoch)."""
    model = random_model("lstm", {})
    corpus = Corpus.from_lines(TEXT * 4, VOCAB)
    config = TrainingConfig.of(model, streams=2, bptt=3, optimizer="adam", progress=False)
    steps = model.training_examples(corpus, config)
    network = model.training_network(config, 0)
    chunk = np.ascontiguousarray(steps[np.arange(len(steps))])
    updates = -(-len(chunk) // 3)
    network.train(chunk, sgd_steps(3, np.full(updates, 0.01), np.ones(updates, np.float32),
                                   np.ones(updates, np.float32), clip=config.settings.clip,
                                   roles=ROLES(model, config.settings)))
    before = {k: v.copy() for k, v in network.carried.items()}
    assert before["adam_step"][0] == updates and np.abs(before["state0"]).max() > 0
    network.reset()
    for name, array in network.carried.items():
        if name.startswith(("state", "cell")):
            assert not array.any(), name
        else:
            assert np.array_equal(array, before[name]), name
    assert any(name.startswith("adam_v.") and before[name].any() for name in before)
