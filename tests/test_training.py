"""Training behaviour: learning, save/load, resume, threads, early stopping, CLI."""
import json
import math
import os
import subprocess
import warnings
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest

from conftest import NPLM, assert_one_line_error, run_nplm
from nplmtk.corpus import Corpus
from nplmtk.models import load
from nplmtk.neural.mlp import MLPModel
from nplmtk.errors import ParameterError
from nplmtk.neural.train import Trainer, TrainingConfig
from nplmtk.ngram.counts import NgramCounts
from nplmtk.ngram.estimate import estimate
from nplmtk.toy import ToyGrammar
from nplmtk.vocab import Vocabulary


@pytest.fixture(scope="module")
def toy():
    grammar = ToyGrammar()
    vocab = Vocabulary(grammar.words)
    train, valid, test = (Corpus.from_lines([" ".join(s) for s in grammar.sentences(n, seed)], vocab)
                          for n, seed in ((3000, 1), (300, 2), (300, 3)))
    return vocab, train, valid, test


def ppl(model, corpus):
    return math.exp(-model.logprobs(corpus).mean())


def small_model(vocab, seed=1):
    return MLPModel.initial(vocab, order=3, features=8, hidden=16, seed=seed)


CONFIG = dict(epochs=4, batch=8, lr=0.02, lr_decay=1e-6, weight_decay=1e-5, progress=False)


def test_the_network_learns_and_beats_a_bigram(toy):
    vocab, train, valid, test = toy
    model = Trainer(small_model(vocab), TrainingConfig(**CONFIG)).run(train, valid)
    bigram = estimate(NgramCounts.from_corpus(train, 2))
    assert ppl(model, test) < 0.97 * ppl(bigram, test)
    assert np.all(np.isfinite(model.logprobs(test)))
    assert abs(model.next_distribution([vocab.index["the"]]).sum() - 1) < 1e-4


def test_single_thread_training_is_bit_identical_run_to_run(toy):
    vocab, train, valid, _ = toy
    first = Trainer(small_model(vocab), TrainingConfig(**{**CONFIG, "epochs": 1})).run(train)
    second = Trainer(small_model(vocab), TrainingConfig(**{**CONFIG, "epochs": 1})).run(train)
    for name in first.params:
        assert np.array_equal(first.params[name], second.params[name])


def test_two_threads_train_to_within_three_percent_of_one(toy):
    vocab, train, valid, test = toy
    one = Trainer(small_model(vocab), TrainingConfig(**CONFIG)).run(train, valid)
    two = Trainer(small_model(vocab), TrainingConfig(**{**CONFIG, "threads": 2})).run(train, valid)
    assert abs(ppl(two, test) / ppl(one, test) - 1) < 0.03


def test_threads_sharing_each_window_train_as_one_thread(toy):
    """At batch 1 (full softmax) the threads split each window's output rows: sequential
    SGD, so the model is one thread's up to the order of float sums."""
    vocab, train, _, test = toy
    config = {**CONFIG, "epochs": 1, "batch": 1, "lr": 0.01}
    one = Trainer(small_model(vocab), TrainingConfig(**config)).run(train)
    trainer = Trainer(small_model(vocab), TrainingConfig(**{**config, "threads": 3}))
    three = trainer.run(train)
    assert trainer.workers == 1 and trainer.networks[0] is not None
    for name in one.params:
        np.testing.assert_allclose(three.params[name], one.params[name], atol=2e-5, err_msg=name)
    assert not np.array_equal(one.params["U"], small_model(vocab).params["U"])
    np.testing.assert_allclose(ppl(three, test), ppl(one, test), rtol=1e-4)


