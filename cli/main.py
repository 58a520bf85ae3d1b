"""The `nplm` group: subcommands, aliases, one-line errors with exit status 2, and the
library's warnings as one line each."""
import atexit
import contextlib
import importlib
import io
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

from nplmtk.errors import Interrupted, NplmError, NplmWarning  # noqa: E402
from nplmtk.io import begin_command  # noqa: E402

from .options import spell  # noqa: E402

# SRILM's program names too, so that an SRILM script runs with `nplm ` in front
ALIASES = {"train": "train-nplm", "ngram": "ppl"}
# subcommand -> the module of this package that defines it, imported only when it is run
# (or listed): `nplm ppl` then loads neither the trainer nor BLAS
SUBCOMMANDS = {
    "vocab": "vocab",
    "ngram-count": "ngram_count",
    "ngram-class": "ngram_class",
    "ppl": "ppl",
    "train-nplm": "train",
    "toy-corpus": "toy_corpus",
    "mix": "mix",
    "generate": "generate",
    "convert-lm": "convert_lm",
    "embeddings": "embeddings",
    "plot": "plot",
    "rescore": "rescore",
    "lattice-tool": "lattice_tool",
}


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


def _end_process():
    """End the process after a successful command, without tearing the interpreter down:
    freeing every module and object costs a short command some 15 ms (after scoring a
    text with an n-gram model) for memory the system takes back anyway. atexit's functions
    still run and the output is flushed first; with other threads, MPI (finalised after
    atexit's functions) or output that cannot be flushed, the process exits the usual way."""
    threading = sys.modules.get("threading")  # not imported: no other thread was started
    if threading and threading.active_count() > 1 or "mpi4py" in sys.modules:
        return
    atexit._run_exitfuncs()
    atexit._clear()  # run once, even if the usual exit follows
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # the usual exit reports it
        return
    os._exit(0)


class StdoutClosed(BaseException):
    """stdout's reader went away (`| head`). Not an OSError, which click turns into exit
    status 1 and library code may take for a failed file: nothing but main() catches it."""


class _Stdout(io.RawIOBase):
    """File descriptor 1 under sys.stdout. A reader that went away is StdoutClosed and any
    other failed write (a full device, EIO) one NplmError naming stdout, whoever writes
    (click.echo, a writer given '-'); after either, writes are dropped, so that the
    interpreter's last flush does not report the loss again."""

    def __init__(self):
        super().__init__()
        self.failed = False

    def writable(self):
        return True

    def fileno(self):
        return 1

    def write(self, data):
        if self.failed:
            return len(data)
        try:
            return os.write(1, data)
        except OSError as err:
            self.failed = True
            if isinstance(err, BrokenPipeError):
                raise StdoutClosed from None
            raise NplmError(f"cannot write ({err.strerror or err})", path="stdout") from None


def _checked_stdout():
    """A sys.stdout that writes through _Stdout, buffered as Python buffers its own."""
    interactive = os.isatty(1)
    return io.TextIOWrapper(io.BufferedWriter(_Stdout()), encoding="utf-8", newline="\n",
                            errors=getattr(sys.stdout, "errors", None) or "strict",
                            line_buffering=interactive)


def main(argv=None):
    """Console entry point: bad input is one line on stderr and exit status 2. Called
    without `argv` (as the console script calls it) it reads sys.argv, writes stdout
    through _checked_stdout and, the command done, ends the process (_end_process)."""
    entry_point = argv is None
    argv = sys.argv[1:] if argv is None else list(argv)
    if entry_point:
        sys.stdout = _checked_stdout()
    begin_command()
    try:
        cli.main(args=argv, prog_name="nplm", standalone_mode=False)
        sys.stdout.flush()
        if entry_point:
            _end_process()
    except click.UsageError as err:
        where = err.ctx.command_path if err.ctx else "nplm"
        print(f"{where}: {_usage_message(err, argv)}", file=sys.stderr)
        sys.exit(2)
    except NplmError as err:
        command = next((ALIASES.get(arg, arg) for arg in argv if not arg.startswith("-")), None)
        print(f"nplm: {err.render(lambda name: spell(name, command))}", file=sys.stderr)
        sys.exit(2)
    except click.Abort:
        print("nplm: aborted", file=sys.stderr)
        sys.exit(130)
    except KeyboardInterrupt:
        print("nplm: interrupted", file=sys.stderr)
        sys.exit(130)
    except Interrupted as err:  # its temporary files removed
        print(f"nplm: {err.reason}", file=sys.stderr)
        sys.exit(err.code)
    except StdoutClosed:
        # end at once and quietly, with the status of a process ended by SIGPIPE, as
        # `yes | head` ends
        sys.exit(141)  # 128 + SIGPIPE
