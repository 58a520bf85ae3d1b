"""Crafted model files with valid checksums (issue 20, item 1): every one is refused in one
line naming the file, exit 2, before a kernel sees its arrays (the kernels do not check
sizes: these files used to crash `nplm ppl` with SIGSEGV, print nan, or a traceback)."""
import json
import struct
import zlib

import numpy as np
import pytest

from conftest import assert_one_line_error, run_nplm
from nplmtk import container
from nplmtk.models import ARCHITECTURES
from nplmtk.vocab import Vocabulary

VOCAB = Vocabulary(["a", "b", "c", "d"])


def saved(tmp_path, arch="mlp", arrays=None, meta=None, vocab=VOCAB, kind=None, **shape):
    """A model of `arch` written with its arrays and meta changed as given."""
    model_class = ARCHITECTURES[arch]
    if not model_class.RECURRENT:
        shape["order"] = shape.pop("order", 4)
    model = model_class.initial(VOCAB, features=3, hidden=shape.pop("hidden", 5), seed=1, **shape)
    params = {**model.params, **(arrays or {})}
    params = {k: v for k, v in params.items() if v is not None}
    file_meta = {**model.file_meta(), **(meta or {})}
    file_meta = {k: v for k, v in file_meta.items() if v is not None}
    path = tmp_path / "m.nplm"
    container.save(str(path), kind or model.kind, params, meta=file_meta, vocab=vocab)
    return path


def raw_container(tmp_path, body):
    """A container whose header is `body` (bytes) with a valid checksum, and no arrays."""
    path = tmp_path / "raw.nplm"
    path.write_bytes(struct.pack("<8sIII4x", container.MAGIC, 1, len(body), zlib.crc32(body)) + body)
    return path


def refused(tmp_path, path, *fragments):
    (tmp_path / "t.txt").write_text("a b c d\nd c b a\n")
    status, out, err = run_nplm("ppl", "-lm", path, "-text", tmp_path / "t.txt")
    assert_one_line_error(status, err, str(path), *fragments)
    assert out == ""


@pytest.mark.parametrize("arch, change, fragment", [
    ("mlp", {"arrays": {"b": np.zeros(9, np.float32)}}, "array 'b' is float32 (9,), its shape says float32 (7,)"),
    ("mlp", {"arrays": {"U": np.zeros((7, 4), np.float32)}}, "array 'U'"),
    ("mlp", {"arrays": {"C": np.zeros((7, 3), np.float64)}}, "array 'C' is float64"),
    ("mlp", {"arrays": {"H": None}}, "mlp network with no array 'H'"),
    ("mlp", {"arrays": {"extra": np.zeros(3, np.float32)}}, "an unexpected array 'extra'"),
    ("mlp", {"arrays": {"d": np.array([1, np.inf, 0, 0, 0], np.float32)}}, "array 'd' holds non-finite values"),
    # issue 33, item 5: finite, but no trainer's (1e20 in C gave ppl 103.9 where the model gives 65.0)
    ("mlp", {"arrays": {"C": np.full((7, 3), 0.5, np.float32) * np.array([[1], [1], [1], [1], [1], [2e20], [1]],
                                                                          np.float32)}},
     "mlp network: array 'C' holds 1e+20 at [5, 0], beyond the 10000 that no trained parameter nears"),
    ("lstm", {"arrays": {"b0": np.full(20, -2e4, np.float32)}}, "array 'b0' holds -20000 at [0]"),
    ("mlp", {"vocab": Vocabulary([f"w{i}" for i in range(30)])}, "array 'C'"),
    ("mlp", {"meta": {"order": 20}}, "array 'H'"),
    ("mlp", {"meta": {"order": 99}}, "order 99"),
    ("mlp", {"meta": {"order": "4"}}, "order '4'"),
    ("mlp", {"meta": {"features": None}}, "features None"),
    ("mlp", {"meta": {"hidden": -5}}, "hidden -5"),
    ("mlp", {"meta": {"direct": 1}}, "direct 1"),
    ("mlp", {"meta": {"activation": "softsign"}}, "activation 'softsign'"),
    ("mlp", {"vocab": None}, "without a vocabulary"),
    ("energy", {"arrays": {"H": np.zeros((5, 9), np.float32)}}, "array 'H'"),
    ("lbl", {"arrays": {"R": np.zeros((7, 4), np.float32)}}, "array 'R'"),
    ("lbl", {"meta": {"order": 20}}, "array 'C'"),
    ("lbl1", {"arrays": {"gate_bias": np.zeros(5, np.float32)}}, "array 'gate_bias'"),
    ("lbl3", {"arrays": {"S": None}}, "no array 'S'"),
    ("lbl2", {"meta": {"hidden": 7}}, "array 'A'"),
    ("rnn", {"arrays": {"W0": np.zeros((5, 6), np.float32)}}, "array 'W0' is float32 (5, 6)"),
    ("lstm", {"arrays": {"U0": np.zeros((5, 3), np.float32)}}, "array 'U0' is float32 (5, 3), its shape says "
                                                                 "float32 (20, 3)"),
    ("lstm", {"meta": {"order": 5}}, "lstm network with an order (5): recurrent models have none"),
    ("lstm", {"meta": {"reset_state": "always"}}, "reset_state 'always' (expected sentence or never)"),
    ("rnn", {"meta": {"layers": "2"}}, "layers '2'"),
    ("lstm", {"meta": {"layers": 9}}, "an unexpected array"),
    ("lstm", {"meta": {"layers": 2}}, "no array 'U1'"),
    ("lstm", {"meta": {"tie": True}}, "an unexpected array"),
    ("lstm", {"meta": {"peephole": True}}, "no array 'P0'"),
    ("rnn", {"meta": {"peephole": True}}, "an unexpected array"),
    ("rnn", {"output": "class", "classes": 3, "counts": [0, 0, 5, 4, 3, 2, 1],
             "meta": {"class_of": [0, 1, 2, 2, 2, 2, 9]}},
     "rnn network whose class_of is not one of its 3 classes for each of its 7 words"),
    ("rnn", {"output": "class", "classes": 3, "counts": [0, 0, 5, 4, 3, 2, 1], "meta": {"class_of": None}}, "class_of"),
    ("lstm", {"output": "class", "classes": 2, "counts": [0, 0, 5, 4, 3, 2, 1], "arrays": {"Vc": None}},
     "no array 'Vc'"),
    ("mlp", {"output": "class", "classes": 3, "counts": [0, 0, 5, 4, 3, 2, 1], "meta": {"class_of": [0, 1, 1, 9]}},
     "mlp network whose class_of is not one of its 3 classes for each of its 7 words"),
    ("mlp", {"output": "class", "classes": 2, "counts": [0, 0, 5, 4, 3, 2, 1], "arrays": {"bc": None}},
     "no array 'bc'"),
])
def test_a_network_whose_arrays_break_its_promises_is_refused(tmp_path, arch, change, fragment):
    refused(tmp_path, saved(tmp_path, arch, **change), fragment)


