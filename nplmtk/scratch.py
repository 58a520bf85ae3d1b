"""Temporary files of a long job (sorted runs, the out-of-core estimate's passes): a folder
of its own in TMPDIR (or -temp), removed at the end, on an error, on Ctrl-C and on SIGTERM,
and the leftovers of killed processes removed first; each file written a piece at a time,
every failure one error naming the folder. Outputs are io's writer's (open_output)."""
import contextlib
import ctypes
import os

from .errors import Interrupted, NplmError, os_error
from .threads import allow_threads, raise_if_stopping, stop_threads, waiting_on_input


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
    (within the block both stop the work at its next chunk and end the process as
    Interrupted, status 128 + the signal, once the removal has run); those of processes
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
    with _SignalsStopWork():
        try:
            try:
                os.mkdir(folder, 0o700)
            except OSError as err:
                raise (NplmError("no such folder", path=root) if isinstance(err, FileNotFoundError)
                       else os_error(root, err)) from None
            yield folder
        finally:
            shutil.rmtree(folder, ignore_errors=True)


def scratch_error(folder, err):
    """The error of a failed write of temporary files in `folder` (say, a full disk)."""
    return NplmError(f"cannot keep temporary files ({err.strerror or err}): set TMPDIR or -temp to a folder "
                     "with room", path=folder)


class ScratchFile:
    """A binary file of temporary data in a scratch folder, written a piece at a time
    (numpy arrays or bytes): not an output (no atomic rename, no stdout), and every
    failure, say a full disk, one scratch_error naming the folder. With `dtype`, only
    arrays of that dtype are taken (a file of rows has one kind of value; bytes are taken as they are)."""

    def __init__(self, path, dtype=None):
        self.folder, self.dtype = os.path.dirname(path), dtype
        try:
            self.out = open(path, "wb")
        except OSError as err:
            raise scratch_error(self.folder, err) from None

    def append(self, values):
        """The bytes of `values` (file.write, unlike ndarray.tofile, keeps the errno)."""
        raise_if_stopping()
        if self.dtype is not None and getattr(values, "dtype", self.dtype) != self.dtype:
            raise TypeError(f"{os.path.basename(self.out.name)}: {values.dtype} values for a file of {self.dtype}")
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


PAGE_BYTES = 4096
_PUNCH_HOLE = 0x03  # Linux's FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE
try:
    _fallocate = ctypes.CDLL(None, use_errno=True).fallocate
    _fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
except (OSError, AttributeError):  # no such call here
    _fallocate = None


def let_go_of(fd, start, stop):
    """Bytes start..stop-1 of the open scratch file `fd` will not be read again: the whole
    pages among them are punched out of it, their page cache freed at once. A write that
    follows takes those pages, where a fresh page costs its first touch (on a VM that
    hands freed memory back to its host, 8 times the copy: 2.6 s a GiB against 0.3).
    Nothing where the system or the file system cannot."""
    start = -(-start // PAGE_BYTES) * PAGE_BYTES
    stop = stop // PAGE_BYTES * PAGE_BYTES
    if _fallocate is not None and stop > start:
        _fallocate(fd, _PUNCH_HOLE, start, stop - start)  # a failure (no holes here) leaves the pages: no harm


def let_go_of_path(path, start, stop):
    """let_go_of for a scratch file by its path."""
    if _fallocate is None:
        return
    try:
        fd = os.open(path, os.O_WRONLY)
    except OSError:
        return
    try:
        let_go_of(fd, start, stop)
    finally:
        os.close(fd)


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
    """Within the block SIGTERM and SIGINT stop the work: the handler only notes the signal
    and stops every thread's work at its next chunk (stop_threads); the main thread raises
    it there too (raise_if_stopping, as Stopped: exit status 128 + the signal), so that it
    never strikes inside threading's or a queue's own locks, a weakref callback or the
    files' removal; only a wait on input (threads.input_wait), which may never end, is
    ended at once. A signal noted but not yet raised when the block ends is raised then
    (the work was done: its status still says how the process ended). Python's default
    for SIGTERM ends the process at once, with no `finally`. Outside the main thread
    signals cannot be set: nothing is done."""

    REASONS = {"SIGTERM": "terminated", "SIGINT": "interrupted"}

    def __init__(self):
        self.interrupted, self.before = None, {}

    def __enter__(self):
        import signal
        import threading
        if threading.current_thread() is threading.main_thread():
            allow_threads()
            self.before[signal.SIGTERM] = signal.signal(signal.SIGTERM, self._note)
            if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # not when ignored (nohup, &)
                self.before[signal.SIGINT] = signal.signal(signal.SIGINT, self._note)
        return self

    def __exit__(self, kind, value, traceback):
        import signal
        for number, handler in self.before.items():  # None: not set from Python
            signal.signal(number, signal.SIG_DFL if handler is None else handler)
        if self.before:
            allow_threads()  # the block's threads are done: later work is not stopped
        # from here on a signal takes its usual course; one noted before it is raised now,
        # unless the block already ends on an error (Stopped, most often)
        if self.interrupted is not None and kind is None:
            raise self.interrupted

    def _note(self, signum, frame):
        import signal
        if self.interrupted is None:
            self.interrupted = Interrupted(signum, self.REASONS[signal.Signals(signum).name])
            stop_threads(self.interrupted)
        if waiting_on_input():  # a wait that may never end, and nothing else under way: raise now
            raise self.interrupted
