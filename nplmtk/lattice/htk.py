"""HTK Standard Lattice Format (SLF; the HTK Book, ch. 20), read as SRILM's
Lattice::readHTK reads it and checked whole: every problem is one InputError naming the
file and the line.

A file is `key=value` fields separated by blanks; a field starting with `#` ends its line.
A line starting `I=` is a node (t= time, W= word, a= r= ds= scores, v= d= s= p= kept), a
line starting `J=` a link (S= E= its nodes, W= its word, a= n= l= r= ds= x1..x9= scores),
any other line header fields (VERSION, UTTERANCE, base=, lmscale=, wdpenalty=, acscale=,
ngscale=, prscale=, duscale=, start=, end=, N=, L=, dir=, ...). `!NULL` is no word. Scores
are logs in base `base=` (default e; base=0: plain probabilities)."""
import functools
import math
import re

import numpy as np

from .._ext.htk_reader import scan_slf
from .._ext.lattice_graph import lattice_order
from ..errors import InputError
from ..io import byte_limit, decoded_lines, read_small_bytes

NULL_WORD = "!NULL"
FLOAT32_ROUNDS_TO_INF = 3.4028235677973366e38  # and above: infinite as a float32
NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\Z")
LINK_SCORES = frozenset(("a", "n", "l", "r", "ds") + tuple(f"x{i}" for i in range(1, 10)))
SCORE_KEYS = ("a", "n", "l", "r", "ds") + tuple(f"x{i}" for i in range(1, 10))  # htk_reader's order
NODE_SCORES = frozenset(("a", "r", "ds") + tuple(f"x{i}" for i in range(1, 10)))
LONG_NAMES = {"START": "S", "END": "E", "WORD": "W", "acoustic": "a", "ngram": "n", "language": "l",
              "var": "v", "div": "d", "states": "s", "time": "t", "NODES": "N", "LINKS": "L",
              "VERSION": "V", "UTTERANCE": "U"}
NODE_TEXT = ("v", "d", "s", "p")
LINK_TEXT = ("v", "d", "s", "p")
HEADER_NUMBERS = ("base", "acscale", "lmscale", "ngscale", "prscale", "duscale", "wdpenalty", "amscale",
                  "tscale") + tuple(f"x{i}scale" for i in range(1, 10))


class Node:
    __slots__ = ("number", "time", "word", "scores", "extra", "line")

    def __init__(self, number, line):
        self.number, self.line = number, line
        self.time, self.word, self.scores, self.extra = None, None, {}, {}


class Link:
    __slots__ = ("number", "start", "end", "word", "scores", "extra", "line")

    def __init__(self, number, line):
        self.number, self.line = number, line
        self.start = self.end = self.word = None
        self.scores, self.extra = {}, {}


class Lattice:
    """One SLF lattice as read: `header` (field -> text, in the file's order), `nodes` and
    `links` in the file's order (nodes by number in `node`), `start` and `end` (node
    numbers), `order` (node numbers, topologically sorted), `name` (UTTERANCE, else the
    file's name without .gz, .lat, .slf), `header_lines` (each header field's line).
    `scanned`: htk_reader's arrays when it read the file (None: read line by line); the
    Node and Link objects are then made only when asked for."""

    def __init__(self, path, header, nodes, links, start, end, order, name, header_lines=None, scanned=None):
        self.path, self.header, self._nodes, self._links = path, header, nodes, links
        self.header_lines = header_lines or {}  # field -> its line
        self.start, self.end, self._order, self.name = start, end, order, name
        self.scanned, self._node = scanned, None

    def _made(self):
        if self._nodes is None:
            self._nodes, self._links = self.scanned.objects(self.path)
        return self._nodes

    @property
    def nodes(self):
        return self._made()

    @property
    def links(self):
        self._made()
        return self._links

    @property
    def node(self):
        if self._node is None:
            self._node = {n.number: n for n in self._made()}
        return self._node

    @property
    def order(self):
        if self._order is None:
            self._order = self.scanned.node_ints[self.scanned.order, 0].tolist()
        return self._order

    @property
    def base(self):
        return float(self.header.get("base", math.e))


