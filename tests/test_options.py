"""Every numeric option of every subcommand has a domain, checked as the command line is
parsed (issue 33, item 4): a value outside it is one line naming the option, exit 2."""
import importlib
import math

import click
import pytest

from cli.main import SUBCOMMANDS, main
from cli.options import BlockValues, ByteSize, Integer, Real, RealList
from conftest import run_main

C_INT = "2147483647"  # the largest size or count the kernels take (a C int)
SEEDS = "[0, 4294967295]"  # SRILM's unsigned seeds; numpy seeds no negative number

# (subcommand, option) -> its domain, as the option's type writes it. A numeric option
# missing here, or without a domain of its own, fails test_every_numeric_option_has_its_domain.
DOMAINS = {
    ("vocab", "min-count"): f"[1, {C_INT}]",
    ("vocab", "max-size"): f"[0, {C_INT}]",
    ("ngram-count", "order"): "[1, 10]",
    ("ngram-count", "cdiscount"): "[0, 1]",
    ("ngram-count", "addsmooth"): "[0, inf)",
    ("ngram-count", "em-iterations"): f"[1, {C_INT}]",
    ("ngram-count", "prune"): "[0, inf)",
    ("ngram-count", "minprune"): f"[2, {C_INT}]",
    ("ngram-count", "debug"): "[0, 4]",
    ("ngram-count", "memory"): "[1M, 1024T]",
    **{("ngram-count", f"gt{k}min"): f"[1, {C_INT}]" for k in range(1, 11)},
    **{("ngram-count", f"gt{k}max"): "[0, 1000]" for k in range(1, 11)},  # Good-Turing's counts of counts
    ("ngram-class", "numclasses"): f"[1, {C_INT}]",
    ("ngram-class", "passes"): f"[1, {C_INT}]",
    ("ngram-class", "tolerance"): "[0, inf)",
    ("ngram-class", "seed"): SEEDS,
    ("ppl", "order"): f"[1, {C_INT}]",
    ("ppl", "debug"): "[0, 2]",
    ("ppl", "lambda"): "[0, 1] or auto",
    ("ppl", "bayes"): "[0, 0]",
    ("ppl", "prune"): "[0, inf)",
    ("ppl", "minprune"): f"[2, {C_INT}]",
    ("ppl", "prune-to-entries"): f"[1, {C_INT}]",
    ("ppl", "unk-prob"): "(-inf, 0]",
    ("ppl", "gen"): f"[0, {C_INT}]",
    ("ppl", "seed"): "[-2147483648, 4294967295]",  # SRILM's -gen takes -seed -5
    **{("ppl", f"mix-lambda{i}"): "[0, 1]" for i in range(2, 10)},
    ("train-nplm", "order"): "[2, 20]",
    ("train-nplm", "m"): f"[1, {C_INT}]",
    ("train-nplm", "h"): f"[0, {C_INT}]",
    ("train-nplm", "layers"): "[1, 8]",
    ("train-nplm", "mos"): "[0, 64]",
    ("train-nplm", "dropout-mos"): "[0, 0.99]",
    ("train-nplm", "classes"): f"[1, {C_INT}]",
    ("train-nplm", "bptt"): f"[1, {C_INT}]",
    ("train-nplm", "streams"): f"[1, {C_INT}]",
    ("train-nplm", "dropout"): "[0, 0.99]",
    **{("train-nplm", name): "[0, 0.99]" for name in ("dropout-input", "dropout-hidden", "dropout-output",
                                                      "dropout-embedding", "weight-drop")},
    ("train-nplm", "ar"): "[0, inf)",
    ("train-nplm", "tar"): "[0, inf)",
    ("train-nplm", "nonmono"): f"[1, {C_INT}]",
    ("train-nplm", "clip"): "[0, inf)",
    ("train-nplm", "samples"): f"[1, {C_INT}]",
    ("train-nplm", "max-samples"): f"[1, {C_INT}]",
    ("train-nplm", "warmup"): f"[0, {C_INT}]",
    ("train-nplm", "lr-horizon"): f"[0, {C_INT}]",
    ("train-nplm", "heads"): f"[1, {C_INT}]",
    ("train-nplm", "ff"): f"[1, {C_INT}]",
    ("train-nplm", "memory"): f"[0, {C_INT}]",
    ("train-nplm", "dropout-attention"): "[0, 0.99]",
    ("train-nplm", "check-every"): f"[1, {C_INT}]",
    ("train-nplm", "ess-min"): "[0, inf)",
    ("train-nplm", "sync-every"): f"[1, {C_INT}]",
    ("train-nplm", "epochs"): f"[0, {C_INT}]",
    ("train-nplm", "batch"): f"[1, {C_INT}]",
    ("train-nplm", "lr"): "(0, inf)",
    ("train-nplm", "momentum"): "[0, 1)",
    ("train-nplm", "block-lr"): "each [0, inf)",  # 0 holds a block still, as the trainer allows
    ("train-nplm", "block-momentum"): "each [0, 1)",
    ("train-nplm", "block-weight-decay"): "each [0, inf)",
    ("train-nplm", "lr-decay"): "[0, inf)",
    ("train-nplm", "min-improvement"): "[1, inf)",
    ("train-nplm", "weight-decay"): "[0, inf)",
    ("train-nplm", "patience"): f"[1, {C_INT}]",
    ("train-nplm", "max-time"): "[0, inf)",
    ("train-nplm", "seed"): SEEDS,
    ("train-nplm", "threads"): f"[1, {C_INT}]",
    ("train-nplm", "checkpoint-every"): f"[0, {C_INT}]",
    ("train-nplm", "min-count"): f"[1, {C_INT}]",
    ("toy-corpus", "sentences"): f"[1, {C_INT}]",
    ("toy-corpus", "seed"): SEEDS,
    ("mix", "lambda"): "each [0, 1]",
    ("mix", "bins"): f"[1, {C_INT}]",
    ("mix", "iterations"): f"[1, {C_INT}]",
    ("mix", "precision"): "[0, inf)",
    ("mix", "debug"): "[0, 1]",
    ("generate", "n"): f"[0, {C_INT}]",
    ("generate", "seed"): SEEDS,
    ("generate", "temperature"): "(0, inf)",
    ("generate", "max-words"): "[1, 50000]",  # SRILM's -gen stops there
    ("generate", "batch"): "[1, 1048576]",
    ("convert-lm", "order"): "[1, 10]",
    ("convert-lm", "sample-words"): f"[0, {C_INT}]",
    ("convert-lm", "seed"): SEEDS,
    ("convert-lm", "batch"): "[1, 1048576]",
    ("convert-lm", "memory"): "[1M, 1024T]",
    ("convert-lm", "lambda"): "[0, 1]",
    ("convert-lm", "prune"): "[0, inf)",
    ("convert-lm", "prune-to-entries"): f"[1, {C_INT}]",
    ("convert-lm", "minprune"): f"[2, {C_INT}]",
    ("embeddings", "count"): f"[1, {C_INT}]",
    ("plot", "words"): f"[2, {C_INT}]",
    ("rescore", "lm-weight"): "(-inf, inf)",
    ("rescore", "word-penalty"): "(-inf, inf)",
    ("lattice-tool", "approx-order"): "[2, 20] or auto",
    ("lattice-tool", "htk-acscale"): "[-1e+30, 1e+30]",
    ("lattice-tool", "htk-lmscale"): "[-1e+30, 1e+30]",
    ("lattice-tool", "htk-wdpenalty"): "[-1e+30, 1e+30]",
    ("lattice-tool", "nbest-decode"): "[0, 2147483647]",
    ("lattice-tool", "order"): "[1, 10]",
    ("lattice-tool", "posterior-scale"): "(0, inf)",
    ("ppl", "cache"): f"[0, {C_INT}] or auto",
    ("ppl", "cache-lambda"): "[0, 1]",
    ("ppl", "neural-cache"): f"[0, {C_INT}] or auto",
    ("ppl", "neural-cache-theta"): "[0, inf)",
    ("ppl", "neural-cache-lambda"): "[0, 1]",
    ("ppl", "dynamic-eval"): f"[0, {C_INT}] or auto",
    ("ppl", "dynamic-lr"): "(0, inf)",
    ("ppl", "dynamic-decay"): "[0, 1)",
    ("ppl", "dynamic-rms-words"): f"[1, {C_INT}]",
    ("ppl", "dynamic-epsilon"): "(0, inf)",
    ("ppl", "tune-max-time"): "(0, inf)",
    ("ppl", "server-port"): "[1, 65535]",
    ("ppl", "server-maxclients"): f"[1, {C_INT}]",
}


