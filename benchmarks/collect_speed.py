"""Collection throughput: kernels measured per second, and where the wall time goes.

    python benchmarks/collect_speed.py [--programs 6] [--repeats 5] [--families mlp,cnn] [--out DIR]

Collects a small corpus with `tpucost.experiments.data.kernel.collect` into a temporary folder, timing the
whole run with ``time.perf_counter``, and splits it with the per-(program, configuration) phase
timings of ``log.jsonl``:

* running kernels: the traced kernel time of one run (sum of top-level labels) times the runs
  ``measure_kernels`` makes (1 warmup + max(repeats, 5) wall-time runs + repeats traced runs);
* compiling: ``compile_s`` (lower + XLA compile; ``measure_kernels`` then hits JAX's cache);
* measuring overhead: ``measure_s`` minus the kernel time (profiler, trace parsing, Python);
* featurizing: decompose + featurize + records (``featurize_s``);
* other: building programs, writing parts and log lines, progress bar; and finalize (dedup).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from tpucost.experiments.data import collection, kernel_collection
from tpucost.method import device


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--families", default=None, help="comma-separated families (default: all)")
    parser.add_argument("--out", default=None, help="output folder (default: a temporary one)")
    args = parser.parse_args()
    device.pin_to_one_core()  # the label mode: one kernel at a time on one core (before JAX starts)
    families = args.families.split(",") if args.families else None
    out = Path(args.out or tempfile.mkdtemp(prefix="collect_speed_"))

    t0 = time.perf_counter()
    summary = kernel_collection.collect(
        out, args.programs, 0, repeats=args.repeats, families=families, progress=False, do_finalize=False
    )
    t1 = time.perf_counter()
    ds = kernel_collection.finalize(out)
    t2 = time.perf_counter()

    ok = [e for e in collection.read_log(out) if e.get("status") == "ok"]
    runs = 1 + max(args.repeats, 5) + args.repeats
    kernel_s = sum(e["kernel_ns_per_run"] * 1e-9 * runs for e in ok)
    compile_s = sum(e["compile_s"] for e in ok)
    measure_s = sum(e["measure_s"] for e in ok)
    featurize_s = sum(e["featurize_s"] for e in ok)
    collect_s = t1 - t0
    other_s = collect_s - compile_s - measure_s - featurize_s
    total = t2 - t0
    print(
        f"{out}: {len(ok)} (program, configuration) pairs, {summary['errors']} errors, "
        f"{summary['kernels']} kernels measured, {len(ds)} after dedup"
    )
    print(
        f"kernels measured per second: {summary['kernels'] / collect_s:.1f} "
        f"(collect {collect_s:.1f} s + finalize {t2 - t1:.2f} s)"
    )
    rows = [
        ("running kernels", kernel_s),
        ("compiling", compile_s),
        ("measure overhead (profiler, trace parsing)", measure_s - kernel_s),
        ("decompose + featurize", featurize_s),
        ("other (build programs, write parts)", other_s),
        ("finalize (dedup + shards)", t2 - t1),
    ]
    for name, seconds in rows:
        print(f"  {name:<45} {seconds:7.2f} s  {100 * seconds / total:5.1f} %")


if __name__ == "__main__":
    main()
