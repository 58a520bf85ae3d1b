"""The Transformer's blocks against PyTorch on the CPU, side by side (issue 52, item 3): the
same shape and threads, training (forward and back-propagation) and scoring (forward only,
no dropout), each side in a worker process of its own, the sides' runs alternated and their
medians compared; the anchor is the faster of two PyTorch models. Prints a markdown table
with words/s and the share of the sgemm peak (a big sgemm of scipy's BLAS on the same
threads, measured alternately with the others).

    .venv/bin/python benchmarks/transformer_speed.py --torch-python /work/torch-venv/bin/python

Sides (a function each, `SIDES`; a model-level comparison adds its own):
  ours         cython_ext/transformer_kernels.pyx's TransformerStack (set_threads, BLAS single-threaded)
  torch-layer  nn.TransformerEncoder of nn.TransformerEncoderLayer(norm_first=True, activation='gelu'),
               a causal mask, then a LayerNorm
  torch-sdpa   the same blocks by hand with F.scaled_dot_product_attention(is_causal=True)
Training is forward plus backward of dL/d(top) given (and dL/dx); no optimizer step. With --whole,
each side's whole model instead (ours-model, torch-layer-model, torch-sdpa-model): the embeddings
and learned positions, the stack, the full softmax over --vocab words (Brown's 14,119 of nplm vocab
-min-count 4), the summed cross-entropy, the gradient's norm clipped at 1 a word, Adam's step;
scoring = log p of each target. Each step is timed in wall and in CPU time (the process's, every
thread's), and the paired ratios of both printed. torch is a benchmark-only dependency, never
imported by nplmtk.

    .venv/bin/python benchmarks/transformer_speed.py --whole --threads 2 --runs 7 --steps 2
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def stack_flops(shape):
    """Floating-point operations of one forward pass: the products of the linear layers and
    the attention's entries that the causal mask keeps (T (T + 1) / 2 per stream and head)."""
    B, T, d, heads, ff, layers = (shape[k] for k in ("streams", "length", "d", "heads", "ff", "layers"))
    linear = 2 * B * T * (4 * d * d + 2 * d * ff)
    attention = 2 * 2 * B * (T * (T + 1) // 2) * d
    return layers * (linear + attention)


def output_flops(shape):
    """The full softmax's product of one forward pass (the model's other work is small)."""
    return 2 * shape["streams"] * shape["length"] * shape["d"] * shape["vocab"]


# ---- the sides: each returns {mode: a callable running one step}

def side_ours(shape, threads, dropout):
    import contextlib

    from nplmtk._ext.transformer_kernels import BLOCK_PARAMETERS, TransformerStack
    from nplmtk.neural.blas import blas_threads, transposed_products_direct
    B, T, d, heads, ff, layers = (shape[k] for k in ("streams", "length", "d", "heads", "ff", "layers"))
    rng = np.random.default_rng(0)
    sizes = {"d": d, "3d": 3 * d, "f": ff}
    params = {f"{name}{b}": rng.normal(0, 0.02, tuple(sizes[s] for s in dims)).astype(np.float32)
              for b in range(layers) for name, dims in BLOCK_PARAMETERS}
    for b in range(layers):
        params[f"ln1_gain{b}"] += 1
        params[f"ln2_gain{b}"] += 1
    params["final_gain"], params["final_bias"] = np.ones(d, np.float32), np.zeros(d, np.float32)
    grads = {name: np.zeros_like(value) for name, value in params.items()}
    stack = TransformerStack(params, grads, layers, heads, B, T, drop_attention=dropout, drop_residual=dropout,
                             direct_gradients=transposed_products_direct())
    stack.set_threads(threads)
    held = contextlib.ExitStack()
    held.enter_context(blas_threads(1 if threads > 1 else threads))  # the threads slice the products
    x = rng.normal(0, 1, (B * T, d)).astype(np.float32)
    top_grad = rng.normal(0, 1, (B * T, d)).astype(np.float32)

    def train():
        stack.forward(x, True)
        stack.backward(top_grad)

    return {"train": train, "score": lambda: stack.forward(x, keep=False), "held": held}


def side_sgemm(shape, threads, dropout):
    """The peak: C = A B of 2048 x 2048 matrices with scipy's sgemm on `threads` threads."""
    import contextlib

    from scipy.linalg.blas import sgemm

    from nplmtk.neural.blas import blas_threads
    held = contextlib.ExitStack()
    held.enter_context(blas_threads(threads))
    a = np.asfortranarray(np.random.default_rng(0).normal(0, 1, (2048, 2048)).astype(np.float32))
    return {"peak": lambda: sgemm(1.0, a, a), "held": held, "flops": 2 * 2048 ** 3}


def _torch_inputs(shape, threads):
    import torch
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    B, T, d = shape["streams"], shape["length"], shape["d"]
    return torch, torch.randn(B, T, d, requires_grad=True), torch.randn(B, T, d)


def _torch_modes(torch, model, run, x, top_grad):
    def train():
        model.train()
        model.zero_grad(set_to_none=True)
        x.grad = None
        run(x).backward(top_grad)

    def score():
        model.eval()
        with torch.inference_mode():
            run(x.detach())

    return {"train": train, "score": score}


def causal_encoder(shape, dropout):
    """nn.TransformerEncoder of nn.TransformerEncoderLayer(norm_first, gelu) and a final
    LayerNorm, called with the causal mask."""
    import torch
    nn = torch.nn
    d, heads, ff, layers, T = (shape[k] for k in ("d", "heads", "ff", "layers", "length"))
    layer = nn.TransformerEncoderLayer(d, heads, ff, dropout=dropout, activation="gelu", batch_first=True,
                                       norm_first=True)
    mask = nn.Transformer.generate_square_subsequent_mask(T)

    class Causal(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.TransformerEncoder(layer, layers, norm=nn.LayerNorm(d), enable_nested_tensor=False)

        def forward(self, h):
            return self.encoder(h, mask=mask, is_causal=True)

    return Causal()


def side_torch_layer(shape, threads, dropout):
    torch, x, top_grad = _torch_inputs(shape, threads)
    model = causal_encoder(shape, dropout)
    return _torch_modes(torch, model, model, x, top_grad)


def sdpa_blocks(shape, dropout):
    """(torch, the blocks by hand on F.scaled_dot_product_attention then a LayerNorm)."""
    import torch
    nn, F = torch.nn, torch.nn.functional
    d, heads, ff, layers = (shape[k] for k in ("d", "heads", "ff", "layers"))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.qkv, self.out = nn.LayerNorm(d), nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.ln2, self.ff1, self.ff2 = nn.LayerNorm(d), nn.Linear(d, ff), nn.Linear(ff, d)

        def forward(self, h):
            B, T, _ = h.shape
            q, k, v = self.qkv(self.ln1(h)).view(B, T, 3, heads, d // heads).permute(2, 0, 3, 1, 4)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=dropout if self.training else 0.0)
            h = h + F.dropout(self.out(a.transpose(1, 2).reshape(B, T, d)), dropout, self.training)
            return h + F.dropout(self.ff2(F.gelu(self.ff1(self.ln2(h)))), dropout, self.training)

    return torch, nn.Sequential(*[Block() for _ in range(layers)], nn.LayerNorm(d))


def side_torch_sdpa(shape, threads, dropout):
    torch, x, top_grad = _torch_inputs(shape, threads)
    model = sdpa_blocks(shape, dropout)[1]
    return _torch_modes(torch, model, model, x, top_grad)


# ---- the whole model (--whole): embeddings, the stack, the full softmax and an Adam step

def model_rows(shape, seed=0):
    """A segment of `length` steps of `streams` streams, (inputs, targets) a step, the words
    drawn by Zipf's law over the vocabulary (ids from 3: not <unk>, <s> or </s>)."""
    rng = np.random.default_rng(seed)
    B, T, V = shape["streams"], shape["length"], shape["vocab"]
    words = np.minimum(rng.zipf(1.2, (T + 1) * B), V - 4) + 2
    steps = words.reshape(T + 1, B).astype(np.int32)
    return np.ascontiguousarray(np.stack([steps[:-1], steps[1:]], axis=1))


def side_ours_model(shape, threads, dropout):
    """TransformerModel (learned positions, untied full softmax) as train-nplm trains it: its
    training network's train() (forward, backward, the clip's norm and Adam's step); scoring
    as ppl scores a text, a segment of its network's logprobs (the network, which ppl builds
    once a text, built once here too); `threads` as -threads gives them."""
    import contextlib

    from nplmtk.neural.blas import blas_threads
    from nplmtk.neural.optimizer import Optimizer
    from nplmtk.neural.train import TrainingConfig
    from nplmtk.neural.transformer import TransformerModel
    from nplmtk.vocab import Vocabulary
    vocab = Vocabulary([f"w{i}" for i in range(shape["vocab"] - 3)])
    model = TransformerModel.initial(vocab, features=shape["d"], layers=shape["layers"], heads=shape["heads"],
                                     ff=shape["ff"], context=shape["length"])
    config = TrainingConfig.of(model, optimizer="adam", lr=1e-3, threads=threads, streams=shape["streams"],
                               dropout=dropout, dropout_attention=dropout, progress=False)
    optimizer = Optimizer(model, config)
    network = model.training_network(config, 0)
    with blas_threads(threads):  # ppl's scoring threads: as many as the BLAS's
        scoring = model._network(shape["streams"], threads=model.scoring_workers(shape["streams"], shape["length"]))
    rows = model_rows(shape)
    scores = np.empty(rows.shape[0] * rows.shape[2])
    held = contextlib.ExitStack()
    held.enter_context(blas_threads(1))  # the trainer's, and the threaded scoring's
    return {"train": lambda: network.train(rows, optimizer.steps(len(rows))),
            "score": lambda: scoring.logprobs(rows, scores), "held": held}


def _torch_model(shape, threads, dropout, blocks):
    """The whole model in PyTorch around `blocks` (the stack, ending in its LayerNorm): the
    embeddings scaled by sqrt(d) plus learned positions, a Linear to the vocabulary, the
    cross-entropy summed over the words, the gradient's norm clipped at 1 a word as ours,
    torch.optim.Adam (its default, foreach)."""
    import torch
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    nn, F = torch.nn, torch.nn.functional
    V, d, T = shape["vocab"], shape["d"], shape["length"]

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding, self.positions = nn.Embedding(V, d), nn.Parameter(torch.zeros(T, d))
            self.blocks, self.output = blocks, nn.Linear(d, V)

        def forward(self, words):
            return self.output(self.blocks(F.dropout(self.embedding(words) * d ** 0.5 + self.positions, dropout,
                                                     self.training)))

    model = Model()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    rows = torch.from_numpy(model_rows(shape).astype(np.int64))
    inputs, targets = rows[:, 0].T.contiguous(), rows[:, 1].T.contiguous()  # streams x steps
    words = targets.numel()

    def train():
        model.train()
        optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(inputs).view(-1, V), targets.reshape(-1), reduction="sum")
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0 * words)
        optimizer.step()

    def score():
        model.eval()
        with torch.inference_mode():
            logp = F.log_softmax(model(inputs).view(-1, V), dim=-1)
            logp.gather(1, targets.reshape(-1, 1))

    return {"train": train, "score": score}


def side_torch_layer_model(shape, threads, dropout):
    return _torch_model(shape, threads, dropout, causal_encoder(shape, dropout))


def side_torch_sdpa_model(shape, threads, dropout):
    return _torch_model(shape, threads, dropout, sdpa_blocks(shape, dropout)[1])


SIDES = {"ours": side_ours, "sgemm": side_sgemm, "torch-layer": side_torch_layer, "torch-sdpa": side_torch_sdpa,
         "ours-model": side_ours_model, "torch-layer-model": side_torch_layer_model,
         "torch-sdpa-model": side_torch_sdpa_model}
TORCH_SIDES = ("torch-layer", "torch-sdpa")
LABELS = {"torch-layer": "PyTorch nn.TransformerEncoderLayer", "torch-sdpa": "PyTorch scaled_dot_product_attention"}


def worker(args):
    """Builds one side, then for each line "MODE STEPS" on stdin runs that many steps (one
    untimed first) and prints the median seconds of one: wall, then the process's CPU (all
    its threads': on a loaded machine the figure that waits less on the others)."""
    shape = json.loads(args.shape)
    modes = SIDES[args.worker](shape, args.threads, args.dropout)
    print("ready", flush=True)
    for line in sys.stdin:
        mode, steps = line.split()
        modes[mode]()
        walls, cpus = [], []
        for _ in range(int(steps)):
            start, cpu = time.perf_counter(), time.process_time()
            modes[mode]()
            walls.append(time.perf_counter() - start)
            cpus.append(time.process_time() - cpu)
        print(statistics.median(walls), statistics.median(cpus), flush=True)


class Worker:
    def __init__(self, side, python, args, shape):
        command = [python, os.path.abspath(__file__), "--worker", side, "--threads", str(args.threads),
                   "--dropout", str(args.dropout), "--shape", json.dumps(shape)]
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                        cwd=os.path.dirname(HERE))
        if self.process.stdout.readline().strip() != "ready":
            raise SystemExit(f"transformer_speed: the {side} worker did not start")

    def seconds(self, mode, steps):
        """(wall, CPU) seconds of a step, the medians of `steps`."""
        self.process.stdin.write(f"{mode} {steps}\n")
        self.process.stdin.flush()
        wall, cpu = self.process.stdout.readline().split()
        return float(wall), float(cpu)

    def close(self):
        self.process.stdin.close()
        self.process.wait()