def numeric_options():
    """(subcommand, option name without its dash, click parameter) of every option whose
    value is a number or holds numbers: ours (they have a domain) or click's own number types."""
    for subcommand, module in SUBCOMMANDS.items():
        for param in importlib.import_module(f"cli.{module}").command.params:
            if hasattr(param.type, "domain") or isinstance(param.type, click.types._NumberParamTypeBase):
                yield subcommand, param.opts[0].lstrip("-"), param


OPTIONS = {(subcommand, name): param for subcommand, name, param in numeric_options()}


def test_every_numeric_option_has_its_domain():
    declared = {key: getattr(param.type, "domain", "none: click's own number type")
                for key, param in OPTIONS.items()}
    assert declared == DOMAINS


@pytest.mark.parametrize("key", sorted(DOMAINS), ids=" ".join)
def test_every_default_is_in_its_domain(key):
    param = OPTIONS[key]
    if isinstance(param.default, (int, float, str)):  # not None, nor click's "no default"
        param.type.convert(param.default, param, None)  # raises if outside


def outside(option_type):
    """Values an option of this type must refuse: out of range, not finite, not numbers."""
    junk = ["", "abc", "nan", "inf", "-inf", "1e400", "\x00", "1\n2", "a" * 300]
    if isinstance(option_type, Integer):
        return junk + [option_type.low - 1, option_type.high + 1, "1.5", "1e3", "0x10", 2 ** 70, "9" * 5000]
    if isinstance(option_type, Real):
        # the next float past a closed bound (low - 1 is low itself at 1e30)
        below = [option_type.low] if option_type.low_open else \
            [math.nextafter(option_type.low, -math.inf)] if option_type.low > -1e300 else []
        above = [option_type.high] if option_type.high_open else \
            [math.nextafter(option_type.high, math.inf)] if option_type.high < 1e300 else []
        return junk + below + above + ["1e308" + "0"]
    if isinstance(option_type, RealList):
        return junk + ["0.5 nan", "0.5,,x", f"0.5 {option_type.element.high + 1}", f"{option_type.element.low - 1}"]
    if isinstance(option_type, BlockValues):
        return [f"C={value}" for value in junk] + ["C", "=1", "C=-1", "C=1,A=nan", "C=0.1,,A"]
    assert isinstance(option_type, ByteSize)
    return junk + ["0", "1K", "1023K", "2000T", "-2G", "1e400G"]


