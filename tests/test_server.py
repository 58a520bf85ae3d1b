"""nplm ppl -server-port: SRILM's remote-LM protocol (LM::probServer), spoken by a Python
client here and, when SRILM is built, by SRILM's own `ngram -use-server`."""
import gzip
import os
import shutil
import signal
import socket
import subprocess
import threading
import time

import pytest

from conftest import NPLM, assert_one_line_error, run_main, run_nplm
from nplmtk.models import load
from nplmtk.server import MAX_REQUEST_BYTES, ProbServer, logp_text

SRILM_BIN = os.environ.get("SRILM_BIN", "/work/srilm/bin/i686-m64")
SRILM_NGRAM = os.path.join(SRILM_BIN, "ngram")
needs_srilm = pytest.mark.skipif(not shutil.which("ngram") and not os.path.exists(SRILM_NGRAM),
                                 reason="SRILM's ngram is not built here (SRILM_BIN)")
VERSION2 = "_R_E_M_O_T_E_L_M_V=2"


@pytest.fixture(scope="module")
def kn3(toy_texts, tmp_path_factory):
    """A KN3 model of the toy train.txt: (its ARPA file, the model, the sentences of valid.txt)."""
    folder, _ = toy_texts
    path = tmp_path_factory.mktemp("server") / "kn3.arpa"
    status, _, err = run_nplm("ngram-count", "-text", folder / "train.txt", "-order", 3, "-kndiscount",
                              "-interpolate", "-lm", path)
    assert status == 0, err
    sentences = [line.split() for line in (folder / "valid.txt").read_text().splitlines()]
    return path, load(str(path)), sentences


class Served:
    """A ProbServer on a free port, in a thread of this process."""

    def __init__(self, model, **settings):
        self.server = ProbServer(model, 0, **settings)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self):
        self.server.stop()
        self.thread.join(timeout=5)
        assert not self.thread.is_alive()


@pytest.fixture
def served(kn3):
    running = []

    def start(model=None, **settings):
        running.append(Served(kn3[1] if model is None else model, **settings))
        return running[-1].server

    yield start
    for server in running:
        server.stop()


class Client:
    """A client of the protocol: `ask(*lines)` sends them in one message and returns the
    replies (one per non-blank line), without their newlines."""

    def __init__(self, port, version2=True, timeout=5.0):
        self.socket = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.received = b""
        assert self.lines(1) == ["probserver ready"]
        if version2:
            assert self.ask(VERSION2) == ["OK"]

    def lines(self, count):
        while self.received.count(b"\n") < count:
            data = self.socket.recv(65536)
            if not data:
                raise ConnectionError(f"closed after {self.received!r}")
            self.received += data
        *lines, self.received = self.received.split(b"\n", count)
        return [line.decode() for line in lines]

    def ask(self, *lines):
        self.socket.sendall("".join(line + "\n" for line in lines).encode())
        return self.lines(sum(1 for line in lines if line.strip()))

    def close(self):
        self.socket.close()


def expected_reply(model, context, word):
    """What the protocol must answer to `W context word`: the model's own score_word after
    the context (begin_state after a leading <s>, else null_state)."""
    state = model.begin_state() if context[:1] == ["<s>"] else model.null_state()
    for w in context[1:] if context[:1] == ["<s>"] else context:
        state = model.score_word(state, w)[1]
    return "OK " + logp_text(model.score_word(state, word)[0])


def requests(sentences, cut=None):
    """(context, word) of every token of `sentences` as SRILM's ngram -ppl asks them: after
    <s> and the words before, the context cut to its last `cut` words."""
    for words in sentences:
        tokens = ["<s>"] + words + ["</s>"]
        for i in range(1, len(tokens)):
            yield tokens[max(0, i - cut) if cut else 0:i], tokens[i]


def test_word_probabilities_are_the_models(kn3, served):
    _, model, sentences = kn3
    server = served()
    client = Client(server.port)
    asked = list(requests(sentences[:10], cut=2)) + list(requests(sentences[10:14])) + [(["zzz", "the"], "qqq")]
    replies = client.ask(*[" ".join(["W"] + context + [word]) for context, word in asked])
    assert replies == [expected_reply(model, context, word) for context, word in asked]
    # the cut context is the whole one for a trigram model
    assert client.ask("W <s> " + " ".join(sentences[0][:3])) == client.ask("W " + " ".join(sentences[0][:3]))
    assert client.ask("W <s> qqq") == ["OK -inf"]  # a closed vocabulary: the unknown word has probability 0
    # protocol 1 (before the handshake): a bare number
    old = Client(server.port, version2=False)
    assert old.ask("<s> " + sentences[0][0]) == [expected_reply(model, ["<s>"], sentences[0][0])[3:]]


