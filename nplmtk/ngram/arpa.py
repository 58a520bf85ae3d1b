"""ARPA back-off files, read and written as SRILM and KenLM do: log10 values with 7
significant digits, -99 for log 0, gzip-aware, every defect reported with its line."""
import re

import numpy as np

from ..errors import NplmError
from ..io import atomic_output, read_text
from ..vocab import Vocabulary
from .backoff import BackoffModel
from .counts import MAX_ORDER
from .index import NgramIndex

PSEUDO_ZERO = -99.0
_COUNT_LINE = re.compile(r"ngram\s+(\d+)\s*=\s*(\d+)\s*$")
_SECTION = re.compile(r"\\(\d+)-grams:\s*$")


def _format(value):
    return "-99" if value == -np.inf else f"{float(value):.7g}"


def write_arpa(model, path):
    words = model.vocab.words
    with atomic_output(path) as out:
        out.write("\n\\data\\\n")
        for k, grams in enumerate(model.grams, 1):
            out.write(f"ngram {k}={len(grams)}\n")
        for k, (grams, logp, bow, has_bow) in enumerate(
                zip(model.grams, model.logp, model.bow, model.has_bow), 1):
            out.write(f"\n\\{k}-grams:\n")
            names = [" ".join(words[w] for w in row) for row in grams.tolist()]
            probs = [_format(v) for v in logp.tolist()]
            weights = [f"\t{_format(v)}" if h else "" for v, h in zip(bow.tolist(), has_bow.tolist())]
            out.writelines(f"{p}\t{n}{b}\n" for p, n, b in zip(probs, names, weights))
        out.write("\n\\end\\\n")


def _parse_value(text, path, number, what):
    try:
        value = float(text)
    except ValueError:
        raise NplmError(f"{path}:{number}: bad {what} '{text}'") from None
    if value != value or value == np.inf:
        raise NplmError(f"{path}:{number}: bad {what} '{text}'")
    return -np.inf if value == PSEUDO_ZERO else value


def read_arpa(path):
    """A BackoffModel from an ARPA file; its vocabulary is the words of the 1-grams."""
    lines = read_text(path).split("\n")
    number = 0
    while number < len(lines) and lines[number].strip() != "\\data\\":
        number += 1
    if number == len(lines):
        raise NplmError(f"{path}: not an ARPA file (no \\data\\ line) nor an nplm model")
    declared = {}
    number += 1
    while number < len(lines) and not lines[number].strip().startswith("\\"):
        line = lines[number].strip()
        if line:
            match = _COUNT_LINE.match(line)
            if not match:
                raise NplmError(f"{path}:{number + 1}: expected 'ngram N=count', got '{line[:60]}'")
            k, n = int(match.group(1)), int(match.group(2))
            if not 1 <= k <= MAX_ORDER:
                raise NplmError(f"{path}:{number + 1}: order {k} is outside 1..{MAX_ORDER}")
            if k != len(declared) + 1:
                raise NplmError(f"{path}:{number + 1}: expected the count of {len(declared) + 1}-grams")
            declared[k] = n
        number += 1
    if not declared:
        raise NplmError(f"{path}: the \\data\\ header declares no n-grams")
    order = len(declared)
    sections = {}
    for k in range(1, order + 1):
        while number < len(lines) and not lines[number].strip():
            number += 1
        header = lines[number].strip() if number < len(lines) else ""
        match = _SECTION.match(header)
        if not match or int(match.group(1)) != k:
            where = f"{path}:{number + 1}" if number < len(lines) else path
            raise NplmError(f"{where}: expected the \\{k}-grams: section, got '{header[:60]}'")
        start = number + 1
        number = start
        while number < len(lines) and not lines[number].lstrip().startswith("\\"):
            number += 1
        sections[k] = (start, lines[start:number])
    while number < len(lines) and not lines[number].strip():
        number += 1
    if number >= len(lines) or lines[number].strip() != "\\end\\":
        found = lines[number].strip()[:60] if number < len(lines) else "end of file"
        raise NplmError(f"{path}:{min(number + 1, len(lines))}: expected \\end\\, got '{found}'")

    start, body = sections[1]
    unigram_words, unigram_values = [], []
    for offset, line in enumerate(body):
        fields = line.split()
        if not fields:
            continue
        if len(fields) not in (2, 3):
            raise NplmError(f"{path}:{start + offset + 1}: a 1-gram line needs a probability, "
                            f"1 word and an optional back-off weight, got {len(fields)} fields")
        unigram_words.append(fields[1])
        unigram_values.append(fields)
    if len(unigram_words) != declared[1]:
        raise NplmError(f"{path}:{start}: \\1-grams: section has {len(unigram_words)} entries, "
                        f"the header says {declared[1]}")
    if len(set(unigram_words)) != len(unigram_words):
        raise NplmError(f"{path}:{start}: a 1-gram appears twice")
    vocab = Vocabulary(unigram_words)
    grams, logps, bows, has_bows = [], [], [], []
    for k in range(1, order + 1):
        start, body = sections[k]
        ids, logp, bow, has_bow, line_of = [], [], [], [], []
        for offset, line in enumerate(body):
            fields = line.split()
            if not fields:
                continue
            number = start + offset + 1
            if len(fields) not in (k + 1, k + 2):
                raise NplmError(f"{path}:{number}: a {k}-gram line needs a probability, {k} words "
                                f"and an optional back-off weight, got {len(fields)} fields")
            try:
                ids.append([vocab.index[w] for w in fields[1:k + 1]])
            except KeyError as err:
                raise NplmError(f"{path}:{number}: word {err} is not among the 1-grams") from None
            logp.append(_parse_value(fields[0], path, number, "probability"))
            if len(fields) == k + 2:
                bow.append(_parse_value(fields[k + 1], path, number, "back-off weight"))
                has_bow.append(True)
            else:
                bow.append(0.0)
                has_bow.append(False)
            line_of.append(number)
        if len(ids) != declared[k]:
            raise NplmError(f"{path}:{start}: \\{k}-grams: section has {len(ids)} entries, "
                            f"the header says {declared[k]}")
        rows = np.array(ids, dtype=np.int32).reshape(-1, k)
        # Sort into id order; ARPA files list n-grams in any order.
        if k == 1:
            key = rows[:, 0].astype(np.int64)
        else:
            prefix = NgramIndex(len(vocab), grams).find(rows[:, :-1])
            if np.any(prefix < 0):
                bad = int(np.argmax(prefix < 0))
                raise NplmError(f"{path}:{line_of[bad]}: the context of this {k}-gram is not "
                                f"among the {k - 1}-grams")
            key = prefix * len(vocab) + rows[:, -1]
        order_rows = np.argsort(key, kind="stable")
        sorted_key = key[order_rows]
        if len(sorted_key) > 1 and np.any(sorted_key[1:] == sorted_key[:-1]):
            bad = order_rows[1:][sorted_key[1:] == sorted_key[:-1]][0]
            raise NplmError(f"{path}:{line_of[bad]}: this {k}-gram appears twice")
        grams.append(rows[order_rows])
        logps.append(np.array(logp, dtype=np.float64)[order_rows].astype(np.float32))
        bows.append(np.array(bow, dtype=np.float64)[order_rows].astype(np.float32))
        has_bows.append(np.array(has_bow, dtype=bool)[order_rows])
    return BackoffModel(vocab, grams, logps, bows, has_bows)

