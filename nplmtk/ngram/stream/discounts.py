"""The second stage: the counts each order is discounted by (`adjusted{k}`, Kneser-Ney's
continuation counts where they replace the counts), their counts-of-counts, and the
discounts fitted on those as the in-memory estimate fits them (estimate.fitted_discounts);
then the unigrams' probabilities, the in-memory estimate's arithmetic on every word."""
import contextlib

import numpy as np

from ...threads import in_order
from ..discounts import CountsOfCounts
from ..estimate import _warn, fitted_discounts, unigram_probabilities
from ..row_files import row_bytes
from .files import ADJUSTED, CONTINUATION, COUNT, FLAGS
from .rows import FIRST_NON_EVENT, LAST_NON_EVENT, flags_of
from .walks import backoff_walks


def discounts_of_orders(estimate):
    """Each order's discount, from the counts-of-counts of all the rows (summed over the
    ranks under MPI)."""
    histograms = (CountsOfCounts(estimate.exchange.summed(adjusted_counts(estimate, k))) for k in range(1, estimate.order + 1))
    return fitted_discounts(estimate.discounting, histograms, estimate.settings, estimate.warn or _warn, estimate.log)


def adjusted_counts(estimate, k):
    """`adjusted{k}`: Kneser-Ney's continuation counts (the number of words seen before
    the n-gram; n-grams starting with `<s>` keep their counts; the highest order keeps
    its counts). Returns the counts-of-counts of the n-grams that predict events."""
    largest, adjusting = estimate.largest_count, adjusts(estimate, k)

    def adjusted(chunk):
        low, high = chunk
        flags, counts = flags_of(estimate, k, low, high), estimate.raw_counts(k, low, high)
        if adjusting:
            counts = np.where(flags & FIRST_NON_EVENT, counts, _continuation(estimate, k, low, high))
        predicting = counts[(flags & LAST_NON_EVENT) == 0]
        return counts, np.bincount(np.minimum(predicting, largest + 1), minlength=largest + 2)[:largest + 1]

    histogram = np.zeros(largest + 1, dtype=np.int64)
    # counts not adjusted are the store's (counts_of): no file
    with estimate.files.writer("adjusted", k) if adjusting else contextlib.nullcontext() as out:
        chunks = estimate.chunks(k, estimate.pass_rows(row_bytes(k, FLAGS, COUNT, CONTINUATION, ADJUSTED)))
        for counts, counted in in_order(adjusted, chunks):
            if out is not None:
                out.append(counts)
            histogram += counted
    return histogram


def adjusts(estimate, k):
    """Whether order k's counts are Kneser-Ney's continuation counts (not the highest's)."""
    return estimate.discounting.adjusts_counts and k < estimate.order


def counts_of(estimate, k, start, stop):
    """Rows start..stop-1 of `adjusted{k}`, or of the counts where they are not adjusted."""
    if not adjusts(estimate, k):
        return estimate.raw_counts(k, start, stop)
    return estimate.files.read("adjusted", k, start, stop)


def _continuation(estimate, k, low, high):
    """How many order-(k+1) rows have rows low..high-1 of order k as suffix (counted
    when the suffix rows were found)."""
    if k == 1:
        first = estimate.first_rows[0]
        return estimate.word_continuation[first + low:first + high]
    return estimate.files.read("continuation", k, low, high)


def write_unigram_probabilities(estimate, discount):
    """`logp1` and `present1` (and `walk1` with cutoffs) of this estimate's words."""
    logp, present = unigram_probabilities(estimate.exchange.all_words(counts_of(estimate, 1, 0, estimate.sizes[0])), discount,
                                          estimate.interpolate, estimate.always_interpolate, estimate.events)
    mine = slice(estimate.first_rows[0], estimate.first_rows[0] + estimate.sizes[0])
    estimate.files.write("logp", 1, logp[mine])
    estimate.files.write("present", 1, present[mine])
    if estimate.cutoffs:
        estimate.files.write("walk", 1, backoff_walks(logp[mine], present[mine], None, None))
