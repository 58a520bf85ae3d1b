"""ngram-count's job as one object built from a plain specification (CountSpec): the
vocabulary, the n-grams of texts and counts files counted (in memory, in sorted runs on
disk, or across MPI ranks), the counts written, a model estimated in memory, out of core
(stream/) or each rank its part (mpi_estimate.py), whichever fits `memory`, and written.
cli/ngram_count.py turns flags into a CountSpec, checks them, and runs it."""
import contextlib
import dataclasses
import os
import time

import numpy as np

from ..container import is_container
from ..corpus import Corpus
from ..errors import NplmError, ParameterError
from ..io import open_output
from ..scratch import scratch_error, scratch_folder
from ..text import Normalizer
from ..vocab import UNK, Vocabulary, count_words
from .arpa import write_arpa
from .binary import write_binary
from .classes import ClassNgramModel, WordClasses, file_bytes, save_class_model, token_ids, token_vocabulary
from .count_runs import CountAccumulator
from .counts import NgramCounts, byte_ranks, check_orders, counted_words
from .deleted_interpolation import DeletedInterpolation
from .estimate import estimate, prune
from .sorted_counts import IN_MEMORY_WRITE_BYTES_PER_NGRAM, write_counts_streamed
from .store import CountsFile, counts_file_vocabulary, write_counts_file
from .stream import DiskModel, StreamEstimate, fits_in_memory, peak_so_far, timed_stage
from .stream.writers import write_arpa_streamed, write_binary_streamed


@dataclasses.dataclass
class CountSpec:
    """What to count, estimate and write (ngram-count's settings, by their own names)."""
    texts: tuple = ()  # training texts
    reads: tuple = ()  # counts files to add (SRILM's text counts or write_counts_file's)
    order: int = 3
    vocab: str = None  # a vocabulary file; default: every word of the texts (or of the counts)
    unk: bool = False  # <unk> a word of the model
    map_unk: str = None  # the unknown word's name, if not <unk>
    lower: bool = False
    map_numbers: bool = False
    limit_vocab: bool = False  # counts read of n-grams with words outside `vocab` left out
    classes: str = None  # a classes file: n-grams of the words' classes
    method: str = None  # a key of discounts.METHODS; None: modified Kneser-Ney, interpolated
    constant: float = None  # of "cd" and "add"
    interpolate: bool = False
    always_interpolate: bool = False
    min_counts: tuple = ()  # per order, None or 1: keep every n-gram
    max_counts: tuple = ()  # per order (Good-Turing), None: the default
    deleted_interpolation: bool = False  # Bengio et al.'s trigram, its weights fitted on `heldout`
    heldout: str = None
    em_iterations: int = 5
    prune: float = 0.0  # SRILM's -prune threshold (0: none)
    min_prune_order: int = 2
    memory: int = 2 << 30  # bytes
    temp: str = None  # the folder of the temporary files (default TMPDIR)
    mpi: bool = False  # under mpiexec: counted (and, where it can, estimated) across the ranks
    debug: int = 0  # SRILM's -debug: 1 the discounts, 2 also the stages' times and the runs on disk
    lm: str = None  # outputs: the model (ARPA, or an nplm container), its binary, the counts, the vocabulary
    write_bin_lm: str = None
    write: str = None
    write_binary: str = None
    write_vocab: str = None


@dataclasses.dataclass
class Ranks:
    """Under MPI: the communicator, `agreed()` (a context in which bad input is one error
    for every rank) and `abort(error)` (ends every rank at once), as the caller reports
    them."""
    comm: object
    agreed: object
    abort: object