class Scanned:
    """htk_reader's arrays of a lattice (rows of its nodes and links, the words as spans of
    `data`) and, once checked, lattice_graph's topological order of the node rows, the
    start and end rows and each link's node rows."""
    __slots__ = ("data", "node_ints", "node_reals", "link_ints", "link_reals", "order", "start", "end", "link_start",
                 "link_end")

    def __init__(self, data, node_ints, node_reals, link_ints, link_reals):
        self.data, self.node_ints, self.node_reals, self.link_ints, self.link_reals = \
            data, node_ints, node_reals, link_ints, link_reals
        self.order = self.start = self.end = self.link_start = self.link_end = None

    def objects(self, path):
        """The Node and Link objects of the rows, as the line reader makes them."""
        data, nodes, links = self.data, [], []
        for (number, line, begin, end, order), reals in zip(self.node_ints.tolist(), self.node_reals.tolist()):
            node = Node(number, line)
            if reals[0] == reals[0]:  # not NaN: t= given
                node.time = reals[0]
            if begin >= 0:
                node.word = _word(data[begin:end].decode("ascii"), "W", path, line)
            if order:
                node.scores = {key: reals[1 + column] for key, column in _score_keys(order)}
            nodes.append(node)
        for (number, line, start, end, begin, stop, order), reals in zip(self.link_ints.tolist(),
                                                                         self.link_reals.tolist()):
            link = Link(number, line)
            link.start, link.end = start, end
            if begin >= 0:
                link.word = _word(data[begin:stop].decode("ascii"), "W", path, line)
            if order:
                link.scores = {key: reals[column] for key, column in _score_keys(order)}
            links.append(link)
        return nodes, links


def fields(text):
    """The key=value fields of a line (a key without '=' has the value ''), up to a '#',
    as a list."""
    tokens = text.split()
    if "#" in text:
        cut = next((i for i, token in enumerate(tokens) if token.startswith("#")), len(tokens))
        tokens = tokens[:cut]
    names = LONG_NAMES
    return [(names.get(key, key), value) for key, _, value in (token.partition("=") for token in tokens)]


def _number(value, key, path, line, isfinite=math.isfinite, match=NUMBER.match):
    if match(value):
        number = float(value)
        if isfinite(number):
            return number
    raise InputError(f"{key}={value}: not a finite number", path=path, line=line)


def _integer(value, key, path, line):
    if not value.isdecimal():  # as re's \d+: Unicode's decimal digits (Nd)
        raise InputError(f"{key}={value}: not a node or link number (an integer >= 0)", path=path, line=line)
    return int(value)


def _word(value, key, path, line):
    if not value:
        raise InputError(f"{key}= without a word", path=path, line=line)
    return None if value == NULL_WORD else value


def _read_node(items, path, line):
    node = Node(_integer(items[0][1], "I", path, line), line)
    for key, value in items[1:]:
        if key == "t":
            node.time = _number(value, key, path, line)
        elif key == "W":
            node.word = _word(value, key, path, line)
        elif key in NODE_SCORES:
            node.scores[key] = _number(value, key, path, line)
        elif key in NODE_TEXT:
            node.extra[key] = value
        else:
            raise InputError(f"'{key}': not a field of a node (t, W, a, r, ds, v, d, s, p)", path=path, line=line)
    return node


def _read_link(items, path, line):
    link = Link(_integer(items[0][1], "J", path, line), line)
    for key, value in items[1:]:
        if key == "S":
            link.start = _integer(value, key, path, line)
        elif key == "E":
            link.end = _integer(value, key, path, line)
        elif key == "W":
            link.word = _word(value, key, path, line)
        elif key in LINK_SCORES:
            link.scores[key] = _number(value, key, path, line)
        elif key in LINK_TEXT:
            link.extra[key] = value
        else:
            raise InputError(f"'{key}': not a field of a link (S, E, W, a, n, l, r, ds, x1-x9, v, d, s, p)",
                             path=path, line=line)
    if link.start is None or link.end is None:
        raise InputError(f"link J={link.number} has no {'S' if link.start is None else 'E'}= node",
                         path=path, line=line)
    return link


