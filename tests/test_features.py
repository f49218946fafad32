"""Tests of tpucost.method.features: the opcode vocabulary, the node feature layout, kernel graphs and
padded batches."""

from __future__ import annotations

import math
import re
from pathlib import Path

import jax
import jax.numpy as jnp
import jraph
import numpy as np
import pytest
from conftest import CORPUS, corpus_rows

import tpucost.method.features as features
from tpucost.method.features import (
    FEATURE_BLOCKS,
    FEATURE_LAYOUT_VERSION,
    MAX_RANK,
    NODE_FEATURE_NAMES,
    NUM_NODE_FEATURES,
    OPCODE_VOCAB,
    KernelGraph,
    batches,
    featurize,
    layout_fingerprint,
    node_features,
    opcode_id,
    pad_to_bucket,
    to_graphs_tuple,
)
from tpucost.method.hlo import OPCODES, parse_module, split_modules
from tpucost.method.kernels import Kernel, decompose

F = NUM_NODE_FEATURES


def col(name: str) -> int:
    return NODE_FEATURE_NAMES.index(name)


def lg(x: float) -> float:
    return float(np.float32(math.log1p(x)))


def kernels_of(text: str) -> list[Kernel]:
    return decompose(parse_module(text))


def kernel_named(kernels: list[Kernel], prefix: str) -> Kernel:
    return next(k for k in kernels if k.name.startswith(prefix))


def node_row(graph: KernelGraph, kernel: Kernel, opcode: str) -> np.ndarray:
    return graph.node_features[next(i for i, n in enumerate(kernel.nodes) if n.opcode == opcode)]


# ---------------------------------------------------------------------------------------------
# Kernels to featurize
# ---------------------------------------------------------------------------------------------


