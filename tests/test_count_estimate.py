"""ngram-count's job as a library object (nplmtk/ngram/count_estimate.py), run without
the command line: in memory and out of core it writes the same files, and it says which
way it went."""
import pytest

from nplmtk.errors import ParameterError
from nplmtk.ngram.count_estimate import CountEstimate, CountSpec

from test_stream import zipf_lines


@pytest.mark.parametrize("options", [{}, {"min_counts": (1, 2, 2), "prune": 1e-4}, {"method": "wb"}])
@pytest.mark.filterwarnings("ignore::nplmtk.errors.NplmWarning")  # few words: fallback discounts for 1-grams
def test_in_memory_and_out_of_core_write_the_same_files(tmp_path, options):
    text = tmp_path / "text.txt"
    text.write_text("\n".join(zipf_lines(3, 400)) + "\n")
    written, lines = {}, {}
    for memory in (10 ** 9, 20_000):  # the estimate fits, then it does not
        spec = CountSpec(texts=(str(text),), order=3, memory=memory, debug=2, lm=str(tmp_path / f"{memory}.arpa"),
                         write_bin_lm=str(tmp_path / f"{memory}.nplm"), **options)
        lines[memory] = []
        CountEstimate(spec, echo=lines[memory].append).run()
        written[memory] = [(tmp_path / f"{memory}.{kind}").read_bytes() for kind in ("arpa", "nplm")]
    assert written[10 ** 9] == written[20_000]
    assert not any("out of core" in line for line in lines[10 ** 9])
    assert any("estimated out of core" in line for line in lines[20_000])


def test_counts_of_a_lower_order_than_asked_name_the_parameter(tmp_path):
    counts = tmp_path / "counts.txt"
    counts.write_text("a\t3\nb\t2\na b\t1\n")
    spec = CountSpec(reads=(str(counts),), order=3, lm=str(tmp_path / "lm.arpa"))
    with pytest.raises(ParameterError) as error:
        CountEstimate(spec).run()
    assert error.value.render(lambda name: f"-{name}") == "the counts go up to order 2, below -order 3"
