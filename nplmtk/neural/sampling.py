"""Importance sampling (Bengio & Senecal 2003): the proposal Q and the policy of the sample
size N (Algorithm 4). The draws and the sampled steps are the kernels'."""
import time
import warnings
from types import SimpleNamespace

import numpy as np

from .._ext.sampling_kernels import alias_table, draw
from ..errors import NplmWarning
from ..lm import perplexity_of

PROPOSAL_BLOCK = 1 << 22  # windows counted at a time


class Proposal:
    """The proposal Q: a unigram `q` (positive, normalised here), drawn from by Walker's
    alias method, and optionally a bigram part mixed per previous word: `bigram` =
    (row_start, successors, successor_cdf, successor_p, keep), rows of successors sorted
    by id with their cumulative and plain probabilities p(w|v), and keep_v the weight of
    row v (Q(w|v) = keep_v p(w|v) + (1 - keep_v) q(w))."""

    def __init__(self, q, bigram=None):
        q = np.ascontiguousarray(q, dtype=np.float64)
        if q.ndim != 1 or len(q) == 0 or not np.all(q > 0):
            raise ValueError("a proposal needs a positive probability for every word")
        q = q / q.sum()
        self.vocab_size = len(q)
        self.alias_keep, self.alias_other = alias_table(q)
        self.log_q = np.log(q).astype(np.float32)
        self.bigram = None
        if bigram is not None:
            row_start, successors, cdf, p, keep = bigram
            self.bigram = (np.ascontiguousarray(row_start, dtype=np.int64),
                           np.ascontiguousarray(successors, dtype=np.int32),
                           np.ascontiguousarray(cdf, dtype=np.float64), np.ascontiguousarray(p, dtype=np.float64),
                           np.ascontiguousarray(keep, dtype=np.float64))

    def draw(self, count, seed=0, windows=None):
        """`count` words drawn as training draws them (for a batch of `windows` with the
        bigram part): for tests of the sampler."""
        return draw(self, count, seed, windows)


