"""SRILM's `ngram -gen N -seed S` for a back-off model, sentence for sentence: glibc's
drand48 seeded by srand48(S), and each word found by walking the vocabulary in the order
SRILM's hash table of words (dstruct/src/LHash.cc) holds it, summing the words'
probabilities until the sum passes the random number (lm/src/LM.cc, generateWord)."""
import math

import numpy as np

from .backoff import BackoffModel

PAUSE = "-pau-"  # a word of every SRILM vocabulary (Vocab.cc), never drawn
_MASK64 = (1 << 64) - 1
_MIN_HASH_BITS = 3  # LHash.cc: below 2^3 slots the table is a list
_FILL_RATIO = np.float32(0.8)
LN10 = 2.30258509299404568402  # M_LN10


class Drand48:
    """glibc's srand48/drand48: x' = (0x5DEECE66D x + 0xB) mod 2^48, x / 2^48, the seed's
    low 32 bits in x's high bits above 0x330E."""

    def __init__(self, seed):
        self.x = ((int(seed) & 0xFFFFFFFF) << 16) | 0x330E

    def __call__(self):
        self.x = (0x5DEECE66D * self.x + 0xB) & ((1 << 48) - 1)
        return self.x / float(1 << 48)


def _string_hash(word, bits):
    """LHash_hashKey of a C string: signed chars (x86) folded as i += (i << 3) + c, then
    the multiplicative hash on `bits` bits."""
    value = 0
    for byte in word:
        value = (value + (value << 3) + (byte - 256 if byte >= 128 else byte)) & _MASK64
    return (((value * 1103515245 + 12345) & _MASK64) >> (30 - bits)) & ((1 << bits) - 1)


def hash_order(words):
    """The order in which SRILM's LHash<const char *, ...> iterates its keys after `words`
    (byte strings, distinct) were inserted in turn: linear probing, the table doubled and
    rehashed slot by slot when (n + 1) / 0.8 passes its size."""
    bits, slots, count = 0, [None], 0
    for word in words:
        needed = count + 1 if count + 1 < (1 << _MIN_HASH_BITS) else int(np.float32(count + 2) / _FILL_RATIO)
        if needed > len(slots):
            old = [w for w in slots if w is not None]
            bits = max(needed - 1, 0).bit_length()
            slots = [None] * (1 << bits)
            for key in old:
                slots[_free_slot(slots, key, bits, len(old))] = key
        slots[_free_slot(slots, word, bits, count)] = word
        count += 1
    return [w for w in slots if w is not None]


def _free_slot(slots, word, bits, count):
    if bits < _MIN_HASH_BITS:  # a list: the next free place
        return slots.index(None) if None in slots else count
    index = _string_hash(word, bits)
    while slots[index] is not None:
        index = (index + 1) & ((1 << bits) - 1)
    return index


def srilm_sentences(model, count, seed, unk_is_word=False, max_words=50000):
    """The `count` sentences (lists of words, each yielded as it is drawn) SRILM's `ngram
    -lm M -gen count -seed seed` prints for the back-off `model` as read from its ARPA
    file (its vocabulary in the file's order); `<unk>` is drawn only with `unk_is_word`
    (SRILM's -unk)."""
    if not isinstance(model, BackoffModel):
        raise TypeError("SRILM's sampling is for back-off n-gram models")
    vocab = model.vocab
    # SRILM's Vocab holds <unk>, <s>, </s>, -pau- first, then the words as the ARPA file lists them
    inserted = [vocab.unk_word, "<s>", "</s>", PAUSE] + [w for w in vocab.words[3:] if w != PAUSE]
    order = hash_order([w.encode("utf-8") for w in inserted])
    ids = np.array([vocab.index.get(w.decode("utf-8"), -1) for w in order], dtype=np.int64)
    never = {vocab.bos, -1} | (set() if unk_is_word else {vocab.unk})
    drawn_never = np.array([i in never for i in ids.tolist()])
    random = Drand48(seed)
    cache = {}
    for _ in range(count):
        history = [vocab.bos]
        words = []
        while len(words) < max_words - 1:
            context = tuple(history[-(model.order - 1):]) if model.order > 1 else ()
            if context not in cache:
                cache[context] = _cumulative(model, context, ids)
            word = _draw(*cache[context], random, drawn_never)
            if word == vocab.eos:
                break
            words.append(word)
            history.append(word)
        yield [vocab.words[w] for w in words]


def _cumulative(model, context, ids):
    """log10 p(w | context) of the words in hash order (-inf for -pau-) and the running sums
    of their probabilities in double, as generateWord adds them."""
    log10 = _context_log10probs(model, context)[np.maximum(ids, 0)]
    log10 = np.where(ids >= 0, log10, -np.inf).astype(np.float32)
    probs = np.where(np.isneginf(log10), 0.0, np.exp(log10.astype(np.float64) * LN10))
    return ids, log10, np.cumsum(probs)


def _context_log10probs(model, context):
    """log10 p(w | context) of every word at once, as Ngram::wordProbBO walks the back-off
    nodes from the shortest context up (float32): each longer context that is a node adds
    its weight, and the words stored under it take their own probabilities afresh."""
    index, size = model.index, len(model.vocab)
    log10 = np.full(size, -np.inf, dtype=np.float32)
    log10[index.keys[0]] = model.logp[0]
    weight = np.zeros(size, dtype=np.float32)
    for j in range(len(context)):
        row = index.find(np.array([context[len(context) - 1 - j:]], dtype=np.int32))[0]
        if row < 0 or not model.node[j][row]:
            break
        weight += model.bow[j][row]
        keys = index.keys[j + 1]
        low, high = np.searchsorted(keys, [row * size, (row + 1) * size])
        words = keys[low:high] % size
        log10[words] = model.logp[j + 1][low:high]
        weight[words] = 0
    return log10 + weight


def _draw(ids, log10, sums, random, drawn_never):
    """generateWord: the first word whose running sum passes drand48(), else the last word;
    a word that may not be drawn makes it draw again."""
    while True:
        value = random()
        k = min(int(np.searchsorted(sums, value, side="right")), len(sums) - 1)
        low, high = (sums[k - 1] if k else 0.0), sums[k]
        if not (high - value > 1e-9 or k == len(sums) - 1) or value - low <= 1e-9:
            k = _exact_draw(log10, value)  # numpy's exp may differ from libm's by an ulp: sum as SRILM does
        if not drawn_never[k]:
            return int(ids[k])


def _exact_draw(log10, value):
    total = 0.0
    for k, x in enumerate(log10.tolist()):
        total += 0.0 if x == -math.inf else math.exp(x * LN10)
        if total > value:
            return k
    return len(log10) - 1
