"""ngram-count and ppl from the command line: counts files, deleted interpolation, bad input."""
import gzip
import os

import numpy as np
import pytest

from conftest import assert_one_line_error, run_nplm

DATA = os.path.join(os.path.dirname(__file__), "data", "srilm")
TRAIN, VOCAB, TEST = f"{DATA}/train.txt", f"{DATA}/vocab.txt", f"{DATA}/test.txt"

GOOD_ARPA = """
\\data\\
ngram 1=4
ngram 2=2

\\1-grams:
-0.6	</s>
-99	<s>	-0.3
-0.5	a	-0.2
-0.7	b

\\2-grams:
-0.1	<s> a
-0.2	a b

\\end\\
"""


def test_counts_written_then_read_give_the_same_model(tmp_path):
    first, second = tmp_path / "first.txt", tmp_path / "second.txt"
    lines = open(TRAIN).read().splitlines(keepends=True)
    first.write_text("".join(lines[:120]))
    second.write_text("".join(lines[120:]))
    args = ["-order", 3, "-vocab", VOCAB, "-unk"]
    assert run_nplm("ngram-count", "-text", TRAIN, *args, "-lm", tmp_path / "direct.arpa")[0] == 0
    assert run_nplm("ngram-count", "-text", first, *args, "-write", tmp_path / "1.counts")[0] == 0
    assert run_nplm("ngram-count", "-text", second, *args, "-write", tmp_path / "2.counts.gz")[0] == 0
    status, _, err = run_nplm("ngram-count", "-read", tmp_path / "1.counts", "-read", tmp_path / "2.counts.gz",
                              *args, "-lm", tmp_path / "merged.arpa")
    assert status == 0, err
    assert (tmp_path / "merged.arpa").read_bytes() == (tmp_path / "direct.arpa").read_bytes()
    # gzipped, in SRILM's sorted order: by the words as byte strings, each n-gram before its extensions
    grams = [line.split(b"\t")[0].split(b" ") for line in gzip.open(tmp_path / "2.counts.gz").read().splitlines()]
    assert grams == sorted(grams)


def test_deleted_interpolation_trigram_scores_between_bigram_and_floor(tmp_path):
    lines = open(TRAIN).read().splitlines(keepends=True)
    (tmp_path / "train.txt").write_text("".join(lines[:200]))
    (tmp_path / "heldout.txt").write_text("".join(lines[200:]))
    status, _, err = run_nplm("ngram-count", "-text", tmp_path / "train.txt", "-order", 3, "-vocab", VOCAB,
                              "-unk", "-deleted-interpolation", "-heldout", tmp_path / "heldout.txt",
                              "-lm", tmp_path / "di.nplm")
    assert status == 0, err
    assert "EM iteration 5" in err
    status, out, err = run_nplm("ppl", "-lm", tmp_path / "di.nplm", "-text", TEST)
    assert status == 0, err
    assert out.startswith(f"file {TEST}: 42 sentences, 729 words, 0 OOVs\n0 zeroprobs, logprob= -")


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize("text, fragment", [
    (GOOD_ARPA.replace("ngram 2=2", "ngram 2=3"), ":12: \\2-grams: section has 2 entries, the header says 3"),
    (GOOD_ARPA.replace("\\2-grams:\n-0.1\t<s> a\n-0.2\ta b\n", ""), ":13: expected the \\2-grams: section"),
    (GOOD_ARPA.replace("-0.5\ta", "-0.5x\ta"), ":9: bad probability '-0.5x'"),
    (GOOD_ARPA.replace("-0.2\ta b", "-0.2\ta b a b"), ":14: a 2-gram line needs a probability, 2 words"),
    (GOOD_ARPA.replace("-0.2\ta b", "-0.2\ta b\tx"), ":14: bad back-off weight 'x'"),
    (GOOD_ARPA.replace("-0.2\ta b", "-0.2\ta zebra"), ":14: word 'zebra' is not among the 1-grams"),
    (GOOD_ARPA.replace("ngram 2=2", "ngram 2=2\nngram 3=1").replace("\\end", "\\3-grams:\n-0.3\tb a b\n\n\\end"),
     ":18: the context of this 3-gram is not among the 2-grams"),
    (GOOD_ARPA.replace("ngram 2=2", "ngram 2=3").replace("-0.2\ta b\n", "-0.2\ta b\n-0.3\t<s> a\n"),
     ":15: this 2-gram appears twice"),
    (GOOD_ARPA.replace("\\end\\\n", ""), "expected \\end\\"),
    (GOOD_ARPA.replace("ngram 1=4", "ngram 1 four"), ":3: expected 'ngram N=count'"),
    ("just some text\n", "not an ARPA file"),
])
def test_malformed_arpa_files_are_refused(tmp_path, text, fragment):
    path = write(tmp_path, "bad.arpa", text)
    write(tmp_path, "t.txt", "a b\n")
    status, out, err = run_nplm("ppl", "-lm", path, "-text", tmp_path / "t.txt")
    assert_one_line_error(status, err, f"bad.arpa{fragment}" if fragment.startswith(":") else fragment)
    assert out == ""


