"""Reading inputs: `-` is stdin, `.gz` data is gunzipped, every text checked to be UTF-8
with lines and words within their limits; stdin and (within a command) a pipe kept once
read, so that a tool may pass over them twice."""
import contextlib
import io
import mmap
import os
import stat
import sys
import zlib

from ..errors import InputError, NplmError, os_error
from ..threads import input_wait

GZIP_MAGIC = b"\x1f\x8b"
# gzip is imported where it is used: a command that reads a plain text (scoring) starts
# sooner without it


# The longest line and word any reader takes, in bytes; NPLM_MAX_LINE_BYTES and
# NPLM_MAX_TOKEN_BYTES raise them. An endless line (/dev/zero) is refused once it passes
# the limit instead of being read until memory runs out.
MAX_LINE_BYTES = 1 << 20
MAX_TOKEN_BYTES = 1 << 16


def byte_limit(variable, default):
    """A limit in bytes: the environment's `variable`, else `default`."""
    value = os.environ.get(variable)
    if value is None:
        return default
    try:
        limit = int(value) if value.strip().isascii() else 0  # int() also reads other scripts' digits
    except ValueError:
        limit = 0
    if limit < 1:
        raise NplmError(f"{variable} must be a positive number of bytes, got '{value}'")
    return limit


def max_line_bytes():
    """The longest line a reader takes (NPLM_MAX_LINE_BYTES, else MAX_LINE_BYTES)."""
    return byte_limit("NPLM_MAX_LINE_BYTES", MAX_LINE_BYTES)


def max_token_bytes():
    """The longest word a vocabulary takes (NPLM_MAX_TOKEN_BYTES, else MAX_TOKEN_BYTES)."""
    return byte_limit("NPLM_MAX_TOKEN_BYTES", MAX_TOKEN_BYTES)


def line_too_long(path, line, limit):
    return InputError(f"a line longer than {limit} bytes (the limit: set NPLM_MAX_LINE_BYTES to raise it); not a "
                      "text file?", path=path, line=line)


def token_too_long(path, line, size, limit):
    return InputError(f"a word of {size} bytes, longer than {limit} (the limit: set NPLM_MAX_TOKEN_BYTES to raise "
                      "it)", path=path, line=line)


def check_tokens(words, path=None, data=None, lines_before=0):
    """Refuse a word (bytes or str) longer than max_token_bytes() in UTF-8; the line is
    found in `data`, the bytes the words came from, when it is given."""
    limit = max_token_bytes()
    if not words or max(map(len, words)) * 4 <= limit:  # the usual case, without encoding a word
        return
    for word in words:
        size = len(word.encode("utf-8") if isinstance(word, str) else word)
        if size > limit:
            where = -1 if data is None else data.find(word.encode("utf-8") if isinstance(word, str) else word)
            line = None if where < 0 else lines_before + data[:where].count(b"\n") + 1  # an mmap has no count()
            raise token_too_long(path, line, size, limit)


def check_words(line, words, path, number, limit):
    """Refuse the first of `words` (str, split from the text `line`, line `number` of
    `path`) longer than `limit` bytes in UTF-8. A line of at most limit // 4 characters
    holds no such word: for it, the check is one len()."""
    if len(line) * 4 <= limit:
        return
    for word in words:
        if len(word) * 4 > limit and len(word.encode("utf-8")) > limit:
            raise token_too_long(path, number, len(word.encode("utf-8")), limit)


def long_line_start(data, limit, start=0):
    """Where in `data` (from `start`, a line's beginning) the first line of more than `limit`
    bytes begins (its newline not counted), or -1. The last line may end past `data`: it
    only counts once it is already too long. A jump of about `limit` bytes at a time, the
    last newline within reach found by memrchr: a block costs one pass at C speed."""
    newline, size = start - 1, len(data)
    while newline + limit + 1 < size:
        found = data.rfind(b"\n", newline + 1, newline + limit + 2)
        if found < 0:
            return newline + 1
        newline = found
    return -1


def _checked_lines(data, path, limit, lines_before=0, start=0):
    """`data`, refused when a line in it passes `limit` bytes."""
    where = long_line_start(data, limit, start)
    if where >= 0:
        raise line_too_long(path, lines_before + data.count(b"\n", 0, where) + 1, limit)
    return data


READ_BYTES = 1 << 20  # a stream, or gzip data, is read a piece of this size at a time