def test_a_network_whose_vocabulary_holds_white_space_is_refused(tmp_path):
    path = saved(tmp_path, "mlp", vocab=Vocabulary(["a", "b", "c\u3000d", "d e"]))
    refused(tmp_path, path, "vocabulary: word 6 ('d e') holds white space")  # U+3000 stays inside a word, as in texts
    assert run_nplm("ppl", "-lm", saved(tmp_path, "mlp", vocab=Vocabulary(["a", "b", "c\u3000d", "d"])),
                    "-text", tmp_path / "t.txt")[0] == 0


def test_an_unknown_word_a_reader_would_refuse_is_refused_before_writing(tmp_path):
    """nplm wrote '-map-unk "my unk"' into ARPA and binary models that it then refused."""
    (tmp_path / "t.txt").write_text("a b c d\nd c b a\n")
    status, _, err = run_nplm("ngram-count", "-text", tmp_path / "t.txt", "-order", 2, "-unk", "-map-unk", "my unk",
                              "-lm", tmp_path / "m.arpa", "-write-bin-lm", tmp_path / "m.nplm")
    assert_one_line_error(status, err, "-map-unk 'my unk' is not one word: no text can hold it")
    assert not (tmp_path / "m.arpa").exists() and not (tmp_path / "m.nplm").exists()


def test_a_checkpoint_is_checked_as_its_network(tmp_path):
    path = saved(tmp_path, "lbl", arrays={"best.b": np.zeros(3, np.float32)}, kind="nplm-checkpoint")
    refused(tmp_path, path, "lbl network with no array 'C'")  # a best set of b alone
    path = saved(tmp_path, "mlp", meta={"arch": ["mlp"]}, kind="nplm-checkpoint")
    refused(tmp_path, path, "architecture ['mlp'] is not supported")


def header(**changes):
    array = {"name": "b", "dtype": "<f4", "shape": [7], "offset": 128, "nbytes": 28, "crc32": 0}
    base = {"kind": "nplm-mlp", "meta": {}, "arrays": [array], "vocab": None, "file_size": 192}
    for key, value in changes.items():
        if key.startswith("array_"):
            array[key[len("array_"):]] = value
        else:
            base[key] = value
    return json.dumps(base).encode()


