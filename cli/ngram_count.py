"""nplm ngram-count: count n-grams and estimate smoothed models."""
import contextlib
import os

import click

from nplmtk.errors import NplmError
from nplmtk.io import check_readable, check_writable
from nplmtk.ngram.binary import check_binary_name
from nplmtk.ngram.count_estimate import CountEstimate, CountSpec, Ranks
from nplmtk.ngram.counts import MAX_ORDER, check_order
from nplmtk.threads import reuse_freed_memory

from .options import ByteSize, Integer, Real, example, flag, option


# Good-Turing tabulates the counts of counts n_1 .. n_{N+1} and warns of each zero one below N
# (as SRILM does): -gt1max 2147483647 ran out of memory
GT_MAX_COUNT = 1000


def _cutoff_options(command):
    for k in range(MAX_ORDER, 0, -1):
        command = option(f"gt{k}max", type=Integer(0, GT_MAX_COUNT), default=None, metavar="N",
                         help=f"Good-Turing: discount {k}-grams counted up to N times (SRILM's defaults: 1 for "
                         "1-grams, 7 above; likewise -gt2max .. -gt9max)." if k == 1 else None, hidden=k > 1)(command)
        command = option(f"gt{k}min", type=Integer(1), default=None, metavar="N",
                         help=f"Drop {k}-grams counted fewer than N times (default 1: keep all; likewise -gt2min .. "
                         "-gt9min)." if k == 1 else None, hidden=k > 1)(command)
    return command


def _discounting(kndiscount, ukndiscount, wbdiscount, gtdiscount, cdiscount, addsmooth):
    """The method and its constant from the flags, at most one given (SRILM: "conflicting
    default discounting options")."""
    chosen = [name for name, given in (("-kndiscount", kndiscount), ("-ukndiscount", ukndiscount),
                                       ("-wbdiscount", wbdiscount), ("-gtdiscount", gtdiscount),
                                       ("-cdiscount", cdiscount is not None), ("-addsmooth", addsmooth is not None))
              if given]
    if len(chosen) > 1:
        raise NplmError(f"conflicting discounting options: {' and '.join(chosen)}")
    method = {"-kndiscount": "kn", "-ukndiscount": "ukn", "-wbdiscount": "wb", "-gtdiscount": "gt",
              "-cdiscount": "cd", "-addsmooth": "add"}.get(chosen[0] if chosen else None)
    return method, cdiscount if cdiscount is not None else addsmooth


@click.command("ngram-count", epilog=example(
    "nplm vocab -text train.txt -min-count 4 -write-vocab vocab.txt",
    "nplm ngram-count -text train.txt -order 5 -vocab vocab.txt -unk -lm kn5.arpa",
    "nplm ngram-count -text train.txt -order 3 -deleted-interpolation -heldout valid.txt -lm di3.nplm"))
@option("text", multiple=True, metavar="FILE", help="Training text, one sentence per line (repeatable).")
@option("read", multiple=True, metavar="FILE",
        help="Counts file to add (repeatable; merged with -text): SRILM's text counts or -write-binary's file.")
@option("order", type=Integer(1, MAX_ORDER), default=3, help="Maximum n-gram order.")
@option("vocab", metavar="FILE", default=None,
        help="Vocabulary; other words become <unk>. Default: every word of the training data.")
@flag("unk", help="Keep <unk> as a word of the model (open vocabulary); else OOVs are left out.")
@option("write", metavar="FILE", default=None, help="Write the counts of all orders, each n-gram followed by its "
        "extensions (SRILM's -write -sort order); counts that outgrow -memory are sorted on disk.")
@option("write-binary", metavar="FILE", default=None,
        help="Write the counts of all orders as one binary file (sorted rows, the vocabulary, checksums) that "
        "-read merges a block at a time: counts of parts of a corpus made apart (say on other machines, with one "
        "-vocab), summed later.")
@option("lm", metavar="FILE", default=None,
        help="Write the model: ARPA for back-off models, an nplm container for -deleted-interpolation.")
@option("write-bin-lm", metavar="FILE", default=None,
        help="Write the back-off model also (or only) as a binary nplm model: memory-mapped tables that open in "
        "milliseconds wherever a model is read.")
