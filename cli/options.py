"""Options spelt as SRILM spells them (`-text`), each also accepted with two dashes, and
the spelling of the library's parameter names as flags (for its ParameterErrors)."""
import click

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


def spell(name):
    """The flag that sets the library parameter `name` (`hidden` -> `-h`, `lr_decay` -> `-lr-decay`)."""
    return FLAGS.get(name, "-" + name.replace("_", "-"))


def option(name, *decls, help, **kwargs):
    """`-name` and `--name`; extra `decls` may give the parameter's Python name."""
    return click.option(f"-{name}", f"--{name}", *decls, help=help,
                        show_default=kwargs.get("default") is not None, **kwargs)


def flag(name, *, help):
    return click.option(f"-{name}", f"--{name}", is_flag=True, default=False, help=help)


def example(*lines):
    """A --help epilog that ends with a working example (\\b keeps click from rewrapping)."""
    return "\b\nExample:\n" + "\n".join(f"  {line}" for line in lines)


class ByteSize(click.ParamType):
    """A size in bytes: 2G, 512M, 64K or a plain number (powers of 1,024, as lmplz's -S)."""
    name = "SIZE"
    UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}

    def convert(self, value, param, ctx):
        if isinstance(value, int):
            return value
        text = str(value).strip().upper().removesuffix("B")
        unit = text[-1:] if text[-1:] in self.UNITS else ""
        try:
            number = float(text[:len(text) - len(unit)])
        except ValueError:
            number = -1
        if not number > 0 or number * self.UNITS[unit] < 1 << 20:
            self.fail(f"'{value}' is not a size of at least 1M (say 512M or 2G)", param, ctx)
        return int(number * self.UNITS[unit])
