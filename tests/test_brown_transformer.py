"""make brown-transformer's script (benchmarks/brown_transformer.py, issue 52 item 4): the
options it gives train-nplm are the Transformer's, and its schedules' numbers hold at every
budget scale (the warm-up within the updates the budget allows), so that a smoke run trains."""
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks"))
from brown_transformer import SHAPE, TRAINING, VARIANTS, WARMUP, schedule_options  # noqa: E402
from nplmtk.neural.optimizer import RateSchedule  # noqa: E402
from nplmtk.neural.transformer import TransformerModel  # noqa: E402


def _flags(options):
    return {word[1:] for word in options if word.startswith("-") and not word[1:2].isdigit()}


def test_every_option_given_is_one_of_the_transformers():
    names = {option.name for option in TransformerModel.OPTIONS} | {"arch", "threads", "epochs", "patience"}
    for options, schedule in VARIANTS.values():
        given = _flags(SHAPE + TRAINING + options + tuple(schedule_options(schedule, 900, 3000)))
        assert given <= names, given - names


@pytest.mark.parametrize("budget", [1, 9, 70, 900, 7000])
@pytest.mark.parametrize("schedule", ["cosine", "inverse", "inv-sqrt"])
def test_the_schedule_is_valid_at_every_budget(budget, schedule):
    options = schedule_options(schedule, budget, 3000)
    values = dict(zip(options[::2], options[1::2]))
    assert values["-lr-schedule"] == schedule and 0 < int(values["-warmup"]) <= WARMUP
    if schedule == "cosine":  # the horizon: the budget's end, as the trainer foretells it
        assert int(values["-lr-horizon"]) == 0
        return
    RateSchedule(float(values.get("-lr-decay", 0)), int(values["-warmup"]), schedule, 0).check()
