"""Candidates evaluated per second by the model and by the device, in both autotuning spaces.

    python benchmarks/autotune_speed.py [--program-candidates 8] [--tile-candidates 2000] [--device-candidates 6]

Both sides run in this run, on this machine, pinned to one core (the label mode of `tpucost.method.device`),
on the same random candidates (seed 0) of the built-in examples of `tpucost.experiments.autotune`:

* program space (``example:transformer``, ``example:mixer``, ``example:nnx_vit``,
  ``example:nnx_convnext``): the model side compiles each candidate and sums the kernel model's
  predictions (`autotune.ProgramPredictor`), once with the full compile and once with the scoring
  compile options (`autotune.evaluators.scoring_compile_options`: the same optimised HLO, backend
  code generation cheapened), in that order per candidate; the device side (the reference)
  compiles it and takes the minimum of 5 runs after one warm-up (`autotune.DeviceEvaluator`). All
  sides compile, so each line shows the share of its time spent compiling;
* tile space (``example:tiled_mlp``): the model side scores with the tile model, no compile
  (`autotune.TilePredictor`): batched (each kernel's legal configurations scored once, in one batch,
  that time included) and cold (every candidate's kernels scored one configuration at a time); the
  device side compiles and runs the four Pallas kernels (interpret mode on CPU).

Prints candidates/s of each side and the ratios model / device and fast / full compile.
"""

from __future__ import annotations

import argparse

import jax
import numpy as np

from tpucost.experiments import autotune
from tpucost.method import device
from tpucost.method.costmodel import CostModel


def _rate(counter: autotune.Counter) -> str:
    d = counter.to_dict()
    return (
        f"{d['per_second']:10.2f} candidates/s ({d['candidates']} in {d['seconds']:.1f} s, "
        f"{100 * d['compile_share']:.0f}% compiling)"
    )


def _per_s(counter: autotune.Counter) -> float:
    return counter.candidates / counter.seconds


def _configs(space: autotune.Space, n: int) -> list[dict]:
    rng = np.random.default_rng(0)
    out, seen = [space.default], {space.key(space.default)}
    while len(out) < min(n, space.size):
        c = space.random(rng)
        if space.key(c) not in seen:
            seen.add(space.key(c))
            out.append(c)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--program-candidates", type=int, default=8)
    parser.add_argument("--tile-candidates", type=int, default=2000)
    parser.add_argument(
        "--device-candidates", type=int, default=6, help="tile candidates measured on the device"
    )
    args = parser.parse_args()
    device.pin_to_one_core()
    print(f"backend {jax.default_backend()}; {device.describe(device.fingerprint())}")
    model = CostModel.load()
    programs = ("example:transformer", "example:mixer", "example:nnx_vit", "example:nnx_convnext")
    for program in programs:
        tunable = autotune.load_tunable(program, "program")
        configs = _configs(tunable.space, args.program_candidates)
        measurer = autotune.DeviceEvaluator(tunable)
        full = autotune.ProgramPredictor(tunable, model, fast_compile=False)
        fast = autotune.ProgramPredictor(tunable, model, fast_compile=True)
        for predictor in (full, fast):
            predictor(configs[0])  # warm-up: jit of the GNN's buckets, tracing
            predictor.counter, predictor.cache = autotune.Counter(), {}
        same = 0
        for c in configs:
            measurer(c)
            same += full(c).cost_ns == fast(c).cost_ns
        m, p, f = measurer.counter, full.counter, fast.counter
        print(f"{program} (program space, {len(configs)} candidates)")
        print(f"  reference: device            {_rate(m)}")
        print(f"  kernel model, full compile   {_rate(p)}")
        print(f"  kernel model, fast compile   {_rate(f)}")
        print(
            f"  ratio model / device: {_per_s(p) / _per_s(m):.2f}x full compile, {_per_s(f) / _per_s(m):.2f}x "
            f"fast compile; fast / full {_per_s(f) / _per_s(p):.2f}x (same prediction on {same} of "
            f"{len(configs)}); device time per candidate {m.seconds / m.candidates:.2f} s = compile "
            f"{m.compile_seconds / m.candidates:.2f} s + runs {(m.seconds - m.compile_seconds) / m.candidates:.2f} s"
        )
    tunable = autotune.load_tunable("example:tiled_mlp", "tile")
    measurer = autotune.DeviceEvaluator(tunable)
    for c in _configs(tunable.space, args.device_candidates):
        measurer(c)
    batched, cold = autotune.TilePredictor(tunable), autotune.TilePredictor(tunable, batched=False)
    cold(tunable.space.default)  # warm-up: the jitted scorer's buckets
    cold.counter, cold.cache = autotune.Counter(), {}
    for c in _configs(tunable.space, args.tile_candidates):
        batched(c)
    for c in _configs(tunable.space, min(args.tile_candidates, 100)):
        cold(c)
    device_rate = measurer.counter.candidates / measurer.counter.seconds
    print(f"example:tiled_mlp (tile space, {tunable.space.size} configurations)")
    print(f"  reference: device  {_rate(measurer.counter)}")
    for name, p in (("tile model, batched", batched), ("tile model, cold   ", cold)):
        rate = p.counter.candidates / p.counter.seconds
        print(
            f"  {name} {rate:10.1f} candidates/s ({p.counter.candidates} in {p.counter.seconds:.2f} s): "
            f"{rate / device_rate:.0f}x the device"
        )


if __name__ == "__main__":
    main()
