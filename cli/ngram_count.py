"""nplm ngram-count: count n-grams and estimate smoothed models."""
import contextlib
import os
import time

import click
import numpy as np

from nplmtk.container import is_container
from nplmtk.corpus import Corpus
from nplmtk.errors import NplmError
from nplmtk.io import check_readable, check_writable, open_output
from nplmtk.scratch import scratch_error, scratch_folder
from nplmtk.ngram.arpa import write_arpa
from nplmtk.ngram.binary import check_binary_name
from nplmtk.ngram.binary import write_binary as write_binary_model  # -write-binary names the counts file
from nplmtk.ngram.classes import ClassNgramModel, WordClasses, file_bytes, save_class_model, token_ids, token_vocabulary
from nplmtk.ngram.count_runs import CountAccumulator
from nplmtk.ngram.counts import MAX_ORDER, NgramCounts, byte_ranks, check_order, check_orders, counted_words
from nplmtk.ngram.deleted_interpolation import DeletedInterpolation
from nplmtk.ngram.estimate import estimate
from nplmtk.ngram.estimate import prune as prune_model
from nplmtk.ngram.sorted_counts import IN_MEMORY_WRITE_BYTES_PER_NGRAM, write_counts_streamed
from nplmtk.ngram.store import CountsFile, counts_file_vocabulary, write_counts_file
from nplmtk.ngram.stream import StreamEstimate, fits_in_memory, timed_stage
from nplmtk.ngram.stream.writers import write_arpa_streamed, write_binary_streamed
from nplmtk.text import Normalizer
from nplmtk.threads import reuse_freed_memory
from nplmtk.vocab import UNK, Vocabulary, count_words

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
    agreed = contextlib.nullcontext  # under -mpi, bad input is one line from rank 0
    if mpi:
        from nplmtk.neural.parallel import world  # mpi4py only for -mpi: a command starts in 70 ms

        from .ranks import input_agreed_on
        comm = world()

        def agreed():
            return input_agreed_on(comm)
    with agreed():
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
        normalize = Normalizer(lower=lower, map_numbers=map_numbers)
        unk_word = map_unk or UNK

        binary_reads = [path for path in read if is_container(path)]
        if vocab is not None:
            vocabulary = Vocabulary.read(vocab, unk=unk_word)
        elif text:
            vocabulary = Vocabulary.from_counts(count_words(text, normalize), unk=unk_word)
        elif binary_reads and len(binary_reads) == len(read):
            vocabulary = counts_file_vocabulary(binary_reads[0])
        elif binary_reads:
            raise NplmError("binary counts (-write-binary's) merge with text counts under one -vocab: give it")
        else:
            vocabulary = Vocabulary(list(dict.fromkeys(w for path in read for w in counted_words(path))), unk=unk_word)
    if write_vocab is not None:
        with open_output(write_vocab) as out:
            out.writelines(f"{vocabulary.words[w]}\n" for w in np.argsort(byte_ranks(vocabulary.words)))
        if lm is None and write_bin_lm is None and write is None and write_binary is None:
            return

    if deleted_interpolation:
        if order != 3:
            raise NplmError("-deleted-interpolation is a trigram model: use -order 3")
        if heldout is None or lm is None or not text:
            raise NplmError("-deleted-interpolation needs -text, -heldout and -lm")
        corpora = [Corpus.read(path, vocabulary, unk=unk, normalize=normalize) for path in text]
        train = Corpus.concatenate(corpora) if len(corpora) > 1 else corpora[0]
        model = DeletedInterpolation.train(train, unk_is_word=unk)
        model.fit_weights(Corpus.read(heldout, vocabulary, unk=unk, normalize=normalize), em_iterations,
                          log=lambda message: click.echo(f"nplm ngram-count: {message}", err=True))
        model.save(lm, {"training": list(text), "heldout": heldout})
        return

    if classes is not None:
        if read:
            raise NplmError("-classes counts class n-grams of -text; -read counts are of words")
        word_classes = WordClasses.read(classes)
        tokens = token_vocabulary(vocabulary, word_classes)
        ids = token_ids(vocabulary, word_classes, tokens)
        # the unknown word's class stands for it: the <unk> token itself never occurs
        unk = unk and vocabulary.unk_word not in word_classes.class_of
    min_counts = [cutoffs[f"gt{k}min"] or 1 for k in range(1, order + 1)]
    interpolated = interpolate or method is None
    # the estimate's settings, in memory (estimate) and out of core (StreamEstimate) alike
    discounting = dict(method=method or "kn", interpolate=interpolated, min_counts=min_counts,
                       max_counts=max_counts[:order], constant=constant, always_interpolate=always_interpolate)
    estimating = lm is not None or write_bin_lm is not None  # out of core when the counts outgrow -memory
    source = ", ".join(text + read)
    started = time.perf_counter()
    def add_reads(accumulator):
        for path in read:
            if path in binary_reads:
                accumulator.add_store(CountsFile(path, vocabulary))
            else:
                accumulator.add_counts_file(path, limit_vocab)

    with scratch_folder("counts", temp) as folder:
        if mpi:
            comm, part, words = _counted_across_ranks(text, add_reads, vocabulary, order, memory, folder, normalize,
                                                      source, debug)
            if estimating and not read and write is None and method in (None, "kn") and interpolated \
                    and max(min_counts) == 1 and not prune and not always_interpolate:  # every rank estimates its part
                _estimated_across_ranks(comm, part, words, folder, memory, unk, debug, lm, write_bin_lm, write_binary)
                return
            store = _gathered(comm, part, memory, os.path.join(folder, "counts"))
            if store is None:  # rank 0 writes
                return
            spilled, counted = 0, time.perf_counter()
        else:
            accumulator = CountAccumulator(tokens if classes is not None else vocabulary, order, memory, folder)
            blocks = (chunk for path in text for chunk in Corpus.read_blocks(
                path, vocabulary, unk=True, normalize=normalize, block_bytes=accumulator.block_bytes))
            if classes is not None:
                blocks = (Corpus(ids[chunk.ids], chunk.offsets, tokens, name=chunk.name) for chunk in blocks)
            accumulator.add_texts(blocks)
            add_reads(accumulator)
            spilled, store = len(accumulator.runs), None
            entries = accumulator.counter.entries()
            if write_binary is not None or (estimating or write is not None) and (
                    accumulator.runs or accumulator.counts_read or not fits_in_memory(entries, memory)
                    or write is not None and not fits_in_memory(entries, memory, IN_MEMORY_WRITE_BYTES_PER_NGRAM)):
                counted = time.perf_counter()
                store = accumulator.store(os.path.join(folder, "counts"), source=source)
        if store is not None:
            if write_binary is not None:
                write_counts_file(store, write_binary)
            if write is not None and not fits_in_memory(sum(store.sizes), memory, IN_MEMORY_WRITE_BYTES_PER_NGRAM):
                if debug >= 2:
                    click.echo("nplm ngram-count: the counts outgrow -memory: counts written out of core, "
                               "in sorted runs", err=True)
                write_counts_streamed(store, write, memory, folder)
                write = None
            if lm is None and write_bin_lm is None and write is None:
                return
            if estimating and store.order == order and not fits_in_memory(sum(store.sizes), memory):
                _log_runs(debug, spilled)
                if debug >= 2:
                    click.echo(f"nplm ngram-count: counting: {counted - started:.1f} s; merging the sorted runs: "
                               f"{time.perf_counter() - counted:.1f} s", err=True)
                _estimate_out_of_core(store, folder, memory, unk,
                                      dict(discounting, prune=(prune, minprune) if prune else None), debug, lm,
                                      write_bin_lm, word_classes if classes is not None else None)
                return
            counts = store.load()
        else:
            counts = accumulator.result(source=source)
        _log_runs(debug, spilled)
    if write is not None:
        counts.write(write)
    if lm is None and write_bin_lm is None:
        return
    if counts.order < order:
        raise NplmError(f"the counts go up to order {counts.order}, below -order {order}")
    if counts.order > order:
        counts = NgramCounts(counts.vocab, counts.grams[:order], counts.counts[:order])
    model = estimate(counts, unk_is_word=unk, log=(lambda line: click.echo(line, err=True)) if debug else None,
                     **discounting)
    if prune:
        model = prune_model(model, prune, minprune)
    if classes is not None and lm.endswith(".nplm"):
        ClassNgramModel(model, word_classes).save(lm)  # the class n-gram and its classes in one file
    elif lm is not None:
        write_arpa(model, lm)
    if write_bin_lm is not None:
        write_binary_model(model, write_bin_lm)


