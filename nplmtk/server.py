"""SRILM's LM server (`ngram -server-port`, LM::probServer in SRILM's lm/src/LM.cc): any
model answers SRILM's remote-LM protocol, so that SRILM's clients (`ngram -use-server
P@host`, `lattice-tool -use-server P@host`, lm/src/LMClient.cc) score with it.

The protocol is text, a request per line (words separated by blanks), the replies to the
lines of one message sent together. A client's contexts come oldest word first, as it
writes them (`W <s> the cat` asks for p(cat | <s> the)); SRILM reverses them into its own
order, our states read them in this one:

    (on connecting)          probserver ready
    _R_E_M_O_T_E_L_M_V=2     OK                 protocol version 2 from now on; before it,
                                                each line is "w1 .. wk w", answered by the
                                                bare log10 p (version 1)
    W w1 .. wk w             OK log10 p(w | w1 .. wk)
    C1 w1 .. wk              OK id length       the context's id and how many of its last
    C2 w1 .. wk w            OK id length       words the model reads (to predict w)
    B w1 .. wk length        OK log10 bow       the back-off weight of cutting the context
                                                to its last `length` words
    anything else            ERROR what is wrong

A blank line gets no reply (as SRILM's). Numbers are printed as SRILM prints a LogP
(`%.7g`), log 0 as `-inf`. A word outside the model's vocabulary reads as its unknown
word. A request line longer than MAX_REQUEST_BYTES is refused (an ERROR reply) and the
connection closed: nothing is buffered without bound.

The model answers through its word-at-a-time API (nplmtk/incremental.py): the state of a
context is begin_state() stepped through the words after a leading <s>, or null_state()
stepped through all of them, each context's state kept (a bounded cache) so that the next
request that extends it costs one step. Ids and back-off weights are the model's
`context_id` and `context_bow` (SRILM's contextID and contextBOW): a back-off n-gram's
answer its context trie's, any other model's SRILM's generic LM's (id 0, the whole
context; weight 0). One lock serves the model to one request at a time: the clients'
connections are threads, the model's kernels are not asked to be re-entrant.

A network reads only the context the client sends: `ngram -use-server -order 3` gives it
two words (a recurrent network, whose null state is its start, reads them as if they began
a sentence), `-order 0` the sentence so far. One deliberate difference from SRILM 1.7.3's
server: its `C2 h w` takes w from past the end of its word ids and so answers `C1 h w`
(lattice-tool's expansion then keeps contexts apart that the model cannot tell apart);
this one answers C2 as LMClient means it, Ngram::contextID(w, h).
"""
import os
import selectors
import socket
import threading

from .errors import NplmError

VERSION2 = "_R_E_M_O_T_E_L_M_V=2"  # RemoteLM.h's words
WORDPROB, CONTEXTID1, CONTEXTID2, CONTEXTBOW = "W", "C1", "C2", "B"
OK, ERROR = "OK", "ERROR"
GREETING = b"probserver ready\n"
LOGP_PRECISION = 7  # SRILM's LogP_Precision: numeric_limits<float>::digits10 + 1
MAX_REQUEST_BYTES = 64 << 10  # a line longer than this is refused (SRILM's client writes at most 5,000)
STATE_CACHE = 1 << 16  # contexts whose states are kept at most,
STATE_CACHE_BYTES = 256 << 20  # and within about this much memory (a recurrent network's states are its vectors)
RECEIVE_BYTES = 64 << 10


def logp_text(value):
    """A log probability as SRILM's server prints it (`%.*g`, LogP_Precision)."""
    return "%.*g" % (LOGP_PRECISION, value)


def state_bytes(state):
    """About how much memory a model's state takes (its arrays, 64 bytes for anything else)."""
    vectors = getattr(state, "vectors", None)  # a RecurrentState
    if vectors is not None:
        return 64 + vectors.nbytes
    if isinstance(state, tuple):
        return 64 + sum(state_bytes(part) for part in state)
    return getattr(state, "nbytes", 64)


class Session:
    """One client's connection: the protocol it speaks and what it was served."""
    __slots__ = ("version", "served")

    def __init__(self):
        self.version, self.served = 1, 0