def test_threads_sharing_windows_take_several_parts_each_when_openmp_gives_fewer(tmp_path):
    """With OMP_THREAD_LIMIT=1 the 3 parts of -threads 3 run on one thread, in turn: the same
    training (up to float sums) as -threads 1, and no error."""
    text = tmp_path / "t.txt"
    text.write_text("".join(f"w{i % 7} w{i % 5} w{i % 3} w{i % 11}\n" for i in range(200)))
    logs = {}
    for threads, limit in ((1, None), (3, "1")):
        env = {**os.environ, **({"OMP_THREAD_LIMIT": limit} if limit else {})}
        log = tmp_path / f"{threads}.log"
        args = (NPLM, "train", "-text", text, "-lm", tmp_path / f"{threads}.nplm", "-order", 3, "-m", 4, "-h", 5,
                "-epochs", 1, "-batch", 1, "-threads", threads, "-quiet", "-log", log)
        proc = subprocess.run([str(a) for a in args], capture_output=True, text=True, env=env)
        assert proc.returncode == 0, proc.stderr
        logs[threads] = json.loads(log.read_text().splitlines()[-1])["train_ppl"]
    assert logs[3] == pytest.approx(logs[1], rel=1e-5)


def test_threads_sharing_exact_energy_steps_train_as_one_thread(tmp_path):
    """The energy network's exact gradient at batch 1: -threads 3 shares each step's blocks
    of 128 vocabulary rows (300 words: three blocks) among 3 threads, and under
    OMP_THREAD_LIMIT=1 runs them on one; both train as -threads 1, up to float sums."""
    text = tmp_path / "t.txt"
    text.write_text("".join(f"w{i % 300} w{(7 * i) % 300} w{(i * i) % 300} w{i % 11}\n" for i in range(150)))
    logs = {}
    for threads, limit in ((1, None), (3, None), (3, "1")):
        env = {**os.environ, **({"OMP_THREAD_LIMIT": limit} if limit else {})}
        log = tmp_path / f"{threads}-{limit}.log"
        args = (NPLM, "train", "-text", text, "-lm", tmp_path / f"{threads}-{limit}.nplm", "-arch", "energy",
                "-order", 3, "-m", 4, "-h", 5, "-epochs", 1, "-batch", 1, "-threads", threads, "-quiet", "-log", log)
        proc = subprocess.run([str(a) for a in args], capture_output=True, text=True, env=env)
        assert proc.returncode == 0, proc.stderr
        logs[threads, limit] = json.loads(log.read_text().splitlines()[-1])["train_ppl"]
    assert logs[3, None] == pytest.approx(logs[1, None], rel=1e-5)
    assert logs[3, "1"] == pytest.approx(logs[1, None], rel=1e-5)


def test_resumed_run_finishes_like_an_uninterrupted_one(toy, tmp_path):
    vocab, train, valid, _ = toy
    config = {**CONFIG, "epochs": 3, "checkpoint_dir": str(tmp_path), "checkpoint_every": 500}
    straight = Trainer(small_model(vocab), TrainingConfig(**config)).run(train, valid)
    Trainer(small_model(vocab), TrainingConfig(**{**config, "epochs": 1})).run(train, valid)
    resumed = Trainer.resume(str(tmp_path / "checkpoint.nplm"), TrainingConfig(**config)).run(train, valid)
    for name in straight.params:
        assert np.array_equal(straight.params[name], resumed.params[name])
    # a checkpoint scores as the best model so far
    np.testing.assert_array_equal(load(str(tmp_path / "checkpoint.nplm")).logprobs(valid), resumed.logprobs(valid))


def test_a_run_killed_within_an_epoch_logs_that_epoch_as_the_uninterrupted_run(toy, tmp_path, monkeypatch):
    """The resumed epoch's training ppl was that of the words after the checkpoint alone."""
    vocab, train, valid, _ = toy
    config = {**CONFIG, "epochs": 2, "checkpoint_dir": str(tmp_path), "checkpoint_every": 40}
    straight = Trainer(small_model(vocab), TrainingConfig(**config))
    straight.run(train, valid)
    saved = Trainer.save_checkpoint

    class Killed(Exception):
        pass

    def killed_after_a_few(trainer):
        saved(trainer)
        if trainer.state["epoch"] == 1 and trainer.state["round"] > 0:  # within the second epoch
            raise Killed
    monkeypatch.setattr(Trainer, "save_checkpoint", killed_after_a_few)
    with pytest.raises(Killed):
        Trainer(small_model(vocab), TrainingConfig(**config)).run(train, valid)
    monkeypatch.setattr(Trainer, "save_checkpoint", saved)
    resumed = Trainer.resume(str(tmp_path / "checkpoint.nplm"), TrainingConfig(**config))
    assert 0 < resumed.state["epoch_words"] and resumed.state["epoch"] == 1
    resumed.run(train, valid)
    assert [r["train_ppl"] for r in resumed.state["history"]] == [r["train_ppl"] for r in straight.state["history"]]
    for name in straight.model.params:
        assert np.array_equal(straight.model.params[name], resumed.model.params[name]), name


