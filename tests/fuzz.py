"""`make fuzz` (issues 20 and 33): every reader fed generated hostile inputs, and every
numeric option of every subcommand random values, each outcome counted.

For each reader (ARPA, counts, vocabulary, corpus, model container, mixture, HTK lattice) hypothesis
draws inputs from valid seed files: line and byte mutations of the text formats (values
out of their domain, truncations, stray bytes, odd whitespace), crafted model files that
keep valid checksums (meta values, arrays, dtypes, shapes and vocabularies changed, then
saved again) and raw byte damage. Each input is read and, where the reader yields a
model, scored (a lattice: decoded by `nplm lattice-tool` with an n-gram, with a network or
with no model, to a 1-best, N-best lists, posteriors or an expanded lattice), in a worker
process: a clean refusal is an NplmError; any other exception is
a traceback; a worker killed by a signal is a crash; one silent for HANG_SECONDS a hang.
The options campaign runs `nplm SUBCOMMAND` in its worker on tiny inputs with one to three
numeric options set to drawn values (numbers, nan, inf, huge integers, junk): a refusal is
exit 2 with one line; an in-domain value that would make a long run (-epochs 1000000) is
only parsed. Not in `make test`; tests/test_hostile_models.py and tests/test_options.py hold
the cases found as regressions.

    python tests/fuzz.py [--inputs 20000] [--out BENCHMARKS.md]
"""
import argparse
import json
import multiprocessing
import os
import resource
import sys
import tempfile
import time
import traceback

import numpy as np
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

HANG_SECONDS = 30
SPECIAL_VALUES = ["5", "1e300", "-inf", "nan", "0x1p3", "9223372036854775808", "-1", "", "\u00a0", "\x00", "\ufeff",
                  "a" * 300, "<s>", "</s>", "<unk>", "-99", "0", "1e-300", "\t\t", "ngram 1=99999999999", "\\data\\",
                  "\\end\\", "\\1-grams:", "\\9-grams:"]
META_VALUES = [None, -1, 0, 1, 3, 21, 2 ** 40, "x", [1], {}, True, False, 1e300, 0.5, "tanh", "mlp", "lbl1"]


def seeds(folder):
    """Valid files of every format, small enough to read thousands of times."""
    from nplmtk.corpus import Corpus
    from nplmtk.mixture import Mixture
    from nplmtk.models import ARCHITECTURES, load
    from nplmtk.neural.train import Trainer, TrainingConfig
    from nplmtk.ngram.arpa import write_arpa
    from nplmtk.ngram.binary import write_binary
    from nplmtk.ngram.counts import NgramCounts
    from nplmtk.ngram.estimate import estimate
    from nplmtk.toy import ToyGrammar
    from nplmtk.vocab import Vocabulary, count_words
    grammar = ToyGrammar()
    text = os.path.join(folder, "text.txt")
    with open(text, "w") as f:
        f.writelines(" ".join(s) + "\n" for s in grammar.sentences(40, 1))
    vocab = Vocabulary.from_counts(count_words([text]))
    vocab.write(os.path.join(folder, "vocab.txt"), with_counts=True)
    corpus = Corpus.read(text, vocab)
    counts = NgramCounts.from_corpus(corpus, 3)
    counts.write(os.path.join(folder, "counts.txt"))
    write_arpa(estimate(counts), os.path.join(folder, "kn3.arpa"))
    write_binary(estimate(counts), os.path.join(folder, "kn3-binary.nplm"))
    models = [os.path.join(folder, "kn3-binary.nplm")]
    for arch in ("mlp", "energy", "lbl", "lbl1", "lbl3"):
        model = ARCHITECTURES[arch].initial(vocab, order=3, features=4, hidden=3, direct=arch == "mlp", seed=1)
        path = os.path.join(folder, f"{arch}.nplm")
        model.save(path)
        models.append(path)
    checkpoint = os.path.join(folder, "ckpt")
    os.makedirs(checkpoint)
    Trainer(ARCHITECTURES["lbl1"].initial(vocab, order=3, features=4, hidden=3, seed=1),
            TrainingConfig.of(ARCHITECTURES["lbl1"], epochs=1, batch=8, progress=False, momentum=0.5,
                              checkpoint_dir=checkpoint)).run(corpus)
    models.append(os.path.join(checkpoint, "checkpoint.nplm"))
    mixture = Mixture([load(os.path.join(folder, "kn3.arpa")), load(models[1])], [0.5, 0.5],
                      [os.path.join(folder, "kn3.arpa"), models[1]])
    mixture.save(os.path.join(folder, "m.mix"))
    return {"lattices": lattice_seeds(folder, text, os.path.join(folder, "kn3.arpa")), "text": text, "vocab": os.path.join(folder, "vocab.txt"), "counts": os.path.join(folder, "counts.txt"),
            "arpa": os.path.join(folder, "kn3.arpa"), "models": models, "mixture": os.path.join(folder, "m.mix")}


