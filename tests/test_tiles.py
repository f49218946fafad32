"""Tests of tpucost.experiments.tiles: the Pallas kernel families of the tile task (CPU interpret mode)."""

from __future__ import annotations

import dataclasses
import math
import re

import jax
import numpy as np
import pytest

from tpucost.experiments import tiles
from tpucost.experiments.tiles import lowering
from tpucost.method import backends, features

pytestmark = pytest.mark.core  # also run on Colab's versions (make test-colab)

#: Small problems, one per family, each with several legal configs.
SMALL = {
    "matmul": (64, 256, 256),
    "bmm": (2, 32, 128, 256),
    "softmax": (64, 200),
    "layernorm": (48, 256),
    "reduce": (32, 512),
    "attention": (2, 64, 32),
    "conv": (1, 8, 8, 16, 128),
}


def test_registry_order_and_fields():
    assert list(tiles.TILE_FAMILIES) == [
        "matmul",
        "bmm",
        "softmax",
        "layernorm",
        "reduce",
        "attention",
        "conv",
    ]
    assert set(SMALL) == set(tiles.TILE_FAMILIES)
    for name, fam in tiles.TILE_FAMILIES.items():
        assert fam.name == name and tiles.family(name) is fam
        assert len(fam.block_keys) <= tiles.MAX_KEYS and fam.doc
        assert len(SMALL[name]) == len(fam.dims)


@pytest.fixture(scope="module")
def references():
    out = {}
    for name, shape in SMALL.items():
        fn, args = tiles.reference(name, shape)
        out[name] = np.asarray(jax.jit(fn)(*args))
    return out


@pytest.mark.parametrize("lowering", tiles.LOWERINGS)
@pytest.mark.parametrize("name", list(SMALL))
def test_kernel_matches_reference_for_smallest_and_largest_blocks(name, lowering, references):
    """Both lowerings of one body (`tpucost.experiments.tiles.lowering`) compute the jax.numpy reference."""
    shape = SMALL[name]
    configs = tiles.legal_configs(name, shape)
    assert len(configs) >= 2
    expected = references[name]
    assert np.isfinite(expected).all() and np.abs(expected).max() > 0.1
    for config in (configs[0], configs[-1]):
        fn, args = tiles.build(name, shape, "float32", config, lowering=lowering)
        got = np.asarray(jax.jit(fn)(*args))
        assert got.shape == expected.shape and got.dtype == expected.dtype
        np.testing.assert_allclose(
            got, expected, rtol=1e-4, atol=1e-5 * np.abs(expected).max(), err_msg=str(config)
        )


def test_smallest_and_largest_configs_are_what_they_claim():
    configs = tiles.legal_configs("matmul", (64, 256, 256))
    assert configs[0] == {"bm": 8, "bn": 128, "bk": 128}
    assert configs[-1] == {"bm": 64, "bn": 256, "bk": 256}
    assert tiles.tile_cost("matmul", (64, 256, 256), "float32", configs[0]).steps == 8 * 2 * 2