def test_early_stopping_keeps_the_best_epoch(toy):
    vocab, train, valid, _ = toy
    trainer = Trainer(small_model(vocab), TrainingConfig(**{**CONFIG, "epochs": 12, "lr": 0.2, "patience": 1}))
    model = trainer.run(train, valid)
    history = trainer.state["history"]
    best = min(r["valid_ppl"] for r in history)
    assert math.isclose(ppl(model, valid), best, rel_tol=1e-6)


def test_time_budget_starts_no_epoch_that_would_overrun_it(toy):
    vocab, train, valid, _ = toy
    trainer = Trainer(small_model(vocab), TrainingConfig(**{**CONFIG, "epochs": 5, "max_time": 1e-6}))
    trainer.run(train, valid)
    assert [r["epoch"] for r in trainer.state["history"]] == [1]  # the first epoch shows how long one takes
    unbounded = Trainer(small_model(vocab), TrainingConfig(**{**CONFIG, "epochs": 3, "max_time": 0}))
    unbounded.run(train, valid)
    history = unbounded.state["history"]
    assert len(history) == 3 and history[-1]["elapsed"] > history[0]["elapsed"] > 0
    roomy = Trainer(small_model(vocab), TrainingConfig(**{**CONFIG, "epochs": 3,
                                                          "max_time": 3 * history[-1]["elapsed"] + 10}))
    roomy.run(train, valid)
    assert len(roomy.state["history"]) == 3


def _budgeted_linear_run(toy, monkeypatch, times, max_time):
    """A trainer run to its end with `-lr-schedule linear -lr-horizon 0` and `max_time`,
    its clock reading `times` one after the other (each epoch's training, then validation)."""
    from nplmtk.neural import train as train_module
    vocab, train, valid, _ = toy
    clock = iter(times)
    monkeypatch.setattr(train_module, "time", SimpleNamespace(perf_counter=lambda: next(clock)))
    config = TrainingConfig(**{**CONFIG, "epochs": 9, "lr_decay": 0.0, "max_time": max_time},
                            lr_schedule="linear", lr_horizon=0)
    trainer = Trainer(small_model(vocab), config)
    trainer.run(train, valid)
    return trainer


def test_a_linear_rate_reaches_zero_at_the_budgets_end(toy, monkeypatch):
    """-lr-schedule linear -lr-horizon 0 -max-time S: after each epoch the horizon is the
    updates that what is left of S (and of -epochs) holds at the last epoch's pace."""
    vocab, train, valid, _ = toy
    # every epoch (training, then validation) takes 20 s
    trainer = _budgeted_linear_run(toy, monkeypatch, np.arange(0.0, 1e4, 10.0), max_time=65.0)
    config, history = trainer.config, trainer.state["history"]
    assert len(history) == 3  # 20 s each: a 4th would end at 80 s
    per_epoch = history[0]["updates"]
    assert trainer.state["lr_horizon"] == int(3.25 * per_epoch)  # 65 s at 20 s an epoch
    # the rate of epoch 1 is -lr (no pace yet), then falls on a line to 0 at 65 s
    assert history[0]["lr"] == CONFIG["lr"]
    assert math.isclose(history[1]["lr"], CONFIG["lr"] * (1 - 2 / 3.25), rel_tol=1e-3)
    assert math.isclose(history[2]["lr"], CONFIG["lr"] * (1 - 3 / 3.25), rel_tol=1e-2)
    capped = Trainer(small_model(vocab), replace(config, epochs=2, max_time=1e4))
    capped.run(train, valid)  # -epochs ends the run before the budget does
    assert capped.state["lr_horizon"] == 2 * per_epoch