@pytest.mark.parametrize("key", sorted(DOMAINS), ids=" ".join)
def test_a_value_outside_the_domain_is_one_line_naming_the_option(capsys, key):
    subcommand, name = key
    for value in outside(OPTIONS[key].type):
        status, out, err = run_main(capsys, subcommand, f"-{name}", value)
        assert status == 2 and out == "", (value, err)
        assert len(err.splitlines()) == 1 and err.endswith("\n") and "Traceback" not in err, (value, err)
        assert err.startswith(f"nplm {subcommand}: -{name} "), (value, err)
        assert "must be" in err, (value, err)


@pytest.mark.parametrize("args, message", [
    (["train-nplm", "-lr", "nan"], "nplm train-nplm: -lr nan: must be a finite number above 0"),
    (["train-nplm", "-lr", "inf"], "nplm train-nplm: -lr inf: must be a finite number above 0"),
    (["train-nplm", "-lr", "-1"], "nplm train-nplm: -lr -1: must be a finite number above 0"),
    (["train-nplm", "-lr-decay", "-1"], "nplm train-nplm: -lr-decay -1: must be a finite number at least 0"),
    (["train-nplm", "-weight-decay", "nan"], "nplm train-nplm: -weight-decay nan: must be a finite number at least 0"),
    (["train-nplm", "-clip", "nan"], "nplm train-nplm: -clip nan: must be a finite number at least 0"),
    (["train-nplm", "-seed", "-1"], "nplm train-nplm: -seed -1: must be an integer in [0, 4294967295]"),
    (["train-nplm", "-seed", 2 ** 70], f"nplm train-nplm: -seed {2 ** 70}: must be an integer in [0, 4294967295]"),
    (["train-nplm", "-dropout", "0.99999999"], "nplm train-nplm: -dropout 0.99999999: must be a number in [0, 0.99]"),
    (["train-nplm", "-block-lr", "C=0.1,A=x"],
     "nplm train-nplm: -block-lr A=x: must be BLOCK=VALUE with VALUE in [0, inf)"),
    (["ppl", "-lambda", "nan"], "nplm ppl: -lambda nan: must be a number in [0, 1] or auto"),
    (["ppl", "-unk-prob", "5"], "nplm ppl: -unk-prob 5: must be a finite number at most 0"),
    (["ppl", "-bayes", "1"], "nplm ppl: -bayes 1: must be 0"),
    (["ngram-count", "-prune", "nan"], "nplm ngram-count: -prune nan: must be a finite number at least 0"),
    (["ngram-count", "-gt3min", "0"], "nplm ngram-count: -gt3min 0: must be an integer in [1, 2147483647]"),
    (["ngram-count", "-memory", "1e400"], "nplm ngram-count: -memory 1e400: must be a size in [1M, 1024T] "
                                          "(say 512M or 2G)"),
    (["generate", "-temperature", "0"], "nplm generate: -temperature 0: must be a finite number above 0"),
    (["generate", "-seed", "-1"], "nplm generate: -seed -1: must be an integer in [0, 4294967295]"),
    (["rescore", "-lm-weight", "nan"], "nplm rescore: -lm-weight nan: must be a finite number"),
    (["mix", "-lambda", "nan"], "nplm mix: -lambda nan: must be numbers each in [0, 1]"),
    (["mix", "-precision", "nan"], "nplm mix: -precision nan: must be a finite number at least 0"),
    (["vocab", "-min-count", "1\n2"], "nplm vocab: -min-count '1\\n2': must be an integer in [1, 2147483647]"),
])
def test_the_issues_cases_and_their_messages(capsys, args, message):
    assert run_main(capsys, *args) == (2, "", message + "\n")


