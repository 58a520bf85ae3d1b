"""nplm ppl: score text with any model and report perplexity as SRILM does."""
import os
import sys
import time

import click

from nplmtk.errors import NplmError
from nplmtk.io import check_readable, check_writable
from nplmtk.ngram.binary import check_binary_name
from nplmtk.ppl import perplexity
from nplmtk.ppl_model import DynamicSpec, PplSpec, build_model
from nplmtk.text import Normalizer

from .options import SEED_MAX, Integer, Real, check_given_with, example, flag, option

# options that only tune another one (given alone they would do nothing): option -> its main option
TUNING_OPTIONS = {"cache_lambda": "cache", "neural_cache_theta": "neural_cache", "neural_cache_lambda": "neural_cache",
                  **{f"dynamic_{name}": "dynamic_eval" for name in ("lr", "decay", "rms_text", "rms_words", "epsilon")},
                  "tune_max_time": "tune_text"}


MAX_MIX = 9  # SRILM's -mix-lm2 .. -mix-lm9


def _mix_options(function):
    for i in range(MAX_MIX, 1, -1):
        function = option(f"mix-lambda{i}", type=Real(0, 1), default=0.0,
                          help=f"Weight of -mix-lm{i}.")(function)
        function = option(f"mix-lm{i}", metavar="MODEL", default=None,
                          help=f"A further model to interpolate, weighted by -mix-lambda{i}.")(function)
    return function


@click.command("ppl", epilog=example(
    "nplm ppl -lm kn5.arpa -text test.txt",
    "nplm ppl -lm di3.nplm -ppl test.txt -debug 2 | less",
    "nplm ppl -lm kn5.arpa -mix-lm mlp9.nplm -lambda 0.4 -text test.txt"))
@option("lm", metavar="MODEL", required=True, help="Model file: ARPA (.gz too) or an nplm model.")
@option("text", metavar="FILE", default=None, help="Text to score, one sentence per line.")
@option("ppl", "ppl_file", metavar="FILE", default=None, help="Same as -text (SRILM's spelling).")
@option("order", type=Integer(1), default=None, help="Use n-grams up to this order only.")
@flag("unk", help="<unk> is a word (SRILM's open vocabulary): -gen may draw it and -cache keeps it. Scoring "
                  "is the same either way: a model with an <unk> probability scores out-of-vocabulary words with it; "
                  "one without reports them as OOVs.")
@option("debug", type=Integer(0, 2), default=0,
        help="0: totals; 1: each sentence too; 2: each word's probability too.")
@flag("lower", help="Lower-case the text first (as the model's training text was).")
@flag("map-numbers", help="Map numeric tokens to <num> (as the model's training text was).")
@option("mix-lm", metavar="MODEL", default=None,
        help="Interpolate -lm with this model (SRILM's spelling). Back-off n-gram models (ARPA or binary) are merged "
        "into one back-off model as SRILM merges them without -bayes (the union of the n-grams, probabilities "
        "interpolated, back-off weights recomputed; -order and -limit-vocab apply to each model, -renorm and -prune* "
        "to the merged one); with -bayes 0, or when a model is not a back-off n-gram (a network, a mixture, "
        "-classes: SRILM cannot merge those either), the mixture is exact, word by word.")
@option("lambda", "main_weight", type=Real(0, 1, auto=True), default=0.5,
        help="Weight of -lm in the mixture; -mix-lm gets what the others leave. auto: every model's weight by EM "
        "on -tune-text (as `nplm mix` and SRILM's compute-best-mix fit them).")
@option("bayes", type=Real(0, 0), default=None,
        help="0: interpolate the models' probabilities exactly, word by word, as SRILM's -bayes 0 (without it "
        "back-off n-gram models are merged statically); only 0 is supported.")
@flag("oov-estimate", help="A word outside the vocabulary gets a probability from the feature vector "
                           "sum_i C(i) P(i|context) (Bengio et al. 2003, sec. 5.1), of a network whose architecture "
                           "can (`nplm train-nplm --help` says which).")
@flag("allow-paths", help="Follow a mixture's components wherever its file names them (by default only "
                          "files in the mixture's folder and below).")
@option("vocab", metavar="FILE", default=None, help="With -limit-vocab: the words to keep.")
@flag("limit-vocab", help="Drop the n-gram model's n-grams with words outside -vocab (SRILM's -limit-vocab).")
@flag("renorm", help="Recompute the n-gram model's back-off weights from its probabilities (SRILM's -renorm).")
@option("prune", type=Real(0), default=0.0,
        help="Remove the n-grams whose removal raises the model's perplexity by less than this (relatively; "
        "Stolcke's entropy pruning, as SRILM's -prune), then recompute the back-off weights.")
