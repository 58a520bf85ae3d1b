"""Architectures declare their options and capabilities (issue 34, items 1, 2 and 5):
`train-nplm -arch NAME --help` lists NAME's options, an option of another architecture is
one line, and an architecture from another package (an entry point of the group
"nplmtk.architectures") trains, scores, mixes and reloads without a line of nplmtk edited.
The one here is ClassBigramModel, registered from this file by a dist-info folder."""
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import NPLM, run_main
from nplmtk.neural.declarations import Capabilities, Option, declare
from nplmtk.neural.network import NeuralModel


# -- a third-party architecture: this file and its entry point are all it takes ------------
class ClassBigramModel(NeuralModel):
    """p(w | v) = p(c(w) | c(v)) p(w | c(w)) over frequency classes: class transitions T, and
    each word's score E, normalised within its class; pure numpy."""
    kind, arch = "nplm-classbigram", "classbigram"
    summary = "class bigram p(c(w) | c(v)) p(w | c(w)), a test's, in numpy"
    ARCHITECTURE = ("classes", "hs")
    CAPABILITIES = Capabilities(outputs=("class",))
    OPTIONS = declare(NeuralModel.OPTIONS, Option("spread", "real", "Spread of the initial scores.", 0.1, low=0),
                      drop=("order", "m", "h", "direct", "activation", "no-bias"),
                      defaults={"output": "class", "lr": 0.1})

    @classmethod
    def initial(cls, vocab, seed=1, output="class", classes=None, counts=None, spread=0.1):
        meta = cls.output_meta(vocab, output, classes, counts)
        rng = np.random.default_rng(seed)
        params = {name: (rng.standard_normal(shape) * spread).astype(np.float32)
                  for name, shape in cls.array_shapes(len(vocab), 2, meta).items()}
        return cls(vocab, params, 2, "tanh", meta)

    @classmethod
    def array_shapes(cls, vocab_size, order, shape):
        return {"T": (shape["classes"], shape["classes"]), "E": (vocab_size,)} if order == 2 else {}

    def network(self, capacity=None):
        return ClassBigramNetwork(self.params, np.array(self.meta["class_of"]))


class ClassBigramNetwork:
    def __init__(self, params, class_of):
        self.T, self.E, self.class_of = params["T"], params["E"], class_of

    def probabilities(self):
        """p(class | previous class) and each word's p(w | its class)."""
        transitions = np.exp(self.T - self.T.max(axis=1, keepdims=True))
        emissions = np.exp(self.E - self.E.max())
        within = np.bincount(self.class_of, emissions, len(self.T))[self.class_of]
        return transitions / transitions.sum(axis=1, keepdims=True), emissions / within

    def logprobs(self, windows, out):
        transitions, emissions = self.probabilities()
        previous, word = self.class_of[windows[:, 0]], windows[:, 1]
        out[:] = np.log(transitions[previous, self.class_of[word]] * emissions[word])

    def train(self, chunk, steps):
        """SGD on the log-likelihood, `steps.batch` windows an update (the Optimizer's Steps)."""
        logp, updates = 0.0, steps.rates.shape[1]
        for u in range(updates):
            windows = chunk[u * steps.batch:(u + 1) * steps.batch]
            scores = np.empty(len(windows))
            self.logprobs(windows, scores)
            logp += scores.sum()
            transitions, emissions = self.probabilities()
            previous, word = self.class_of[windows[:, 0]], windows[:, 1]
            grad_t = -np.bincount(previous, minlength=len(self.T))[:, None] * transitions
            np.add.at(grad_t, (previous, self.class_of[word]), 1)
            seen = np.bincount(self.class_of[word], minlength=len(self.T))[self.class_of]
            grad_e = np.bincount(word, minlength=len(self.E)) - seen * emissions
            rate, keep = steps.rates[0, u], steps.dense_keep[0, u]
            self.T[...] = keep * self.T + rate * grad_t
            self.E[...] = keep * self.E + rate * grad_e
        return logp, updates, 0.0
# -- the end of the architecture ------------------------------------------------------------


@pytest.fixture
def registered(tmp_path):
    """The environment of an `nplm` that finds ClassBigramModel through its entry point, as
    if a package had installed it: a dist-info folder on the path, and this file's folder."""
    info = tmp_path / "site" / "nplmtk_classbigram-0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: nplmtk-classbigram\nVersion: 0\n")
    (info / "entry_points.txt").write_text("[nplmtk.architectures]\n"
                                           "classbigram = test_architectures:ClassBigramModel\n")
    path = os.pathsep.join([str(tmp_path / "site"), os.path.dirname(__file__), os.environ.get("PYTHONPATH", "")])

    env = {**os.environ, "PYTHONPATH": path}

    def run(program, *args):
        proc = subprocess.run([program, *map(str, args)], capture_output=True, text=True, env=env)
        return proc.returncode, proc.stdout, proc.stderr
    return run


def ppl_of(report):
    return float(report.split("ppl= ")[1].split()[0])


