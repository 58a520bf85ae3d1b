"""`nplm ppl -lm BINARY -ppl TEXT`'s fast path (cli/ppl_fast.py, nplmtk/ngram/mapped.py):
the same report as the usual path, byte for byte, at -debug 0, 1 and 2; neither numpy nor
click imported; and never a model the usual loader refuses: a damaged, truncated or crafted
file falls to the usual path, whose one-line error names it."""
import os
import subprocess
import sys
import types

import pytest

import nplmtk
from conftest import NPLM, assert_one_line_error, run_nplm
from nplmtk import container
from nplmtk.ngram.binary import BINARY_KIND, load_binary, write_binary

DATA = os.path.join(os.path.dirname(__file__), "data", "srilm")
# what a text can hold: OOVs, <s> and </s> given, lines of them alone, blank lines, tabs, CRLF,
# other scripts, no newline at the end
TRICKY = ("the cat sat on the mat\n<s> a dog </s>\n</s>\n<s>\n\n  \t \nzzqx unknownword the\r\n"
          "\u00e9t\u00e9 \u65e5\u672c caf\u00e9 .\n</s> the </s>\nlast line without newline")


@pytest.fixture(scope="module")
def binaries(tmp_path_factory):
    """Binary models of ARPA files with and without <unk>: {name: path}."""
    folder = tmp_path_factory.mktemp("binaries")
    paths = {}
    for name in ("kn3-unk", "kn3-closed", "kn2-test20"):
        paths[name] = str(folder / f"{name}.nplm")
        write_binary(nplmtk.load(f"{DATA}/{name}.arpa.gz"), paths[name])
    return paths


@pytest.fixture(scope="module")
def texts(tmp_path_factory):
    folder = tmp_path_factory.mktemp("texts")
    (folder / "tricky.txt").write_bytes(TRICKY.encode("utf-8"))
    return [f"{DATA}/test.txt", str(folder / "tricky.txt")]


def fast_report(path, text, debug):
    """The fast path's report lines, None where it does not take the model or the text."""
    from nplmtk.ngram.mapped import open_mapped, perplexity, read_plain_text
    model, data = open_mapped(path), read_plain_text(text)
    lines = []
    if model is None or data is None or perplexity(model, text, data, debug, lines.append) is None:
        return None
    return lines


def usual_report(path, text, debug):
    from nplmtk.ppl import perplexity
    lines = []
    perplexity(nplmtk.load(path), text, debug=debug, write=lines.append)
    return lines


@pytest.mark.parametrize("debug", [0, 1, 2])
@pytest.mark.parametrize("name", ["kn3-unk", "kn3-closed", "kn2-test20"])
def test_the_fast_path_reports_as_the_usual_one(binaries, texts, name, debug):
    for text in texts:
        fast = fast_report(binaries[name], text, debug)
        assert fast is not None, text
        assert fast == usual_report(binaries[name], text, debug), text


@pytest.mark.parametrize("debug", ["0", "1", "2"])
def test_the_command_prints_the_same_bytes_either_way(binaries, texts, debug):
    """The whole command: -order 3 (the model's own) sends it the usual way."""
    for text in texts:
        fast = run_nplm("ppl", "-lm", binaries["kn3-unk"], "-ppl", text, "-debug", debug)
        usual = run_nplm("ppl", "-lm", binaries["kn3-unk"], "-ppl", text, "-debug", debug, "-order", 3)
        assert fast[0] == 0, fast[2]
        assert fast == usual


def imported_by(*args):
    """(status, the modules among numpy, click and the trainer's that `nplm ARGS` imported)."""
    script = ("import sys\nfrom nplmtk.cli.main import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit:\n"
              "    pass\nprint(' '.join(m for m in ('numpy', 'click', 'nplmtk.neural.train') if m in sys.modules), "
              "file=sys.stderr)\n")
    proc = subprocess.run([sys.executable, "-c", script, *map(str, args)], capture_output=True, text=True)
    return proc.returncode, proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else ""


def test_the_fast_path_imports_neither_numpy_nor_click(binaries):
    assert imported_by("ppl", "-lm", binaries["kn3-unk"], "-ppl", f"{DATA}/test.txt") == (0, "")
    assert imported_by("ngram", "-lm", binaries["kn3-unk"], "--text", f"{DATA}/test.txt", "-debug", 1, "-unk") == \
        (0, "")
    # anything more is the usual path's: numpy and click, and still not the trainer
    assert imported_by("ppl", "-lm", binaries["kn3-unk"], "-ppl", f"{DATA}/test.txt", "-order", 2) == \
        (0, "numpy click")
    assert imported_by("ppl", "-lm", f"{DATA}/kn3-unk.arpa.gz", "-ppl", f"{DATA}/test.txt") == (0, "numpy click")


