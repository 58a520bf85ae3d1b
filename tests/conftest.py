import os
import subprocess
import sys

import numpy as np
import pytest

NPLM = os.path.join(os.path.dirname(sys.executable), "nplm")


# an HTK lattice of the paths a c d and b c d (then </s>), through a null node at the end
CHAIN_LATTICE = """VERSION=1.0
base=10 lmscale=1
start=0 end=4
I=0
I=1
I=2
I=3
I=4
J=0 S=0 E=1 W=a a=-1
J=1 S=0 E=1 W=b a=-1.5
J=2 S=1 E=2 W=c a=-1
J=3 S=2 E=3 W=d a=-1
J=4 S=3 E=4 W=!NULL
"""


def run_nplm(*args, stdin=None, cwd=None):
    """Run the installed `nplm` and return (status, stdout, stderr)."""
    proc = subprocess.run([NPLM, *map(str, args)], input=stdin, capture_output=True,
                          text=True, cwd=cwd)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.fixture
def nplm():
    return run_nplm


def run_main(capsys, *args):
    """`nplm ARGS` in this process (the CLI of this tree): (exit status, stdout, stderr)."""
    from cli.main import main
    try:
        main([str(a) for a in args])
        status = 0
    except SystemExit as exit:
        status = exit.code
    out, err = capsys.readouterr()
    return status, out, err


def scored_as_ppl_says(model_path, text):
    """`nplm ppl` of a saved model on `text`: (the model, the ppl it reports), which its
    logprobs must give."""
    from nplmtk.corpus import Corpus
    from nplmtk.models import load
    status, out, err = run_nplm("ppl", "-lm", model_path, "-text", text)
    assert status == 0 and out.startswith(f"file {text}: "), err
    reported = float(out.split("ppl= ")[1].split()[0])
    model = load(str(model_path))
    corpus = Corpus.read(str(text), model.vocab)
    assert abs(np.exp(-model.logprobs(corpus).mean()) / reported - 1) < 1e-3
    return model, reported


@pytest.fixture(scope="session")
def toy_texts(tmp_path_factory):
    """train.txt (600 sentences) and valid.txt (40) of the toy grammar: (folder, its vocabulary)."""
    from nplmtk.toy import ToyGrammar
    from nplmtk.vocab import Vocabulary
    folder = tmp_path_factory.mktemp("toy")
    grammar = ToyGrammar()
    for name, count, seed in (("train", 600, 1), ("valid", 40, 2)):
        (folder / f"{name}.txt").write_text("\n".join(" ".join(s) for s in grammar.sentences(count, seed)) + "\n")
    return folder, Vocabulary(grammar.words)


def toy_decoder_models(folder):
    """For the decoders' tests: the toy grammar's train.txt in `folder`, its vocabulary
    (words seen 3 times or more), KN3 and KN5 with <unk> as kn3.arpa and kn5.arpa, and six
    sentences to decode (the last with words outside the vocabulary): (vocab, sentences)."""
    from nplmtk.corpus import Corpus
    from nplmtk.ngram.arpa import write_arpa
    from nplmtk.ngram.counts import NgramCounts
    from nplmtk.ngram.estimate import estimate
    from nplmtk.toy import ToyGrammar
    from nplmtk.vocab import Vocabulary, count_words
    grammar = ToyGrammar()
    train = [" ".join(s) for s in grammar.sentences(3000, seed=11)]
    (folder / "train.txt").write_text("\n".join(train) + "\n")
    vocab = Vocabulary.from_counts(count_words([str(folder / "train.txt")]), min_count=3)
    corpus = Corpus.from_lines(train, vocab)
    for order in (3, 5):
        write_arpa(estimate(NgramCounts.from_corpus(corpus, order), unk_is_word=True), str(folder / f"kn{order}.arpa"))
    return vocab, [" ".join(s) for s in grammar.sentences(5, seed=12)] + ["the zebra is walking in the igloo"]


def assert_one_line_error(status, stderr, *fragments):
    assert status == 2, stderr
    assert "Traceback" not in stderr
    assert len(stderr.strip().splitlines()) == 1, stderr
    for fragment in fragments:
        assert fragment in stderr, stderr


