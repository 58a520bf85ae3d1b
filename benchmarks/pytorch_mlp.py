"""PyTorch peer of `nplm train-nplm -order 5 -m 30 -h 100` (MLP9): training speed (words per
second) of Bengio et al.'s (2003) network trained the way ours is, one epoch.

Model: Embedding(V, m) of the n-1 context words, concatenated -> Linear((n-1)m, h) -> tanh ->
Linear(h, V), no direct connections; full softmax cross-entropy summed over the batch (ours
steps by the rate times the batch's summed gradient), plain SGD at --lr (ours' default 1e-3)
with weight decay --weight-decay on the weights, not the biases (ours: 1e-4 on C, H and U;
ours decays only the rows of C a batch touches, torch's SGD the whole of C). Ours' rate decay
eps0 / (1 + 1e-8 t) is left out (under 0.1% over an epoch of these runs). Weights uniform in
+-1/sqrt(fan-in), biases zero, as ours. Data: one sentence per line, words outside the
vocabulary file as <unk>; one window per word and </s>, the context padded with <s>: the
windows ours trains on, shuffled each epoch. Only the training loop is timed (gathering each
batch of windows from the shuffled order included, as ours does); words are the windows
trained. The model is used as a user would write it: nn.Embedding (dense gradient, the
default), nn.Linear, F.cross_entropy, torch.optim.SGD, the same loop at every batch size.
Prints one JSON line:

    python benchmarks/pytorch_mlp.py --text train.txt --vocab vocab.txt --batch 256 --threads 2

torch is a benchmark-only dependency, never imported by nplmtk: `pip install torch==2.13.0 numpy` (CPU) in a venv.
"""
import argparse
import json
import math
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from pytorch_lstm import read_vocab


class MLP(nn.Module):
    """y = b + U tanh(d + H x), x = the context words' feature vectors C(w) (eq. 1, W = 0)."""

    def __init__(self, vocab_size, context, m, h):
        super().__init__()
        self.features = nn.Embedding(vocab_size, m)
        self.hidden = nn.Linear(context * m, h)
        self.output = nn.Linear(h, vocab_size)
        for weight in (self.features.weight, self.hidden.weight, self.output.weight):
            bound = 1 / math.sqrt(weight.shape[1])
            nn.init.uniform_(weight, -bound, bound)
        nn.init.zeros_(self.hidden.bias)
        nn.init.zeros_(self.output.bias)

    def forward(self, context):
        x = self.features(context).flatten(1)
        return self.output(torch.tanh(self.hidden(x)))


def read_windows(path, vocab, order):
    """int64 (N, order): one window per word and </s> of each non-empty line, the context
    padded with <s>, words outside the vocabulary as <unk>."""
    unk, bos, eos = vocab["<unk>"], vocab["<s>"], vocab["</s>"]
    windows = []
    for line in open(path, encoding="utf-8"):
        words = line.split()
        if words and words[0] == "<s>":
            words = words[1:]
        if words and words[-1] == "</s>":
            words = words[:-1]
        if not words:
            continue
        ids = [bos] * (order - 1) + [vocab.get(w, unk) for w in words] + [eos]
        windows += [ids[i:i + order] for i in range(len(ids) - order + 1)]
    return np.array(windows, dtype=np.int64).reshape(-1, order)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--text", required=True, help="training text, one sentence per line")
    p.add_argument("--vocab", required=True, help="vocabulary, one word per line")
    p.add_argument("--order", type=int, default=5, help="n: n-1 context words")
    p.add_argument("--m", type=int, default=30, help="feature vector size")
    p.add_argument("--h", type=int, default=100, help="hidden units (tanh)")
    p.add_argument("--batch", type=int, default=1, help="windows per SGD step")
    p.add_argument("--lr", type=float, default=1e-3, help="SGD rate on the batch's summed gradient")
    p.add_argument("--weight-decay", type=float, default=1e-4, help="on the weights, not the biases")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--score", action="store_true", help="time scoring instead: log p(target) of every window of "
                   "--text, in its order, batches of --batch under torch.inference_mode (the initial weights)")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    vocab = read_vocab(a.vocab)
    windows = torch.from_numpy(read_windows(a.text, vocab, a.order))
    model = MLP(len(vocab), a.order - 1, a.m, a.h)
    if a.score:
        return score(model, windows, a.batch, a.threads)
    weights = [model.features.weight, model.hidden.weight, model.output.weight]
    optim = torch.optim.SGD([{"params": weights, "weight_decay": a.weight_decay},
                             {"params": [model.hidden.bias, model.output.bias], "weight_decay": 0.0}], lr=a.lr)
    model.train()
    words, loss_sum = 0, 0.0
    start = time.perf_counter()
    for _ in range(a.epochs):
        order = torch.randperm(len(windows))
        for i in range(0, len(windows), a.batch):
            batch = windows[order[i:i + a.batch]]
            optim.zero_grad()
            loss = F.cross_entropy(model(batch[:, :-1]), batch[:, -1], reduction="sum")
            loss.backward()
            optim.step()
            words += len(batch)
            loss_sum += loss.item()
    seconds = time.perf_counter() - start
    shape = {"V": len(vocab), "order": a.order, "m": a.m, "h": a.h, "batch": a.batch, "lr": a.lr,
             "weight_decay": a.weight_decay}
    print(json.dumps({"peer": "pytorch", "torch": torch.__version__, "words": words, "seconds": round(seconds, 3),
                      "words_per_s": round(words / seconds, 1), "train_ppl": round(math.exp(loss_sum / words), 2),
                      "threads": torch.get_num_threads(), "shape": shape}))


def score(model, windows, batch, threads):
    """Prints the words per second of scoring `windows` (one JSON line)."""
    model.eval()
    logp_sum = 0.0
    start = time.perf_counter()
    with torch.inference_mode():
        for i in range(0, len(windows), batch):
            rows = windows[i:i + batch]
            logp = F.log_softmax(model(rows[:, :-1]), dim=1).gather(1, rows[:, -1:])
            logp_sum += logp.sum(dtype=torch.float64).item()
    seconds = time.perf_counter() - start
    print(json.dumps({"peer": "pytorch", "torch": torch.__version__, "words": len(windows),
                      "seconds": round(seconds, 3), "words_per_s": round(len(windows) / seconds, 1),
                      "logp_sum": logp_sum, "threads": torch.get_num_threads(), "batch": batch}))


if __name__ == "__main__":
    main()
