"""The docs show only what exists: every `nplm SUBCOMMAND -option ...` line in README.md and
docs/*.md (code blocks and inline code) names a subcommand and options that the click commands
have, every `make TARGET` a target of the Makefile, and every relative link a file (and, for
a Markdown file's #anchor, one of its headings). The tables of SRILM's options beside ours
name only options we have, and say 'not offered' only of options we lack."""
import fnmatch
import functools
import re
from pathlib import Path

import click
import pytest

from nplmtk.cli.main import ALIASES, SUBCOMMANDS, cli

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)
INLINE = re.compile(r"(`+)(.+?)\1", re.S)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
SHELL_ENDS = {"|", "||", "&&", ";"}


def code_lines(text):
    """Each line of code the text shows: fenced blocks' lines (a line ending in a backslash
    joined to the next) and inline code spans (their line breaks read as spaces)."""
    for block in FENCE.findall(text):
        yield from block.replace("\\\n", " ").splitlines()
    for _, span in INLINE.findall(FENCE.sub("", text)):
        yield " ".join(span.split())


def commands_shown(line):
    """(program, subcommand or None, the tokens after it) for each `nplm SUBCOMMAND ...` and
    `make TARGET` in a line of code; the tokens stop where the shell starts another command or
    a comment (`|` before an option is an alternative of a synopsis: `-rescore-output F | -best`)."""
    tokens = line.split()
    for i, token in enumerate(tokens):
        if token not in ("nplm", "make") or i + 1 == len(tokens):
            continue
        rest = []
        for j, arg in enumerate(tokens[i + 1:], i + 1):
            if arg.startswith("#") or arg.startswith((">", "2>")) or (
                    arg in SHELL_ENDS and not (j + 1 < len(tokens) and tokens[j + 1].startswith("-"))):
                break
            rest.append(arg)
        if token == "make":
            yield token, rest[0] if rest else None, rest[1:]
        elif rest and re.fullmatch(r"[a-z][a-z0-9-]*", rest[0]):
            yield token, rest[0], rest[1:]
        elif rest and rest[0].startswith("-"):
            yield token, None, rest  # options of the group itself: `nplm --version`


def flags(tokens):
    """The option names among a command's tokens: synopsis brackets and punctuation stripped,
    values (a number such as -5 or -1e-4, `-` for stdin) skipped."""
    for token in tokens:
        name = token.strip("[](),;:'\"").split("=")[0]
        if len(name) < 2 or not name.startswith("-"):
            continue
        try:
            float(name)
        except ValueError:
            yield name


def option_names(command):
    help_names = cli.context_settings.get("help_option_names", ["--help"])
    return {name for param in command.params for name in param.opts + param.secondary_opts} | set(help_names)


def makefile_targets():
    targets = set()
    for line in (ROOT / "Makefile").read_text().splitlines():
        match = re.match(r"([A-Za-z0-9_.%\- ]+):(?!=)", line)
        if match and not line.startswith("\t"):
            targets.update(match.group(1).split())
    return targets


