"""The training runs that the benchmark sections train or report, in one table.

Each entry holds the settings of one `nplm train-nplm` run; the Makefile's targets
(`make brown-mlp9`, `brown-mlp1`, `brown-is`) run them through this file
(`python benchmarks/runs.py TARGET`), and the benchmark sections take the network shapes,
options and file names from here. |V| is not here: it is read from the vocabulary file.
"""
import argparse
import os
import subprocess
import sys
import time
from dataclasses import dataclass

VOCAB_MIN_COUNT = 4  # the runs' vocabulary: `nplm vocab -min-count 4` on Brown train
RUNS_DIR = "runs"  # where the Makefile's runs write their logs and models
VOCAB_PATH = os.path.join(RUNS_DIR, "vocab.txt")


@dataclass(frozen=True)
class Run:
    """One run: the network (n, m, h, direct connections) and how it trains. `None`
    leaves an option out (train-nplm's default); its files are runs/NAME.log and .nplm."""

    name: str
    make_target: str
    order: int | None  # None: a recurrent model (it sees the whole history)
    features: int
    hidden: int
    direct: bool = False
    bias: bool = True
    epochs: int | None = None
    patience: int | None = None
    batch: int | None = None
    threads: int | None = None
    lr: float | None = None
    criterion: str | None = None
    samples: int | None = None
    ess_min: float | None = None
    paper_test_ppl: float | None = None
    early_stopping: bool = False  # on Brown valid, with a checkpoint each epoch (runs/NAME-ckpt)
    arch: str | None = None  # train-nplm -arch (None: its default, the MLP)
    # -init-from: runs whose models this one starts from ("NAME" or "NAME:BLOCK,..."), in order
    init_from: tuple = ()
    extra: tuple = ()  # further train-nplm options (the log-bilinear models' block settings)
    model_number: int | None = None  # the log-bilinear family: Model 0-3 of Zhang, Mnih & Hinton
    train_sentences: int | None = None  # train on the first N sentences of Brown train (runs/train-N.txt)

    @property
    def log_path(self):
        return os.path.join(RUNS_DIR, f"{self.name}.log")

    @property
    def model_path(self):
        return os.path.join(RUNS_DIR, f"{self.name}.nplm")

    @property
    def architecture(self):
        """The network in the paper's terms."""
        if self.model_number is not None:
            return (f"log-bilinear Model {self.model_number}, n={self.order}, m={self.features}"
                    + (f", h={self.hidden}" if self.model_number else ""))
        return (f"{self.arch.upper() + ', ' if self.order is None else f'n={self.order}, '}m={self.features}, "
                f"h={self.hidden}, " + ("direct" if self.direct else "no direct")
                + ("" if self.bias else ", no biases"))

    def shape_options(self):
        hidden = [] if self.arch == "lbl" else ["-h", str(self.hidden)]  # Model 0 has no hidden layer
        return (_flags(("-arch", self.arch), ("-order", self.order)) + ["-m", str(self.features)] + hidden
                + (["-direct"] if self.direct else []) + ([] if self.bias else ["-no-bias"]))

    def training_options(self):
        """The options after the shape, in the Makefile's order (the criterion apart)."""
        return _flags(("-epochs", self.epochs), ("-patience", self.patience), ("-batch", self.batch),
                      ("-threads", self.threads), ("-lr", self.lr))

    def criterion_options(self):
        return _flags(("-criterion", self.criterion), ("-samples", self.samples), ("-ess-min", self.ess_min))

    def init_options(self):
        """-init-from for each run this one starts from (its model file, blocks kept)."""
        options = []
        for source in self.init_from:
            name, colon, blocks = source.partition(":")
            options += ["-init-from", RUNS[name].model_path + colon + blocks]
        return options

    def options(self):
        return (self.shape_options() + self.init_options() + self.training_options() + list(self.extra)
                + self.criterion_options())

    def train_path(self, brown):
        """Brown train, or the file of its first `train_sentences` sentences (runs/train-N.txt)."""
        if self.train_sentences is None:
            return os.path.join(brown, "train.txt")
        return os.path.join(RUNS_DIR, f"train-{self.train_sentences}.txt")

    def write_train_text(self, brown):
        if self.train_sentences is not None:
            with open(os.path.join(brown, "train.txt")) as source, open(self.train_path(brown), "w") as out:
                out.writelines(line for _, line in zip(range(self.train_sentences), source))

    def command(self, nplm, brown):
        """The whole `nplm train-nplm` command of this run on Brown."""
        files = ["-text", self.train_path(brown), "-vocab", VOCAB_PATH]
        if self.early_stopping:
            files += ["-valid", os.path.join(brown, "valid.txt"),
                      "-checkpoint", os.path.join(RUNS_DIR, f"{self.name}-ckpt")]
        return [nplm, "train-nplm", *files, *self.options(), "-log", self.log_path, "-lm", self.model_path]


