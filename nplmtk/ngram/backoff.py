"""Back-off n-gram models (the content of an ARPA file) and their scoring."""
import math

import numpy as np

from .._ext.backoff_kernels import BackoffTables, children_runs, context_nodes
from ..lm import LanguageModel
from .index import NgramIndex
from .layout import MAX_LOG10_BACKOFF, PSEUDO_ZERO



def log10_fault(value, weight):
    """Why `value`, a log10 probability (a back-off weight if `weight`) read from a file,
    is none that an estimator writes (-99 is log 0); None if it is one."""
    value = float(value)
    if math.isnan(value):
        return "not a number"
    if weight and value > MAX_LOG10_BACKOFF:
        return (f"above {MAX_LOG10_BACKOFF:g}, which no estimate reaches (it would divide by a lower-order mass "
                f"below 1e-{MAX_LOG10_BACKOFF:g})")
    if not weight and value > 0:
        return "above 0 (a probability above 1)"
    if value < PSEUDO_ZERO:
        return f"below {PSEUDO_ZERO:g}, which is log 0"
    return None


def outside_log10_domain(values, weight):
    """Where `log10_fault` refuses `values` (one pass of comparisons), -inf (log 0 as
    read from an ARPA file) let through."""
    highest = MAX_LOG10_BACKOFF if weight else 0.0
    return ~((values >= PSEUDO_ZERO) & (values <= highest)) & (values != -np.inf)


def backoff_walk(index, logp, bow, node, rows, present=None, with_order=False):
    """log10 p(w | h) for each row (h..., w) by the back-off algorithm, exactly as SRILM's
    Ngram::wordProbBO computes it, in float32: the longest n-gram (h_j.., w) found gives
    its probability, plus the back-off weights of every longer context h_i.., i < j, as
    long as those contexts exist. -inf where even the unigram is missing."""
    rows = np.asarray(rows)
    count, width = rows.shape
    context_len = min(width - 1, index.order - 1)
    rows = rows[:, width - 1 - context_len:]
    # chains[a][j]: index of rows[:, a:a+j+1] in the order-(j+1) table
    chains = [index.chain(rows[:, a:]) for a in range(context_len + 1)]
    result = np.full(count, -np.inf, dtype=np.float32)
    weight = np.zeros(count, dtype=np.float32)
    alive = np.ones(count, dtype=bool)
    used = np.zeros(count, dtype=np.int32)
    for j in range(context_len + 1):
        found = chains[context_len - j][j]
        hit = alive & (found >= 0)
        if present is not None:
            hit[hit] = present[j][found[hit]]
        result[hit] = logp[j][found[hit]]
        weight[hit] = 0
        used[hit] = j + 1
        if j == context_len:
            break
        context = chains[context_len - j - 1][j]
        alive &= context >= 0
        alive[alive] = node[j][context[alive]]
        weight[alive] += bow[j][context[alive]]
    return (result + weight, used) if with_order else result + weight