def test_a_slow_first_epoch_does_not_end_a_budgeted_rate_early(toy, monkeypatch):
    """The first epoch 30 s, the others 20 s, a budget of 75 s: 3 epochs run. Whole epochs
    foretold from the first one's pace (one more) put the horizon at 2 epochs' updates: a
    rate of 0 after epoch 2, then back up for epoch 3. The rate falls every epoch and stays
    above 0 until the budget's end."""
    trainer = _budgeted_linear_run(toy, monkeypatch, np.concatenate([[0.0, 10.0], np.arange(30.0, 1e4, 10.0)]),
                                   max_time=75.0)
    history = trainer.state["history"]
    assert [record["elapsed"] for record in history] == [30.0, 50.0, 70.0]
    rates = [record["lr"] for record in history]
    assert rates[0] > rates[1] > rates[2] > 0


def test_ranks_stop_at_the_same_epoch_under_a_time_budget(toy, monkeypatch):
    """Each rank's clock differs: its epoch's time is the slowest rank's, so that no rank
    starts an epoch (and waits in its collectives) after the others have stopped."""
    from nplmtk.neural import train as train_module

    class TwoRanks:  # the other rank, 5 s slower each epoch
        def allgather(self, value):
            return [value, value + 5.0]

    assert train_module.slowest(TwoRanks(), 20.0) == 25.0 and train_module.slowest(None, 20.0) == 20.0
    clock = iter(np.arange(0.0, 1e4, 10.0))
    monkeypatch.setattr(train_module, "time", SimpleNamespace(perf_counter=lambda: next(clock)))
    slowest = train_module.slowest
    monkeypatch.setattr(train_module, "slowest", lambda comm, seconds: slowest(TwoRanks(), seconds))
    trainer = Trainer(small_model(toy[0]), TrainingConfig(**{**CONFIG, "epochs": 9, "max_time": 70.0}))
    trainer.run(toy[1])
    assert len(trainer.state["history"]) == 2  # 25 s each by the slower rank: a 3rd would end at 75 s
    assert trainer.state["elapsed"] == 50.0


def test_a_budgeted_schedule_needs_a_budget(toy):
    vocab, *_ = toy
    with pytest.raises(ParameterError, match="max_time"):
        Trainer(small_model(vocab), TrainingConfig(**CONFIG, lr_schedule="linear", lr_horizon=0))


def test_cli_trains_saves_logs_and_scores(tmp_path):
    grammar = ToyGrammar()
    for name, n, seed in (("train", 1500, 1), ("valid", 200, 2)):
        (tmp_path / f"{name}.txt").write_text("\n".join(" ".join(s) for s in grammar.sentences(n, seed)) + "\n")
    status, _, err = run_nplm("train", "-text", tmp_path / "train.txt", "-valid", tmp_path / "valid.txt",
                              "-order", 3, "-m", 8, "-h", 16, "-epochs", 2, "-batch", 8, "-lr", 0.02,
                              "-lm", tmp_path / "m.nplm", "-log", tmp_path / "log.jsonl")
    assert status == 0, err
    records = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in records] == [1, 2] and all("valid_ppl" in r for r in records)
    status, out, err = run_nplm("ppl", "-lm", tmp_path / "m.nplm", "-text", tmp_path / "valid.txt")
    assert status == 0 and out.startswith(f"file {tmp_path / 'valid.txt'}: 200 sentences")
    model = load(str(tmp_path / "m.nplm"))
    corpus = Corpus.read(str(tmp_path / "valid.txt"), model.vocab)
    saved = math.exp(-model.logprobs(corpus).mean())
    assert math.isclose(saved, records[-1]["valid_ppl"], rel_tol=1e-6) or saved <= records[-1]["valid_ppl"]


@pytest.mark.parametrize("args, fragment", [
    (["-arch", "gru"], "-arch: unknown value 'gru'"),
    (["-criterion", "nce"], "-criterion nce: unknown value (choose from full, is, is-adaptive)"),
    (["-mpi", "ring"], "-mpi ring: unknown value (choose from param, data)"),
    (["-h", "0"], "-h 0 leaves no path"),
    (["-order", "1"], "order"),
    (["-batch", "1", "-threads", "65"], "-threads 65: at -batch 1 the threads share each window, 64 at most"),
])
def test_unbuilt_or_bad_training_options(tmp_path, args, fragment):
    (tmp_path / "t.txt").write_text("a b c\n")
    status, out, err = run_nplm("train", "-text", tmp_path / "t.txt", "-lm", tmp_path / "m.nplm", *args)
    assert_one_line_error(status, err, fragment)
    assert not (tmp_path / "m.nplm").exists()


