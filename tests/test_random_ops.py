"""tpucost.experiments.programs.random_ops: every block builds, runs and differentiates; the family covers the ops."""

from __future__ import annotations

import json

import jax
import numpy as np
import pytest

from tpucost.experiments.programs import corpus, random_ops
from tpucost.experiments.programs.blocks import Variant
from tpucost.method import hlo

pytestmark = pytest.mark.core  # also run on Colab's versions (make test-colab): many lax ops

#: A small shape, so that each program compiles in well under a second.
SMALL = {"batch": 2, "height": 4, "width": 4, "channels": 4}


def _opcodes(text: str) -> set[str]:
    """The opcodes of every computation of an HLO text."""
    module = hlo.parse_module(text)
    return {ins.opcode for comp in module.computations.values() for ins in comp.instructions}


@pytest.mark.parametrize("name", list(random_ops.BLOCKS))
def test_every_block_runs_and_has_a_gradient(name):
    model = random_ops.chain(np.random.default_rng(0), [name, name], SMALL, "float32")
    out = jax.jit(lambda p, b: model.apply(p, b, Variant()))(model.params, model.batch)
    assert out.shape == model.batch["x"].shape and out.dtype == model.batch["x"].dtype
    assert np.isfinite(np.asarray(out)).all(), name
    grads = jax.jit(corpus._build_fn(model, "grad", Variant()))(model.params, model.batch)
    leaves = jax.tree.leaves(grads)
    assert leaves and all(np.isfinite(np.asarray(g, np.float32)).all() for g in leaves), name
    assert any(float(np.abs(np.asarray(g, np.float32)).sum()) > 0 for g in leaves), name


def test_bf16_programs_keep_their_dtype():
    model = random_ops.chain(
        np.random.default_rng(1), ["fft", "linalg", "precision", "cumulative"], SMALL, "bfloat16"
    )
    out = jax.jit(lambda p, b: model.apply(p, b, Variant()))(model.params, model.batch)
    assert out.dtype == jax.numpy.bfloat16 and np.isfinite(np.asarray(out, np.float32)).all()


def test_a_convolution_after_a_promoting_block_runs():
    # A bf16 attention block returns f32 (its scale is a NumPy float); the convolution after it
    # raised "requires arguments to have the same dtypes" in 4 of the first ~350 collected programs.
    model = random_ops.chain(np.random.default_rng(0), ["dot", "conv"], SMALL, "bfloat16")
    assert model.hparams["blocks"][0]["op"] == "attention"
    out = jax.jit(lambda p, b: model.apply(p, b, Variant()))(model.params, model.batch)
    assert np.isfinite(np.asarray(out, np.float32)).all()


def test_programs_are_rebuilt_from_their_ids_with_json_hyperparameters():
    program = corpus.make_program("random_ops", "forward", 0, 5)
    again = corpus.program_from_id(program.program_id)
    assert json.loads(json.dumps(program.hparams)) == program.hparams == again.hparams
    assert [c["block"] for c in program.hparams["blocks"]] and program.family == "random_ops"
    for x, y in zip(jax.tree.leaves(program.args), jax.tree.leaves(again.args), strict=True):
        np.testing.assert_array_equal(np.asarray(x, np.float32), np.asarray(y, np.float32))


def test_unknown_blocks_are_named():
    with pytest.raises(ValueError, match="unknown blocks \\['frobnicate'\\]"):
        random_ops.chain(np.random.default_rng(0), ["sort", "frobnicate"], SMALL, "float32")


def test_the_family_reaches_the_ops_the_architectures_do_not():
    """Lowered (not compiled: cheap), the first programs of the family hold sorts, FFTs, scatters,
    cumulative windows, bit ops, random bits and control flow: ops the 13 architectures rarely or
    never emit."""
    seen: set[str] = set()
    for i in range(40):
        program = corpus.make_program("random_ops", "grad" if i % 2 else "forward", 0, i)
        seen |= _opcodes(jax.jit(program.fn).lower(*program.args).as_text(dialect="hlo"))
    wanted = {"sort", "fft", "scatter", "gather", "dynamic-slice", "dynamic-update-slice", "reduce-window",
              "select-and-scatter", "convolution", "dot", "popcnt", "count-leading-zeros", "xor",
              "shift-right-logical", "cbrt", "erf", "while", "conditional", "pad", "reverse",
              "concatenate", "rng-bit-generator", "custom-call", "remainder", "atan2"}  # fmt: skip
    assert wanted <= seen, sorted(wanted - seen)