class RemoteLM:
    """The protocol's answers of one model, line by line, apart from any socket."""

    def __init__(self, model, cache_size=None):
        self.model, self.vocab = model, model.vocab
        self._begin, self._null = model.begin_state(), model.null_state()
        if cache_size is None:
            cache_size = max(256, min(STATE_CACHE, STATE_CACHE_BYTES // state_bytes(self._begin)))
        self.cache_size = cache_size
        self._states = {}  # context ids -> state; emptied when full (cheaper than an LRU per request)
        self._lock = threading.Lock()

    def answer(self, session, line):
        """The reply (bytes, with its newline) to one request line (bytes, without it), or
        None for a blank line."""
        words = [w.decode("utf-8", "surrogateescape") for w in line.split()]
        if not words:
            return None
        try:
            text = self._answer(session, words)
        except NplmError as err:
            text = " ".join(f"{ERROR} {err}".split())  # on one line
        except Exception as err:  # noqa: BLE001 (a model's failure is this request's, not the server's)
            text = " ".join(f"{ERROR} {type(err).__name__}: {err}".split())
        return (text + "\n").encode("utf-8", "surrogateescape")

    def _answer(self, session, words):
        command = words[0]
        if command == WORDPROB and session.version == 2:
            if len(words) < 2:
                raise NplmError("W takes a context and a word: W w1 .. wk w")
            session.served += 1
            return f"{OK} {logp_text(self.word_prob(words[1:-1], words[-1]))}"
        if command == VERSION2:
            session.version = 2
            return OK
        if session.version == 1:  # every line is "w1 .. wk w"
            session.served += 1
            return logp_text(self.word_prob(words[:-1], words[-1]))
        rest = words[1:]
        if command == CONTEXTID1:
            return "%s %d %d" % (OK, *self.context_id(rest, None))
        if command == CONTEXTID2:
            if not rest:
                raise NplmError("C2 takes a context and a word: C2 w1 .. wk w")
            return "%s %d %d" % (OK, *self.context_id(rest[:-1], rest[-1]))
        if command == CONTEXTBOW:
            if not rest or not rest[-1].isascii() or not rest[-1].isdigit() or int(rest[-1]) >= 2 ** 32:
                raise NplmError("B takes a context and a length: B w1 .. wk length")
            return f"{OK} {logp_text(self.context_bow(rest[:-1], int(rest[-1])))}"
        return f"{ERROR} command unknown"  # SRILM's words

    # -- the model's answers ---------------------------------------------------------------
    def ids(self, words):
        index, unk = self.vocab.index, self.vocab.unk
        return tuple([index.get(w, unk) for w in words])

    def word_prob(self, context, word):
        """log10 p(word | context), both words (strings)."""
        ids = self.ids(context)
        word = self.vocab.index.get(word, self.vocab.unk)
        with self._lock:
            logp, after = self.model.score_word(self._state(ids), word)
            self._keep(ids + (word,), after)
        return logp

    def context_id(self, context, word):
        with self._lock:
            return self.model.context_id(self.ids(context), None if word is None else self.vocab.id(word))

    def context_bow(self, context, length):
        with self._lock:
            return self.model.context_bow(self.ids(context), length)

    def _state(self, ids):
        """The model's state after the context `ids`: from the longest prefix of it whose state
        is kept (looking at a few), stepped through the rest."""
        state = self._states.get(ids)
        if state is not None:
            return state
        start = 1 if ids[:1] == (self.vocab.bos,) else 0
        state, known = self._begin if start else self._null, start
        for end in range(len(ids) - 1, max(start, len(ids) - 8), -1):
            kept = self._states.get(ids[:end])
            if kept is not None:
                state, known = kept, end
                break
        for end in range(known + 1, len(ids) + 1):
            state = self.model.score_word(state, ids[end - 1])[1]
            self._keep(ids[:end], state)
        return state

    def _keep(self, ids, state):
        if len(self._states) >= self.cache_size:
            self._states.clear()
        self._states[ids] = state


class ProbServer:
    """A model served on `host`:`port` (port 0: one the system picks, then `address`) to at
    most `max_clients` clients at once (None: any number, SRILM's default); a client past
    the limit waits in the listening queue until one leaves, as SRILM's do. `log(line)`,
    when given, hears each client come and go, as SRILM's server writes on stderr.

        server = ProbServer(model, port)
        server.serve_forever()      # until server.stop(), from a signal handler or a thread
    """

    def __init__(self, model, port, host="127.0.0.1", max_clients=None, log=None):
        if max_clients is not None and max_clients < 1:
            raise NplmError(f"{{max_clients}} {max_clients}: at least one client must be served")
        self.remote = RemoteLM(model)
        self.max_clients, self.log = max_clients, log
        try:
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
            self._listener = socket.socket(family, socket.SOCK_STREAM)
        except OSError as err:
            raise NplmError(f"cannot open a socket: {err.strerror or err}") from None
        try:
            self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self._listener.bind((host, port))
            self._listener.listen(max_clients * 10 if max_clients else 1000)  # SRILM's backlog
        except (OSError, OverflowError) as err:
            self._listener.close()
            raise NplmError(f"cannot listen on {host}:{port}: {getattr(err, 'strerror', None) or err}") from None
        self.address = self._listener.getsockname()[:2]
        self._wake_read, self._wake_write = os.pipe()
        os.set_blocking(self._wake_read, False)
        os.set_blocking(self._wake_write, False)
        self._stopping = False
        self._clients = {}  # thread -> its socket
        self._clients_lock = threading.Lock()

    @property
    def port(self):
        return self.address[1]

    def stop(self):
        """Ask serve_forever to end (safe from a signal handler and from any thread)."""
        self._stopping = True
        self._wake()

    def _wake(self):
        try:
            os.write(self._wake_write, b"x")
        except (BlockingIOError, OSError):  # full (it is awake anyway) or closed (it ended)
            pass

    def serve_forever(self):
        """Accept clients, each served by a thread of its own, until stop(); then close every
        connection and return."""
        selector = selectors.DefaultSelector()
        selector.register(self._wake_read, selectors.EVENT_READ)
        listening = False
        try:
            while not self._stopping:
                with self._clients_lock:
                    room = self.max_clients is None or len(self._clients) < self.max_clients
                if room != listening:
                    (selector.register if room else selector.unregister)(self._listener, *(
                        [selectors.EVENT_READ] if room else []))
                    listening = room
                for key, _ in selector.select():
                    if key.fileobj is self._wake_read:
                        self._drain()
                    elif not self._stopping:
                        self._accept()
        finally:
            selector.close()
            self._close()

    def _drain(self):
        try:
            while os.read(self._wake_read, 4096):
                pass
        except BlockingIOError:
            pass

    def _accept(self):
        try:
            connection, peer = self._listener.accept()
        except (BlockingIOError, InterruptedError, ConnectionAbortedError):
            return
        except OSError as err:  # out of descriptors: wait for a client to leave
            if self.log:
                self.log(f"could not accept a connection: {err.strerror or err}")
            return
        connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        thread = threading.Thread(target=self._serve_client, args=(connection, peer), daemon=True,
                                  name=f"client {peer[1]}@{peer[0]}")
        with self._clients_lock:
            self._clients[thread] = connection
        thread.start()

    def _serve_client(self, connection, peer):
        who = f"client {peer[1]}@{peer[0]}"
        session = Session()
        if self.log:
            self.log(f"{who}: connection accepted")
        try:
            connection.sendall(GREETING)
            self._converse(connection, session)
        except OSError:  # the client went away: its thread ends, the server goes on
            pass
        finally:
            with self._clients_lock:
                self._clients.pop(threading.current_thread(), None)
            connection.close()
            if self.log:
                self.log(f"{who}: {session.served} probabilities served")
            self._wake()  # room for the next client

    def _converse(self, connection, session):
        pending, scanned = bytearray(), 0  # received, not yet answered; searched for newlines up to `scanned`
        while not self._stopping:
            data = connection.recv(RECEIVE_BYTES)
            if not data:
                if pending.strip():  # a last request without its newline
                    connection.sendall(self.remote.answer(session, bytes(pending)) or b"")
                return
            pending += data
            replies, start, end = [], 0, -1
            while True:
                end = pending.find(b"\n", scanned)
                if end < 0 or end - start > MAX_REQUEST_BYTES:
                    break
                reply = self.remote.answer(session, bytes(pending[start:end]))
                if reply is not None:
                    replies.append(reply)
                start = scanned = end + 1
            too_long = end >= 0 or len(pending) - start > MAX_REQUEST_BYTES
            del pending[:start]
            scanned = len(pending)
            if too_long:
                replies.append(f"{ERROR} request longer than {MAX_REQUEST_BYTES} bytes\n".encode())
            if replies:
                connection.sendall(b"".join(replies))
            if too_long:
                return

    def _close(self):
        self._listener.close()
        with self._clients_lock:
            clients = list(self._clients.items())
        for _, connection in clients:
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for thread, _ in clients:
            thread.join(timeout=1.0)
        if any(thread.is_alive() for thread, _ in clients):
            return  # a thread still in the model writes to the pipe when it ends: keep it open
        for fd in (self._wake_read, self._wake_write):
            os.close(fd)