def _read_checked(source, path, limit, check_piece=None):
    """All of a file object's bytes, read a piece at a time, refused as soon as a line
    passes `limit` bytes (an endless stream of one line ends there) or a piece is not
    UTF-8 (every reader of these bytes wants text: /dev/urandom ends at its first piece).
    Gzip data is not checked: its text is, once gunzipped. `check_piece(piece, lines
    before it)` may refuse the stream as it comes (by a format's magic, or its length)."""
    import codecs
    pieces, lines, tail = [], 0, 0  # tail: bytes of the unfinished last line so far
    utf8, plain = codecs.getincrementaldecoder("utf-8")(), None
    while piece := _read_input(source, READ_BYTES):
        if check_piece:
            check_piece(piece, lines)
        if plain is None:
            plain = piece[:2] != GZIP_MAGIC
        pieces.append(piece)
        if not plain:
            continue
        try:
            utf8.decode(piece)
        except UnicodeDecodeError as err:
            raise InputError("invalid UTF-8", path=path, line=lines + piece.count(b"\n", 0, max(err.start, 0)) + 1) \
                from None
        last = piece.rfind(b"\n")
        if last < 0:
            if tail + len(piece) > limit:
                raise line_too_long(path, lines + 1, limit)
            tail += len(piece)
        else:
            if tail + piece.find(b"\n") > limit:
                raise line_too_long(path, lines + 1, limit)
            _checked_lines(piece, path, limit, lines, start=piece.find(b"\n") + 1)
            lines += piece.count(b"\n")
            tail = len(piece) - last - 1
    return b"".join(pieces)


# The bytes of an input that comes once (stdin; within a command, a pipe or a FIFO), read
# whole, kept so that a tool may pass over it twice; None: it was read block by block, and
# is gone. Stdin is keyed by the object sys.stdin was then (tests replace it), a pipe by its
# identity. Pipes only within a command (begin_command): a library caller may feed the
# same FIFO again with another text.
_kept = {}
_pipes_kept = False


def begin_command():
    """A command starts (the CLI's): from here a pipe or FIFO named twice (`-text <(zcat
    ...)`, read for its vocabulary and then counted) is one text, kept as stdin is, rather
    than read a second time as empty, or waited on for a writer that will not come."""
    global _pipes_kept
    _pipes_kept = True
    for key in [key for key in _kept if key[0] == "pipe"]:
        del _kept[key]


def _stream_key(path):
    """Where `_kept` keeps the bytes of `path`: a key for stdin and (within a command) a
    pipe or a FIFO, None for a file or a device (read again as often as asked)."""
    if path == "-":
        return (sys.stdin, "-")
    if not _pipes_kept:
        return None
    try:
        status = os.stat(path)
    except (OSError, ValueError):
        return None
    return ("pipe", status.st_dev, status.st_ino) if stat.S_ISFIFO(status.st_mode) else None


def comes_once(path):
    """Whether `path` is stdin or (within a command) a pipe: a tool that passes over it
    twice reads it whole first (read_bytes), to have it kept."""
    return _stream_key(path) is not None


def is_stream(path):
    """Whether `path` is stdin or a file that is not regular (a pipe, a device): its bytes
    come once, so a check must not open it and close it unread."""
    if path == "-":
        return True
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return False  # the open that follows says why
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))  # a folder: the open says it is one


def _read_once(path):
    what = "stdin" if path == "-" else "this pipe"
    return InputError(f"{what} was read already and cannot be read again", path=path)


def _open(path):
    try:
        if path == "-":
            return sys.stdin.buffer
        with input_wait():  # a FIFO's open waits for its writer
            return open(path, "rb")
    except (OSError, ValueError) as err:
        raise os_error(path, err) from None


def _read_input(source, size):
    """source.read(size), where a signal that stops the work may end the wait at once."""
    with input_wait():
        return source.read(size)


def read_bytes(path, keep=True, check_piece=None, size_limit=None):
    """The whole content of `path` ('-' for stdin), gunzipped when it is gzip data. Stdin
    is read once and, with `keep`, kept, so that a tool may pass over it twice. A line
    longer than max_line_bytes() is refused; a stream (stdin, a pipe, a device), or gzip
    data, as soon as it is read. `check_piece`: as _read_checked's, for a stream.
    `size_limit`: (bytes, the variable that raises them): a larger content (gunzipped) is
    refused as soon as it is read past them."""
    limit, key = max_line_bytes(), _stream_key(path)
    capped = _size_check(path, *size_limit) if size_limit else None
    if key in _kept:
        if _kept[key] is None:
            raise _read_once(path)
        data = _kept[key]
    elif is_stream(path):
        source = _open(path)
        try:
            data = _read_checked(source, path, limit, _both(check_piece, capped))
        except OSError as err:
            raise os_error(path, err) from None
        finally:
            if source is not sys.stdin.buffer:
                source.close()
        if key is not None:
            _kept[key] = data if keep else None  # not kept (a model's text, parsed once): gone
    else:
        with contextlib.closing(_open(path)) as f:
            try:
                data = f.read() if size_limit is None else f.read(size_limit[0] + 1)
            except OSError as err:
                raise os_error(path, err) from None
        if capped and data[:2] != GZIP_MAGIC:
            capped(data, 0)
        if data[:2] != GZIP_MAGIC:
            _checked_lines(data, path, limit)
    if data[:2] == GZIP_MAGIC:
        import gzip
        try:
            data = _read_checked(gzip.GzipFile(fileobj=io.BytesIO(data)), path, limit,
                                 _size_check(path, *size_limit) if size_limit else None)
        except (OSError, EOFError, zlib.error) as err:
            raise InputError(f"corrupt gzip data ({err})", path=path) from None
    return data


