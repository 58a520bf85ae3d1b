"""The regularisers of AWD-LSTM (Merity, Keskar & Socher 2018, "Regularizing and Optimizing
LSTM Language Models") for the recurrent models: what each one is and its policy, the
loops in cython_ext/rnn_kernels.pyx.

- locked (variational) dropout, sec. 4.1: one mask per stream and segment, the same at
  every step, on the input features, between layers and on the last layer's output;
- embedding dropout, sec. 4.2: whole rows of C dropped for a segment, the others scaled
  by 1 / (1 - p);
- weight drop, sec. 2: DropConnect on each layer's hidden-to-hidden matrix W, a mask per
  segment;
- AR and TAR, sec. 4.3: alpha / h ||m * s_t||^2 on the last layer's dropped output and
  beta / h ||s_t - s_t-1||^2 on its states, per step (the paper's mean over the units);
- the random BPTT length, sec. 4.1 (`random_segment_lengths`);
- NT-ASGD, sec. 3 (`nonmonotone_trigger`; the trainer averages).
"""
from dataclasses import dataclass

import numpy as np

RANDOM_BPTT_HALF = 0.05  # a segment is bptt / 2 long (before the noise) with this probability
RANDOM_BPTT_SD = 5  # the noise's standard deviation, in steps
RANDOM_BPTT_SHORTEST = 5  # no segment shorter (AWD-LSTM's max(5, ...)), unless bptt is
RANDOM_BPTT_SPREAD = 4  # no segment longer than bptt + this many standard deviations (the buffers')


@dataclass(frozen=True)
class Regularisers:
    """What the recurrent kernel applies when training (rnn_kernels.RecurrentNetwork's
    `regularisers`, its struct Regularisers): the dropouts on the input features, between
    layers and on the output, embedding dropout, weight drop, AR, TAR, and whether the
    dropouts' masks are locked (one per stream and segment) or one per step."""
    dropout_input: float = 0.0
    dropout_hidden: float = 0.0
    dropout_output: float = 0.0
    dropout_embedding: float = 0.0
    weight_drop: float = 0.0
    ar: float = 0.0
    tar: float = 0.0
    locked: bool = True

    @classmethod
    def of(cls, settings):
        """A recurrent model's settings (recurrent.RecurrentSettings) as the kernel takes them:
        -dropout's mask per value and step on every non-recurrent connection, or the locked
        ones that replace it."""
        per_step = settings.dropout
        return cls(per_step or settings.dropout_input, per_step or settings.dropout_hidden,
                   per_step or settings.dropout_output, settings.dropout_embedding, settings.weight_drop, settings.ar,
                   settings.tar, per_step == 0)


def longest_segment(bptt, random):
    """The most steps a training segment takes: bptt, or with random lengths the cap on them."""
    return bptt + RANDOM_BPTT_SPREAD * RANDOM_BPTT_SD if random else bptt


def random_segment_lengths(steps, bptt, rng):
    """AWD-LSTM's segment lengths (sec. 4.1) covering a chunk of `steps` steps: each bptt, or
    bptt / 2 with probability RANDOM_BPTT_HALF, then drawn from N(that, RANDOM_BPTT_SD),
    rounded down, kept within [min(5, bptt), longest_segment]. A chunk ends a segment (the
    trainer's rounds are a few segments long): when the draws overshoot it by more than half
    the last one, the steps left after the others are spread over them a step at a time
    (within the cap) rather than trained as a short segment of their own. The paper scales
    the rate by length / bptt because its loss is a mean; ours is summed over the segment's
    words, so each word already weighs the same."""
    if steps < 1:
        return np.zeros(0, dtype=np.int32)
    lengths = []
    total = 0
    shortest, longest = min(RANDOM_BPTT_SHORTEST, bptt), longest_segment(bptt, True)
    while total < steps:
        centre = bptt if rng.random() >= RANDOM_BPTT_HALF else bptt / 2
        length = int(min(max(int(rng.normal(centre, RANDOM_BPTT_SD)), shortest), longest))
        lengths.append(length)
        total += length
    left = steps - (total - lengths[-1])
    if len(lengths) > 1 and 2 * left < lengths[-1] and left <= (len(lengths) - 1) * longest - (total - lengths[-1]):
        lengths.pop()
        for i in range(left):
            while lengths[i % len(lengths)] == longest:
                i += 1
            lengths[i % len(lengths)] += 1
    else:
        lengths[-1] = left
    return np.array(lengths, dtype=np.int32)


def nonmonotone_trigger(valid_ppls, interval):
    """NT-ASGD's condition (sec. 3, Algorithm 1; AWD-LSTM's main.py): the last validation
    is worse than the best of those more than `interval` validations before it."""
    before = valid_ppls[:-1]
    return len(before) > interval and valid_ppls[-1] > min(before[:-interval])
