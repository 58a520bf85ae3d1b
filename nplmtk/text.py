"""Token-level text normalisation shared by every tool that reads a corpus."""
import re

NUMBER_TOKEN = "<num>"
# A token that is a number: 12, -3.5, 1,000, 1960s, 3rd, 45%, 10:30, 1/2.
_NUMBER = re.compile(r"(?<!\S)[+-]?(?:\d[\d.,:/-]*|\.\d+)(?:s|st|nd|rd|th|%)?(?!\S)")


class Normalizer:
    """Lower-casing (-lower) and mapping of numeric tokens to one class token
    (-map-numbers), as the AP News preprocessing of Bengio et al. 2003 does."""

    def __init__(self, lower=False, map_numbers=False):
        self.lower = lower
        self.map_numbers = map_numbers

    def __call__(self, text):
        if self.lower:
            text = text.lower()
        if self.map_numbers:
            text = _NUMBER.sub(NUMBER_TOKEN, text)
        return text

    def as_dict(self):
        return {"lower": self.lower, "map_numbers": self.map_numbers}
