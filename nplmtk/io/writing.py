"""Writing outputs: `-` is stdout, a name ending in .gz is gzip-compressed; a regular file
(or a new path; a symlink's target) is written to a temporary file beside it and renamed
into place, a FIFO or a device written in place. open_output writes one output and syncs
it; OutputBatch writes many, one sync for them all."""
import contextlib
import io
import os
import stat
import sys
import time

from ..errors import NplmError, os_error
from ..scratch import process_alive
from ..threads import raise_if_stopping

# gzip and tempfile are imported where they are used: a command that writes no file
# (scoring) starts some 3 ms sooner without them


def _remove_stale_temporaries(directory, prefix=".", by_age=False):
    """Remove from `directory` the temporary files (`.NAME.PID-XXXXXXXX.tmp`, their names
    starting with `prefix`) of processes that were killed (kill -9, a power cut) and are
    gone; `by_age`, for a prefix that names one output: also those of the older naming
    (`.NAME.XXXXXXXX.tmp`, no process) a day old."""
    with contextlib.suppress(OSError):
        for name in os.listdir(directory):
            if not (name.startswith(prefix) and name.endswith(".tmp")):
                continue
            owner = name[:-len(".tmp")].rpartition(".")[2].split("-", 1)[0]
            full = os.path.join(directory, name)
            if owner.isdigit():
                stale = not process_alive(int(owner))
            else:
                stale = by_age and time.time() - os.path.getmtime(full) > 86400
            if stale:
                with contextlib.suppress(OSError):
                    os.unlink(full)


def _remove_stale_temporaries_of(target):
    """_remove_stale_temporaries for the one output `target`."""
    _remove_stale_temporaries(os.path.dirname(target), f".{os.path.basename(target)}.", by_age=True)


def check_writable(path):
    """Fail early (before any long work) when an output could not be written: its folder
    missing, `path` a folder, or no file can be created there. A FIFO or a device is
    written in place and not probed (opening a FIFO would wait for its reader)."""
    if path is None or path == "-":
        return
    target, in_place = _output_target(path)
    if in_place:
        if not os.access(target, os.W_OK):
            raise NplmError("permission denied", path=path)
        return
    _remove_stale_temporaries_of(target)  # a killed run's partial output goes at the start, not at the end
    fd, probe = _temporary_beside(target, path)
    os.close(fd)
    os.unlink(probe)


def _output_target(path):
    """(the file to write for `path`, whether to write it in place). A symlink is
    followed, so that its target gets the new content and the link stays; a FIFO, a
    device or a socket is written in place (replacing it would destroy it: a FIFO's
    reader would get nothing, /dev/null would become a file); a regular file, or a
    path that does not exist yet, is replaced atomically."""
    target = os.path.realpath(path)
    try:
        mode = os.stat(target).st_mode
    except FileNotFoundError:
        return target, False
    except OSError as err:
        raise os_error(path, err) from None
    if stat.S_ISDIR(mode):
        raise NplmError("is a directory, not a file", path=path)
    return target, not stat.S_ISREG(mode)


def _temporary_beside(target, path):
    """(fd, name) of a new temporary file `.NAME.PID-XXXXXXXX.tmp` in `target`'s folder,
    or a one-line error naming `path` (what the user gave)."""
    directory = os.path.dirname(target)
    if not os.path.isdir(directory):
        raise NplmError(f"directory {directory} does not exist", path=path)
    import tempfile
    try:
        return tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(target)}.{os.getpid()}-", suffix=".tmp")
    except OSError as err:
        raise os_error(path, err) from None


def _write_error(path, err, after=""):
    return NplmError(f"cannot write ({err.strerror or err}){after}", path=path)


@contextlib.contextmanager
def _in_place(target, path):
    """Yield the file `target` (a FIFO, a device) opened to be written in place; a write
    that fails is one NplmError naming `path`."""
    try:
        fd = os.open(target, os.O_WRONLY | os.O_NOCTTY)
    except OSError as err:
        raise os_error(path, err) from None
    try:
        with os.fdopen(fd, "wb") as raw:
            yield raw
    except OSError as err:
        raise _write_error(path, err) from None