def proposal(windows, vocab_size, kind):
    """Q from the training examples: the unigram of the targets (add-one, so Q > 0 wherever
    P > 0), and for "bigram" the relative frequencies p(w|v) of each previous word v,
    mixed with the unigram by Witten-Bell's keep_v = c(v) / (c(v) + distinct successors).
    The examples are windows (previous word, target last), or a recurrent model's steps
    (steps, (inputs, targets), streams; padding targets -1)."""
    counts, pairs = np.ones(vocab_size), []
    per_block = max(1, PROPOSAL_BLOCK // max(1, int(np.prod(windows[:1].shape[2:]))))  # targets per example
    for start in range(0, len(windows), per_block):  # `windows` may make its rows on demand
        block = windows[start:start + per_block]
        targets, previous = block[:, -1].reshape(-1), block[:, -2].reshape(-1)
        if targets.size and targets.min() < 0:
            previous, targets = previous[targets >= 0], targets[targets >= 0]
        counts += np.bincount(targets, minlength=vocab_size)
        if kind == "bigram":
            pairs.append(np.unique(previous.astype(np.int64) * vocab_size + targets, return_counts=True))
    bigram = None
    if kind == "bigram":
        keys, pair_counts = pairs[0]
        if len(pairs) > 1:
            keys, inverse = np.unique(np.concatenate([p[0] for p in pairs]), return_inverse=True)
            pair_counts = np.bincount(inverse, weights=np.concatenate([p[1] for p in pairs])).astype(np.int64)
        rows, successors = keys // vocab_size, (keys % vocab_size).astype(np.int32)
        row_start = np.searchsorted(rows, np.arange(vocab_size + 1)).astype(np.int64)
        totals = np.bincount(rows, weights=pair_counts, minlength=vocab_size)
        distinct = np.bincount(rows, minlength=vocab_size)
        p = pair_counts / totals[rows]
        running = np.concatenate([[0.0], np.cumsum(p)])
        cumulative = running[1:] - running[row_start[rows]]  # cumulative probability within each row
        cumulative[row_start[1:][distinct > 0] - 1] = 1.0
        keep = np.where(totals > 0, totals / np.maximum(totals + distinct, 1), 0.0)
        bigram = (row_start, successors, cumulative, p, keep)
    return Proposal(counts / counts.sum(), bigram)


class ImportanceSampling:
    """The proposal and the sample-size policy of Bengio & Senecal (2003): N fixed (`is`),
    or Algorithm 4 (`is-adaptive`): after each block of about `check_every` examples the
    exact perplexity of a tiny training set is computed (and at the end of each epoch); if
    it rose above the last accepted one (state["tiny_ppl"], C_last), N doubles and the
    parameters return to the block's start, which is trained again. With `ess_min`, N also
    doubles when a round's mean effective sample size falls below it. N stops at
    `max_samples` (and |V|): once there, a rise is accepted, and a warning says so once.
    Every check and change of N is an event in the epoch's log record."""

    def __init__(self, model, examples, config, state):
        vocab_size = len(model.vocab)
        self.proposal = proposal(examples, vocab_size, config.proposal)
        self.config = config
        self.adaptive = config.criterion == "is-adaptive"
        self.tiny = model.tiny_examples(examples, config.tiny_set, config.seed + 1)
        self.most = min(vocab_size, config.max_samples)  # where N stops growing
        self.capped = config.max_samples < vocab_size  # (at |V| the samples are the exact sum anyway)
        self.warned = False
        self.events = []
        self.examples = 0  # since training started (this run)
        self.started = time.perf_counter()
        self.ess_sum, self.ess_examples = 0.0, 0  # this epoch's, for its log record
        self.block = None  # the block under way: its first round, parameters, logp and seen
        self.before_check = lambda: None  # -mpi param: gather the output blocks first
        self.carried = []  # each worker's kernel's `carried` arrays (the trainer's)

    def seed(self, first_update):
        return (self.config.seed * 0x9E3779B1 + first_update * 0x85EBCA77 + 1) % 2 ** 64

    def tiny_ppl(self, model):
        return perplexity_of(model.example_logprobs(self.tiny).mean())

    def begin_round(self, model, round_index, state):
        """A block starts: its parameters kept, and what the workers' kernels carry from one
        chunk to the next (`carried`: a recurrent model's streams' state, Adam's moments)."""
        if self.adaptive and state.get("tiny_ppl") is None:  # Algorithm 4's first C_last
            self.before_check()
            state["tiny_ppl"] = self.tiny_ppl(model)
        if self.adaptive and self.block is None:
            carried = [(arrays, {k: v.copy() for k, v in arrays.items()}) for arrays in self.carried if arrays]
            self.block = SimpleNamespace(start=round_index, params={k: v.copy() for k, v in model.params.items()},
                                         carried=carried, logp=0.0, seen=0)

    def end_round(self, model, results, seen, state, last):
        """Returns (logp, seen, round) of a block to train again, or None. A block ends
        after `check_every` examples or with the epoch's last round."""
        self.examples += seen
        round_ess = sum(result[2] for result in results)
        self.ess_sum += round_ess
        self.ess_examples += seen
        ess = round_ess / max(seen, 1)
        if self.config.ess_min and ess < self.config.ess_min:
            if state["samples"] < self.most:
                state["samples"] = min(2 * state["samples"], self.most)
                self._event("ess", state, mean_ess=ess)
            else:
                self._at_the_cap(state, f"the mean effective sample size {ess:.1f} fell below {self.config.ess_min}")
        if not self.adaptive:
            return None
        block = self.block
        block.logp += sum(result[0] for result in results)
        block.seen += seen
        if block.seen < self.config.check_every and not last:
            return None
        self.before_check()
        before, now = state["tiny_ppl"], self.tiny_ppl(model)
        self.block = None
        if now > before and state["samples"] < self.most:
            for name, array in block.params.items():
                model.params[name][...] = array
            for live, saved in block.carried:
                for name, array in saved.items():
                    live[name][...] = array
            state["samples"] = min(2 * state["samples"], self.most)
            self._event("ppl rose", state, tiny_ppl=now, tiny_ppl_before=before)
            return block.logp, block.seen, block.start
        if now > before:
            self._at_the_cap(state, f"the tiny set's perplexity rose from {before:.2f} to {now:.2f}")
        state["tiny_ppl"] = now
        self._event("check", state, tiny_ppl=now)
        return None

    def _at_the_cap(self, state, why):
        """N is at its cap and the policy asks for more: go on with N, and say so once."""
        if self.capped and not self.warned:
            warnings.warn(f"importance sampling: {why}, but the sample size is at its cap of {self.most} "
                          "(max_samples): training goes on with it", NplmWarning)
            self.warned = True

    def _event(self, reason, state, **fields):
        """A line of the N trajectory: examples seen and wall-clock seconds since this
        run's training began, N from now on, why."""
        self.events.append({"examples": self.examples, "seconds": round(time.perf_counter() - self.started, 3),
                            "samples": state["samples"], "reason": reason, **fields})
