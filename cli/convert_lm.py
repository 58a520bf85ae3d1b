"""nplm convert-lm: any model (a network) as a back-off n-gram model of a chosen order and
size, for a decoder's first pass (nplmtk/convert.py)."""
import sys

import click

from nplmtk.convert import entries, fitted_weight, network_probabilities, prune_to_entries, variational_model
from nplmtk.errors import NplmError
from nplmtk.generate import DEFAULT_BATCH
from nplmtk.io import check_readable, check_writable, open_output
from nplmtk.scratch import scratch_folder
from nplmtk.models import load
from nplmtk.ngram.arpa import write_arpa
from nplmtk.ngram.backoff import BackoffModel
from nplmtk.ngram.binary import check_binary_name, write_binary
from nplmtk.ngram.counts import MAX_ORDER

from .options import SEED_MAX, ByteSize, Integer, Real, example, flag, option


@click.command("convert-lm", epilog=example(
    "nplm convert-lm -lm lstm.nplm -order 5 -sample-words 20000000 -write-lm lstm5.arpa",
    "nplm convert-lm -lm lstm.nplm -order 5 -sample-words 20000000 -mix-lm kn5.arpa -heldout valid.txt "
    "-prune-to-entries 2000000 -write-lm first-pass.arpa",
    "nplm convert-lm -lm mlp5.nplm -ngrams kn5.arpa -rewrite -mix-lm kn5.arpa -lambda 0.5 -write-lm mlp-kn5.arpa"))
@option("lm", metavar="MODEL", required=True, help="The model to convert: a network (or any model with a next-word "
        "distribution).")
@option("order", type=Integer(1, MAX_ORDER), default=None,
        help="Order of the sampled back-off model (default 3; with -ngrams the model keeps its own).")
@option("sample-words", type=Integer(0), default=None, metavar="N",
        help="Variational approximation (Deoras et al. 2011): sample sentences from -lm until they hold N words "
        "(as `nplm generate`, the same -seed, the same text), and estimate an interpolated modified Kneser-Ney "
        "model of -order on them. Default 10000000 unless -ngrams is given.")
@option("seed", type=Integer(0, SEED_MAX), default=1, help="Seed of the sampling.")
@option("batch", type=Integer(1, 1 << 20), default=DEFAULT_BATCH,
        help="Sentences sampled side by side by a recurrent network or an MLP; the text is the same whatever the "
        "batch.")
@option("write-text", metavar="FILE", default=None, help="Also write the sampled sentences here, one a line.")
@option("memory", type=ByteSize(), default="2G",
        help="About how much memory counting the sampled text may use (as ngram-count's -memory).")
@option("ngrams", metavar="MODEL", default=None,
        help="With -rewrite: the back-off model (ARPA or binary, over -lm's vocabulary) whose n-grams are rewritten, "
        "instead of a sampled one.")
@flag("rewrite", help="Arisoy et al. 2014: every n-gram of 2 words and more takes -lm's own probability p(w | h) "
      "(a feed-forward network of at least that order: exactly; a recurrent network reads <s>, then h), the "
      "unigrams stay, and the back-off weights are recomputed so that the model sums to one.")
@option("mix-lm", metavar="MODEL", default=None,
        help="Interpolate the converted model with this back-off model into one (as `nplm ppl -mix-lm ... "
        "-write-lm`: SRILM's static merge).")
@option("lambda", "weight", type=Real(0, 1), default=None,
        help="Weight of the converted model in the merge (default 0.5, or from -heldout).")
@option("heldout", metavar="FILE", default=None,
        help="Fit -lambda by EM (as `nplm mix`) on this text: the two models' exact mixture, then merged with it.")
@option("prune", type=Real(0), default=0.0,
        help="Entropy pruning (Stolcke 1998, SRILM's -prune) of the final model at this threshold.")
@option("prune-to-entries", "budget", type=Integer(1), default=None, metavar="N",
        help="Entropy pruning (as -prune) at a threshold found for the model to keep at most N n-grams of all orders "
        "(and, where the search gets there, at least 99% of N); the threshold is printed on stderr.")