@option("prune-to-entries", "prune_budget", type=Integer(1), default=None, metavar="N",
        help="Entropy pruning (as -prune) at a threshold found for the model to keep at most N n-grams of all orders "
        "(and, where the search gets there, at least 99% of N); the threshold is printed on stderr.")
@option("minprune", type=Integer(2), default=2, help="Prune only n-grams at least this long.")
@flag("prune-lowprobs", help="Remove the n-grams whose probability is below their back-off estimate (SRILM's "
                             "-prune-lowprobs).")
@option("classes", metavar="FILE", default=None,
        help="A classes file (SRILM's format): -lm is a class n-gram, p(w | h) = p(w | c(w)) p(c(w) | c(h)) "
        "(SRILM's -classes with -simple-classes).")
@flag("simple-classes", help="Accepted for SRILM compatibility: every word has one class.")
@option("map-unk", metavar="WORD", default=None, help="The ARPA model's unknown word is WORD, not <unk>.")
@option("unk-prob", type=Real(high=0), default=None, metavar="LOGP",
        help="Give unknown words this log10 probability in every context (-99: probability 0, an OOV).")
@option("cache", type=Integer(0, auto=True), default=0, metavar="N",
        help="Mix the model with a unigram cache of the last N words scored (SRILM's -cache): (1 - L) p + L p_cache. "
        "auto: N and L picked on -tune-text.")
@option("cache-lambda", type=Real(0, 1), default=0.05, metavar="L", help="The weight L of -cache.")
@option("neural-cache", type=Integer(0, auto=True), default=0, metavar="W",
        help="Mix a recurrent network with the continuous cache of Grave et al. 2017 over the last W tokens: "
        "the words that followed states like the present one (with -dynamic-eval: the adapted network's states). "
        "auto: W, T and L picked on -tune-text (after -dynamic-eval's pick).")
@option("neural-cache-theta", type=Real(0), default=0.3, metavar="T",
        help="-neural-cache's sharpness: weights exp(T h_t . h_i).")
@option("neural-cache-lambda", type=Real(0, 1), default=0.2, metavar="L", help="-neural-cache's weight.")
@option("dynamic-eval", type=Integer(0, auto=True), default=0, metavar="N",
        help="Dynamic evaluation of a network (Krause et al. 2018): score the text in segments of N predictions, "
        "each scored before a gradient step on it; the model is as trained again afterwards.")
@option("dynamic-lr", type=Real(0, low_open=True), default=None, metavar="R", help="The step size of -dynamic-eval.")
@option("dynamic-decay", type=Real(0, 1, high_open=True), default=0.0, metavar="D",
        help="-dynamic-eval's pull back toward the trained weights at each step.")
@option("dynamic-rms-text", metavar="FILE", default=None,
        help="-dynamic-eval's RMS-normalised step: each weight's step divided by the root mean square of its "
        "gradient on segments of this training text.")
@option("dynamic-rms-words", type=Integer(1), default=20000, metavar="N",
        help="The words of -dynamic-rms-text to take (its first sentences).")
@option("dynamic-epsilon", type=Real(0, low_open=True), default=1e-3, metavar="E",
        help="Added to the root mean square of -dynamic-rms-text.")
@option("tune-text", metavar="FILE", default=None,
        help="Held-out text (never the test text) on which each setting given as auto (-lambda, -cache, "
        "-neural-cache, -dynamic-eval) is picked: the best of a grid, or by EM for -lambda; the picks are printed "
        "on stderr. A grid is extended past a pick on its edge (said on stderr, as an edge that stays).")
@option("tune-max-time", type=Real(0, low_open=True), default=None, metavar="SECONDS",
        help="A time budget for the searches of -tune-text together: past it, dynamic evaluation's settings not yet "
        "started and the grids' extensions are skipped (a setting being scored ends first), -neural-cache's grid is "
        "scored on the sentences done, and what was skipped is said on stderr.")
@flag("quiet", help="No progress bars (-dynamic-eval's and the searches of -tune-text).")
@option("counts", metavar="FILE", default=None,
        help="Score the n-grams of a counts file (w1 ... wk<TAB>count): p(wk | w1 .. wk-1) times the count, as "
        "SRILM's -counts; back-off n-gram models.")
@option("gen", type=Integer(0), default=0, metavar="N",
        help="Print N sentences sampled from the n-gram model, the same as SRILM's `ngram -gen N -seed S` (with "
        "-unk, <unk> may be drawn).")
# SRILM's -seed takes a negative seed too (-5: its drand48 is seeded with the low 32 bits)
@option("seed", type=Integer(-2 ** 31, SEED_MAX), default=None,
        help="Seed of -gen (default: from the time and the process id, as SRILM).")
@option("write-lm", metavar="FILE", default=None,
        help="Write the n-gram model (after -order; with -mix-lm the merged model) as ARPA, .gz too, as SRILM's "
        "`ngram -write-lm`; -text is then optional.")
