"""Compiling for a TPU without a TPU: the deviceless TPU compile against XLA:CPU's compile of the same
program, same run.

    python benchmarks/tpu_compile.py [--repeats 3]

For each of the autotuner's example programs (default configuration) and a few corpus programs:
the best of ``--repeats`` wall times of `tpucost.experiments.compiler.compile_for_target` for ``tpu-v5e`` (libtpu,
no TPU) and for ``cpu`` (this machine's XLA:CPU, the compile every other part of tpucost does), each
compile after `jax.clear_caches()` (no compile cache), and their ratio TPU / CPU. Then the Mosaic verdict
of a tile configuration (`tpucost.experiments.tiles.mosaic.mosaic_verdict`) against the same kernel compiled for
XLA:CPU as the labels' XLA loop. Needs the ``tpu`` extra.
"""

from __future__ import annotations

import argparse
import statistics
import time

import jax

from tpucost.experiments import compiler, tiles
from tpucost.experiments.autotune.tunable import load_tunable
from tpucost.experiments.programs import corpus
from tpucost.experiments.programs.examples import EXAMPLES
from tpucost.experiments.tiles import mosaic
from tpucost.method import device

CORPUS_PROGRAMS = ("mlp-train_step-0-0", "cnn-grad-0-0", "transformer_encoder-forward-0-0", "lstm-grad-0-0")


def best_seconds(fn, repeats: int) -> float:
    """The best of ``repeats`` wall times of ``fn()``, JAX's in-memory caches cleared before each."""
    times = []
    for _ in range(repeats):
        jax.clear_caches()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def programs() -> list[tuple[str, object, tuple]]:
    out = []
    for name in EXAMPLES:
        tunable = load_tunable(f"example:{name}", "tile" if name == "tiled_mlp" else "program")
        out.append((f"example:{name}", *tunable.build(tunable.space.default)))
    for program_id in CORPUS_PROGRAMS:
        program = corpus.program_from_id(program_id)
        out.append((program_id, program.fn, program.args))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if not compiler.tpu_compiler_available():
        raise SystemExit(f"needs the TPU compiler: {compiler.INSTALL_HINT}")
    print(device.describe(device.fingerprint()), "| libtpu", compiler.compiler_versions("tpu-v5e")["libtpu"])
    compiler.compile_for_target(lambda x: x + 1, ((1.0,)), "tpu-v5e")  # libtpu's start-up, once
    print(f"{'program':<36}{'XLA:CPU s':>10}{'TPU v5e s':>10}{'TPU / CPU':>10}")
    ratios = []
    for name, fn, fn_args in programs():
        cpu = best_seconds(lambda: compiler.compile_for_target(fn, fn_args, "cpu"), args.repeats)  # noqa: B023
        tpu = best_seconds(lambda: compiler.compile_for_target(fn, fn_args, "tpu-v5e"), args.repeats)  # noqa: B023
        ratios.append(tpu / cpu)
        print(f"{name:<36}{cpu:>10.2f}{tpu:>10.2f}{tpu / cpu:>10.2f}")
    print(f"median TPU / CPU compile time: {statistics.median(ratios):.2f} over {len(ratios)} programs")
    problem, config = ("matmul", (512, 512, 512), "float32"), {"bm": 128, "bn": 128, "bk": 128}
    mosaic_s = best_seconds(lambda: mosaic.mosaic_verdict(*problem, config), args.repeats)
    fn, fn_args = tiles.build(*problem, config, lowering="xla_loop")
    loop_s = best_seconds(lambda: compiler.compile_for_target(fn, fn_args, "cpu"), args.repeats)
    print(
        f"tile matmul {problem[1]} blocks {config}: Mosaic verdict {mosaic_s:.2f} s, "
        f"XLA:CPU loop compile {loop_s:.2f} s, ratio {mosaic_s / loop_s:.2f}"
    )


if __name__ == "__main__":
    main()
