"""The discounting methods of SRILM's ngram-count (Discount.cc): modified and original
Kneser-Ney, Witten-Bell, Good-Turing, absolute discounting and additive smoothing, each
fitted on one order's counts-of-counts; `METHODS` names them as the flags do."""
import math

import numpy as np

from ..errors import NplmError

PROB_EPSILON = 3e-6  # SRILM's Prob_Epsilon
FALLBACK_DISCOUNTS = (0.5, 1.0, 1.5)  # KenLM's --discount_fallback defaults


class OrderSettings:
    """What a discounting method may need for one order: SRILM's -gtNmin (`min_count`),
    -gtNmax (`max_count`), the -cdiscount or -addsmooth constant, the number of events."""

    def __init__(self, order, min_count=1, max_count=None, constant=None, events=None, highest=False):
        self.order, self.min_count, self.max_count, self.highest = order, min_count, max_count, highest
        self.constant, self.events = constant, events


class CountsOfCounts:
    """n_c for c = 0 .. len(n) - 1, counted beforehand (by a pass over counts on disk):
    what a discounting method reads of an order's counts."""

    def __init__(self, n):
        self.n = np.asarray(n, dtype=np.int64)


def _counts_of_counts(counts, largest):
    """n_c for c = 0 .. largest (count c of n-grams counted c times)."""
    if isinstance(counts, CountsOfCounts):
        if len(counts.n) <= largest:
            raise NplmError(f"counts-of-counts up to {len(counts.n) - 1} where {largest} are needed")
        return counts.n[:largest + 1]
    return np.bincount(counts[counts <= largest].astype(np.int64), minlength=largest + 1)[:largest + 1]


class _Discount:
    """One order's discounting (SRILM's Discount): `factor` multiplies each count, and
    `lower_weight` is the weight of the lower order in interpolated models (0: none).
    `no_discount` (SRILM's nodiscount) turns the estimate into plain relative frequencies
    without SRILM's retry; `debug_lines` are what SRILM's -debug 1 prints. `factor` is
    given each row's context's total and observed words where `reads_contexts`, else None."""
    adjusts_counts = False
    reads_contexts = False
    fallback = False
    no_discount = False
    name = ""

    def __init__(self, counts, settings, warn):
        self.min_count = settings.min_count
        self.debug_lines = []

    def _cutoff(self, count, factor):
        # count 0: factor 1 (nothing to discount); below -gtNmin: 0 (the n-gram is dropped)
        if self.min_count > 1:
            factor = np.where(count < self.min_count, 0.0, factor)
        return np.where(count <= 0, 1.0, factor)

    def lower_weight(self, total, observed, min2, min3):
        return np.zeros(len(total))


