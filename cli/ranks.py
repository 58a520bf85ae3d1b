"""Bad input and failures under mpiexec: one line from rank 0, every rank stopped."""
import contextlib
import sys

from nplmtk.errors import NplmError, RankLostError
from nplmtk.neural.parallel import allgather

from .options import spell


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


def abort_on_error(comm, error):
    """One rank failed: say why on stderr and end every rank now (no rank left waiting
    in a collective). Exit status 2 for bad input, 1 otherwise."""
    message = error.render(spell) if isinstance(error, NplmError) else f"{type(error).__name__}: {error}"
    print(f"nplm: rank {comm.rank} of {comm.size}: {message}", file=sys.stderr, flush=True)
    comm.Abort(2 if isinstance(error, NplmError) else 1)