def test_network_served(toy_lstm, kn3, served):
    """A recurrent network scores the context the client sends; ids and weights are SRILM's
    generic LM's (every context its own, read whole; weight 0)."""
    model = load(str(toy_lstm))
    sentences = kn3[2]
    server = served(model)
    client = Client(server.port)
    asked = list(requests(sentences[:2])) + list(requests(sentences[2:4], cut=2))
    replies = client.ask(*[" ".join(["W"] + context + [word]) for context, word in asked])
    for reply, (context, word) in zip(replies, asked):
        assert abs(float(reply[3:]) - float(expected_reply(model, context, word)[3:])) < 2e-6
    assert client.ask("C1 <s> a b", "C2 <s> a b c", "B a b 1") == ["OK 0 3", "OK 0 3", "OK 0"]


def test_context_ids_and_back_off_weights(kn3, served):
    """C1, C2 and B as SRILM's Ngram answers them: the back-off identity a lattice expander
    relies on, p(w | h) = p(w | h cut to the length C2 gives) + the weight B gives, and the
    same id for contexts the model cannot tell apart."""
    _, model, sentences = kn3
    client = Client(served().port)
    asked = list(requests(sentences[:15], cut=2)) + [(["qqq", "zzz"], sentences[0][0])]
    for context, word in asked:
        (full,) = client.ask(" ".join(["W"] + context + [word]))
        (used,) = client.ask(" ".join(["C2"] + context + [word]))
        _, cid, length = used.split()
        length = int(length)
        assert 0 <= length <= len(context)
        (cut,) = client.ask(" ".join(["W"] + context[len(context) - length:] + [word]))
        (bow,) = client.ask(" ".join(["B"] + context + [str(length)]))
        assert bow.startswith("OK ") and cut.startswith("OK ")
        if full != "OK -inf":
            assert abs(float(full[3:]) - float(cut[3:]) - float(bow[3:])) < 1e-5, (context, word)
        # the id names the context the model reads: the cut context has the same
        assert client.ask(" ".join(["C2"] + context[len(context) - length:] + [word])) == [used]
    c1 = client.ask("C1", "C1 " + " ".join(sentences[0][:2]), "C1 qqq zzz", "C1 <unk> zzz")
    assert c1[0].endswith(" 0") and c1[2] == c1[3] == c1[0]  # nothing known: the empty context
    assert int(c1[1].split()[2]) in (1, 2)
    assert client.ask("B 0") == ["OK 0"]