def _flags(*pairs):
    """`-flag value` for each (flag, value) whose value is set."""
    return [text for flag, value in pairs if value is not None for text in (flag, str(value))]


_MLP = dict(epochs=20, patience=2, batch=256, threads=2, lr=0.003, early_stopping=True)
# Sec. 3: R and the C_i copied from Model 0, R then fixed; mini-batches of 1,000; weight
# decay 1e-5 on every parameter, biases included. Model 1: rates 1e-3 for C (and here the
# biases), 1e-1 for A, 1e-5 for B; momentum 0.5 for C, for the others 0.9 with 100 hidden
# units, 0.8 with 200-300 and 0.5 with 500. Model 2: A from a trained Model 1, only S
# learnt (rate 1e-5, momentum 0.5, weight decay 1e-4). Model 3: C, A, B as Model 1, S as Model 2.
_LBL = dict(epochs=10, patience=2, batch=1000, threads=2, early_stopping=True)
_LBL_INIT = {1: "lbl0", 2: "lbl0 lbl1-h{hidden}:A,a", 3: "lbl0"}
_LBL_S = ("-block-lr", "S=1e-5", "-block-momentum", "S=0.5", "-block-weight-decay", "S=1e-4")


def _lbl_training(number, hidden):
    common = ("-freeze-features", "-weight-decay", "1e-5", "-decay-biases")
    gating = ("-lr", "1e-3", "-block-lr", "A=1e-1,B=1e-5", "-momentum", {100: "0.9", 200: "0.8", 500: "0.5"}[hidden],
              "-block-momentum", "C=0.5")
    if number == 2:
        return common + ("-block-lr", "C=0,d=0,b=0,A=0,a=0") + _LBL_S  # -lr must be above 0
    return common + gating + (_LBL_S if number == 3 else ())


# The survey's Table 1 (paper 002): FNN (n = 5), RNN and LSTM at m = 100, h = 200, without
# direct connections and biases, then the LSTM with each; 5 epochs at most, one thread
# each (two runs side by side on 2 cores). The recurrent ones train with Adam, the FNN
# with the MLP's SGD; -lr-halve for all.
_SURVEY = dict(make_target="brown-survey", features=100, hidden=200, bias=False, epochs=5, patience=1, threads=1,
               early_stopping=True)
_RECURRENT = ("-optimizer", "adam", "-lr-halve")
FAST_BUDGET = 194  # seconds (-max-time): what 3 epochs of lstm-class took on one core (issue 21's run)
BEST_BUDGET = 7000  # seconds of training and validation (-max-time): the 2 hours, less room to start
_AWD = ("-layers", "2", "-tie", "-output", "class", "-reset-state", "never", "-max-time", str(BEST_BUDGET),
        "-dropout-input", "0.4", "-dropout-hidden", "0.3", "-dropout-output", "0.4", "-dropout-embedding", "0.1",
        "-weight-drop", "0.3", "-ar", "2", "-tar", "1", "-random-bptt", "-min-improvement", "1.003") + _RECURRENT
ABLATION_BUDGET = 600  # seconds of each ablation run (about 14 epochs of the one-layer network)
_DROPOUT = ("-dropout", "0.3")  # lstm-class's: a mask per unit and step on every non-recurrent connection
ABLATIONS = {  # brown-best's additions, each alone on lstm-class's network (none: lstm-class's -dropout)
    "none": _DROPOUT,
    "state": _DROPOUT + ("-reset-state", "never"),
    "locked": ("-dropout-input", "0.4", "-dropout-output", "0.4"),
    "embedding": _DROPOUT + ("-dropout-embedding", "0.1"),
    "weight-drop": _DROPOUT + ("-weight-drop", "0.3"),
    "ar-tar": _DROPOUT + ("-ar", "2", "-tar", "1"),
    "random-bptt": _DROPOUT + ("-random-bptt",),
    "layers": _DROPOUT + ("-layers", "2"),  # 512 units, then 256 tied to the features
    "all": ("-layers", "2", "-reset-state", "never", "-dropout-input", "0.4", "-dropout-hidden", "0.3",
            "-dropout-output", "0.4", "-dropout-embedding", "0.1", "-weight-drop", "0.3", "-ar", "2", "-tar", "1",
            "-random-bptt"),
}


