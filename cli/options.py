"""Options spelt as SRILM spells them (`-text`), each also accepted with two dashes."""
import click


def option(name, *decls, help, **kwargs):
    """`-name` and `--name`; extra `decls` may give the parameter's Python name."""
    return click.option(f"-{name}", f"--{name}", *decls, help=help,
                        show_default=kwargs.get("default") is not None, **kwargs)


def flag(name, *, help):
    return click.option(f"-{name}", f"--{name}", is_flag=True, default=False, help=help)


def example(*lines):
    """A --help epilog that ends with a working example (\\b keeps click from rewrapping)."""
    return "\b\nExample:\n" + "\n".join(f"  {line}" for line in lines)
