"""Subcommands whose issue has not landed yet: each says so in one line and exits 2."""
import click

from nplmtk.errors import NplmError

PENDING = {
    "mix": ("interpolate models with EM-learned weights", 6),
}


def _pending(name, summary, issue):
    @click.command(name, help=f"Not built yet: {summary} (issue #{issue}).",
                   context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
    def command():
        raise NplmError(f"{name}: not built yet in this version (issue #{issue})")
    return command


commands = [_pending(name, summary, issue) for name, (summary, issue) in PENDING.items()]