@pytest.mark.parametrize("body, fragment", [
    (b"[" * 100000 + b"]" * 100000, "not JSON"),
    (b"\xff\xfe", "not JSON"),
    (b"[1, 2]", "kind, meta and arrays"),
    (header(meta=None), "kind, meta and arrays"),
    (header(file_size="big"), "file_size"),
    (header(array_dtype="<f2"), "array 'b': dtype and shape"),
    (header(array_dtype="O"), "array 'b': dtype and shape"),
    (header(array_shape=[-7]), "array 'b': dtype and shape"),
    (header(array_nbytes=12), "array 'b': its bytes"),
    (header(array_offset=10 ** 12), "array 'b': its bytes"),
    (header(vocab={"words": [1, 2]}), "vocab"),
    (header(arrays=[], file_size=0, vocab={"words": ["a", "a"], "unk": "<unk>"}),
     "vocabulary: vocabulary has duplicate words"),
    (header(arrays=[], file_size=0, vocab={"words": ["a"], "unk": "<s>"}), "vocabulary: unk cannot be <s>"),
    # issue 33, item 5: words that no text can hold, as the tokeniser splits at white space
    (header(arrays=[], file_size=0, vocab={"words": ["a", "b c"], "unk": "<unk>"}),
     "vocabulary: word 4 ('b c') holds white space, so no text can hold it as one word"),
    (header(arrays=[], file_size=0, vocab={"words": ["a\tb"], "unk": "<unk>"}), "word 3 ('a\\tb') holds white space"),
    (header(arrays=[], file_size=0, vocab={"words": ["a"], "unk": "<un k>"}),
     "vocabulary: unk '<un k>' is not one word: no text can hold it"),
    (header(arrays=[], file_size=0, vocab={"words": ["a", ""], "unk": "<unk>"}), "vocabulary: word 4 ('') is empty"),
])
def test_a_malformed_header_is_refused(tmp_path, body, fragment):
    refused(tmp_path, raw_container(tmp_path, body), fragment)


@pytest.mark.parametrize("command", [
    ["train", "-text", "T", "-order", 3, "-m", 4, "-h", 4, "-log", "SIDE", "-lm", "OUT"],
    ["train", "-text", "T", "-order", 3, "-m", 4, "-h", 4, "-lm", "SIDE", "-log", "OUT"],
    ["ngram-count", "-text", "T", "-order", 2, "-write", "SIDE", "-lm", "OUT"],
    ["vocab", "-text", "T", "-write-counts", "SIDE", "-write-vocab", "OUT"],
    ["mix", "-lm", "OK", "-lm", "OK", "-text", "T", "-write", "OUT"],
])
def test_an_output_that_cannot_be_written_is_refused_before_the_work(tmp_path, command):
    """Issue 20, item 7: a typo in an output's folder used to cost the whole run (the
    other outputs were written, the report printed, then the error)."""
    (tmp_path / "t.txt").write_text("a b c d\nd c b a\n" * 50)
    assert run_nplm("ngram-count", "-text", tmp_path / "t.txt", "-order", 2, "-lm", tmp_path / "ok.arpa")[0] == 0
    side = tmp_path / "side"
    for out, message in ((tmp_path / "missing" / "out", f"{tmp_path / 'missing'} does not exist"),
                         (tmp_path, "is a directory, not a file")):
        files = {"T": tmp_path / "t.txt", "OK": tmp_path / "ok.arpa", "OUT": out, "SIDE": side}
        status, stdout, err = run_nplm(*[files.get(a, a) if isinstance(a, str) else a for a in command])
        assert_one_line_error(status, err, message)
        assert stdout == "" and not side.exists()


def mixture_file(path, components, vocab):
    from nplmtk.mixture import Mixture
    weights = np.full((1, len(components)), 1 / len(components))
    container.save(str(path), Mixture.kind, {"weights": weights}, meta={"components": components}, vocab=vocab)
    return path


@pytest.fixture
def arpa(tmp_path):
    from nplmtk.models import load
    (tmp_path / "t.txt").write_text("a b c d\nd c b a\n")
    assert run_nplm("ngram-count", "-text", tmp_path / "t.txt", "-order", 2, "-lm", tmp_path / "a.arpa")[0] == 0
    return tmp_path / "a.arpa", load(str(tmp_path / "a.arpa")).vocab


