"""A large corpus generated on the fly: Brown train repeated, its sentences shuffled anew
each time, words outside a vocabulary spelt UNKWORD (KenLM's lmplz refuses `<unk>` in
text; `nplm ... -vocab V -unk` reads UNKWORD as <unk>), written to stdout until --words.

    python benchmarks/big_text.py --brown ../shared/data/brown --vocab vocab.txt --words 200000000
"""
import argparse
import sys

import numpy as np


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--brown", default="../shared/data/brown")
    parser.add_argument("--vocab", help="words outside this vocabulary file become UNKWORD")
    parser.add_argument("--words", type=int, default=200_000_000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    lines = open(f"{args.brown}/train.txt", encoding="utf-8").read().splitlines()
    if args.vocab:
        known = set(open(args.vocab, encoding="utf-8").read().split())
        lines = [" ".join(w if w in known else "UNKWORD" for w in line.split()) for line in lines]
    lines = [line for line in lines if line.strip()]
    lengths = np.array([len(line.split()) for line in lines])
    encoded = [(line + "\n").encode("utf-8") for line in lines]
    rng, written, out = np.random.default_rng(args.seed), 0, sys.stdout.buffer
    while written < args.words:
        order = rng.permutation(len(lines))
        take = order[:np.searchsorted(np.cumsum(lengths[order]), args.words - written) + 1]
        out.write(b"".join(encoded[i] for i in take.tolist()))
        written += int(lengths[take].sum())
    out.flush()


if __name__ == "__main__":
    main()
