"""The `nplm` group: subcommands, aliases, one-line errors with exit status 2, and the
library's warnings as one line each."""
import contextlib
import difflib
import sys
import warnings

import click

from nplmtk.errors import NplmError, NplmWarning

from . import embeddings, generate, mix, ngram_class, ngram_count, plot, ppl, rescore, toy_corpus, train, vocab
from .options import spell

ALIASES = {"train": "train-nplm"}


class Group(click.Group):
    def get_command(self, ctx, name):
        return super().get_command(ctx, ALIASES.get(name, name))


@click.group(cls=Group, context_settings={"help_option_names": ["-help", "--help"]})
def cli():
    """nplm: n-gram and neural probabilistic language models, SRILM-style.

    Every subcommand reads plain text ('-' is stdin, .gz is transparent) and writes
    vocabularies, counts, ARPA files or binary models atomically.
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


cli.add_command(vocab.command)
cli.add_command(ngram_count.command)
cli.add_command(ngram_class.command)
cli.add_command(ppl.command)
cli.add_command(train.command)
cli.add_command(toy_corpus.command)
cli.add_command(mix.command)
cli.add_command(generate.command)
cli.add_command(embeddings.command)
cli.add_command(plot.command)
cli.add_command(rescore.command)


def _usage_message(err, argv):
    """click reads an unknown '-foo' as the short option '-f': name what was typed (not a
    known option that starts the same), and the nearest option there is."""
    if not isinstance(err, click.NoSuchOption):
        return err.format_message()
    known = [name for param in (err.ctx.command.params if err.ctx else []) for name in param.opts
             if not name.startswith("--")]
    typed = err.option_name
    if len(typed) == 2:
        typed = next((a.split("=")[0] for a in argv if a.startswith(typed) and a.split("=")[0] not in known), typed)
    nearest = difflib.get_close_matches(typed, known, n=1, cutoff=0.6)
    return f"no such option: {typed}" + (f" (did you mean {nearest[0]}?)" if nearest else "")


def main(argv=None):
    """Console entry point: bad input is one line on stderr and exit status 2."""
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        cli.main(args=argv, prog_name="nplm", standalone_mode=False)
    except click.UsageError as err:
        where = err.ctx.command_path if err.ctx else "nplm"
        print(f"{where}: {_usage_message(err, argv)}", file=sys.stderr)
        sys.exit(2)
    except NplmError as err:
        print(f"nplm: {err.render(spell)}", file=sys.stderr)
        sys.exit(2)
    except click.Abort:
        print("nplm: aborted", file=sys.stderr)
        sys.exit(130)
    except KeyboardInterrupt:
        print("nplm: interrupted", file=sys.stderr)
        sys.exit(130)
    except BrokenPipeError:
        # The reader went away (e.g. `| head`): not an error of ours.
        sys.stderr.close()
        sys.exit(0)
