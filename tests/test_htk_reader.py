"""The compiled SLF reader (nplmtk._ext.htk_reader, htk._scanned) against htk.py's line
by line reader: the same header, nodes and links on the forms it takes (long field
names, comments, CRLF, blank runs, scores in any order, node scores), and the line by
line reader's messages where it stops (a text field, a non-ASCII byte, a bad number)."""
import pytest

from nplmtk.errors import InputError
from nplmtk.io import decoded_lines
from nplmtk.lattice import htk

PLAIN = """VERSION=1.0
UTTERANCE=u1   # a comment
base=2.718282 lmscale=8.5 wdpenalty=-0.5
\tstart=0 end=3
N=4 L=5

I=0 t=0.00 a=-1.5
I=1 time=.30 W=!NULL
I=2 t=6e-1 r=2 x3=1 a=+4.
I=3 t=0.90
J=0 S=0 E=1 W=the a=-3.5 l=-1 # the first
J=1 START=0 END=1 WORD=a acoustic=-3.0E+0 language=-2 ngram=-0.25
J=2\tE=2 S=1 W=dog x9=7 ds=1 r=-0.5 a=-4 n=1
J=3 S=1 E=2 W=!NULL a=-6\r
J=4 S=2 E=3 W=</s> a=0 l=-1e-3
"""


def as_read(path, data):
    """(header, header lines, nodes, links) by the compiled reader and by the line by line one."""
    def flat(read):
        header, header_lines, nodes, links = read
        return header, header_lines, [tuple(getattr(item, name) for name in item.__slots__) for item in nodes + links]
    scanned = htk._scanned(path, data)
    compiled = None if scanned is None else flat(scanned[:2] + scanned[2].objects(path))
    return compiled, flat(htk._read_lines(path, decoded_lines(data, path)))


def test_the_compiled_reader_reads_as_the_line_by_line_one(tmp_path):
    data = PLAIN.encode()
    compiled, by_lines = as_read("x.lat", data)
    assert compiled is not None and compiled == by_lines
    (tmp_path / "x.lat").write_bytes(data)
    lattice = htk.read_htk(str(tmp_path / "x.lat"))
    assert [list(link.scores) for link in lattice.links][2] == ["x9", "ds", "r", "a", "n"]  # the file's order
    assert lattice.nodes[2].scores == {"r": 2.0, "x3": 1.0, "a": 4.0} and lattice.nodes[1].time == 0.3


@pytest.mark.parametrize("change, line", [
    (("W=dog", "W=dög"), None),  # non-ASCII: line by line (its words split as str.split splits)
    (("W=dog", "W=dog v=1"), None),  # a text field
    (("a=-4", "a=1e999"), 13),  # not finite: the line by line reader's message
    (("a=-4", "a=-4 a=-5"), None),  # twice in a line: the last
    (("J=3 S=1", "J=3 T=2 S=1"), 14),  # no field of a link
    (("I=3 t=0.90", "I=3 t=0.90 l=1"), 10),  # a link's field on a node
    (("J=2", "J=02x"), 13),
])
def test_other_forms_are_left_to_the_line_by_line_reader(tmp_path, change, line):
    data = PLAIN.replace(*change).encode()
    assert htk._scanned("x.lat", data) is None
    path = tmp_path / "x.lat"
    path.write_bytes(data)
    if line is None:
        assert [link.number for link in htk.read_htk(str(path)).links] == [0, 1, 2, 3, 4]
    else:
        with pytest.raises(InputError) as err:
            htk.read_htk(str(path))
        assert err.value.line == line


def test_numbers_are_pythons_floats_to_the_bit():
    values = ["0.1", "-3.14159265358979323846", "1e-310", "2.2250738585072014e-308", "123456789012345678901",
              ".5", "5.", "+7E+2", "9007199254740993", "1.7976931348623157e308"]
    text = "N=2 L=1\nI=0\nI=1\nJ=0 S=0 E=1 " + " ".join(f"x{i + 1}={v}" for i, v in enumerate(values[:9])) \
        + f" a={values[9]}\n"
    header, _, scanned = htk._scanned("x.lat", text.encode())
    nodes, links = scanned.objects("x.lat")
    assert list(links[0].scores.values()) == [float(v) for v in values[:9]] + [float(values[9])]