def _ablation(added):
    return ("-tie", "-output", "class", "-max-time", str(ABLATION_BUDGET)) + added + _RECURRENT


_IS = dict(make_target="brown-is", order=4, features=30, hidden=80, epochs=5, batch=1, lr=0.001)
# Bengio & Senecal (2003) sec. 4.2 as the paper ran it: the energy network (its eq. 1-2: the
# next word's features enter the hidden layer), 3 words of context, m = 30, h = 80, no direct
# connections, 8 epochs, per-example SGD, no validation set; Algorithm 4 from N0 = 100 with
# the unigram proposal, the tiny set checked every 200,000 examples.
_ENERGY = dict(arch="energy", order=4, features=30, hidden=80, epochs=8, batch=1, threads=1, lr=0.001)

RUNS = {run.name: run for run in (
    # Bengio et al. (2003) Table 1.
    Run("mlp9", "brown-mlp9", order=5, features=30, hidden=100, paper_test_ppl=276, **_MLP),
    Run("mlp1", "brown-mlp1", order=5, features=60, hidden=50, direct=True, paper_test_ppl=268, **_MLP),
    # Zhang, Mnih & Hinton, sec. 3: the log-bilinear Model 0 (m = 100, n = 5), exact softmax,
    # then Models 1-3 from it.
    Run("lbl0", "brown-lbl", arch="lbl", order=5, features=100, hidden=0, model_number=0, **_MLP),
    *(Run(f"lbl{number}-h{hidden}", "brown-lbl", arch=f"lbl{number}", order=5, features=100, hidden=hidden,
          model_number=number, init_from=_LBL_INIT[number].format(hidden=hidden).split(),
          extra=_lbl_training(number, hidden), **_LBL)
      for number in (1, 2, 3) for hidden in (100, 200)),
    # Model 0 with the factored output layers (issue 16), trained as lbl0
    *(Run(f"lbl0-{output}", "brown-lbl-outputs", arch="lbl", order=5, features=100, hidden=0, extra=("-output", output),
          **_MLP) for output in ("class", "hs")),
    # the paper's best: Model 1 with 500 gating units
    Run("lbl1-h500", "brown-lbl", arch="lbl1", order=5, features=100, hidden=500, model_number=1,
        init_from=("lbl0",), extra=_lbl_training(1, 500), **_LBL),
    Run("survey-fnn", order=5, batch=256, lr=0.003, extra=("-lr-halve",), **_SURVEY),
    Run("survey-rnn", arch="rnn", order=None, lr=0.002, extra=_RECURRENT, **_SURVEY),
    Run("survey-lstm", arch="lstm", order=None, lr=0.002, extra=_RECURRENT, **_SURVEY),
    Run("survey-lstm-direct", arch="lstm", order=None, direct=True, lr=0.002, extra=_RECURRENT, **_SURVEY),
    Run("survey-lstm-bias", arch="lstm", order=None, lr=0.002, extra=_RECURRENT, **{**_SURVEY, "bias": True}),
    # our best LSTM on Brown (make brown-lstm): output layer tied to the features, dropout
    Run("lstm-best", "brown-lstm", arch="lstm", order=None, features=256, hidden=256, epochs=12, patience=2,
        threads=1, lr=0.002, early_stopping=True, extra=("-tie", "-dropout", "0.3") + _RECURRENT),
    # the same with the class-factored output layer (sqrt(|V|) classes by frequency)
    Run("lstm-class", "brown-lstm", arch="lstm", order=None, features=256, hidden=256, epochs=12, patience=2,
        threads=1, lr=0.002, early_stopping=True, extra=("-tie", "-dropout", "0.3", "-output", "class") + _RECURRENT),
    # time to quality (issues 21 and 36): lstm-class's network for FAST_BUDGET seconds of wall
    # time (validation included) on 2 cores, its state carried across sentences, with AR and
    # TAR (the two additions that helped most in brown-ablation's 600 s; picked on valid)
    Run("lstm-fast", "brown-fast", arch="lstm", order=None, features=256, hidden=256, epochs=100, patience=3,
        threads=2, lr=0.002, early_stopping=True,
        extra=("-tie", "-dropout", "0.3", "-output", "class", "-reset-state", "never", "-max-time", str(FAST_BUDGET),
               "-ar", "2", "-tar", "1") + _RECURRENT),
    # the best model this machine trains in BEST_BUDGET seconds (issue 36, make brown-best): two
    # layers (800 units, then 400 tied to the features), state carried across sentences, and
    # AWD-LSTM's regularisers (Merity et al. 2018) at about their published strengths
    Run("lstm-awd", "brown-best", arch="lstm", order=None, features=400, hidden=800, epochs=100, patience=3,
        threads=2, lr=0.002, early_stopping=True, extra=_AWD),
    # what each of brown-best's additions gives on its own (issue 36): lstm-class's network
    # trained for ABLATION_BUDGET seconds on 2 cores, alone and with one addition each, then all
    *(Run(f"ablation-{name}", "brown-ablation", arch="lstm", order=None, features=256,
          hidden=512 if "-layers" in added else 256, epochs=100, patience=3, threads=2, lr=0.002,
          early_stopping=True, extra=_ablation(added)) for name, added in ABLATIONS.items()),
    # Bengio & Senecal (2003) sec. 4.2: the exact gradient against importance sampling.
    Run("is-full", criterion="full", **_IS),
    Run("is-adaptive", criterion="is-adaptive", samples=100, **_IS),
    Run("is-adaptive-n200", criterion="is-adaptive", samples=200, **_IS),
    Run("is-adaptive-ess50", criterion="is-adaptive", samples=100, ess_min=50, **_IS),
    Run("energy-is-adaptive", "brown-energy", criterion="is-adaptive", samples=100, **_ENERGY),
    # the exact gradient costs |V| hidden layers per word: the 8 epochs would take about 12 hours
    # of one core, so it trains on its own target; make bench times its step on 400 sentences
    Run("energy-full", "brown-energy-exact", criterion="full", **_ENERGY),
    # the two side by side where the exact one fits (8 epochs in about 20 minutes)
    Run("energy-small-full", "brown-energy", criterion="full", train_sentences=1000, **_ENERGY),
    Run("energy-small-is-adaptive", "brown-energy", criterion="is-adaptive", samples=100, train_sentences=1000,
        **_ENERGY),
)}
MLP9 = RUNS["mlp9"]
QUALITY_RUNS = [RUNS["mlp9"], RUNS["mlp1"]]
LBL_RUNS = [run for run in RUNS.values() if run.make_target == "brown-lbl"]
SAMPLING_RUNS = [run for run in RUNS.values() if run.make_target == "brown-is"]
SURVEY_RUNS = [run for run in RUNS.values() if run.make_target == "brown-survey"]
LSTM_RUNS = [run for run in RUNS.values() if run.make_target == "brown-lstm"]


