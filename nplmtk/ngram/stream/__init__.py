"""Estimating back-off models out of core, from counts on disk (store.py), in passes over
files of each order's rows as KenLM's lmplz does (Heafield et al. 2013): each order's rows
stay in their lexicographic order on disk, and every value that an n-gram needs from
another order (its prefix's row, its suffix's row, the number of words that precede it,
its suffix's back-off walk) is found by a pass that holds one window of that order in
memory, as many passes as windows. The arithmetic is estimate.py's own
(`context_probabilities`, `context_bows`, `unigram_probabilities`, `fitted_discounts`),
run on whole contexts at a time, so the model is the in-memory estimate's to the byte
whatever the memory.

The passes cover every discounting of discounts.py (each fitted on counts-of-counts
counted by a pass), interpolated or backing off, with or without SRILM's cutoffs
(-gtNmin), pruned or not, SRILM's or lmplz's (-always-interpolate), of words or of
classes. One module a stage, in the order an estimate runs them:

- files.py: every working file declared once (values, writer, last readers);
- pipeline.py: StreamEstimate, the stages in order and the passes they share;
- rows.py: prefix and suffix rows, Kneser-Ney's continuation counts;
- discounts.py: the counts discounted, the discounts, the unigrams' probabilities;
- probabilities.py: the suffixes' walks, each context's probabilities and weight;
- walks.py: with cutoffs, the back-off walk and SRILM's fixupProbs;
- prune.py: SRILM's -prune on the files;
- model.py: the model's rows (DiskModel);
- writers.py: the model written as ARPA and binary files."""
from .files import WALK
from .model import DiskModel
from .pipeline import StreamEstimate, fits_in_memory, peak_so_far, timed_stage
from .rows import NO_ROW, prefix_rows

__all__ = ["WALK", "DiskModel", "NO_ROW", "StreamEstimate", "fits_in_memory", "peak_so_far", "prefix_rows",
           "timed_stage"]
