"""PyTorch peer of `nplm train -arch lstm`: training speed (target words per second) of the
word-language-model LSTM of PyTorch's examples/word_language_model, trained the same way.

Model: Embedding(V, m) -> dropout -> LSTM(m, h, layers, dropout between layers) -> dropout -> Linear(h, V),
the output weights optionally tied to the embedding (--tie, needs m == h); full softmax cross-entropy
with mean reduction over a segment's B x T target words (so --lr is per mean word loss, and --clip is
clip_grad_norm_ of the mean loss's gradient). Data: one sentence per line; each sentence gives the
(input, target) pairs (<s>, w1), ..., (wn, </s>), words outside the vocabulary file as <unk>; all pairs
in one stream, cut into B contiguous streams (batchify, remainder dropped), trained by truncated BPTT
of T steps with the hidden state carried (detached) from segment to segment (repackage_hidden).
Only the training loop is timed; words are the target tokens processed. Prints one JSON line:

    python benchmarks/pytorch_lstm.py --text train.txt --vocab vocab.txt --m 200 --h 200 --max-words 200000

torch is a benchmark-only dependency, never imported by nplmtk: `pip install torch==2.13.0 numpy` (CPU) in a venv.
"""
import argparse
import json
import math
import time

import numpy as np
import torch
from torch import nn


class LSTMModel(nn.Module):
    """examples/word_language_model's RNNModel with rnn_type LSTM."""

    def __init__(self, vocab_size, m, h, layers, dropout, tie):
        super().__init__()
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(vocab_size, m)
        self.rnn = nn.LSTM(m, h, layers, dropout=dropout if layers > 1 else 0.0)
        self.decoder = nn.Linear(h, vocab_size)
        if tie:
            if m != h:
                raise SystemExit("--tie needs --m equal to --h")
            self.decoder.weight = self.encoder.weight
        nn.init.uniform_(self.encoder.weight, -0.1, 0.1)
        nn.init.uniform_(self.decoder.weight, -0.1, 0.1)
        nn.init.zeros_(self.decoder.bias)

    def forward(self, inputs, hidden):
        output, hidden = self.rnn(self.drop(self.encoder(inputs)), hidden)
        return self.decoder(self.drop(output)), hidden


def read_vocab(path):
    words = [line.strip() for line in open(path, encoding="utf-8")]
    words = [w for w in words if w]
    words += [w for w in ("<unk>", "<s>", "</s>") if w not in words]
    return {w: i for i, w in enumerate(dict.fromkeys(words))}


def read_pairs(path, vocab):
    """(inputs, targets) int64 arrays of the text's pairs (<s>, w1), ..., (wn, </s>), sentence after sentence."""
    unk, bos, eos = vocab["<unk>"], vocab["<s>"], vocab["</s>"]
    inputs, targets = [], []
    for line in open(path, encoding="utf-8"):
        ids = [vocab.get(w, unk) for w in line.split()]
        if ids:
            inputs += [bos] + ids
            targets += ids + [eos]
    return np.array(inputs, dtype=np.int64), np.array(targets, dtype=np.int64)


def batchify(data, streams):
    """(steps, streams): `streams` contiguous pieces of the stream as columns, the remainder dropped."""
    steps = len(data) // streams
    return torch.from_numpy(data[:steps * streams].reshape(streams, steps).T.copy())


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--text", required=True, help="training text, one sentence per line")
    p.add_argument("--vocab", required=True, help="vocabulary, one word per line")
    p.add_argument("--m", type=int, default=200, help="embedding size")
    p.add_argument("--h", type=int, default=200, help="LSTM state size")
    p.add_argument("--layers", type=int, default=1)
    p.add_argument("--streams", type=int, default=32, help="B, parallel streams (batch size)")
    p.add_argument("--bptt", type=int, default=35, help="T, steps per truncated-BPTT segment")
    p.add_argument("--dropout", type=float, default=0.0)
    p.add_argument("--tie", action="store_true", help="tie the output weights to the embedding (m == h)")
    p.add_argument("--optimizer", choices=("sgd", "adam"), default="sgd")
    p.add_argument("--lr", type=float, default=None, help="learning rate [sgd 20, adam 0.001]")
    p.add_argument("--clip", type=float, default=0.25, help="gradient norm clip (0: none)")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    p.add_argument("--max-words", type=int, default=0, help="stop after about N target words (0: all epochs)")
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    vocab = read_vocab(a.vocab)
    inputs, targets = read_pairs(a.text, vocab)
    inputs, targets = batchify(inputs, a.streams), batchify(targets, a.streams)
    model = LSTMModel(len(vocab), a.m, a.h, a.layers, a.dropout, a.tie)
    lr = a.lr if a.lr is not None else (20.0 if a.optimizer == "sgd" else 0.001)
    optim = (torch.optim.SGD if a.optimizer == "sgd" else torch.optim.Adam)(model.parameters(), lr=lr)
    criterion = nn.CrossEntropyLoss()  # mean over the segment's words
    model.train()
    segments = [(e, i) for e in range(a.epochs) for i in range(0, inputs.size(0), a.bptt)]
    words, loss_sum = 0, 0.0
    start = time.perf_counter()
    for _, i in segments:
        x, y = inputs[i:i + a.bptt], targets[i:i + a.bptt]
        # zero state at each epoch's start (init_hidden), else carried but detached (repackage_hidden)
        hidden = None if i == 0 else tuple(t.detach() for t in hidden)
        optim.zero_grad()
        output, hidden = model(x, hidden)
        loss = criterion(output.view(-1, output.size(-1)), y.reshape(-1))
        loss.backward()
        if a.clip > 0:
            nn.utils.clip_grad_norm_(model.parameters(), a.clip)
        optim.step()
        words += y.numel()
        loss_sum += loss.item() * y.numel()
        if a.max_words and words >= a.max_words:
            break
    seconds = time.perf_counter() - start
    shape = {"V": len(vocab), "m": a.m, "h": a.h, "layers": a.layers, "streams": a.streams, "bptt": a.bptt,
             "dropout": a.dropout, "tie": a.tie, "optimizer": a.optimizer, "lr": lr, "clip": a.clip}
    print(json.dumps({"peer": "pytorch", "torch": torch.__version__, "words": words, "seconds": round(seconds, 3),
                      "words_per_s": round(words / seconds, 1), "train_ppl": round(math.exp(loss_sum / words), 2),
                      "threads": torch.get_num_threads(), "shape": shape}))


if __name__ == "__main__":
    main()
