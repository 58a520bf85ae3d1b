"""The third stage, order by order: each row's suffix's back-off walk (`lower{k}`), then
the probabilities of order k's rows (`logp{k}`, `present{k}`) and the back-off weights of
order k-1's contexts (`bow{k-1}`, `node{k-1}`), run by run of whole contexts, by the
in-memory estimate's arithmetic (estimate.context_probabilities, context_bows)."""
import numpy as np

from ..estimate import context_bows, context_probabilities, kept_log10, lmplz_bows, log10_to_prob
from .discounts import counts_of
from .rows import LAST_NON_EVENT, SKIPPED_CONTEXT, flags_of
from .walks import backoff_walks


def probabilities_and_weights(estimate, k, discount):
    """Order k's probabilities and the weights of its contexts (and, with cutoffs, the
    rows' walks `walk{k}` for the order above)."""
    estimate.exchange.suffix_walks(estimate, k)
    walked = k < estimate.order and estimate.cutoffs
    estimate.context_pass(k, lambda start, stop: _contexts(estimate, k, discount, start, stop),
                          ("logp", "present") + (("walk",) if walked else ()),
                          {"bow": 0, "node": False})  # contexts without n-grams after them: no weight


def _contexts(estimate, k, discount, start, stop):
    """The values of order-k rows start..stop-1 (whole contexts): (the first context's row,
    the rows' logp, presence and walks, the contexts' back-off weights and node flags)."""
    events = estimate.events
    flags = flags_of(estimate, k, start, stop)
    count = counts_of(estimate, k, start, stop)
    prefix = estimate.files.read("prefix", k, start, stop)
    suffix_walk = estimate.files.read("lower", k, start, stop)
    first_context = int(prefix[0])
    group, size = prefix - first_context, int(prefix[-1]) - first_context + 1
    skipped_row = (flags & SKIPPED_CONTEXT) != 0
    skipped = np.zeros(size, dtype=bool)
    skipped[group] = skipped_row
    eligible = ((flags & (SKIPPED_CONTEXT | LAST_NON_EVENT)) == 0) & (count > 0)
    lower = log10_to_prob(np.where(eligible, suffix_walk["result"] + suffix_walk["weight"], -np.inf))
    prob, keep, gamma = context_probabilities(count, lower, group, size, eligible, skipped, discount,
                                              estimate.interpolate, estimate.always_interpolate, events)
    logp = kept_log10(prob, keep)
    node = np.zeros(size, dtype=bool)
    node[group[keep]] = True
    bow = lmplz_bows(gamma, node) if estimate.lmplz_weights else context_bows(logp, keep, lower, group, node)
    rows = {"logp": logp, "present": keep}
    if k < estimate.order and estimate.cutoffs:
        rows["walk"] = backoff_walks(logp, keep, suffix_walk, bow[group])
    return first_context, rows, {"bow": bow, "node": node}