def read_small_bytes(path, size_limit):
    """read_bytes(path, keep=False, size_limit=size_limit) of a small file read whole (a
    lattice), sooner: a regular file holding one gzip member of ASCII text is unpacked by
    zlib in one call and its lines checked at once (no GzipFile, no UTF-8 decoder a piece);
    anything else, or anything read_bytes would refuse, is read_bytes' own, message and all."""
    if _stream_key(path) is not None or is_stream(path):
        return read_bytes(path, keep=False, size_limit=size_limit)
    with contextlib.closing(_open(path)) as f:
        try:  # as many bytes as the file has (a read of the limit's size would allocate all of it)
            wanted = min(os.fstat(f.fileno()).st_size, size_limit[0]) + 1
            data = f.read(wanted)
        except OSError as err:
            raise os_error(path, err) from None
    if len(data) >= wanted:  # past the limit, or grown since: read_bytes' way
        return read_bytes(path, keep=False, size_limit=size_limit)
    if data[:2] != GZIP_MAGIC:  # read_bytes' check of a plain regular file (within the limit: read so)
        return _checked_lines(data, path, max_line_bytes())
    unpack = zlib.decompressobj(16 + zlib.MAX_WBITS)  # one gzip member, its CRC and length checked by zlib
    try:
        text = unpack.decompress(data, size_limit[0] + 1)
    except zlib.error:
        text = None
    if text is None or not unpack.eof or unpack.unused_data or len(text) > size_limit[0] or not text.isascii() \
            or long_line_start(text, max_line_bytes()) >= 0:
        return read_bytes(path, keep=False, size_limit=size_limit)
    return text


def _size_check(path, size, variable):
    """A check_piece for _read_checked that refuses a content past `size` bytes."""
    total = 0

    def check(piece, lines):
        nonlocal total
        total += len(piece)
        if total > size:
            raise InputError(f"larger than {size} bytes (the limit: set {variable} to raise it)", path=path)
    return check


def _both(first, second):
    if first is None or second is None:
        return first or second
    return lambda piece, lines: (first(piece, lines), second(piece, lines))


def read_mapped(path, check_piece=None):
    """The content of `path` as `read_bytes` gives it, but a plain regular file (not gzip)
    as a read-only memory map, whose pages `release_mapped` hands back once read: a large
    file then never sits in memory whole. A stream is read once (refused as it comes when
    `check_piece` says so, see _read_checked), and not kept."""
    if not is_stream(path):
        try:
            with open(path, "rb") as f:
                if f.read(2) not in (GZIP_MAGIC, b""):
                    return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError) as err:
            raise os_error(path, err) from None
    return read_bytes(path, keep=False, check_piece=check_piece)


def release_mapped(data, end):
    """Hand back the memory of data[:end] when `data` is a memory map of `read_mapped`."""
    if isinstance(data, mmap.mmap):
        data.madvise(mmap.MADV_DONTNEED, 0, end - end % mmap.PAGESIZE)


BLOCK_BYTES = 64 << 20  # read_text_blocks' default: a block of text, cut after its last newline


def line_starts_near(path, offsets):
    """For each byte offset of the regular file `path`, the first line start at or after
    it (the file's size past its last line): where the lines of a share of it begin."""
    size = os.path.getsize(path)
    starts = []
    with _open(path) as source:
        for offset in offsets:
            if offset <= 0 or offset >= size:
                starts.append(min(max(offset, 0), size))
                continue
            source.seek(offset - 1)
            while True:
                piece = source.read(1 << 16)
                newline = piece.find(b"\n")
                if newline >= 0 or not piece:
                    starts.append(min(source.tell() - len(piece) + newline + 1, size) if piece else size)
                    break
    return starts