def assert_gradients_match_finite_differences(params, grads, loss, rng, epsilon=1e-3):
    """Central differences of the float64 `loss()` at up to 12 entries of every array of
    `params` (perturbed in place) against the kernel's `grads`: within 2e-3, relative
    above 1."""
    for name, array in params.items():
        flat = array.reshape(-1)
        for index in rng.choice(flat.size, size=min(flat.size, 12), replace=False):
            saved = flat[index]
            flat[index] = saved + epsilon
            up = loss()
            flat[index] = saved - epsilon
            down = loss()
            flat[index] = saved
            # the perturbation is exact in float32 arithmetic of the stored value
            numeric = (up - down) / (np.float64(np.float32(saved + epsilon)) - np.float64(np.float32(saved - epsilon)))
            analytic = grads[name].reshape(-1)[index]
            assert abs(numeric - analytic) <= 2e-3 * max(1.0, abs(numeric)), (name, index, numeric, analytic)


def sampled_step_errors(model_at_start, windows, proposal, exact, seeds):
    """For N = 10, 100, 1,000, 10,000 samples: the mean over `seeds` of the squared distance
    between one sampled update of rate 1 (minus the estimator) and the exact gradient."""
    from nplmtk.neural.optimizer import DENSE_DECAY_PERIOD, Draws, block_schedule, sgd_steps, update_schedule
    from nplmtk.neural.train import TrainingConfig
    batch = len(windows)
    schedule = update_schedule(batch, batch, 1.0, 0.0, 0.0, DENSE_DECAY_PERIOD["sampled"])
    model = model_at_start()
    if hasattr(model, "blocks"):  # a rate of 1 for every block
        config = TrainingConfig.of(model, batch=batch, lr=1.0, lr_decay=0.0, weight_decay=0.0)
        rates, dense_keep, momentum = block_schedule(model, config, config.settings, model.array_roles(config.settings),
                                                     batch, 1.0, DENSE_DECAY_PERIOD["sampled"])
        schedule = (rates, None, dense_keep, momentum)
    errors = []
    for samples in (10, 100, 1000, 10000):
        squared = []
        for seed in range(seeds):
            model = model_at_start()
            before = {k: v.astype(np.float64) for k, v in model.params.items()}
            model.network(capacity=batch).train(windows, sgd_steps(batch, *schedule,
                                                                   sampling=Draws(samples, proposal, seed)))
            squared.append(sum((((before[k] - model.params[k]) - exact[k]) ** 2).sum() for k in before))
        errors.append(np.mean(squared))
    return errors


def hs_logprobs(h, Vn, bn, tree, words):
    """log p of every word from the top layer h (rows): the product of sigma(+-z) down
    the stored tree, walked from the root (words are leaves 0..|V|-1, internal node i is
    |V| + i, its children at tree[2i], tree[2i + 1]; the root is the last)."""
    z = h @ Vn.T + bn
    logp = np.zeros((len(h), words))
    stack = [(2 * words - 2, np.zeros(len(h)))]
    while stack:
        node, above = stack.pop()
        if node < words:
            logp[:, node] = above
            continue
        i = node - words
        to_first = np.log(1 / (1 + np.exp(-z[:, i])))  # log sigma(z); log sigma(-z) = that - z
        stack += [(tree[2 * i], above + to_first), (tree[2 * i + 1], above + to_first - z[:, i])]
    return logp


def class_logprobs(h, V, d, Vc, bc, class_of):
    """log p of every word from the top layer h (rows) by the class-factored softmax:
    p(class) p(word | class), each a softmax."""
    class_of = np.array(class_of)
    z = log_softmax(h @ Vc.T + bc)
    y = h @ V.T + d
    return np.stack([z[:, class_of[w]] + log_softmax(np.where(class_of == class_of[w], y, -np.inf))[:, w]
                     for w in range(len(class_of))], axis=1)


def log_softmax(y):
    top = y.max(axis=1, keepdims=True)
    return y - top - np.log(np.exp(y - top).sum(axis=1, keepdims=True))


@pytest.fixture
def bounded_memory():
    """This process may take at most 2 GiB more address space during the test: a reader
    that failed to stop on an endless input (/dev/zero) ends in a MemoryError instead of
    taking the machine's memory."""
    import resource
    with open("/proc/self/status") as status:
        used = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmSize:"))
    before = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (used + (2 << 30), before[1]))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, before)


@pytest.fixture(scope="session")
def toy_lstm(toy_texts, tmp_path_factory):
    """A small LSTM (m = h = 8) trained for one epoch on the toy train.txt: its file."""
    folder, _ = toy_texts
    model = tmp_path_factory.mktemp("lstm") / "lstm.nplm"
    status, _, err = run_nplm("train-nplm", "-arch", "lstm", "-text", folder / "train.txt", "-m", 8, "-h", 8,
                              "-epochs", 1, "-lm", model)
    assert status == 0, err
    return model