def test_importance_sampling_trains_close_to_the_exact_gradient(toy):
    vocab, train, valid, test = toy
    exact = Trainer(small_model(vocab), TrainingConfig(**CONFIG)).run(train, valid)
    trainer = Trainer(small_model(vocab), TrainingConfig(**CONFIG, criterion="is-adaptive", samples=10,
                                                          check_every=8000))
    sampled = trainer.run(train, valid)
    assert ppl(sampled, test) < 1.05 * ppl(exact, test)
    records = trainer.state["history"]
    assert all(r["criterion"] == "is-adaptive" and r["train_ppl_of"] == "tiny set (exact)" for r in records)
    events = [e for r in records for e in r["samples_trajectory"]]
    assert events and all(e["reason"] in ("check", "ppl rose") for e in events)
    # the trajectory is the record of N: it changes exactly at the events that say so
    n = trainer.config.samples
    for event in events:  # N doubles at each rise, up to |V|
        grown = min(2 * n, len(vocab))
        assert event["samples"] == (grown if event["reason"] == "ppl rose" else n)
        n = event["samples"]


def test_a_bigram_proposal_trains_better_than_the_unigram_with_few_samples(toy):
    """With 30 samples per batch the unigram proposal is far from P (ppl 6.3 against 5.2
    exact); the bigram, mixed over the batch's windows, is closer."""
    vocab, train, valid, test = toy
    exact = Trainer(small_model(vocab), TrainingConfig(**CONFIG)).run(train, valid)
    sampled = {kind: Trainer(small_model(vocab), TrainingConfig(**CONFIG, criterion="is", samples=30,
                                                                 proposal=kind)).run(train, valid)
               for kind in ("unigram", "bigram")}
    assert ppl(sampled["bigram"], test) < min(1.08 * ppl(exact, test), ppl(sampled["unigram"], test))


def test_algorithm_4_doubles_n_and_reverts_when_the_tiny_perplexity_rises(toy):
    from nplmtk.neural.sampling import ImportanceSampling
    vocab, train, _, _ = toy
    model = small_model(vocab)
    config = TrainingConfig(**CONFIG, criterion="is-adaptive", samples=16, check_every=100)
    state = {"samples": 16}
    sampling = ImportanceSampling(model, train.windows(3), config, state)
    sampling.begin_round(model, 3, state)
    start = {k: v.copy() for k, v in model.params.items()}
    model.params["U"] *= 40  # a block that made things worse
    retry = sampling.end_round(model, [(-50.0, 10, 10.0)], 120, state, last=False)
    assert retry == (-50.0, 120, 3) and state["samples"] == 32
    assert all(np.array_equal(model.params[k], start[k]) for k in start)
    assert sampling.events[-1]["reason"] == "ppl rose" and sampling.events[-1]["samples"] == 32
    sampling.begin_round(model, 3, state)  # the block again, now harmless: kept, N unchanged
    assert sampling.end_round(model, [(-40.0, 10, 10.0)], 120, state, last=False) is None
    assert state["samples"] == 32 and sampling.events[-1]["reason"] == "check"
    config.ess_min = 1e9  # effective sample size below the minimum: N doubles (no revert)
    sampling.begin_round(model, 4, state)
    assert sampling.end_round(model, [(-40.0, 10, 50.0)], 10, state, last=False) is None
    assert state["samples"] == 64 and sampling.events[-1]["reason"] == "ess"


