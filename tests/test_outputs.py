"""Issue 33, items 1 and 2: every output as tee and SRILM write it. A regular file (or a
symlink's target) is replaced atomically; a FIFO, a device and '-' are written in place
as the command writes; a failed write is one line; a closed stdout ends the command at
once, quietly."""
import os
import subprocess
import threading
import time

import pytest

from conftest import NPLM, assert_one_line_error, run_nplm

TEXT = "a b c d\nd c b a\nb a d c\n" * 20


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "t.txt").write_text(TEXT)
    assert run_nplm("ngram-count", "-text", tmp_path / "t.txt", "-order", 2, "-lm", tmp_path / "kn2.arpa")[0] == 0
    return tmp_path


# A writer of each kind: text, gzip, the binary n-gram model, a network's container.
WRITERS = {
    "vocab": ["vocab", "-text", "{t}", "-write-vocab", "{out}"],
    "counts.gz": ["ngram-count", "-text", "{t}", "-order", 2, "-write", "{out}"],
    "arpa": ["ngram-count", "-text", "{t}", "-order", 2, "-lm", "{out}"],
    "binary": ["ppl", "-lm", "{kn2}", "-write-bin-lm", "{out}"],
    "sentences": ["generate", "-lm", "{kn2}", "-n", 5, "-write", "{out}"],
    "network": ["train", "-text", "{t}", "-order", 2, "-m", 2, "-h", 2, "-epochs", 1, "-quiet", "-lm", "{out}"],
}


def write_with(name, folder, out):
    args = [str(a).format(t=folder / "t.txt", kn2=folder / "kn2.arpa", out=out) for a in WRITERS[name]]
    status, stdout, err = run_nplm(*args)
    assert status == 0, err


@pytest.mark.parametrize("name", WRITERS)
def test_a_fifo_is_written_in_place_for_its_reader(folder, name):
    """A FIFO used to be replaced by a regular file: its reader got nothing."""
    suffix = ".gz" if name.endswith(".gz") else ""
    write_with(name, folder, folder / f"regular{suffix}")
    fifo = folder / f"fifo{suffix}"
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    write_with(name, folder, fifo)
    reader.join(timeout=30)
    (folder / f"received{suffix}").write_bytes(received[0])
    assert same_content(folder / f"received{suffix}", folder / f"regular{suffix}", name)
    assert fifo.is_fifo()


def same_content(path, expected, name):
    if name != "network":
        return path.read_bytes() == expected.read_bytes()
    from nplmtk.models import load
    got, want = load(str(path)), load(str(expected))  # their logs differ in seconds and words/s
    return got.params.keys() == want.params.keys() and all((got.params[k] == want.params[k]).all() for k in got.params)


@pytest.mark.parametrize("name", ["arpa", "network"])
def test_a_symlink_is_followed_and_its_target_replaced(folder, name):
    """A symlink to a model used to become a file while its target kept the old model."""
    (folder / "models").mkdir()
    target = folder / "models" / "model"
    target.write_text("old")
    link = folder / "link"
    link.symlink_to(target)
    write_with(name, folder, link)
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_bytes() != b"old" and target.stat().st_size > 100
    assert sorted(os.listdir(folder / "models")) == ["model"]  # no temporary left beside it


def test_a_character_device_is_written_in_place(folder):
    """As root, `-write /dev/null` used to replace the device with a file."""
    device = folder / "null"
    try:
        os.mknod(device, 0o666 | 0o020000, os.makedev(1, 3))  # S_IFCHR: the null device
    except PermissionError:
        pytest.skip("mknod needs root: a character device cannot be made here")
    write_with("arpa", folder, device)
    write_with("network", folder, device)
    assert os.stat(device).st_rdev == os.makedev(1, 3) and not os.path.isfile(device)


@pytest.mark.parametrize("command", [
    ["vocab", "-text", "{t}", "-write-vocab", "/dev/full"],
    ["ngram-count", "-text", "{t}", "-order", 2, "-wbdiscount", "-lm", "/dev/full"],
    ["ppl", "-lm", "{kn2}", "-write-bin-lm", "/dev/full"],
    ["generate", "-lm", "{kn2}", "-n", 5, "-write", "/dev/full"],
    ["vocab", "-text", "{t}", "-write-vocab", "-", ">/dev/full"],
    ["ppl", "-lm", "{kn2}", "-text", "{t}", "-debug", 2, ">/dev/full"],
    ["generate", "-lm", "{kn2}", "-n", 5, ">/dev/full"],
])
def test_a_full_device_is_one_line_and_exit_2(folder, command):
    """Writing to /dev/full used to report success (a file replaced it as root), and
    stdout on a full device a traceback."""
    args = [str(a).format(t=folder / "t.txt", kn2=folder / "kn2.arpa") for a in command]
    to_stdout = args[-1] == ">/dev/full"
    if to_stdout:
        args.pop()
    with open("/dev/full", "w") as full:
        proc = subprocess.run([NPLM, *args], stdout=full, stderr=subprocess.PIPE, text=True, cwd=folder)
    where = "stdout" if to_stdout else "/dev/full"
    assert_one_line_error(proc.returncode, proc.stderr, f"{where}: cannot write (No space left on device)")
    assert os.path.exists("/dev/full") and not os.path.isfile("/dev/full")
    assert sorted(os.listdir(folder)) == ["kn2.arpa", "t.txt"]


