"""`make brown-best`: the best network this machine trains within 2 hours on Brown (issue 36,
item 4), scored alone, with dynamic evaluation, with the caches and mixed with KN5, written
to BENCHMARKS.md with its valid ppl by epoch.

The network is lstm-awd of benchmarks/runs.py: an LSTM of two layers with AWD-LSTM's
regularisers (Merity et al. 2018), trained with a wall-time budget (`-max-time`, BEST_BUDGET
seconds of training and validation); it is trained first when runs/lstm-awd.nplm is missing
(delete it to train again). The caches, dynamic evaluation and mixtures are those of
`make brown-caches` (benchmarks/caches.py), each setting picked on Brown valid."""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from caches import METHODS, evaluate, evaluation_lines  # noqa: E402
from run import machine_stamp, write_sections  # noqa: E402
from runs import ABLATION_BUDGET, ABLATIONS, BEST_BUDGET, RUNS, RUNS_DIR, VOCAB_MIN_COUNT, VOCAB_PATH  # noqa: E402

HEADING = "## The best network in 2 hours on Brown (issue 36)"
ABLATION_HEADING = "## What each of brown-best's additions gives on its own (issue 36)"
BEST = RUNS["lstm-awd"]


def epochs_table(log_path):
    """The training log (one JSON record an epoch) as a markdown table, the best valid ppl in bold."""
    records = [json.loads(line) for line in open(log_path) if line.strip()]
    best = min(r["valid_ppl"] for r in records)
    lines = ["| epoch | train ppl | valid ppl | words/s | seconds | elapsed | |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in records:
        valid = f"**{r['valid_ppl']:.2f}**" if r["valid_ppl"] == best else f"{r['valid_ppl']:.2f}"
        kept = r.get("halved_after") == "a slight gain"  # -min-improvement's halving keeps the epoch
        notes = (["averaged parameters"] if r.get("averaged") else []) + (
            [f"rate halved to {r['lr_halved_to']:g}, " + ("kept (a slight gain)" if kept else "back to the best")]
            if "lr_halved_to" in r else [])
        lines.append(f"| {r['epoch']} | {r['train_ppl']:.2f} | {valid} | {r['words_per_s']:,.0f} | {r['seconds']:.0f} "
                     f"| {r['elapsed'] / 60:.1f} min | {'; '.join(notes)} |" if "elapsed" in r else "| |")
    return lines, records


def ablation(args):
    """Each ablation run of runs.py (lstm-class's network for ABLATION_BUDGET seconds, alone
    and with one of brown-best's additions each, then all), trained when missing and scored
    on Brown test by nplm ppl: its section of BENCHMARKS.md."""
    test = os.path.join(args.brown, "test.txt")
    rows = []
    for name, added in ABLATIONS.items():
        run = RUNS[f"ablation-{name}"]
        if not os.path.exists(run.model_path):
            print(" ".join(run.command(args.nplm, args.brown)), flush=True)
            subprocess.run(run.command(args.nplm, args.brown), check=True)
        report = subprocess.run([args.nplm, "ppl", "-lm", run.model_path, "-ppl", test], check=True,
                                capture_output=True, text=True).stdout
        records = [json.loads(line) for line in open(run.log_path) if line.strip()]
        rows.append((name, " ".join(added), records, float(report.split("ppl= ")[1].split()[0])))
        print(rows[-1][:2], len(records), rows[-1][3], flush=True)
    alone = rows[0][3]
    common = min(len(records) for _, _, records, _ in rows)  # valid ppl at an epoch every run reached
    one_layer = min(len(records) for _, options, records, _ in rows if "-layers" not in options)
    body = [ABLATION_HEADING, "", machine_stamp(), "",
            "`make brown-ablation` (benchmarks/best.py --ablation): lstm-class's network (`-arch lstm -m 256 -h 256 "
            f"-tie -output class`, Adam at 2e-3 with `-lr-halve`) trained for {ABLATION_BUDGET} s on 2 cores "
            "(`-threads 2 -max-time " f"{ABLATION_BUDGET}`, early stopping on Brown valid), with lstm-class's "
            "dropout 0.3 and with one of brown-best's additions each (the layers: 512 units, then 256 tied to the "
            "features), then with all of them; test ppl by `nplm ppl -lm MODEL -ppl test.txt`. The budget "
            "counts wall time, so a run that shared the machine trained fewer epochs: words/s (the median epoch's) "
            f"says how fast each ran, and the valid ppl after epoch {common} (the most that every run reached) and "
            f"after epoch {one_layer} (the most that every one-layer run reached) compare the additions at equal "
            "training:", "",
            f"| run | options | epochs | words/s | valid ppl after epoch {common} | after epoch {one_layer} | "
            "best valid ppl | test ppl | vs none |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, options, records, test_ppl in rows:
        speed = sorted(r["words_per_s"] for r in records)[len(records) // 2]
        later = f"{records[one_layer - 1]['valid_ppl']:.2f}" if len(records) >= one_layer else ""
        body.append(f"| {name} | `{options}` | {len(records)} | {speed:,.0f} | {records[common - 1]['valid_ppl']:.2f} "
                    f"| {later} | {min(r['valid_ppl'] for r in records):.2f} | {test_ppl:.2f} | {test_ppl / alone:.3f} |")
    others = rows[1:]
    body += ["", f"Within {ABLATION_BUDGET} s, on Brown test, these helped: "
             + (", ".join(name for name, _, _, test_ppl in others if test_ppl < alone) or "none") + "; these did not: "
             + (", ".join(name for name, _, _, test_ppl in others if test_ppl >= alone) or "none")
             + f". The dropouts and the larger network regularise a model that {ABLATION_BUDGET} s leaves "
             "undertrained: they are for brown-best's longer run, not for this budget."]
    write_sections(args.out, [body])
    print("\n".join(body))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--brown", default="../shared/data/brown")
    parser.add_argument("--nplm", default="nplm")
    parser.add_argument("--out", default="BENCHMARKS.md")
    parser.add_argument("--ablation", action="store_true", help="the ablation runs instead (make brown-ablation)")
    args = parser.parse_args()
    os.makedirs(RUNS_DIR, exist_ok=True)
    if not os.path.exists(VOCAB_PATH):
        subprocess.run([args.nplm, "vocab", "-text", os.path.join(args.brown, "train.txt"), "-min-count",
                        str(VOCAB_MIN_COUNT), "-write-vocab", VOCAB_PATH], check=True)
    if args.ablation:
        ablation(args)
        return
    trained = ""
    if not os.path.exists(BEST.model_path):
        command = BEST.command(args.nplm, args.brown)
        print(" ".join(command), flush=True)
        start = time.perf_counter()
        subprocess.run(command, check=True)
        trained = f", trained in this run in {(time.perf_counter() - start) / 60:.1f} min of wall time"
    epochs, records = epochs_table(BEST.log_path)
    notes, picked, results, srilm_line, _ = evaluate(BEST, args)
    words = sum(r["words_per_s"] * r["seconds"] for r in records)
    training = sum(r["seconds"] for r in records)
    body = [HEADING, "", machine_stamp(), "",
            f"`make brown-best` (benchmarks/best.py): {BEST.name} of benchmarks/runs.py, `nplm train-nplm -text "
            f"train.txt -valid valid.txt -vocab vocab.txt {' '.join(BEST.options())}`{trained}: a budget of "
            f"{BEST_BUDGET} s of training and validation on 2 cores (`-max-time`: no epoch starts that would end "
            "after it), the parameters of the best valid epoch kept. The regularisers are AWD-LSTM's (Merity et al. "
            "2018): locked dropout on the input features, between the layers and on the output, embedding dropout "
            "(whole words), DropConnect on the hidden-to-hidden weights, AR and TAR, segments of random length; "
            f"Adam with the rate halved after an epoch without progress. {METHODS}", "",
            f"Training: {len(records)} epochs, {training / 60:.1f} min in the training loop "
            f"({words / training:,.0f} words/s), {records[-1].get('elapsed', training) / 60:.1f} min with "
            "validation:", "", *epochs, "", "Every scoring setting was picked on Brown valid:", ""]
    body += evaluation_lines(notes, picked, results, srilm_line)
    write_sections(args.out, [body])
    print("\n".join(body))


if __name__ == "__main__":
    main()
