"""nplm ngram-count: count n-grams and estimate smoothed models."""
import click

from nplmtk.corpus import Corpus
from nplmtk.errors import NplmError
from nplmtk.io import check_readable, check_writable, read_lines
from nplmtk.ngram.arpa import write_arpa
from nplmtk.ngram.counts import MAX_ORDER, NgramCounts, check_order
from nplmtk.ngram.deleted_interpolation import DeletedInterpolation
from nplmtk.ngram.estimate import estimate
from nplmtk.text import Normalizer
from nplmtk.vocab import Vocabulary, count_words

from .options import example, flag, option


def _cutoff_options(command):
    for k in range(MAX_ORDER, 0, -1):
        command = option(f"gt{k}min", type=click.IntRange(min=1), default=None, metavar="N",
                         help=f"Drop {k}-grams counted fewer than N times (default 1: keep all)." if k == 1
                         else None, hidden=k > 1)(command)
    return command


@click.command("ngram-count", epilog=example(
    "nplm vocab -text train.txt -min-count 4 -write-vocab vocab.txt",
    "nplm ngram-count -text train.txt -order 5 -vocab vocab.txt -unk -lm kn5.arpa",
    "nplm ngram-count -text train.txt -order 3 -deleted-interpolation -heldout valid.txt -lm di3.nplm"))
@option("text", multiple=True, metavar="FILE", help="Training text, one sentence per line (repeatable).")
@option("read", multiple=True, metavar="FILE", help="Counts file to add (repeatable; merged with -text).")
@option("order", type=int, default=3, help="Maximum n-gram order.")
@option("vocab", metavar="FILE", default=None,
        help="Vocabulary; other words become <unk>. Default: every word of the training data.")
@flag("unk", help="Keep <unk> as a word of the model (open vocabulary); else OOVs are left out.")
@option("write", metavar="FILE", default=None, help="Write the counts of all orders.")
@option("lm", metavar="FILE", default=None,
        help="Write the model: ARPA for back-off models, an nplm container for -deleted-interpolation.")
@flag("kndiscount", help="Modified Kneser-Ney discounting (the default).")
@flag("wbdiscount", help="Witten-Bell discounting.")
@flag("interpolate", help="Interpolate with lower orders (implied when no method is given).")
@flag("always-interpolate", help="Keep interpolating in contexts whose seen words leave no mass for "
      "unseen ones (KenLM's lmplz does; SRILM switches interpolation off there).")
@flag("deleted-interpolation", help="The deleted-interpolation trigram of Bengio et al. 2003 (needs -heldout).")
@option("heldout", metavar="FILE", default=None, help="Held-out text for the EM weights of -deleted-interpolation.")
@option("em-iterations", type=click.IntRange(min=1), default=5, help="EM iterations for -deleted-interpolation.")
@flag("lower", help="Lower-case the text first.")
@flag("map-numbers", help="Map numeric tokens to <num>.")
@_cutoff_options
def command(text, read, order, vocab, unk, write, lm, kndiscount, wbdiscount, interpolate,
            always_interpolate, deleted_interpolation, heldout, em_iterations, lower, map_numbers, **cutoffs):
    """Count the n-grams of a text and estimate a smoothed model.

    With neither -kndiscount nor -wbdiscount the model is interpolated modified
    Kneser-Ney (-kndiscount -interpolate); -kndiscount alone gives the back-off
    version. Cutoffs -gt1min .. -gt9min are as in SRILM, default 1 (keep every n-gram).
    """
    check_order(order)
    if not text and not read:
        raise NplmError("give training text with -text or counts with -read")
    if kndiscount and wbdiscount:
        raise NplmError("choose one of -kndiscount and -wbdiscount")
    if deleted_interpolation and (kndiscount or wbdiscount or interpolate):
        raise NplmError("-deleted-interpolation is a model of its own: drop -kndiscount/-wbdiscount/-interpolate")
    if lm is None and write is None:
        raise NplmError("nothing to do: give -lm MODEL and/or -write COUNTS")
    if sum(path == "-" for path in text + read + ((heldout,) if heldout else ())) > 1:
        raise NplmError("-: stdin can be read only once")
    for path in list(text) + list(read) + ([vocab] if vocab else []) + ([heldout] if heldout else []):
        check_readable(path)
    for path in (lm, write):
        check_writable(path)
    normalize = Normalizer(lower=lower, map_numbers=map_numbers)

    if vocab is not None:
        vocabulary = Vocabulary.read(vocab)
    elif text:
        vocabulary = Vocabulary.from_counts(count_words(text, normalize))
    else:
        vocabulary = Vocabulary(list(dict.fromkeys(w for path in read for line in read_lines(path)
                                                   for w in line.split()[:-1])))

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

    parts = [NgramCounts.from_corpus(Corpus.read(path, vocabulary, unk=True, normalize=normalize), order)
             for path in text]
    parts += [NgramCounts.read(path, vocabulary) for path in read]
    counts = parts[0] if len(parts) == 1 else NgramCounts.merge(parts)
    if write is not None:
        counts.write(write)
    if lm is None:
        return
    if counts.order < order:
        raise NplmError(f"the counts go up to order {counts.order}, below -order {order}")
    if counts.order > order:
        counts = NgramCounts(counts.vocab, counts.grams[:order], counts.counts[:order])
    method = "wb" if wbdiscount else "kn"
    model = estimate(counts, method=method, interpolate=interpolate or not (kndiscount or wbdiscount),
                     min_counts=[cutoffs[f"gt{k}min"] or 1 for k in range(1, order + 1)], unk_is_word=unk,
                     always_interpolate=always_interpolate)
    write_arpa(model, lm)
