"""benchmarks/side_by_side.py (make bench-vs): runs of a pair at once, each on its own core,
and the interval its table claims."""
import json
import os
import statistics
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))
import side_by_side  # noqa: E402

# A stand-in for nplm train-nplm: its -log names the core it was allowed to run on.
FAKE_NPLM = """#!{python}
import json, os, sys
log = sys.argv[sys.argv.index("-log") + 1]
cores = sorted(os.sched_getaffinity(0))
with open(log, "w") as out:
    out.write(json.dumps({{"words_per_s": 100 + cores[0] if len(cores) == 1 else -1, "seconds": 1.0,
                          "train_ppl": 5.0}}) + "\\n")
"""


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores")
def test_a_pair_at_once_runs_each_build_on_its_own_core(tmp_path, monkeypatch):
    monkeypatch.setattr(side_by_side, "WORK", str(tmp_path))
    os.makedirs(tmp_path / "logs")
    nplm = tmp_path / "nplm"
    nplm.write_text(FAKE_NPLM.format(python=sys.executable))
    nplm.chmod(0o755)
    builds = {"old": str(nplm), "new": str(nplm)}
    setting = side_by_side.SETTINGS[0]
    first, second = sorted(os.sched_getaffinity(0))[:2]
    for pair, cores in ((1, [first, second]), (2, [second, first])):
        done = side_by_side.train_at_once(setting, builds, "vocab.txt", pair, dict(os.environ), cores)
        assert [(row["side"], row["words_per_s"], row["rc"]) for row, _ in done] == \
            [("old", 100 + cores[0], 0), ("new", 100 + cores[1], 0)]


def test_the_median_interval_holds_the_median_and_narrows_with_more_pairs():
    ratios = [0.9, 1.1, 0.95, 1.05, 1.0, 0.85, 1.15]
    low, high = side_by_side.median_interval(ratios)
    assert low <= statistics.median(ratios) <= high and low >= min(ratios) and high <= max(ratios)
    wide = high - low
    low, high = side_by_side.median_interval(ratios * 9)
    assert high - low < wide
    assert side_by_side.median_interval([1.02] * 5) == (1.02, 1.02)
    assert json.dumps(side_by_side.median_interval(ratios)) == json.dumps(side_by_side.median_interval(ratios))