# -- values inside the domains are taken ---------------------------------------------------

@pytest.fixture(scope="module")
def kn3(tmp_path_factory):
    """A trigram model of the toy corpus, and the text: (model, text)."""
    from nplmtk.toy import ToyGrammar
    folder = tmp_path_factory.mktemp("options")
    text = folder / "train.txt"
    text.write_text("\n".join(" ".join(s) for s in ToyGrammar().sentences(200, 1)) + "\n")
    assert main(["ngram-count", "-text", str(text), "-order", "3", "-lm", str(folder / "kn3.arpa")]) is None
    return folder / "kn3.arpa", text


def test_generate_at_the_tiniest_temperatures_draws_the_most_likely_words(capsys, kn3):
    """-temperature 1e-30 raised every probability to 1e30, all 0: a NaN traceback. Sampling
    from the largest probability in log space, it tends to the argmax, every time."""
    model, _ = kn3
    lines = set()
    for temperature in ("1e-30", "5e-324", "1e-3"):
        status, out, err = run_main(capsys, "generate", "-lm", model, "-n", 5, "-seed", 4294967295,
                                    "-temperature", temperature)
        assert status == 0 and err == "", err
        lines |= set(out.splitlines())
    assert len(lines) == 1
    status, out, err = run_main(capsys, "generate", "-lm", model, "-n", 5, "-temperature", "1e300")
    assert status == 0 and len(out.splitlines()) == 5, err