def test_bfloat16_matmul_close_to_reference():
    shape = (32, 128, 256)
    config = {"bm": 16, "bn": 128, "bk": 128}
    fn, args = tiles.build("matmul", shape, "bfloat16", config)
    ref, ref_args = tiles.reference("matmul", shape, "bfloat16")
    assert args[0].dtype == jax.numpy.bfloat16
    got = np.asarray(jax.jit(fn)(*args)).astype(np.float32)
    expected = np.asarray(jax.jit(ref)(*ref_args)).astype(np.float32)
    np.testing.assert_allclose(got, expected, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("lowering", tiles.LOWERINGS)
def test_kernel_is_a_pallas_call_or_a_loop_that_reads_every_k_block(lowering):
    shape = (16, 128, 256)
    fn, args = tiles.build("matmul", shape, "float32", {"bm": 8, "bn": 128, "bk": 128}, lowering=lowering)
    ref, _ = tiles.reference("matmul", shape)
    jaxpr = str(jax.make_jaxpr(fn)(*args))
    assert ("pallas_call" in jaxpr) == (lowering == "pallas")  # the XLA loop: a scan over the steps
    half = (args[0].at[:, 128:].set(0.0), args[1], args[2])  # zero the second K block of x
    got = np.asarray(jax.jit(fn)(*half))
    np.testing.assert_allclose(got, np.asarray(ref(*half)), rtol=1e-4, atol=1e-5)
    assert not np.allclose(got, np.asarray(ref(*args)), rtol=1e-2)


@pytest.mark.parametrize("name", list(SMALL))
def test_kernels_lower_for_tpu(name):
    """Cross-platform export runs the Pallas -> Mosaic lowering on CPU (not libtpu's compiler)."""
    export = pytest.importorskip("jax.export")
    shape = SMALL[name]
    configs = tiles.legal_configs(name, shape)
    fn, args = tiles.build(name, shape, "float32", configs[0], backend="tpu")
    text = export.export(jax.jit(fn), platforms=("tpu",))(*args).mlir_module()
    assert "tpu_custom_call" in text


# ----------------------------------------------------------------------------- legality


def test_legal_configs_matmul_exact_set():
    # M=64: bm in 8,16,32,64; N=384: bn in 128,384 (256 does not divide); K=200: only the full dim
    configs = tiles.legal_configs("matmul", (64, 384, 200))
    expected = [{"bm": bm, "bn": bn, "bk": 200} for bm in (8, 16, 32, 64) for bn in (128, 384)]
    assert configs == expected
    assert tiles.legal_configs("matmul", (64, 384, 200), backend="tpu") == expected  # small: Mosaic agrees


def test_legal_configs_respect_divisibility_alignment_and_budget():
    for name, shape in SMALL.items():
        fam = tiles.family(name)
        configs = tiles.legal_configs(name, shape)
        assert configs == tiles.legal_configs(name, shape)  # deterministic
        assert len({tuple(c.items()) for c in configs}) == len(configs)
        full = {k: fam.tiled_size(shape, k) for k in fam.block_keys}
        assert full in configs, name  # full-dim blocks are legal for these small problems
        for c in configs:
            assert list(c) == list(fam.block_keys)
            plan = tiles.check_config(name, shape, "float32", c)
            for k in fam.block_keys:
                size = fam.tiled_size(shape, k)
                assert size % c[k] == 0
            for b in plan.blocks:
                *_, sub, minor = (None, None) + tuple(b.block_shape)
                *_, asub, aminor = (None, None) + tuple(b.array_shape)
                assert minor in (None, aminor) or minor % 128 == 0, (name, c, b.name)
                assert sub in (None, asub) or sub % 8 == 0, (name, c, b.name)
            assert plan.working_set_bytes <= tiles.VMEM_BUDGET_BYTES


def test_budget_excludes_large_blocks():
    shape = (2048, 2048, 2048)
    configs = tiles.legal_configs("matmul", shape)
    assert {"bm": 2048, "bn": 2048, "bk": 2048} not in configs
    assert configs and all(
        tiles.tile_cost("matmul", shape, "float32", c).working_set_bytes <= 16 * 2**20 for c in configs
    )
    # 512x512 blocks with bk=2048: 2 * (4 + 4 + 1 MiB + 2 KiB) + 1 MiB scratch > 16 MiB
    with pytest.raises(ValueError, match="budget"):
        tiles.check_config("matmul", shape, "float32", {"bm": 512, "bn": 512, "bk": 2048})
    assert {"bm": 512, "bn": 512, "bk": 1024} in configs


def test_sixteen_bit_dtypes_need_sixteen_rows():
    assert [c["br"] for c in tiles.legal_configs("softmax", (48, 256))] == [8, 16, 24, 48]
    assert [c["br"] for c in tiles.legal_configs("softmax", (48, 256), "bfloat16")] == [16, 48]


def test_attention_kv_block_follows_the_rule():
    configs = tiles.legal_configs("attention", (1, 40, 32))
    assert configs == [{"bq": q, "bk": k} for q in (8, 40) for k in (8, 40)]
    with pytest.raises(ValueError, match="second-minor"):
        tiles.build("attention", (1, 40, 32), "float32", {"bq": 8, "bk": 20})


def test_reduce_output_block_is_column_and_float32():
    assert [tuple(c.values()) for c in tiles.legal_configs("reduce", (16, 256))] == [
        (8, 128),
        (8, 256),
        (16, 128),
        (16, 256),
    ]
    fn, args = tiles.build("reduce", (16, 256), "bfloat16", {"br": 16, "bc": 128})
    assert jax.eval_shape(fn, *args).dtype == np.float32


# ----------------------------------------------------------------------------- errors


def test_bad_family_names_known_ones():
    with pytest.raises(ValueError, match="unknown tile family 'matmull'.*matmul, bmm"):
        tiles.family("matmull")
    with pytest.raises(ValueError, match="matmull"):
        tiles.legal_configs("matmull", (8, 8, 8))


def test_parse_shape():
    assert tiles.parse_problem_shape("matmul", "384,640,896") == (384, 640, 896)
    assert tiles.parse_problem_shape("conv", " 2, 16,16 ,8,128") == (2, 16, 16, 8, 128)
    with pytest.raises(ValueError, match=r"matmul.*bad token 'x'.*M,N,K"):
        tiles.parse_problem_shape("matmul", "384,x,896")
    with pytest.raises(ValueError, match=r"bad token '0'"):
        tiles.parse_problem_shape("matmul", "384,0,896")
    with pytest.raises(ValueError, match=r"softmax.*expected 2 .*R,C.*got 3"):
        tiles.parse_problem_shape("softmax", "1,2,3")


def test_bad_shape_dtype_and_config_are_named():
    with pytest.raises(ValueError, match=r"matmul shape must be 3 positive ints \(M, N, K\)"):
        tiles.legal_configs("matmul", (64, 128))
    with pytest.raises(ValueError, match="positive"):
        tiles.build("softmax", (0, 128), "float32", {"br": 8})
    with pytest.raises(ValueError, match="unsupported dtype"):
        tiles.build("softmax", (8, 128), "int32", {"br": 8})
    shape = (64, 256, 256)
    with pytest.raises(ValueError, match=r"bm=24 does not divide M=64"):
        tiles.build("matmul", shape, "float32", {"bm": 24, "bn": 128, "bk": 128})
    with pytest.raises(ValueError, match=r"block w.*minor block dim 64 is neither a multiple of 128"):
        tiles.build("matmul", shape, "float32", {"bm": 8, "bn": 64, "bk": 256})
    with pytest.raises(ValueError, match=r"second-minor block dim 4"):
        tiles.build("matmul", shape, "float32", {"bm": 4, "bn": 128, "bk": 256})
    with pytest.raises(ValueError, match=r"missing bk"):
        tiles.build("matmul", shape, "float32", {"bm": 8, "bn": 128})
    with pytest.raises(ValueError, match=r"unknown bq"):
        tiles.build("matmul", shape, "float32", {"bm": 8, "bn": 128, "bk": 128, "bq": 8})
    with pytest.raises(ValueError, match=r"bm=1.5 is not a positive int"):
        tiles.build("matmul", shape, "float32", {"bm": 1.5, "bn": 128, "bk": 128})
    with pytest.raises(ValueError):
        tiles.tile_cost("matmul", shape, "float32", {"bm": 8, "bn": 64, "bk": 256})
    with pytest.raises(ValueError):
        tiles.config_features("matmul", shape, "float32", {"bm": 8, "bn": 64, "bk": 256})


def test_backend_policy():
    assert tiles.interpret_mode("cpu") is True
    assert tiles.interpret_mode("gpu") is True
    assert tiles.interpret_mode("tpu") is False
    assert tiles.interpret_mode() is (jax.default_backend() != "tpu")
    with pytest.raises(ValueError, match="unknown backend"):
        tiles.interpret_mode("abacus")


# ----------------------------------------------------------------------------- cost arithmetic


def test_tile_cost_matmul_rereads_by_hand():
    # M, N, K = 64, 256, 512; blocks 32 x 128 x 128 -> grid (2, 2, 4), 16 steps.
    shape = (64, 256, 512)
    c = tiles.tile_cost("matmul", shape, "float32", {"bm": 32, "bn": 128, "bk": 128})
    assert c.grid == (2, 2, 4) and c.steps == 16
    x_bytes, w_bytes, b_bytes, out_bytes = 64 * 512 * 4, 512 * 256 * 4, 256 * 4, 64 * 256 * 4
    # x read N/bn = 2 times, w read M/bm = 2 times, b once per (i, j) = 2 times, out written once
    assert c.total_bytes == 2 * x_bytes + 2 * w_bytes + 2 * b_bytes + out_bytes == 1_378_304
    assert c.unique_bytes == x_bytes + w_bytes + b_bytes + out_bytes
    assert c.bytes_in_per_step == 32 * 128 * 4 + 128 * 128 * 4 + 128 * 4
    assert c.bytes_out_per_step == 32 * 128 * 4
    assert c.working_set_bytes == 2 * (16384 + 65536 + 512 + 16384) + 32 * 128 * 4
    assert c.total_flops == 2 * 64 * 256 * 512 + 10 * 64 * 256
    assert math.isclose(c.flops_per_step, c.total_flops / 16)
    # bk = K: the x block stays put while j moves, so x is read once; w still M/bm times
    c1 = tiles.tile_cost("matmul", shape, "float32", {"bm": 32, "bn": 128, "bk": 512})
    assert c1.grid == (2, 2, 1)
    assert c1.total_bytes == x_bytes + 2 * w_bytes + 2 * b_bytes + out_bytes
    # one block: every array moves exactly once
    c2 = tiles.tile_cost("matmul", shape, "float32", {"bm": 64, "bn": 256, "bk": 512})
    assert c2.steps == 1 and c2.total_bytes == c2.unique_bytes


def test_tile_cost_reduce_and_attention():
    c = tiles.tile_cost("reduce", (32, 512), "float32", {"br": 8, "bc": 128})
    assert c.grid == (4, 4) and c.total_bytes == 32 * 512 * 4 + 32 * 4
    a = tiles.tile_cost("attention", (2, 64, 32), "float32", {"bq": 16, "bk": 32})
    qkv = 2 * 64 * 32 * 4
    # q and out move once, k and v once per q block (64 / 16 = 4 times)
    assert a.grid == (2, 4, 2) and a.total_bytes == qkv + 4 * qkv + 4 * qkv + qkv


def test_config_features_fixed_width_finite_and_informative():
    width = len(tiles.CONFIG_FEATURE_NAMES)
    assert width == len(set(tiles.CONFIG_FEATURE_NAMES)) == 28
    for name, shape in SMALL.items():
        configs = tiles.legal_configs(name, shape)
        feats = np.stack([tiles.config_features(name, shape, "float32", c) for c in configs])
        assert feats.shape == (len(configs), width) and feats.dtype == np.float32
        assert np.isfinite(feats).all()
        assert len({f.tobytes() for f in feats}) == len(configs), name  # configs are told apart
    col = {n: i for i, n in enumerate(tiles.CONFIG_FEATURE_NAMES)}
    f = tiles.config_features("matmul", (64, 256, 512), "float32", {"bm": 32, "bn": 128, "bk": 128})
    assert f[col["block_log2_0"]] == 5 and f[col["block_log2_1"]] == 7 and f[col["block_log2_3"]] == 0
    assert f[col["grid_log2_2"]] == 2 and f[col["log2_steps"]] == 4
    assert f[col["block_frac_0"]] == 0.5 and f[col["block_frac_2"]] == 0.25
    assert math.isclose(f[col["log2_total_bytes"]], math.log2(1_378_304), rel_tol=1e-6)
    assert f[col["lane_util"]] == 1.0
    g = tiles.config_features("softmax", (64, 200), "float32", {"br": 8})
    assert math.isclose(g[col["lane_util"]], 200 / 256)


# ----------------------------------------------------------------------------- graphs


def test_kernel_graph_one_per_problem():
    for name, shape in SMALL.items():
        g = tiles.kernel_graph(name, shape)
        assert isinstance(g, features.KernelGraph) and g.num_nodes > 0 and g.num_edges > 0
        assert g.node_features.shape == (g.num_nodes, features.NUM_NODE_FEATURES)
        assert np.isfinite(g.node_features).all()
        assert g.senders.max() < g.num_nodes and g.receivers.max() < g.num_nodes
        assert g.kind == "pallas" and g.name == f"pallas_{name}"
        again = tiles.kernel_graph(name, shape)
        for a, b in zip(g[:4], again[:4], strict=True):
            np.testing.assert_array_equal(a, b)
    ops = {features.OPCODE_VOCAB[i] for i in tiles.kernel_graph("matmul", SMALL["matmul"]).opcodes}
    assert {"parameter", "dot", "tanh"} <= ops
    ops = {features.OPCODE_VOCAB[i] for i in tiles.kernel_graph("conv", SMALL["conv"]).opcodes}
    assert "convolution" in ops
    other = tiles.kernel_graph("matmul", (128, 256, 256))
    assert not np.array_equal(
        other.node_features, tiles.kernel_graph("matmul", SMALL["matmul"]).node_features
    )


def test_kernel_graph_inlines_calls(monkeypatch):
    base = tiles.kernel_graph("softmax", (16, 128))
    fam = tiles.TILE_FAMILIES["softmax"]
    inner = jax.jit(lambda x: fam.ref((16, 128), x))  # a nested jit is a `call` in the HLO
    monkeypatch.setitem(
        tiles.TILE_FAMILIES, "softmax", dataclasses.replace(fam, ref=lambda shape, x: inner(x))
    )
    g = tiles.kernel_graph("softmax", (16, 128))
    names = [features.OPCODE_VOCAB[i] for i in g.opcodes]
    assert "call" not in names
    assert sorted(names) == sorted(features.OPCODE_VOCAB[i] for i in base.opcodes)
    assert g.num_edges == base.num_edges


# ----------------------------------------------------------------------------- measuring, sampling


@pytest.mark.measures
def test_measure_configs_tiny_matmul():
    shape = (16, 128, 256)
    configs = [{"bm": 8, "bn": 128, "bk": 128}, {"bm": 16, "bn": 128, "bk": 256}]
    times = tiles.measure_configs("matmul", shape, "float32", configs, repeats=2, warmup=1)
    assert len(times) == 2 and all(isinstance(t, float) and t > 0 for t in times)
    with pytest.raises(ValueError, match="repeats"):
        tiles.measure_configs("matmul", shape, "float32", configs, repeats=0)


def test_sample_shapes_deterministic_and_rich():
    a = tiles.sample_shapes("matmul", 8, np.random.default_rng(3))
    b = tiles.sample_shapes("matmul", 8, np.random.default_rng(3))
    c = tiles.sample_shapes("matmul", 8, np.random.default_rng(4))
    assert a == b and a != c
    assert len(a) == 8 and len(set(a)) == 8
    for s in a:
        assert len(tiles.legal_configs("matmul", s)) >= 12
    for name in tiles.TILE_FAMILIES:
        shapes = tiles.sample_shapes(name, 4, np.random.default_rng(0))
        assert len(set(shapes)) == 4
        assert all(len(tiles.legal_configs(name, s)) >= 12 for s in shapes), name
    tpu = tiles.sample_shapes("matmul", 3, np.random.default_rng(3), backend="tpu")
    assert len(tpu) == 3 and all(min(s) >= 4 * 64 and all(d % 4 == 0 for d in s) for s in tpu)  # x4 on TPU
    assert max(max(s) for s in a) <= 512 < max(max(s) for s in tpu)


@pytest.mark.parametrize("name", list(SMALL))
def test_overhead_kernel_keeps_the_grid_and_operands_but_drops_the_arithmetic(name):
    """The overhead kernel of `tpucost.experiments.tiles.overhead` runs the same loop over the same operands as
    the kernel (same output shape; every argument still read), without the family's arithmetic:
    its optimized HLO has no dot or transcendental the kernel has."""
    shape = SMALL[name]
    config = tiles.legal_configs(name, shape)[0]
    fn, args = tiles.build(name, shape, "float32", config)
    empty, empty_args = tiles.overhead_kernel(name, shape, "float32", config)
    assert all(np.array_equal(a, b) for a, b in zip(args, empty_args, strict=True))
    assert jax.eval_shape(empty, *args).shape == jax.eval_shape(fn, *args).shape
    real_hlo = jax.jit(fn).lower(*args).compile().as_text()
    empty_hlo = jax.jit(empty).lower(*args).compile().as_text()
    assert "while(" in empty_hlo  # the grid is still a loop
    for op in (" dot(", " exponential(", " rsqrt(", " tanh("):
        if op in real_hlo and name != "conv":  # conv's im2col stays outside the pallas_call
            assert op not in empty_hlo, (name, op)
    # Every operand still reaches the loop: changing any argument changes the overhead kernel's output.
    # (conv's x: the first element of each im2col block is the zero padding left of an image row.)
    base = np.asarray(jax.jit(empty)(*args))
    for i in range(1 if name == "conv" else 0, len(args)):
        changed = list(args)
        changed[i] = args[i] + 1
        assert not np.array_equal(np.asarray(jax.jit(empty)(*changed)), base), (name, i)


def test_step_overhead_share_is_measured_per_config():
    """A share is overhead kernel / kernel, both timed in the same call. Real timings of kernels
    this small are noisy (on a 2-core host a share of the same config ranged 0.02-0.43 under the
    XLA loop), so they are only checked to be positive, finite and not far above 1; the ratio
    itself is checked with a stand-in clock: kernel first, then its overhead kernel."""
    configs = tiles.legal_configs("reduce", SMALL["reduce"])[:2]
    shares = tiles.step_overhead_shares("reduce", SMALL["reduce"], "float32", configs, repeats=3)
    assert shares.shape == (2,) and shares.dtype == np.float64
    assert np.all(np.isfinite(shares)) and np.all(shares > 0) and np.all(shares < 3), shares


def test_step_overhead_share_divides_overhead_time_by_kernel_time(monkeypatch):
    """With a clock that reads 400 ns for each kernel and 100 ns for its overhead kernel (the
    second of each pair), every share is 0.25; swapping the two would give 4."""
    from tpucost.experiments.tiles import overhead

    clock = iter([400.0, 100.0, 400.0, 100.0])
    monkeypatch.setattr(overhead, "best_wall_time_ns", lambda *args, **kwargs: next(clock))
    configs = tiles.legal_configs("reduce", SMALL["reduce"])[:2]
    shares = tiles.step_overhead_shares("reduce", SMALL["reduce"], "float32", configs, repeats=1)
    np.testing.assert_allclose(shares, [0.25, 0.25])


def _copies_of_whole_operands(hlo: str, shape: tuple[int, ...]) -> int:
    """``copy`` instructions of an f32 array of ``shape`` in optimized HLO text."""
    dims = ",".join(map(str, shape))
    return len(re.findall(rf"= f32\[{dims}\]\{{[0-9,]*\}} copy\(", hlo))


def test_the_xla_loop_moves_blocks_where_the_interpreter_copies_whole_operands():
    """Why there are two lowerings: on XLA:CPU, Pallas' interpret mode copies the whole operand on
    every grid step (copies of the full array inside its while loop); the XLA loop does not."""
    shape, config = (256, 1024), {"br": 8, "bc": 128}
    counts = {}
    for name in tiles.LOWERINGS:
        fn, args = tiles.build("reduce", shape, "float32", config, lowering=name)
        counts[name] = _copies_of_whole_operands(jax.jit(fn).lower(*args).compile().as_text(), shape)
    assert counts["xla_loop"] == 0 and counts["pallas"] >= 1, counts


def test_tile_lowering_defaults_to_the_backend_and_refuses_unknown_names():
    assert tiles.tile_lowering("cpu") == backends.backend("cpu").tile_lowering
    assert tiles.tile_lowering("cpu", "xla_loop") == "xla_loop"
    with pytest.raises(ValueError, match="unknown tile lowering 'mosaic'"):
        tiles.tile_lowering("cpu", "mosaic")
    ref = lowering.BlockRef(np.zeros((2, 3), np.float32))
    ref[...] = 1  # broadcast and cast, as a Pallas ref store
    assert ref[...].shape == (2, 3) and ref.dtype == np.float32 and float(ref[...].sum()) == 6.0
    with pytest.raises(IndexError, match="read whole"):
        ref[0]