@pytest.mark.parametrize("argv, given", [
    (["ppl", "-lm", "m", "-ppl", "t"], ("m", "t", 0)),
    (["ngram", "--lm", "m", "-text", "t", "-debug", "2", "-unk"], ("m", "t", 2)),
    (["ppl", "-lm", "m"], None),
    (["ppl", "-lm", "m", "-ppl", "t", "-text", "t"], None),  # the usual path refuses both
    (["ppl", "-lm", "m", "-ppl", "-"], None),  # stdin
    (["ppl", "-lm", "m", "-ppl", "t", "-debug", "3"], None),
    (["ppl", "-lm", "m", "-ppl", "t", "-debug", "01"], None),
    (["ppl", "-lm", "m", "-ppl", "t", "-order", "3"], None),
    (["ppl", "-lm=m", "-ppl", "t"], None),
    (["ppl", "-lm", "m", "-ppl", "t", "-unk", "-unk"], None),
    (["ppl", "-lm", "m", "-ppl", "t", "extra"], None),
    (["ppl", "-lm", "m", "-ppl", "t", "-help"], None),
])
def test_only_the_exact_command_takes_the_fast_path(argv, given):
    from cli.ppl_fast import command_given
    assert command_given(argv) == given


def usual_refuses(path):
    try:
        load_binary(container.load(path))
    except nplmtk.NplmError:
        return True
    return False


