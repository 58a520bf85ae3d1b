import gzip

import pytest

from nplmtk.errors import InputError
from nplmtk.text import Normalizer
from nplmtk.vocab import Vocabulary, count_words

TEXT = "the cat sat\nthe dog sat\na cat ran\n<s> the bird </s>\n\n"


@pytest.fixture
def corpus_file(tmp_path):
    path = tmp_path / "train.txt"
    path.write_text(TEXT)
    return str(path)


def test_counts_add_sentence_boundaries_once_per_sentence(corpus_file):
    counts = count_words([corpus_file])
    assert counts["the"] == 3 and counts["cat"] == 2 and counts["bird"] == 1
    assert counts["<s>"] == 4 and counts["</s>"] == 4


def test_order_is_count_descending_then_byte_order(corpus_file):
    vocab = Vocabulary.from_counts(count_words([corpus_file]))
    assert vocab.words == ["<unk>", "<s>", "</s>", "the", "cat", "sat", "a", "bird", "dog", "ran"]


def test_min_count_folds_rare_words_into_unk(corpus_file):
    vocab = Vocabulary.from_counts(count_words([corpus_file]), min_count=2)
    assert vocab.words == ["<unk>", "<s>", "</s>", "the", "cat", "sat"]
    assert vocab.counts[vocab.unk] == 4  # a, bird, dog, ran
    assert vocab.id("dog") == vocab.unk


def test_max_size_keeps_the_most_frequent(corpus_file):
    vocab = Vocabulary.from_counts(count_words([corpus_file]), max_size=2)
    assert vocab.words[3:] == ["the", "cat"]
    assert sum(vocab.counts) == sum(count_words([corpus_file]).values())


def test_custom_unknown_token(corpus_file):
    vocab = Vocabulary.from_counts(count_words([corpus_file]), min_count=3, unk="<UNK>")
    assert vocab.words[:3] == ["<UNK>", "<s>", "</s>"] and "<unk>" not in vocab


def test_lower_and_map_numbers():
    normalize = Normalizer(lower=True, map_numbers=True)
    assert normalize("The 1,000 cats of 1960s paid 3.5% on 10:30 vs. A4 -2") == \
        "the <num> cats of <num> paid <num> on <num> vs. a4 <num>"


def test_write_read_round_trip_with_counts(corpus_file, tmp_path):
    vocab = Vocabulary.from_counts(count_words([corpus_file]), min_count=2)
    vocab.write(str(tmp_path / "v.txt"), with_counts=True)
    again = Vocabulary.read(str(tmp_path / "v.txt"))
    assert again.words == vocab.words and again.counts == vocab.counts


def test_reads_srilm_vocabulary_and_adds_specials(tmp_path):
    path = tmp_path / "v.gz"
    with gzip.open(path, "wt") as f:
        f.write("zebra\napple\n</s>\n\nmango\n")
    vocab = Vocabulary.read(str(path))
    assert vocab.words == ["<unk>", "<s>", "</s>", "zebra", "apple", "mango"]
    assert vocab.counts is None


@pytest.mark.parametrize("content, message", [
    ("a\nb\na\n", ":3: duplicate word 'a' (first on line 1)"),
    ("a 3\nb x\n", ":2: count 'x' is not an integer"),
    ("a 1 2\n", ":1: expected 'word' or 'word count'"),
    ("\n\n", ": empty vocabulary"),
])
def test_bad_vocabulary_files(tmp_path, content, message):
    path = tmp_path / "v.txt"
    path.write_text(content)
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")) as caught:
        Vocabulary.read(str(path))
    assert caught.value.path == str(path)


def test_ties_keep_utf8_byte_order_past_ascii():
    # code point order is UTF-8's byte order: é (c3 a9) < ﬁ (ef ac 81) < 😀 (f0 9f 98 80)
    words = ["\U0001F600", "z", "\uFB01", "Z", "\u00e9", "b"]
    counts = dict.fromkeys(words, 2) | {"b": 3, "rare": 1, "<unk>": 4}
    vocab = Vocabulary.from_counts(counts, min_count=2)
    assert vocab.words[3:] == ["b", "Z", "z", "\u00e9", "\uFB01", "\U0001F600"]
    assert vocab.counts[vocab.unk] == 4 + 1  # its own count and the folded word's


def test_counts_across_many_blocks_match_a_line_by_line_count(monkeypatch, tmp_path):
    import random
    from collections import Counter

    import nplmtk.vocab as vocab_module
    rng = random.Random(5)
    words = ["the", "a", "caf\u00e9", "<s>", "</s>", "x" * 30] + [f"w{i}" for i in range(300)]
    lines = [" ".join(rng.choice(words) for _ in range(rng.randrange(0, 12))) for _ in range(3000)]
    path = tmp_path / "t.txt"
    path.write_text("\n".join(lines) + "\n")
    expected = Counter()
    for line in lines:
        tokens = line.split()
        if tokens[:1] == ["<s>"]:
            tokens = tokens[1:]
        if tokens[-1:] == ["</s>"]:
            tokens = tokens[:-1]
        if tokens:
            expected.update(tokens + ["<s>", "</s>"])
    monkeypatch.setattr(vocab_module, "COUNT_BLOCK_BYTES", 1 << 10)  # about 40 blocks, two tables
    assert count_words([str(path)]) == expected
    # a word past the limit in a late block: its line, counted across the blocks before it
    lines[2500] = "the " + "y" * 40 + " a"
    path.write_text("\n".join(lines) + "\n")
    monkeypatch.setenv("NPLM_MAX_TOKEN_BYTES", "35")
    with pytest.raises(InputError, match=f"^{path}:2501: a word of 40 bytes, longer than 35"):
        count_words([str(path)])