def read_text_range(path, start, stop, normalize=None, block_bytes=BLOCK_BYTES):
    """read_text_blocks of the lines of the regular, uncompressed file `path` from byte
    `start` to `stop` (both line starts: line_starts_near); an error names the line in
    the whole file."""
    with _open(path) as source:
        if source.read(2) == GZIP_MAGIC:
            raise InputError("a share of a text is a byte range: give it uncompressed", path=path)
        source.seek(start)
        blocks = read_text_blocks(path, normalize, block_bytes, source=_Limited(source, stop - start))
        try:
            yield from blocks
        except InputError as err:
            if err.line is None:
                raise
            before = 0  # the lines before the range, counted only for the message
            source.seek(0)
            for _ in range(0, start, 1 << 20):
                before += source.read(min(1 << 20, start - source.tell())).count(b"\n")
            raise InputError(err.message, path=path, line=err.line + before) from None


class _Limited(io.RawIOBase):
    """The next `remaining` bytes of `source`."""

    def __init__(self, source, remaining):
        self.source, self.remaining = source, remaining

    def readable(self):
        return True

    def read(self, size=-1):
        size = self.remaining if size is None or size < 0 else min(size, self.remaining)
        data = self.source.read(size)
        self.remaining -= len(data)
        return data


def read_text_blocks(path, normalize=None, block_bytes=BLOCK_BYTES, source=None):
    """The bytes of `path` (gunzipped, checked to be UTF-8, after `normalize`, a str -> str
    function) in blocks of about `block_bytes` that end after a newline (the last block
    where the file does), so a corpus larger than memory streams through. Stdin already
    read by read_bytes comes from its copy; otherwise it streams and cannot be read again.
    `source`: a file object to read instead (read_text_range's share of `path`)."""
    if source is not None:
        yield from _text_blocks(source, path, normalize, block_bytes)
        return
    key = _stream_key(path)
    if key in _kept and _kept[key] is None:
        raise _read_once(path)
    if key in _kept:
        source = io.BytesIO(_kept[key])
    else:
        source = _open(path)
        if key is not None:
            _kept[key] = None  # streamed: gone once read
    with contextlib.ExitStack() as stack:
        stack.callback(source.close if source is not sys.stdin.buffer else lambda: None)
        yield from _text_blocks(source, path, normalize, block_bytes)


def _text_blocks(source, path, normalize, block_bytes):
    """read_text_blocks' blocks of the open file `source`."""
    head = _read_input(source, 2)
    raw = source
    if head == GZIP_MAGIC:
        import gzip
        raw = gzip.GzipFile(fileobj=_Prefixed(head, source))
        head = b""
    carry, lines, limit = head, 0, max_line_bytes()
    while True:
        try:
            chunk = _read_input(raw, block_bytes)
        except (OSError, EOFError, zlib.error) as err:
            raise InputError(f"corrupt gzip data ({err})", path=path) from None
        data = _checked_lines(carry + chunk, path, limit, lines)
        if not chunk:
            if data:
                yield _checked_block(data, path, lines, normalize)
            return
        cut = data.rfind(b"\n") + 1
        if cut == 0:  # no newline yet: a longer line
            carry = data
            continue
        block, carry = data[:cut], data[cut:]
        yield _checked_block(block, path, lines, normalize)
        lines += block.count(b"\n")


class _Prefixed(io.RawIOBase):
    """A file whose first bytes were read already: `head`, then the rest of `source`."""

    def __init__(self, head, source):
        self.head, self.source = head, source

    def readable(self):
        return True

    def readinto(self, buffer):
        if self.head:
            n = min(len(buffer), len(self.head))
            buffer[:n], self.head = self.head[:n], self.head[n:]
            return n
        data = self.source.read(len(buffer))
        buffer[:len(data)] = data
        return len(data)


def _checked_block(data, path, lines_before, normalize):
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = lines_before + data.count(b"\n", 0, err.start) + 1
        raise InputError("invalid UTF-8", path=path, line=line) from None
    return normalize(text).encode("utf-8") if normalize else data


def read_text(path):
    """The UTF-8 text of `path`; invalid UTF-8 is an error naming the line."""
    return _decode(read_bytes(path), path)


def _decode(data, path):
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise InputError("invalid UTF-8", path=path, line=line) from None


def read_lines(path):
    """Lines of `path` without their newlines ('\\r\\n' accepted)."""
    return decoded_lines(read_bytes(path), path)


def decoded_lines(data, path):
    """The lines of `data`, bytes read from `path`, as read_lines gives them."""
    lines = _decode(data, path).split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def check_readable(path):
    """Fail early (before any work) when an input cannot be opened."""
    if path == "-":
        return
    if is_stream(path):  # opening and closing a FIFO would throw away what its writer wrote
        if not os.access(path, os.R_OK):
            raise NplmError("permission denied", path=path)
        return
    try:
        with open(path, "rb"):
            pass
    except (OSError, ValueError) as err:
        raise os_error(path, err) from None