def test_the_energy_network_learns_exactly_and_by_importance_sampling(toy, tmp_path):
    from nplmtk.neural.energy import EnergyModel
    vocab, train, valid, test = toy
    bigram = ppl(estimate(NgramCounts.from_corpus(train, 2)), test)
    exact = Trainer(EnergyModel.initial(vocab, order=3, features=8, hidden=16, seed=1),
                    TrainingConfig(**CONFIG)).run(train, valid)
    sampled = Trainer(EnergyModel.initial(vocab, order=3, features=8, hidden=16, seed=1),
                      TrainingConfig(**{**CONFIG, "batch": 1, "lr": 0.01}, criterion="is", samples=30,
                                     proposal="bigram")).run(train, valid)
    assert ppl(exact, test) < 0.97 * bigram and ppl(sampled, test) < 1.08 * ppl(exact, test)
    exact.save(str(tmp_path / "e.nplm"))
    np.testing.assert_array_equal(load(str(tmp_path / "e.nplm")).logprobs(test), exact.logprobs(test))
    every_word = np.array([[vocab.bos, vocab.index["the"], w] for w in range(len(vocab))], dtype=np.int32)
    scores = np.empty(len(vocab))
    exact.network().logprobs(every_word, scores)
    assert abs(np.exp(scores).sum() - 1) < 1e-4  # normalised over the vocabulary


@pytest.mark.parametrize("args, fragment", [
    (["-arch", "energy", "-criterion", "is", "-batch", 4], "trains one window per update: give -batch 1"),
    (["-arch", "energy", "-activation", "relu"], "-activation is an option of -arch mlp, rnn, lstm, not of -arch energy"),
])
def test_energy_options_that_do_not_go_together(tmp_path, args, fragment):
    (tmp_path / "t.txt").write_text("a b c\n")
    status, _, err = run_nplm("train", "-text", tmp_path / "t.txt", "-lm", tmp_path / "m.nplm", *args)
    assert_one_line_error(status, err, fragment)


def test_energy_network_estimates_words_outside_its_vocabulary(toy, tmp_path):
    """sec. 5.1: a new word gets C(j) = sum_i C(i) P(i|context) and a probability; a text
    without new words scores as before; -oov-estimate is refused for other models."""
    from nplmtk.neural.energy import EnergyModel
    vocab, train, valid, _ = toy
    model = Trainer(EnergyModel.initial(vocab, order=3, features=8, hidden=16, seed=1),
                    TrainingConfig(**{**CONFIG, "epochs": 1})).run(train)
    model.save(str(tmp_path / "e.nplm"))
    sentences = [["the", "cat", "zorblax", "."], ["the", "zorblax", "sleeps", "."]]
    known = [vocab.words[3:9], vocab.words[5:12]]  # in-vocabulary words only
    estimated = model.logprobs_estimating_oov(sentences)
    assert np.all(np.isfinite(estimated)) and np.all(estimated < 0)
    plain = model.logprobs(Corpus.from_lines([" ".join(s) for s in known], vocab))
    np.testing.assert_allclose(model.logprobs_estimating_oov(known), plain, rtol=1e-6)
    (tmp_path / "oov.txt").write_text("\n".join(" ".join(s) for s in sentences) + "\n")
    status, out, err = run_nplm("ppl", "-lm", tmp_path / "e.nplm", "-text", tmp_path / "oov.txt", "-oov-estimate")
    assert status == 0 and "0 zeroprobs" in out, err
    status, _, err = run_nplm("ppl", "-lm", tmp_path / "e.nplm", "-text", tmp_path / "oov.txt")
    assert status == 0
    bigram_path = tmp_path / "b.arpa"
    assert run_nplm("ngram-count", "-text", tmp_path / "oov.txt", "-order", 2, "-lm", bigram_path)[0] == 0
    status, _, err = run_nplm("ppl", "-lm", bigram_path, "-text", tmp_path / "oov.txt", "-oov-estimate")
    assert_one_line_error(status, err, "-oov-estimate needs a network that estimates the words outside its "
                                       "vocabulary (-arch energy)")


def test_lr_halve_restarts_from_the_best_epoch_at_half_the_rate(toy):
    vocab, train, valid, _ = toy
    trainer = Trainer(small_model(vocab), TrainingConfig(**{**CONFIG, "lr": 0.1, "epochs": 4, "patience": 3},
                                                         lr_halve=True))
    trainer.run(train, valid)  # a high rate: an epoch fails to improve, the next (halved) does
    records = trainer.state["history"]
    halved = [r for r in records if "lr_halved_to" in r]
    assert halved and [r["lr_halved_to"] for r in halved] == [0.1 / 2 ** (i + 1) for i in range(len(halved))]
    best = min(r["valid_ppl"] for r in records)
    assert np.isclose(ppl(trainer.model, valid), best, rtol=1e-6)


