import json
import mmap
import re
import os
import struct
import zlib

import numpy as np
import pytest

from nplmtk import container
from nplmtk.errors import InputError, NplmError
from nplmtk.io import open_output
from nplmtk.vocab import Vocabulary


@pytest.fixture
def arrays():
    rng = np.random.default_rng(1)
    return {"C": rng.standard_normal((17, 5)).astype(np.float32),
            "b": np.arange(17, dtype=np.float32), "counts": np.arange(6, dtype=np.int64).reshape(2, 3),
            "empty": np.zeros((0, 4), dtype=np.float32), "scalar": np.float64(3.25)}


@pytest.fixture
def saved(tmp_path, arrays):
    path = str(tmp_path / "m.nplm")
    container.save(path, "test-kind", arrays, meta={"order": 5, "note": "ünïcode"},
                   vocab=Vocabulary(["a", "b"], unk="<UNK>"))
    return path


def test_round_trip_is_exact_aligned_and_read_only(saved, arrays):
    model = container.load(saved)
    assert model.kind == "test-kind" and model.meta == {"order": 5, "note": "ünïcode"}
    assert model.vocab.words == ["<UNK>", "<s>", "</s>", "a", "b"]
    assert set(model.arrays) == set(arrays)
    for name, array in arrays.items():
        loaded = model.arrays[name]
        assert loaded.dtype == np.asarray(array).dtype and loaded.shape == np.shape(array)
        np.testing.assert_array_equal(loaded, array)
        assert not loaded.flags.writeable
    raw = open(saved, "rb").read()
    _, version, length, _ = container._PREAMBLE.unpack(raw[:container._PREAMBLE.size])
    header = json.loads(raw[container._PREAMBLE.size:container._PREAMBLE.size + length])
    assert all(entry["offset"] % 64 == 0 for entry in header["arrays"])
    assert os.path.getsize(saved) == header["file_size"]


def memory_mapped(array):
    """Whether `array` is a view of a memory map."""
    while isinstance(array, np.ndarray):
        array = array.base
    return isinstance(array.obj if isinstance(array, memoryview) else array, mmap.mmap)


def test_a_small_model_is_read_and_a_large_one_mapped(saved, arrays, monkeypatch):
    """A map of a file that another program then truncates in place faults (SIGBUS) when touched:
    a small file, which costs little memory, is read instead."""
    model = container.load(saved)
    assert not any(memory_mapped(array) for array in model.arrays.values())
    monkeypatch.setattr(container, "MAPPED_FROM", os.path.getsize(saved))
    assert all(memory_mapped(array) for array in container.load(saved).arrays.values())
    assert not any(memory_mapped(array) for array in container.load(saved, mapped=False).arrays.values())
    os.truncate(saved, 0)  # in place, as `: > m.nplm` or cp would
    for name, array in arrays.items():
        np.testing.assert_array_equal(model.arrays[name], array)


def test_xxh64_gives_the_reference_values_of_its_specification():
    from nplmtk._ext.checksum_kernels import xxh64
    for data, expected in [(b"", 0xEF46DB3751D8E999), (b"a", 0xD24EC4F1A98C6E5B), (b"abc", 0x44BC2CF5AD770999),
                           (b"Nobody inspects the spammish repetition", 0xFBCEA83C8A378BF1)]:  # 39 bytes: stripes too
        assert xxh64(data) == expected


def with_header(path, change):
    """Rewrite the header of the container at `path` as `change(header)` leaves it (the
    arrays where they were, the header checksum valid)."""
    data = bytearray(open(path, "rb").read())
    magic, version, length, _ = container._PREAMBLE.unpack(data[:container._PREAMBLE.size])
    header = json.loads(data[container._PREAMBLE.size:container._PREAMBLE.size + length])
    change(header)
    body = json.dumps(header, ensure_ascii=False, separators=(",", ":")).encode()
    assert container._PREAMBLE.size + len(body) <= min(entry["offset"] for entry in header["arrays"])
    data[:container._PREAMBLE.size + len(body)] = container._PREAMBLE.pack(magic, version, len(body),
                                                                           zlib.crc32(body)) + body
    open(path, "wb").write(bytes(data))


def drop_xxh64(header):
    for entry in header["arrays"]:
        del entry["xxh64"]


def test_a_file_without_xxh64_is_checked_by_its_crc32(saved, arrays):
    """Files written before XXH64 load, and their damage is found by CRC32; where XXH64 is
    given it is the one checked, a wrong one refused whatever the CRC32."""
    with_header(saved, drop_xxh64)
    assert np.array_equal(container.load(saved).arrays["C"], arrays["C"])
    corrupt(saved, lambda d: d[:-100] + bytes([d[-100] ^ 0xFF]) + d[-99:])
    with pytest.raises(InputError, match="array 'counts' checksum mismatch"):
        container.load(saved)


@pytest.mark.parametrize("xxh64, message", [
    (lambda value: value ^ 1, "array 'b' checksum mismatch"),
    (lambda value: -1, "array 'b': its bytes"),
    (lambda value: 2 ** 64, "array 'b': its bytes"),
    (lambda value: str(value), "array 'b': its bytes"),
])
def test_a_wrong_xxh64_is_refused(saved, xxh64, message):
    def change(header):
        entry = next(e for e in header["arrays"] if e["name"] == "b")
        entry["xxh64"] = xxh64(entry["xxh64"])
    with_header(saved, change)
    with pytest.raises(InputError, match=re.escape(message)):
        container.load(saved)


def corrupt(path, fn):
    data = bytearray(open(path, "rb").read())
    data = fn(data)
    open(path, "wb").write(bytes(data))


@pytest.mark.parametrize("damage, message", [
    (lambda d: d[:0], "empty file"),
    (lambda d: d[:5], "bad magic"),
    (lambda d: d[:12], "truncated"),
    (lambda d: d[:60], "truncated nplm model file (header)"),
    (lambda d: d[:-70], "truncated nplm model file ("),
    (lambda d: b"PK\x03\x04" + d[4:], "bad magic"),
    (lambda d: d[:30] + bytes([d[30] ^ 1]) + d[31:], "header checksum"),
    (lambda d: d[:-100] + bytes([d[-100] ^ 0xFF]) + d[-99:], "checksum mismatch"),
    (lambda d: d[:8] + struct.pack("<I", 99) + d[12:], "format version 99 is newer"),
])
def test_damaged_files_are_refused_with_one_clear_message(saved, damage, message):
    corrupt(saved, damage)
    with pytest.raises(InputError, match=re.escape(message)) as caught:
        container.load(saved)
    assert caught.value.path == saved


def test_a_failed_write_leaves_the_old_file_and_no_temporary(saved, tmp_path):
    before = open(saved, "rb").read()
    with pytest.raises(RuntimeError):
        with open_output(saved, binary=True) as out:
            out.write(b"half a model")
            raise RuntimeError("crash mid-write")
    assert open(saved, "rb").read() == before
    assert sorted(os.listdir(tmp_path)) == ["m.nplm"]
    with pytest.raises(NplmError, match="object arrays"):
        container.save(saved, "other", {"x": np.array([object()], dtype=object)})
    assert open(saved, "rb").read() == before


def test_foreign_and_missing_files(tmp_path):
    text = tmp_path / "model.arpa"
    text.write_text("\\data\\\nngram 1=3\n")
    with pytest.raises(NplmError, match="bad magic"):
        container.load(str(text))
    with pytest.raises(NplmError, match="no such file"):
        container.load(str(tmp_path / "missing.nplm"))
    with pytest.raises(NplmError, match="is a directory"):
        container.load(str(tmp_path))