def lattice_seeds(folder, text, arpa):
    """HTK lattices of the seed text's first sentences (nplmtk/lattice/noise.py), and one of
    them expanded to KN3 by lattice-tool (language scores on the links, nodes per context)."""
    from nplmtk.lattice.noise import Confusions, sentence_lattice
    with open(text) as f:
        sentences = [line.split() for line in f if line.split()]
    confusions = Confusions(sentences)
    paths = []
    for number, words in enumerate(sentences[:3]):
        paths.append(os.path.join(folder, f"lat{number}.lat"))
        with open(paths[-1], "w") as f:
            f.write(sentence_lattice(words, f"lat{number}", confusions, 1, number))
    expanded = os.path.join(folder, "expanded")
    status, err = run_command(["lattice-tool", "-read-htk", "-in-lattice", paths[0], "-lm", arpa, "-order", "3",
                               "-write-htk", "-out-lattice-dir", expanded])
    if status != 0:
        raise RuntimeError(f"the seed lattice did not expand: {err}")
    import gzip
    for name in sorted(os.listdir(expanded)):  # as text: mutated gzip bytes would only test zlib
        paths.append(os.path.join(folder, "expanded-" + name.removesuffix(".gz") + ".lat"))
        with gzip.open(os.path.join(expanded, name)) as f, open(paths[-1], "wb") as g:
            g.write(f.read())
    return paths


def lattice_command(path, seed, out, draw):
    """A lattice-tool command line that reads `path` and decodes it one of its ways."""
    model = draw(st.sampled_from([["-lm", seed["arpa"], "-order", "3"], ["-lm", seed["arpa"], "-order", "2", "-unk"],
                                  [], ["-lm", seed["models"][1], "-approx-order", "3"]]))
    work = draw(st.sampled_from([["-viterbi-decode"], ["-nbest-decode", "5", "-out-nbest-dir", f"{out}/nbest"],
                                 ["-posterior-decode"], ["-write-htk", "-out-lattice-dir", f"{out}/lat"]]))
    if work[0] == "-write-htk" and not model:  # nothing to expand to
        work = ["-viterbi-decode"]
    return ["lattice-tool", "-read-htk", "-in-lattice", path, *model, *work]


def text_mutation(data, draw):
    """1-4 line or byte operations on a text file."""
    lines = data.split(b"\n")
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["value", "value", "delete", "duplicate", "swap", "insert", "truncate", "flip"]))
        i = draw(st.integers(0, max(len(lines) - 1, 0)))
        if op == "value" and lines:
            fields = lines[i].split(b"\t") if b"\t" in lines[i] else lines[i].split(b" ")
            j = draw(st.integers(0, max(len(fields) - 1, 0)))
            fields[j] = draw(st.sampled_from(SPECIAL_VALUES)).encode("utf-8")
            lines[i] = (b"\t" if b"\t" in lines[i] else b" ").join(fields)
        elif op == "delete" and lines:
            del lines[i]
        elif op == "duplicate" and lines:
            lines.insert(i, lines[i])
        elif op == "swap" and len(lines) > 1:
            k = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[k] = lines[k], lines[i]
        else:
            flat = b"\n".join(lines)
            at = draw(st.integers(0, len(flat)))
            if op == "truncate":
                flat = flat[:at]
            elif op == "flip" and flat:
                at = min(at, len(flat) - 1)
                flat = flat[:at] + bytes([flat[at] ^ (1 << draw(st.integers(0, 7)))]) + flat[at + 1:]
            else:
                flat = flat[:at] + draw(st.binary(min_size=1, max_size=8)) + flat[at:]
            lines = flat.split(b"\n")
    return b"\n".join(lines)