@pytest.mark.parametrize("bad, line", [(b"\xe9", 14), (b"\xed\xa0\x80", 14), (b"\xe6\x97", 14)])
def test_an_arpa_file_that_is_not_utf8_is_refused_at_its_line(tmp_path, bad, line):
    """Latin-1, a surrogate, a cut sequence: Python's decoder refuses them, and so does ours."""
    path = tmp_path / "bad.arpa"
    path.write_bytes(GOOD_ARPA.encode().replace(b"-0.2\ta b", b"-0.2\ta b" + bad))
    status, out, err = run_nplm("ppl", "-lm", path, "-text", "-", stdin="a b\n")
    assert_one_line_error(status, err, f"bad.arpa:{line}: invalid UTF-8")


def test_a_well_formed_arpa_scores(tmp_path):
    path = write(tmp_path, "good.arpa", GOOD_ARPA)
    status, out, err = run_nplm("ppl", "-lm", path, "-text", "-", "-debug", 2, stdin="a b\n")
    assert status == 0, err
    # p(a|<s>) = 10^-0.1; p(b|a) = 10^-0.2; p(</s>|b) = bow(b)=0 + p(</s>) = 10^-0.6
    assert "\tp( b | a ...) \t= [2gram] 0.6309573 [ -0.2 ]" in out
    assert out.endswith("file -: 1 sentences, 2 words, 0 OOVs\n0 zeroprobs, logprob= -0.9 ppl= 1.995262 ppl1= 2.818383\n")


@pytest.mark.parametrize("make_args, fragment", [
    (lambda d: ["ngram-count", "-text", TRAIN, "-order", 0, "-lm", d / "x.arpa"], "-order 0: must be an integer in [1, 10]"),
    (lambda d: ["ngram-count", "-text", TRAIN, "-order", 11, "-lm", d / "x.arpa"], "-order 11: must be an integer in [1, 10]"),
    (lambda d: ["ngram-count", "-read", d / "bad.counts", "-lm", d / "x.arpa"], "bad.counts:2: count 'many' is not an integer"),
    (lambda d: ["ngram-count", "-read", d / "bad2.counts", "-lm", d / "x.arpa"], "bad2.counts:1: negative count -4"),
    (lambda d: ["ngram-count", "-text", TRAIN], "nothing to do"),
    (lambda d: ["ngram-count", "-text", d / "missing.txt", "-lm", d / "x.arpa"], "missing.txt: no such file"),
    (lambda d: ["ngram-count", "-text", TRAIN, "-vocab", d / "dup.vocab", "-lm", d / "x.arpa"], "dup.vocab:2: duplicate word 'a'"),
    (lambda d: ["ngram-count", "-text", TRAIN, "-deleted-interpolation", "-lm", d / "x.nplm"], "needs -text, -heldout and -lm"),
    (lambda d: ["ngram-count", "-text", TRAIN, "-order", 2, "-deleted-interpolation", "-heldout", TEST,
                "-lm", d / "x.nplm"], "use -order 3"),
    (lambda d: ["ngram-count", "-text", TRAIN, "-wbdiscount", "-cdiscount", 0.5, "-lm", d / "x.arpa"],
     "conflicting discounting options: -wbdiscount and -cdiscount"),
    (lambda d: ["ngram-count", "-text", TRAIN, "-gt2max", 3, "-lm", d / "x.arpa"], "-gtNmax sets Good-Turing's"),
    (lambda d: ["ngram-count", "-read", d / "bad.counts", "-limit-vocab", "-lm", d / "x.arpa"],
     "-limit-vocab needs -vocab"),
    (lambda d: ["ngram-count", "-text", d / "twice.txt", "-ukndiscount", "-lm", d / "x.arpa"],
     "order 1: original Kneser-Ney needs n-grams counted once and twice (n1 = 4, n2 = 0)"),
    (lambda d: ["ppl", "-lm", d / "missing.arpa", "-text", TEST], "missing.arpa: no such file"),
    (lambda d: ["ppl", "-lm", d / "bad.counts", "-text", TEST], "bad.counts: not an ARPA file"),
    (lambda d: ["ppl", "-lm", d, "-text", TEST], "is a directory"),
    (lambda d: ["ppl", "-lm", f"{DATA}/kn3-unk.arpa.gz"], "give the text to score"),
    (lambda d: ["ppl", "-lm", f"{DATA}/kn3-unk.arpa.gz", "-text", d / "empty.txt"], "empty.txt: empty corpus"),
])
def test_bad_ngram_input_is_one_line_and_exit_2(tmp_path, make_args, fragment):
    write(tmp_path, "bad.counts", "a\t3\na b\tmany\n")
    write(tmp_path, "bad2.counts", "a\t-4\n")
    write(tmp_path, "dup.vocab", "a\na\n")
    write(tmp_path, "empty.txt", "\n")
    write(tmp_path, "twice.txt", "a b c\n" * 3)
    before = sorted(os.listdir(tmp_path))
    status, out, err = run_nplm(*make_args(tmp_path))
    assert_one_line_error(status, err, fragment)
    assert out == ""
    assert sorted(os.listdir(tmp_path)) == before


