"""nplm mix: interpolate models with weights learned by EM on held-out text."""
import math
import os
import re
import warnings

import click
import numpy as np

from nplmtk.corpus import Corpus
from nplmtk.errors import NplmError, NplmWarning
from nplmtk.io import check_writable
from nplmtk.lm import LN10
from nplmtk.mixture import Mixture, fit_weights
from nplmtk.models import load
from nplmtk.ngram.arpa import write_arpa
from nplmtk.ngram.backoff import BackoffModel
from nplmtk.ngram.merge import merge_backoff
from nplmtk.ppl import read_scored_text, report
from nplmtk.text import Normalizer

from .options import Integer, Real, RealList, example, flag, option, spell

NUMBER = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")


class TakesWeightLists(click.Command):
    """Lets `-lambda 0.3 0.7` give several numbers: they are joined into one value."""

    def parse_args(self, ctx, args):
        joined = []
        for arg in args:
            if joined and joined[-1][0] in ("-lambda", "--lambda") and NUMBER.match(arg):
                joined[-1].append(arg)
            else:
                joined.append([arg])
        args = [part for group in joined
                for part in ([group[0], " ".join(group[1:])] if len(group) > 2 else group)]
        return super().parse_args(ctx, args)


def parse_weights(values, count):
    """-lambda's numbers as one weight set for `count` models."""
    values, given = list(values), sum(values)
    if len(values) == count - 1 and given <= 1 + 1e-6:  # the tolerance of Mixture's own check
        values.append(max(1.0 - given, 0.0))  # SRILM style: the last model takes the rest
    elif len(values) == count - 1 or len(values) == count and abs(given - 1) > 1e-6:
        raise NplmError(f"-lambda: the weights add up to {given:g}, not 1")
    if len(values) != count:
        raise NplmError(f"-lambda gives {len(values)} weights for {count} models")
    return np.array([values])


def stats_of(model, raw, corpus, log10):
    return report(model, raw, corpus, log10, write=lambda line: None)


@click.command("mix", cls=TakesWeightLists, epilog=example(
    "nplm mix -lm kn5.arpa -lm mlp9.nplm -text valid.txt -write kn5-mlp9.mix",
    "nplm mix -lm di3.nplm -lm mlp9.nplm -text valid.txt -bins 8 -bin-text train.txt -write m.mix",
    "nplm ppl -lm kn5-mlp9.mix -text test.txt"))
@option("lm", "models", metavar="MODEL", multiple=True, required=True,
        help="A component model (ARPA, nplm model or mixture); give two or more.")
@option("text", metavar="FILE", required=True, help="Held-out text for EM (and the ppl report).")
@option("lambda", "weights", type=RealList(Real(0, 1), "W1 W2 ..."), default=None,
        help="Fixed weights instead of EM (the last may be left out: it takes the rest).")
@option("bins", type=Integer(1), default=1,
        help="Weights per bin of the context's training frequency: at most this many bins.")
@option("bin-text", metavar="FILE", default=None,
        help="Training text whose two-word context counts define the bins (with -bins).")
@option("iterations", type=Integer(1), default=200, help="Most EM iterations.")
@option("precision", type=Real(0), default=0.001,
        help="Stop EM once no weight moves by more than this, as SRILM's compute-best-mix does (its "
        "default); 0, and with -bins: iterate until the held-out log-likelihood gains less than 1e-7 nats "
        "per token.")
@option("write", metavar="FILE", default=None, help="Write the mixture model here.")
@option("write-lm", metavar="FILE", default=None,
        help="Write the models merged into one back-off model, as ARPA (.gz too), with the weights found: "
        "every model a back-off n-gram model, merged as SRILM's `ngram -mix-lm` without -bayes (the union of the "
        "n-grams, probabilities interpolated, back-off weights recomputed; pairwise in the order given).")
@option("debug", type=Integer(0, 1), default=0,
        help="1: print each EM iteration as compute-best-mix does.")
@flag("lower", help="Lower-case the texts first (as the models' training text was).")
@flag("map-numbers", help="Map numeric tokens to <num> (as the models' training text was).")
@flag("allow-paths", help="Follow a mixture's components wherever its file names them (by default only "
                          "files in the mixture's folder and below).")
