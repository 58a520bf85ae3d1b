"""A back-off n-gram model's log10 p(word | context) as the lattice decoder asks for them
(nplmtk/lattice/decode.py's `word_logprob` and `prefetch`), each computed once."""


class BackoffScores:
    """`model`: a BackoffModel, truncated to the decoder's order."""

    def __init__(self, model):
        self.model = model
        self.index = model.vocab.index
        self.cache = {}

    def logprob(self, word, context):
        key = (word, context)
        if key not in self.cache:
            if word not in self.index:
                self.cache[key] = -float("inf")
            else:  # a context word unknown to the model ends the context (no n-gram runs through it)
                kept = []
                for w in context:
                    if w not in self.index:
                        break
                    kept.append(self.index[w])
                self.cache[key] = float(self.model.score_rows([kept[::-1] + [self.index[word]]])[0])
        return self.cache[key]

    def prefetch(self, word, contexts):
        """The contexts not yet asked for whose words the model knows, scored in one call per
        length (the decoder asks for a word's contexts together)."""
        if word not in self.index:
            return
        rows, last = {}, self.index[word]
        for context in contexts:
            key = (word, context)
            if key in self.cache:
                continue
            try:
                row = [self.index[w] for w in reversed(context)]
            except KeyError:  # a word unknown to the model: logprob's own way
                continue
            row.append(last)
            rows.setdefault(len(context), {})[key] = row
        for batch in rows.values():
            for key, score in zip(batch, self.model.score_rows(list(batch.values())).tolist()):
                self.cache[key] = float(score)