def _rank_timing(comm, debug):
    """-mpi -debug 2: rank 0's stage timings, as `timing(line)` (None at the other ranks)."""
    if debug < 2 or comm.rank:
        return None
    return lambda line: click.echo(f"nplm ngram-count: rank 0 of {comm.size}: {line}", err=True)


def _counted_across_ranks(texts, add_reads, vocab, order, memory, folder, normalize, source, debug):
    """-mpi: this rank's shares of the texts counted (rank 0 adds the -read counts), the
    ranks agreeing on bad input before any exchange; then the counts exchanged by first
    word. Returns the communicator, this rank's part (a CountStore) and the ranks' ranges
    of first words (exchange_by_first_word's)."""
    from mpi4py import MPI

    from nplmtk.neural.parallel import world
    from nplmtk.ngram.mpi_counts import count_share, exchange_by_first_word

    from .ranks import abort_on_error, input_agreed_on
    comm = world()
    timing = _rank_timing(comm, debug)
    with input_agreed_on(comm), timed_stage("counting its share of the text", timing):
        local = count_share(comm, texts, vocab, order, memory, folder, normalize,
                            add_reads if comm.rank == 0 else None)
    try:
        with timed_stage("the counts exchanged by first word", timing):
            part, words = exchange_by_first_word(comm, local, memory, folder)
        sizes = np.array([part.sizes[k] if k < part.order else 0 for k in range(order)], dtype=np.int64)
        comm.Allreduce(MPI.IN_PLACE, sizes)
    except BaseException as error:  # noqa: B902 - a rank stopping here would leave the others waiting
        abort_on_error(comm, error)
    with input_agreed_on(comm):
        if not sizes.sum():
            raise NplmError("empty corpus (no words)", path=source)
        check_orders(sizes, source)
    return comm, part, words