def command(models, text, weights, bins, bin_text, iterations, precision, write, write_lm, debug, lower, map_numbers,
            allow_paths):
    """Interpolate models: p(w|h) = sum_i lambda_i p_i(w|h), the weights fitted by EM on
    held-out text (as SRILM's compute-best-mix) unless -lambda fixes them, optionally one
    weight set per context-frequency bin (Bengio et al. 2003, sec. 2). Prints each
    model's held-out ppl, the weights and the mixture's ppl."""
    if len(models) < 2:
        raise NplmError("give two or more models to mix (-lm A -lm B)")
    if bins > 1 and bin_text is None:
        raise NplmError("-bins needs -bin-text FILE: the training text whose context counts define the bins")
    if weights is not None and bins > 1:
        raise NplmError("-lambda fixes one weight set; it does not go with -bins")
    if write_lm is not None and bins > 1:
        raise NplmError("-write-lm merges the models with one weight set; it does not go with -bins")
    check_writable(write)
    check_writable(write_lm)
    normalize = Normalizer(lower=lower, map_numbers=map_numbers)
    components = [load(path, allow_paths) for path in models]
    if write_lm is not None:
        for path, model in zip(models, components):
            if not isinstance(model, BackoffModel):
                raise NplmError(f"{path}: -write-lm merges back-off n-gram models only (ARPA or binary), not "
                                f"{model.described}")
    uniform = np.full((1, len(models)), 1.0 / len(models))
    mixture = Mixture(components, uniform if weights is None else parse_weights(weights, len(models)), models)
    raw, heldout = read_scored_text(text, mixture.vocab, normalize)
    logp = mixture.component_logprobs(heldout)
    if bins > 1:
        mixture.use_bins(Corpus.read(bin_text, mixture.vocab, normalize=normalize), heldout, bins)
    token_bins = mixture.token_bins(heldout)
    first = stats_of(mixture, raw, heldout, logp[0] / LN10)
    click.echo(f"held-out {text}: {first.lines()[0]}")
    for name, model, row in zip(models, components, logp):
        click.echo(f"model {name}: ppl= {stats_of(mixture, raw, heldout, row / LN10).ppl:.7g}")
    if weights is None:
        def show(iteration, current, loglik, count):
            if debug:
                lam = " ".join(f"{w:g}" for w in current[0])
                click.echo(f"iteration {iteration}, lambda = ({lam}), ppl = {math.exp(-loglik / count):g}")
        # compute-best-mix's rule for its one weight set; per-bin weights (ours) run to the likelihood's tolerance
        srilm_rule = precision > 0 and mixture.num_bins == 1
        mixture.weights, history = fit_weights(logp, token_bins, mixture.num_bins, iterations,
                                               tolerance=None if srilm_rule else 1e-7, log=show,
                                               precision=precision if srilm_rule else None)
        click.echo(f"EM: {len(history) - 1} iterations")
    counts = np.bincount(token_bins, minlength=mixture.num_bins)
    for b in range(mixture.num_bins):
        where = "all contexts" if mixture.bins is None else f"bin {b} ({mixture.bins.describe(b)})"
        click.echo(f"weights {where}, {counts[b]} tokens: " + " ".join(f"{w:.6f}" for w in mixture.weights[b]))
    mixed = stats_of(mixture, raw, heldout, mixture.log10probs_from(logp, heldout))
    click.echo(f"mixture: ppl= {mixed.ppl:.7g}")
    if write_lm:
        merged = merge_backoff(components, mixture.weights[0])
        click.echo(f"merged: ppl= {stats_of(merged, raw, heldout, merged.log10probs(heldout)).ppl:.7g}")
        write_arpa(merged, write_lm)
        click.echo(f"wrote {write_lm}")
    if write:
        mixture.save(write)
        click.echo(f"wrote {write}")
        folder = os.path.dirname(os.path.abspath(write))
        if any(os.path.commonpath([folder, os.path.abspath(name)]) != folder for name in models):
            warnings.warn(f"{write} names components outside its folder: reading it needs {spell('allow_paths')}",
                          NplmWarning)
