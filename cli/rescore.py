"""nplm rescore: re-rank N-best lists with any model (SRILM's `ngram -lm M -nbest LIST`,
`-nbest-files FILELIST`)."""
import os

import click

from nplmtk.errors import NplmError
from nplmtk.io import check_readable, check_writable, open_output, read_lines
from nplmtk.models import load
from nplmtk.rescore import read_nbest, rescore_lists

from .options import Real, example, flag, option


def list_name(path):
    """A list's name in -nbest-files output: its file name without .gz."""
    name = os.path.basename(path)
    name = name[:-len(".gz")] if name.endswith(".gz") else name
    return name


@click.command("rescore", epilog=example(
    "nplm rescore -lm kn5.arpa -nbest utt1.nbest -lm-weight 8 -word-penalty 0",
    "nplm rescore -lm kn5-lstm.mix -nbest utt1.nbest -best",
    "nplm rescore -lm lstm.nplm -nbest-files lists -best"))
@option("lm", required=True, metavar="MODEL", help="Any model: ARPA, network, mixture.")
@option("nbest", metavar="FILE", default=None, help="The N-best list: SRILM's format (ascore lscore nwords words) "
        "or NBestList1.0 ((bytelog score) words, the score taken as the acoustic one).")
@option("nbest-files", metavar="FILELIST", default=None,
        help="Rescore every N-best list named in FILELIST (one path a line; the model read once), as SRILM's "
             "-nbest-files. With -best: one line per list, its name (file name without .gz) then the words.")
@option("write-nbest-dir", metavar="DIR", default=None,
        help="With -nbest-files: write each re-ranked list to DIR under its file name (gzipped if it ends in .gz).")
@option("lm-weight", type=Real(), default=8.0, help="w in ascore + w lscore + p nwords (SRILM's -rescore-lmw).")
@option("word-penalty", type=Real(), default=0.0, help="p in ascore + w lscore + p nwords (SRILM's -rescore-wtw).")
@option("rescore-output", metavar="FILE", default="-", help="Write the re-ranked list here, in SRILM's format.")
@flag("best", help="Write only the best hypothesis's words.")
@flag("allow-paths", help="A mixture may name components outside its folder.")
def command(lm, nbest, nbest_files, write_nbest_dir, lm_weight, word_penalty, rescore_output, best, allow_paths):
    """Add each hypothesis's log10 score under MODEL (with </s>, after <s>) and re-rank by
    ascore + lm-weight * lscore + word-penalty * nwords, best first."""
    if (nbest is None) == (nbest_files is None):
        raise click.UsageError("give one of -nbest and -nbest-files")
    if write_nbest_dir is not None and nbest_files is None:
        raise click.UsageError("-write-nbest-dir goes with -nbest-files")
    if nbest_files is not None:
        check_readable(nbest_files)
    paths = [nbest] if nbest is not None else [line.strip() for line in read_lines(nbest_files) if line.strip()]
    for path in paths:
        check_readable(path)
    check_writable(rescore_output)
    if write_nbest_dir is not None:
        try:
            os.makedirs(write_nbest_dir, exist_ok=True)
        except OSError as err:
            raise NplmError(f"cannot create the folder ({err.strerror})", path=write_nbest_dir) from None
    model = load(lm, allow_paths)
    with open_output(rescore_output) as out:
        for path, ranked in zip(paths, rescore_lists(model, map(read_nbest, paths), lm_weight, word_penalty)):
            if write_nbest_dir is not None:
                with open_output(os.path.join(write_nbest_dir, os.path.basename(path))) as f:
                    f.write(listed(ranked))
            if nbest_files is not None and best:
                out.write(" ".join([list_name(path)] + (ranked[0].words if ranked else [])) + "\n")
            elif best:
                out.write(" ".join(ranked[0].words) + "\n" if ranked else "")
            elif write_nbest_dir is None:
                out.write(listed(ranked))


def listed(ranked):
    """A re-ranked list in SRILM's format (made only when written: -best writes one line)."""
    return "".join(h.line() + "\n" for h in ranked)
