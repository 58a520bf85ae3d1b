"""nplm train-nplm (alias train): train a neural probabilistic language model. Its options
are its own (the texts, the files it writes) and those the architecture named by -arch
declares (nplmtk/neural/declarations.py: the trainer's, then the network's), read from
its model class: `-arch lstm --help` lists lstm's."""
import contextlib
import math
import os
import sys

import click

from nplmtk.corpus import Corpus
from nplmtk.errors import NplmError
from nplmtk.io import check_readable, check_writable
from nplmtk.models import ARCHITECTURES, load
from nplmtk.neural import recipes
from nplmtk.neural.parallel import world
from nplmtk.neural.train import Trainer, TrainingConfig
from nplmtk.scratch import folder_in_use
from nplmtk.text import Normalizer
from nplmtk.vocab import Vocabulary, count_words

from .ranks import abort_on_error, input_agreed_on
from .options import INT_MAX, BlockValues, DomainOption, Integer, OptionValueError, Real, example, flag, option, spell

DEFAULT_ARCH = "mlp"
CHECKPOINT_LOCK = ".train-nplm.lock"  # in the checkpoint folder: the PID of the run that writes there
ARCH_HELP = ("Architecture: " + "; ".join(f"{name} ({model.summary})" for name, model in ARCHITECTURES.items())
             + ". `-arch NAME --help` lists NAME's options.")


def given_value(args, option):
    """The value of the last -option in `args` (as click takes it), read before they are
    parsed, or None."""
    return _scan(args, option)[1]


def _scan(args, option):
    """(whether -option is in `args`, the value of its last occurrence or None), up to `--`."""
    present, value = False, None
    for i, arg in enumerate(args):
        if arg == "--":
            break
        name, equals, rest = arg.partition("=")
        if name in (f"-{option}", f"--{option}"):
            present, value = True, rest if equals else args[i + 1] if i + 1 < len(args) else None
    return present, value


def chosen_arch(args, saved):
    """The architecture that `args` name, or the recipe's when they name a recipe and no
    -arch (every recipe is an LSTM's), or the checkpoint's (`saved`: saved_run's meta) under
    -resume, or None."""
    arch = given_value(args, "arch")
    if arch is None and (given_value(args, "recipe") is not None or auto_recipe(args)):
        return "lstm"
    if arch is None and _scan(args, "resume")[0]:
        return saved.get("arch")
    return arch


def saved_run(checkpoint):
    """The checkpoint's meta in the folder `checkpoint` (its "arch", its "config": the
    settings the run began with), or {} when there is none to read (the run's own checks
    say why, later)."""
    from nplmtk import container
    try:
        header, _ = container.read_header(os.path.join(checkpoint, "checkpoint.nplm"))
    except (NplmError, OSError, TypeError):
        return {}
    meta = header.get("meta")
    return meta if isinstance(meta, dict) else {}


# options that leave the network and its training to `-max-time`'s recipe
RUN_OPTIONS = {"max-time", "seed", "threads"}


def auto_recipe(args):
    """`-max-time` given with no option of the network or its training besides RUN_OPTIONS
    (nor -arch, -recipe, -init-from, -resume): train-nplm picks the recipe for the budget."""
    if given_value(args, "max-time") is None:
        return False
    own = {f"{dash}{name}" for name in ("arch", "recipe", "init-from", "resume") for dash in ("-", "--")}
    declared = {f"{dash}{option.name}" for model in ARCHITECTURES.values() for option in model.OPTIONS
                if option.name not in RUN_OPTIONS for dash in ("-", "--")}
    return not any(arg.partition("=")[0] in own | declared for arg in args)


class ArchitectureChoice(click.ParamType):
    """One of `known`, of which the architecture `arch` has `allowed` (its Capabilities)."""
    name = "CHOICE"

    def __init__(self, known, allowed, arch):
        self.known, self.allowed, self.arch = known, allowed, arch

    def get_metavar(self, param, ctx=None):
        return "[" + "|".join(self.allowed) + "]"

    def convert(self, value, param, ctx):
        if value not in self.known:
            raise OptionValueError(value, f"unknown value (choose from {', '.join(self.known)})", param, ctx)
        if value not in self.allowed:
            raise OptionValueError(value, f"-arch {self.arch} has {' or '.join(self.allowed)}", param, ctx)
        return value


