"""key_order's two sorts of its packed values (cython_ext/ngram_sorting.pyx: each key less
the least, above its place), numpy's sort and the radix sort of the keys' spread bits, on
random keys of the sizes and spreads the out-of-core estimate sorts (20M Zipf words: 0.5M
to 17M keys a call, 18-42 bits of spread). Both give the same order, checked on every
run. The two are timed in turn, run after run; the table gives the medians in ns a key
and their ratio, and which one key_order takes on this CPU. numpy's sort is
x86-simd-sort's AVX-512 code where the CPU has it (slow on AMD's Zen 4), its AVX2 code
otherwise.

    python benchmarks/key_order_speed.py --repeats 7
"""
import argparse
import platform
import statistics
import time

import numpy as np

from nplmtk._ext.ngram_sorting import SLOW_COMPRESS_STORES, key_order

SHAPES = [(500_000, 18), (1_000_000, 24), (1_000_000, 33), (1_000_000, 37), (2_000_000, 37), (1_000_000, 42),
          (4_000_000, 37)]


def ns_a_key(keys, radix):
    started = time.perf_counter()
    order = key_order(keys, radix)
    return (time.perf_counter() - started) / len(keys) * 1e9, order


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    chosen = "the radix sort" if SLOW_COMPRESS_STORES else "numpy's sort"
    print(f"{platform.machine()}, numpy {np.__version__}; key_order takes {chosen} here")
    print("| keys | spread bits | numpy's sort, ns a key | radix sort, ns a key | numpy / radix |")
    print("| ---: | ---: | ---: | ---: | ---: |")
    for size, bits in SHAPES:
        keys = rng.integers(0, 1 << bits, size, dtype=np.int64)
        times = {False: [], True: []}
        for _ in range(args.repeats):
            orders = []
            for radix in times:
                elapsed, order = ns_a_key(keys, radix)
                times[radix].append(elapsed)
                orders.append(order)
            if not np.array_equal(*orders):
                raise SystemExit(f"the two orders differ at {size} keys of {bits} bits")
        old, new = (statistics.median(times[radix]) for radix in times)
        print(f"| {size:,} | {bits} | {old:.1f} | {new:.1f} | {old / new:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
