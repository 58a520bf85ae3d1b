"""Word error rate: the Levenshtein distance between word sequences (substitutions,
deletions and insertions each cost 1), summed over sentences and divided by the number
of reference words."""


def word_errors(reference, hypothesis):
    """The fewest substitutions, deletions and insertions that turn the word list
    `reference` into `hypothesis`."""
    previous = list(range(len(hypothesis) + 1))
    for i, word in enumerate(reference, 1):
        current = [i]
        for j, other in enumerate(hypothesis, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (word != other)))
        previous = current
    return previous[-1]


def word_error_rate(references, hypotheses):
    """Total errors over the pairs of word lists divided by the reference words; the
    number of errors and of reference words too."""
    errors = sum(word_errors(r, h) for r, h in zip(references, hypotheses, strict=True))
    words = sum(len(r) for r in references)
    return errors / words if words else 0.0, errors, words
