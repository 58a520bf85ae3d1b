"""The `nplm` entry point. `nplm ppl` with a binary back-off model and no other option is
scored without importing numpy or click (cli/ppl_fast.py: start-up is most of its time);
every other command goes through the click group (cli/group.py). Either way, bad input is
one line on stderr and exit status 2, and stdout's failures are caught here."""
import atexit
import importlib
import io
import os
import sys

from nplmtk.errors import Interrupted, NplmError

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
# the click group's names, imported from cli/group.py when first asked for (it imports numpy
# and click)
GROUP_NAMES = ("cli", "Group", "version_option", "warnings_printed_by")


def __getattr__(name):
    if name not in GROUP_NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(".group", __package__), name)


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
    try:
        if not (argv[:1] in (["ppl"], ["ngram"]) and importlib.import_module(".ppl_fast", __package__).run(argv)):
            importlib.import_module(".group", __package__).run(argv)
        sys.stdout.flush()
        if entry_point:
            _end_process()
    except NplmError as err:
        from .options import spell
        command = next((ALIASES.get(arg, arg) for arg in argv if not arg.startswith("-")), None)
        print(f"nplm: {err.render(lambda name: spell(name, command))}", file=sys.stderr)
        sys.exit(2)
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
