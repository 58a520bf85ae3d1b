"""Recipes: whole training settings by name (`train-nplm -recipe fast|best`), or chosen for
a corpus and a time budget (`train-nplm -text T -valid V -max-time SECONDS` with no other
option). The choice is a rule over three numbers, the words of the training text, its
vocabulary and the seconds of the budget, at the reference machine's speeds;
docs/training.md ("Recipes") says where each threshold comes from."""
from dataclasses import dataclass, field

# Every recipe: a recurrent network with the class output tied to its features, its state
# carried across sentences, Adam with the rate halved after an epoch without progress,
# early stopping, both cores.
_COMMON = (("arch", "lstm"), ("tie", True), ("output", "class"), ("reset-state", "never"), ("optimizer", "adam"),
           ("lr", 0.002), ("lr-halve", True), ("epochs", 100), ("patience", 3), ("threads", 2))
# make brown-fast: lstm-class's network with AR and TAR (the two additions that helped most in
# brown-ablation's 600 s, picked on Brown valid)
_FAST = _COMMON + (("m", 256), ("h", 256), ("dropout", 0.3), ("ar", 2.0), ("tar", 1.0))
# brown-ablation at 600 s: weight-drop and random-bptt each helped alone (valid 114.7 and
# 114.8 against 116.4) once a run had ten epochs or more
_FAST_LONGER = _FAST + (("weight-drop", 0.3), ("random-bptt", True))
# make brown-best: two layers (800, then 400 tied to the features) and AWD-LSTM's
# regularisers at about their published strengths (Merity et al. 2018); rnnlm's
# -min-improvement 1.003 (its default) halves the rate after an epoch that gains too little:
# Brown valid 86.33 after 14 epochs, where the run without it had 89.32 and never halved
_BEST = _COMMON + (("m", 400), ("h", 800), ("layers", 2), ("dropout-input", 0.4), ("dropout-hidden", 0.3),
                   ("dropout-output", 0.4), ("dropout-embedding", 0.1), ("weight-drop", 0.3), ("ar", 2.0),
                   ("tar", 1.0), ("random-bptt", True), ("min-improvement", 1.003))


@dataclass(frozen=True)
class Recipe:
    """train-nplm's options by name (without the dash) and the budget in seconds they are
    meant for; `why` says in a line how it was chosen."""
    name: str
    options: tuple
    budget: float
    why: str = ""
    # training words a second on both cores of the reference machine (the 2-core AMD EPYC of
    # BENCHMARKS.md, quiet): fast's network
    # with weight-drop and random-bptt ran 16,400 on Brown (2026-11-28); fast's alone and
    # best's in the ratios that brown-ablation and brown-best measured on one machine
    # (ar-tar 24,137 against weight-drop 22,915 and random-bptt 23,593; best 0.15 of lstm-class)
    reference_speed: float = field(default=0.0, compare=False)

    def values(self):
        return dict(self.options)

    def meta(self):
        """What the model file keeps of the recipe."""
        return {"name": self.name, "budget": self.budget, "why": self.why,
                "options": {name: value for name, value in self.options}}

    def command_line(self):
        """The options as train-nplm spells them, for messages and docs."""
        words = []
        for name, value in self.options + (("max-time", self.budget),):
            words += [f"-{name}"] if value is True else [f"-{name}", _spelt(value)]
        return " ".join(words)


def _spelt(value):
    return f"{value:g}" if isinstance(value, float) else str(value)


RECIPES = {
    "fast": Recipe("fast", _FAST, 194.0, "make brown-fast's network and budget", reference_speed=17_300.0),
    "best": Recipe("best", _BEST, 7000.0, "make brown-best's network and budget", reference_speed=2_500.0),
}
_FAST_LONGER_RECIPE = Recipe("fast", _FAST_LONGER, 0.0, reference_speed=16_400.0)

# The rule's thresholds, in expected epochs within the budget (see docs/training.md):
BEST_EPOCHS = 15  # brown-best reached 91.6 valid after 17 epochs; after 4 (brown-ablation's
#                   600 s) its network was worse than fast's
LONGER_EPOCHS = 10  # weight-drop and random-bptt helped runs of 10-14 epochs
VALID_SHARE = 3.0  # a valid word costs about a third of a training word (no backward pass)


def named(name, budget=None):
    """RECIPES[name], with `budget` seconds in place of its own if given."""
    recipe = RECIPES[name]
    if budget is None:
        return recipe
    return Recipe(recipe.name, recipe.options, budget, f"{recipe.why}, for {budget:g} s", recipe.reference_speed)


def expected_epochs(recipe, train_words, valid_words, budget, machine_scale):
    """Epochs (training and validation) that `budget` seconds hold at the recipe's speed."""
    seconds_an_epoch = (train_words + valid_words / VALID_SHARE) / (recipe.reference_speed * machine_scale)
    return budget / seconds_an_epoch


def choose(train_words, valid_words, vocab_size, budget, machine_scale=1.0):
    """The recipe for a corpus of `train_words` (and `valid_words` of validation) with
    `vocab_size` words, trained for `budget` seconds on a machine `machine_scale` times the
    reference's speed: best's network if the budget holds BEST_EPOCHS of it, else fast's,
    with weight-drop and random-bptt once LONGER_EPOCHS fit; the full softmax in place of the
    class output for a vocabulary small enough that classes save nothing."""
    if min(train_words, vocab_size) <= 0 or budget <= 0:
        raise ValueError("train_words, vocab_size, budget: each must be above 0")
    best, fast = RECIPES["best"], RECIPES["fast"]
    best_epochs = expected_epochs(best, train_words, valid_words, budget, machine_scale)
    fast_epochs = expected_epochs(fast, train_words, valid_words, budget, machine_scale)
    if best_epochs >= BEST_EPOCHS:
        base, epochs, name = best, best_epochs, "best's network"
    elif fast_epochs >= LONGER_EPOCHS:
        base, epochs, name = _FAST_LONGER_RECIPE, fast_epochs, "fast's network with weight-drop and random-bptt"
    else:
        base, epochs, name = fast, fast_epochs, "fast's network"
    options = base.options
    if vocab_size <= FULL_SOFTMAX_WORDS:
        options = tuple(("output", "full") if key == "output" else (key, value) for key, value in options)
    why = (f"{name} ({epochs:.0f} epochs expected of {train_words:,} words in {budget:g} s; best's network would "
           f"have {best_epochs:.0f}, {BEST_EPOCHS} needed), "
           + ("the full softmax" if vocab_size <= FULL_SOFTMAX_WORDS else "the class output")
           + f" for {vocab_size:,} words")
    return Recipe("auto", options, budget, why, base.reference_speed)


FULL_SOFTMAX_WORDS = 2_000  # below this the class output's two softmaxes cost about what one full one does


def for_corpus(text, valid, vocab, min_count, normalize, budget):
    """choose() for the training text `text` (and `valid`, None for none) as train-nplm reads
    them: the vocabulary the file `vocab` or the one train-nplm would make (the words seen
    `min_count` times). The reference machine's speeds: the same command picks the same
    recipe anywhere (a probe of the machine's speed swung 1.7x within minutes here)."""
    from ..vocab import Vocabulary, count_words

    counts = count_words([text], normalize)
    vocab_size = len(Vocabulary.read(vocab) if vocab else Vocabulary.from_counts(counts, min_count))
    valid_words = sum(count_words([valid], normalize).values()) if valid else 0
    return choose(sum(counts.values()), valid_words, vocab_size, budget)
