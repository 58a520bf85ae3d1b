"""The compiled lattice search and expansion (nplmtk/lattice/search.py,
nplmtk._ext.lattice_kernels) against decode.viterbi and expand.expand_to_lm, the Python
references, on random lattices: the same states at the end node (scores to the bit, in
the same order), the same 1-best and the same N-best lines, with a back-off model of
several orders and without a model; the same expanded nodes and links, in the same order,
written the same."""
import io
import random
from pathlib import Path

import pytest

from nplmtk.lattice.decode import Scales, best_words, nbest_lines, viterbi
from nplmtk.lattice.expand import BackoffContexts, expand_to_lm, write_expanded, written_form
from nplmtk.lattice.htk import read_htk
from nplmtk.lattice.scores import BackoffScores
from nplmtk.lattice.search import decode, expand

DATA = Path(__file__).parent / "data" / "srilm"


@pytest.fixture(scope="module")
def model():
    from nplmtk.models import load
    return load(str(DATA / "kn3-unk.arpa.gz"))


def random_lattice(rng, words, name):
    """An SLF lattice: a chain of nodes with forward links between them (words of the
    model, words it lacks, !NULL, <s> and </s>), acoustic and language scores in a random
    base, some scales in the header."""
    nodes = rng.randint(3, 9)
    base = rng.choice(["10", "2.718282", "2"])
    header = [f"UTTERANCE={name}", f"base={base}", f"lmscale={rng.choice([1, 8, 12.5])}"]
    if rng.random() < 0.5:
        header.append(f"wdpenalty={rng.uniform(-2, 1):.3f}")
    if rng.random() < 0.3:
        header.append(f"acscale={rng.choice([0.5, 1, 2])}")
    links = []
    for start in range(nodes - 1):
        for _ in range(rng.randint(1, 4)):
            end = min(nodes - 1, start + rng.choice([1, 1, 1, 2, 3]))
            word = rng.choice(words + ["!NULL", "zzunknown", "qqunknown", "<s>", "</s>"] if rng.random() < 0.2 else words)
            scores = f"a={rng.uniform(-14, -6):.4f}"
            if rng.random() < 0.5:
                scores += f" l={rng.uniform(-5, 0):.4f}"
            if rng.random() < 0.1:
                scores += f" r={rng.uniform(-1, 0):.3f}"
            if rng.random() < 0.1:  # scores of no scale's (x2=), or of a scale of 0 (ds=)
                scores = f"x2={rng.uniform(-3, 3):.3f} {scores} n={rng.uniform(-2, 0):.3f} ds={rng.uniform(0, 1):.2f}"
            links.append(f"S={start} E={end} W={word} {scores}")
        links.append(f"S={start} E={start + 1} W={rng.choice(words)} a={rng.uniform(-14, -6):.4f}")
    lines = ["VERSION=1.0", *header, f"start=0 end={nodes - 1}", f"N={nodes} L={len(links)}"]
    for i in range(nodes):  # some nodes with scores (a forward lattice's), a word, no time
        node = f"I={i}" + (f" t={i * 0.25:.2f}" if rng.random() < 0.9 else "")
        if rng.random() < 0.2:
            node += f" a={rng.uniform(-3, 0):.3f}" + (f" x1={rng.uniform(-1, 1):.2f}" if rng.random() < 0.5 else "")
        if 0 < i < nodes - 1 and rng.random() < 0.2:
            node += f" W={rng.choice(words)}"
        lines.append(node)
    lines += [f"J={j} {link}" for j, link in enumerate(links)]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("order, unk, seed", [(1, True, 1), (2, True, 2), (3, True, 3), (3, False, 4), (4, False, 5),
                                              (None, False, 6)])
def test_the_compiled_search_is_the_python_search(tmp_path, model, order, unk, seed):
    rng = random.Random(seed)
    words = [w for w in model.vocab.words if w not in ("<s>", "</s>")][:60]
    backoff = model.truncated(order) if order else None
    scores = BackoffScores(backoff) if backoff else None
    known = set(model.vocab.index)

    def word_of(word):
        return word if not unk or word in known else "<unk>"

    for k in range(25):
        path = tmp_path / f"r{k}.lat"
        path.write_text(random_lattice(rng, words, f"r{k}"))
        lattice = read_htk(str(path))
        settings = Scales().of(lattice)
        for nbest in (False, True):
            if scores is not None:
                scores.forget()
            nodes, expected = viterbi(lattice, settings, word_of, scores, order or 3, nbest=nbest)
            decoding = decode(lattice, settings, word_of, scores, order or 3, nbest=nbest)
            got = decoding.finals
            assert [(s.node, s.prob, s.gprob) for s in got] == [(s.node, s.prob, s.gprob) for s in expected]
            assert best_words(nodes, got) == decoding.best_words() == best_words(nodes, expected)
            if nbest and settings["lmscale"] > 0:
                for count in (1, 10, 50):  # the Python search marks its states: a fresh one each time
                    if scores is not None:
                        scores.forget()
                    nodes, expected = viterbi(lattice, settings, word_of, scores, order or 3, nbest=True)
                    assert decoding.nbest_lines(count, backoff) == nbest_lines(nodes, expected, count, backoff)


@pytest.mark.parametrize("order, unk, seed", [(1, True, 11), (2, False, 12), (3, True, 13), (3, False, 14),
                                              (4, True, 15)])
def test_the_compiled_expansion_is_the_python_expansion(tmp_path, model, order, unk, seed):
    rng = random.Random(seed)
    words = [w for w in model.vocab.words if w not in ("<s>", "</s>")][:60]
    backoff = model.truncated(order)
    scores, contexts = BackoffScores(backoff), BackoffContexts(backoff)
    known = set(model.vocab.index)

    def word_of(word):
        return word if not unk or word in known else "<unk>"

    for k in range(25):
        path = tmp_path / f"r{k}.lat"
        path.write_text(random_lattice(rng, words, f"r{k}"))
        lattice = read_htk(str(path))
        settings = Scales().of(lattice)
        scores.forget()
        contexts.forget()
        expected = expand_to_lm(lattice, settings, word_of, scores, contexts)
        got = expand(lattice, settings, word_of, scores)
        assert (got.nodes, got.links, got.start, got.end) == (expected.nodes, expected.links, expected.start,
                                                              expected.end)
        assert got.form() == written_form(expected)
        ours, theirs = io.StringIO(), io.StringIO()
        assert write_expanded(lattice, settings, got, ours) == write_expanded(lattice, settings, expected, theirs)
        assert ours.getvalue() == theirs.getvalue()


@pytest.mark.parametrize("seed", range(20))
def test_outgoing_transitions_list_each_nodes_targets_as_a_stable_sort_by_source(seed):
    """lattice_graph.outgoing_transitions (GraphArrays.outgoing) against a stable argsort
    of the transitions by source, on random graphs (nodes without transitions included)."""
    import numpy as np
    from nplmtk._ext.lattice_graph import outgoing_transitions
    rng = np.random.default_rng(seed)
    nodes = int(rng.integers(1, 30))
    counts = rng.integers(0, 4, size=nodes)
    first = np.zeros(nodes + 1, dtype=np.int32)
    np.cumsum(counts, out=first[1:])
    source = rng.integers(0, nodes, size=int(first[-1])).astype(np.int32)
    out_first, target = outgoing_transitions(first, source)
    targets = np.repeat(np.arange(nodes, dtype=np.int32), counts)
    assert target.tolist() == targets[np.argsort(source, kind="stable")].tolist()
    assert out_first.tolist() == [0] + np.cumsum(np.bincount(source, minlength=nodes)).tolist()