def crafted_container(path, draw, out):
    """A model file changed in its meta, arrays or vocabulary and saved again (valid checksums)."""
    from nplmtk import container
    from nplmtk.vocab import Vocabulary
    saved = container.load(path)
    meta, arrays = json.loads(json.dumps(saved.meta)), {k: np.array(v) for k, v in saved.arrays.items()}
    words = list(saved.vocab.words)
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["meta", "drop-meta", "array", "drop-array", "values", "vocab", "kind"]))
        if op == "meta" or (op == "drop-meta" and meta):
            key = draw(st.sampled_from(sorted(meta) + ["order", "arch", "hidden", "features", "components"]))
            if op == "meta":
                meta[key] = draw(st.sampled_from(META_VALUES))
            else:
                meta.pop(key, None)
        elif op in ("array", "drop-array", "values") and arrays:
            name = draw(st.sampled_from(sorted(arrays)))
            if op == "drop-array":
                del arrays[name]
            elif op == "values":
                flat = arrays[name].reshape(-1)
                if flat.size and flat.dtype.kind == "f":
                    flat[draw(st.integers(0, flat.size - 1))] = draw(st.sampled_from([np.inf, -np.inf, np.nan, 1e30]))
            else:
                shape = tuple(draw(st.lists(st.integers(0, 40), min_size=0, max_size=3)))
                dtype = draw(st.sampled_from([np.float32, np.float64, np.int32, np.int64, np.uint8]))
                arrays[draw(st.sampled_from([name, "extra"]))] = np.ones(shape, dtype=dtype)
        elif op == "vocab":
            words = words + [f"extra{len(words)}"] if draw(st.booleans()) or len(words) < 5 else words[:-2]
        else:
            meta["kind"] = draw(st.sampled_from(["nplm-mlp", "nplm-lbl", "mixture", "nplm-checkpoint",
                                                 "backoff-ngram"]))
    container.save(out, meta.pop("kind", saved.kind), arrays, meta=meta, vocab=Vocabulary(words[3:]))
    if draw(st.integers(0, 9)) == 0:  # raw damage on top: the checksums must catch it
        with open(out, "rb") as f:
            data = f.read()
        with open(out, "wb") as f:
            f.write(text_mutation(data, draw))


def read_and_use(reader, path, seed, command=None):
    """Read `path` as `reader` reads it and use what it yields as a command would (a
    lattice: by `command`, whose exit status 2 with one line is a refusal)."""
    from nplmtk.corpus import Corpus
    from nplmtk.scratch import scratch_folder
    from nplmtk.models import load
    from nplmtk.ngram.count_runs import CountAccumulator
    from nplmtk.ngram.counts import NgramCounts
    from nplmtk.ngram.estimate import estimate
    from nplmtk.vocab import Vocabulary
    from nplmtk.errors import NplmError
    if reader == "htk":
        status, err = run_command(command)
        lines = [line for line in err.splitlines() if ": warning: " not in line]
        if status == 2 and len(lines) == 1 and "Traceback" not in err:
            raise NplmError(lines[0])
        if status != 0:
            raise AssertionError(f"exit {status}, stderr {err[-400:]!r}")
        return
    vocab = Vocabulary.read(seed["vocab"])
    if reader in ("arpa", "container", "mixture"):
        model = load(path)
        corpus = Corpus.read(seed["text"], model.vocab)
        model.logprobs(corpus)
    elif reader == "counts":
        estimate(NgramCounts.read(path, vocab))
    elif reader == "vocab":
        Corpus.read(seed["text"], Vocabulary.read(path)).windows(3)
    else:
        Corpus.read(path, vocab).windows(3)
        # the readers of texts larger than memory: blocks, memory-mapped ids, counts spilled to disk
        streamed = Corpus.read(path, vocab, memory_map=True, block_bytes=512)
        streamed.window_examples(3, vocab.unk)[:]
        with scratch_folder("fuzz-counts") as folder:
            accumulator = CountAccumulator(vocab, 3, 1 << 18, folder)
            for chunk in Corpus.read_blocks(path, vocab, block_bytes=512):
                accumulator.add_text(chunk)
            accumulator.result(path)