def github_anchor(heading):
    """GitHub's id of a heading: lower case, punctuation but '-' and '_' dropped, spaces to '-'."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


@functools.lru_cache(maxsize=None)
def anchors(path):
    seen, found = {}, set()
    for heading in re.findall(r"^#{1,6} +(.+?) *#*$", FENCE.sub("", path.read_text()), re.M):
        anchor = github_anchor(heading)
        found.add(anchor if anchor not in seen else f"{anchor}-{seen[anchor]}")
        seen[anchor] = seen.get(anchor, 0) + 1
    return found


def shown():
    for path in DOCS:
        for line in code_lines(path.read_text()):
            for program, name, rest in commands_shown(line):
                yield path.relative_to(ROOT), line, program, name, rest


def test_every_command_and_option_shown_exists():
    ctx = click.Context(cli)
    commands = {name: cli.get_command(ctx, name) for name in list(SUBCOMMANDS) + list(ALIASES)}
    targets = makefile_targets()
    wrong, checked = [], 0
    for where, line, program, name, rest in shown():
        if program == "make":
            if name is None or name.startswith("-") or "=" in name:
                continue
            checked += 1
            if not fnmatch.filter(targets, name):
                wrong.append(f"{where}: no make target {name!r}: {line}")
            continue
        checked += 1
        if name is not None and name not in commands:
            wrong.append(f"{where}: no subcommand {name!r}: {line}")
            continue
        known = option_names(commands[name] if name else cli)
        wrong += [f"{where}: nplm {name or ''} has no option {flag}: {line}"
                  for flag in flags(rest) if flag not in known]
    assert checked > 100, f"only {checked} commands found in the docs: is the extraction broken?"
    assert not wrong, "\n".join(wrong)


def test_every_relative_link_exists():
    wrong, checked = [], 0
    for path in DOCS:
        text = INLINE.sub("", FENCE.sub("", path.read_text()))
        for target in LINK.findall(text):
            if re.match(r"[a-z]+:", target):
                continue
            checked += 1
            file, _, anchor = target.partition("#")
            resolved = (path.parent / file).resolve() if file else path
            if not resolved.exists():
                wrong.append(f"{path.relative_to(ROOT)}: {target}: no such file")
            elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
                wrong.append(f"{path.relative_to(ROOT)}: {target}: no such heading in {file or path.name}")
    assert checked > 30, f"only {checked} links found in the docs: is the extraction broken?"
    assert not wrong, "\n".join(wrong)


# the tables of SRILM's options: (page, heading) -> the subcommands the nplm column speaks of,
# the first when it names none
OPTION_TABLES = {("srilm.md", "ngram-count"): ("ngram-count",),
                 ("srilm.md", "ngram (nplm ppl and friends)"): ("ppl", "mix", "rescore", "generate"),
                 ("decoders.md", "lattice-tool"): ("lattice-tool",)}


def option_table_rows():
    """(page, subcommands, SRILM's options, the nplm column) of each row of OPTION_TABLES."""
    for (page, title), subcommands in OPTION_TABLES.items():
        text = (ROOT / "docs" / page).read_text()
        section = re.search(rf"^#+ {re.escape(title)}\n(.*?)(?=^#+ |\Z)", text, re.S | re.M)
        assert section, f"docs/{page} has no heading {title!r}"
        for row in re.findall(r"^\| *`-.*\|$", section.group(1), re.M):
            srilm, ours = (cell.strip() for cell in row.strip("|").split("|")[:2])
            yield page, subcommands, re.findall(r"`(-[a-z0-9-]+)", srilm), ours


def test_option_tables_name_what_exists():
    ctx = click.Context(cli)
    wrong, checked = [], 0
    for page, subcommands, srilm, ours in option_table_rows():
        known = {name: option_names(cli.get_command(ctx, name)) for name in subcommands}
        if ours == "—":  # not offered: none of our subcommands may have it
            wrong += [f"docs/{page}: {option} is 'not offered' but {name} has it"
                      for option in srilm for name in subcommands if option in known[name]]
            continue
        for name, option in re.findall(r"`(?:([a-z-]+) )?(-[a-z0-9-]+)(?![A-Za-z])", ours):
            checked += 1
            name = name or subcommands[0]
            if name in known and option not in known[name]:
                wrong.append(f"docs/{page}: {name} has no option {option} ({ours})")
    assert checked > 60, f"only {checked} options found in the tables: is the extraction broken?"
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("heading, anchor", [
    ("SRILM's LM server: `nplm ppl -server-port` (issue 48)", "srilms-lm-server-nplm-ppl--server-port-issue-48"),
    ("The energy network of Bengio & Senecal sec. 4.2 (issue 21)",
     "the-energy-network-of-bengio--senecal-sec-42-issue-21"),
])
def test_github_anchor(heading, anchor):
    assert github_anchor(heading) == anchor


def test_commands_shown_reads_synopses_and_pipelines():
    line = 'zcat big.gz | nplm ngram-count -text - -unk-prob -5 [-lm-weight 8 | -best] | head # -x'
    assert list(commands_shown(line)) == [
        ("nplm", "ngram-count", ["-text", "-", "-unk-prob", "-5", "[-lm-weight", "8", "|", "-best]"])]
    assert list(flags(["-text", "-", "-unk-prob", "-5", "[-lm-weight", "8", "|", "-best]"])) == [
        "-text", "-unk-prob", "-lm-weight", "-best"]
