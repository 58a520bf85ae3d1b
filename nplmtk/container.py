"""The binary model container (shared/DESIGN.md, "Files").

Layout: 8-byte magic, uint32 format version, uint32 header length, uint32 header CRC32,
4 reserved bytes, the JSON header, then 64-byte-aligned little-endian arrays. The header
holds the model kind, its metadata, the vocabulary and a table of arrays (name, dtype,
shape, offset, bytes, CRC32 and XXH64; files written before XXH64 have CRC32 alone).
Arrays load by memory map, or, from a small file, into memory (`load`). Opening and
checking a file (`opened`) imports neither numpy nor the vocabulary's kernels: `nplm ppl`
scores a binary back-off model without them (nplmtk/ngram/mapped.py).
"""
import json
import mmap
import os
import stat
import struct
import zlib

from ._ext.checksum_kernels import Xxh64, xxh64
from .errors import InputError, NplmError, os_error

MAGIC = b"\x89NPLM\r\n\x1a"
FORMAT_VERSION = 1
ALIGN = 64
_PREAMBLE = struct.Struct("<8sIII4x")  # magic, version, header length, header CRC


def _aligned(n):
    return (n + ALIGN - 1) // ALIGN * ALIGN


class PiecedArray:
    """An array too large to hold, given by `pieces()`: a new iterator of its pieces
    (C-order numpy arrays of `dtype`) on each call, since `save` reads them twice (the
    checksums, then the bytes)."""

    def __init__(self, dtype, shape, pieces):
        import numpy as np
        self.dtype, self.shape, self.pieces = np.dtype(dtype), tuple(shape), pieces