class ModifiedKneserNey(_Discount):
    """Discounts D1, D2, D3+ of one order (Chen & Goodman 1998 eq. 26; SRILM ModKneserNey).
    `fallback` is set when the counts-of-counts give discounts out of range."""
    adjusts_counts = True
    name = "ModKneserNey"

    def __init__(self, counts, settings, warn):
        super().__init__(counts, settings, warn)
        n = [int(c) for c in _counts_of_counts(counts, 4)[1:]]
        self.counts_of_counts = n
        self.fallback = False
        self.debug_lines = _modifying(settings) + [f"Kneser-Ney smoothing {settings.order}-grams"] + [
            f"n{i} = {c}" for i, c in enumerate(n, 1)]
        if min(n[:3]) > 0:
            # Y = n1 / (n1 + 2 n2), D_c = c - (c + 1) Y n_{c+1} / n_c
            y = n[0] / (n[0] + 2 * n[1])
            self.d = (1 - 2 * y * n[1] / n[0], 2 - 3 * y * n[2] / n[1], 3 - 4 * y * n[3] / n[2])
            self.debug_lines += [f"D{i} = {_g(d)}" for i, d in zip(("1", "2", "3+"), self.d)]
        else:
            self.d = (-1.0, -1.0, -1.0)
        if not all(0 <= d <= i for i, d in enumerate(self.d, 1)):
            # Degenerate counts-of-counts (e.g. repeated text): fall back as KenLM does, and
            # when it does (n1, n2 or n3 zero, or some D_c outside [0, c]).
            self.fallback = True
            self.d = FALLBACK_DISCOUNTS
            warn(f"order {settings.order}: counts-of-counts n1..n4 = {n} give discounts out of range; "
                 f"using fallback discounts {' '.join(map(str, FALLBACK_DISCOUNTS))}")

    def factor(self, count, total, observed):
        d1, d2, d3 = self.d
        c = count.astype(np.float64)
        # (c - D(c)) / c, D(c) = D1, D2 or D3+ (looked up: three cases by np.where took a
        # third of the probabilities' arithmetic); counts of 0 or less are _cutoff's
        discounted = np.array([d3, d1, d2, d3])[np.minimum(count, 3)]
        np.subtract(c, discounted, out=discounted)
        with np.errstate(divide="ignore", invalid="ignore"):
            return self._cutoff(count, np.divide(discounted, c, out=discounted))

    def lower_weight(self, total, observed, min2, min3):
        d1, d2, d3 = self.d
        # gamma(h) = (D1 N1(h.) + D2 N2(h.) + D3+ N3+(h.)) / c(h)
        with np.errstate(divide="ignore", invalid="ignore"):
            return (d1 * (observed - min2) + d2 * (min2 - min3) + d3 * min3) / total


class KneserNey(_Discount):
    """Original Kneser-Ney (SRILM's KneserNey, -ukndiscount): one discount
    D = n1 / (n1 + 2 n2) on the same continuation counts as the modified version."""
    adjusts_counts = True
    name = "KneserNey"

    def __init__(self, counts, settings, warn):
        super().__init__(counts, settings, warn)
        n1, n2 = (int(c) for c in _counts_of_counts(counts, 2)[1:])
        self.debug_lines = _modifying(settings) + [f"Kneser-Ney smoothing {settings.order}-grams", f"n1 = {n1}",
                                                   f"n2 = {n2}"]
        if n1 == 0 or n2 == 0:
            raise NplmError(f"order {settings.order}: original Kneser-Ney needs n-grams counted once and twice "
                            f"(n1 = {n1}, n2 = {n2}), as SRILM's does")
        self.d = n1 / (n1 + 2 * n2)
        self.debug_lines.append(f"D = {_g(self.d)}")

    def factor(self, count, total, observed):
        with np.errstate(divide="ignore", invalid="ignore"):
            return self._cutoff(count, (count - self.d) / count)

    def lower_weight(self, total, observed, min2, min3):
        with np.errstate(divide="ignore", invalid="ignore"):
            return self.d * observed / total  # D N1+(h.) / c(h)


class WittenBell(_Discount):
    """SRILM's WittenBell: discount total/(total+types), lower weight types/(total+types)."""
    name = "WittenBell"
    reads_contexts = True

    def factor(self, count, total, observed):
        # p(w | h) = c(hw) / (c(h) + N1+(h.))
        with np.errstate(divide="ignore", invalid="ignore"):
            return self._cutoff(count, total / (total + observed))

    def lower_weight(self, total, observed, min2, min3):
        # gamma(h) = N1+(h.) / (c(h) + N1+(h.))
        with np.errstate(divide="ignore", invalid="ignore"):
            return observed / (total + observed)


