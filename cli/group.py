"""The `nplm` click group: subcommands (each module imported only when it is run or
listed), aliases, usage errors as one line with exit status 2, and the library's warnings
as one line each. cli/main.py comes here for every command its fast path does not take."""
import contextlib
import importlib
import os
import sys
import warnings


def _numpy_with_one_blas_thread():
    """Import numpy with its OpenBLAS on one thread: started with a thread per core it
    costs a short command (scoring with an n-gram model) about 0.1 s on a busy machine, and
    nplm gives numpy's BLAS no large products (the networks' kernels call scipy's own
    OpenBLAS, a library of its own, loaded later with the variable as it was)."""
    before = os.environ.get("OPENBLAS_NUM_THREADS")
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    try:
        import numpy  # noqa: F401
    finally:
        if before is None:
            del os.environ["OPENBLAS_NUM_THREADS"]
        else:
            os.environ["OPENBLAS_NUM_THREADS"] = before


_numpy_with_one_blas_thread()

import click  # noqa: E402

from nplmtk.errors import NplmWarning  # noqa: E402
from nplmtk.io import begin_command  # noqa: E402

from .main import ALIASES, SUBCOMMANDS  # noqa: E402


def version_option():
    """-version (SRILM's spelling, taken by each of its programs) and --version: the
    installed nplmtk's version, then exit."""
    return click.version_option(None, "-version", "--version", package_name="nplmtk",
                                message="%(prog)s (nplmtk) %(version)s")


class Group(click.Group):
    def list_commands(self, ctx):
        return sorted(SUBCOMMANDS)

    def get_command(self, ctx, name):
        name = ALIASES.get(name, name)
        if name not in SUBCOMMANDS:
            return None
        command = importlib.import_module(f".{SUBCOMMANDS[name]}", __package__).command
        if not any("-version" in param.opts for param in command.params):
            version_option()(command)
        return command


@click.group(cls=Group, context_settings={"help_option_names": ["-help", "--help"]})
@version_option()
def cli():
    """nplm: n-gram and neural probabilistic language models, SRILM-style.

    Every subcommand reads plain text ('-' is stdin, .gz is transparent) and writes
    vocabularies, counts, ARPA files or binary models (regular files atomically; FIFOs,
    devices and '-' as they are written). SRILM's program names work as aliases:
    `nplm ngram -lm kn5.arpa -ppl test.txt` is `nplm ppl`, `nplm train` `nplm train-nplm`.
    """
    ctx = click.get_current_context()
    if ctx.invoked_subcommand:
        ctx.with_resource(warnings_printed_by(ALIASES.get(ctx.invoked_subcommand, ctx.invoked_subcommand)))


@contextlib.contextmanager
def warnings_printed_by(subcommand):
    """Within the block every NplmWarning (from any thread) is one line on stderr,
    `nplm SUBCOMMAND: warning: MESSAGE`, each time it is raised; other warnings as usual."""
    with warnings.catch_warnings():
        warnings.simplefilter("always", NplmWarning)
        show_others = warnings.showwarning

        def show(message, category, filename, lineno, file=None, line=None):
            if issubclass(category, NplmWarning):
                print(f"nplm {subcommand}: warning: {message}", file=sys.stderr)
            else:
                show_others(message, category, filename, lineno, file, line)

        warnings.showwarning = show
        yield




def _usage_message(err, argv):
    """click reads an unknown '-foo' as the short option '-f': name what was typed (not a
    known option that starts the same), and the nearest option there is."""
    if not isinstance(err, click.NoSuchOption):
        return err.format_message()
    import difflib  # only for this message: every command starts without it
    known = [name for param in (err.ctx.command.params if err.ctx else []) for name in param.opts
             if not name.startswith("--")]
    typed = err.option_name
    if len(typed) == 2:
        typed = next((a.split("=")[0] for a in argv if a.startswith(typed) and a.split("=")[0] not in known), typed)
    nearest = difflib.get_close_matches(typed, known, n=1, cutoff=0.6)
    return f"no such option: {typed}" + (f" (did you mean {nearest[0]}?)" if nearest else "")


def run(argv):
    """The command `argv` through the click group; a usage error or click's abort is one line
    and exit status 2 or 130."""
    begin_command()
    try:
        cli.main(args=argv, prog_name="nplm", standalone_mode=False)
    except click.UsageError as err:
        where = err.ctx.command_path if err.ctx else "nplm"
        print(f"{where}: {_usage_message(err, argv)}", file=sys.stderr)
        sys.exit(2)
    except click.Abort:  # click's for a KeyboardInterrupt: Ctrl-C's one line, as everywhere else
        print("nplm: interrupted", file=sys.stderr)
        sys.exit(130)