def compare(args, shape):
    """{(side, mode): [(wall, CPU) seconds of each run]}, the sides' runs alternated (--whole:
    each side's whole model, under the same names)."""
    suffix = "-model" if args.whole else ""
    sides = {"ours": sys.executable, "sgemm": sys.executable}
    sides.update({side: args.torch_python for side in TORCH_SIDES})
    workers = {side: Worker(side if side == "sgemm" else side + suffix, python, args, shape)
               for side, python in sides.items()}
    times = {}
    try:
        for _ in range(args.runs):
            for mode in ("train", "score"):
                for side in ("ours",) + TORCH_SIDES:
                    times.setdefault((side, mode), []).append(workers[side].seconds(mode, args.steps))
            times.setdefault(("sgemm", "peak"), []).append(workers["sgemm"].seconds("peak", args.steps))
    finally:
        for w in workers.values():
            w.close()
    return times


def table(times, shape, args):
    words = shape["streams"] * shape["length"]
    wall = {key: [run[0] for run in runs] for key, runs in times.items()}
    cpu = {key: [run[1] for run in runs] for key, runs in times.items()}
    peak = 2 * 2048 ** 3 / statistics.median(wall[("sgemm", "peak")])
    peak_cpu = 2 * 2048 ** 3 / statistics.median(cpu[("sgemm", "peak")]) * args.threads
    forward = stack_flops(shape) + (output_flops(shape) if args.whole else 0)
    flops = {"train": 3 * forward, "score": forward}
    lines = [f"sgemm peak (scipy's BLAS, 2048^3, {args.threads} threads): {peak / 1e9:.1f} GFLOP/s of wall time, "
             f"{peak_cpu / 1e9:.1f} of CPU time x threads (medians of {args.runs})", "",
             "| pass | side | median ms | CPU ms | words/s | GFLOP/s | share of sgemm peak (wall; CPU) | "
             "speed vs anchor (wall; CPU) |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for mode in ("train", "score"):
        medians = {side: statistics.median(wall[(side, mode)]) for side in ("ours",) + TORCH_SIDES}
        cpus = {side: statistics.median(cpu[(side, mode)]) for side in ("ours",) + TORCH_SIDES}
        anchor = min(TORCH_SIDES, key=medians.get)
        pass_name = "training" if mode == "train" else "scoring"
        for side in ("ours",) + TORCH_SIDES:
            rate, rate_cpu = flops[mode] / medians[side], flops[mode] / cpus[side] * args.threads
            label = ("ours (TransformerModel)" if args.whole else "ours (TransformerStack)") if side == "ours" else \
                LABELS[side] + (" (anchor)" if side == anchor else "")
            lines.append(f"| {pass_name} | {label} | {medians[side] * 1e3:.1f} | {cpus[side] * 1e3:.1f} | "
                         f"{words / medians[side]:,.0f} | {rate / 1e9:.1f} | {rate / peak:.0%}; "
                         f"{rate_cpu / peak_cpu:.0%} | {medians[anchor] / medians[side]:.2f}x; "
                         f"{cpus[anchor] / cpus[side]:.2f}x |")
        paired = [a / o for o, a in zip(wall[("ours", mode)], wall[(anchor, mode)])]
        paired_cpu = [a / o for o, a in zip(cpu[("ours", mode)], cpu[(anchor, mode)])]
        lines.append(f"| {pass_name} | paired runs: anchor / ours, median of {len(paired)} | | | | | | "
                     f"{statistics.median(paired):.2f}x; {statistics.median(paired_cpu):.2f}x |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--torch-python", default="/work/torch-venv/bin/python",
                        help="a Python with torch installed (a benchmark-only dependency)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--runs", type=int, default=7, help="alternated runs of each side")
    parser.add_argument("--steps", type=int, default=3, help="timed steps a run (their median)")
    parser.add_argument("--dropout", type=float, default=0.0, help="on attention weights and residual branches")
    parser.add_argument("--streams", type=int, default=16)
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--d", type=int, default=256)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--ff", type=int, default=1024)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--whole", action="store_true",
                        help="the whole model: embeddings, the stack, the full softmax over --vocab words, Adam")
    parser.add_argument("--vocab", type=int, default=14119,
                        help="--whole: the output's words (Brown's vocabulary of nplm vocab -min-count 4: 14,119)")
    parser.add_argument("--worker", choices=sorted(SIDES), help=argparse.SUPPRESS)
    parser.add_argument("--shape", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return
    shape = {k: getattr(args, k) for k in ("streams", "length", "d", "heads", "ff", "layers", "vocab")}
    load = os.getloadavg()[0]
    times = compare(args, shape)
    print(f"{'whole model' if args.whole else 'stack'}, shape {shape}, threads {args.threads}, dropout {args.dropout}, {args.runs} alternated runs of "
          f"{args.steps} steps (median of each run); load average {load:.1f} before, {os.getloadavg()[0]:.1f} after")
    print(table(times, shape, args))
    print(json.dumps({f"{side} {mode}": [[round(t * 1e3, 1) for t in run] for run in runs]
                      for (side, mode), runs in times.items()}))


if __name__ == "__main__":
    main()