class BackoffModel(LanguageModel):
    """Orders 1..N: `grams[k-1]` (n_k, k) int32 sorted rows, `logp` and `bow` float32
    log10 values (-inf for zero), `has_bow` marking n-grams that are contexts.

    `grams` may be None when `index` is given (a binary model): the rows are then rebuilt
    from the index's keys when first asked for; scoring needs only the keys. `node`, when
    given, are the contexts of the back-off walk (else computed from the tables when first
    needed), and `children` the runs of `children` below when the caller has them.
    `as_read` marks values read from a file (ARPA or binary): they are what that file
    gives, where an estimate's are rounded as its ARPA file would print them."""

    kind = "arpa"
    described = "a back-off n-gram model"

    def __init__(self, vocab, grams, logp, bow, has_bow, index=None, node=None, children=None, as_read=False):
        self.vocab, self.as_read = vocab, as_read
        self._grams, self.logp, self.bow, self.has_bow = grams, logp, bow, has_bow
        self.index = index or NgramIndex(len(vocab), grams)
        self._children, self._tables, self._node = children, None, node

    @property
    def order(self):
        return len(self.logp)

    @property
    def grams(self):
        if self._grams is None:
            self._grams = self.index.rows()
        return self._grams

    @property
    def node(self):
        """Contexts the back-off walk may pass: n-grams with a weight, prefixes of longer
        n-grams, and every suffix of those (SRILM's context trie); found when first asked
        for (writing an ARPA file needs none)."""
        if self._node is None:
            self._node = context_nodes(self.index.keys, self.has_bow, self.children, len(self.vocab))
        return self._node

    @property
    def children(self):
        """`children[k-1][i] .. children[k-1][i+1]`: the rows of the (k+1)-grams that
        extend row i of the k-grams (their keys are sorted by prefix)."""
        if self._children is None:
            keys = self.index.keys
            self._children = [children_runs(len(keys[j]), keys[j + 1], len(self.vocab)) for j in range(self.order - 1)]
        return self._children

    @property
    def tables(self):
        """The tables as the scoring kernel reads them (built on first use)."""
        if self._tables is None:
            self._tables = BackoffTables(len(self.vocab), self.index.keys, self.logp, self.bow, self.node,
                                         self.children)
        return self._tables

    def truncated(self, order):
        """The same model limited to `order` (as SRILM's `-order`)."""
        if order >= self.order:
            return self
        has_bow = self.has_bow[:order - 1] + [np.zeros(len(self.grams[order - 1]), dtype=bool)]
        return BackoffModel(self.vocab, self.grams[:order], self.logp[:order], self.bow[:order], has_bow)

    def limited_to(self, words):
        """The model without the n-grams that have a word outside `words` (SRILM's
        -limit-vocab); `<s>`, `</s>` and the unknown word always stay. Weights unchanged."""
        from ..vocab import Vocabulary
        keep_word = np.zeros(len(self.vocab), dtype=bool)
        keep_word[[self.vocab.index[w] for w in words if w in self.vocab.index]] = True
        keep_word[[self.vocab.unk, self.vocab.bos, self.vocab.eos]] = True
        keep = [keep_word[grams].all(axis=1) for grams in self.grams]
        kept_words = [self.vocab.words[w] for w in self.grams[0][keep[0]][:, 0]]
        vocab = Vocabulary(kept_words, unk=self.vocab.unk_word)
        new_id = np.full(len(self.vocab), -1, dtype=np.int32)
        new_id[[self.vocab.index[w] for w in vocab.words if w in self.vocab.index]] = \
            [vocab.index[w] for w in vocab.words if w in self.vocab.index]
        grams = [new_id[g[k]] for g, k in zip(self.grams, keep)]
        order = [np.lexsort(g.T[::-1]) for g in grams]  # rows sorted by the new ids
        return BackoffModel(vocab, [g[o] for g, o in zip(grams, order)],
                            [lp[k][o] for lp, k, o in zip(self.logp, keep, order)],
                            [b[k][o] for b, k, o in zip(self.bow, keep, order)],
                            [h[k][o] for h, k, o in zip(self.has_bow, keep, order)])

    def score_rows(self, rows, with_order=False):
        """float32 log10 p(w | h) for rows (h..., w) of word ids; `with_order` adds the
        order of the n-gram each probability came from (0: none)."""
        scores, used = self.tables.score_rows(np.asarray(rows, dtype=np.int32))
        return (scores, used.astype(np.int32)) if with_order else scores

    def _scored(self, corpus):
        """(log10 p float32, order of the n-gram used) of every predicted token."""
        self.check_vocab(corpus)
        return self.tables.score_sentences(corpus.ids, corpus.offsets, self.vocab.bos, self.vocab.eos)

    def log10probs(self, corpus):
        return self._scored(corpus)[0].astype(np.float64)

    def hit_orders(self, corpus):
        return self._scored(corpus)[1].tolist()

    def hit_tags(self, corpus):
        """SRILM's -debug 2 tag of each token: the order of the n-gram used, or OOV."""
        from ..ppl_report import order_tag
        return [order_tag(n) for n in self.hit_orders(corpus)]

    # -- a word at a time (nplmtk/incremental.py): the state is the context, as a tuple of
    # ids, cut to what the model can still use (BackoffTables.score_steps)
    def begin_state(self):
        return self.score_word((), self.vocab.bos)[1]

    def null_state(self):
        return ()

    def score_word(self, state, word):
        word = self.vocab.id(word) if isinstance(word, str) else word
        score, length = self.tables.score_context(state, word)
        return float(score), (state + (word,))[len(state) + 1 - length:] if length else ()

    def score_words(self, states, words):
        from ..incremental import checked_pairs, padded_windows, word_ids
        ids = word_ids(self.vocab, words)
        checked_pairs(states, ids)
        rows = padded_windows(states, ids, self.order)
        scores, lengths = self.tables.score_steps(rows)
        after = [tuple(row[len(row) - length:].tolist()) if length else () for row, length in zip(rows, lengths.tolist())]
        return scores.astype(np.float64), after

    def context_id(self, context, word=None):
        """SRILM's Ngram::contextID: the longest context (its last words) that is a node of
        the back-off walk, and, given `word`, has an n-gram ending in it; the id numbers
        the node (1: no context)."""
        found, length = 1, 0
        for i, row in self._context_rows(context):
            if word is not None and self.index.find(np.array([list(context[-i:]) + [word]], dtype=np.int32))[0] < 0:
                continue
            found, length = 2 + sum(len(keys) for keys in self.index.keys[:i - 1]) + int(row), i
        return found, length

    def context_bow(self, context, length):
        """SRILM's Ngram::contextBOW: the back-off weights of the contexts longer than
        `length` words along the walk, added in float32 as SRILM adds them."""
        bow = np.float32(0.0)
        for i, row in self._context_rows(context):
            if i > length:
                bow = np.float32(bow + self.bow[i - 1][row])
        return float(bow)

    def _context_rows(self, context):
        """(i, row of the i-gram) for the last i words of `context` (ids, oldest first),
        i = 1, 2, ..., while they are nodes of the back-off walk (SRILM's context trie)."""
        context = [int(w) for w in context]
        for i in range(1, min(self.order - 1, len(context)) + 1):
            row = self.index.find(np.array([context[-i:]], dtype=np.int32))[0]
            if row < 0 or not self.node[i - 1][row]:
                return
            yield i, row

    def next_distribution(self, history):
        history = ([self.vocab.bos] + list(history))[-(self.order - 1):] if self.order > 1 else []
        rows = np.empty((len(self.vocab), len(history) + 1), dtype=np.int32)
        rows[:, :-1] = history
        rows[:, -1] = np.arange(len(self.vocab))
        return 10.0 ** self.score_rows(rows).astype(np.float64)
