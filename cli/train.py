"""nplm train-nplm (alias train): train a neural probabilistic language model."""
import contextlib
import os
import sys

import click

from nplmtk.corpus import Corpus
from nplmtk.errors import NplmError, RankLostError
from nplmtk.io import check_readable, check_writable
from nplmtk.models import ARCHITECTURES, load
from nplmtk.neural.network import MAX_ORDER
from nplmtk.neural.parallel import allgather, world
from nplmtk.neural.train import CRITERIA, MPI_MODES, Trainer, TrainingConfig
from nplmtk.text import Normalizer
from nplmtk.vocab import Vocabulary, count_words

from .options import SEED_MAX, BlockValues, Integer, Real, example, flag, option, spell

ARCH_HELP = "Architecture: " + "; ".join(f"{name} ({model.summary})" for name, model in ARCHITECTURES.items()) + "."


@click.command("train-nplm", epilog=example(
    "nplm vocab -text train.txt -min-count 4 -write-vocab vocab.txt",
    "nplm train-nplm -text train.txt -valid valid.txt -vocab vocab.txt -order 5 -m 30 -h 100 -lm mlp.nplm",
    "nplm ppl -lm mlp.nplm -text test.txt"))
@option("text", required=True, metavar="FILE", help="Training text, one sentence per line.")
@option("valid", metavar="FILE", default=None, help="Validation text: per-epoch ppl and early stopping.")
@option("vocab", metavar="FILE", default=None,
        help="Vocabulary (other words train as <unk>). Default: the training words.")
@option("lm", metavar="FILE", default=None, help="Write the trained model (nplm container).")
@option("order", type=Integer(2, MAX_ORDER), default=None,
        help="n: a feed-forward model sees the n-1 previous words (default 5; recurrent models see them all).")
@option("m", type=Integer(1), default=30, help="Word feature dimension.")
@option("h", type=Integer(0), default=100,
        help="Hidden units (0: no hidden layer, needs -direct; lbl1-lbl3: the units of h).")
@flag("direct", help="Direct connections W from the features to the output.")
@option("activation", type=click.Choice(["tanh", "sigmoid", "relu", "linear"]), default="tanh",
        help="Hidden layer activation.")
@flag("no-bias", help="No output and hidden biases (b, d).")
@option("layers", type=Integer(1, 8), default=None, help="rnn, lstm: stacked recurrent layers [1].")
@flag("tie", help="rnn, lstm: the output layer is the input features C (needs -h equal to -m).")
@flag("peephole", help="lstm: the gates also read the previous cell c_t-1 (diagonal weights P).")
@option("reset-state", type=click.Choice(["sentence", "never"]), default=None,
        help="rnn, lstm: each sentence starts from a zero state, or the state runs on through the text; "
        "scoring follows the model's rule [sentence].")
@option("output", type=click.Choice(["full", "class", "hs"]), default=None,
        help="mlp, lbl*, rnn, lstm: the output layer: the full softmax; class: Mikolov's class-factored softmax p(class) "
        "p(word | class) over -classes classes by frequency, O(K + |class|) per word; hs: the "
        "hierarchical softmax over the Huffman tree of the training counts, O(log |V|) per word. Both exactly "
        "normalised [full].")
@option("classes", type=Integer(1), default=None,
        help="-output class: the number of classes K [the square root of |V|].")
@option("bptt", type=Integer(1), default=None,
        help="rnn, lstm: truncated BPTT: one update per this many steps of every stream [35].")
@option("streams", type=Integer(1), default=None,
        help="rnn, lstm: the training text as this many parallel streams (the state carried along each) [32].")
# the kernels keep a unit with probability 1 - p in float32: 0.99999999 rounds to 1 there
@option("dropout", type=Real(0, 0.99), default=None,
        help="rnn, lstm: dropout probability on the non-recurrent connections [0].")
@option("clip", type=Real(0), default=None,
        help="rnn, lstm: cap on the gradient's norm per word of a segment (PyTorch's clip_grad_norm_ of the mean "
        "loss; 0: none) [0.25].")