@pytest.mark.parametrize("component, allow, fragment", [
    ("/etc/passwd", False, "component '/etc/passwd' lies outside the mixture's folder: give -allow-paths"),
    ("../../etc/passwd", False, "component '../../etc/passwd' lies outside the mixture's folder"),
    ("/dev/zero", True, "component '/dev/zero' is not a regular file"),
    ("fifo", False, "component 'fifo' is not a regular file"),
    ("nothing-here", False, "component 'nothing-here': No such file or directory"),
])
def test_mixture_components_stay_in_their_folder_and_are_regular_files(tmp_path, arpa, component, allow, fragment):
    """Issue 20, item 2: a mixture file used to open any path (and hang on a FIFO, or read
    /dev/zero until memory ran out)."""
    import os
    os.mkfifo(tmp_path / "fifo")
    mix = mixture_file(tmp_path / "m.mix", ["a.arpa", component], arpa[1])
    status, out, err = run_nplm("ppl", "-lm", mix, "-text", tmp_path / "t.txt", *(["-allow-paths"] if allow else []))
    assert_one_line_error(status, err, str(mix), fragment)


def test_a_chain_of_mixtures_loads_each_file_once_and_stops_at_a_depth_limit(tmp_path, arpa):
    """Issue 20, item 2: 25 mixtures each naming the previous one twice took days."""
    from nplmtk.mixture import MAX_DEPTH
    previous = "a.arpa"
    for depth in range(1, 26):
        mixture_file(tmp_path / f"m{depth}.mix", [previous, previous], arpa[1])
        previous = f"m{depth}.mix"
    status, out, err = run_nplm("ppl", "-lm", tmp_path / f"m{MAX_DEPTH}.mix", "-text", tmp_path / "t.txt")
    assert status == 0 and "ppl=" in out, err
    status, _, err = run_nplm("ppl", "-lm", tmp_path / "m25.mix", "-text", tmp_path / "t.txt")
    assert_one_line_error(status, err, f"mixtures nested more than {MAX_DEPTH} deep")


@pytest.mark.parametrize("value, fragment", [
    ("5", "log10 probability 5 above 0"), ("1e300", "bad probability '1e300'"),
    ("0x1p3", "bad probability '0x1p3'"), ("nan", "bad probability 'nan'"), ("-inf", "bad probability '-inf'"),
    ("-1e39", "bad probability '-1e39'"),
])
def test_arpa_values_outside_their_domain_are_refused_with_their_line(tmp_path, arpa, value, fragment):
    """Issue 20, item 6: a log10 probability of 5 used to lower the ppl, 1e300 gave ppl= 0."""
    lines = arpa[0].read_text().splitlines()
    at = lines.index("\\1-grams:") + 2
    lines[at] = value + lines[at][lines[at].index("\t"):]
    (tmp_path / "bad.arpa").write_text("\n".join(lines) + "\n")
    status, _, err = run_nplm("ppl", "-lm", tmp_path / "bad.arpa", "-text", tmp_path / "t.txt")
    assert_one_line_error(status, err, f"{tmp_path / 'bad.arpa'}:{at + 1}: ", fragment)


@pytest.mark.parametrize("field, value, fragment", [
    (2, "30", "the 1-gram 'a' has the log10 back-off weight 30: above 7, which no estimate reaches"),
    (2, "7.5", "the 1-gram 'a' has the log10 back-off weight 7.5: above 7"),
    (2, "-1e30", "the 1-gram 'a' has the log10 back-off weight -1e+30: below -99, which is log 0"),
    (0, "-1e30", "the 1-gram 'a' has the log10 probability -1e+30: below -99, which is log 0"),
    (0, "-99.5", "the 1-gram 'a' has the log10 probability -99.5: below -99"),
])
def test_arpa_values_no_estimator_writes_are_refused_with_their_n_gram(tmp_path, arpa, field, value, fragment):
    """Issue 33, item 5: back-off weights of +30 gave a ppl below 1 with nothing said, and
    -1e30 an OverflowError traceback."""
    lines = arpa[0].read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if line.split("\t")[1:2] == ["a"])
    fields = lines[at].split("\t")
    fields[field] = value
    lines[at] = "\t".join(fields)
    (tmp_path / "bad.arpa").write_text("\n".join(lines) + "\n")
    (tmp_path / "u.txt").write_text("a a c\n")  # 'a a' is no bigram of the model: a's weight is used
    status, _, err = run_nplm("ppl", "-lm", tmp_path / "bad.arpa", "-text", tmp_path / "u.txt")
    assert_one_line_error(status, err, f"{tmp_path / 'bad.arpa'}:{at + 1}: ", fragment)


