"""Configurations scored per second by the tile model, against configurations measured per second.

    python benchmarks/tile_speed.py [--model DIR] [--shapes 3]

Both sides run in this run on this machine, on the same new matmul problems (not in the data set):
* scoring: `tpucost.method.tasks.tile.predict` on every legal configuration of each problem
  (the kernel graph and configuration features built once per problem, as `suggest_tiles` does),
  after one warm-up call, best of 3;
* measuring (the reference): `tpucost.experiments.tiles.measure_configs` on the same configurations
  (compile, one warm-up run, the minimum of 5 timed runs: what the data set's labels cost), in
  this backend's tile lowering (`tpucost.experiments.tiles.tile_lowering`: the XLA loop on CPU).
Prints the device, configurations/s of each and the ratio scored / measured. Pinned to one core first (the
label mode of `tpucost.method.device`), so both sides use one core.
"""

from __future__ import annotations

import argparse
import functools
import time

import jax
import numpy as np

from tpucost.experiments import tiles
from tpucost.method import device
from tpucost.method.tasks import tile as tile_task

SHAPES = [(384, 640, 896), (256, 768, 512), (512, 384, 640), (640, 256, 384)]


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="tile model checkpoint (default: bundled random split)")
    parser.add_argument("--shapes", type=int, default=3, help=f"how many of {SHAPES} to use")
    args = parser.parse_args()
    device.pin_to_one_core()
    model = tile_task.load_model(args.model).model
    scored_s = measured_s = 0.0
    n_configs = 0
    for shape in SHAPES[: args.shapes]:
        configs = tiles.legal_configs("matmul", shape)
        graph = tiles.kernel_graph("matmul", shape)
        rows = np.stack([tiles.config_features("matmul", shape, "float32", c) for c in configs])
        score = functools.partial(tile_task.predict, model, [graph], [rows])
        score()  # warm-up: compiles the buckets
        scored_s += min(_timed(score) for _ in range(3))
        measured_s += _timed(functools.partial(tiles.measure_configs, "matmul", shape, "float32", configs))
        n_configs += len(configs)
    print(f"device {device.describe(device.fingerprint())}")
    print(
        f"backend {jax.default_backend()}, lowering {tiles.tile_lowering()}; {n_configs} configurations of {args.shapes} matmul problems"
    )
    print(f"reference: measuring   {n_configs / measured_s:10.1f} configurations/s ({measured_s:.1f} s)")
    print(f"tile model: scoring    {n_configs / scored_s:10.1f} configurations/s ({scored_s:.3f} s)")
    print(f"ratio scored / measured: {measured_s / scored_s:.0f}x")


if __name__ == "__main__":
    main()
