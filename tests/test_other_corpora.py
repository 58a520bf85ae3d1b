"""benchmarks/other_corpora.py: Brown's tokenisation, and no document in two of the splits."""
import io
import os
import sys
import zipfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))
import other_corpora  # noqa: E402


def test_tokens_follow_brown():
    assert other_corpora.tokenised('"It isn\'t Smith\'s," he said.') == \
        ["``", "It", "is", "n't", "Smith", "'s", ",", "''", "he", "said", "."]
    assert other_corpora.tokenised("O'Connor paid $290 (U.S.)...") == \
        ["O'Connor", "paid", "$", "290", "(", "U.S.", ")", "..."]
    assert other_corpora.tokenised("the farmers' 'cost'") == ["the", "farmers", "'", "'", "cost", "'"]


def test_documents_are_blocks_cut_to_pieces():
    text = "a\r\nb\r\n\r\n" + "".join(f"line {n}\n" for n in range(120))
    found = other_corpora.documents(text)
    assert [len(document) for document in found] == [2, 50, 50, 20]


def test_every_document_lands_in_one_split(tmp_path):
    stories = [f"Story {n} title\nStory {n} says {n} things.\n" for n in range(400)]
    archive = tmp_path / "abc.zip"
    with zipfile.ZipFile(archive, "w") as out:
        out.writestr("abc/rural.txt", "\n".join(stories))
        out.writestr("abc/README", "not a text file of the corpus")
    sizes = other_corpora.write_splits(other_corpora.corpus_documents(archive, "abc"), tmp_path / "abc")
    assert {name: count for name, (count, _, _) in sizes.items()} == {"train": 320, "valid": 40, "test": 40}
    seen = {}
    for name in ("train", "valid", "test"):
        for line in io.open(tmp_path / "abc" / f"{name}.txt", encoding="utf-8"):
            story = line.split()[1]
            assert seen.setdefault(story, name) == name
    # runs of 10 documents: stories 80-89 are the 9th run, so valid; 90-99 the 10th, test
    assert seen["85"] == "valid" and seen["95"] == "test" and seen["100"] == "train"