@option("arch", default="mlp", help=ARCH_HELP)
@option("criterion", default="full", help="Training criterion: full (exact softmax gradient), is (importance "
        "sampling, Bengio & Senecal 2003 Alg. 3) or is-adaptive (Alg. 4: N doubles when the ppl of a tiny set rises).")
@option("samples", type=Integer(1), default=100, help="-criterion is*: samples N (is-adaptive: N0).")
@option("max-samples", type=Integer(1), default=1600,
        help="-criterion is-adaptive and -ess-min: N doubles no further (a warning says when it would).")
@option("proposal", type=click.Choice(["unigram", "bigram"]), default="unigram",
        help="-criterion is*: the proposal Q: the training unigram (add-one), or the bigram of the previous "
        "word interpolated with it (Witten-Bell weights; a batch samples from its windows' mixture, an rnn or lstm "
        "segment from its steps').")
@option("check-every", type=Integer(1), default=200_000,
        help="is-adaptive: examples between checks of the tiny set's perplexity.")
@option("ess-min", type=Real(0), default=0.0,
        help="-criterion is*: double N when a round's mean effective sample size falls below this.")
@option("mpi", default=None, help="Training under mpiexec: param (the output layer split across the ranks, "
        "sec. 3.2) or data (each rank its shard and threads; parameters averaged every -sync-every updates).")
@option("sync-every", type=Integer(1), default=100,
        help="-mpi data: average the ranks' parameters after this many updates of each worker.")
@option("epochs", type=Integer(0), default=10, help="Passes over the training text.")
@option("batch", type=Integer(1), default=1, help="Windows per update (1: the paper's SGD).")
@option("optimizer", type=click.Choice(["sgd", "adam"]), default="sgd",
        help="rnn, lstm: plain SGD (the papers') or Adam (Kingma & Ba; -lr is then its step size, e.g. 1e-3).")
@option("lr", type=Real(0, low_open=True), default=None,
        help="Initial learning rate eps0 (per word: gradients are summed over a batch or segment) [1e-3; rnn, lstm: "
        "0.01].")
@option("momentum", type=Real(0, 1, high_open=True), default=0.0,
        help="Momentum of every parameter block (log-bilinear models; Zhang et al. sec. 3: 0.5 for C, 0.9 "
        "for the others with 100 hidden units, 0.8 with 200-300, 0.5 with 500).")
@option("block-lr", type=BlockValues(Real(0), "BLOCK=RATE,..."), multiple=True,
        help="Log-bilinear models: a block's own eps0 (blocks R C d b A a B gate_bias S; sec. 3: C=1e-3, "
        "A=1e-1, B=1e-5, S=1e-5). Others take -lr.")
@option("block-momentum", type=BlockValues(Real(0, 1, high_open=True), "BLOCK=MU,..."), multiple=True,
        help="A block's own momentum (sec. 3: C=0.5).")
@option("block-weight-decay", type=BlockValues(Real(0), "BLOCK=LAMBDA,..."), multiple=True,
        help="A block's own weight decay (sec. 3: 1e-5 everywhere, S=1e-4).")
@flag("decay-biases", help="Log-bilinear models: -weight-decay on the biases too (sec. 3: \"all parameters, "
                           "including biases\").")
@flag("freeze-features", help="Log-bilinear models: keep the word features R fixed (sec. 3, for Models 1-3).")
@option("init-from", metavar="MODEL[:BLOCK,...]", multiple=True,
        help="Start from MODEL's parameters of the same names and shapes, or only the blocks named; repeat to "
        "take blocks from several models, later ones winning (sec. 3: Model 1 from Model 0 takes R, C, d, b and "
        "predicts exactly as Model 0 before its first update; Model 2: -init-from model0.nplm "
        "-init-from model1.nplm:A,a).")
@option("lr-decay", type=Real(0), default=1e-8, help="r in eps_t = eps0 / (1 + r t), t counting updates.")
@option("weight-decay", type=Real(0), default=None,
        help="Weight decay on weights and C (not biases) [1e-4; rnn, lstm: 0].")
@flag("lr-halve", help="Not in the paper: after an epoch without a better valid ppl, go back to the best "
                       "parameters and halve eps0 (stopping still follows -patience).")
@option("patience", type=Integer(1), default=2,
        help="Stop after this many epochs without a better valid ppl (keeps the best model).")