def test_an_architecture_of_another_package_trains_scores_mixes_and_reloads(registered, toy_texts, tmp_path):
    def nplm(*args):
        return registered(NPLM, *args)
    folder, vocab = toy_texts
    train, valid, model = folder / "train.txt", folder / "valid.txt", tmp_path / "cb.nplm"
    status, out, err = nplm("train-nplm", "-arch", "classbigram", "--help")
    assert status == 0 and "-spread" in out and "[class]" in out and "-order" not in out.split("Example")[0], err
    status, _, err = nplm("train-nplm", "-arch", "classbigram", "-text", train, "-classes", 6, "-epochs", 1,
                                "-quiet", "-lm", model)
    assert status == 0, err
    status, out, err = nplm("ppl", "-lm", model, "-text", valid)
    assert status == 0 and ppl_of(out) < len(vocab) / 2, err  # it learnt: the uniform model's ppl is |V|
    kn3 = tmp_path / "kn3.arpa"
    assert nplm("ngram-count", "-text", train, "-order", 3, "-kndiscount", "-interpolate", "-lm", kn3)[0] == 0
    status, mixed, err = nplm("ppl", "-lm", kn3, "-mix-lm", model, "-lambda", 0.5, "-text", valid)
    assert status == 0 and "ppl= " in mixed, err
    script = ("import sys, nplmtk\nmodel = nplmtk.load(sys.argv[1])\nmodel.save(sys.argv[2])\n"
              "print(type(model).__name__, nplmtk.load(sys.argv[2]).score('the cat'))")
    status, out_of_api, err = registered(sys.executable, "-c", script, model, tmp_path / "again.nplm")
    assert status == 0 and out_of_api.startswith("ClassBigramModel "), err
    again = tmp_path / "again.nplm"
    assert nplm("ppl", "-lm", again, "-text", valid)[1] == out.replace(str(model), str(again))
    status, _, err = nplm("train-nplm", "-arch", "classbigram", "-text", train, "-criterion", "is",
                                "-lm", tmp_path / "no.nplm")
    assert (status, err) == (2, "nplm train-nplm: -criterion is: -arch classbigram has full\n")


def test_help_lists_the_chosen_architectures_options_only(capsys):
    """An option's row starts "-name, --name" (the -arch help's summaries name a few)."""
    status, lstm, _ = run_main(capsys, "train-nplm", "-arch", "lstm", "--help")
    assert status == 0 and "--peephole" in lstm and "--bptt" in lstm and "--block-lr" not in lstm
    status, mlp, _ = run_main(capsys, "train-nplm", "--help")
    assert status == 0 and "--peephole" not in mlp and "--bptt" not in mlp and "-arch NAME --help" in mlp
    assert "--block-lr" in run_main(capsys, "train-nplm", "-arch=lbl1", "--help")[1]


@pytest.mark.parametrize("args, message", [
    (["-peephole"], "-peephole is an option of -arch lstm, not of -arch mlp"),
    (["-arch", "rnn", "-block-lr", "C=1"], "-block-lr is an option of -arch lbl, lbl1, lbl2, lbl3, not of -arch rnn"),
    (["-arch", "lstm", "-order", "3"], "-order is an option of -arch mlp, energy, lbl, lbl1, lbl2, lbl3, not of "
                                       "-arch lstm"),
    (["-arch", "energy", "-output", "hs"], "-output hs: -arch energy has full"),
    (["-arch", "rnn", "-mpi", "param"], "-mpi param: -arch rnn has data"),
])
def test_an_option_the_architecture_lacks_is_one_line_naming_both(capsys, tmp_path, args, message):
    assert run_main(capsys, "train-nplm", "-text", tmp_path / "t.txt", "-lm", tmp_path / "m.nplm", *args) \
        == (2, "", f"nplm train-nplm: {message}\n")


def test_no_help_text_outside_a_model_file_names_an_architecture():
    from cli.train import command
    from nplmtk.models import ARCHITECTURES
    from nplmtk.neural.declarations import TRAINING_OPTIONS
    own = [param.help for param in command.params if param.name not in command.every and param.name != "arch"]
    for text in own + [option.help for option in TRAINING_OPTIONS + NeuralModel.OPTIONS]:
        assert not any(f" {name}" in f" {text}".replace(",", " ") for name in ARCHITECTURES), text


def test_the_walk_through_in_architecture_md_cites_this_files_lines_truly():
    """docs/ARCHITECTURE.md's "Adding an architecture, step by step" follows this file by line
    number: each line it cites defines what it says, and the model's span and size are true."""
    import re
    here = open(__file__).read().splitlines()
    doc = open(os.path.join(os.path.dirname(__file__), "..", "docs", "ARCHITECTURE.md")).read()
    walk = doc[doc.index("## Adding an architecture, step by step"):]
    span = re.search(r"lines\s+(\d+)-(\d+) of that file \(\d+ lines, (\d+) not blank", walk)
    first, last, size = map(int, span.groups())
    assert here[first - 1].startswith("class ClassBigramModel") and here[last].startswith("# -- the end")
    assert sum(1 for line in here[first - 1:last] if line.strip()) == size
    cited = re.findall(r"`([A-Za-z_]\w*)[^`]*`\s*\(line (\d+)", re.sub(r"\s+", " ", walk))
    assert len(cited) == 6, cited
    for name, number in cited:
        assert re.match(rf"\s*(def )?{name}\b", here[int(number) - 1]), (name, number, here[int(number) - 1])
