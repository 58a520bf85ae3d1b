"""lattice-tool -approx-order auto (issue 51): the smallest order of the history
approximation whose 1-best paths on held-out lattices are those of the largest order tried
(within APPROX_TOLERANCE word edits a word), without references."""
import pytest

from nplmtk.errors import ParameterError
from nplmtk.tuning import APPROX_ORDERS, tune_approx_order


def test_the_smallest_order_within_the_tolerance_of_the_largest():
    best = {2: [["a", "b"], ["c"]], 3: [["a", "d"], ["c"]], 4: [["a", "d"], ["c"]], 5: [["a", "d"], ["c"]]}
    asked = []

    def one_bests(order):
        asked.append(order)
        return best[order]
    pick = tune_approx_order(one_bests, orders=(2, 3, 4, 5), tolerance=0)
    assert pick.setting == {"order": 3} and asked == [5, 2, 3]  # the largest first, then up from the smallest
    assert pick.tried == [({"order": 5}, 0.0), ({"order": 2}, pytest.approx(1 / 3)), ({"order": 3}, 0.0)]
    # one word edit in three is within a tolerance of 0.4: the smallest order
    assert tune_approx_order(one_bests, orders=(2, 3, 4, 5), tolerance=0.4).setting == {"order": 2}
    # none within: the largest, said to be on its grid's edge
    best[4] = [["x"], ["c"]]
    pick = tune_approx_order(lambda order: best[order] if order != 5 else [["y", "z"], []], orders=(2, 3, 4, 5),
                             tolerance=0)
    assert pick.setting == {"order": 5} and "largest of its grid" in pick.notes[0]
    with pytest.raises(ParameterError, match="orders"):
        tune_approx_order(one_bests, orders=(5,))


@pytest.fixture(scope="module")
def tune_lattices(toy_texts, tmp_path_factory):
    """Noise lattices of the toy valid text's first 8 sentences (held out), and their list."""
    from nplmtk.lattice.noise import Confusions, sentence_lattice
    folder, _ = toy_texts
    out = tmp_path_factory.mktemp("lattices")
    confusions = Confusions([line.split() for line in (folder / "train.txt").read_text().splitlines()], spread=6)
    paths = []
    for number, line in enumerate((folder / "valid.txt").read_text().splitlines()[:8]):
        path = out / f"sent{number:05d}.lat"
        path.write_text(sentence_lattice(line.split(), f"sent{number:05d}", confusions, 1, number, lmscale=12))
        paths.append(str(path))
    listing = out / "list"
    listing.write_text("".join(p + "\n" for p in paths))
    return listing


def test_approx_order_auto_picks_as_the_1_bests_say(capsys, toy_lstm, tune_lattices):
    from conftest import run_main
    from nplmtk.lattice.wer import word_error_rate
    from nplmtk.tuning import APPROX_TOLERANCE
    status, out, err = run_main(capsys, "lattice-tool", "-read-htk", "-in-lattice-list", tune_lattices, "-lm",
                                toy_lstm, "-approx-order", "auto", "-tune-lattice-list", tune_lattices,
                                "-viterbi-decode")
    assert status == 0, err
    line, = [line for line in err.splitlines() if line.startswith("nplm lattice-tool: -approx-order auto on ")]
    picked = int(line.split(": ")[2].split()[0])
    decoded = {}
    for order in [APPROX_ORDERS[-1]] + [order for order in APPROX_ORDERS if order <= picked]:
        status, decoded[order], err = run_main(capsys, "lattice-tool", "-read-htk", "-in-lattice-list", tune_lattices,
                                               "-lm", toy_lstm, "-approx-order", order, "-viterbi-decode")
        assert status == 0, err
    words = {order: [line.split()[1:] for line in text.splitlines()] for order, text in decoded.items()}
    within = [order for order in sorted(words)
              if word_error_rate(words[APPROX_ORDERS[-1]], words[order])[0] <= APPROX_TOLERANCE]
    assert picked == within[0]  # the smallest order within the tolerance of the largest's 1-bests
    assert out == decoded[picked]  # and the lattices decoded at it


@pytest.mark.parametrize("args, message", [
    (["-approx-order", "auto"], "-approx-order auto picks the order on held-out lattices (-tune-lattice-list)"),
    (["-approx-order", "4", "-tune-lattice-list", "LIST"], "they go together"),
])
def test_approx_order_auto_without_its_lattices_is_one_line(capsys, toy_lstm, tune_lattices, args, message):
    from conftest import run_main
    args = [str(tune_lattices) if a == "LIST" else a for a in args]
    status, out, err = run_main(capsys, "lattice-tool", "-read-htk", "-in-lattice-list", tune_lattices, "-lm",
                                toy_lstm, *args, "-viterbi-decode")
    assert status == 2 and out == "" and len(err.splitlines()) == 1 and message in err, err
