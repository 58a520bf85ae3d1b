"""Token-level text normalisation shared by every tool that reads a corpus."""
import re


def split_words(line):
    """Words of a line, split at ASCII whitespace only (as SRILM and the byte kernels do)."""
    return line.split() if line.isascii() else [w.decode("utf-8") for w in line.encode("utf-8").split()]


def sentence_tokens(line):
    """The words of one line, without a leading `<s>` or trailing `</s>` (SRILM adds them;
    nplmtk.vocab's BOS and EOS)."""
    tokens = split_words(line)
    if tokens and tokens[0] == "<s>":
        tokens = tokens[1:]
    if tokens and tokens[-1] == "</s>":
        tokens = tokens[:-1]
    return tokens


def sentences_as_read(lines):
    """The tokens of each of `lines` that is a sentence (words besides <s> and </s>), as
    they are read, <s> and </s> kept: what `ppl -debug 1` prints of each."""
    return [tokens for tokens in map(split_words, lines) if sentence_tokens(" ".join(tokens))]


NUMBER_TOKEN = "<num>"
# A token that is a number: 12, -3.5, 1,000, 1960s, 3rd, 45%, 10:30, 1/2.
_NUMBER = re.compile(r"(?<!\S)[+-]?(?:\d[\d.,:/-]*|\.\d+)(?:s|st|nd|rd|th|%)?(?!\S)")


class Normalizer:
    """Lower-casing (`lower`) and mapping of numeric tokens to one class token
    (`map_numbers`), as the AP News preprocessing of Bengio et al. 2003 does."""

    def __init__(self, lower=False, map_numbers=False):
        self.lower = lower
        self.map_numbers = map_numbers

    def __bool__(self):
        return self.lower or self.map_numbers

    def __call__(self, text):
        if self.lower:
            text = text.lower()
        if self.map_numbers:
            text = _NUMBER.sub(NUMBER_TOKEN, text)
        return text
