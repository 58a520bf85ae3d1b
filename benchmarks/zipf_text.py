"""Random Zipf text of any size (issue 35): each word drawn on its own from a Zipf
distribution over a vocabulary of --vocab-size words, p(rank r) proportional to
r ** -exponent (r = 1 .. |V|), the word of rank r spelt wR-1 (w0 the most frequent), so
that every tool reads the same tokens; sentences of 1 + Poisson(--mean-length - 1) words.
Deterministic for a seed (and the same text whatever the block size), written to stdout
or --out in blocks of a million words.

    python benchmarks/zipf_text.py --words 20000000 --seed 1 --out z20m.txt
"""
import argparse
import sys

import numpy as np

BLOCK = 1 << 20  # words drawn, spelt and written at a time


def word_table(vocab_size):
    """Each word's bytes followed by a space, in rows of a fixed width, and each row's
    length (the space included)."""
    words = [f"w{rank} ".encode("ascii") for rank in range(vocab_size)]
    width = max(len(w) for w in words)
    table = np.zeros((vocab_size, width), dtype=np.uint8)
    for row, word in enumerate(words):
        table[row, :len(word)] = np.frombuffer(word, dtype=np.uint8)
    return table, np.array([len(w) for w in words], dtype=np.int64)


def sentence_lengths(rng, count, mean_length):
    """`count` sentence lengths, 1 + Poisson(mean_length - 1): no empty sentences."""
    return 1 + rng.poisson(mean_length - 1, size=count)


def zipf_blocks(words, vocab_size=200_000, exponent=1.1, mean_length=20.0, seed=1):
    """The text of `words` words as bytes, a block at a time. The words and the
    sentence lengths come from two streams of the same seed, so a block's size does not
    change the text."""
    cdf = np.cumsum(np.arange(1, vocab_size + 1, dtype=np.float64) ** -exponent)
    cdf /= cdf[-1]
    table, lengths = word_table(vocab_size)
    columns = np.arange(table.shape[1])
    word_rng, length_rng = (np.random.default_rng([seed, stream]) for stream in (0, 1))
    pending, last_end, written = np.empty(0, dtype=np.int64), -1, 0  # sentence ends, as word positions
    while written < words:
        count = min(BLOCK, words - written)
        ids = np.minimum(np.searchsorted(cdf, word_rng.random(count), side="right"), vocab_size - 1)
        while last_end < written + count - 1:
            stops = last_end + np.cumsum(sentence_lengths(length_rng, 4096, mean_length))
            pending, last_end = np.concatenate([pending, stops]), int(stops[-1])
        inside = np.searchsorted(pending, written + count)
        ends, pending = pending[:inside] - written, pending[inside:]
        if written + count == words:
            ends = np.append(ends, count - 1)  # the last sentence cut at `words`
        spelt = table[ids]
        keep = columns < lengths[ids][:, None]
        spelt[ends, lengths[ids[ends]] - 1] = ord("\n")
        yield spelt[keep].tobytes()
        written += count


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--words", type=int, required=True, help="words of text (the last sentence cut there)")
    parser.add_argument("--vocab-size", type=int, default=200_000)
    parser.add_argument("--exponent", type=float, default=1.1)
    parser.add_argument("--mean-length", type=float, default=20.0, help="mean words per sentence")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", default="-", help="the file to write ('-': stdout)")
    args = parser.parse_args()
    out = sys.stdout.buffer if args.out == "-" else open(args.out, "wb")
    for block in zipf_blocks(args.words, args.vocab_size, args.exponent, args.mean_length, args.seed):
        out.write(block)
    out.flush()
    if out is not sys.stdout.buffer:
        out.close()


if __name__ == "__main__":
    main()