@contextlib.contextmanager
def _temporary_content(target, path, umask):
    """Yield (file, name): a new temporary file beside `target`. When the block succeeds it
    is closed and given a new file's mode (0666 less `umask`); on any exception it is
    removed, an OSError (a full disk, a quota) being one NplmError naming `path`."""
    fd, tmp = _temporary_beside(target, path)
    try:
        with os.fdopen(fd, "wb") as raw:
            yield raw, tmp
        os.chmod(tmp, 0o666 & ~umask)
    except OSError as err:
        _remove_quietly(tmp)
        raise _write_error(path, err, "; nothing was changed") from None
    except BaseException:
        _remove_quietly(tmp)
        raise


def _remove_quietly(name):
    with contextlib.suppress(OSError):
        os.unlink(name)


def _umask():
    umask = os.umask(0)
    os.umask(umask)
    return umask


@contextlib.contextmanager
def open_output(path, binary=False):
    """Yield a file for `path`, text (UTF-8, newlines as \\n) or `binary`; a name ending in .gz is
    gzip-compressed.

    A regular file (or a new path; a symlink's target) appears only when the block
    succeeds: it is written to a temporary file beside it, synced and renamed into place,
    and on any exception the temporary file is removed and the old file left untouched.
    '-' (stdout), a FIFO or a device is written in place as the block writes, as tee does.
    A write that fails (a full disk, EIO, a FIFO's reader gone) is one NplmError naming
    `path`; on stdout, the failure is left to the caller (the CLI's stdout ends quietly
    on a closed pipe).
    """
    if path == "-":
        stream = sys.stdout.buffer if binary else sys.stdout
        yield stream
        stream.flush()
        return
    target, in_place = _output_target(path)
    if in_place:
        with _in_place(target, path) as raw:
            yield from _encoded(raw, path, binary)
        return
    _remove_stale_temporaries_of(target)
    with _temporary_content(target, path, _umask()) as (raw, tmp):
        yield from _encoded(raw, path, binary)
        raw.flush()
        os.fsync(raw.fileno())
        raise_if_stopping()  # a signal noted while it was written: the old file stays
    try:
        os.replace(tmp, target)
    except OSError as err:
        _remove_quietly(tmp)
        raise _write_error(path, err, "; nothing was changed") from None


def _encoded(raw, path, binary):
    """Yield the file to write on `raw` (gzip when `path` ends in .gz; text unless
    `binary`), and finish its compression and encoding after the caller's block."""
    compressed = None
    if path.endswith(".gz"):
        import gzip
        compressed = gzip.GzipFile(fileobj=raw, mode="wb", mtime=0)
    target = compressed or raw
    if binary:
        yield target
    else:
        text = io.TextIOWrapper(target, encoding="utf-8", newline="\n")
        yield text
        text.flush()
        text.detach()
    if compressed:
        compressed.close()


GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"  # no name, mtime 0, level 9, OS unknown


def gzipped(data):
    """`data` gzip-compressed as open_output compresses a .gz text, byte for byte: gzip's
    GzipFile (mtime 0, no name, level 9) with the text's flush a sync flush before the end,
    made with zlib directly (GzipFile's objects cost some 40 us a file)."""
    import struct
    import zlib
    compress = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS, zlib.DEF_MEM_LEVEL, 0)
    return b"".join((GZIP_HEADER, compress.compress(data), compress.flush(zlib.Z_SYNC_FLUSH), compress.flush(),
                     struct.pack("<II", zlib.crc32(data), len(data) & 0xFFFFFFFF)))