def option_type(declared, arch):
    """The click type of a declared option, its domain checked as the command line is parsed."""
    low = -math.inf if declared.low is None else declared.low
    high = (INT_MAX if declared.kind == "int" else math.inf) if declared.high is None else declared.high
    if declared.kind == "int":
        return Integer(low, high)
    if declared.kind in ("real", "blocks"):
        real = Real(low, high, declared.low_open, declared.high_open)
        return real if declared.kind == "real" else BlockValues(real, declared.metavar)
    if declared.kind == "choice" and declared.choices_from and arch:
        return ArchitectureChoice(declared.choices, declared.allowed(ARCHITECTURES[arch].CAPABILITIES), arch)
    if declared.kind == "choice":
        return click.Choice(declared.choices)
    return click.STRING


def click_option(declared, arch=None):
    """A declared option as a click option (-name and --name) of architecture `arch`."""
    decls = [f"-{declared.name}", f"--{declared.name}", declared.name.replace("-", "_")]
    if declared.kind == "flag":
        return click.Option(decls, is_flag=True, default=False, help=declared.help)
    return DomainOption(decls, type=option_type(declared, arch), default=declared.default,
                        multiple=declared.kind == "blocks", show_default=declared.default is not None,
                        metavar=declared.metavar if declared.kind != "blocks" else None, help=declared.help)