MAX_LATTICE_BYTES, LIMIT_VARIABLE = 64 << 20, "NPLM_MAX_LATTICE_BYTES"  # a lattice's text, gunzipped
HEADER_LINES = 64  # header lines htk_reader takes; a file with more is read line by line
HEADER_ITEMS_KEPT = 1024  # header lines whose checked fields are kept: lattices share most of theirs
_HEADER_ITEMS = {}  # a header line's bytes -> its fields, checked


def read_htk(path):
    """The lattice of the SLF file `path` (gzip allowed), checked: numbers finite, every
    node and link number defined once, every link's nodes defined, N= and L= right, start
    and end nodes present, no cycle, the end reachable from the start. A text past
    MAX_LATTICE_BYTES (gunzipped) is refused as it is read."""
    data = read_small_bytes(path, (byte_limit(LIMIT_VARIABLE, MAX_LATTICE_BYTES), LIMIT_VARIABLE))
    read = _scanned(path, data)
    if read is None:  # not the plain form htk_reader takes: line by line, with every check's message
        return _checked(path, *_read_lines(path, decoded_lines(data, path)))
    header, header_lines, scanned = read
    lattice = _checked_scan(path, header, header_lines, scanned)
    if lattice is None:  # a check failed: the objects' checks give the message
        return _checked(path, header, header_lines, *scanned.objects(path))
    return lattice


def _read_lines(path, lines):
    header, header_lines, nodes, links = {}, {}, [], []
    for number, text in enumerate(lines, 1):
        items = fields(text)
        if not items:
            continue
        if items[0][0] == "I":
            nodes.append(_read_node(items, path, number))
        elif items[0][0] == "J":
            links.append(_read_link(items, path, number))
        else:
            _read_header(items, path, number, header, header_lines)
    return header, header_lines, nodes, links


def _read_header(items, path, number, header, header_lines):
    for key, value in items:
        if key in HEADER_NUMBERS:
            _number(value, key, path, number)
        elif key in ("N", "L", "start", "end"):
            _integer(value, key, path, number)
        header[key], header_lines[key] = value, number


@functools.lru_cache(maxsize=None)
def _score_keys(order):
    """htk_reader's code of a line's score keys (4 bits a key, key + 1, first lowest): (key, column)s."""
    keys = []
    while order:
        keys.append((SCORE_KEYS[(order & 15) - 1], (order & 15) - 1))
        order >>= 4
    return tuple(keys)


def _scanned(path, data):
    """(header, header_lines, Scanned) as htk_reader reads them, None where it stops."""
    node_ints = np.empty((data.count(b"I="), 5), dtype=np.int64)
    node_reals = np.empty((len(node_ints), len(SCORE_KEYS) + 1), dtype=np.float64)
    link_ints = np.empty((data.count(b"J="), 7), dtype=np.int64)
    link_reals = np.empty((len(link_ints), len(SCORE_KEYS)), dtype=np.float64)
    header_spans = np.empty((HEADER_LINES, 3), dtype=np.int64)
    node_count, link_count, header_count, stop = scan_slf(data, node_ints, node_reals, link_ints, link_reals,
                                                          header_spans)
    if stop:
        return None
    header, header_lines = {}, {}
    for number, begin, end in header_spans[:header_count].tolist():
        line = data[begin:end]
        items = _HEADER_ITEMS.get(line)
        if items is None:  # checked here (its error names this file and line), then kept
            items = fields(line.decode("ascii"))
            _read_header(items, path, number, header, header_lines)
            if len(_HEADER_ITEMS) < HEADER_ITEMS_KEPT:
                _HEADER_ITEMS[line] = items
        else:
            for key, value in items:
                header[key], header_lines[key] = value, number
    return header, header_lines, Scanned(data, node_ints[:node_count], node_reals[:node_count],
                                         link_ints[:link_count], link_reals[:link_count])


