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