class ArchitectureCommand(click.Command):
    """train-nplm's options: its own, then those of the architecture that -arch names on the
    command line (read first, so that --help lists them). Every architecture's options parse;
    one given that the chosen architecture does not declare is refused after parsing, in one
    line naming both (`refuse_foreign_options`). `params` holds every option of every
    architecture (as the first to declare it), for whoever reads the command's options."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.declared_by = {}  # option name -> the architectures that declare it
        every = {}
        for arch, model_class in ARCHITECTURES.items():
            for declared in model_class.OPTIONS:
                self.declared_by.setdefault(declared.name, []).append(arch)
                every.setdefault(declared.name, click_option(declared))
        self.params = self.params + list(every.values())
        self.every = {name.replace("-", "_") for name in every}  # their parameter names
        self._of_arch = {}

    def arch_of(self, ctx):
        arch = ctx.meta.get("nplm.arch")
        return arch if arch in ARCHITECTURES else DEFAULT_ARCH

    def arch_params(self, arch):
        """Architecture `arch`'s options, with its domains and defaults, then every other's."""
        if arch not in self._of_arch:
            own = [click_option(declared, arch) for declared in ARCHITECTURES[arch].OPTIONS]
            names = {param.name for param in own}
            self._of_arch[arch] = own, [p for p in self.params if p.name in self.every and p.name not in names]
        return self._of_arch[arch]

    def parse_args(self, ctx, args):
        # under -resume, the checkpoint's meta, read once: its network and the settings it began with
        ctx.meta["nplm.saved-run"] = saved_run(given_value(args, "checkpoint")) if _scan(args, "resume")[0] else {}
        ctx.meta["nplm.arch"] = chosen_arch(args, ctx.meta["nplm.saved-run"])
        ctx.meta["nplm.auto-recipe"] = auto_recipe(args)
        return super().parse_args(ctx, args)

    def get_params(self, ctx):
        own, foreign = self.arch_params(self.arch_of(ctx))
        return [p for p in super().get_params(ctx) if p.name not in self.every] + own + foreign

    def format_options(self, ctx, formatter):
        arch = self.arch_of(ctx)
        own, _ = self.arch_params(arch)
        targets = {declared.name.replace("-", "_"): declared.target for declared in ARCHITECTURES[arch].OPTIONS}
        default = "" if ctx.meta.get("nplm.arch") else " (the default; `-arch NAME --help` lists another's)"
        for title, params in (("Options", [p for p in self.get_params(ctx) if p.name not in self.every]),
                              (f"Training options of -arch {arch}{default}",
                               [p for p in own if targets[p.name] in ("training", "settings")]),
                              (f"Network options of -arch {arch}", [p for p in own if targets[p.name] == "network"])):
            with formatter.section(title):
                formatter.write_dl([param.get_help_record(ctx) for param in params])

    def refuse_foreign_options(self, ctx, arch):
        """An option given that `arch` does not declare: one line naming both."""
        _, foreign = self.arch_params(arch)
        for param in foreign:
            if ctx.get_parameter_source(param.name) is click.core.ParameterSource.COMMANDLINE:
                name = param.opts[0]
                raise click.UsageError(f"{name} is an option of -arch {', '.join(self.declared_by[name[1:]])}, not of "
                                       f"-arch {arch}", ctx)


@click.command("train-nplm", cls=ArchitectureCommand, epilog=example(
    "nplm vocab -text train.txt -min-count 4 -write-vocab vocab.txt",
    "nplm train-nplm -text train.txt -valid valid.txt -vocab vocab.txt -order 5 -m 30 -h 100 -lm mlp.nplm",
    "nplm ppl -lm mlp.nplm -text test.txt"))
@option("text", required=True, metavar="FILE", help="Training text, one sentence per line.")
@option("valid", metavar="FILE", default=None, help="Validation text: per-epoch ppl and early stopping.")
@option("vocab", metavar="FILE", default=None,
        help="Vocabulary (other words train as <unk>). Default: the training words.")
@option("lm", metavar="FILE", default=None, help="Write the trained model (nplm container).")
@option("arch", default=DEFAULT_ARCH, help=ARCH_HELP)
@option("recipe", type=click.Choice(sorted(recipes.RECIPES)), default=None,
        help="Whole settings by name: fast (make brown-fast's LSTM, 194 s) or best (make brown-best's, 7000 s); "
        "options given beside it win, -max-time its budget. -max-time alone (no option of the network or its "
        "training) picks one for the corpus and the budget. docs/training.md, Recipes.")
@option("init-from", metavar="MODEL[:BLOCK,...]", multiple=True,
        help="Start from MODEL's parameters of the same names and shapes, or only the blocks named; repeat to "
        "take blocks from several models, later ones winning (-init-from first.nplm -init-from second.nplm:A,a).")
@option("checkpoint", metavar="DIR", default=None, help="Write checkpoint.nplm here each epoch.")
@option("checkpoint-every", type=Integer(0), default=0, help="Also checkpoint every N updates.")
@flag("resume", help="Continue the run of DIR/checkpoint.nplm (given with -checkpoint) as it began: "
      "options not given again take its values.")
@option("log", metavar="FILE", default=None, help="Per-epoch JSON-lines log.")
@flag("quiet", help="No progress bar.")
@option("min-count", type=Integer(1), default=1, help="Without -vocab: rarer words train as <unk>.")
@flag("lower", help="Lower-case the texts first.")
@flag("map-numbers", help="Map numeric tokens to <num>.")
def command(text, valid, vocab, lm, arch, recipe, init_from, checkpoint, checkpoint_every, resume, log, quiet,
            min_count, lower, map_numbers, **given):
    """Train a neural probabilistic language model of the architecture -arch (each one
    described under -arch, its options listed by -arch NAME --help) by stochastic gradient
    descent with the schedule of Bengio et al. (2003), early stopping on -valid and
    lock-free threads. Words outside the vocabulary train as <unk>."""
    context = click.get_current_context()
    saved = context.meta.get("nplm.saved-run", {})
    if resume and checkpoint:
        arch = _resumed_arch(context, arch, saved, checkpoint)
    if arch not in ARCHITECTURES:
        raise NplmError(f"-arch: unknown value '{arch}' (choose from {', '.join(ARCHITECTURES)})")
    chosen = _recipe(context, recipe, text, valid, vocab, min_count, Normalizer(lower=lower, map_numbers=map_numbers),
                     given)
    if chosen is not None:
        arch = _recipe_arch(context, arch, chosen)
    context.command.refuse_foreign_options(context, arch)
    declared = ARCHITECTURES[arch].OPTIONS
    values = {option.name: given[option.name.replace("-", "_")] for option in declared}
    if chosen is not None:
        values.update(_recipe_values(context, chosen, declared))
    if "nonmono" in values and context.get_parameter_source("nonmono") is click.core.ParameterSource.COMMANDLINE \
            and values.get("optimizer") != "nt-asgd":
        raise NplmError("-nonmono applies to -optimizer nt-asgd, which is not given: it would do nothing")
    comm = world() if values.get("mpi") else None
    with contextlib.ExitStack() as held:  # the checkpoint folder, until training ends
        with input_agreed_on(comm) if comm else contextlib.nullcontext():
            if lm is None and checkpoint is None:
                raise NplmError("nothing would be kept: give -lm MODEL (and/or -checkpoint DIR)")
            if resume and checkpoint is None:
                raise NplmError("-resume needs -checkpoint DIR")
            if checkpoint_every and checkpoint is None:
                raise NplmError("-checkpoint-every needs -checkpoint DIR (where the checkpoints go)")
            if resume and init_from:
                raise NplmError("-init-from starts a run and -resume continues one: give one of them")
            init_from = [_model_and_blocks(path) for path in init_from]
            for path in [text] + [p for p in (valid, vocab) if p] + [path for path, _ in init_from]:
                check_readable(path)
            if checkpoint:
                try:
                    os.makedirs(checkpoint, exist_ok=True)
                except OSError as err:
                    raise NplmError(f"cannot create the checkpoint folder ({err.strerror})", path=checkpoint) from None
                if comm is None or comm.rank == 0:  # the rank that writes the checkpoints
                    held.enter_context(folder_in_use(checkpoint, CHECKPOINT_LOCK))
                check_writable(os.path.join(checkpoint, "checkpoint.nplm"))
            for path in (lm, log):  # before hours of training, not after
                check_writable(path)
            normalize = Normalizer(lower=lower, map_numbers=map_numbers)
            if values.get("classes") is not None and values.get("output") != "class":
                raise NplmError("-classes applies to -output class")
            training, settings = ({option.parameter: block_values(values[option.name]) if option.kind == "blocks"
                                   else values[option.name] for option in declared
                                   if option.target == target and values[option.name] is not None}
                                  for target in ("training", "settings"))
            if resume:
                _resumed_settings(context, declared, chosen, saved.get("config"), training, settings)
            config = TrainingConfig(**training, settings=ARCHITECTURES[arch].SETTINGS(**settings),
                                    checkpoint_dir=checkpoint, checkpoint_every=checkpoint_every, log=log,
                                    progress=not quiet)
            network = {"arch": arch, **{option.parameter: not values[option.name] if option.negated
                                        else values[option.name] for option in declared
                                        if option.target == "network" and values[option.name] is not None}}
            trainer, corpora = _prepare(text, valid, vocab, network, config, resume, checkpoint, min_count, normalize,
                                        comm, init_from)
            if resume:
                _check_resumed_network(trainer.model, network, declared, os.path.join(checkpoint, "checkpoint.nplm"),
                                       chosen)
                _check_resumed_run(trainer, config, os.path.join(checkpoint, "checkpoint.nplm"))
        recipe_meta = {"recipe": chosen.meta()} if chosen is not None else {}
        if chosen is not None and (comm is None or comm.rank == 0):  # once every input is checked: one line on error
            print(f"train-nplm: recipe {chosen.name}: {chosen.command_line()}" + (f" ({chosen.why})" if chosen.why
                                                                                  else ""), file=sys.stderr)
        if comm is None:
            return _finish(trainer, corpora, text, lm, recipe_meta)
        try:  # a failing rank must not leave the others waiting in a collective
            _finish(trainer, corpora, text, lm, recipe_meta)
        except BaseException as error:  # noqa: B902 (KeyboardInterrupt too: stop every rank)
            abort_on_error(comm, error)


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


def _finish(trainer, corpora, text, lm, extra_meta):
    model = trainer.run(*corpora)
    if lm and trainer.writer:
        model.save(lm, {"training": text, "history": trainer.state["history"], **extra_meta})


def _given(context, name):
    return context.get_parameter_source(name.replace("-", "_")) is click.core.ParameterSource.COMMANDLINE


def _recipe(context, name, text, valid, vocab, min_count, normalize, given):
    """The recipe -recipe names (with -max-time as its budget if given), the one chosen for
    the corpus when -max-time comes alone, or None."""
    budget = given["max_time"] if _given(context, "max-time") else None
    if name is not None:
        return recipes.named(name, budget)
    if not context.meta.get("nplm.auto-recipe"):
        return None
    if budget == 0:
        raise NplmError("-max-time 0 is no budget: give the seconds the recipe may train for")
    for path in [text] + [p for p in (valid, vocab) if p]:
        check_readable(path)
    return recipes.for_corpus(text, valid, vocab, min_count, normalize, budget)


def _recipe_arch(context, arch, recipe):
    """The recipe's architecture; an -arch given that differs is refused."""
    wanted = recipe.values()["arch"]
    if _given(context, "arch") and arch != wanted:
        raise NplmError(f"-recipe {recipe.name} trains -arch {wanted}, not -arch {arch}")
    return wanted