def _checked_scan(path, header, header_lines, scanned):
    """_checked's lattice of htk_reader's arrays, checked by lattice_graph; None where a
    check fails (_checked of the objects then names the problem)."""
    for key, count in (("N", len(scanned.node_ints)), ("L", len(scanned.link_ints))):
        if key in header and int(header[key]) != count:
            return None
    if "base" in header:
        base = float(header["base"])
        if not (base == 0 or (base > 0 and float(np.float32(min(base, 1.0))) > 0 and base < FLOAT32_ROUNDS_TO_INF)):
            return None
        if base == 0 and (float(header.get("wdpenalty", 0)) < 0 or (scanned.node_reals[:, 1:] < 0).any()
                          or (scanned.link_reals < 0).any()):
            return None
    start, end = int(header.get("start", -1)), int(header.get("end", -1))
    found = lattice_order(scanned.node_ints, scanned.link_ints, start, end) if max(start, end) < 1 << 62 else None
    if found is None:
        return None
    scanned.order, scanned.start, scanned.end, scanned.link_start, scanned.link_end = found
    name = header.get("U") or path
    start, end = int(scanned.node_ints[scanned.start, 0]), int(scanned.node_ints[scanned.end, 0])
    return Lattice(path, header, None, None, start, end, None, utterance_id(name.strip('"').split("=")[0]),
                   header_lines, scanned)


def _checked(path, header, header_lines, nodes, links):
    if not nodes:
        raise InputError("no nodes (I= lines): not an HTK lattice", path=path)
    by_number = {}
    for node in nodes:
        if node.number in by_number:
            raise InputError(f"node I={node.number} defined twice (first on line {by_number[node.number].line})",
                             path=path, line=node.line)
        by_number[node.number] = node
    seen = {}
    for link in links:
        if link.number in seen:
            raise InputError(f"link J={link.number} defined twice (first on line {seen[link.number]})",
                             path=path, line=link.line)
        seen[link.number] = link.line
        for end in (link.start, link.end):
            if end not in by_number:
                raise InputError(f"link J={link.number} refers to node {end}, which is not defined",
                                 path=path, line=link.line)
    for key, count, what in (("N", len(nodes), "nodes"), ("L", len(links), "links")):
        if key in header and int(header[key]) != count:
            raise InputError(f"{key}={header[key]} but {count} {what} follow", path=path, line=header_lines[key])
    if "base" in header:
        _check_base(path, header, header_lines, nodes, links)
    outgoing = {n: [] for n in by_number}
    incoming = {n: 0 for n in by_number}
    for link in links:
        outgoing[link.start].append(link)
        incoming[link.end] += 1
    start = _terminal(path, header, header_lines, "start", by_number, incoming)
    end = _terminal(path, header, header_lines, "end", by_number, {n: len(o) for n, o in outgoing.items()})
    order = _topological(path, nodes, outgoing, incoming)
    reached = {start}
    for number in order:
        if number in reached:
            reached.update(link.end for link in outgoing[number])
    if end not in reached:
        raise InputError(f"the end node {end} cannot be reached from the start node {start}", path=path,
                         line=by_number[end].line)
    name = header.get("U") or path
    return Lattice(path, header, nodes, links, start, end, order, utterance_id(name.strip('"').split("=")[0]),
                   header_lines)


def _check_base(path, header, header_lines, nodes, links):
    """A base whose log10 is a number (a float32 above 0, as SRILM reads it), or 0 with
    every score a probability (not below 0)."""
    base = float(header["base"])
    if base < 0 or (base > 0 and not (float(np.float32(min(base, 1.0))) > 0 and base < FLOAT32_ROUNDS_TO_INF)):
        raise InputError(f"base={header['base']}: must be 0 (probabilities) or a number from about 1e-45 to 3.4e38 "
                         "(a float32 above 0)", path=path, line=header_lines["base"])
    if base > 0:
        return
    if "wdpenalty" in header and float(header["wdpenalty"]) < 0:
        raise InputError(f"wdpenalty={header['wdpenalty']} with base=0: not a probability (below 0)", path=path,
                         line=header_lines["wdpenalty"])
    for item in nodes + links:
        for key, value in item.scores.items():
            if value < 0:
                raise InputError(f"{key}={value:g} with base=0 (scores as probabilities): below 0", path=path,
                                 line=item.line)