def test_the_edges_of_the_domains_are_taken(capsys, kn3, tmp_path):
    model, text = kn3
    for args in (["ppl", "-lm", model, "-text", text, "-mix-lm", model, "-lambda", 0, "-unk-prob", 0, "-prune", 0],
                 ["ppl", "-lm", model, "-text", text, "-mix-lm", model, "-lambda", 1, "-unk-prob", -99, "-bayes", 0],
                 ["ppl", "-lm", model, "-gen", 2, "-seed", -2147483648],
                 ["mix", "-lm", model, "-lm", model, "-text", text, "-lambda", "0,1", "-precision", 0],
                 ["ngram-count", "-text", text, "-order", 10, "-memory", "1M", "-cdiscount", 1, "-gt3min", 2147483647,
                  "-lm", tmp_path / "cd.arpa"],
                 ["ngram-count", "-text", text, "-gtdiscount", "-gt1max", 1000, "-gt2max", 0,
                  "-lm", tmp_path / "gt.arpa"],
                 ["rescore", "-lm", model, "-nbest", tmp_path / "list.nbest", "-lm-weight", -1e300,
                  "-word-penalty", 1e300],
                 ["toy-corpus", "-sentences", 1, "-seed", 0]):
        (tmp_path / "list.nbest").write_text("-10 -5 3 the cat sits\n-12 -4 2 a dog\n")
        status, out, err = run_main(capsys, *args)
        assert status == 0, (args, err)


def test_the_lstm_trains_with_the_largest_seed(capsys, toy_texts, tmp_path):
    """-seed 2**70 crashed the LSTM's kernel (a seed of 64 bits); 2**32 - 1 is the largest taken."""
    folder, _ = toy_texts
    status, _, err = run_main(capsys, "train-nplm", "-arch", "lstm", "-text", folder / "valid.txt", "-m", 4, "-h", 4,
                              "-epochs", 1, "-streams", 2, "-seed", 4294967295, "-lr", "1e-300", "-clip", 0,
                              "-quiet", "-lm", tmp_path / "lstm.nplm")
    assert status == 0, err


def test_block_values_are_read_from_every_occurrence(capsys, toy_texts, tmp_path):
    folder, _ = toy_texts
    status, _, err = run_main(capsys, "train-nplm", "-arch", "lbl1", "-text", folder / "valid.txt", "-order", 3,
                              "-m", 4, "-epochs", 1, "-block-lr", "C=0.01,A=0", "-block-lr", "R=1e-4",
                              "-block-momentum", "C=0.5", "-quiet", "-lm", tmp_path / "lbl1.nplm")
    assert status == 0, err


def test_checkpoint_every_needs_a_checkpoint_folder(capsys, toy_texts, tmp_path):
    folder, _ = toy_texts
    assert run_main(capsys, "train-nplm", "-text", folder / "valid.txt", "-checkpoint-every", 10,
                    "-lm", tmp_path / "m.nplm") == (2, "", "nplm: -checkpoint-every needs -checkpoint DIR (where the "
                                                           "checkpoints go)\n")