class OutputBatch:
    """open_output's batch mode: many outputs, each given whole as bytes (compressed for a
    .gz name as open_output compresses a text) and written as open_output writes it (a
    regular file atomically, beside it and renamed into place; '-', a FIFO or a device in
    place at once), but synced together: commit() (at the latest every `pending_limit`
    files, and when the `with` block ends) syncs the file system once (syncfs; without it,
    an fsync of each file), then renames each file into place and syncs each folder. The
    guarantee stays open_output's: after a crash each file is its old content or its whole
    new one (a rename is only made once the data under it is on disk), at one sync a
    batch instead of one a file (some ms a file): lattice-tool's N-best files and lattices.
    A full batch is synced and renamed by a thread while the next is written (a sync waits
    some 0.2-1 s for the disk); its error, if any, is raised by the next write or commit."""

    def __init__(self, pending_limit=256):
        self.pending, self.pending_limit, self.cleaned = [], pending_limit, set()
        self.umask = _umask()
        self.folders, self.pid, self.serial = {}, os.getpid(), 0  # each folder's real path; temporary files made
        self.committing, self.failed = None, None  # the batch's thread, and its error

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.commit()

    def write(self, path, data):
        """The bytes `data` (compressed for a .gz `path`) as the new content of `path`."""
        if path == "-":
            with open_output(path, binary=True) as out:
                out.write(data)
            return
        if path.endswith(".gz"):
            data = gzipped(data)
        target, in_place = self._target(path)
        if in_place:
            with _in_place(target, path) as raw:
                raw.write(data)
            return
        directory = os.path.dirname(target)
        if directory not in self.cleaned:  # one pass over a folder for all the files written in it
            _remove_stale_temporaries(directory)
            self.cleaned.add(directory)
        tmp = self._temporary(target, data)
        if tmp is None:  # as open_output makes it, its error named
            with _temporary_content(target, path, self.umask) as (raw, tmp):
                raw.write(data)
        self.pending.append((tmp, target, path))
        if len(self.pending) >= self.pending_limit:
            import threading
            self._wait()
            pending, self.pending = self.pending, []
            self.committing = threading.Thread(target=self._commit_apart, args=(pending,))
            self.committing.start()

    def _target(self, path):
        """_output_target(path) at one lstat for a new or regular file in a folder seen
        before (its real path kept: a symlink or a FIFO there still goes the long way)."""
        folder, name = os.path.split(path)
        real = self.folders.get(folder)
        if real is not None and name not in ("", ".", ".."):
            target = os.path.join(real, name)
            try:
                if stat.S_ISREG(os.lstat(target).st_mode):
                    return target, False
            except FileNotFoundError:
                return target, False
            except OSError:
                pass
        target, in_place = _output_target(path)
        self.folders[folder] = os.path.realpath(folder or ".")
        return target, in_place

    def _temporary(self, target, data):
        """The name of a new temporary file beside `target` (`.NAME.PID-SERIAL.tmp`) holding
        `data` with a new file's mode, made without tempfile's random names; None when it
        cannot be made (_temporary_content then names the error)."""
        folder, name = os.path.split(target)
        for _ in range(100):
            self.serial += 1
            tmp = os.path.join(folder, f".{name}.{self.pid}-{self.serial:08x}.tmp")
            try:
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            except FileExistsError:
                continue
            except OSError:
                return None
            try:  # by os.write, without a file object's own calls (isatty, lseek, fstat)
                try:
                    view = memoryview(data)
                    while view:
                        view = view[os.write(fd, view):]
                    os.fchmod(fd, 0o666 & ~self.umask)
                finally:
                    os.close(fd)
            except OSError:
                _remove_quietly(tmp)
                return None
            return tmp
        return None

    def commit(self):
        """Sync the files written so far, then rename them into place."""
        self._wait()
        pending, self.pending = self.pending, []
        _commit(pending)

    def _commit_apart(self, pending):
        try:
            _commit(pending)
        except NplmError as err:
            self.failed = err

    def _wait(self):
        """The batch being committed apart done; its error raised."""
        if self.committing is not None:
            self.committing.join()
            self.committing = None
        if self.failed is not None:
            failed, self.failed = self.failed, None
            raise failed


def _commit(pending):
    """Sync the files `pending` (temporary, target, path as given), then rename them into
    place and sync their folders."""
    if not pending:
        return
    try:
        _sync_files([tmp for tmp, _, _ in pending])
        for tmp, target, _ in pending:
            os.replace(tmp, target)
        for directory in {os.path.dirname(target) for _, target, _ in pending}:
            _sync_folder(directory)
    except OSError as err:  # a full disk, a quota: one line; the files not yet renamed stay as they were
        for tmp, _, _ in pending:
            _remove_quietly(tmp)
        raise _write_error(pending[0][2], err) from None


def _sync_files(names):
    """Every byte written to the files `names` on disk: one syncfs of their file system
    (Linux), else an fsync of each."""
    import ctypes
    try:
        syncfs = ctypes.CDLL(None, use_errno=True).syncfs
    except (OSError, AttributeError):
        syncfs = None
    fd = os.open(names[0], os.O_RDONLY)
    try:
        if syncfs is not None and syncfs(fd) == 0 and all(os.stat(n).st_dev == os.fstat(fd).st_dev for n in names):
            return
    finally:
        os.close(fd)
    for name in names:
        fd = os.open(name, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _sync_folder(directory):
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
