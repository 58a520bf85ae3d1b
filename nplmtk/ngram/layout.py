"""The binary back-off model's layout (nplmtk/ngram/binary.py writes it, nplmtk/ngram/mapped.py
reads it without numpy) and the domain of its log10 values."""

BINARY_KIND = "backoff-ngram"
# the arrays of each order k, stored as "NAME.k": name -> dtype in the container
TABLES = {"keys": "<i8", "logp": "<f4", "bow": "<f4", "has_bow": "|b1", "node": "|b1"}
PSEUDO_ZERO = -99.0  # log10 0 as ARPA files write it: no probability or weight lies below
# The largest log10 back-off weight a model may hold. bow(h) = (1 - sum p(w | h)) /
# (1 - sum p(w | h')) over the words listed after h: the weight times the lower orders'
# mass of the other words must stay within 1. SRILM's computeBOW, and nplm's, take a
# denominator below Prob_Epsilon (3e-6) for 0, so their weights stay within 10^5.52 (the
# largest in nplm's models of Brown, every discounting method, orders 3 and 5: 10^5.51);
# KenLM's are interpolation weights, within 1. A denominator below 1e-7 lies under the
# rounding of the 7-digit probabilities it is computed from: a larger weight is no estimate.
MAX_LOG10_BACKOFF = 7.0