@option("seed", type=Integer(0, SEED_MAX), default=1, help="Seed of initialisation and shuffling.")
@option("threads", type=Integer(1), default=1,
        help="Lock-free asynchronous worker threads, each with a single-threaded BLAS: the cores used. "
             "The MLP at -batch 1 with the full softmax, and the energy network's exact gradient: threads "
             "sharing each window's output rows.")
@option("checkpoint", metavar="DIR", default=None, help="Write checkpoint.nplm here each epoch.")
@option("checkpoint-every", type=Integer(0), default=0, help="Also checkpoint every N updates.")
@flag("resume", help="Continue from DIR/checkpoint.nplm (given with -checkpoint).")
@option("log", metavar="FILE", default=None, help="Per-epoch JSON-lines log.")
@flag("quiet", help="No progress bar.")
@option("min-count", type=Integer(1), default=1, help="Without -vocab: rarer words train as <unk>.")
@flag("lower", help="Lower-case the texts first.")
@flag("map-numbers", help="Map numeric tokens to <num>.")
def command(text, valid, vocab, lm, order, m, h, direct, activation, no_bias, layers, tie, peephole, reset_state,
            output, classes, bptt, streams, dropout, clip, arch, criterion, samples, max_samples, proposal,
            check_every, ess_min, mpi, sync_every, epochs, batch, optimizer, lr, momentum, block_lr, block_momentum,
            block_weight_decay, decay_biases, freeze_features, init_from, lr_decay, weight_decay, lr_halve, patience,
            seed, threads, checkpoint, checkpoint_every, resume, log, quiet, min_count, lower, map_numbers):
    """Train a neural probabilistic language model (-arch), by default the network of
    Bengio et al. (2003), eq. 1: y = b + W x + U tanh(d + H x) over the feature vectors x
    of the n-1 previous words, by stochastic gradient descent with the paper's schedule,
    early stopping and lock-free threads. Words outside the vocabulary train as <unk>."""
    comm = world() if mpi in MPI_MODES else None
    with input_agreed_on(comm) if comm else contextlib.nullcontext():
        for name, value, choices in (("arch", arch, ARCHITECTURES), ("criterion", criterion, CRITERIA),
                                     ("mpi", mpi, MPI_MODES)):
            if value is not None and value not in choices:
                raise NplmError(f"-{name}: unknown value '{value}' (choose from {', '.join(choices)})")
        if lm is None and checkpoint is None:
            raise NplmError("nothing would be kept: give -lm MODEL (and/or -checkpoint DIR)")
        if resume and checkpoint is None:
            raise NplmError("-resume needs -checkpoint DIR")
        if checkpoint_every and checkpoint is None:
            raise NplmError("-checkpoint-every needs -checkpoint DIR (where the checkpoints go)")
        if resume and init_from:
            raise NplmError("-init-from starts a run and -resume continues one: give one of them")
        init_from = [_model_and_blocks(given) for given in init_from]
        for path in [text] + [p for p in (valid, vocab) if p] + [path for path, _ in init_from]:
            check_readable(path)
        if checkpoint:
            try:
                os.makedirs(checkpoint, exist_ok=True)
            except OSError as err:
                raise NplmError(f"cannot create the checkpoint folder ({err.strerror})", path=checkpoint) from None
            check_writable(os.path.join(checkpoint, "checkpoint.nplm"))
        for path in (lm, log):  # before hours of training, not after
            check_writable(path)
        normalize = Normalizer(lower=lower, map_numbers=map_numbers)
        model_class = ARCHITECTURES[arch]
        recurrent = dict(bptt=bptt, streams=streams, dropout=dropout, clip=clip)
        shape = dict(layers=layers, tie=tie, peephole=peephole, reset_state=reset_state)
        if output not in (None, *model_class.OUTPUTS):
            raise NplmError(f"-output {output}: -arch {arch} has {' or '.join(model_class.OUTPUTS)}")
        if classes is not None and output != "class":
            raise NplmError("-classes applies to -output class")
        if not model_class.RECURRENT:
            for name, value in {**recurrent, **shape}.items():
                if value not in (None, False):
                    raise NplmError(f"-{name.replace('_', '-')} applies to the recurrent models (-arch rnn, lstm)")
        config = TrainingConfig(epochs=epochs, batch=batch, lr_decay=lr_decay, optimizer=optimizer,
                                lr=model_class.DEFAULTS["lr"] if lr is None else lr,
                                weight_decay=(model_class.DEFAULTS["weight_decay"] if weight_decay is None
                                              else weight_decay),
                                **{name: value for name, value in recurrent.items() if value is not None},
                                threads=threads, seed=seed, patience=patience, checkpoint_dir=checkpoint,
                                checkpoint_every=checkpoint_every, log=log, progress=not quiet, mpi=mpi,
                                sync_every=sync_every, criterion=criterion, samples=samples, max_samples=max_samples,
                                check_every=check_every,
                                ess_min=ess_min, proposal=proposal, lr_halve=lr_halve, momentum=momentum,
                                block_lr=block_values(block_lr), block_momentum=block_values(block_momentum),
                                block_weight_decay=block_values(block_weight_decay),
                                decay_biases=decay_biases, freeze_features=freeze_features)
        network = dict(arch=arch, order=order, features=m, hidden=h, direct=direct, bias=not no_bias,
                       activation=activation)
        if model_class.RECURRENT:
            network.update({name: value for name, value in shape.items() if value is not None})
        elif order is None:
            network["order"] = 5
        network.update({name: value for name, value in (("output", output), ("classes", classes))
                        if value is not None})
        trainer, corpora = _prepare(text, valid, vocab, network, config, resume, checkpoint, min_count, normalize,
                                    comm, init_from)
        if resume:
            _check_resumed_network(trainer.model, network, os.path.join(checkpoint, "checkpoint.nplm"))
    if comm is None:
        return _finish(trainer, corpora, text, lm)
    try:  # a failing rank must not leave the others waiting in a collective
        _finish(trainer, corpora, text, lm)
    except BaseException as error:  # noqa: B902 (KeyboardInterrupt too: stop every rank)
        abort_on_error(comm, error)


