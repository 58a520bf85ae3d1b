"""Options spelt as SRILM spells them (`-text`), each also accepted with two dashes, the
spelling of the library's parameter names as flags (for its ParameterErrors), and the
domains of numeric options, checked as the command line is parsed."""
import math
import re

import click

from nplmtk.errors import NplmError

# Library parameter -> flag, where the flag is not '-' + the name with '_' as '-'.
FLAGS = {
    "features": "-m",
    "hidden": "-h",
    "learning_rate": "-lr",
    "learning_rate_decay": "-lr-decay",
    "checkpoint_dir": "-checkpoint",
    "unk_is_word": "-unk",
    "min_counts": "-gtNmin",
    "weights": "-lambda",
    "num_classes": "-numclasses",
}


# Where a subcommand spells a library parameter its own way: in ngram-count and ppl, -unk is
# SRILM's flag for <unk> as a word, so the unknown word's spelling is their -map-unk.
COMMAND_FLAGS = {"ngram-count": {"unk": "-map-unk"},
                 "ppl": {"unk": "-map-unk", "lr": "-dynamic-lr", "length": "-dynamic-eval", "decay": "-dynamic-decay"}}


def spell(name, command=None):
    """The flag that sets the library parameter `name` (`hidden` -> `-h`, `lr_decay` ->
    `-lr-decay`), in subcommand `command` when given."""
    return COMMAND_FLAGS.get(command, {}).get(name) or FLAGS.get(name, "-" + name.replace("_", "-"))


def check_given_with(ctx, main_of):
    """Refuse, in one line, an option given on the command line whose main option is not:
    `main_of` maps each such option's parameter to its main option's (which is set when its
    value is true). A weight or step size left without what it weighs would do nothing."""
    for name, main in main_of.items():
        if ctx.get_parameter_source(name) == click.core.ParameterSource.COMMANDLINE and not ctx.params.get(main):
            raise NplmError(f"{spell(name)} applies to {spell(main)}, which is not given: it would do nothing")


def option(name, *decls, help, **kwargs):
    """`-name` and `--name`; extra `decls` may give the parameter's Python name."""
    return click.option(f"-{name}", f"--{name}", *decls, help=help, cls=DomainOption,
                        show_default=kwargs.get("default") is not None, **kwargs)


class DomainOption(click.Option):
    """--help shows a numeric option's domain beside its default, as click shows its own ranges."""

    def get_help_extra(self, ctx):
        extra = super().get_help_extra(ctx)
        if hasattr(self.type, "domain"):
            extra["range"] = self.type.help_range
        return extra


def help_range(low, high, low_open=False, high_open=False):
    """A domain in click's own words for --help: "x>=1", "0<=x<1", "finite"."""
    left = "" if low == -math.inf else f"{_number(low)}{'<' if low_open else '<='}"
    right = "" if high == math.inf else f"{'<' if high_open else '<='}{_number(high)}"
    if left and not right:  # as click writes it
        return f"x>{'' if low_open else '='}{_number(low)}"
    return f"{left}x{right}" if left or right else "finite"


def flag(name, *, help):
    return click.option(f"-{name}", f"--{name}", is_flag=True, default=False, help=help)


def example(*lines):
    """A --help epilog that ends with a working example (\\b keeps click from rewrapping)."""
    return "\b\nExample:\n" + "\n".join(f"  {line}" for line in lines)


# Upper bounds of integer options: the kernels take sizes and counts as C ints; seeds are
# C unsigned ints in SRILM (-seed), and the recurrent kernels' seed * 1000 + thread must fit
# in 64 bits.
INT_MAX = 2 ** 31 - 1
SEED_MAX = 2 ** 32 - 1


class OptionValueError(click.BadParameter):
    """A value outside its option's domain: `nplm SUB: -lr nan: must be a number in (0, inf)`."""

    def __init__(self, value, requirement, param, ctx):
        super().__init__(requirement, ctx=ctx, param=param)
        self.value = value

    def format_message(self):
        return f"{self.param.opts[0]} {shown(self.value)}: {self.message}"


def shown(value):
    """A value as typed, on one line and short: quoted when it is empty, long or unprintable."""
    text = str(value)
    return text if text and text.isprintable() and " " not in text and len(text) <= 40 else repr(text[:40])


