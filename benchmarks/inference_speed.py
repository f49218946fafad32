"""Kernels predicted per second by the cost models, against kernels measured per second on the device.

    python benchmarks/inference_speed.py [--model DIR] [--kernels 4000] [--programs 6]

Both sides are measured in this run on this machine:
* prediction: `CostModel.predict` on `--kernels` kernels of the bundled data set, batched, after
  one warm-up call (which compiles one program per padding bucket), best of 3;
* measurement (the reference): `tpucost.experiments.data.kernel.measure_program` on the first `--programs`
  programs of the corpus under the default configuration: compiling, running under the profiler
  and labelling, i.e. what it costs to get the same numbers from the device.
Prints kernels/s of each and the ratio predicted / measured: the reason the model exists.
The process is pinned to one core first (the label mode of `tpucost.method.device`), so both sides run on
one core.
"""

from __future__ import annotations

import argparse
import time

import jax

from tpucost.experiments.data import kernel as kernel_data
from tpucost.experiments.data.kernel_collection import measure_program
from tpucost.experiments.programs import generate_programs
from tpucost.method import costmodel, device
from tpucost.method.tasks import kernel


def predicted_per_second(model: costmodel.CostModel, graphs: list, repeats: int = 3) -> float:
    model.predict(graphs)  # warm-up: compiles one program per bucket
    best = min(_timed(lambda: model.predict(graphs)) for _ in range(repeats))
    return len(graphs) / best


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def measured_per_second(n_programs: int) -> tuple[float, int]:
    kernels, seconds = 0, 0.0
    for program in generate_programs(n_programs, seed=1):
        start = time.perf_counter()
        records, _ = measure_program(program, "default", repeats=10)
        seconds += time.perf_counter() - start
        kernels += len(records)
    return kernels / seconds, kernels


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="checkpoint folder (default: bundled random split)")
    parser.add_argument("--kernels", type=int, default=4000)
    parser.add_argument("--programs", type=int, default=6)
    args = parser.parse_args()
    device.pin_to_one_core()  # the label mode: one kernel at a time on one core (before JAX starts)
    ds = kernel_data.load_dataset()
    graphs = [ds.graph(i) for i in range(min(args.kernels, len(ds)))]
    measured, n_measured = measured_per_second(args.programs)
    print(
        f"backend {jax.default_backend()}; reference: measuring {n_measured} kernels of {args.programs} "
        f"programs on the device (compile + profile + label): {measured:,.0f} kernels/s"
    )
    for method in kernel.METHODS:
        model = costmodel.CostModel.load(args.model, method)
        rate = predicted_per_second(model, graphs)
        print(
            f"{method:<10} predicts {rate:>10,.0f} kernels/s on CPU = {rate / measured:,.0f}x measuring them"
        )


if __name__ == "__main__":
    main()