def _recipe_values(context, recipe, declared):
    """The recipe's option values, as their click types read them, for each option of
    `declared` not given on the command line (those given win); the budget as -max-time."""
    params = {param.name: param for param in context.command.get_params(context)}
    chosen = {**recipe.values(), "max-time": recipe.budget}
    values = {}
    for option in declared:
        if option.name in chosen and not _given(context, option.name):
            param = params[option.name.replace("-", "_")]
            value = chosen[option.name]
            values[option.name] = value if option.kind == "flag" else param.type_cast_value(context, str(value))
    return values


def _check_resumed_vocabulary(given, path, trainer):
    """-resume continues with the checkpoint's vocabulary: a -vocab that differs is refused."""
    saved = trainer.model.vocab
    if given != saved:
        where = next((i for i, (a, b) in enumerate(zip(given.words, saved.words)) if a != b), None)
        differs = (f"{len(given):,} words against its {len(saved):,}" if where is None else
                   f"word {where} is '{given.words[where]}', the checkpoint's '{saved.words[where]}'")
        raise NplmError(f"-vocab {path} is not the checkpoint's vocabulary ({differs}): drop it, or start a new run",
                        path=trainer.resumed_from)


def _resumed_arch(context, arch, saved_meta, checkpoint):
    """-resume continues the checkpoint's architecture (`saved_meta`: saved_run's): an -arch
    given that differs is refused."""
    saved = saved_meta.get("arch")
    if saved not in ARCHITECTURES:
        return arch  # no checkpoint to read: the trainer's resume says why
    if context.get_parameter_source("arch") is click.core.ParameterSource.COMMANDLINE and arch != saved:
        raise NplmError(f"-arch {arch} contradicts the checkpoint's network (arch {saved}): drop it, or start a new run",
                        path=os.path.join(checkpoint, "checkpoint.nplm"))
    return saved


