"""Write HTK lattices made from a text's sentences by nplmtk.lattice.noise's documented
noise process (the true path plus substitutions by words of similar frequency in TRAIN,
deletions and insertions; acoustic scores from SEED), one file NAME.lat.gz per sentence,
and their list.

    python benchmarks/make_lattices.py TRAIN TEXT OUTDIR [-first N] [-seed S]
"""
import argparse
import gzip
import os

from nplmtk.lattice.noise import Confusions, sentence_lattice


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("train")
    parser.add_argument("text")
    parser.add_argument("outdir")
    parser.add_argument("-first", type=int, default=None, help="only the first N sentences")
    parser.add_argument("-seed", type=int, default=1)
    parser.add_argument("-plain", action="store_true", help="write NAME.lat, not gzipped")
    args = parser.parse_args()
    with open(args.train, encoding="utf-8") as f:
        confusions = Confusions([line.split() for line in f])
    with open(args.text, encoding="utf-8") as f:
        sentences = [line.split() for line in f][:args.first]
    os.makedirs(args.outdir, exist_ok=True)
    paths = []
    for number, words in enumerate(sentences):
        if not words:
            continue
        name = f"sent{number:05d}"
        text = sentence_lattice(words, name, confusions, args.seed, number)
        path = os.path.join(args.outdir, name + (".lat" if args.plain else ".lat.gz"))
        with (open(path, "w", encoding="utf-8") if args.plain else gzip.open(path, "wt", encoding="utf-8")) as f:
            f.write(text)
        paths.append(path)
    with open(os.path.join(args.outdir, "list"), "w", encoding="utf-8") as f:
        f.write("".join(p + "\n" for p in paths))


if __name__ == "__main__":
    main()