def test_several_clients_at_once(kn3, served):
    _, model, sentences = kn3
    server = served()
    asked = list(requests(sentences[:8], cut=2))
    expected = [expected_reply(model, context, word) for context, word in asked]
    failures = []

    def converse(k):
        try:
            client = Client(server.port)
            for i in range(k, len(asked), 3):
                context, word = asked[i]
                if client.ask(" ".join(["W"] + context + [word])) != [expected[i]]:
                    failures.append(i)
            client.close()
        except Exception as err:  # noqa: BLE001
            failures.append(err)

    threads = [threading.Thread(target=converse, args=(k % 3,)) for k in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert not failures


def test_max_clients_bounds_clients_at_once(kn3, served):
    """Past -server-maxclients a client waits (in the listening queue) until one leaves."""
    server = served(max_clients=2)
    first, second = Client(server.port), Client(server.port)
    waiting = socket.create_connection(("127.0.0.1", server.port), timeout=0.3)
    with pytest.raises(socket.timeout):
        waiting.recv(100)
    first.close()
    waiting.settimeout(5)
    assert waiting.recv(100) == b"probserver ready\n"
    assert second.ask("W <s> the") == [expected_reply(kn3[1], ["<s>"], "the")]
    waiting.close()


def test_bad_requests_get_the_error_reply(kn3, served):
    _, model, _ = kn3
    server = served()
    client = Client(server.port)
    good = expected_reply(model, ["<s>"], "the")
    replies = client.ask("FOO bar", "W", "C2", "B a b", "B a -1", "", "  ", "W <s> the")
    assert replies[0] == "ERROR command unknown"  # SRILM's words
    assert all(reply.startswith("ERROR ") for reply in replies[1:5]), replies
    assert replies[5] == good  # blank lines get no reply, as SRILM's server gives none
    client.socket.sendall(b"W <s> \xff\xfe\n")  # bytes that are no word of the model: its unknown word
    assert client.lines(1) == ["OK -inf"]
    # a request longer than the bound: the error reply, then the connection is closed
    for ending in ("", "\n"):
        long = Client(server.port)
        long.socket.sendall(b"W " + b"a " * (MAX_REQUEST_BYTES // 2 + 100) + ending.encode())
        assert long.lines(1)[0].startswith("ERROR request longer than")
        assert long.socket.recv(100) == b""
    assert client.ask("W <s> the") == [good]
    assert Client(server.port).ask("W <s> the") == [good]


def test_a_client_that_vanishes_mid_request_costs_nothing(kn3, served):
    server = served(max_clients=1)
    for _ in range(3):  # with room for one client, each must have been let go
        client = Client(server.port)
        client.socket.sendall(b"W <s> th")
        client.socket.close()
    client = Client(server.port, timeout=3)
    assert client.ask("W <s> the") == [expected_reply(kn3[1], ["<s>"], "the")]


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_server(*args):
    """`nplm ppl ARGS` as a subprocess, once it says where it listens: (process, its line)."""
    process = subprocess.Popen([NPLM, "ppl", *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    line = process.stderr.readline()
    assert "serving" in line, line + process.stderr.read()
    return process, line


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_the_server(kn3, stop):
    port = free_port()
    process, line = start_server("-lm", kn3[0], "-server-port", port)
    try:
        assert f"127.0.0.1:{port}" in line
        client = Client(port)
        assert client.ask("W <s> the") == [expected_reply(kn3[1], ["<s>"], "the")]
        sent = time.monotonic()
        process.send_signal(stop)
        status = process.wait(timeout=5)
        assert time.monotonic() - sent < 1.0
        assert status == 0
        assert process.stderr.read() == ""  # no traceback
    finally:
        process.kill()
        process.wait()


@pytest.mark.parametrize("args, fragment", [
    (("-server-port", 0), "-server-port 0"),
    (("-server-port", 70000), "-server-port 70000"),
    (("-server-port", 2525, "-server-maxclients", 0), "-server-maxclients 0"),
    (("-server-maxclients", 2, "-text", "x.txt"), "go with -server-port"),
])
def test_bad_server_options(kn3, capsys, args, fragment):
    assert_one_line_error(*run_main(capsys, "ppl", "-lm", kn3[0], *args)[::2], fragment)


def test_a_port_in_use_is_one_line(kn3, capsys):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        status, _, err = run_main(capsys, "ppl", "-lm", kn3[0], "-server-port", taken.getsockname()[1])
    assert_one_line_error(status, err, "cannot listen on 127.0.0.1:")


# -- SRILM's own client -----------------------------------------------------------------------
def srilm(program, *args):
    path = os.path.join(SRILM_BIN, program)
    proc = subprocess.run([path if os.path.exists(path) else program, *map(str, args)], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.fixture(scope="module")
def srilm_server(kn3):
    """SRILM's own `ngram -server-port` holding the same KN3: its port."""
    port = free_port()
    process = subprocess.Popen([SRILM_NGRAM if os.path.exists(SRILM_NGRAM) else "ngram", "-lm", str(kn3[0]),
                                "-order", "3", "-server-port", str(port)], stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            assert time.monotonic() < deadline and process.poll() is None
            time.sleep(0.05)
    yield port
    process.terminate()
    process.wait()


@needs_srilm
def test_srilm_client_reports_as_srilm(kn3, served, srilm_server, tmp_path):
    """`ngram -use-server` against our server prints what `ngram -lm` prints on a text in
    the vocabulary, and, on a text with unknown words (which SRILM's client counts as zero
    probabilities, not OOVs), what it prints against SRILM's own server, at -debug 2 too."""
    path, _, sentences = kn3
    port = served().port
    known = tmp_path / "known.txt"
    known.write_text("\n".join(" ".join(words) for words in sentences) + "\n")
    unknown = tmp_path / "unknown.txt"
    unknown.write_text("\n".join(" ".join(words[:3] + ["qqq"] + words[3:]) for words in sentences[:10]) + "\n")
    ours = srilm("ngram", "-use-server", f"{port}@127.0.0.1", "-order", 3, "-ppl", known)
    assert ours == srilm("ngram", "-lm", path, "-order", 3, "-ppl", known)
    for text in (known, unknown):
        for debug in (0, 2):
            assert srilm("ngram", "-use-server", f"{port}@127.0.0.1", "-order", 3, "-ppl", text, "-debug", debug) \
                == srilm("ngram", "-use-server", f"{srilm_server}@127.0.0.1", "-order", 3, "-ppl", text,
                         "-debug", debug)


@needs_srilm
def test_context_replies_as_srilms_server(kn3, served, srilm_server):
    """C1 and B: the lengths and weights of SRILM's own server (its ids are addresses: only
    which replies share one is compared). Not C2: SRILM's server answers `C2 h w` as `C1 h w`
    (LM.cc takes w from past the end of its word ids), which lattice-tool's expansion then
    follows into contexts the model cannot tell apart; ours answers what LMClient asks."""
    sentences = kn3[2]
    ours, theirs = Client(served().port), Client(srilm_server)
    lines = []
    for context, word in list(requests(sentences[:6], cut=2)) + [(["qqq", "zzz"], "the")]:
        lines += [" ".join(["C1"] + context), " ".join(["C1"] + context + [word])]
        lines += [" ".join(["B"] + context + [str(length)]) for length in range(len(context) + 1)]
        lines += [" ".join(["W"] + context + [word])]
    mine, srilms = ours.ask(*lines), theirs.ask(*lines)
    assert [r.split()[2:] if r.startswith("OK ") and len(r.split()) == 3 else r for r in mine] == \
        [r.split()[2:] if r.startswith("OK ") and len(r.split()) == 3 else r for r in srilms]
    ids = [r.split()[1] for r in mine if len(r.split()) == 3]
    their_ids = [r.split()[1] for r in srilms if len(r.split()) == 3]
    assert [ids.index(i) for i in ids] == [their_ids.index(i) for i in their_ids]


LATTICES = os.path.join(os.path.dirname(__file__), "data", "srilm", "lattices")


@needs_srilm
def test_lattice_tool_expands_with_our_server_as_with_the_model(served, tmp_path):
    """`lattice-tool -use-server` (C2 and B requests) against our server holding KN3 expands
    SRILM's lattices into the same nodes and links as `lattice-tool -lm` with the model,
    each LM score within the 7 digits the protocol carries, and finds the same 1-best."""
    arpa = os.path.join(os.path.dirname(__file__), "data", "srilm", "kn3-unk.arpa.gz")
    model = load(arpa)
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(model.vocab.words) + "\n")
    port = served(model).port
    common = ["-read-htk", "-in-lattice-list", "list", "-vocab", vocab, "-unk", "-order", 3]
    results = []
    for name, source in (("lm", ["-lm", arpa]), ("server", ["-use-server", f"{port}@127.0.0.1"])):
        out = tmp_path / name
        best = subprocess.run([os.path.join(SRILM_BIN, "lattice-tool"), *map(str, common + source),
                               "-viterbi-decode", "-write-htk", "-out-lattice-dir", out], cwd=LATTICES,
                              capture_output=True, text=True, timeout=60)
        assert best.returncode == 0, best.stderr
        results.append((best.stdout, {name: gzip.open(out / name, "rt").read().splitlines()
                                      for name in sorted(os.listdir(out))}))
    (best_lm, lattices_lm), (best_server, lattices_server) = results
    assert best_server == best_lm and len(lattices_lm) == 12
    for name, lines in lattices_lm.items():
        served_lines = lattices_server[name]
        assert [line.split("\tl=")[0] for line in served_lines] == [line.split("\tl=")[0] for line in lines]
        for ours_line, line in zip(served_lines, lines):
            if "\tl=" in line:
                assert abs(float(ours_line.split("\tl=")[1]) - float(line.split("\tl=")[1])) <= 2e-6


@needs_srilm
def test_srilm_client_scores_a_network_as_nplm_ppl(toy_lstm, toy_texts, served):
    """An LSTM served to `ngram -use-server -order 0` (contexts back to <s>) gives the report
    `nplm ppl` gives with it, but for the last digits (the protocol carries each log
    probability to 7 digits); with -order 3 the network sees two words of context."""
    model = load(str(toy_lstm))
    text = toy_texts[0] / "valid.txt"
    port = served(model).port
    status, report, err = run_nplm("ppl", "-lm", toy_lstm, "-text", text)
    assert status == 0, err

    def numbers(report):
        counts, totals = report.splitlines()
        return counts, [float(totals.split(f"{name}= ")[1].split()[0]) for name in ("logprob", "ppl", "ppl1")]

    counts, totals = numbers(report)
    served_counts, served_totals = numbers(srilm("ngram", "-use-server", f"{port}@127.0.0.1", "-order", 0,
                                                 "-ppl", text))
    assert served_counts == counts
    assert served_totals == pytest.approx(totals, rel=1e-6)
    _, cut_totals = numbers(srilm("ngram", "-use-server", f"{port}@127.0.0.1", "-order", 3, "-ppl", text))
    assert cut_totals != pytest.approx(totals, rel=1e-6)