def _resumed_settings(context, declared, recipe, saved, training, settings):
    """-resume continues the checkpoint's run as it began: each training option not given
    on the command line (nor by -recipe) takes the value the checkpoint's run had (`saved`:
    its config), in `training` and `settings` (the architecture's own), as fairseq restores
    its arguments. A checkpoint written before it kept them changes nothing."""
    if not isinstance(saved, dict):
        return
    by_recipe = set(recipe.values()) if recipe is not None else set()
    for option in declared:
        if option.target not in ("training", "settings") or option.name in by_recipe or context.get_parameter_source(
                option.name.replace("-", "_")) is click.core.ParameterSource.COMMANDLINE:
            continue
        source, into = (saved, training) if option.target == "training" else (saved.get("settings") or {}, settings)
        if option.parameter in source:
            value = source[option.parameter]
            if value is None:
                into.pop(option.parameter, None)
            else:
                into[option.parameter] = tuple(value) if isinstance(value, list) else value


# what a resumed run cannot change: the optimizer's state is the checkpoint's, and so are the
# random draws (the generator's state is restored, so another seed would do nothing)
RESUMED_AS_SAVED = ("optimizer", "seed")


def _check_resumed_run(trainer, config, path):
    """-resume continues the checkpoint's run: -optimizer or -seed given on the command line
    that differ from the checkpoint's are refused, naming both values."""
    context = click.get_current_context()
    for name in RESUMED_AS_SAVED:
        saved = trainer.resumed_config.get(name)
        if context.get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE and saved is not None \
                and getattr(config, name) != saved:
            raise NplmError(f"-{name} {getattr(config, name)} contradicts the checkpoint's run ({name} {saved}): drop "
                            "it, or start a new run", path=path)


def _check_resumed_network(model, network, declared, path, recipe=None):
    """-resume continues the checkpoint's network: an option of the network given on the
    command line or by -recipe that says otherwise is refused, naming both values (-arch:
    _resumed_arch)."""
    context = click.get_current_context()
    saved = {**model.file_meta(), "output": model.output}
    by_recipe = recipe.values() if recipe is not None else {}
    for name, key in [(o.name, o.parameter) for o in declared if o.target == "network"]:
        python_name = name.replace("-", "_")
        if name in by_recipe and context.get_parameter_source(python_name) is not click.core.ParameterSource.COMMANDLINE:
            value = by_recipe[name]
            given = f"-recipe {recipe.name}'s -{name}" + ("" if value is True else f" {value}")
        elif context.get_parameter_source(python_name) is click.core.ParameterSource.COMMANDLINE:
            given = f"-{name} {context.params[python_name]}"
        else:
            continue
        if network.get(key) != saved.get(key):
            raise NplmError(f"{given} contradicts the checkpoint's network ({key} {saved.get(key)}): drop it, or "
                            "start a new run", path=path)


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