def file_name(lattice):
    """The lattice's name (UTTERANCE=, else its file's) as an output file's name: refused
    when it is none or would be hidden (empty, or starting with '.')."""
    if lattice.name and not lattice.name.startswith("."):
        return lattice.name
    line = lattice.header_lines.get("U")
    source = f"UTTERANCE={lattice.header['U']}" if line else "the file's name"
    raise InputError(f"{source} gives the name '{lattice.name}', not a plain file name for the outputs",
                     path=lattice.path, line=line)


def _terminal(path, header, header_lines, key, by_number, degree):
    """The start (or end) node: start= (end=) if given, else the one node without links in
    (out), as SRILM looks for it."""
    if key in header:
        number = int(header[key])
        if number not in by_number:
            raise InputError(f"{key}={number}: no such node", path=path, line=header_lines[key])
        return number
    candidates = [n for n, d in degree.items() if d == 0]
    if len(candidates) != 1:
        raise InputError(f"no {key}= and {len(candidates)} nodes without links {'in' if key == 'start' else 'out'}: "
                         f"which is the {key} node?", path=path)
    return candidates[0]


def _topological(path, nodes, outgoing, incoming):
    """Node numbers in an order where every link goes forward (Kahn's, stable in file
    order); a cycle is an error naming a link on it."""
    remaining = dict(incoming)
    ready = [n.number for n in reversed(nodes) if remaining[n.number] == 0]
    order = []
    while ready:
        number = ready.pop()
        order.append(number)
        for link in reversed(outgoing[number]):
            remaining[link.end] -= 1
            if remaining[link.end] == 0:
                ready.append(link.end)
    if len(order) < len(nodes):
        cyclic = next(link for n in nodes if remaining[n.number] > 0 for link in outgoing[n.number]
                      if remaining[link.end] > 0)
        raise InputError(f"the links form a cycle (through link J={cyclic.number}, {cyclic.start} -> {cyclic.end})",
                         path=path, line=cyclic.line)
    return order


SUFFIXES = (".Z", ".gz", ".score", ".nbest", ".wav", ".wav_cep", ".wv", ".wv1", ".sph", ".lat", ".slf", ".plp")


def utterance_id(name):
    """SRILM's idFromFilename: the base name without its known suffixes (in this order)."""
    root = name.rsplit("/", 1)[-1]
    for suffix in SUFFIXES:
        if len(suffix) < len(root) and root.endswith(suffix):
            root = root[:-len(suffix)]
    return root


def _format(value):
    return f"{value:.7g}"


def write_htk(lattice, out):
    """`lattice` in SLF, as read (words on links, times on nodes; the header's fields first)."""
    header = dict(lattice.header)
    header.pop("N", None)
    header.pop("L", None)
    header.setdefault("V", "1.0")
    names = {"V": "VERSION", "U": "UTTERANCE"}
    for key, value in header.items():
        out.write(f"{names.get(key, key)}={value}\n")
    out.write(f"N={len(lattice.nodes)}\tL={len(lattice.links)}\n")
    for node in lattice.nodes:
        parts = [f"I={node.number}"]
        if node.time is not None:
            parts.append(f"t={_format(node.time)}")
        if node.word is not None:
            parts.append(f"W={node.word}")
        parts += [f"{k}={_format(v)}" for k, v in node.scores.items()] + [f"{k}={v}" for k, v in node.extra.items()]
        out.write("\t".join(parts) + "\n")
    for link in lattice.links:
        parts = [f"J={link.number}", f"S={link.start}", f"E={link.end}"]
        if link.word is not None or lattice.node[link.end].word is None:
            parts.append(f"W={link.word or NULL_WORD}")
        parts += [f"{k}={_format(v)}" for k, v in link.scores.items()] + [f"{k}={v}" for k, v in link.extra.items()]
        out.write("\t".join(parts) + "\n")