@pytest.mark.parametrize("args, message", [
    (["-lr", 1000, "-weight-decay", 1, "-batch", 512],
     "nplm: -lr 1000 times -weight-decay 1 must be at most 1 (each update scales the weights by 1 - rate x decay)"),
    (["-lr", "1e300"], "nplm: -lr 1e+300 times -weight-decay 0.0001 must be at most 1 (each update scales the "
                       "weights by 1 - rate x decay)"),
    (["-arch", "lbl1", "-block-lr", "A=2", "-block-weight-decay", "A=0.6"], "nplm: -block-lr A=2 times "
     "-block-weight-decay A=0.6 must be at most 1 (each update scales the weights by 1 - rate x decay)"),
])
def test_weight_decay_times_the_rate_must_be_at_most_1(capsys, toy_texts, tmp_path, args, message):
    """-lr 1000 -weight-decay 1 -batch 512 overflowed the schedule (a traceback); -lr 1.5
    -weight-decay 1 flipped the weights' signs at every update."""
    folder, _ = toy_texts
    assert run_main(capsys, "train-nplm", "-text", folder / "valid.txt", "-lm", tmp_path / "m.nplm", *args) \
        == (2, "", message + "\n")


def test_a_regulariser_that_makes_training_diverge_is_named(capsys, toy_texts, tmp_path):
    """-ar 1e300 made training diverge and the message blamed -lr alone (its updates are all skipped, their
    gradient not finite: the epoch is refused as diverged, not kept)."""
    folder, _ = toy_texts
    status, out, err = run_main(capsys, "train-nplm", "-text", folder / "valid.txt", "-lm", tmp_path / "m.nplm",
                                "-arch", "lstm", "-m", 4, "-h", 3, "-epochs", 1, "-bptt", 5, "-ar", 1e300, "-quiet")
    assert (status, out, err) == (2, "", "nplm: training diverged in epoch 1: no update's gradient was finite "
                                         "(try a lower -lr or -ar)\n")


def test_a_rate_that_makes_training_diverge_is_one_line(capsys, toy_texts, tmp_path):
    """-lr 9999 took the mean log-likelihood below -709 nats: its perplexity overflowed
    math.exp (an OverflowError traceback) instead of reporting the divergence."""
    folder, _ = toy_texts
    status, out, err = run_main(capsys, "train-nplm", "-text", folder / "valid.txt", "-lm", tmp_path / "m.nplm",
                                "-m", 4, "-h", 3, "-epochs", 1, "-lr", 9999, "-weight-decay", 0, "-quiet")
    assert (status, out, err) == (2, "", "nplm: training diverged in epoch 1: the training perplexity is not finite "
                                         "(try a lower -lr)\n")


# -- an option that only tunes another, given without it, is refused (issue 49) ---------------

@pytest.mark.parametrize("args,message", [
    (["-cache-lambda", "0.3"], "-cache-lambda applies to -cache, which is not given: it would do nothing"),
    (["-neural-cache-lambda", "0.1"], "-neural-cache-lambda applies to -neural-cache, which is not given"),
    (["-neural-cache-theta", "0.1"], "-neural-cache-theta applies to -neural-cache, which is not given"),
    (["-dynamic-lr", "1e10"], "-dynamic-lr applies to -dynamic-eval, which is not given"),
    (["-dynamic-decay", "0.1"], "-dynamic-decay applies to -dynamic-eval, which is not given"),
])
def test_a_tuning_option_without_its_main_option_is_refused(capsys, kn3, args, message):
    model, text = kn3
    status, out, err = run_main(capsys, "ppl", "-lm", model, "-text", text, *args)
    assert status == 2 and out == "" and message in err and len(err.splitlines()) == 1, err


def test_the_tuning_options_with_their_main_option_are_taken(capsys, kn3):
    model, text = kn3
    status, out, err = run_main(capsys, "ppl", "-lm", model, "-text", text, "-cache", 10, "-cache-lambda", 0.3)
    assert status == 0 and "ppl=" in out, err


def test_nonmono_without_nt_asgd_is_refused(capsys, kn3, tmp_path):
    _, text = kn3
    status, out, err = run_main(capsys, "train-nplm", "-arch", "lstm", "-text", text, "-nonmono", 3,
                                "-optimizer", "sgd", "-lm", tmp_path / "x.nplm")
    assert status == 2 and "-nonmono applies to -optimizer nt-asgd" in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "x.nplm").exists()