def _faults(lines, k):
    """Copies of an ARPA file's lines, each with one fault in the middle of its k-gram section."""
    first = lines.index(f"\\{k}-grams:") + 1
    last = lines.index("", first)
    at = (first + last) // 2
    logp, words, *rest = lines[at].split("\t")
    other = lines[at + 1].split("\t")[1]

    def changed(line, position=at):
        copy = list(lines)
        copy[position] = line
        return copy

    return [changed(f"{logp}x\t{words}"), changed(f"5\t{words}"), changed(f"-1e39\t{words}"),
            changed(f"{logp}\t{words} {words}"), changed(f"{logp}\t{words}\tx"), changed(f"{logp}\t{words}\t30"),
            changed(f"{logp}\tzebra {words}"), changed(f"{logp}\t{other}"),  # zebra: an unknown word
            changed(f"{logp}\t{words.split()[-1]} {words}" if k > 2 else f"{logp}\t</s> {words.split()[-1]}"),
            lines[:at] + lines[at + 1:], lines[:at] + [lines[at]] + lines[at:]]


def test_sections_read_in_two_parts_read_as_one(tmp_path, monkeypatch):
    """A large section is parsed by two threads, a block at a time; any line the fast path
    doubts is read again by the serial parser: the same model, or the same error, as one
    thread gives."""
    from nplmtk._ext import arpa_parse
    from nplmtk.errors import InputError
    from nplmtk.ngram.arpa import read_arpa
    status, _, err = run_nplm("ngram-count", "-text", TRAIN, "-order", 3, "-lm", tmp_path / "m.arpa")
    assert status == 0, err
    lines = (tmp_path / "m.arpa").read_text().split("\n")
    parsed_in_parts = []
    in_parts = arpa_parse._parse_in_parts
    monkeypatch.setattr(arpa_parse, "_parse_in_parts",
                        lambda *args: parsed_in_parts.append(in_parts(*args)) or parsed_in_parts[-1])

    def read(text, parallel_bytes):
        monkeypatch.setattr(arpa_parse, "PARALLEL_BYTES", parallel_bytes)
        monkeypatch.setattr(arpa_parse, "PARSED_BLOCK", 4096)  # a section in several blocks
        (tmp_path / "x.arpa").write_text(text)
        try:
            model = read_arpa(str(tmp_path / "x.arpa"))
        except InputError as err:
            return str(err)
        return [table.copy() for table in (*model.logp, *model.bow, *model.index.keys)]

    whole, parts = read("\n".join(lines), 1 << 60), read("\n".join(lines), 0)
    assert len(parsed_in_parts) == 2 and all(result is not None for result in parsed_in_parts)
    assert all(np.array_equal(a, b) for a, b in zip(whole, parts, strict=True))
    for k in (2, 3):
        for faulty in _faults(lines, k):
            one = read("\n".join(faulty), 1 << 60)
            assert isinstance(one, str), faulty
            assert read("\n".join(faulty), 0) == one
