"""The tile model's top-5 suggestions against the largest-block heuristic's, on matmuls outside the data set.

    python benchmarks/tile_suggestions.py [--model DIR] [--shapes 6] [--repeats 5]

For each matmul shape (none in the bundled tile data set: checked), every legal configuration is
measured twice in this run (`tpucost.experiments.tiles.measure_configs`, the bundled data's lowering; runtime =
the faster of the two), then, against the best measured:
* the best measured of the rank model's top 5 (`tile_experiments.suggest_tiles`, default the bundled
  random-split hinge model) and its slowdown;
* the best measured of the heuristic's top 5 (largest block first, `tile_experiments.largest_block_scores`
  order: ties kept in legal-configuration order) and its slowdown;
* this run's noise: the top-1 slowdown of picking by one pass and checking with the other.
Prints a row per shape and how often the model's top 5 is within 5% of the best and strictly
better than the heuristic's. Pinned to one core first (the label mode of `tpucost.method.device`).
"""

from __future__ import annotations

import argparse

import numpy as np

from tpucost.experiments import tile_experiments, tiles
from tpucost.experiments.data import tile as tile_data
from tpucost.method import device, metrics

SHAPES = [
    (128, 384, 256),
    (256, 384, 384),
    (128, 640, 384),
    (384, 640, 896),
    (512, 256, 640),
    (192, 768, 512),
]
TOP = 5


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="tile model checkpoint (default: bundled random split)")
    parser.add_argument("--shapes", type=int, default=len(SHAPES), help=f"how many of {SHAPES} to use")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    device.pin_to_one_core()
    ds = tile_data.load_dataset()
    known = {
        tuple(int(v) for v in s.split(",")) for f, s in zip(ds.family, ds.shape, strict=True) if f == "matmul"
    }
    print(f"device: {device.describe(device.fingerprint())}; lowering {ds.lowering}")
    print(
        f"{'shape':<18} {'configs':>7} {'best ms':>8} {'model top5':>10} {'heuristic top5':>14} {'noise':>6}"
    )
    within = better = 0
    shapes = [s for s in SHAPES[: args.shapes] if s not in known]
    for shape in shapes:
        configs = tiles.legal_configs("matmul", shape)
        first, second = (
            np.asarray(
                tiles.measure_configs(
                    "matmul", shape, "float32", configs, repeats=args.repeats, lowering=ds.lowering
                )
            )
            for _ in range(2)
        )
        runtime = np.minimum(first, second)
        picked = [
            configs.index(s["config"])
            for s in tile_experiments.suggest_tiles("matmul", shape, top=TOP, model_dir=args.model)
        ]
        model = runtime[picked].min() / runtime.min() - 1
        heuristic = runtime[tile_experiments.largest_block_order(configs)[:TOP]].min() / runtime.min() - 1
        noise = metrics.top_k_slowdown(first, second, 1)
        within += model <= 0.05
        better += model < heuristic
        print(
            f"{str(shape):<18} {len(configs):>7} {runtime.min() / 1e6:>8.3f} {100 * model:>9.1f}% "
            f"{100 * heuristic:>13.1f}% {100 * noise:>5.1f}%"
        )
    print(
        f"model's top {TOP} within 5% of the best: {within} of {len(shapes)}; "
        f"strictly better than the heuristic's top {TOP}: {better} of {len(shapes)}"
    )


if __name__ == "__main__":
    main()