def save(path, kind, arrays, meta=None, vocab=None):
    """Write a model atomically: `arrays` maps names to numpy arrays or PiecedArrays."""
    import numpy as np

    from .io import open_output
    table = []
    sources = []
    for name, array in arrays.items():
        pieces = array.pieces if isinstance(array, PiecedArray) else None
        if pieces is None:
            array = np.asarray(array, order="C")
        if array.dtype.hasobject:
            raise NplmError(f"cannot store object arrays ('{name}')", path=path)
        dtype = array.dtype.newbyteorder("<") if array.dtype.byteorder == ">" else array.dtype
        if pieces is None:  # the array's own bytes when it is little-endian and contiguous: no copy of a table
            blob = memoryview(np.ascontiguousarray(array.astype(dtype, copy=False)).reshape(-1).view(np.uint8))
            nbytes, crc, xxh, source = len(blob), zlib.crc32(blob), xxh64(blob), (lambda blob=blob: [blob])
        else:
            def blobs(pieces=pieces, dtype=dtype):
                return (np.ascontiguousarray(piece, dtype=dtype).tobytes() for piece in pieces())

            nbytes, crc, hasher = 0, 0, Xxh64()
            for blob in blobs():
                nbytes += len(blob)
                crc = zlib.crc32(blob, crc)
                hasher.update(blob)
            if nbytes != int(np.prod(array.shape)) * dtype.itemsize:
                raise NplmError(f"array '{name}' has {nbytes} bytes in its pieces, not its shape's", path=path)
            xxh, source = hasher.digest(), blobs
        sources.append(source)
        table.append({"name": name, "dtype": dtype.str, "shape": list(array.shape),
                      "nbytes": nbytes, "crc32": crc, "xxh64": xxh})
    header = {"kind": kind, "meta": meta or {}, "arrays": table,
              "vocab": None if vocab is None else {"words": vocab.words, "unk": vocab.unk_word}}
    # Offsets depend on the header's length, which depends on the offsets: fix the
    # width of the offset digits by iterating until the layout is stable.
    while True:
        body = json.dumps(header, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        data_start = _aligned(_PREAMBLE.size + len(body))
        position = data_start
        for entry in table:
            entry["offset"] = position
            position = _aligned(position + entry["nbytes"])
        header["file_size"] = position
        again = json.dumps(header, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        if len(again) == len(body) and _aligned(_PREAMBLE.size + len(again)) == data_start:
            body = again
            break
    with open_output(path, binary=True) as out:
        out.write(_PREAMBLE.pack(MAGIC, FORMAT_VERSION, len(body), zlib.crc32(body)))
        out.write(body)
        written = _PREAMBLE.size + len(body)
        for entry, source in zip(table, sources):
            out.write(b"\0" * (entry["offset"] - written))
            for blob in source():
                out.write(blob)
            written = entry["offset"] + entry["nbytes"]
        out.write(b"\0" * (header["file_size"] - written))


# The dtypes a container may hold (little-endian): model arrays, counts, ids; each one's bytes.
ITEM_BYTES = {"<f4": 4, "<f8": 8, "<i4": 4, "<i8": 8, "<u4": 4, "<u8": 8, "|u1": 1, "|i1": 1, "|b1": 1}
DTYPES = tuple(ITEM_BYTES)


def _checked_header(body, file_size, path):
    """The JSON header, refused unless it has every key of the layout with values of the
    right types, each array inside the file with as many bytes as its dtype and shape say."""
    def refuse(what):
        raise InputError(f"malformed nplm model header ({what})", path=path)
    try:
        header = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        refuse("not JSON")
    if not isinstance(header, dict) or not isinstance(header.get("kind"), str) \
            or not isinstance(header.get("meta"), dict) or not isinstance(header.get("arrays"), list):
        refuse("kind, meta and arrays")
    if not _natural(header.get("file_size")):
        refuse("file_size")
    names = set()
    for entry in header["arrays"]:
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or entry["name"] in names:
            refuse("an array without a name of its own")
        names.add(entry["name"])
        shape = entry.get("shape")
        if entry.get("dtype") not in DTYPES or not isinstance(shape, list) or len(shape) > 8 \
                or not all(_natural(n) for n in shape):
            refuse(f"array '{entry['name']}': dtype and shape")
        count = 1
        for n in shape:
            count *= n
        if not all(_natural(entry.get(key)) for key in ("offset", "nbytes", "crc32")) \
                or entry["nbytes"] != count * ITEM_BYTES[entry["dtype"]] \
                or entry["offset"] + entry["nbytes"] > header["file_size"] \
                or not (_natural(entry.get("xxh64", 0)) and entry.get("xxh64", 0) < 2 ** 64):
            refuse(f"array '{entry['name']}': its bytes")
    vocab = header.get("vocab")
    if vocab is not None and not (isinstance(vocab, dict) and isinstance(vocab.get("words"), list)
                                  and set(map(type, vocab["words"])) <= {str}
                                  and isinstance(vocab.get("unk"), str)):
        refuse("vocab")
    return header


def _intact(view, entry):
    """Whether an array's bytes have their checksum: XXH64, three times as fast as CRC32
    over a large model, or CRC32 in files written before XXH64 (still written, for the
    readers that know no other)."""
    if "xxh64" in entry:
        return xxh64(view) == entry["xxh64"]
    return zlib.crc32(view) == entry["crc32"]


def _natural(value):
    return type(value) is int and value >= 0


class ModelFile:
    """A loaded container: `kind`, `meta`, `vocab` and `arrays` (read-only memory maps)."""

    def __init__(self, path, kind, meta, vocab, arrays):
        self.path, self.kind, self.meta, self.vocab, self.arrays = path, kind, meta, vocab, arrays


def is_container(path):
    """Whether `path` is a regular file that starts as a container. A pipe is not opened: its
    first bytes would be gone for the reader that follows (and a container must be a
    regular file, to be memory-mapped)."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return False
        with open(path, "rb") as f:
            return f.read(len(MAGIC)) == MAGIC
    except (OSError, ValueError):  # the reader that follows says why (ValueError: a NUL byte in the name)
        return False


# A file this large or larger is memory-mapped (its pages read as they are used, shared with other
# processes); a smaller one is read, since a map of a file that another program truncates in place
# ends the process with SIGBUS when it touches a page past the new end.
MAPPED_FROM = 16 << 20


def load(path, verify=True, mapped=None):
    """Open a container; refuse a truncated, corrupt, empty, foreign or newer file. Its arrays are
    read-only: views of a memory map when `mapped` (default: a file of MAPPED_FROM bytes or more),
    else of its bytes read into memory."""
    import numpy as np
    header, buffer = opened(path, mapped=mapped)
    arrays = {}
    for entry in header["arrays"]:
        view = memoryview(buffer)[entry["offset"]:entry["offset"] + entry["nbytes"]]
        if verify and not _intact(view, entry):
            raise InputError(f"corrupt nplm model file (array '{entry['name']}' checksum mismatch)",
                             path=path)
        array = np.frombuffer(view, dtype=np.dtype(entry["dtype"])).reshape(entry["shape"])
        array.flags.writeable = False  # as a map's are
        arrays[entry["name"]] = array
    return ModelFile(path, header["kind"], header["meta"], _header_vocab(header, path), arrays)


def read_header(path):
    """The checked header of a container (kind, meta, the table of arrays with their
    offsets and checksums) and its vocabulary, for a reader that reads the arrays
    itself a piece at a time (a memory map would count in its memory)."""
    header, _ = opened(path, arrays=False)
    return header, _header_vocab(header, path)


def _header_vocab(header, path):
    from .vocab import Vocabulary
    vocab = None
    if header.get("vocab") is not None:
        try:
            vocab = Vocabulary(header["vocab"]["words"], unk=header["vocab"]["unk"])
        except NplmError as error:
            raise InputError(f"vocabulary: {error.render()}", path=path) from None
        _check_words(vocab, path)
    return vocab


def opened(path, mapped=None, arrays=True):
    """(the checked header, the file's bytes when `arrays`: a read-only memory map when `mapped`
    (None: when the file has MAPPED_FROM bytes or more), else a bytearray read); refused as
    `load` refuses a file."""
    try:
        with open(path, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):  # a pipe or a device: no size, no memory map
                raise InputError("not a regular file: an nplm model is memory-mapped, so give its file", path=path)
            size = f.seek(0, 2)
            if size == 0:
                raise InputError("empty file, not an nplm model", path=path)
            f.seek(0)
            preamble = f.read(_PREAMBLE.size)
            if not preamble.startswith(MAGIC[:len(preamble)]) or len(preamble) < len(MAGIC):
                raise InputError("not an nplm model file (bad magic)", path=path)
            if len(preamble) < _PREAMBLE.size:
                raise InputError("truncated nplm model file", path=path)
            _, version, header_len, header_crc = _PREAMBLE.unpack(preamble)
            if version > FORMAT_VERSION:
                raise InputError(f"model format version {version} is newer than this "
                                 f"nplmtk supports ({FORMAT_VERSION}); upgrade nplmtk", path=path)
            body = f.read(header_len)
            if len(body) < header_len:
                raise InputError("truncated nplm model file (header)", path=path)
            if zlib.crc32(body) != header_crc:
                raise InputError("corrupt nplm model file (header checksum mismatch)", path=path)
            header = _checked_header(body, size, path)
            if size < header["file_size"]:
                raise InputError(f"truncated nplm model file ({size} of {header['file_size']} bytes)", path=path)
            buffer = None
            if arrays and (mapped or mapped is None and size >= MAPPED_FROM):
                buffer = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            elif arrays:
                buffer = bytearray(header["file_size"])
                f.seek(0)
                if f.readinto(buffer) < len(buffer):
                    raise InputError("truncated nplm model file (it shrank as it was read)", path=path)
            if buffer is not None and len(buffer) < header["file_size"]:
                raise InputError("truncated nplm model file (it shrank as it was read)", path=path)
    except OSError as err:
        raise os_error(path, err) from None
    return header, buffer


# What splits a line into words (nplmtk.text.split_words, the byte kernels): no word holds it
WORD_SEPARATORS = " \t\n\r\x0b\x0c"


def _check_words(vocab, path):
    """Refuse a vocabulary with a word that no text can hold: empty, or with white space
    inside (one scan of the words joined, the word found only when there is one)."""
    joined = "".join(vocab.words)
    if "" in vocab.index or any(separator in joined for separator in WORD_SEPARATORS):
        number, word = next((i, w) for i, w in enumerate(vocab.words)
                            if not w or any(separator in w for separator in WORD_SEPARATORS))
        raise InputError(f"vocabulary: word {number} ({word!r}) " + ("is empty" if not word else
                         "holds white space, so no text can hold it as one word"), path=path)
