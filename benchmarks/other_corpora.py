"""Build the two corpora besides Brown that issue 51 checks settings on: ABC (Australian
rural and science news) and webtext (forums, chats, reviews, film scripts), from NLTK's
data packages `packages/corpora/abc.zip` and `webtext.zip`, tokenised as our Brown split is
(one sentence or utterance per line, tokens separated by single spaces, case kept) and
split by document into train, valid and test.

    python benchmarks/other_corpora.py ABC_ZIP WEBTEXT_ZIP OUTDIR

The zips come from the public nltk/nltk_data repository (git clone, or
https://raw.githubusercontent.com/nltk/nltk_data/gh-pages/packages/corpora/abc.zip).
OUTDIR/abc/ and OUTDIR/webtext/ get train.txt, valid.txt and test.txt.

Documents: the blocks between blank lines (an ABC story, an overheard conversation); a
block of more than 50 lines (a file with no blank lines: Firefox's bug reports, the wine
reviews, the personal ads, a film script) is cut into pieces of 50 lines. Documents are
taken in file order in runs of 10; of every 10 runs, the 9th goes to valid, the 10th to
test and the rest to train. Runs keep neighbouring blocks together (an ABC story's
sub-headed sections follow it), so a document rarely has parts in two sets.
"""
import argparse
import os
import re
import zipfile

LINES_PER_PIECE = 50
DOCUMENTS_PER_RUN = 10
VALID_RUN, TEST_RUN, RUNS_PER_CYCLE = 8, 9, 10

# Penn Treebank conventions, as in Brown: double quotes become `` and '', clitics split off.
_PUNCTUATION = re.compile(r"([?!;,:()\[\]{}<>@#$%&*+=/|~^]|--|\.\.\.)")
_CLITICS = re.compile(r"(?i)(\w)('s|'re|'ve|'ll|'d|'m|n't)\b")
_FINAL_PERIOD = re.compile(r"(?<=[^\s.])\.(?=\s*$)")
_OPENING_QUOTE = re.compile(r"(^|\s)'(?!')")
_CLOSING_QUOTE = re.compile(r"(?<!')'(\s|$)")


def tokenised(line):
    """The tokens of one line, in Brown's style."""
    text = re.sub(r'^"', "`` ", line.strip())
    text = re.sub(r'(?<=[\s(\[{<])"', " `` ", text)
    text = text.replace('"', " '' ")
    text = _PUNCTUATION.sub(r" \1 ", text)
    text = _FINAL_PERIOD.sub(" .", text)
    text = _OPENING_QUOTE.sub(r"\1 ' ", text)
    text = _CLOSING_QUOTE.sub(r" ' \1", text)
    text = _CLITICS.sub(r"\1 \2", text)
    return text.split()


def documents(text):
    """The file's documents, each a list of its non-empty lines."""
    found = []
    for block in re.split(r"\n\s*\n", text.replace("\r\n", "\n")):
        lines = [line for line in block.split("\n") if line.strip()]
        for start in range(0, len(lines), LINES_PER_PIECE):
            if lines[start:start + LINES_PER_PIECE]:
                found.append(lines[start:start + LINES_PER_PIECE])
    return found


def split_documents(found):
    """{"train", "valid", "test"} -> the documents of each, in order."""
    splits = {"train": [], "valid": [], "test": []}
    for number, document in enumerate(found):
        run = (number // DOCUMENTS_PER_RUN) % RUNS_PER_CYCLE
        name = "valid" if run == VALID_RUN else "test" if run == TEST_RUN else "train"
        splits[name].append(document)
    return splits


def corpus_documents(zip_path, top):
    """The documents of every .txt file under top/ in the zip, files in name order."""
    found = []
    with zipfile.ZipFile(zip_path) as archive:
        names = sorted(name for name in archive.namelist()
                       if name.startswith(top + "/") and name.endswith(".txt"))
        for name in names:
            # webtext is Latin-1 with CRLF; ABC is ASCII.
            found.extend(documents(archive.read(name).decode("latin-1")))
    return found


def write_splits(found, outdir):
    """Write train/valid/test.txt; return {split: (documents, lines, words)}."""
    os.makedirs(outdir, exist_ok=True)
    sizes = {}
    for name, chosen in split_documents(found).items():
        lines = [" ".join(tokens) for document in chosen for tokens in map(tokenised, document)]
        lines = [line for line in lines if line]
        with open(os.path.join(outdir, f"{name}.txt"), "w", encoding="utf-8") as out:
            out.writelines(line + "\n" for line in lines)
        sizes[name] = (len(chosen), len(lines), sum(len(line.split()) for line in lines))
    return sizes


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("abc_zip")
    parser.add_argument("webtext_zip")
    parser.add_argument("outdir")
    args = parser.parse_args()
    print("| corpus | split | documents | lines | words |")
    print("| --- | --- | ---: | ---: | ---: |")
    for name, zip_path in (("abc", args.abc_zip), ("webtext", args.webtext_zip)):
        sizes = write_splits(corpus_documents(zip_path, name), os.path.join(args.outdir, name))
        for split, (count, lines, words) in sizes.items():
            print(f"| {name} | {split} | {count:,} | {lines:,} | {words:,} |")


if __name__ == "__main__":
    main()