def _gathered(comm, part, memory, folder, keep=False):
    """The ranks' counts gathered at rank 0 (gather_parts): its CountStore of all the
    counts, None at the others."""
    from nplmtk.ngram.mpi_counts import gather_parts

    from .ranks import abort_on_error
    try:
        return gather_parts(comm, part, memory, folder, keep)
    except BaseException as error:  # noqa: B902
        abort_on_error(comm, error)


def _estimated_across_ranks(comm, part, words, folder, memory, unk, debug, lm, write_bin_lm, write_binary):
    """-mpi with interpolated modified Kneser-Ney: each rank estimates the n-grams of its
    first words (mpi_estimate.py); rank 0 gathers the model and writes it (and the counts
    first, with -write-binary)."""
    from nplmtk.ngram.mpi_estimate import gather_model, rank_estimate

    from .ranks import abort_on_error
    root = comm.rank == 0
    if write_binary is not None:
        store = _gathered(comm, part, memory, os.path.join(folder, "counts"), keep=True)
    try:
        if write_binary is not None and root:  # a failure here stops every rank, not rank 0 alone
            write_counts_file(store, write_binary)
        work = os.path.join(folder, "estimate")
        os.mkdir(work)
        timing = _rank_timing(comm, debug)
        estimate = rank_estimate(comm, part, words, work, memory, unk_is_word=unk,
                                log=(lambda line: click.echo(line, err=True)) if debug and root else None,
                                warn=None if root else (lambda message: None), timing=timing)
        estimated = estimate.run()
        with timed_stage("the model gathered at rank 0", timing):
            model = gather_model(comm, estimated, max(1, memory // 4 // 64))
    except BaseException as error:  # noqa: B902
        abort_on_error(comm, error)
    if model is None:
        return
    if lm is not None:
        with timed_stage("writing the ARPA file", timing):
            write_arpa_streamed(model, lm, memory, work)
    if write_bin_lm is not None:
        with timed_stage("writing the binary model", timing):
            write_binary_streamed(model, write_bin_lm, memory)


def _log_runs(debug, runs):
    if debug >= 2 and runs:
        click.echo(f"nplm ngram-count: the counts outgrew -memory: {runs} sorted runs on disk, merged", err=True)


def _estimate_out_of_core(store, folder, memory, unk, discounting, debug, lm, write_bin_lm, word_classes=None):
    """The estimate of counts larger than memory, in passes over files (stream.py): the
    same files as the in-memory estimate writes. `discounting`: the estimate's settings
    (StreamEstimate's arguments); `word_classes`: the classes of a class n-gram (saved with
    it in one file when `lm` is X.nplm)."""
    if debug >= 2:
        click.echo(f"nplm ngram-count: {sum(store.sizes)} distinct n-grams outgrow -memory: estimated out of core, "
                   "in passes over files", err=True)
    work = os.path.join(folder, "estimate")
    try:
        os.mkdir(work)
    except OSError as err:
        raise scratch_error(folder, err) from None
    timing = (lambda line: click.echo(f"nplm ngram-count: {line}", err=True)) if debug >= 2 else None
    estimate_on_disk = StreamEstimate(store, work, memory, unk_is_word=unk, timing=timing, consume_store=True,
                                      **discounting,
                                      log=(lambda line: click.echo(line, err=True)) if debug else None)
    model = estimate_on_disk.run()
    if word_classes is not None and lm.endswith(".nplm"):  # the class n-gram and its classes in one file
        with estimate_on_disk.stage("writing the class model"):
            arpa = os.path.join(work, "classes.arpa")
            write_arpa_streamed(model, arpa, memory, work, consume=True)
            save_class_model(lm, file_bytes(arpa), word_classes)
    elif lm is not None:
        with estimate_on_disk.stage("writing the ARPA file"):
            write_arpa_streamed(model, lm, memory, work, consume=write_bin_lm is None)
    if write_bin_lm is not None:
        with estimate_on_disk.stage("writing the binary model"):
            write_binary_streamed(model, write_bin_lm, memory)