@flag("kndiscount", help="Modified Kneser-Ney discounting (the default).")
@flag("ukndiscount", help="Original Kneser-Ney discounting: one discount per order.")
@flag("wbdiscount", help="Witten-Bell discounting.")
@flag("gtdiscount", help="Good-Turing discounting (SRILM's default when no method is given; nplm's default is "
      "-kndiscount -interpolate), with -gtNmax.")
@option("cdiscount", type=Real(0, 1), default=None, metavar="D",
        help="Absolute discounting: D (0..1) from every count.")
@option("addsmooth", type=Real(0), default=None, metavar="D", help="Add D to every count (additive smoothing).")
@flag("interpolate", help="Interpolate with lower orders (implied when no method is given).")
@flag("always-interpolate", help="Keep interpolating in contexts whose seen words leave no mass for "
      "unseen ones (KenLM's lmplz does; SRILM switches interpolation off there).")
@flag("deleted-interpolation", help="The deleted-interpolation trigram of Bengio et al. 2003 (needs -heldout).")
@option("heldout", metavar="FILE", default=None, help="Held-out text for the EM weights of -deleted-interpolation.")
@option("em-iterations", type=Integer(1), default=5, help="EM iterations for -deleted-interpolation.")
@option("prune", type=Real(0), default=0.0,
        help="Entropy pruning of the estimated model, as `nplm ppl -prune` (SRILM's -prune).")
@option("minprune", type=Integer(2), default=2, help="Prune only n-grams at least this long.")
@option("write-vocab", metavar="FILE", default=None,
        help="Write the vocabulary, sorted as SRILM writes it (SRILM's pause token -pau- left out).")
@flag("limit-vocab", help="With -vocab: leave out the -read counts of n-grams with other words (else they count "
                          "as <unk>).")
@flag("sort", help="Accepted for SRILM compatibility: -write always writes SRILM's sorted order.")
@option("map-unk", metavar="WORD", default=None, help="Name the unknown word WORD instead of <unk>.")
@option("classes", metavar="FILE", default=None,
        help="A classes file (SRILM's format, e.g. from `nplm ngram-class`): count and estimate the n-grams of "
        "the words' classes (what SRILM's replace-words-with-classes and ngram-count do). -lm X.nplm writes one "
        "file holding both; an ARPA -lm is scored with `nplm ppl -lm X -classes FILE`.")
@option("debug", type=Integer(0, 4), default=0,
        help="1 or more: print each order's discounting as SRILM's -debug 1 does (to stderr); 2: also how many "
        "sorted runs of counts went to disk (-memory).")
@option("memory", type=ByteSize(), default="2G",
        help="About how much memory counting may use: the text is counted in pieces, and counts beyond this go to "
        "sorted files in TMPDIR (or -temp) that are merged at the end (SRILM's make-big-lm, lmplz's -S). An "
        "estimate that would not fit runs out of core, in passes over files, and writes the same model.")
@option("temp", metavar="DIR", default=None,
        help="Keep the temporary files of counting in DIR instead of TMPDIR (they are removed at the end, on an "
        "error, on Ctrl-C and on SIGTERM).")
@flag("mpi", help="Under mpiexec: each rank counts its share of the -text files' lines, the counts are exchanged "
      "by first word and each rank estimates the n-grams of its first words (interpolated modified Kneser-Ney "
      "without cutoffs; other estimates at rank 0); rank 0 writes the model (the same files as one machine's).")