def _program(x, w, m):
    y = jax.lax.conv_general_dilated(x, w, (2, 2), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    z = y.reshape(y.shape[0], -1) @ m
    pooled = jax.lax.reduce_window(x, 0.0, jax.lax.add, (1, 3, 3, 1), (1, 2, 2, 1), "SAME")
    return jnp.sum(jnp.tanh(z), axis=1), pooled


@pytest.fixture(scope="module")
def program_kernels() -> list[Kernel]:
    """The kernels of a jitted conv + dot + reduce + reduce-window program (XLA:CPU)."""
    args = (jnp.ones((2, 16, 16, 3)), jnp.ones((3, 3, 3, 8)), jnp.ones((8 * 8 * 8, 10)))
    return kernels_of(jax.jit(_program).lower(*args).compile().as_text())


def _kernel_with(kernels: list[Kernel], opcode: str) -> Kernel:
    return next(k for k in kernels if any(n.opcode == opcode for n in k.nodes))


HANDWRITTEN = """
HloModule m

%fused (p0: f32[8,6], p1: f32[4,5]) -> (f32[4,3], f32[6,8], f32[7,6]) {
  %p0 = f32[8,6]{1,0} parameter(0)
  %p1 = f32[4,5]{1,0} parameter(1)
  %sl = f32[4,3]{1,0} slice(%p0), slice={[0:8:2], [1:4]}
  %tr = f32[6,8]{1,0} transpose(%p0), dimensions={1,0}
  %z = f32[] constant(0)
  %pd = f32[7,6]{1,0} pad(%p1, %z), padding=1_2_0x-1_0_1
  ROOT %t = (f32[4,3]{1,0}, f32[6,8]{1,0}, f32[7,6]{1,0}) tuple(%sl, %tr, %pd)
}

ENTRY %main (a: f32[8,6], b: f32[4,5]) -> (f32[4,3], f32[6,8], f32[7,6]) {
  %a = f32[8,6]{1,0} parameter(0)
  %b = f32[4,5]{1,0} parameter(1)
  ROOT %f = (f32[4,3]{1,0}, f32[6,8]{1,0}, f32[7,6]{1,0}) fusion(%a, %b), kind=kLoop, calls=%fused
}
"""


def _layout_module(layout: str) -> str:
    return f"""
HloModule m
ENTRY %main (a: f32[2,3]) -> f32[2,3] {{
  %a = f32[2,3]{{1,0}} parameter(0)
  ROOT %c = f32[2,3]{layout} copy(%a)
}}
"""


_OPS_OF_INTEREST = (
    "convolution(",
    "dot(",
    "reduce-window(",
    " pad(",
    " slice(",
    "transpose(",
    "while(",
    ":T(",
)


def _corpus_files() -> list[Path]:
    """A few valid corpus files: the smallest holding each op of interest, plus two real models."""
    rows = [r for r in corpus_rows() if r["expected"] == "valid"]
    by_size = [CORPUS / r["file"] for r in sorted(rows, key=lambda r: (int(r["bytes"]), r["file"]))]
    texts = {p: p.read_text() for p in by_size if p.is_file()}
    chosen: set[Path] = set()
    for op in _OPS_OF_INTEREST:
        chosen.update([p for p, text in texts.items() if op in text][:2])
    for name in ("resnet50_keras_jax_f32.hlo", "benchmarking__mobilenet_v2.hlo"):
        chosen.update(p for p in texts if p.name.endswith(name))
    return sorted(chosen)


def _generated_texts(generated_hlo: list[dict[str, str]]) -> dict[str, str]:
    """A few optimized generated modules: the two smallest holding each op of interest, and the
    smallest of each form and configuration."""
    optimized = sorted((r for r in generated_hlo if r["stage"] == "optimized"), key=lambda r: len(r["text"]))
    chosen: dict[str, str] = {}
    for op in _OPS_OF_INTEREST:
        chosen.update((r["label"], r["text"]) for r in [r for r in optimized if op in r["text"]][:2])
    seen: set[tuple[str, str]] = set()
    for r in optimized:
        if (r["form"], r["config"]) not in seen:
            seen.add((r["form"], r["config"]))
            chosen[r["label"]] = r["text"]
    return chosen


# ---------------------------------------------------------------------------------------------
# Vocabulary and layout
# ---------------------------------------------------------------------------------------------

# Changing any of these is a deliberate, model-breaking change: bump FEATURE_LAYOUT_VERSION.
SNAPSHOT_FINGERPRINT = "dc1e1917b0482d9eaccef2672da0c9561f8e4e886a1eb747fc5a77f6f942e6dc"


def test_vocabulary_and_layout_snapshot():
    assert FEATURE_LAYOUT_VERSION == 1
    assert len(OPCODE_VOCAB) == 134 and OPCODE_VOCAB[0] == "<unknown>"
    assert OPCODE_VOCAB[1:] == OPCODES
    assert (OPCODE_VOCAB[1], OPCODE_VOCAB[133]) == ("abs", "xor")
    assert F == 197 and len(set(NODE_FEATURE_NAMES)) == F
    assert (NODE_FEATURE_NAMES[0], NODE_FEATURE_NAMES[-1]) == ("etype=pred", "kernel_tile_product")
    assert layout_fingerprint() == SNAPSHOT_FINGERPRINT


def test_opcode_ids():
    assert opcode_id("abs") == 1
    assert opcode_id("convolution") == OPCODE_VOCAB.index("convolution")
    assert opcode_id("no-such-op") == 0
    assert all(opcode_id(op) == i for i, op in enumerate(OPCODE_VOCAB) if i)


def test_blocks_tile_the_columns():
    stops = [s.stop for s in FEATURE_BLOCKS.values()]
    starts = [s.start for s in FEATURE_BLOCKS.values()]
    assert starts[0] == 0 and stops[-1] == F and starts[1:] == stops[:-1]


def test_docstring_table_matches_the_layout():
    """Every row range in the module docstring's table starts at the column it names."""
    rows = re.findall(r"^(\d+)(?:-(\d+))?\s+``([^`]+)``", features.__doc__, flags=re.M)
    assert rows, "no table rows found"
    covered = []
    for start, stop, name in rows:
        covered.append((int(start), int(stop or start)))
        literal = name.split("..")[0]
        if not re.search(r"[<{]", literal):
            assert NODE_FEATURE_NAMES.index(literal) == int(start), name
    covered.sort()
    assert covered[0][0] == 0 and covered[-1][1] == F - 1
    assert all(b[0] == a[1] + 1 for a, b in zip(covered, covered[1:], strict=False)), covered
    assert f"NUM_NODE_FEATURES = {F}" in features.__doc__


# ---------------------------------------------------------------------------------------------
# Featurizing kernels
# ---------------------------------------------------------------------------------------------


def _check_graph(graph: KernelGraph, kernel: Kernel) -> None:
    n = len(kernel.nodes)
    assert graph.node_features.shape == (n, F) and graph.node_features.dtype == np.float32
    assert np.isfinite(graph.node_features).all(), kernel.name
    assert graph.opcodes.dtype == np.int32 and graph.opcodes.shape == (n,)
    assert ((graph.opcodes >= 0) & (graph.opcodes < len(OPCODE_VOCAB))).all()
    assert graph.senders.dtype == np.int32 and graph.receivers.dtype == np.int32
    assert list(zip(graph.senders.tolist(), graph.receivers.tolist(), strict=True)) == list(kernel.edges)
    is_output = graph.node_features[:, col("is_output")]
    assert set(np.flatnonzero(is_output).tolist()) == set(kernel.outputs), kernel.name
    is_param = graph.node_features[:, col("is_parameter")]
    assert is_param.tolist() == [float(nd.opcode == "parameter") for nd in kernel.nodes]
    assert (graph.name, graph.kind) == (kernel.name, kernel.kind)


def test_program_kernels_featurize(program_kernels):
    assert len(program_kernels) >= 4
    for kernel in program_kernels:
        _check_graph(featurize(kernel), kernel)


@pytest.mark.slow
def test_generated_and_corpus_kernels_featurize(generated_hlo):
    texts = _generated_texts(generated_hlo)
    assert len(texts) >= 15
    n_kernels = 0
    for text in texts.values():
        for kernel in kernels_of(text):
            _check_graph(featurize(kernel), kernel)
            n_kernels += 1
    assert n_kernels > 100, n_kernels
    for path in _corpus_files():  # when the corpus is there
        for text in split_modules(path.read_text()):
            for kernel in kernels_of(text):
                _check_graph(featurize(kernel), kernel)
                n_kernels += 1


def test_kernel_output_flag_on_multi_output_fusion():
    kernel = kernels_of(HANDWRITTEN)[0]
    graph = featurize(kernel)
    flagged = {kernel.nodes[i].name for i in np.flatnonzero(graph.node_features[:, col("is_output")])}
    assert flagged == {"sl", "tr", "pd", "t"}
    root = node_row(graph, kernel, "tuple")
    assert root[col("etype=tuple")] == 1 and root[col("is_tuple")] == 1
    assert root[col("num_tuple_leaves")] == lg(3)
    assert root[col("num_elements")] == lg(12 + 48 + 42) and root[col("byte_size")] == lg(4 * 102)
    assert root[col("dim0")] == lg(8) and root[col("dim1")] == lg(6)  # the largest leaf, f32[6,8]
    assert root[col("num_operands")] == lg(3)


def test_dims_follow_the_layout_minor_to_major():
    row_major = featurize(kernels_of(_layout_module("{1,0}"))[0])
    col_major = featurize(kernels_of(_layout_module("{0,1}"))[0])
    a, b = row_major.node_features[-1], col_major.node_features[-1]
    assert (a[col("dim0")], a[col("dim1")]) == (lg(3), lg(2))
    assert (b[col("dim0")], b[col("dim1")]) == (lg(2), lg(3))
    assert (a[col("layout0")], a[col("layout1")]) == (2, 1)  # minor_to_major {1,0}, plus one
    assert (b[col("layout0")], b[col("layout1")]) == (1, 2)
    assert not np.array_equal(a, b)
    same = [c for c in range(F) if NODE_FEATURE_NAMES[c] not in ("dim0", "dim1", "layout0", "layout1")]
    np.testing.assert_array_equal(a[same], b[same])


def test_shape_without_layout_uses_descending_order():
    text = "HloModule m\nENTRY %e (a: f32[2,3,4]) -> f32[2,3,4] {\n  %a = f32[2,3,4] parameter(0)\n  ROOT %n = f32[2,3,4] negate(%a)\n}\n"
    row = featurize(kernels_of(text)[0]).node_features[-1]
    assert [row[col(f"dim{i}")] for i in range(4)] == [lg(4), lg(3), lg(2), 0]
    assert row[col("has_layout")] == 0 and row[col("rank")] == 3
    assert row[col("dims_sum")] == lg(9) and row[col("dims_product")] == lg(24)
    assert row[col("etype=f32")] == 1 and row[col("element_bits")] == lg(32)


def test_tiled_layout_columns():
    text = _layout_module("{1,0:T(2,128)}")
    row = featurize(kernels_of(text)[0]).node_features[-1]
    assert row[col("has_tiling")] == 1
    assert (row[col("layout_tile0")], row[col("layout_tile1")]) == (lg(128), lg(2))
    untiled = featurize(kernels_of(_layout_module("{1,0}"))[0]).node_features[-1]
    assert untiled[col("has_tiling")] == 0 and untiled[col("layout_tile0")] == 0


def test_convolution_and_window_columns(program_kernels):
    kernel = _kernel_with(program_kernels, "convolution")
    conv = node_row(featurize(kernel), kernel, "convolution")
    # window={size=3x3 stride=2x2 pad=0_1x0_1}, dim_labels=b01f_01io->b01f
    assert conv[col("window_rank")] == 2
    assert conv[col("window_size0")] == lg(3) and conv[col("window_size1")] == lg(3)
    assert conv[col("window_size2")] == 0
    assert conv[col("window_stride0")] == lg(2) and conv[col("window_pad_hi1")] == lg(1)
    assert conv[col("window_pad_lo0")] == 0 and conv[col("window_lhs_dilate0")] == lg(1)
    assert conv[col("window_size_sum")] == lg(6) and conv[col("window_size_product")] == lg(9)
    assert (conv[col("conv_input_batch_dim")], conv[col("conv_input_feature_dim")]) == (1, 4)
    assert (conv[col("conv_kernel_in_feature_dim")], conv[col("conv_kernel_out_feature_dim")]) == (3, 4)
    assert (conv[col("conv_output_batch_dim")], conv[col("conv_output_feature_dim")]) == (1, 4)
    assert conv[col("conv_spatial_rank")] == 2 and conv[col("feature_group_count")] == lg(1)
    param = node_row(featurize(kernel), kernel, "parameter")
    assert not param[FEATURE_BLOCKS["window"]].any() and not param[FEATURE_BLOCKS["convolution"]].any()

    kernel = _kernel_with(program_kernels, "reduce-window")
    rw = node_row(featurize(kernel), kernel, "reduce-window")
    # window={size=1x3x3x1 stride=1x2x2x1 pad=0_0x0_1x0_1x0_0}
    assert rw[col("window_rank")] == 4 and rw[col("window_size1")] == lg(3)
    assert rw[col("window_stride2")] == lg(2) and rw[col("window_pad_hi2")] == lg(1)
    assert not rw[FEATURE_BLOCKS["convolution"]].any()


def test_dot_and_reduce_columns(program_kernels):
    kernel = _kernel_with(program_kernels, "dot")
    dot = node_row(featurize(kernel), kernel, "dot")  # lhs_contracting_dims={1}, rhs_contracting_dims={0}
    assert dot[col("dot_lhs_contracting1")] == 1 and dot[col("dot_lhs_contracting0")] == 0
    assert dot[col("dot_rhs_contracting0")] == 1
    assert dot[col("dot_lhs_contracting_count")] == 1 and dot[col("dot_lhs_batch_count")] == 0
    assert dot[FEATURE_BLOCKS["dot"]].sum() == 4
    kernel = _kernel_with(program_kernels, "reduce")
    reduce = node_row(featurize(kernel), kernel, "reduce")  # dimensions={1}
    assert reduce[col("dimensions1")] == 1 and reduce[col("dimensions_count")] == 1
    assert reduce[col("dimensions0")] == 0 and not reduce[FEATURE_BLOCKS["dot"]].any()


def test_slice_pad_transpose_columns():
    kernel = kernels_of(HANDWRITTEN)[0]
    graph = featurize(kernel)
    sl = node_row(graph, kernel, "slice")  # slice={[0:8:2], [1:4]}
    assert [sl[col(f"slice_start{i}")] for i in range(3)] == [0, lg(1), 0]
    assert [sl[col(f"slice_limit{i}")] for i in range(2)] == [lg(8), lg(4)]
    assert [sl[col(f"slice_stride{i}")] for i in range(2)] == [lg(2), lg(1)]
    pd = node_row(graph, kernel, "pad")  # padding=1_2_0x-1_0_1
    assert [pd[col("pad_lo0")], pd[col("pad_lo1")]] == [lg(1), -lg(1)]
    assert [pd[col("pad_hi0")], pd[col("pad_hi1")]] == [lg(2), 0]
    assert [pd[col("pad_interior0")], pd[col("pad_interior1")]] == [0, lg(1)]
    tr = node_row(graph, kernel, "transpose")  # dimensions={1,0}
    assert [tr[col("transpose_perm0")], tr[col("transpose_perm1")], tr[col("transpose_perm2")]] == [2, 1, 0]
    assert tr[col("dimensions0")] == tr[col("dimensions1")] == 1 and tr[col("dimensions_count")] == 2
    assert not sl[FEATURE_BLOCKS["pad"]].any() and not pd[FEATURE_BLOCKS["slice"]].any()


def test_tile_subvector_only_with_a_tile(program_kernels):
    kernel = program_kernels[0]
    tile_cols = FEATURE_BLOCKS["kernel_tile"]
    plain = featurize(kernel)
    assert not plain.node_features[:, tile_cols].any()
    tiled = featurize(kernel, tile=(128, 8))
    assert (tiled.node_features[:, col("kernel_has_tile")] == 1).all()
    assert (tiled.node_features[:, col("kernel_tile0")] == lg(128)).all()
    assert (tiled.node_features[:, col("kernel_tile1")] == lg(8)).all()
    assert (tiled.node_features[:, col("kernel_tile2")] == 0).all()
    assert (tiled.node_features[:, col("kernel_tile_sum")] == lg(136)).all()
    assert (tiled.node_features[:, col("kernel_tile_product")] == lg(1024)).all()
    other = [c for c in range(F) if not tile_cols.start <= c < tile_cols.stop]
    np.testing.assert_array_equal(plain.node_features[:, other], tiled.node_features[:, other])
    for bad in ((), (0, 4), (-8,)):
        with pytest.raises(ValueError, match="tile"):
            featurize(kernel, tile=bad)


def test_node_features_of_a_lone_instruction(program_kernels):
    inst = _kernel_with(program_kernels, "dot").instruction
    row = node_features(inst, is_output=True)
    assert row.shape == (F,) and row.dtype == np.float32 and row[col("is_output")] == 1


def test_huge_shapes_stay_finite():
    text = "HloModule m\nENTRY %e (a: f32[1000000000,1000000000,1000000000,1000000000,1000000000,1000000000,1000000000,1000000000,1000000000,1000000000,1000000000,1000000000]) -> f32[1000000000,1000000000,1000000000,1000000000,1000000000,1000000000,1000000000,1000000000,1000000000,1000000000,1000000000,1000000000] {\n  ROOT %a = f32[1000000000,1000000000,1000000000,1000000000,1000000000,1000000000,1000000000,1000000000,1000000000,1000000000,1000000000,1000000000] parameter(0)\n}\n"
    inst = parse_module(text).entry.root
    row = node_features(inst, is_output=False)
    assert np.isfinite(row).all() and row[col("rank")] == 12
    assert row[col("dims_product")] == pytest.approx(12 * math.log(1e9), rel=1e-5)


# ---------------------------------------------------------------------------------------------
# GraphsTuple conversion and buckets
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def graphs(program_kernels) -> list[KernelGraph]:
    return [featurize(k) for k in program_kernels] + [featurize(kernels_of(HANDWRITTEN)[0])]


def test_to_graphs_tuple_counts(graphs):
    gt = to_graphs_tuple(graphs, targets=np.arange(len(graphs)))
    assert gt.n_node.tolist() == [g.num_nodes for g in graphs]
    assert gt.n_edge.tolist() == [g.num_edges for g in graphs]
    n, m = sum(g.num_nodes for g in graphs), sum(g.num_edges for g in graphs)
    assert gt.nodes["opcode"].shape == (n,) and gt.nodes["features"].shape == (n, F)
    assert gt.senders.shape == (m,) and gt.receivers.shape == (m,) and gt.senders.dtype == np.int32
    assert gt.globals.shape == (len(graphs), 1) and gt.globals[:, 0].tolist() == list(range(len(graphs)))
    # edges stay inside their own graph, offset by the nodes before it
    graph_of_node = np.repeat(np.arange(len(graphs)), gt.n_node)
    graph_of_edge = np.repeat(np.arange(len(graphs)), gt.n_edge)
    assert (graph_of_node[gt.senders] == graph_of_edge).all()
    assert (graph_of_node[gt.receivers] == graph_of_edge).all()
    second = int(gt.n_node[0])
    np.testing.assert_array_equal(
        gt.senders[gt.n_edge[0] :][: graphs[1].num_edges], graphs[1].senders + second
    )
    zeros = to_graphs_tuple(graphs)
    assert zeros.globals.shape == (len(graphs), 1) and not zeros.globals.any()
    with pytest.raises(ValueError, match="targets"):
        to_graphs_tuple(graphs, targets=[1.0])


def _check_padding(padded, graph_mask, node_mask, n_graph: int, n_node: int) -> None:
    assert graph_mask.dtype == bool and node_mask.dtype == bool
    assert graph_mask.sum() == n_graph and graph_mask[:n_graph].all() and not graph_mask[-1]
    assert node_mask.sum() == n_node and node_mask[:n_node].all() and not node_mask[-1]
    assert not padded.nodes["opcode"][~node_mask].any()
    assert not padded.nodes["features"][~node_mask].any()
    assert not padded.globals[~graph_mask].any()
    real_edges = int(padded.n_edge[graph_mask].sum())
    assert (padded.senders[real_edges:] >= n_node).all() and (padded.receivers[real_edges:] >= n_node).all()
    assert (padded.senders[:real_edges] < n_node).all()
    np.testing.assert_array_equal(graph_mask, np.asarray(jraph.get_graph_padding_mask(padded)))
    np.testing.assert_array_equal(node_mask, np.asarray(jraph.get_node_padding_mask(padded)))


def test_buckets_give_identical_shapes_and_masks_exclude_padding(graphs):
    buckets = dict(node_buckets=(4, 32, 64), edge_buckets=(2, 32, 64), graph_buckets=(2, 8, 16))
    small, large = graphs[:2], graphs[:4]
    shapes, traces = [], []

    @jax.jit
    def step(gt, graph_mask, node_mask):
        traces.append(1)
        per_node = jnp.where(node_mask, gt.nodes["features"].sum(axis=1), 0.0)
        per_graph = jax.ops.segment_sum(per_node, jnp.repeat(jnp.arange(graph_mask.shape[0]), gt.n_node,
                                                              total_repeat_length=node_mask.shape[0]),
                                        num_segments=graph_mask.shape[0])  # fmt: skip
        return jnp.where(graph_mask, per_graph, 0.0).sum()

    for batch in (small, large):
        padded, graph_mask, node_mask = pad_to_bucket(to_graphs_tuple(batch), **buckets)
        _check_padding(padded, graph_mask, node_mask, len(batch), sum(g.num_nodes for g in batch))
        shapes.append(jax.tree.map(lambda x: (x.shape, x.dtype), (padded, graph_mask, node_mask)))
        total = step(padded, graph_mask, node_mask)
        assert float(total) == pytest.approx(sum(float(g.node_features.sum()) for g in batch), rel=1e-5)
    assert shapes[0] == shapes[1]
    assert len(traces) == 1  # one compilation for both batches
    assert shapes[0][1][0] == (8,) and shapes[0][2][0] == (32,)


def test_smallest_bucket_and_too_small_buckets(graphs):
    gt = to_graphs_tuple(graphs[:1])
    n = int(gt.n_node.sum())
    padded, graph_mask, node_mask = pad_to_bucket(gt, node_buckets=(n, n + 1, 1024), edge_buckets=(16, 4096),
                                                  graph_buckets=(2, 4))  # fmt: skip
    assert node_mask.shape == (n + 1,) and graph_mask.shape == (2,)  # n nodes need a padding node
    assert padded.senders.shape == (16,)
    with pytest.raises(ValueError, match="nodes"):
        pad_to_bucket(gt, node_buckets=(n,))
    with pytest.raises(ValueError, match="graphs"):
        pad_to_bucket(to_graphs_tuple(graphs[:3]), graph_buckets=(2, 3))


def test_batches_cover_every_graph_once(graphs):
    targets = np.arange(len(graphs), dtype=np.float32) + 1
    seen = []
    out = list(batches(graphs, targets, batch_size=2, rng=np.random.default_rng(0)))
    assert len(out) == math.ceil(len(graphs) / 2)
    for padded, graph_mask, node_mask in out:
        _check_padding(padded, graph_mask, node_mask, int(graph_mask.sum()), int(node_mask.sum()))
        seen += padded.globals[graph_mask, 0].tolist()
    assert sorted(seen) == targets.tolist()
    again = [
        p.globals[m, 0].tolist() for p, m, _ in batches(graphs, targets, 2, rng=np.random.default_rng(0))
    ]
    assert again == [p.globals[m, 0].tolist() for p, m, _ in out]
    ordered = [p.globals[m, 0].tolist() for p, m, _ in batches(graphs, targets, 2)]
    assert sum(ordered, []) == targets.tolist()
    unlabelled = next(batches(graphs, None, 3))
    assert not unlabelled[0].globals.any()
    with pytest.raises(ValueError):
        next(batches(graphs, targets[:-1], 2))
    with pytest.raises(ValueError):
        next(batches(graphs, targets, 0))


def test_max_rank_constant():
    assert MAX_RANK == 6
    assert sum(n.startswith("dim") and n[3:].isdigit() for n in NODE_FEATURE_NAMES) == MAX_RANK
