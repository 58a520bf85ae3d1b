"""The library's errors and warnings: typed values that the CLI turns into one line.

The library speaks of its own parameters (`batch`, `hidden`), never of command-line
flags: a `ParameterError` names them in `{braces}` and whoever prints it chooses the
spelling (the CLI spells `{hidden}` as `-h`). Errors about a file carry its path and,
where known, the line.
"""
import string


class NplmError(Exception):
    """Bad input or a refused operation. The CLI prints it as one line and exits 2.

    `path` and `line`, when given, lead the message as `path:line: what`.
    """

    def __init__(self, message, *, path=None, line=None):
        self.message, self.path, self.line = message, path, line
        super().__init__(message)

    def render(self, spell=None):
        """The message, with parameter names spelt by `spell(name)` (default: the name)."""
        where = "" if self.path is None else f"{self.path}:" + ("" if self.line is None else f"{self.line}:") + " "
        return where + self._text(spell or (lambda name: name))

    def _text(self, spell):
        return self.message

    def __str__(self):
        return self.render()


class InputError(NplmError):
    """A file's content is not what it should be (give `path`, and `line` when known)."""


class ParameterError(NplmError):
    """A setting that cannot be used. The message names parameters as `{name}`;
    `parameters` lists them, for callers that map them to options of their own."""

    def __init__(self, message, *, path=None, line=None):
        super().__init__(message, path=path, line=line)
        self.parameters = tuple(field for _, field, _, _ in string.Formatter().parse(message) if field)

    def _text(self, spell):
        return self.message.format_map({name: spell(name) for name in self.parameters})


class RankLostError(NplmError):
    """Under MPI: an exchange with the other ranks failed, because a rank stopped (killed
    or crashed). `lost` lists the ranks known to have stopped (may be empty)."""

    def __init__(self, message, *, lost=()):
        super().__init__(message)
        self.lost = tuple(lost)


class Interrupted(SystemExit):
    """The process ends on a signal (Ctrl-C's SIGINT, SIGTERM) caught where temporary
    files must go first (scratch.scratch_folder): exit status 128 + the signal's number,
    and without a caller that prints it (the CLI's one line), no traceback."""

    def __init__(self, signum, reason):
        super().__init__(128 + signum)
        self.reason = reason


class NplmWarning(UserWarning):
    """Something a user should know that does not stop the work (the CLI prints it)."""


def os_error(path, err):
    """The NplmError naming `path` for an OSError (or open()'s ValueError) met on it."""
    if isinstance(err, ValueError):  # open()'s "embedded null byte": no such name can exist
        return NplmError("a file name cannot hold a NUL byte", path=path.replace("\0", "\\x00"))
    if isinstance(err, FileNotFoundError):
        return NplmError("no such file", path=path)
    if isinstance(err, IsADirectoryError):
        return NplmError("is a directory, not a file", path=path)
    if isinstance(err, PermissionError):
        return NplmError("permission denied", path=path)
    return NplmError(f"{err.strerror or err}", path=path)