@option("minprune", type=Integer(2), default=2, help="Prune only n-grams at least this long.")
@option("write-lm", metavar="FILE", default=None, help="Write the back-off model as ARPA (.gz too).")
@option("write-bin-lm", metavar="FILE", default=None, help="Write it as a binary nplm model.")
@flag("quiet", help="No progress bar.")
def command(lm, order, sample_words, seed, batch, write_text, memory, ngrams, rewrite, mix_lm, weight, heldout, prune,
            budget, minprune, write_lm, write_bin_lm, quiet):
    """Convert a model (a network) to a back-off n-gram model: sampled text and Kneser-Ney
    (Deoras et al. 2011) and/or the network's own probabilities for the n-grams (Arisoy et
    al. 2014); then merged with a background n-gram model and pruned to size."""
    if write_lm is None and write_bin_lm is None:
        raise NplmError("nothing to do: give -write-lm MODEL and/or -write-bin-lm MODEL")
    if ngrams is not None and not rewrite:
        raise NplmError("-ngrams names the n-grams that -rewrite rewrites: add -rewrite (or leave out -ngrams)")
    if ngrams is not None and sample_words is not None:
        raise NplmError("choose the n-grams: -sample-words N (sampled) or -ngrams MODEL, not both")
    if ngrams is not None and order is not None:
        raise NplmError("-order sets the order of the sampled model: -ngrams MODEL keeps its own")
    if sample_words == 0:
        raise NplmError("-sample-words 0: nothing to estimate (give N above 0, or -ngrams MODEL with -rewrite)")
    if prune and budget is not None:
        raise NplmError("choose one of -prune and -prune-to-entries")
    if weight is not None and heldout is not None:
        raise NplmError("choose one of -lambda and -heldout")
    if (weight is not None or heldout is not None) and mix_lm is None:
        raise NplmError("-lambda and -heldout weight the merge with -mix-lm: give -mix-lm MODEL")
    for path in (ngrams, mix_lm, heldout):
        if path is not None:
            check_readable(path)
    for path in (write_lm, write_bin_lm, write_text):
        check_writable(path)
    check_binary_name(write_bin_lm)
    network = load(lm)
    if rewrite:  # before sampling: it can take hours
        network.check_scores_ngrams()
    background = _backoff(mix_lm, "-mix-lm") if mix_lm is not None else None
    if ngrams is not None:
        model = _backoff(ngrams, "-ngrams")
    else:
        model = _sampled(network, sample_words or 10_000_000, order or 3, seed, batch, memory, write_text, quiet)
    if rewrite:
        model = network_probabilities(model, network, progress=_bar("n-grams", quiet))
    if background is not None:
        from nplmtk.corpus import Corpus
        from nplmtk.ngram.merge import merge_backoff
        if heldout is not None:
            weight = fitted_weight(model, background, Corpus.read(heldout, model.vocab))
            click.echo(f"nplm convert-lm: -lambda {weight:.6f} by EM on {heldout}", err=True)
        model = merge_backoff([model, background], [0.5 if weight is None else weight,
                                                    1 - (0.5 if weight is None else weight)])
    if prune:
        from nplmtk.ngram.estimate import prune as prune_model
        model = prune_model(model, prune, minprune)
    if budget is not None:
        model, threshold = prune_to_entries(model, budget, minprune)
        click.echo(f"nplm convert-lm: -prune-to-entries {budget}: -prune {threshold:.6g} keeps {entries(model)} "
                   "n-grams", err=True)
    if write_lm is not None:
        write_arpa(model, write_lm)
    if write_bin_lm is not None:
        write_binary(model, write_bin_lm)


def _backoff(path, flag_name):
    model = load(path)
    if not isinstance(model, BackoffModel):
        raise NplmError(f"{path}: {flag_name} takes a back-off n-gram model (ARPA or binary), not {model.described}")
    return model


def _sampled(network, words, order, seed, batch, memory, write_text, quiet):
    bar = _bar("sampled", quiet, total=words)
    with scratch_folder("counts") as folder:
        if write_text is None:
            return variational_model(network, words, order, folder, seed, batch, memory, progress=bar)
        with open_output(write_text) as text:
            return variational_model(network, words, order, folder, seed, batch, memory, text=text, progress=bar)


def _bar(what, quiet, total=None):
    """A progress callback (told of each k units done) drawing a tqdm bar on stderr; None when quiet or
    stderr is not a terminal."""
    if quiet or not sys.stderr.isatty():
        return None
    from tqdm import tqdm
    bar = tqdm(total=total, desc=what, unit="w", unit_scale=True, leave=False, file=sys.stderr)
    return bar.update