@pytest.mark.parametrize("value", ["7", "-99", "-98.5"])
def test_arpa_values_at_the_edges_of_their_domain_are_accepted(tmp_path, arpa, value):
    lines = arpa[0].read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if line.split("\t")[1:2] == ["a"])
    lines[at] = "\t".join(lines[at].split("\t")[:2] + [value])
    (tmp_path / "edge.arpa").write_text("\n".join(lines) + "\n")
    status, out, err = run_nplm("ppl", "-lm", tmp_path / "edge.arpa", "-text", tmp_path / "t.txt")
    assert status == 0 and "ppl=" in out, err


@pytest.mark.parametrize("table, value, fragment", [
    ("bow.1", 30.0, "log10 back-off weight 30: above 7, which no estimate reaches"),
    ("bow.2", -1e30, "log10 back-off weight -1e+30: below -99"),
    ("logp.2", -1e30, "log10 probability -1e+30: below -99"),
])
def test_binary_values_no_estimator_writes_are_refused_with_their_n_gram(tmp_path, table, value, fragment):
    """Issue 33, item 5: a binary model whose back-off weights were set to +30 gave ppl
    1.96e-06. The n-gram is named by its words."""
    from test_binary_ngram import crafted, set_at, setter
    path = crafted(tmp_path, setter(table, set_at(1, value)))
    loaded = container.load(str(path))
    order = int(table[-1])
    key, vocab, words = int(loaded.arrays[f"keys.{order}"][1]), loaded.vocab, []
    for level in range(order, 0, -1):
        key, word = divmod(key, len(vocab))
        words.insert(0, vocab.words[word])
        key = int(loaded.arrays[f"keys.{level - 1}"][key]) if level > 1 else key
    refused(tmp_path, path, f"array '{table}' gives the {order}-gram '{' '.join(words)}' the {fragment}")


@pytest.mark.parametrize("members, fragment", [
    (["C 0.5 a", "C 0.7 b", "D 1 c", "D 1 d"], "classes.txt:2: class 'C': the probabilities of its members up to 'b' "
                                               "sum to 1.2, above 1"),
    (["C 0.5 a", "C 0.5 b", "D 1 c", "C 0.1 d"], "classes.txt:4: class 'C'"),
])
def test_a_class_whose_members_hold_more_than_1_is_refused(tmp_path, arpa, members, fragment):
    """Issue 33, item 5: memberships summing to 1.2 gave a better ppl than the true model's."""
    (tmp_path / "classes.txt").write_text("\n".join(members) + "\n")
    status, _, err = run_nplm("ppl", "-lm", arpa[0], "-classes", tmp_path / "classes.txt", "-text", tmp_path / "t.txt")
    assert_one_line_error(status, err, fragment)
    status, _, err = run_nplm("ngram-count", "-text", tmp_path / "t.txt", "-classes", tmp_path / "classes.txt",
                              "-lm", tmp_path / "c.arpa")
    assert_one_line_error(status, err, fragment)


def test_memberships_summing_to_1_within_rounding_are_accepted(tmp_path, arpa):
    (tmp_path / "classes.txt").write_text("C 0.1 a\nC 0.2 b\nC 0.7000001 c\nD 1 d\n")
    status, out, err = run_nplm("ppl", "-lm", arpa[0], "-classes", tmp_path / "classes.txt", "-text", tmp_path / "t.txt")
    assert status == 0 and "ppl=" in out, err


@pytest.mark.parametrize("weights, fragment", [
    (np.array([[0.5, 0.50001]]), "non-negative and sum to 1"),
    (np.array([[0.5, 0.5], [0.5, 0.5]]), "needs float64 weights of shape (1, 2)"),
    (np.array([0.2, 0.3, 0.5]), "needs float64 weights of shape (1, 2)"),
    (np.array([[0.5, np.nan]]), "a.arpa is nan: a weight must be a number from 0 to 1"),
    (np.array([[1, 0]], dtype=np.int64), "needs float64 weights"),
])
def test_mixture_weights_that_break_their_promise_are_refused(tmp_path, arpa, weights, fragment):
    """Issue 20, item 6: weights summing to 1.00001 and extra rows without bins were accepted."""
    from nplmtk.mixture import Mixture
    mix = tmp_path / "m.mix"
    container.save(str(mix), Mixture.kind, {"weights": weights}, meta={"components": ["a.arpa", "a.arpa"]},
                   vocab=arpa[1])
    status, _, err = run_nplm("ppl", "-lm", mix, "-text", tmp_path / "t.txt")
    assert_one_line_error(status, err, str(mix), fragment)