@option("write-bin-lm", metavar="FILE", default=None,
        help="Write the n-gram model (after -order; with -mix-lm the merged model) as a binary nplm model, which opens in milliseconds "
        "(memory-mapped tables) wherever a model is read; -text is then optional.")
@option("server-port", type=Integer(1, 65535), default=None, metavar="P",
        help="Serve the model (after -order, -mix-lm and the like) on port P to SRILM's clients (`ngram -use-server "
        "P@127.0.0.1`, `lattice-tool -use-server`), as SRILM's `ngram -server-port`, until SIGTERM or Ctrl-C "
        "(after -text's report, if any; -text is then optional).")
@option("server-maxclients", type=Integer(1), default=None, metavar="N",
        help="Serve at most N clients at once (the next ones wait until one leaves); default: any number, as SRILM.")
@option("server-host", metavar="ADDRESS", default="127.0.0.1",
        help="The address -server-port listens on (0.0.0.0: every interface, as SRILM's server).")
@_mix_options
def command(lm, text, ppl_file, order, unk, debug, lower, map_numbers, mix_lm, main_weight, bayes, oov_estimate,
            allow_paths, vocab, limit_vocab, renorm, prune, prune_budget, minprune, prune_lowprobs, classes,
            simple_classes, map_unk, unk_prob, cache, cache_lambda, neural_cache, neural_cache_theta,
            neural_cache_lambda, dynamic_eval, dynamic_lr, dynamic_decay, dynamic_rms_text, dynamic_rms_words,
            dynamic_epsilon, tune_text, tune_max_time, quiet, counts, gen, seed, write_lm, write_bin_lm, server_port,
            server_maxclients, server_host, **more):
    """Report the perplexity of a model on a text in SRILM's `ngram -ppl` format, and/or
    rewrite an n-gram model (`-write-lm`)."""
    if text is not None and ppl_file is not None or (text is None and ppl_file is None and write_lm is None
                                                     and write_bin_lm is None and counts is None and not gen
                                                     and server_port is None):
        raise NplmError("give the text to score with -text FILE (or -ppl FILE)")
    check_given_with(click.get_current_context(), TUNING_OPTIONS)
    if server_port is None and (server_maxclients is not None or server_host != "127.0.0.1"):
        raise NplmError("-server-maxclients and -server-host go with -server-port")
    if server_port is not None and (cache or dynamic_eval):
        raise NplmError("-server-port serves the model as it is: -cache and -dynamic-eval adapt it to a text")
    check_writable(write_lm)
    check_writable(write_bin_lm)
    check_binary_name(write_bin_lm)
    if counts is not None:
        check_readable(counts)
    if limit_vocab != (vocab is not None):
        raise NplmError("-limit-vocab and -vocab go together (the words to keep)")
    _check_tuning(tune_text, text or ppl_file, main_weight, cache, neural_cache, dynamic_eval, more)
    dynamic = None
    if dynamic_eval:
        dynamic = DynamicSpec(dynamic_eval, dynamic_lr, dynamic_decay, dynamic_rms_text, dynamic_rms_words,
                              dynamic_epsilon, text or ppl_file, lambda total: _progress_bar(total, quiet))
    built = build_model(PplSpec(
        lm, allow_paths, map_unk, order, neural_cache, neural_cache_theta, neural_cache_lambda, dynamic, vocab,
        mix_lm, [(more[f"mix_lm{i}"], more[f"mix_lambda{i}"]) for i in range(2, MAX_MIX + 1) if more[f"mix_lm{i}"]],
        main_weight, bayes, renorm, prune, prune_budget, minprune, prune_lowprobs, classes, tune_text, tune_max_time,
        lambda total, what: _progress_bar(total, quiet, what)))
    if built.threshold is not None:
        from nplmtk.convert import entries
        click.echo(f"nplm ppl: -prune-to-entries {prune_budget}: -prune {built.threshold:.6g} keeps "
                   f"{entries(built.model)} n-grams", err=True)
    if write_lm is not None:
        from nplmtk.ngram.arpa import write_arpa
        write_arpa(built.writable("write_lm"), write_lm)
    if write_bin_lm is not None:
        from nplmtk.ngram.binary import write_binary
        write_binary(built.writable("write_bin_lm"), write_bin_lm)
    if counts is not None:
        from nplmtk.ppl import count_perplexity
        count_perplexity(built.backoff("{counts} scores back-off n-gram models (ARPA) only"), counts, debug=debug,
                         write=click.echo, unk_log10prob=unk_prob)
    if cache and (text is None and ppl_file is None or oov_estimate):
        raise NplmError("-cache scores a text (-text or -ppl), without -oov-estimate")
    model = built.model
    if text is not None or ppl_file is not None:
        if cache:
            model = built.model = built.with_cache(cache, cache_lambda, unk_is_word=unk, tune_text=tune_text)
        _print_picks(built.picks, tune_text)
        _score_text(model, lm, text or ppl_file, debug, lower, map_numbers, oov_estimate, unk_prob)
    if gen:
        built.backoff("{gen} samples back-off n-gram models as SRILM does (`nplm generate` samples any model)")
        from nplmtk.ngram.srilm_sampling import srilm_sentences
        for words in srilm_sentences(model, gen, int(time.time()) + os.getpid() if seed is None else seed,
                                     unk_is_word=unk):
            click.echo(" ".join(words))
    if server_port is not None:
        _serve(model, built.subject, server_port, server_host, server_maxclients, debug)