def campaign(reader, seed, count, results_path, current_path):
    """In a worker process: `count` inputs for `reader`, outcomes counted into results_path."""
    import warnings
    from nplmtk.errors import NplmError, NplmWarning
    warnings.simplefilter("ignore", NplmWarning)  # a command prints them; here they are noise
    folder = tempfile.mkdtemp(prefix=f"fuzz-{reader}-")
    outcome = {"inputs": 0, "refused": 0, "accepted": 0, "tracebacks": 0, "examples": []}
    sources = {"arpa": [seed["arpa"]], "counts": [seed["counts"]], "vocab": [seed["vocab"]],
               "corpus": [seed["text"]], "container": seed["models"], "mixture": [seed["mixture"]],
               "htk": seed["lattices"]}[reader]

    @settings(max_examples=count, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(st.data())
    def one(data):
        draw = data.draw
        source = draw(st.sampled_from(sources))
        suffix = ".mix" if reader == "mixture" else os.path.splitext(source)[1]
        path = os.path.join(os.path.dirname(source) if reader == "mixture" else folder, f"input{suffix}")
        if reader in ("container", "mixture") and draw(st.integers(0, 4)):
            crafted_container(source, draw, path)
        else:
            with open(source, "rb") as f:
                mutated = text_mutation(f.read(), draw)
            with open(path, "wb") as f:
                f.write(mutated)
        with open(current_path, "wb") as f, open(path, "rb") as g:
            f.write(g.read())
        # drawn before the input is counted: a draw that runs out of data ends the example uncounted
        command = lattice_command(path, seed, folder, draw) if reader == "htk" else None
        outcome["inputs"] += 1
        try:
            read_and_use(reader, path, seed, command)
            outcome["accepted"] += 1
        except NplmError as error:
            outcome["refused"] += 1
            if "\n" in error.render():
                outcome["tracebacks"] += 1  # a refusal must be one line
        except Exception:  # noqa: BLE001 (what the harness counts)
            outcome["tracebacks"] += 1
            if len(outcome["examples"]) < 3:
                outcome["examples"].append(traceback.format_exc(limit=3)[-600:])
        if outcome["inputs"] % 200 == 0:
            write_outcome(outcome, results_path)

    one()
    write_outcome(outcome, results_path)


def write_outcome(values, results_path):
    values["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    with open(results_path + ".tmp", "w") as f:
        json.dump(values, f)
    os.replace(results_path + ".tmp", results_path)


# -- option values (issue 33) ---------------------------------------------------------------

OPTION_VALUES = ["nan", "inf", "-inf", "1e400", "-1", "0", "1", "2", "0.5", "1e-30", "5e-324", "1e308", "-1e308", "",
                 "abc", "\x00", "0x10", "1_0", " 1 ", "\u0663", "1e3", "2147483647", "2147483648", "4294967295",
                 "4294967296", str(2 ** 70), "9" * 5000, "-0", "+1", "1.5", "0.3 0.7", "0.5,0.5", "1 nan", "1\n2",
                 "2G", "1M", "1K", "C=1", "C=nan,A=1", "R=0.5", "=", "a" * 300]
# An in-domain value above this makes a long or large run: it is only parsed (bounding the
# sizes a run may allocate is another check's, issue 33 item 3).
RUN_LIMITS = {("train-nplm", "m"): 64, ("train-nplm", "h"): 64, ("train-nplm", "classes"): 64,
              ("train-nplm", "bptt"): 64, ("train-nplm", "streams"): 64, ("train-nplm", "samples"): 2000,
              ("train-nplm", "max-samples"): 4000, ("train-nplm", "epochs"): 2, ("train-nplm", "batch"): 512,
              ("train-nplm", "threads"): 2, ("ngram-class", "numclasses"): 64, ("ngram-class", "passes"): 3,
              ("ppl", "gen"): 20, ("mix", "iterations"): 500, ("generate", "n"): 20, ("generate", "max-words"): 1000,
              ("toy-corpus", "sentences"): 1000, ("plot", "words"): 1000, ("convert-lm", "sample-words"): 2000,
              ("convert-lm", "prune-to-entries"): 10 ** 6, ("ppl", "dynamic-eval"): 10 ** 4,
              ("ppl", "neural-cache"): 10 ** 4, ("ppl", "cache"): 10 ** 4, ("lattice-tool", "nbest-decode"): 1000,
              ("lattice-tool", "approx-order"): 6,
              # a server runs until it is stopped: only parsed
              ("ppl", "server-port"): 0, ("ppl", "server-maxclients"): 0}


def option_commands(seed, out):
    """Subcommand -> the arguments of a run that ends in a moment, the fuzzed options after them."""
    nbest = os.path.join(out, "list.nbest")
    with open(nbest, "w") as f:
        f.write("-10 -5 3 the cat sits\n-12 -4 2 a dog\n")
    text, arpa, mlp, lattice = seed["text"], seed["arpa"], seed["models"][1], seed["lattices"][0]
    return {"vocab": ["-text", text, "-write-vocab", f"{out}/v.txt"],
            "ngram-count": ["-text", text, "-lm", f"{out}/m.arpa"],
            "ngram-class": ["-text", text, "-numclasses", "3", "-classes", f"{out}/c.classes", "-quiet"],
            "ppl": [["-lm", arpa, "-text", text], ["-lm", mlp, "-text", text]],  # a network: -dynamic-*, -neural-*
            "train-nplm": ["-text", text, "-lm", f"{out}/t.nplm", "-epochs", "1", "-m", "4", "-h", "3", "-quiet"],
            "toy-corpus": ["-sentences", "5", "-write", f"{out}/toy.txt"],
            "mix": ["-lm", arpa, "-lm", mlp, "-text", text],
            "generate": ["-lm", arpa, "-n", "2", "-write", f"{out}/g.txt"],
            "convert-lm": ["-lm", mlp, "-sample-words", "100", "-write-lm", f"{out}/c.arpa", "-quiet"],
            "embeddings": ["-lm", mlp, "-neighbours", "the", "-write", f"{out}/e.txt"],
            "plot": ["-lm", mlp, "-embeddings", "-out", f"{out}/p.png"],
            "rescore": ["-lm", arpa, "-nbest", nbest, "-rescore-output", f"{out}/r.nbest"],
            "lattice-tool": [["-read-htk", "-in-lattice", lattice, "-lm", arpa, "-viterbi-decode"],
                             ["-read-htk", "-in-lattice", lattice, "-lm", arpa, "-nbest-decode", "3",
                              "-out-nbest-dir", f"{out}/nbest"],
                             ["-read-htk", "-in-lattice", lattice, "-lm", mlp, "-posterior-decode"]]}


def numeric_options():
    """Subcommand -> {flag: click parameter} of its options with a domain."""
    import importlib
    from nplmtk.cli.main import SUBCOMMANDS
    options = {}
    for subcommand, module in SUBCOMMANDS.items():
        params = importlib.import_module(f"nplmtk.cli.{module}").command.params
        options[subcommand] = {param.opts[0]: param for param in params if hasattr(param.type, "domain")}
    return options


def option_value(draw, param):
    """A value for `param`: one inside its domain, a special one, a number of any size, an
    edge of its domain, junk."""
    kind = draw(st.sampled_from(["inside", "inside", "inside", "special", "integer", "float", "edge", "text"]))
    domain = param.type.element if hasattr(param.type, "element") else param.type
    if kind == "inside" and hasattr(domain, "low"):
        if isinstance(domain.low, int) and isinstance(domain.high, int):
            value = str(draw(st.integers(domain.low, min(domain.high, domain.low + 100))))
        else:
            low, high = max(domain.low, -1e6), min(domain.high, 1e6)
            value = repr(draw(st.floats(low, high, exclude_min=domain.low_open, exclude_max=domain.high_open)))
        return f"C={value}" if param.multiple else value
    if kind in ("special", "inside"):
        return draw(st.sampled_from(OPTION_VALUES))
    if kind == "integer":
        return str(draw(st.integers(-2 ** 80, 2 ** 80) | st.integers(-3, 100)))
    if kind == "float":
        return repr(draw(st.floats(allow_nan=True, allow_infinity=True)))
    if kind == "edge":
        low, high = getattr(domain, "low", 1), getattr(domain, "high", 2 ** 50)
        edge = draw(st.sampled_from([low, high]))
        if isinstance(edge, int):
            edge += draw(st.integers(-1, 1))
        else:
            edge = float(np.nextafter(edge, draw(st.sampled_from([-np.inf, np.inf])))) if draw(st.booleans()) else edge
        value = repr(edge) if isinstance(edge, float) else str(edge)
        return f"C={value}" if param.multiple else value
    return draw(st.text(max_size=12))


def run_command(argv):
    """`nplm ARGV` in this process: (exit status, stderr); an exception main lets through
    (a traceback) propagates."""
    import contextlib
    import io
    from nplmtk.cli.main import main
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        try:
            main(argv)
            status = 0
        except SystemExit as exit:
            status = exit.code
    return status, err.getvalue()


def options_campaign(_, seed, count, results_path, current_path):
    """In a worker process: `count` command lines with drawn option values, outcomes counted."""
    out = tempfile.mkdtemp(prefix="fuzz-options-")
    commands, options = option_commands(seed, out), numeric_options()
    outcome = {"inputs": 0, "refused": 0, "accepted": 0, "parsed_only": 0, "tracebacks": 0, "python_warnings": 0,
               "examples": []}

    @settings(max_examples=count, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(st.data())
    def one(data):
        draw = data.draw
        subcommand = draw(st.sampled_from(sorted(commands)))
        flags = draw(st.lists(st.sampled_from(sorted(options[subcommand])), min_size=1, max_size=3, unique=True))
        drawn = [(flag, option_value(draw, options[subcommand][flag])) for flag in flags]
        base = commands[subcommand]
        base = draw(st.sampled_from(base)) if isinstance(base[0], list) else base
        argv = [subcommand] + base + [part for pair in drawn for part in pair]
        if subcommand == "train-nplm":  # the options of other architectures, criteria and output layers too
            argv += ["-arch", draw(st.sampled_from(["mlp", "lstm", "rnn", "lbl1", "energy"])),
                     "-criterion", draw(st.sampled_from(["full", "full", "is", "is-adaptive"]))]
            argv += ["-output", draw(st.sampled_from(["class", "hs"]))] if draw(st.integers(0, 3)) == 0 else []
        with open(current_path, "w") as f:
            json.dump(argv, f)
        outcome["inputs"] += 1
        try:
            if all(in_domain(options[subcommand][flag], value) for flag, value in drawn) and any(
                    costly(subcommand, flag, options[subcommand][flag], value) for flag, value in drawn):
                options_command(subcommand).make_context(subcommand, argv[1:])
                outcome["parsed_only"] += 1
            else:
                status, err = run_command(argv)
                lines = [line for line in err.splitlines() if ": warning: " not in line]
                if "Warning:" in err:  # Python's own warnings (a RuntimeWarning of numpy): lines a user cannot use
                    outcome["python_warnings"] += 1
                    if len(outcome["examples"]) < 3:
                        outcome["examples"].append(f"{argv}\n{err[-600:]}")
                if status == 0:
                    outcome["accepted"] += 1
                elif status == 2 and len(lines) == 1 and "Traceback" not in err:
                    outcome["refused"] += 1
                else:
                    raise AssertionError(f"exit {status}, stderr {err[-400:]!r}")
        except Exception as error:  # noqa: BLE001 (what the harness counts)
            outcome["tracebacks"] += 1
            if len(outcome["examples"]) < 3:
                outcome["examples"].append(f"{argv}\n{traceback.format_exc(limit=3)[-600:]}{error}")
        if outcome["inputs"] % 50 == 0:
            write_outcome(outcome, results_path)

    one()
    write_outcome(outcome, results_path)


def options_command(subcommand):
    from nplmtk.cli.main import cli
    return cli.get_command(None, subcommand)


def in_domain(param, value):
    import click
    try:
        param.type.convert(value, param, None)
        return True
    except click.BadParameter:
        return False


def costly(subcommand, flag, param, value):
    limit = RUN_LIMITS.get((subcommand, flag.lstrip("-")))
    return limit is not None and param.type.convert(value, param, None) > limit


def fuzz_reader(reader, seed, count, work):
    """Run campaigns in worker processes until `count` inputs are done; a worker killed by a
    signal is a crash, one without progress for HANG_SECONDS a hang (the input is kept)."""
    totals = {"inputs": 0, "refused": 0, "accepted": 0, "parsed_only": 0, "tracebacks": 0, "python_warnings": 0,
              "crashes": 0, "hangs": 0, "peak_mb": 0, "examples": []}
    context = multiprocessing.get_context("spawn")  # forking after OpenMP has run is unsafe
    attempt = 0
    while totals["inputs"] < count and attempt < 20:
        attempt += 1
        results, current = os.path.join(work, f"{reader}.json"), os.path.join(work, f"{reader}.current")
        with open(results, "w") as f:
            json.dump({"inputs": 0}, f)
        worker = context.Process(target=options_campaign if reader == "options" else campaign,
                                 args=(reader, seed, count - totals["inputs"], results, current))
        worker.start()
        last, seen = time.time(), 0
        while worker.is_alive():
            worker.join(1)
            done = json.load(open(results)).get("inputs", 0)
            if done != seen or os.path.getmtime(current if os.path.exists(current) else results) > last:
                seen, last = done, time.time()
            elif time.time() - last > HANG_SECONDS:
                worker.kill()
                worker.join()
                totals["hangs"] += 1
                os.replace(current, os.path.join(work, f"{reader}-hang-{attempt}.input"))
        outcome = json.load(open(results))
        for key in ("inputs", "refused", "accepted", "parsed_only", "tracebacks", "python_warnings"):
            totals[key] += outcome.get(key, 0)
        totals["peak_mb"] = max(totals["peak_mb"], outcome.get("peak_mb", 0))
        totals["examples"] += outcome.get("examples", [])
        if worker.exitcode is not None and worker.exitcode < 0 and os.path.exists(current):
            totals["crashes"] += 1
            totals["inputs"] += 1
            os.replace(current, os.path.join(work, f"{reader}-crash-{attempt}.input"))
        elif worker.exitcode:
            raise RuntimeError(f"the {reader} worker failed (exit {worker.exitcode}): a fault of the harness")
    return totals


READERS = ("arpa", "counts", "vocab", "corpus", "container", "mixture", "htk", "options")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inputs", type=int, default=20000, help="inputs per reader")
    parser.add_argument("--out", default=None, help="write the figures as a BENCHMARKS.md section")
    parser.add_argument("--readers", nargs="*", default=READERS)
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="nplm-fuzz-")
    seed = seeds(work)
    rows, started = [], time.time()
    for reader in args.readers:
        begin = time.time()
        totals = fuzz_reader(reader, seed, args.inputs, work)
        totals["seconds"] = time.time() - begin
        print(json.dumps({"reader": reader, **{k: v for k, v in totals.items() if k != "examples"}}), flush=True)
        for example in totals["examples"]:
            print(example, file=sys.stderr)
        rows.append((reader, totals))
    bad = sum(t["tracebacks"] + t["python_warnings"] + t["crashes"] + t["hangs"] for _, t in rows)
    print(f"fuzz: {sum(t['inputs'] for _, t in rows):,} inputs in {time.time() - started:.0f} s; "
          f"{bad} tracebacks, Python warnings, crashes or hangs (inputs kept in {work})")
    if args.out:
        write_section(args.out, rows, args.inputs)
    sys.exit(1 if bad else 0)


def write_section(out, rows, count):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks"))
    from run import checkout_commit, cpu_model, now, write_sections
    parsed_only = sum(t["parsed_only"] for _, t in rows)
    body = ["## Hostile inputs: `make fuzz` (issues 20 and 33)", "",
            f"_Measured {now()}, commit {checkout_commit() or 'unknown'}, {cpu_model()}._", "",
            f"`python tests/fuzz.py --inputs {count}` (tests/fuzz.py): per reader, inputs drawn by hypothesis from "
            "valid seed files (line and byte mutations, values out of their domain; model files crafted with "
            "valid checksums, some with raw damage on top), each read and used (scored) in a worker process. "
            "Refused: one-line NplmError; tracebacks: any other exception (or a refusal of several lines); "
            f"crashes: the worker killed by a signal; hangs: no progress for {HANG_SECONDS} s. The options row "
            "(issue 33): command lines of every subcommand on tiny inputs with one to three numeric options set "
            "to drawn values (inside and at the edges of their domains, nan, inf, huge integers, junk); refused: "
            "exit 2 with one line; accepted: exit 0, or only parsed where an in-domain value would make a long run "
            f"({parsed_only:,} of them); tracebacks include Python's own warnings on stderr.", "",
            "| reader | inputs | refused | accepted | tracebacks | crashes | hangs | peak memory | seconds |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for reader, t in rows:
        body.append(f"| {reader} | {t['inputs']:,} | {t['refused']:,} | {t['accepted']:,} | "
                    f"{t['tracebacks'] + t['python_warnings']} | "
                    f"{t['crashes']} | {t['hangs']} | {t['peak_mb']:.0f} MB | {t['seconds']:.0f} |")
    write_sections(out, [body])


if __name__ == "__main__":
    main()
