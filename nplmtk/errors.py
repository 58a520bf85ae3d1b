"""The one exception type of the library: a message a user can act on."""


class NplmError(Exception):
    """Bad input or a refused operation. The CLI prints it as one line and exits 2.

    Messages start with the file name (and line) they concern, as `file:line: what`.
    """