def model_or_trained(run, path, brown, nplm, program):
    """For a benchmark that uses `run`'s model at `path`: trains it (its Makefile target)
    when `path` is the run's own file and missing, and exits naming `path` when another file
    is missing. Returns what to say of it (how long the training took, or nothing)."""
    if os.path.exists(path):
        return ""
    if path != run.model_path:
        sys.exit(f"{program}: {path}: no such file")
    print(f"{program}: training {run.model_path} (make {run.make_target}) ...", file=sys.stderr)
    start = time.perf_counter()
    subprocess.run([sys.executable, os.path.abspath(__file__), run.make_target, "--brown", brown, "--nplm", nplm],
                   check=True)
    return f" (trained by this run in {(time.perf_counter() - start) / 60:.1f} min)"


def main():
    parser = argparse.ArgumentParser(description="Train the runs of one Makefile target on Brown.")
    parser.add_argument("target", choices=sorted({run.make_target for run in RUNS.values()}))
    parser.add_argument("--brown", default="../shared/data/brown")
    parser.add_argument("--nplm", default="nplm")
    args = parser.parse_args()
    os.makedirs(RUNS_DIR, exist_ok=True)
    subprocess.run([args.nplm, "vocab", "-text", os.path.join(args.brown, "train.txt"), "-min-count",
                    str(VOCAB_MIN_COUNT), "-write-vocab", VOCAB_PATH], check=True)
    for run in RUNS.values():
        if run.make_target == args.target:
            if os.path.exists(run.model_path):  # as make does: delete the model to train it again
                print(f"{run.model_path} exists: not trained again", flush=True)
                continue
            run.write_train_text(args.brown)
            command = run.command(args.nplm, args.brown)
            print(" ".join(command), flush=True)
            subprocess.run(command, check=True)


if __name__ == "__main__":
    main()