@flag("lower", help="Lower-case the text first.")
@flag("map-numbers", help="Map numeric tokens to <num>.")
@_cutoff_options
def command(text, read, order, vocab, unk, write, write_binary, lm, write_bin_lm, kndiscount, ukndiscount, wbdiscount, gtdiscount,
            cdiscount, addsmooth, interpolate, always_interpolate, deleted_interpolation, heldout, em_iterations, prune,
            minprune, write_vocab, limit_vocab, sort, map_unk, classes, debug, memory, temp, mpi, lower, map_numbers,
            **cutoffs):
    """Count the n-grams of a text and estimate a smoothed model.

    With no discounting option the model is interpolated modified Kneser-Ney
    (-kndiscount -interpolate); -kndiscount alone gives the back-off version.
    Cutoffs -gt1min .. -gt9min are as in SRILM, default 1 (keep every n-gram).
    """
    reuse_freed_memory()  # chunks of the passes and threads reused: fewer page faults, within -memory
    ranks = None  # under -mpi, bad input is one line from rank 0
    if mpi:
        from nplmtk.neural.parallel import world  # mpi4py only for -mpi: a command starts in 70 ms

        from .ranks import abort_on_error, input_agreed_on
        comm = world()
        ranks = Ranks(comm, lambda: input_agreed_on(comm), lambda error: abort_on_error(comm, error))
    with ranks.agreed() if mpi else contextlib.nullcontext():
        check_order(order)
        if not text and not read:
            raise NplmError("give training text with -text or counts with -read")
        method, constant = _discounting(kndiscount, ukndiscount, wbdiscount, gtdiscount, cdiscount, addsmooth)
        if deleted_interpolation and (method or interpolate):
            raise NplmError("-deleted-interpolation is a model of its own: drop the discounting options")
        max_counts = [cutoffs[f"gt{k}max"] for k in range(1, MAX_ORDER + 1)]
        if method != "gt" and any(m is not None for m in max_counts):
            raise NplmError("-gtNmax sets Good-Turing's discounting: it needs -gtdiscount")
        if lm is None and write_bin_lm is None and write is None and write_binary is None and write_vocab is None:
            raise NplmError("nothing to do: give -lm MODEL, -write-bin-lm MODEL, -write COUNTS, -write-binary COUNTS "
                            "and/or -write-vocab FILE")
        if write_bin_lm is not None and (deleted_interpolation or classes is not None):
            raise NplmError("-write-bin-lm writes back-off models of words: a deleted-interpolation or class n-gram "
                            "model goes to -lm MODEL.nplm")
        if limit_vocab and vocab is None:
            raise NplmError("-limit-vocab needs -vocab (the words to keep)")
        if prune and lm is None and write_bin_lm is None:
            raise NplmError("-prune prunes the model: give -lm MODEL")
        if sum(path == "-" for path in text + read + ((heldout,) if heldout else ())) > 1:
            raise NplmError("-: stdin can be read only once")
        for path in list(text) + list(read) + [p for p in (vocab, heldout, classes) if p]:
            check_readable(path)
        for path in (lm, write_bin_lm, write, write_binary, write_vocab):
            check_writable(path)
        if temp is not None and not os.path.isdir(temp):
            raise NplmError(f"{'not a folder' if os.path.exists(temp) else 'no such folder'} (-temp)", path=temp)
        check_binary_name(write_bin_lm)
        if mpi:
            if deleted_interpolation or classes is not None or not text:
                raise NplmError("-mpi counts the words of -text: not with -deleted-interpolation or -classes")
            for path in text:
                if path == "-" or not os.path.isfile(path):
                    raise NplmError("-mpi shares a text out by byte ranges: give a regular file", path=path)
        if deleted_interpolation and (lm or write or write_binary):
            if order != 3:
                raise NplmError("-deleted-interpolation is a trigram model: use -order 3")
            if heldout is None or lm is None or not text:
                raise NplmError("-deleted-interpolation needs -text, -heldout and -lm")
        if classes is not None and read and not deleted_interpolation and (lm or write or write_binary):
            raise NplmError("-classes counts class n-grams of -text; -read counts are of words")
    spec = CountSpec(texts=tuple(text), reads=tuple(read), order=order, vocab=vocab, unk=unk, map_unk=map_unk,
                     lower=lower, map_numbers=map_numbers, limit_vocab=limit_vocab, classes=classes, method=method,
                     constant=constant, interpolate=interpolate, always_interpolate=always_interpolate,
                     min_counts=tuple(cutoffs[f"gt{k}min"] for k in range(1, MAX_ORDER + 1)),
                     max_counts=tuple(max_counts), deleted_interpolation=deleted_interpolation, heldout=heldout,
                     em_iterations=em_iterations, prune=prune, min_prune_order=minprune, memory=memory, temp=temp,
                     mpi=mpi, debug=debug, lm=lm, write_bin_lm=write_bin_lm, write=write, write_binary=write_binary,
                     write_vocab=write_vocab)
    CountEstimate(spec, echo=lambda line: click.echo(line, err=True), ranks=ranks).run()