def test_no_damaged_or_truncated_file_passes_the_fast_path(binaries, texts, tmp_path):
    """A byte flipped at 300 places over the whole file (preamble, header, every table,
    padding) and the file cut at 40 lengths: the fast path takes a file only when the usual
    loader takes it, and then reports as it does."""
    good = open(binaries["kn2-test20"], "rb").read()
    path = str(tmp_path / "damaged.nplm")
    damages = [good[:at] + bytes([good[at] ^ 0x10]) + good[at + 1:]
               for at in sorted({i * len(good) // 300 for i in range(300)} | {0, 9, 12, 17, 20, 30})]
    damages += [good[:length] for length in {i * len(good) // 40 for i in range(40)} | {len(good) - 1}]
    refused = 0
    for data in damages:
        with open(path, "wb") as f:
            f.write(data)
        fast = fast_report(path, texts[0], 1)
        if fast is None:
            refused += 1
            continue
        assert not usual_refuses(path)
        assert fast == usual_report(path, texts[0], 1)
    assert refused >= len(damages) - 40  # what lies in padding between the tables changes nothing


def saved_with(tmp_path, words, unk="<unk>", arrays_change=None):
    """kn3-unk's binary saved with the vocabulary `words` (in that order) and its arrays as
    `arrays_change` leaves them, checksums valid."""
    import numpy as np
    model_file = container.load(binary_of(tmp_path))
    arrays = {name: np.array(array) for name, array in model_file.arrays.items()}
    if arrays_change:
        arrays_change(arrays)
    path = str(tmp_path / "crafted.nplm")
    container.save(path, BINARY_KIND, arrays, meta=dict(model_file.meta),
                   vocab=types.SimpleNamespace(words=words, unk_word=unk))
    return path


def binary_of(tmp_path):
    path = tmp_path / "kn3.nplm"
    if not path.exists():
        write_binary(nplmtk.load(f"{DATA}/kn3-unk.arpa.gz"), str(path))
    return str(path)


def words_of(tmp_path):
    return container.load(binary_of(tmp_path)).vocab.words


@pytest.mark.parametrize("change, fragment", [
    (lambda w: w[:5] + [w[3]] + w[6:], "vocabulary has duplicate words"),
    (lambda w: w[:5] + ["a b"] + w[6:], "holds white space"),
    (lambda w: w[:5] + ["a\u3000b", "c\x1fd"] + w[7:], None),  # not ASCII white space: words
    (lambda w: w[:5] + [""] + w[6:], "is empty"),
    (lambda w: w[:5] + ["x" * 70000] + w[6:], "a word of 70000 bytes"),
    (lambda w: [w[1], w[0]] + w[2:], None),  # not in id order: the usual path's
    (lambda w: w + ["<s>"], None),  # a vocabulary keeps the specials first, once
])
def test_a_crafted_vocabulary_is_refused_or_read_as_the_usual_path_does(tmp_path, change, fragment):
    path = saved_with(tmp_path, change(list(words_of(tmp_path))))
    fast = run_nplm("ppl", "-lm", path, "-ppl", f"{DATA}/test.txt", "-debug", 1)
    usual = run_nplm("ppl", "-lm", path, "-ppl", f"{DATA}/test.txt", "-debug", 1, "-order", 3)
    assert fast == usual
    if fragment:
        assert_one_line_error(*fast[::2], path, fragment)
    else:
        assert fast[0] == 0, fast[2]


def test_a_crafted_unknown_word_is_refused_as_the_usual_path_does(tmp_path):
    words = list(words_of(tmp_path))
    for unk, fragment in [("<s>", "cannot be <s>"), ("a b", "is not one word")]:
        path = saved_with(tmp_path, [unk] + words[1:], unk=unk)
        status, out, err = run_nplm("ppl", "-lm", path, "-ppl", f"{DATA}/test.txt")
        assert_one_line_error(status, err, path, fragment)


def test_a_truncated_model_is_one_line_naming_it(tmp_path):
    path = tmp_path / "cut.nplm"
    data = open(binary_of(tmp_path), "rb").read()
    for length in (len(data) - 100, len(data) // 2, 30):
        path.write_bytes(data[:length])
        status, out, err = run_nplm("ppl", "-lm", path, "-ppl", f"{DATA}/test.txt")
        assert_one_line_error(status, err, str(path), "truncated nplm model file")
        assert out == ""


@pytest.mark.parametrize("content, fragment", [
    (b"", "empty corpus"), (b"\n \n", "empty corpus"), (b"the cat\n\xff\xfe\n", "t.txt:2: invalid UTF-8")])
def test_a_text_the_fast_path_does_not_take_is_reported_by_the_usual_one(tmp_path, content, fragment):
    text = tmp_path / "t.txt"
    text.write_bytes(content)
    status, out, err = run_nplm("ppl", "-lm", binary_of(tmp_path), "-ppl", text)
    assert_one_line_error(status, err, fragment)


def test_a_gzipped_text_and_stdin_are_scored_the_usual_way(tmp_path):
    import gzip
    text = tmp_path / "t.txt.gz"
    with open(f"{DATA}/test.txt", "rb") as f:
        plain = f.read()
    text.write_bytes(gzip.compress(plain))
    expected = run_nplm("ppl", "-lm", binary_of(tmp_path), "-ppl", f"{DATA}/test.txt")[1]
    assert run_nplm("ppl", "-lm", binary_of(tmp_path), "-ppl", text)[1] == expected.replace(f"{DATA}/test.txt",
                                                                                            str(text))
    proc = subprocess.run([NPLM, "ppl", "-lm", binary_of(tmp_path), "-ppl", "-"], input=plain, capture_output=True)
    assert proc.stdout.decode() == expected.replace(f"{DATA}/test.txt", "-")


def test_a_closed_stdout_ends_the_fast_path_as_the_usual_one(binaries, tmp_path):
    """`| head -1` of a report larger than a pipe holds: exit status 141 (SIGPIPE's), nothing
    on stderr."""
    text = tmp_path / "long.txt"
    with open(f"{DATA}/test.txt", "rb") as f:
        text.write_bytes(f.read() * 40)
    for more in ("", "-order 3"):
        command = f"'{NPLM}' ppl -lm '{binaries['kn3-unk']}' -ppl '{text}' -debug 2 {more} | head -1; " \
                  "echo ${PIPESTATUS[0]} >&2"
        proc = subprocess.run(["bash", "-c", command], capture_output=True, text=True)
        assert proc.stdout.count("\n") == 1
        assert proc.stderr.strip() == "141", more


def test_the_kernel_takes_the_orders_the_loader_takes():
    from nplmtk._ext.ngram_fast_score import MAX_LEVELS
    from nplmtk.ngram.counts import MAX_ORDER
    assert MAX_LEVELS == MAX_ORDER



def test_log_0_and_nan_in_the_tables_as_the_usual_path_reads_them(tmp_path):
    """Every unigram at log 0 (-99): the words the walk backs off to are zeroprobs, counted as
    the usual path counts them (exact IEEE comparisons: the kernel is built without
    fast-math); a NaN, checksums valid, is refused as the usual loader refuses it."""
    import numpy as np

    def zero_unigrams(arrays):
        arrays["logp.1"][3:] = -99.0
    path = saved_with(tmp_path, list(words_of(tmp_path)), arrays_change=zero_unigrams)
    fast = fast_report(path, f"{DATA}/test.txt", 2)
    assert fast is not None and not fast[-1].startswith("0 zeroprobs")
    assert fast == usual_report(path, f"{DATA}/test.txt", 2)

    def nan_bow(arrays):
        arrays["bow.2"][7] = np.nan
    path = saved_with(tmp_path, list(words_of(tmp_path)), arrays_change=nan_bow)
    assert fast_report(path, f"{DATA}/test.txt", 0) is None and usual_refuses(path)
