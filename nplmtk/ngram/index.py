"""Sorted n-gram tables with vectorised lookup.

The n-grams of order k are rows of a (n_k, k) int32 array in lexicographic order of
their word ids. Each has an int64 key, `index of its (k-1)-word prefix * V + last word`
(unigrams: the word id), so the keys of an order are sorted and `np.searchsorted`
finds a whole array of n-grams at once, order by order along the prefix chain.
"""
import numpy as np

from ..errors import NplmError


def lookup(keys, query):
    """Positions of `query` values in the sorted `keys`, -1 where absent."""
    if len(keys) == 0:
        return np.full(len(query), -1, dtype=np.int64)
    pos = np.searchsorted(keys, query)
    np.minimum(pos, len(keys) - 1, out=pos)
    return np.where(keys[pos] == query, pos, -1)


class NgramIndex:
    """Keys for the tables of orders 1..N over a vocabulary of size `vocab_size`."""

    def __init__(self, vocab_size, grams_by_order, keys=None):
        """`keys`, when the caller already has them, skips their computation."""
        self.vocab_size = vocab_size
        self.keys = list(keys or [])
        for k, grams in enumerate(grams_by_order[len(self.keys):], len(self.keys) + 1):
            if k == 1:
                keys = grams[:, 0].astype(np.int64)
            else:
                prefix = self.find(grams[:, :-1])
                if np.any(prefix < 0):
                    raise NplmError(f"a {k}-gram has no entry for its {k - 1}-word prefix")
                keys = prefix * vocab_size + grams[:, -1]
            if len(keys) > 1 and not np.all(keys[1:] > keys[:-1]):
                raise NplmError(f"{k}-grams are not sorted and unique")
            self.keys.append(keys)

    @property
    def order(self):
        return len(self.keys)

    def chain(self, grams):
        """For each j, the index of `grams[:, :j+1]` in the order-(j+1) table (-1 if absent)."""
        out, index = [], None
        for j in range(min(grams.shape[1], self.order)):
            words = grams[:, j].astype(np.int64)
            key = words if j == 0 else index * self.vocab_size + words
            bad = words < 0 if j == 0 else (words < 0) | (index < 0)
            key[bad] = -1
            index = lookup(self.keys[j], key)
            out.append(index)
        return out

    def find(self, grams):
        """Index of each row of `grams` (m, k) in the order-k table, -1 if absent."""
        if grams.shape[1] > self.order:
            return np.full(len(grams), -1, dtype=np.int64)
        return self.chain(grams)[-1]

    def subset(self, keep):
        """The index of the tables reduced to the rows where `keep[k-1]` is set (every
        kept row's prefix must be kept too)."""
        keys, new_position = [], None
        for k, (old, mask) in enumerate(zip(self.keys, keep), 1):
            kept = old[mask]
            if k > 1:
                kept = new_position[kept // self.vocab_size] * self.vocab_size + kept % self.vocab_size
            keys.append(kept)
            new_position = np.cumsum(mask) - 1
        return NgramIndex(self.vocab_size, [], keys)

    def prefix_of(self, k):
        """Index in the order-(k-1) table of the prefix of each k-gram."""
        return self.keys[k - 1] // self.vocab_size

    def rows(self):
        """The n-grams of each order as (n_k, k) int32 rows of word ids, rebuilt from the keys."""
        grams = []
        for k, keys in enumerate(self.keys, 1):
            words = (keys % self.vocab_size).astype(np.int32)[:, None]
            grams.append(words if k == 1 else np.hstack([grams[-1][keys // self.vocab_size], words]))
        return grams