class GoodTuring(_Discount):
    """SRILM's GoodTuring (its default discounting): counts 1 .. max_count (-gtNmax) are
    discounted by d(c) = ((c+1) n_{c+1} / (c n_c) - A) / (1 - A), A = (K+1) n_{K+1} / n_1,
    larger counts are kept whole. Not interpolated."""
    name = "GoodTuring"

    def __init__(self, counts, settings, warn):
        super().__init__(counts, settings, warn)
        largest = settings.max_count
        n = [int(c) for c in _counts_of_counts(counts, largest + 1)]
        self.debug_lines = [f"Good-Turing discounting {settings.order}-grams"] + [
            f"GT-count [{i}] = {c}" for i, c in enumerate(n)]
        if n[1] == 0:
            warn(f"order {settings.order}: no singleton counts")
            largest = 0
        while largest > 0 and n[largest + 1] == 0:
            warn(f"order {settings.order}: count of count {largest + 1} is zero -- lowering maxcount")
            largest -= 1
        self.coefficients = np.ones(largest + 1)
        if largest <= 0:
            warn(f"order {settings.order}: GT discounting disabled")
        else:
            common = (largest + 1) * n[largest + 1] / n[1]
            for c in range(1, largest + 1):
                if n[c] == 0:
                    warn(f"order {settings.order}: count of count {c} is zero")
                    continue
                plain = (c + 1) * n[c + 1] / (c * n[c])
                coefficient = (plain - common) / (1 - common) if common != 1 else math.inf
                if not math.isfinite(coefficient) or coefficient <= PROB_EPSILON or plain > 1:
                    warn(f"order {settings.order}: discount coeff {c} is out of range: {_g(coefficient)}")
                    coefficient = 1.0
                self.coefficients[c] = coefficient
        self.max_count = largest
        self.no_discount = self.min_count <= 1 and largest <= 0

    def factor(self, count, total, observed):
        clipped = np.minimum(count, self.max_count).astype(np.int64)
        return self._cutoff(count, np.where(count > self.max_count, 1.0, self.coefficients[np.maximum(clipped, 0)]))


class AbsoluteDiscount(_Discount):
    """SRILM's ConstDiscount (-cdiscount D, Ney's absolute discounting): D in [0, 1] taken
    from every count, D N1+(h.) / c(h) to the lower order."""
    name = "ConstDiscount"

    def __init__(self, counts, settings, warn):
        super().__init__(counts, settings, warn)
        self.d = min(max(settings.constant, 0.0), 1.0)
        self.no_discount = self.min_count <= 1 and self.d == 0

    def factor(self, count, total, observed):
        with np.errstate(divide="ignore", invalid="ignore"):
            return self._cutoff(count, (count - self.d) / count)

    def lower_weight(self, total, observed, min2, min3):
        with np.errstate(divide="ignore", invalid="ignore"):
            return self.d * observed / total


class AddSmoothing(_Discount):
    """SRILM's AddSmooth (-addsmooth delta): p = (c + delta) / (c(h) + |V| delta) for the
    words seen after h. Not interpolated."""
    name = "AddSmooth"
    reads_contexts = True

    def __init__(self, counts, settings, warn):
        super().__init__(counts, settings, warn)
        self.delta = max(settings.constant, 0.0)
        self.events = settings.events
        self.no_discount = self.min_count <= 1 and self.delta == 0

    def factor(self, count, total, observed):
        with np.errstate(divide="ignore", invalid="ignore"):
            return self._cutoff(count, (1 + self.delta / count) / (1 + self.events * self.delta / total))


def _modifying(settings):
    return [] if settings.highest else [f"modifying {settings.order}-gram counts for Kneser-Ney smoothing"]


def _g(value):
    """A double as C++'s ostream prints it (6 significant digits)."""
    return f"{value:g}"


# -kndiscount, -ukndiscount, -wbdiscount, Good-Turing (SRILM's default), -cdiscount, -addsmooth
METHODS = {"kn": ModifiedKneserNey, "ukn": KneserNey, "wb": WittenBell, "gt": GoodTuring,
           "cd": AbsoluteDiscount, "add": AddSmoothing}
NEEDS_CONSTANT = {"cd", "add"}
GT_MAX_COUNTS = (1, 7)  # SRILM's default -gt1max, and -gtNmax for N > 1