@pytest.mark.parametrize("option, fragment", [
    (["-order", 4], "-order 4 contradicts the checkpoint's network (order 3)"),
    (["-m", 6], "-m 6 contradicts the checkpoint's network (features 4)"),
    (["-arch", "lbl"], "-arch lbl contradicts the checkpoint's network (arch mlp)"),
    # issue 49.3: taken silently before (the checkpoint's random draws go on whatever the seed)
    (["-seed", 7], "-seed 7 contradicts the checkpoint's run (seed 1)"),
])
def test_resume_refuses_a_network_that_contradicts_the_checkpoint(tmp_path, option, fragment):
    """Issue 20, item 6: -resume with another -order used to keep the checkpoint's silently."""
    (tmp_path / "t.txt").write_text("a b c d\nd c b a\n" * 20)
    common = ["train", "-text", tmp_path / "t.txt", "-epochs", 1, "-quiet", "-checkpoint", tmp_path / "ck"]
    assert run_nplm(*common, "-order", 3, "-m", 4, "-h", 4)[0] == 0
    status, _, err = run_nplm(*common, "-resume", "-epochs", 2, *option)
    assert_one_line_error(status, err, str(tmp_path / "ck" / "checkpoint.nplm"), fragment)
    status, _, err = run_nplm(*common, "-resume", "-epochs", 2, "-order", 3, "-m", 4, "-h", 4, "-seed", 1)
    assert status == 0, err


def test_resume_refuses_another_optimizer_than_the_checkpoints(tmp_path):
    """Issue 49.3: -resume -optimizer adam on an SGD run was taken silently."""
    (tmp_path / "t.txt").write_text("a b c d\nd c b a\n" * 20)
    common = ["train", "-arch", "lstm", "-m", 4, "-h", 4, "-text", tmp_path / "t.txt", "-quiet", "-checkpoint",
              tmp_path / "ck"]
    assert run_nplm(*common, "-epochs", 1)[0] == 0
    status, _, err = run_nplm(*common, "-resume", "-epochs", 2, "-optimizer", "adam")
    assert_one_line_error(status, err, "-optimizer adam contradicts the checkpoint's run (optimizer sgd)")
    assert run_nplm(*common, "-resume", "-epochs", 2, "-optimizer", "sgd")[0] == 0


@pytest.mark.parametrize("text, options, fragment", [
    ("a b c d\nd c b a\n" * 21, [], "trained on another text than {t2}: its text had 40 sentences of 160 words, "
                                     "{t2} has 42 sentences of 168 words"),
    ("a b d c\nd c b a\n" * 20, [], "trained on another text than {t2}: its text and {t2} both have 40 sentences of "
                                     "160 words, but not the same words"),
    ("A B C D\nd c b a\n" * 20, [], "both have 40 sentences of 160 words, but not the same words"),
    ("A B C D\nd c b a\n" * 20, ["-lower"], None),  # lower-cased, the same text as the network reads it
    ("a b c d\nd c b a\n" * 20, ["-vocab", "V2"], "-vocab {v2} is not the checkpoint's vocabulary (word 5 is 'd', "
                                                   "the checkpoint's 'c'): drop it, or start a new run"),
    ("a b c d\nd c b a\n" * 20, ["-vocab", "V1"], None),
])
def test_resume_refuses_another_text_or_vocabulary_than_the_checkpoints(tmp_path, text, options, fragment):
    """Issue 33, item 5: -resume on another text went on training with nothing said."""
    (tmp_path / "t.txt").write_text("a b c d\nd c b a\n" * 20)
    (tmp_path / "t2.txt").write_text(text)
    (tmp_path / "v1.txt").write_text("a\nb\nc\nd\n")
    (tmp_path / "v2.txt").write_text("a\nb\nd\nc\n")
    common = ["train", "-epochs", 1, "-quiet", "-checkpoint", tmp_path / "ck", "-order", 3, "-m", 4, "-h", 4]
    assert run_nplm(*common, "-text", tmp_path / "t.txt", "-vocab", tmp_path / "v1.txt")[0] == 0
    options = [{"V1": tmp_path / "v1.txt", "V2": tmp_path / "v2.txt"}.get(o, o) for o in options]
    status, _, err = run_nplm(*common, "-resume", "-epochs", 2, "-text", tmp_path / "t2.txt", *options)
    if fragment is None:
        assert status == 0 and err == "", err
    else:
        assert_one_line_error(status, err, f"{tmp_path / 'ck' / 'checkpoint.nplm'}: ",
                              fragment.format(t2=tmp_path / "t2.txt", v2=tmp_path / "v2.txt"))