class CountEstimate:
    """One ngram-count job: `run()` it. `echo(line)` receives the lines for stderr
    (-debug's), `ranks` (a Ranks) is given under MPI."""

    def __init__(self, spec, echo=None, ranks=None):
        self.spec, self.echo, self.ranks = spec, echo or (lambda line: None), ranks
        self.normalize = Normalizer(lower=spec.lower, map_numbers=spec.map_numbers)
        self.word_classes, self.unk = None, spec.unk
        interpolated = spec.interpolate or spec.method is None
        # the estimate's settings, in memory (estimate) and out of core (StreamEstimate) alike
        self.discounting = dict(method=spec.method or "kn", interpolate=interpolated,
                                min_counts=[spec.min_counts[k] if k < len(spec.min_counts) and spec.min_counts[k]
                                            else 1 for k in range(spec.order)],
                                max_counts=list(spec.max_counts[:spec.order]), constant=spec.constant,
                                always_interpolate=spec.always_interpolate)
        self.pruning = (spec.prune, spec.min_prune_order) if spec.prune else None
        self.write_left = spec.write  # the counts to write once counted in memory (else written already)

    @property
    def estimating(self):
        return self.spec.lm is not None or self.spec.write_bin_lm is not None

    def run(self):
        spec = self.spec
        with self.ranks.agreed() if self.ranks else contextlib.nullcontext():
            vocabulary = self.vocabulary()
        if spec.write_vocab is not None:
            with open_output(spec.write_vocab) as out:
                out.writelines(f"{vocabulary.words[w]}\n" for w in np.argsort(byte_ranks(vocabulary.words)))
        if not self.estimating and spec.write is None and spec.write_binary is None:
            return
        if spec.deleted_interpolation:
            return self._deleted_interpolation(vocabulary)
        self.started = time.perf_counter()
        with scratch_folder("counts", spec.temp) as folder:
            counts = self._across_ranks(vocabulary, folder) if spec.mpi else self._counted(vocabulary, folder)
        if counts is None:  # the model written out of core, by the ranks, or nothing more to do
            return
        if self.write_left is not None:
            counts.write(self.write_left)
        if self.estimating:
            self._estimated_in_memory(counts)

    def vocabulary(self):
        """The words: `vocab`'s, or every word of the texts, or of the counts files."""
        spec, unk_word = self.spec, self.spec.map_unk or UNK
        binary_reads = [path for path in spec.reads if is_container(path)]
        if spec.vocab is not None:
            return Vocabulary.read(spec.vocab, unk=unk_word)
        if spec.texts:
            return Vocabulary.from_counts(count_words(spec.texts, self.normalize), unk=unk_word)
        if binary_reads and len(binary_reads) == len(spec.reads):
            return counts_file_vocabulary(binary_reads[0])
        if binary_reads:
            raise ParameterError("binary counts ({write_binary}'s) merge with text counts under one {vocab}: give it")
        return Vocabulary(list(dict.fromkeys(w for path in spec.reads for w in counted_words(path))), unk=unk_word)

    def _deleted_interpolation(self, vocabulary):
        spec = self.spec
        corpora = [Corpus.read(path, vocabulary, unk=spec.unk, normalize=self.normalize) for path in spec.texts]
        train = Corpus.concatenate(corpora) if len(corpora) > 1 else corpora[0]
        model = DeletedInterpolation.train(train, unk_is_word=spec.unk)
        model.fit_weights(Corpus.read(spec.heldout, vocabulary, unk=spec.unk, normalize=self.normalize),
                          spec.em_iterations, log=lambda message: self.echo(f"nplm ngram-count: {message}"))
        model.save(spec.lm, {"training": list(spec.texts), "heldout": spec.heldout})

    def _add_reads(self, vocabulary):
        """accumulator -> the counts files added to it."""
        def add(accumulator):
            for path in self.spec.reads:
                if is_container(path):
                    accumulator.add_store(CountsFile(path, vocabulary))
                else:
                    accumulator.add_counts_file(path, self.spec.limit_vocab)
        return add

    def _counted(self, vocabulary, folder):
        """The counts, on one machine, in memory (NgramCounts); or, when they outgrow the
        memory or are to be written, a store on disk, which may estimate and write the
        model itself (then None)."""
        spec = self.spec
        source = ", ".join(spec.texts + spec.reads)
        tokens = vocabulary
        if spec.classes is not None:
            self.word_classes = WordClasses.read(spec.classes)
            tokens = token_vocabulary(vocabulary, self.word_classes)
            ids = token_ids(vocabulary, self.word_classes, tokens)
            # the unknown word's class stands for it: the <unk> token itself never occurs
            self.unk = spec.unk and vocabulary.unk_word not in self.word_classes.class_of
        accumulator = CountAccumulator(tokens, spec.order, spec.memory, folder)
        blocks = (chunk for path in spec.texts for chunk in Corpus.read_blocks(
            path, vocabulary, unk=True, normalize=self.normalize, block_bytes=accumulator.block_bytes))
        if spec.classes is not None:
            blocks = (Corpus(ids[chunk.ids], chunk.offsets, tokens, name=chunk.name) for chunk in blocks)
        accumulator.add_texts(blocks)
        self._add_reads(vocabulary)(accumulator)
        entries = accumulator.counter.entries()
        if spec.write_binary is not None or (self.estimating or spec.write is not None) and (
                accumulator.runs or accumulator.counts_read or not fits_in_memory(entries, spec.memory)
                or spec.write is not None and not fits_in_memory(entries, spec.memory,
                                                                 IN_MEMORY_WRITE_BYTES_PER_NGRAM)):
            counted, counting_peak = time.perf_counter(), peak_so_far()
            store = accumulator.store(os.path.join(folder, "counts"), source=source)
            return self._from_store(store, folder, len(accumulator.runs), counted, counting_peak)
        counts = accumulator.result(source=source)
        self._log_runs(len(accumulator.runs))
        return counts

    def _from_store(self, store, folder, runs, counted, counting_peak):
        """The counts of `store` written, and the model estimated out of core when the
        in-memory estimate would not fit (then None); else the counts in memory."""
        spec = self.spec
        if spec.write_binary is not None:
            write_counts_file(store, spec.write_binary)
        if spec.write is not None and not fits_in_memory(sum(store.sizes), spec.memory,
                                                         IN_MEMORY_WRITE_BYTES_PER_NGRAM):
            self.debug(2, "the counts outgrow -memory: counts written out of core, in sorted runs")
            write_counts_streamed(store, spec.write, spec.memory, folder)
            self.write_left = None
        if not self.estimating and self.write_left is None:
            return None
        if self.estimating and store.order == spec.order and not fits_in_memory(sum(store.sizes), spec.memory):
            self._log_runs(runs)
            self.debug(2, f"counting: {counted - self.started:.1f} s{counting_peak}; merging the sorted runs: "
                          f"{time.perf_counter() - counted:.1f} s{peak_so_far()}")
            self._out_of_core(store, folder)
            return None
        counts = store.load()
        self._log_runs(runs)
        return counts

    def _estimated_in_memory(self, counts):
        spec = self.spec
        if counts.order < spec.order:
            raise ParameterError(f"the counts go up to order {counts.order}, below {{order}} {spec.order}")
        if counts.order > spec.order:
            counts = NgramCounts(counts.vocab, counts.grams[:spec.order], counts.counts[:spec.order])
        model = estimate(counts, unk_is_word=self.unk, log=self.echo if spec.debug else None, **self.discounting)
        if self.pruning:
            model = prune(model, *self.pruning)
        self._write_model(model, None, lambda name: timed_stage(name, None))

    def _out_of_core(self, store, folder):
        """The estimate of counts larger than memory, in passes over files (stream/): the
        same files as the in-memory estimate writes."""
        self.debug(2, f"{sum(store.sizes)} distinct n-grams outgrow -memory: estimated out of core, "
                      "in passes over files")
        work = _work_folder(folder)
        timing = (lambda line: self.echo(f"nplm ngram-count: {line}")) if self.spec.debug >= 2 else None
        estimate_on_disk = StreamEstimate(store, work, self.spec.memory, unk_is_word=self.unk, timing=timing,
                                          consume_store=True, prune=self.pruning, **self.discounting,
                                          log=self.echo if self.spec.debug else None)
        self._write_model(estimate_on_disk.run(), work, estimate_on_disk.stage)

    def _write_model(self, model, work, stage):
        """The model (a BackoffModel, or a DiskModel written a piece at a time) to `lm`, as
        ARPA or, for a class n-gram to X.nplm, with its classes in one file; and to
        `write_bin_lm`. `stage(name)` times each file."""
        spec, on_disk = self.spec, isinstance(model, DiskModel)
        if spec.lm is not None and self.word_classes is not None and spec.lm.endswith(".nplm"):
            with stage("writing the class model"):
                if on_disk:
                    arpa = os.path.join(work, "classes.arpa")
                    write_arpa_streamed(model, arpa, spec.memory, work, consume=True)
                    save_class_model(spec.lm, file_bytes(arpa), self.word_classes)
                else:
                    ClassNgramModel(model, self.word_classes).save(spec.lm)
        elif spec.lm is not None:
            with stage("writing the ARPA file"):
                if on_disk:
                    write_arpa_streamed(model, spec.lm, spec.memory, work, consume=spec.write_bin_lm is None)
                else:
                    write_arpa(model, spec.lm)
        if spec.write_bin_lm is not None:
            with stage("writing the binary model"):
                if on_disk:
                    write_binary_streamed(model, spec.write_bin_lm, spec.memory)
                else:
                    write_binary(model, spec.write_bin_lm)

    # --- across MPI ranks

    def _across_ranks(self, vocabulary, folder):
        """-mpi: each rank counts its share; interpolated modified Kneser-Ney without
        cutoffs is estimated each rank its part (mpi_estimate.py), any other job by rank 0
        from the counts gathered there."""
        from .mpi_counts import gather_parts
        spec, ranks = self.spec, self.ranks
        part, words = self._counted_across_ranks(vocabulary, folder)
        if self.estimating and not spec.reads and spec.write is None and spec.method in (None, "kn") \
                and self.discounting["interpolate"] and max(self.discounting["min_counts"]) == 1 \
                and not spec.prune and not spec.always_interpolate:
            self._estimated_across_ranks(part, words, folder)
            return None
        try:
            store = gather_parts(ranks.comm, part, spec.memory, os.path.join(folder, "counts"))
        except BaseException as error:  # noqa: B902 - a rank stopping here would leave the others waiting
            ranks.abort(error)
        if store is None:  # rank 0 writes
            return None
        return self._from_store(store, folder, 0, time.perf_counter(), peak_so_far())

    def _rank_timing(self):
        """-mpi -debug 2: rank 0's stage timings, as `timing(line)` (None at the other ranks)."""
        comm = self.ranks.comm
        if self.spec.debug < 2 or comm.rank:
            return None
        return lambda line: self.echo(f"nplm ngram-count: rank 0 of {comm.size}: {line}")

    def _counted_across_ranks(self, vocabulary, folder):
        """This rank's shares of the texts counted (rank 0 adds the counts files), the
        ranks agreeing on bad input before any exchange; then the counts exchanged by
        first word: this rank's part (a CountStore) and the ranks' ranges of first words."""
        from mpi4py import MPI

        from .mpi_counts import count_share, exchange_by_first_word
        spec, ranks = self.spec, self.ranks
        comm, timing = ranks.comm, self._rank_timing()
        source = ", ".join(spec.texts + spec.reads)
        with ranks.agreed(), timed_stage("counting its share of the text", timing):
            local = count_share(comm, spec.texts, vocabulary, spec.order, spec.memory, folder, self.normalize,
                                self._add_reads(vocabulary) if comm.rank == 0 else None)
        try:
            with timed_stage("the counts exchanged by first word", timing):
                part, words = exchange_by_first_word(comm, local, spec.memory, folder)
            sizes = np.array([part.sizes[k] if k < part.order else 0 for k in range(spec.order)], dtype=np.int64)
            comm.Allreduce(MPI.IN_PLACE, sizes)
        except BaseException as error:  # noqa: B902
            ranks.abort(error)
        with ranks.agreed():
            if not sizes.sum():
                raise NplmError("empty corpus (no words)", path=source)
            check_orders(sizes, source)
        return part, words

    def _estimated_across_ranks(self, part, words, folder):
        """Each rank estimates the n-grams of its first words (mpi_estimate.py); rank 0
        gathers the model and writes it (and the counts first, with `write_binary`)."""
        from .mpi_counts import gather_parts
        from .mpi_estimate import gather_model, rank_estimate
        spec, ranks = self.spec, self.ranks
        comm, root = ranks.comm, ranks.comm.rank == 0
        if spec.write_binary is not None:
            try:
                store = gather_parts(comm, part, spec.memory, os.path.join(folder, "counts"), keep=True)
            except BaseException as error:  # noqa: B902
                ranks.abort(error)
        try:
            if spec.write_binary is not None and root:  # a failure here stops every rank, not rank 0 alone
                write_counts_file(store, spec.write_binary)
            work = _work_folder(folder)
            timing = self._rank_timing()
            estimated = rank_estimate(comm, part, words, work, spec.memory, unk_is_word=spec.unk,
                                      log=self.echo if spec.debug and root else None,
                                      warn=None if root else (lambda message: None), timing=timing).run()
            with timed_stage("the model gathered at rank 0", timing):
                model = gather_model(comm, estimated, max(1, spec.memory // 4 // 64))
        except BaseException as error:  # noqa: B902
            ranks.abort(error)
        if model is not None:
            self._write_model(model, work, lambda name: timed_stage(name, timing))

    def debug(self, level, message):
        if self.spec.debug >= level:
            self.echo(f"nplm ngram-count: {message}")

    def _log_runs(self, runs):
        if runs:
            self.debug(2, f"the counts outgrew -memory: {runs} sorted runs on disk, merged")


def _work_folder(folder):
    """The estimate's working folder, new in `folder`."""
    work = os.path.join(folder, "estimate")
    try:
        os.mkdir(work)
    except OSError as err:
        raise scratch_error(folder, err) from None
    return work