def test_min_improvement_halves_after_a_slight_gain_and_keeps_it(toy):
    """rnnlm's -min-improvement: an epoch that improves the valid entropy by less than the
    ratio is kept as the best, training goes on from it at half the rate; at 1 only a worse
    epoch halves."""
    vocab, train, valid, _ = toy
    config = {**CONFIG, "lr": 0.005}
    plain = Trainer(small_model(vocab), TrainingConfig(**config, lr_halve=True))
    plain.run(train, valid)
    ppls = [r["valid_ppl"] for r in plain.state["history"]]
    assert ppls == sorted(ppls, reverse=True) and not any("lr_halved_to" in r for r in plain.state["history"])
    # a ratio between the first gain and the later, smaller ones (on the entropy, as rnnlm)
    entropies = np.log(ppls)
    ratio = float(np.sqrt(entropies[0] / entropies[1] * min(entropies[1:-1] / entropies[2:])))
    assert entropies[0] / entropies[1] > ratio > max(entropies[1:-1] / entropies[2:])

    class Watched(Trainer):
        def _validate(self, record, valid):
            stop = super()._validate(record, valid)
            record["kept_in_place"] = all(np.array_equal(self.model.params[k], v) for k, v in self.best.items())
            record["bad_epochs"] = self.state["bad_epochs"]
            return stop

    trainer = Watched(small_model(vocab), TrainingConfig(**config, lr_halve=True, min_improvement=ratio))
    trainer.run(train, valid)
    records = trainer.state["history"]
    assert "lr_halved_to" not in records[0] and "lr_halved_to" not in records[1]
    slight = records[2]  # the same epoch as the plain run's third: halved, kept and trained on from
    assert slight["valid_ppl"] == ppls[2] < ppls[1] and slight["lr_halved_to"] == 0.0025
    assert slight["halved_after"] == "a slight gain" and slight["kept_in_place"] and slight["bad_epochs"] == 0
    halved = [r["lr_halved_to"] for r in records if "lr_halved_to" in r]
    assert halved == [0.005 / 2 ** (i + 1) for i in range(len(halved))]
    assert np.isclose(ppl(trainer.model, valid), min(r["valid_ppl"] for r in records), rtol=1e-6)
    for refused in ({"min_improvement": 1.003}, {"lr_halve": True, "min_improvement": 0.9},
                    {"lr_halve": True, "min_improvement": math.nan}):
        with pytest.raises(ParameterError, match="min_improvement"):
            Trainer(small_model(vocab), TrainingConfig(**config, **refused)).run(train, valid)


def test_algorithm_4_stops_at_max_samples_and_warns_once(toy):
    """Issue 21: without a cap, N doubled 100 -> 800 within one epoch of the energy
    network and training stalled; at max_samples a rise is accepted, with one warning."""
    from nplmtk.errors import NplmWarning
    from nplmtk.neural.sampling import ImportanceSampling
    vocab, train, _, _ = toy
    model = small_model(vocab)
    config = TrainingConfig(**CONFIG, criterion="is-adaptive", samples=16, max_samples=32, check_every=100)
    state = {"samples": 16}
    sampling = ImportanceSampling(model, train.windows(3), config, state)
    retries = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(4):
            sampling.begin_round(model, 3, state)
            model.params["U"] *= 3  # every block makes things worse
            retries.append(sampling.end_round(model, [(-50.0, 10, 10.0)], 120, state, last=False))
    assert state["samples"] == 32
    assert [r is None for r in retries] == [False, True, True, True]  # undone once, then kept at the cap
    assert [e["reason"] for e in sampling.events] == ["ppl rose", "check", "check", "check"]
    cap = [w for w in caught if issubclass(w.category, NplmWarning)]
    assert len(cap) == 1 and "cap of 32" in str(cap[0].message)


def test_max_samples_below_samples_is_refused(toy):
    vocab, _, _, _ = toy
    with pytest.raises(ParameterError, match="max_samples"):
        Trainer(small_model(vocab), TrainingConfig(**CONFIG, criterion="is", samples=64, max_samples=32))


