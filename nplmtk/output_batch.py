"""Many outputs written as open_output writes each (atomically, a .gz name compressed the
same), synced together: lattice-tool's N-best files and lattices (io.open_output syncs
each file it writes, some ms a file)."""
import contextlib
import os
import struct
import threading
import zlib

from .errors import NplmError
from .io import _output_target, _temporary_beside, open_output
from .scratch import process_alive


def _remove_stale_in(directory):
    """_remove_stale_temporaries for every name in `directory` at once: the temporary
    files (`.NAME.PID-XXXXXXXX.tmp`) of processes that are gone."""
    with contextlib.suppress(OSError):
        for name in os.listdir(directory):
            if not (name.startswith(".") and name.endswith(".tmp")):
                continue
            owner = name[:-len(".tmp")].rpartition(".")[2].split("-", 1)[0]
            if owner.isdigit() and not process_alive(int(owner)):
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(directory, name))


GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"  # no name, mtime 0, level 9, OS unknown


def gzipped(data):
    """`data` gzip-compressed as open_output compresses a .gz text, byte for byte: gzip's
    GzipFile (mtime 0, no name, level 9) with the text's flush a sync flush before the end,
    made with zlib directly (GzipFile's objects cost some 40 us a file)."""
    compress = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS, zlib.DEF_MEM_LEVEL, 0)
    return b"".join((GZIP_HEADER, compress.compress(data), compress.flush(zlib.Z_SYNC_FLUSH), compress.flush(),
                     struct.pack("<II", zlib.crc32(data), len(data) & 0xFFFFFFFF)))


class OutputBatch:
    """Many files written as open_output writes them (atomically: a temporary file beside
    each, renamed into place; a .gz name compressed), each in one write, but synced together:
    commit() (at the latest every `pending_limit` files, and when the `with` block ends)
    syncs the file system once (syncfs; without it, an fsync of each file), then renames
    each file into place and syncs each folder. The guarantee stays open_output's: after a
    crash each file is its old content or its whole new one (a rename is only made once
    the data under it is on disk), at one sync a batch instead of one a file. A full batch
    is synced and renamed by a thread while the next is written (a sync waits some 0.2-1 s
    for the disk); its error, if any, is raised by the next write or commit. A FIFO or a
    device is written in place at once."""

    def __init__(self, pending_limit=256):
        self.pending, self.pending_limit, self.cleaned = [], pending_limit, set()
        self.umask = os.umask(0)
        os.umask(self.umask)
        self.committing, self.failed = None, None  # the batch's thread, and its error

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.commit()

    def write(self, path, data):
        """The bytes `data` (compressed for a .gz `path`) as the new content of `path`."""
        if path.endswith(".gz"):
            data = gzipped(data)
        target, in_place = _output_target(path)
        if in_place:
            with open_output(path, binary=True) as out:
                out.write(data)
            return
        directory = os.path.dirname(target)
        if directory not in self.cleaned:
            _remove_stale_in(directory)
            self.cleaned.add(directory)
        fd, tmp = _temporary_beside(target, path)
        try:
            with os.fdopen(fd, "wb") as raw:
                raw.write(data)
            os.chmod(tmp, 0o666 & ~self.umask)
        except OSError as err:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise NplmError(f"cannot write ({err.strerror or err}); nothing was changed", path=path) from None
        self.pending.append((tmp, target, path))
        if len(self.pending) >= self.pending_limit:
            self._wait()
            pending, self.pending = self.pending, []
            self.committing = threading.Thread(target=self._commit_apart, args=(pending,))
            self.committing.start()

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
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        raise NplmError(f"cannot write ({err.strerror or err})", path=pending[0][2]) from None


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