@contextlib.contextmanager
def input_agreed_on(comm):
    """Under MPI every rank checks and reads the same input, then the ranks compare notes:
    bad input is one line from rank 0 (naming a rank when not all of them failed) and exit
    status 2 everywhere, not one line per rank. Anything else stops every rank at once."""
    failure = None
    try:
        yield
    except NplmError as error:
        failure = error.render(spell)
    except BaseException as error:  # noqa: B902
        abort_on_error(comm, error)
    try:
        failures = allgather(comm, failure)
    except RankLostError as error:
        abort_on_error(comm, error)
    failed = [rank for rank, message in enumerate(failures) if message]
    if not failed:
        return
    if comm.rank != 0:
        sys.exit(2)
    if len(failed) == comm.size and len(set(failures)) == 1:
        raise NplmError(failures[0])
    raise NplmError(f"rank {failed[0]} of {comm.size}: {failures[failed[0]]}")


def _prepare(text, valid, vocab, network, config, resume, checkpoint, min_count, normalize, comm, init_from):
    """The trainer and the (train, valid) corpora: every input read and checked."""
    if resume:
        trainer = Trainer.resume(os.path.join(checkpoint, "checkpoint.nplm"), config, comm)
        vocabulary = trainer.model.vocab
        if vocab:
            _check_resumed_vocabulary(Vocabulary.read(vocab), vocab, trainer)
        train_corpus = Corpus.read(text, vocabulary, unk=True, normalize=normalize, memory_map=True)
        trainer.check_training_text(train_corpus)  # here, before any training, not at the start of the run
    else:
        sources = [(load(path), blocks) for path, blocks in init_from]
        if vocab:
            vocabulary = Vocabulary.read(vocab)
        elif sources:
            vocabulary = sources[0][0].vocab
        else:
            vocabulary = Vocabulary.from_counts(count_words([text], normalize), min_count)
        train_corpus = Corpus.read(text, vocabulary, unk=True, normalize=normalize, memory_map=True)
        settings = dict(network)
        if settings.get("output") == "full":  # every architecture's default; only some take `output`
            del settings["output"]
        if settings.get("output") in ("class", "hs"):  # by the training counts (each </s> counted)
            settings["counts"] = train_corpus.word_counts()
            settings["counts"][vocabulary.eos] += train_corpus.num_sentences
        model = ARCHITECTURES[settings.pop("arch")].initial(vocabulary, seed=config.seed, **settings)
        for (source, blocks), (path, _) in zip(sources, init_from):
            try:
                model.initialise_from(source, blocks)
            except NplmError as error:
                error.path = path
                raise
        trainer = Trainer(model, config, comm)
    valid_corpus = Corpus.read(valid, vocabulary, unk=True, normalize=normalize) if valid else None
    return trainer, (train_corpus, valid_corpus)