def test_a_checkpoint_older_than_its_text_record_resumes_with_a_warning(tmp_path):
    (tmp_path / "t.txt").write_text("a b c d\nd c b a\n" * 20)
    common = ["train", "-text", tmp_path / "t.txt", "-quiet", "-checkpoint", tmp_path / "ck", "-order", 3, "-m", 4,
              "-h", 4]
    assert run_nplm(*common, "-epochs", 1)[0] == 0
    path = str(tmp_path / "ck" / "checkpoint.nplm")
    old = container.load(path)
    meta = {**old.meta, "trainer": {k: v for k, v in old.meta["trainer"].items() if k != "training_text"}}
    container.save(path, old.kind, {k: np.array(v) for k, v in old.arrays.items()}, meta=meta, vocab=old.vocab)
    status, _, err = run_nplm(*common, "-epochs", 2, "-resume")
    assert status == 0, err
    assert len(err.strip().splitlines()) == 1, err
    assert err.strip().endswith(f": warning: {path}: this checkpoint does not record its training text (written by an "
                                f"older nplm): {tmp_path / 't.txt'} is taken to be it, unchecked"), err
    assert "training_text" in container.load(path).meta["trainer"]  # recorded from then on


def test_a_full_disk_is_one_line_and_leaves_the_old_file(tmp_path):
    """Issue 20, item 4: ENOSPC while writing used to be a traceback."""
    import errno
    import os
    from nplmtk.errors import NplmError
    from nplmtk.io import open_output
    target = tmp_path / "model.arpa"
    target.write_text("old")
    with pytest.raises(NplmError, match="model.arpa: cannot write \\(No space left on device\\); nothing was changed"):
        with open_output(str(target)) as out:
            out.write("new")
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    assert target.read_text() == "old" and os.listdir(tmp_path) == ["model.arpa"]


def test_temporary_files_of_a_killed_writer_are_removed_by_the_next_write(tmp_path):
    """Issue 20, item 8: kill -9 left `.kn5.arpa.*.tmp` files that nothing cleaned."""
    import os
    import subprocess
    gone = subprocess.Popen(["true"])
    gone.wait()  # a process id that no longer runs
    (tmp_path / "t.txt").write_text("a b c d\nd c b a\n")
    stale = tmp_path / f".kn.arpa.{gone.pid}-abcdefgh.tmp"
    old_style = tmp_path / ".kn.arpa.qwertyui.tmp"
    live = tmp_path / f".kn.arpa.{os.getpid()}-abcdefgh.tmp"  # a writer still at work
    for path in (stale, old_style, live):
        path.write_text("partial")
    os.utime(old_style, (0, 0))
    assert run_nplm("ngram-count", "-text", tmp_path / "t.txt", "-order", 2, "-lm", tmp_path / "kn.arpa")[0] == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["t.txt", "kn.arpa", live.name])


@pytest.mark.parametrize("lines, fragment", [
    (["a\t9223372036854775808"], "counts.txt:1: count 9223372036854775808 above 2^63 - 1"),
    (["a\t9223372036854775807", "a\t9223372036854775807"], "1-gram counts that sum above 2^63 - 1"),
])
def test_counts_past_int64_are_refused(tmp_path, lines, fragment):
    """Issue 20, item 3: a traceback, or a negative count written back with exit 0."""
    (tmp_path / "counts.txt").write_text("\n".join(lines + ["b\t3"]) + "\n")
    status, _, err = run_nplm("ngram-count", "-read", tmp_path / "counts.txt", "-order", 1, "-write",
                              tmp_path / "out.txt")
    assert_one_line_error(status, err, fragment)
    assert not (tmp_path / "out.txt").exists()


def test_large_counts_are_summed_exactly(tmp_path):
    (tmp_path / "counts.txt").write_text("a\t9007199254740993\na\t1\nb\t3\n")  # 2^53 + 1: float64 loses it
    assert run_nplm("ngram-count", "-read", tmp_path / "counts.txt", "-order", 1, "-write", tmp_path / "o.txt")[0] == 0
    assert "a\t9007199254740994\n" in (tmp_path / "o.txt").read_text()