AUTO_OPTIONS = {"main_weight": "lambda", "cache": "cache", "neural_cache": "neural-cache", "dynamic_eval": "dynamic-eval"}


def _check_tuning(tune_text, scored, main_weight, cache, neural_cache, dynamic_eval, more):
    given = {"main_weight": main_weight, "cache": cache, "neural_cache": neural_cache, "dynamic_eval": dynamic_eval}
    autos = [f"-{AUTO_OPTIONS[name]} auto" for name, value in given.items() if value == "auto"]
    if autos and tune_text is None:
        raise NplmError(f"{autos[0]} picks its setting on held-out text: give -tune-text FILE (not the test text)")
    if tune_text is not None and not autos:
        raise NplmError("-tune-text picks the settings given as auto (-lambda, -cache, -neural-cache, -dynamic-eval): "
                        "give one")
    if tune_text is not None:
        check_readable(tune_text)
        if scored is not None and scored != "-" and os.path.exists(scored) and os.path.samefile(tune_text, scored):
            raise NplmError(f"{tune_text}: -tune-text is the text scored: settings are picked on held-out text")
    if main_weight == "auto" and any(more[f"mix_lambda{i}"] for i in range(2, MAX_MIX + 1)):
        raise NplmError("-lambda auto fits every model's weight: give no -mix-lambdaN")


def _print_picks(picks, tune_text):
    """Each pick on stderr, then what its search says besides (grids extended, edges, the budget)."""
    for parameter, pick in picks:
        option = AUTO_OPTIONS.get(parameter, parameter)
        click.echo(f"nplm ppl: -{option} auto on {tune_text}: {pick.describe()}", err=True)
        for note in pick.notes:
            click.echo(f"nplm ppl: -{option} auto: {note}", err=True)


def _progress_bar(total, quiet, what="dynamic evaluation"):
    """A progress bar of `what` on a terminal, else None."""
    if quiet or not sys.stderr.isatty():
        return None
    from tqdm import tqdm
    return tqdm(total=total, desc=what, unit="w", unit_scale=True, leave=False, file=sys.stderr)


def _serve(model, subject, port, host, max_clients, debug):
    """SRILM's `ngram -server-port`: the model served until SIGTERM or Ctrl-C, which end it
    quietly (exit status 0)."""
    import signal
    from nplmtk.server import ProbServer
    log = (lambda line: click.echo(f"nplm ppl: {line}", err=True)) if debug else None
    server = ProbServer(model, port, host, max_clients, log)
    clients = "any number of clients" if max_clients is None else f"at most {max_clients} clients at once"
    click.echo(f"nplm ppl: serving {subject} on {host}:{server.port} to {clients} "
               f"(SRILM's protocol: ngram -use-server {server.port}@{host})", err=True)
    before = {number: signal.signal(number, lambda *_: server.stop()) for number in (signal.SIGTERM, signal.SIGINT)}
    try:
        server.serve_forever()
    finally:
        for number, handler in before.items():
            signal.signal(number, handler)


def _score_text(model, lm, text, debug, lower, map_numbers, oov_estimate, unk_prob):
    if oov_estimate:
        from nplmtk.neural.network import NeuralModel  # here: plain scoring loads no network
        if not (isinstance(model, NeuralModel) and model.CAPABILITIES.oov_estimate):
            raise NplmError(f"{lm}: -oov-estimate needs a network that estimates the words outside its vocabulary "
                            f"(-arch {', '.join(estimating_architectures())})")
    if oov_estimate and unk_prob is not None:
        raise NplmError("choose one of -oov-estimate and -unk-prob")
    perplexity(model, text, debug=debug, write=click.echo,
               normalize=Normalizer(lower=lower, map_numbers=map_numbers), oov_estimate=oov_estimate,
               unk_log10prob=unk_prob)


def estimating_architectures():
    from nplmtk.models import ARCHITECTURES
    return [name for name, model_class in ARCHITECTURES.items() if model_class.CAPABILITIES.oov_estimate]