def _finish(trainer, corpora, text, lm):
    model = trainer.run(*corpora)
    if lm and trainer.writer:
        model.save(lm, {"training": text, "history": trainer.state["history"]})


# train-nplm's options that shape the network -> how a model says its value
NETWORK_OPTIONS = {"arch": ("arch", lambda model: model.arch), "order": ("order", lambda model: model.order),
                   "features": ("m", lambda model: model.meta.get("features")),
                   "hidden": ("h", lambda model: model.meta.get("hidden")),
                   "direct": ("direct", lambda model: model.meta.get("direct", False)),
                   "bias": ("no_bias", lambda model: model.meta.get("bias", True)),
                   "activation": ("activation", lambda model: model.activation),
                   "layers": ("layers", lambda model: model.meta.get("layers")),
                   "tie": ("tie", lambda model: model.meta.get("tie", False)),
                   "peephole": ("peephole", lambda model: model.meta.get("peephole", False)),
                   "reset_state": ("reset_state", lambda model: model.meta.get("reset_state")),
                   "classes": ("classes", lambda model: model.meta.get("classes")),
                   "output": ("output", lambda model: model.output)}


def _check_resumed_vocabulary(given, path, trainer):
    """-resume continues with the checkpoint's vocabulary: a -vocab that differs is refused."""
    saved = trainer.model.vocab
    if given != saved:
        where = next((i for i, (a, b) in enumerate(zip(given.words, saved.words)) if a != b), None)
        differs = (f"{len(given):,} words against its {len(saved):,}" if where is None else
                   f"word {where} is '{given.words[where]}', the checkpoint's '{saved.words[where]}'")
        raise NplmError(f"-vocab {path} is not the checkpoint's vocabulary ({differs}): drop it, or start a new run",
                        path=trainer.resumed_from)


def _check_resumed_network(model, network, path):
    """-resume continues the checkpoint's network: an option given on the command line
    that says otherwise is refused, naming both values."""
    context = click.get_current_context()
    for key, (option_name, saved) in NETWORK_OPTIONS.items():
        if context.get_parameter_source(option_name) is not click.core.ParameterSource.COMMANDLINE:
            continue
        if network.get(key) != saved(model):
            flag = "-" + option_name.replace("_", "-")
            raise NplmError(f"{flag} {context.params[option_name]} contradicts the checkpoint's network "
                            f"({key} {saved(model)}): drop it, or start a new run", path=path)


def _model_and_blocks(given):
    """-init-from MODEL or MODEL:BLOCK,... as (path, block names or None)."""
    path, colon, blocks = given.rpartition(":")
    if not colon or os.path.exists(given) or not path:
        return given, None
    return path, [name.strip() for name in blocks.split(",") if name.strip()]


def block_values(given):
    """-block-lr C=1e-3,A=0.1 (the option repeated or comma-separated; each occurrence a list
    of pairs by BlockValues) as {"C": 0.001, "A": 0.1}, a later value of a block winning."""
    return {block: value for pairs in given for block, value in pairs}


def abort_on_error(comm, error):
    """One rank failed: say why on stderr and end every rank now (no rank left waiting
    in a collective). Exit status 2 for bad input, 1 otherwise."""
    message = error.render(spell) if isinstance(error, NplmError) else f"{type(error).__name__}: {error}"
    print(f"nplm: rank {comm.rank} of {comm.size}: {message}", file=sys.stderr, flush=True)
    comm.Abort(2 if isinstance(error, NplmError) else 1)