def test_one_tokeniser_no_break_space_stays_inside_a_word(tmp_path):
    """Issue 20, item 5: the vocabulary and counts readers split at any Unicode space,
    the kernels at ASCII whitespace only, so nplm refused its own files."""
    (tmp_path / "t.txt").write_text("a\u00a0b c d\nd c a\u00a0b\n", encoding="utf-8")
    common = ["-text", tmp_path / "t.txt"]
    assert run_nplm("vocab", *common, "-write-vocab", tmp_path / "v.txt", "-write-counts", tmp_path / "c.txt")[0] == 0
    status, _, err = run_nplm("ngram-count", *common, "-vocab", tmp_path / "c.txt", "-order", 2, "-write",
                              tmp_path / "counts.txt", "-lm", tmp_path / "m.arpa")
    assert status == 0, err
    status, out, err = run_nplm("ngram-count", "-read", tmp_path / "counts.txt", "-vocab", tmp_path / "v.txt",
                                "-order", 2, "-lm", tmp_path / "again.arpa")
    assert status == 0, err
    assert (tmp_path / "again.arpa").read_text() == (tmp_path / "m.arpa").read_text()
    status, out, err = run_nplm("ppl", "-lm", tmp_path / "m.arpa", "-text", tmp_path / "t.txt")
    assert status == 0 and "0 OOVs" in out, err


@pytest.mark.parametrize("arch, options", [
    ("mlp", ["-order", 3, "-m", 8, "-h", 8]), ("energy", ["-order", 3, "-m", 8, "-h", 8]),
    ("lbl", ["-order", 3, "-m", 8]), ("lbl3", ["-order", 3, "-m", 8, "-h", 8]),
    ("rnn", ["-m", 8, "-h", 8]), ("lstm", ["-m", 8, "-h", 8, "-output", "class", "-classes", 4]),
])
def test_networks_nplm_trains_pass_the_content_checks(toy_texts, tmp_path, arch, options):
    """Issue 33, item 5: the bounds on a network's parameters never refuse what nplm's own
    trainers write, at a high learning rate too (their largest parameters)."""
    from nplmtk.neural.network import MAX_PARAMETER
    texts, _ = toy_texts
    model = tmp_path / "m.nplm"
    status, _, err = run_nplm("train", "-text", texts / "train.txt", "-valid", texts / "valid.txt", "-arch", arch,
                              *options, "-epochs", 2, "-lr", 0.1, "-quiet", "-lm", model)
    assert status == 0, err
    status, out, err = run_nplm("ppl", "-lm", model, "-text", texts / "valid.txt")
    assert status == 0 and "ppl=" in out, err
    largest = max(float(np.abs(a).max()) for a in container.load(str(model)).arrays.values())
    assert largest < MAX_PARAMETER / 100


@pytest.mark.parametrize("options", [
    [], ["-kndiscount"], ["-ukndiscount", "-interpolate"], ["-wbdiscount"], ["-wbdiscount", "-interpolate"],
    ["-gtdiscount"], ["-cdiscount", 0.9, "-interpolate"], ["-addsmooth", 0.01], ["-prune", 1e-4],
    ["-kndiscount", "-interpolate", "-always-interpolate"],
])
def test_back_off_models_nplm_estimates_pass_the_content_checks(toy_texts, tmp_path, options):
    """Issue 33, item 5: nplm's own ARPA and binary models of every discounting method
    load (the Brown measurements behind the bounds are in nplmtk/ngram/backoff.py)."""
    texts, _ = toy_texts
    for order in (2, 4):
        arpa, binary = tmp_path / f"{order}.arpa", tmp_path / f"{order}.nplm"
        status, _, err = run_nplm("ngram-count", "-text", texts / "train.txt", "-order", order, *options,
                                  "-lm", arpa, "-write-bin-lm", binary)
        assert status == 0, err
        for model in (arpa, binary):
            status, out, err = run_nplm("ppl", "-lm", model, "-text", texts / "valid.txt")
            assert status == 0 and "ppl=" in out, err


@pytest.mark.parametrize("options", [["-full"], []])
def test_class_models_nplm_estimates_pass_the_content_checks(toy_texts, tmp_path, options):
    texts, _ = toy_texts
    status, _, err = run_nplm("ngram-class", "-text", texts / "train.txt", "-numclasses", 5, *options,
                              "-classes", tmp_path / "c.classes")
    assert status == 0, err
    status, _, err = run_nplm("ngram-count", "-text", texts / "train.txt", "-classes", tmp_path / "c.classes",
                              "-order", 3, "-lm", tmp_path / "c.arpa")
    assert status == 0, err
    status, out, err = run_nplm("ppl", "-lm", tmp_path / "c.arpa", "-classes", tmp_path / "c.classes",
                                "-text", texts / "valid.txt")
    assert status == 0 and "ppl=" in out, err
