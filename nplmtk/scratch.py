"""Temporary files of a long job (sorted runs, the out-of-core estimate's passes): a folder
of its own in TMPDIR (or -temp), removed at the end, on an error, on Ctrl-C and on SIGTERM,
and the leftovers of killed processes removed first; each file written a piece at a time,
every failure one error naming the folder. Outputs are io's writer's (open_output)."""
import contextlib
import os
import sys

from .errors import Interrupted, NplmError, os_error
from .threads import allow_threads, raise_if_stopping, stop_threads


def process_alive(pid):
    """Whether process `pid` runs (one that ended but is not yet reaped, a zombie, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rpartition(b")")[2].split()[0] != b"Z"
    except (OSError, IndexError):
        return True  # no /proc (not Linux): it exists



@contextlib.contextmanager
def folder_in_use(folder, name):
    """Hold `folder` for this process while the block runs: a lock on the file `name` in it
    (released by the kernel however the process ends), refused in one error naming the
    process that holds it, so that two runs never write their files over each other's."""
    import fcntl
    path = os.path.join(folder, name)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as err:
        raise os_error(path, err) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 20, 0).decode("ascii", "replace").strip()  # empty while it writes it
            raise NplmError(f"in use by {f'process {holder}' if holder else 'another process'}, which writes "
                            "its files here: wait for it, or give another folder", path=folder) from None
        except OSError:  # a file system without locks (ENOLCK): the folder is used unguarded, as before
            pass
        else:
            with contextlib.suppress(OSError):  # the PID only names the holder to whoever is refused
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)


@contextlib.contextmanager
def scratch_folder(kind, root=None):
    """A new folder in `root` (default TMPDIR) for temporary files of `kind` (say
    "counts"), removed with its files at the end, on an error, on Ctrl-C and on SIGTERM
    (which within the block ends the process as SystemExit, status 128 + 15, so that the
    removal runs; both stop the threads' work at their next chunk); those of processes
    that were killed otherwise (SIGKILL) are removed first."""
    import shutil
    import tempfile
    root, prefix = root or tempfile.gettempdir(), f"nplm-{kind}."
    with contextlib.suppress(OSError):
        for name in os.listdir(root):
            owner = name[len(prefix):].split("-", 1)[0]
            if name.startswith(prefix) and owner.isdigit() and not process_alive(int(owner)):
                shutil.rmtree(os.path.join(root, name), ignore_errors=True)
    # named before it is made, with SIGTERM's handler set: a signal at any moment leaves no folder
    folder = os.path.join(root, f"{prefix}{os.getpid()}-{os.urandom(6).hex()}")
    with _SignalsStopWork() as signals:
        try:
            try:
                os.mkdir(folder, 0o700)
            except OSError as err:
                raise (NplmError("no such folder", path=root) if isinstance(err, FileNotFoundError)
                       else os_error(root, err)) from None
            yield folder
        finally:
            with signals.held():
                shutil.rmtree(folder, ignore_errors=True)


def scratch_error(folder, err):
    """The error of a failed write of temporary files in `folder` (say, a full disk)."""
    return NplmError(f"cannot keep temporary files ({err.strerror or err}): set TMPDIR or -temp to a folder "
                     "with room", path=folder)


class ScratchFile:
    """A binary file of temporary data in a scratch folder, written a piece at a time
    (numpy arrays or bytes): not an output (no atomic rename, no stdout), and every
    failure, say a full disk, one scratch_error naming the folder."""

    def __init__(self, path):
        self.folder = os.path.dirname(path)
        try:
            self.out = open(path, "wb")
        except OSError as err:
            raise scratch_error(self.folder, err) from None

    def append(self, values):
        """The bytes of `values` (file.write, unlike ndarray.tofile, keeps the errno)."""
        raise_if_stopping()
        view = memoryview(values)
        if not view.c_contiguous:
            view = memoryview(bytes(view))
        try:
            if view.nbytes:
                self.out.write(view.cast("B"))
        except OSError as err:
            raise scratch_error(self.folder, err) from None

    def close(self):
        try:
            self.out.close()
        except OSError as err:
            raise scratch_error(self.folder, err) from None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def rename_scratch(path, new_path, folder=None):
    """A scratch file renamed within its scratch folder (not an output: no atomic-replace
    rules apply); False when the file system cannot (say, another one), for the caller
    to copy it instead, or, given the scratch `folder`, that failure as its one error."""
    try:
        os.replace(path, new_path)
    except OSError as err:
        if folder is not None:
            raise scratch_error(folder, err) from None
        return False
    return True


class _SignalsStopWork:
    """Within the block SIGTERM and SIGINT raise Interrupted (SystemExit with status 128 +
    the signal: Python's default for SIGTERM ends the process at once, with no `finally`),
    after stopping the work of other threads at their next chunk (stop_threads), which the
    main thread waits for before removing the files; a second signal only waits for that,
    and one that comes while the files go (`held()`) is raised once they are gone.
    Outside the main thread signals cannot be set: nothing is done."""

    REASONS = {"SIGTERM": "terminated", "SIGINT": "interrupted"}

    def __init__(self):
        self.interrupted, self.holding, self.raised, self.before = None, False, False, {}

    def __enter__(self):
        import signal
        import threading
        if threading.current_thread() is threading.main_thread():
            allow_threads()
            self.before[signal.SIGTERM] = signal.signal(signal.SIGTERM, self._stop)
            if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # not when ignored (nohup, &)
                self.before[signal.SIGINT] = signal.signal(signal.SIGINT, self._stop)
            self.unraisable_before, sys.unraisablehook = sys.unraisablehook, self._unraisable
        return self

    def __exit__(self, *exc):
        import signal
        for number, handler in self.before.items():  # None: not set from Python
            signal.signal(number, signal.SIG_DFL if handler is None else handler)
        if self.before:
            sys.unraisablehook = self.unraisable_before

    def _stop(self, signum, frame):
        import signal
        if self.interrupted is None:
            self.interrupted = Interrupted(signum, self.REASONS[signal.Signals(signum).name])
            stop_threads(self.interrupted)
        self._raise()

    def _unraisable(self, unraisable):
        """The signal's exception raised where no exception can go (a weakref callback, a
        __del__): not printed ("Exception ignored ..."), since the threads and the main
        thread's work stop at their next chunk (raise_if_stopping) with its status and
        line; a second signal may raise it again."""
        if self.interrupted is not None and unraisable.exc_value is self.interrupted:
            self.raised = False
        else:
            self.unraisable_before(unraisable)

    def _raise(self):
        if self.interrupted is not None and not self.holding and not self.raised:
            self.raised = True
            raise self.interrupted

    @contextlib.contextmanager
    def held(self):
        """Within the block a signal is noted, not raised (the files' removal runs to its
        end); it is raised after the block."""
        self.holding = True
        try:
            yield
        finally:
            self.holding = False
        self._raise()