class Real(click.ParamType):
    """A finite number in an interval. click's FloatRange lets nan through (every comparison
    with it is false), and inf too; here neither passes, whatever the interval."""
    name = "NUMBER"

    def __init__(self, low=-math.inf, high=math.inf, low_open=False, high_open=False, auto=False):
        self.low, self.high, self.low_open, self.high_open = low, high, low_open, high_open
        self.auto = auto  # "auto" is taken too (a setting picked on held-out text)

    @property
    def domain(self):
        """The interval as written in the tests and docs: "(0, inf)", "[0, 1)"."""
        return (("(" if self.low_open or self.low == -math.inf else "[") + f"{_number(self.low)}, "
                + _number(self.high) + (")" if self.high_open or self.high == math.inf else "]")
                + (" or auto" if self.auto else ""))

    @property
    def help_range(self):
        return help_range(self.low, self.high, self.low_open, self.high_open)

    def requirement(self):
        """In words: "must be a finite number above 0", "must be a number in [0, 1)"."""
        if self.low == self.high:
            return f"must be {_number(self.low)}"
        above = f"{'above' if self.low_open else 'at least'} {_number(self.low)}"
        below = f"{'below' if self.high_open else 'at most'} {_number(self.high)}"
        if math.isinf(self.low) or math.isinf(self.high):
            bounds = [bound for bound, end in ((above, self.low), (below, self.high)) if not math.isinf(end)]
            return "must be a finite number" + "".join(" " + bound for bound in bounds) + (" or auto" if self.auto else "")
        return f"must be a number in {self.domain}"

    def admits(self, number):
        return (math.isfinite(number) and (self.low < number if self.low_open else self.low <= number)
                and (number < self.high if self.high_open else number <= self.high))

    def number(self, value):
        """`value` as a float in the domain, or None."""
        try:
            number = float(value if isinstance(value, (int, float)) else str(value).strip())
        except (ValueError, OverflowError):
            return None
        return number if self.admits(number) else None

    def convert(self, value, param, ctx):
        if self.auto and str(value).strip() == "auto":
            return "auto"
        number = self.number(value)
        if number is None:
            raise OptionValueError(value, self.requirement(), param, ctx)
        return number


class Integer(click.ParamType):
    """An integer from `low` to `high` (both included)."""
    name = "INTEGER"

    def __init__(self, low, high=INT_MAX, auto=False):
        self.low, self.high, self.auto = low, high, auto

    @property
    def domain(self):
        return f"[{self.low}, {self.high}]" + (" or auto" if self.auto else "")

    @property
    def help_range(self):
        return help_range(self.low, self.high)

    def convert(self, value, param, ctx):
        if self.auto and str(value).strip() == "auto":
            return "auto"
        try:
            number = value if isinstance(value, int) else int(str(value).strip())
        except ValueError:  # also more digits than Python converts (4,300)
            number = None
        if number is None or not self.low <= number <= self.high:
            raise OptionValueError(value, f"must be an integer in {self.domain}", param, ctx)
        return number


class Numbers(click.ParamType):
    """An argument holding several numbers, each in the domain of `element` (a Real)."""

    def __init__(self, element, metavar):
        self.element, self.name = element, metavar

    @property
    def domain(self):
        return "each " + self.element.domain

    @property
    def help_range(self):
        return "each " + self.element.help_range


class RealList(Numbers):
    """Numbers separated by spaces or commas ("0.3 0.7"): a list of floats."""

    def convert(self, value, param, ctx):
        if isinstance(value, list):
            return value
        numbers = [self.element.number(item) for item in re.split(r"[\s,]+", str(value).strip()) if item]
        if not numbers or None in numbers:
            raise OptionValueError(value, f"must be numbers each in {self.element.domain}", param, ctx)
        return numbers


class BlockValues(Numbers):
    """BLOCK=VALUE,... (the option may be repeated): a list of (block, value)."""

    def convert(self, value, param, ctx):
        if isinstance(value, list):
            return value
        pairs = []
        for item in str(value).split(","):
            if not item.strip():
                continue
            block, equals, number = item.partition("=")
            number = self.element.number(number)
            if not equals or not block.strip() or number is None:
                raise OptionValueError(item, f"must be BLOCK=VALUE with VALUE in {self.element.domain}", param, ctx)
            pairs.append((block.strip(), number))
        return pairs


def _number(value):
    return "inf" if value == math.inf else "-inf" if value == -math.inf else str(value) if isinstance(value, int) \
        else f"{value:g}"


class ByteSize(click.ParamType):
    """A size in bytes: 2G, 512M, 64K or a plain number (powers of 1,024, as lmplz's -S)."""
    name = "SIZE"
    UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    domain = "[1M, 1024T]"
    help_range = "1M<=x<=1024T"

    def convert(self, value, param, ctx):
        if isinstance(value, int):
            return value
        text = str(value).strip().upper().removesuffix("B")
        unit = text[-1:] if text[-1:] in self.UNITS else ""
        number = Real(0, 1 << 50, low_open=True).number(text[:len(text) - len(unit)])
        if number is None or not 1 << 20 <= number * self.UNITS[unit] <= 1 << 50:
            raise OptionValueError(value, f"must be a size in {self.domain} (say 512M or 2G)", param, ctx)
        return int(number * self.UNITS[unit])
