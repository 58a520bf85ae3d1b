"""`nplm ppl`'s fast path: `nplm ppl -lm MODEL -ppl TEXT` (or -text; -debug 0, 1 or 2; -unk,
which changes no score; `nplm ngram` too) with a binary back-off model and a plain text file,
scored without numpy or click (nplmtk/ngram/mapped.py): most of a short command's time is
start-up. Any other option, another model or text, or any fault in them, and the command
goes the usual way (cli/ppl.py), which reports the fault in its words; the report is the
same bytes either way."""
import sys

# the options this path takes: spelling -> parameter (each with one dash or two)
OPTIONS = {"lm": "lm", "ppl": "text", "text": "text", "debug": "debug"}
FLAGS = {"unk"}
DEBUG_LEVELS = {"0": 0, "1": 1, "2": 2}


def command_given(argv):
    """(model, text, debug level) of `argv` when it is exactly a command this path does
    (each option once, -debug spelt 0, 1 or 2, no value that starts with '-', which click
    might read otherwise, nor '-' for stdin), else None."""
    given, rest = {}, argv[1:]
    while rest:
        name = rest[0][2:] if rest[0].startswith("--") else rest[0][1:] if rest[0].startswith("-") else None
        if name in FLAGS and name not in given:
            given[name], rest = True, rest[1:]
            continue
        if name not in OPTIONS or OPTIONS[name] in given or len(rest) < 2 or rest[1].startswith("-"):
            return None
        given[OPTIONS[name]], rest = rest[1], rest[2:]
    if "lm" not in given or "text" not in given or given.get("debug", "0") not in DEBUG_LEVELS:
        return None
    return given["lm"], given["text"], DEBUG_LEVELS[given.get("debug", "0")]


def run(argv):
    """Whether the command `argv` (`ppl ...`) was done here, its report written to stdout."""
    given = command_given(argv)
    if given is None:
        return False
    lm, text, debug = given
    from nplmtk.ngram.mapped import open_mapped, perplexity, read_plain_text
    model = open_mapped(lm)
    data = None if model is None else read_plain_text(text)
    if data is None:
        return False
    lines = []
    if perplexity(model, text, data, debug, lines.append) is None:
        return False
    report = "\n".join(lines) + "\n"
    if "\x1b" in report:  # click.echo takes ANSI escapes out where stdout is no terminal: the usual path
        return False
    sys.stdout.write(report)
    return True
