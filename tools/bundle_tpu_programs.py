"""Write the notebooks' programs compiled for a TPU v5e into tpucost/bundled/tpu/ (with provenance).

    python tools/bundle_tpu_programs.py

Learners without libtpu (the ``tpu`` extra) see these modules in notebooks 01 and 03 instead of
compiling their own (`tpucost.experiments.compiler.compile_or_bundled`), and in notebook 05 the compiler's
estimates of example:mixer under each TPU configuration
(`tpucost.experiments.xla_estimates.configuration_estimates_or_bundled`). Run it with the newest pins
(constraints.txt: the libtpu the provenance names) after a change to those programs or to the pins;
``tests/test_compiler.py`` checks that the bundled modules still hold the kernels the compiler
gives them.
"""

from __future__ import annotations

import jax.numpy as jnp
from flax import nnx

from tpucost.experiments import compiler, programs, xla_estimates
from tpucost.experiments.autotune.tunable import load_tunable
from tpucost.solutions import nb01, nb03

COMMAND = "python tools/bundle_tpu_programs.py"


def bundled_programs() -> dict[str, tuple[str, object, tuple]]:
    """``{name: (what, fn, args)}`` of every bundled program, at the notebooks' default sizes."""
    cnn = nb01.SmallCNN(32, nnx.Rngs(0))
    net_fn, net_args = nb03.net_program(0)
    return {
        "nb01_small_cnn": (
            "notebook 01's SmallCNN (batch 8, 32x32x3 images, 32 channels, seed 0)",
            lambda x: cnn(x),
            (jnp.ones((8, 32, 32, 3)),),
        ),
        "nb03_net": ("notebook 03's Net (a 64 x 96 batch, seed 0)", net_fn, net_args),
    }


def main() -> int:
    for name, (what, fn, args) in bundled_programs().items():
        program = compiler.compile_for_target(fn, args, "tpu-v5e")
        path = compiler.save_bundled_program(program, name, what, COMMAND)
        print(f"wrote {path} ({len(program.text):,} characters; libtpu {program.compiler['libtpu']})")
    tunable = load_tunable("example:mixer", "program")
    fn, args = tunable.build(tunable.space.default)
    rows = xla_estimates.configuration_estimates(
        fn, args, "tpu-v5e", programs.compile_option_configurations("tpu")
    )
    what = "example:mixer at its default configuration (notebook 05's PROGRAM), under each TPU configuration"
    path = xla_estimates.save_bundled_configuration_estimates(
        rows, "nb05_mixer_configurations", what, COMMAND
    )
    print(f"wrote {path} ({len(rows)} configurations)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