def test_a_diverging_run_stops_in_one_line_and_keeps_its_last_checkpoint(toy_texts, tmp_path):
    texts, _ = toy_texts
    common = ["-arch", "lbl", "-order", 3, "-m", 8, "-text", texts / "train.txt", "-batch", 4, "-quiet",
              "-checkpoint", tmp_path / "ck", "-lm", tmp_path / "m.nplm"]
    status, _, err = run_nplm("train", *common, "-epochs", 1, "-lr", 0.01)
    assert status == 0, err
    status, _, err = run_nplm("train", *common, "-epochs", 2, "-lr", 1e4, "-resume")
    assert_one_line_error(status, err, "training diverged in epoch 2", "try a lower -lr")
    status, out, err = run_nplm("ppl", "-lm", tmp_path / "ck" / "checkpoint.nplm", "-text", texts / "valid.txt")
    assert status == 0 and "ppl=" in out, err


def test_a_checkpoint_folder_in_use_by_a_live_run_is_refused(toy_texts, tmp_path):
    """Two runs sharing a -checkpoint folder would write their checkpoints over each other's (and a
    -resume take either run's): the second is refused, naming the first; the folder is free again
    once the first ends, however it ends (the kernel drops its lock)."""
    from cli.train import CHECKPOINT_LOCK
    from nplmtk.scratch import folder_in_use
    texts, _ = toy_texts
    train = ("train", "-text", texts / "train.txt", "-order", 3, "-m", 4, "-h", 4, "-epochs", 1, "-quiet",
             "-checkpoint", tmp_path, "-checkpoint-every", 1)
    with folder_in_use(str(tmp_path), CHECKPOINT_LOCK):  # this process, as the run that writes there
        status, _, err = run_nplm(*train)
        assert_one_line_error(status, err, f"{tmp_path}: in use by process {os.getpid()}, which writes its files here")
    status, _, err = run_nplm(*train)
    assert status == 0, err
    assert (tmp_path / "checkpoint.nplm").exists()


def test_resume_alone_continues_the_run_with_the_checkpoints_settings(toy_texts, tmp_path):
    """-resume with no option of the network or its training continues the run as it began
    (its architecture, dropout, optimizer and rate, which the checkpoint keeps): the model of
    one run straight through (it once failed: the defaults, an MLP's, do not fit an LSTM)."""
    from nplmtk.models import load
    texts, _ = toy_texts
    files = ["-text", texts / "train.txt", "-valid", texts / "valid.txt", "-quiet", "-threads", 1]
    options = ["-arch", "lstm", "-m", 8, "-h", 8, "-dropout", 0.3, "-optimizer", "adam", "-lr", 0.01, "-bptt", 5,
               "-streams", 2]
    for args in ([*options, "-epochs", 2, "-lm", tmp_path / "straight.nplm"],
                 [*options, "-epochs", 1, "-checkpoint", tmp_path / "ck", "-lm", tmp_path / "first.nplm"],
                 ["-epochs", 2, "-checkpoint", tmp_path / "ck", "-resume", "-lm", tmp_path / "resumed.nplm"]):
        status, _, err = run_nplm("train", *files, *args)
        assert status == 0, err
    straight, resumed = load(str(tmp_path / "straight.nplm")), load(str(tmp_path / "resumed.nplm"))
    assert resumed.arch == "lstm" and straight.params.keys() == resumed.params.keys()
    for name in straight.params:
        assert np.array_equal(straight.params[name], resumed.params[name]), name
    status, _, err = run_nplm("train", *files, "-arch", "mlp", "-checkpoint", tmp_path / "ck", "-resume", "-lm",
                              tmp_path / "other.nplm")
    assert_one_line_error(status, err, "-arch mlp contradicts the checkpoint's network (arch lstm)")
    status, _, err = run_nplm("train", *files, "-recipe", "fast", "-checkpoint", tmp_path / "ck", "-resume", "-lm",
                              tmp_path / "other.nplm")
    assert_one_line_error(status, err, "-recipe fast's -m 256 contradicts the checkpoint's network (features 8)")
