# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The loop over the bytes of an HTK SLF lattice (nplmtk/lattice/htk.py's read_htk): each
node line (first field I=) and link line (J=) into rows of arrays the caller allocated,
each header line's span left to the caller. Only the plain form is read here: ASCII,
numbers as htk.NUMBER (parsed by strtod, which rounds as Python's float), the fields
htk.py reads as numbers and words, each once in its line. At the first line of any other
form (a text field, a non-ASCII byte, a bad or infinite number, a field of no node or
link) the scan stops and says which line: the caller reads the file its own way there,
and its checks give the message."""
from libc.math cimport NAN, isfinite
from libc.stdlib cimport strtod

# A row of node_ints: number, line, word start, word end (-1: no W=), score keys in order
# (4 bits each, key + 1, first key lowest); node_reals: time (NaN: none), then the scores.
# A row of link_ints: number, line, S, E, word start, word end, score keys; link_reals:
# the scores. Scores by key: a n l r ds x1 .. x9 (htk.SCORE_KEYS); absent: NaN.
# header_spans: each header line's number, start and end (its newline excluded).
cdef enum:
    SCORES = 14
    LONGEST_NUMBER = 63
    KEY_OTHER = -1
    KEY_TIME = 14
    KEY_WORD = 15
    KEY_START = 16
    KEY_END = 17


cdef inline bint blank(unsigned char b) noexcept nogil:
    """str.split()'s whitespace among ASCII bytes (newline apart)."""
    return b == 32 or 9 <= b <= 13 or 28 <= b <= 31


cdef inline bint same(const unsigned char *p, Py_ssize_t n, const char *name) noexcept nogil:
    cdef Py_ssize_t i = 0
    while i < n and name[i] != 0 and p[i] == <unsigned char> name[i]:
        i += 1
    return i == n and name[i] == 0


cdef int field_key(const unsigned char *p, Py_ssize_t n) noexcept nogil:
    """The key of a node's or link's field (htk.LONG_NAMES applied), KEY_OTHER if none read here."""
    if n == 1:
        if p[0] == c'a':
            return 0
        if p[0] == c'n':
            return 1
        if p[0] == c'l':
            return 2
        if p[0] == c'r':
            return 3
        if p[0] == c't':
            return KEY_TIME
        if p[0] == c'W':
            return KEY_WORD
        if p[0] == c'S':
            return KEY_START
        if p[0] == c'E':
            return KEY_END
    elif n == 2:
        if p[0] == c'd' and p[1] == c's':
            return 4
        if p[0] == c'x' and c'1' <= p[1] <= c'9':
            return 4 + (p[1] - c'0')
    elif same(p, n, b"acoustic"):
        return 0
    elif same(p, n, b"ngram"):
        return 1
    elif same(p, n, b"language"):
        return 2
    elif same(p, n, b"time"):
        return KEY_TIME
    elif same(p, n, b"WORD"):
        return KEY_WORD
    elif same(p, n, b"START"):
        return KEY_START
    elif same(p, n, b"END"):
        return KEY_END
    return KEY_OTHER


cdef inline Py_ssize_t digits(const unsigned char *p, Py_ssize_t i, Py_ssize_t n) noexcept nogil:
    while i < n and c'0' <= p[i] <= c'9':
        i += 1
    return i


cdef bint read_number(const unsigned char *p, Py_ssize_t n, double *value) noexcept nogil:
    """A finite number of htk.NUMBER's form ([-+]?(\\d+\\.?\\d*|\\.\\d+)([eE][-+]?\\d+)?), ASCII digits."""
    cdef char text[LONGEST_NUMBER + 1]
    cdef Py_ssize_t i = 0, j
    if n == 0 or n > LONGEST_NUMBER:
        return False
    if p[0] == c'-' or p[0] == c'+':
        i = 1
    j = digits(p, i, n)
    if j > i:
        if j < n and p[j] == c'.':
            j = digits(p, j + 1, n)
    elif j < n and p[j] == c'.':
        i = j + 1
        j = digits(p, i, n)
        if j == i:
            return False
    else:
        return False
    if j < n and (p[j] == c'e' or p[j] == c'E'):
        j += 1
        if j < n and (p[j] == c'-' or p[j] == c'+'):
            j += 1
        i = j
        j = digits(p, j, n)
        if j == i:
            return False
    if j != n:
        return False
    for i in range(n):
        text[i] = <char> p[i]
    text[n] = 0
    value[0] = strtod(text, NULL)
    return isfinite(value[0])


cdef bint read_integer(const unsigned char *p, Py_ssize_t n, long long *value) noexcept nogil:
    """A node or link number: ASCII digits only, at most 18."""
    cdef Py_ssize_t i
    if n == 0 or n > 18 or digits(p, 0, n) != n:
        return False
    value[0] = 0
    for i in range(n):
        value[0] = value[0] * 10 + (p[i] - c'0')
    return True


def scan_slf(const unsigned char[::1] data, long long[:, ::1] node_ints, double[:, ::1] node_reals,
             long long[:, ::1] link_ints, double[:, ::1] link_reals, long long[:, ::1] header_spans):
    """(nodes, links, header lines, stop): the rows filled, and 0, or the number of the first
    line left to the caller (its form not the plain one; also a node, link or header line
    past the arrays' rows)."""
    cdef const unsigned char *p = &data[0] if data.shape[0] else NULL
    cdef Py_ssize_t size = data.shape[0], pos = 0, begin, end, t, key_end, value, r
    cdef long long line = 0, integer, seen, order
    cdef int nodes = 0, links = 0, headers = 0, key, kind, scores, k
    cdef double number
    while pos < size:
        line += 1
        begin = pos
        end = pos
        while end < size and p[end] != c'\n':
            end += 1
        pos = end + 1
        t = begin
        while t < end and blank(p[t]):
            t += 1
        if t == end or p[t] == c'#':
            continue
        if p[t] >= 128:
            return nodes, links, headers, line
        kind = 0
        if t + 1 < end and p[t + 1] == c'=' and (p[t] == c'I' or p[t] == c'J'):
            kind = 1 if p[t] == c'I' else 2
        if kind == 0:
            for r in range(t, end):
                if p[r] >= 128:
                    return nodes, links, headers, line
            if headers == header_spans.shape[0]:
                return nodes, links, headers, line
            header_spans[headers, 0], header_spans[headers, 1], header_spans[headers, 2] = line, begin, end
            headers += 1
            continue
        if (kind == 1 and nodes == node_ints.shape[0]) or (kind == 2 and links == link_ints.shape[0]):
            return nodes, links, headers, line
        r = nodes if kind == 1 else links
        if kind == 1:
            node_ints[r, 1], node_ints[r, 2], node_ints[r, 3] = line, -1, -1
            for k in range(SCORES + 1):
                node_reals[r, k] = NAN
        else:
            link_ints[r, 1], link_ints[r, 2], link_ints[r, 3], link_ints[r, 4], link_ints[r, 5] = line, -1, -1, -1, -1
            for k in range(SCORES):
                link_reals[r, k] = NAN
        seen, order, scores = 0, 0, 0
        while t < end:  # the fields, the first one I= or J=
            key_end = t
            while key_end < end and not blank(p[key_end]) and p[key_end] != c'=':
                if p[key_end] >= 128:
                    return nodes, links, headers, line
                key_end += 1
            if key_end == end or p[key_end] != c'=':
                return nodes, links, headers, line
            value = key_end + 1
            begin = value
            while begin < end and not blank(p[begin]):
                if p[begin] >= 128:
                    return nodes, links, headers, line
                begin += 1
            if seen == 0:  # the I= or J= field
                if not read_integer(&p[value], begin - value, &integer):
                    return nodes, links, headers, line
                if kind == 1:
                    node_ints[r, 0] = integer
                else:
                    link_ints[r, 0] = integer
                seen = 1
            else:
                key = field_key(&p[t], key_end - t)
                if key == KEY_OTHER or (seen >> (key + 1)) & 1 \
                        or (kind == 1 and (key == 1 or key == 2 or key == KEY_START or key == KEY_END)) \
                        or (kind == 2 and key == KEY_TIME):
                    return nodes, links, headers, line
                seen |= 1LL << (key + 1)
                if key == KEY_WORD:
                    if begin == value:
                        return nodes, links, headers, line
                    if kind == 1:
                        node_ints[r, 2], node_ints[r, 3] = value, begin
                    else:
                        link_ints[r, 4], link_ints[r, 5] = value, begin
                elif key == KEY_START or key == KEY_END:
                    if not read_integer(&p[value], begin - value, &integer):
                        return nodes, links, headers, line
                    link_ints[r, 2 if key == KEY_START else 3] = integer
                else:
                    if not read_number(&p[value], begin - value, &number):
                        return nodes, links, headers, line
                    if key == KEY_TIME:
                        node_reals[r, 0] = number
                    else:
                        order |= <long long> (key + 1) << (4 * scores)
                        scores += 1
                        if kind == 1:
                            node_reals[r, 1 + key] = number
                        else:
                            link_reals[r, key] = number
            t = begin
            while t < end and blank(p[t]):
                t += 1
            if t < end and p[t] == c'#':
                break
        if kind == 1:
            node_ints[r, 4] = order
            nodes += 1
        else:
            if link_ints[r, 2] < 0 or link_ints[r, 3] < 0:
                return nodes, links, headers, line
            link_ints[r, 6] = order
            links += 1
    return nodes, links, headers, 0