def test_a_fifo_whose_reader_leaves_is_one_line(folder):
    fifo = folder / "fifo"
    os.mkfifo(fifo)
    reader = threading.Thread(target=lambda: open(fifo, "rb").close())
    reader.start()
    status, _, err = run_nplm("generate", "-lm", folder / "kn2.arpa", "-n", 100_000, "-write", fifo)
    reader.join()
    assert_one_line_error(status, err, f"{fifo}: cannot write (Broken pipe)")


@pytest.mark.parametrize("command", [
    ["generate", "-lm", "{kn2}", "-n", 100_000_000],
    ["ppl", "-lm", "{kn2}", "-gen", 100_000_000, "-seed", 1],
    ["ppl", "-lm", "{kn2}", "-text", "{big}", "-debug", 2],
])
def test_a_closed_stdout_ends_the_command_at_once_and_quietly(folder, command):
    """`nplm generate -n 100000000 | head -3` used to print nothing for 10 s, growing,
    because every sentence was drawn before any was written."""
    (folder / "big.txt").write_text(TEXT * 200)
    args = [str(a).format(kn2=folder / "kn2.arpa", big=folder / "big.txt") for a in command]
    proc = subprocess.Popen([NPLM, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = proc.stdout.readline()
    proc.stdout.close()  # as `head -1` leaves
    started = time.monotonic()
    status = proc.wait(timeout=20)
    assert first.endswith(b"\n") and time.monotonic() - started < 5  # a line came (an empty sentence can be drawn)
    assert status == 141 and proc.stderr.read() == b""  # 128 + SIGPIPE, as `yes | head`


def test_stdout_is_written_as_the_command_goes(folder):
    """generate writes each sentence as it is drawn: the first arrives long before the
    last would be sampled."""
    proc = subprocess.Popen([NPLM, "generate", "-lm", folder / "kn2.arpa", "-n", "100000000"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        assert len(proc.stdout.read(1 << 16)) == 1 << 16  # more than one pipe buffer, and no end yet
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait()


def test_a_batch_of_outputs_appears_whole_at_its_commit(tmp_path):
    """OutputBatch (lattice-tool's N-best files and lattices): each file written beside its
    target, none in place before the commit, each its whole content after it (gzip as
    open_output compresses it), no temporary file left, an old file replaced."""
    import gzip

    from nplmtk.io import open_output
    from nplmtk.io import OutputBatch
    (tmp_path / "b.gz").write_bytes(b"old")
    with OutputBatch(pending_limit=3) as batch:
        batch.write(str(tmp_path / "a.gz"), b"one\ntwo\n")
        batch.write(str(tmp_path / "b.gz"), b"three\n")
        assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == ["b.gz"]
        assert (tmp_path / "b.gz").read_bytes() == b"old"
    with open_output(str(tmp_path / "c.gz")) as out:
        out.write("one\ntwo\n")
    assert (tmp_path / "a.gz").read_bytes() == (tmp_path / "c.gz").read_bytes()
    assert gzip.decompress((tmp_path / "b.gz").read_bytes()) == b"three\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.gz", "b.gz", "c.gz"]


def test_a_batch_writes_a_fifo_and_stdout_in_place_compressed_once(tmp_path, capfdbinary):
    """OutputBatch's in-place outputs: a .gz FIFO's reader gets the bytes a regular .gz file
    gets (it used to get them compressed twice), '-' is stdout, not a file named '-'."""
    from nplmtk.io import OutputBatch
    fifo = tmp_path / "fifo.gz"
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    with OutputBatch() as batch:
        batch.write(str(fifo), b"one\ntwo\n")
        reader.join(timeout=30)
        batch.write(str(tmp_path / "regular.gz"), b"one\ntwo\n")
        batch.write("-", b"three\n")
    assert received == [(tmp_path / "regular.gz").read_bytes()]
    assert capfdbinary.readouterr().out == b"three\n"
    assert fifo.is_fifo() and not (tmp_path / "-").exists()


def test_full_batches_are_committed_apart_and_their_errors_raised(tmp_path, monkeypatch):
    """A full batch is synced and renamed by a thread while the next is written: every file
    in place after the block, no temporary file left; a failed sync of a batch committed
    apart is one NplmError naming its first file, raised by the block's end, and its
    temporary files are gone."""
    from nplmtk.errors import NplmError
    from nplmtk.io import writing
    with writing.OutputBatch(pending_limit=2) as batch:
        for k in range(5):
            batch.write(str(tmp_path / f"f{k}"), b"%d\n" % k)
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"f{k}" for k in range(5)]
    assert (tmp_path / "f3").read_bytes() == b"3\n"

    def no_disk(names):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(writing, "_sync_files", no_disk)
    out = tmp_path / "full"
    out.mkdir()
    with pytest.raises(NplmError, match="No space left") as err:
        with writing.OutputBatch(pending_limit=2) as batch:
            batch.write(str(out / "a"), b"a\n")
            batch.write(str(out / "b"), b"b\n")
    assert str(out / "a") in str(err.value) and list(out.iterdir()) == []
