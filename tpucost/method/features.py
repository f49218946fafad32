"""Kernel graphs as arrays: opcode ids, fixed-layout node features, batches for jitted training.

Each node of a `tpucost.method.kernels.Kernel` becomes an opcode id (the model embeds it with a lookup
table) and a fixed-layout float32 feature vector; edges go producer -> consumer. Batches of
kernel graphs become padded `jraph.GraphsTuple` batches of a few fixed sizes ("buckets"), so that
a jitted training step compiles once per bucket rather than once per batch.

Opcode vocabulary
-----------------
``OPCODE_VOCAB = ("<unknown>",) + tpucost.method.hlo.OPCODES``: id 0 is an unknown opcode (and padding),
ids 1..133 are XLA's opcodes in `tpucost.method.hlo.OPCODES` order.

Node feature layout (``FEATURE_LAYOUT_VERSION = 1``, ``NUM_NODE_FEATURES = 197``)
-----------------------------------------------------------------------------------
Scaling: ``log`` is ``log1p(x)``; ``slog`` is the signed log ``sign(x) * log1p(|x|)`` (for values
that may be negative); ``raw`` is the value itself; ``pos+1`` is a dimension number plus one, so
that 0 means "none". Lists longer than their padded width are cut, but their sum, product and
count still cover every entry. A block that does not apply to an op is all zeros.

=========  ===================================  ===================================================  =======
columns    names                                meaning                                              scaling
=========  ===================================  ===================================================  =======
0-33       ``etype=<t>``                        one-hot element type: the 32 of                      0/1
                                                `hlo.ELEMENT_TYPES`, ``tuple``, ``other``
34         ``element_bits``                     bits per element (of the main leaf for a tuple)      log
35-40      ``dim0..dim5``                       output dims, minor to major as laid out (layout's    log
                                                ``minor_to_major``, else the default descending
                                                order); a tuple uses its largest leaf
41-42      ``dims_sum``, ``dims_product``       sum and product of all dims                          log
43         ``rank``                             number of dims                                       raw
44         ``num_elements``                     elements (summed over leaves for a tuple)            log
45         ``byte_size``                        bytes (summed over leaves for a tuple)               log
46-47      ``is_tuple``, ``num_tuple_leaves``   tuple flag; number of array leaves                   0/1, log
48         ``has_layout``                       the shape carries a layout                           0/1
49-54      ``layout0..layout5``                 ``minor_to_major`` entries                           pos+1
55         ``has_tiling``                       the layout has tiles ``T(...)``                      0/1
56-61      ``layout_tile0..layout_tile5``       first tile's dims, minor to major (``*`` = -1)       slog
62         ``window_rank``                      window dimensions                                    raw
63-86      ``window_<f>0..3``                   per window dim, f in size, stride, pad_lo, pad_hi,   log
                                                lhs_dilate, rhs_dilate (defaults 1/0 filled in)      (pads slog)
87-98      ``window_<f>_sum``, ``_product``     sum and product of each of the six fields            log/slog
99-104     ``conv_<x>_dim``                     from ``dim_labels``: input batch, input feature,     pos+1
                                                kernel input feature, kernel output feature,
                                                output batch, output feature dimension numbers
105        ``conv_spatial_rank``                spatial dims in ``dim_labels``                       raw
106-107    ``feature_group_count``,             convolution group counts (1 when not written)        log
           ``batch_group_count``
108-131    ``dot_<l>_<k>0..5``                  multi-hot of lhs/rhs contracting/batch dims          0/1
132-135    ``dot_<l>_<k>_count``                how many of each                                     raw
136-141    ``dimensions0..5``                   multi-hot of the ``dimensions`` attribute (reduce,   0/1
                                                broadcast, transpose, concatenate, reverse, ...)
142        ``dimensions_count``                 entries of ``dimensions``                            raw
143-148    ``transpose_perm0..5``               transpose permutation                                pos+1
149-166    ``slice_{start,limit,stride}0..5``   slice bounds per dim, in logical dim order           log
167-184    ``pad_{lo,hi,interior}0..5``         pad op's padding per dim, in logical dim order       slog
185        ``is_output``                        the node's value leaves the kernel                   0/1
186        ``is_parameter``                     the node is a kernel input                           0/1
187        ``num_operands``                     operands of the node                                 log
188        ``kernel_has_tile``                  a kernel-level tile was given                        0/1
189-194    ``kernel_tile0..5``                  kernel tile sizes, minor to major                    log
195-196    ``kernel_tile_sum``, ``_product``    sum and product (volume) of the tile sizes           log
=========  ===================================  ===================================================  =======

Changing the vocabulary or the layout invalidates trained models: bump `FEATURE_LAYOUT_VERSION`
and the snapshot in ``tests/test_features.py`` together; `layout_fingerprint` returns a hash of
both. `TPUCOST_FEATURES` (a `FeatureSpec`: that fingerprint, the feature width and the vocabulary
size) is what data sets, model configs and checkpoints carry and compare; graphs from other
sources (`tpucost.experiments.tpugraphs`) have their own spec.

Usage::

    graphs = [featurize(k) for k in decompose(parse_module(text))]
    for batch, graph_mask, node_mask in batches(graphs, targets, batch_size=32):
        ...  # batch.nodes["opcode"] int32[N], batch.nodes["features"] float32[N, F]
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

import jraph
import numpy as np

from tpucost.method.hlo import ELEMENT_TYPES, OPCODES, Instruction, Shape, Window
from tpucost.method.kernels import Kernel

__all__ = [
    "FEATURE_LAYOUT_VERSION",
    "MAX_RANK",
    "MAX_WINDOW_RANK",
    "OPCODE_VOCAB",
    "ELEMENT_TYPE_VOCAB",
    "NODE_FEATURE_NAMES",
    "NUM_NODE_FEATURES",
    "FEATURE_BLOCKS",
    "DEFAULT_NODE_BUCKETS",
    "DEFAULT_EDGE_BUCKETS",
    "DEFAULT_GRAPH_BUCKETS",
    "FeatureSpec",
    "TPUCOST_FEATURES",
    "KernelGraph",
    "opcode_id",
    "layout_fingerprint",
    "node_features",
    "featurize",
    "to_graphs_tuple",
    "bucket",
    "shared_buckets",
    "pad_to_bucket",
    "batches",
]

#: Version of the opcode vocabulary plus feature layout; bump on any change to either.
FEATURE_LAYOUT_VERSION = 1
#: Dimensions kept per shape / per list of dimension numbers.
MAX_RANK = 6
#: Window dimensions kept per window field.
MAX_WINDOW_RANK = 4

#: Opcode vocabulary: id 0 is unknown (and padding), then XLA's opcodes. Never reorder.
OPCODE_VOCAB: tuple[str, ...] = ("<unknown>",) + tuple(OPCODES)
_OPCODE_IDS = {op: i for i, op in enumerate(OPCODE_VOCAB)}

#: Element types of the one-hot block.
ELEMENT_TYPE_VOCAB: tuple[str, ...] = tuple(ELEMENT_TYPES) + ("tuple", "other")
_ETYPE_IDS = {t: i for i, t in enumerate(ELEMENT_TYPE_VOCAB)}

_WINDOW_FIELDS = ("size", "stride", "pad_lo", "pad_hi", "lhs_dilate", "rhs_dilate")
_CONV_DIMS = (
    "input_batch",
    "input_feature",
    "kernel_in_feature",
    "kernel_out_feature",
    "output_batch",
    "output_feature",
)
_DOT_ATTRS = ("lhs_contracting_dims", "rhs_contracting_dims", "lhs_batch_dims", "rhs_batch_dims")
_DOT_NAMES = ("lhs_contracting", "rhs_contracting", "lhs_batch", "rhs_batch")


def _numbered(prefix: str, n: int) -> tuple[str, ...]:
    return tuple(f"{prefix}{i}" for i in range(n))


def _layout_blocks() -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The feature blocks in column order: (block name, column names)."""
    window = tuple(n for f in _WINDOW_FIELDS for n in _numbered(f"window_{f}", MAX_WINDOW_RANK))
    window_agg = tuple(n for f in _WINDOW_FIELDS for n in (f"window_{f}_sum", f"window_{f}_product"))
    dot = tuple(n for d in _DOT_NAMES for n in _numbered(f"dot_{d}", MAX_RANK))
    return (
        ("element_type", tuple(f"etype={t}" for t in ELEMENT_TYPE_VOCAB) + ("element_bits",)),
        ("shape", _numbered("dim", MAX_RANK) + ("dims_sum", "dims_product", "rank", "num_elements",
                                                "byte_size", "is_tuple", "num_tuple_leaves")),
        ("layout", ("has_layout",) + _numbered("layout", MAX_RANK) + ("has_tiling",)
         + _numbered("layout_tile", MAX_RANK)),
        ("window", ("window_rank",) + window + window_agg),
        ("convolution", tuple(f"conv_{d}_dim" for d in _CONV_DIMS)
         + ("conv_spatial_rank", "feature_group_count", "batch_group_count")),
        ("dot", dot + tuple(f"dot_{d}_count" for d in _DOT_NAMES)),
        ("dimensions", _numbered("dimensions", MAX_RANK) + ("dimensions_count",)
         + _numbered("transpose_perm", MAX_RANK)),
        ("slice", _numbered("slice_start", MAX_RANK) + _numbered("slice_limit", MAX_RANK)
         + _numbered("slice_stride", MAX_RANK)),
        ("pad", _numbered("pad_lo", MAX_RANK) + _numbered("pad_hi", MAX_RANK) + _numbered("pad_interior", MAX_RANK)),
        ("node", ("is_output", "is_parameter", "num_operands")),
        ("kernel_tile", ("kernel_has_tile",) + _numbered("kernel_tile", MAX_RANK)
         + ("kernel_tile_sum", "kernel_tile_product")),
    )  # fmt: skip


_BLOCKS = _layout_blocks()
#: One name per feature column.
NODE_FEATURE_NAMES: tuple[str, ...] = tuple(n for _, names in _BLOCKS for n in names)
#: Width F of a node feature vector.
NUM_NODE_FEATURES = len(NODE_FEATURE_NAMES)


def _block_slices() -> dict[str, slice]:
    out, start = {}, 0
    for block, names in _BLOCKS:
        out[block] = slice(start, start + len(names))
        start += len(names)
    return out


#: Block name -> its column slice, in column order.
FEATURE_BLOCKS: dict[str, slice] = _block_slices()


def opcode_id(opcode: str) -> int:
    """The opcode's id in `OPCODE_VOCAB`; 0 for an opcode XLA does not know."""
    return _OPCODE_IDS.get(opcode, 0)


def layout_fingerprint() -> str:
    """A SHA-256 of the layout version, the opcode vocabulary and the feature names.

    Store it with a trained model and compare it when loading: a mismatch means the model was
    trained on another feature layout.
    """
    blob = json.dumps([FEATURE_LAYOUT_VERSION, OPCODE_VOCAB, NODE_FEATURE_NAMES], separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


@dataclasses.dataclass(frozen=True)
class FeatureSpec:
    """What a kernel graph's arrays mean: the feature layout a model is trained on and must be used on.

    Attributes:
      layout: a fingerprint (or name) of the node feature layout and opcode vocabulary, e.g.
      `layout_fingerprint()` for tpucost's own.
      num_node_features: F, the width of a node feature row.
      num_opcodes: the opcode vocabulary size (ids are ``0 .. num_opcodes - 1``).
      num_config_features: width of a configuration's feature row (tile task); 0 when none.
    """

    layout: str
    num_node_features: int
    num_opcodes: int
    num_config_features: int = 0

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> FeatureSpec:
        """The spec of a `to_dict` dict; ValueError names a missing or unknown field."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown, missing = set(d) - names, {"layout", "num_node_features", "num_opcodes"} - set(d)
        if unknown or missing:
            raise ValueError(
                f"a feature spec needs fields {sorted(names)}; missing {sorted(missing)}, "
                f"unknown {sorted(unknown)}"
            )
        return cls(
            str(d["layout"]),
            int(d["num_node_features"]),
            int(d["num_opcodes"]),
            int(d.get("num_config_features", 0)),
        )

    def describe(self) -> str:
        """One line: the layout (a long fingerprint cut to 12 characters) and the widths."""
        layout = self.layout if len(self.layout) <= 24 else f"{self.layout[:12]}..."
        extra = f", {self.num_config_features} config features" if self.num_config_features else ""
        return f"{layout} ({self.num_node_features} node features, {self.num_opcodes} opcodes{extra})"

    def check_matches(self, other: FeatureSpec, mine: str, theirs: str) -> None:
        """Raise ValueError naming both sides unless ``other`` is this spec.

        Args:
          other: the spec to compare with.
          mine, theirs: what carries each spec, e.g. ``"checkpoint DIR"`` and ``"data set DIR"``.
        """
        if other != self:
            raise ValueError(
                f"{mine} uses feature layout {self.describe()}, but {theirs} uses {other.describe()}"
            )


#: tpucost's own feature layout: `featurize` graphs (`NODE_FEATURE_NAMES`, `OPCODE_VOCAB`).
TPUCOST_FEATURES = FeatureSpec(layout_fingerprint(), NUM_NODE_FEATURES, len(OPCODE_VOCAB))


# ---------------------------------------------------------------------------------------------
# Scaling helpers (Python ints may be huge: products of dims overflow int64 and float)
# ---------------------------------------------------------------------------------------------


def _log(x: int | float) -> float:
    """``log1p(x)`` for ``x >= 0`` (negatives clip to 0), exact for huge Python ints."""
    if x <= 0:
        return 0.0
    return math.log(x + 1) if isinstance(x, int) else math.log1p(x)


def _slog(x: int | float) -> float:
    """Signed log: ``sign(x) * log1p(|x|)``."""
    return math.copysign(_log(abs(x)), x) if x else 0.0


def _padded(values: Sequence[float], width: int) -> list[float]:
    """`values` cut or zero-padded to `width` entries."""
    return list(values[:width]) + [0.0] * max(0, width - len(values))


def _sum_prod(values: Sequence[int], scale=_log) -> list[float]:
    """[scale(sum), scale(product)] of `values` ([0, 0] when empty)."""
    if not values:
        return [0.0, 0.0]
    return [scale(sum(values)), scale(math.prod(values))]


def _multi_hot(dims: Sequence[int], width: int = MAX_RANK) -> list[float]:
    out = [0.0] * width
    for d in dims:
        if 0 <= d < width:
            out[d] = 1.0
    return out


def _int_tuple(value: object) -> tuple[int, ...]:
    """A tuple of ints attribute, or () when the attribute is missing or of another form."""
    if isinstance(value, tuple) and all(isinstance(v, int) for v in value):
        return value
    return ()


# ---------------------------------------------------------------------------------------------
# Feature blocks: each returns its columns, in NODE_FEATURE_NAMES order
# ---------------------------------------------------------------------------------------------


def _main_leaf(shape: Shape) -> Shape:
    """The shape whose dims and layout describe `shape`: itself, or a tuple's largest leaf."""
    if not shape.is_tuple:
        return shape
    leaves = [s for s in shape.leaves() if s.element_type in ELEMENT_TYPES]
    return max(leaves, key=lambda s: s.byte_size, default=Shape("tuple"))


def _minor_to_major(shape: Shape) -> tuple[int, ...]:
    """The layout's dimension order if it is a permutation of the dims, else descending."""
    rank = len(shape.dims)
    order = shape.layout.minor_to_major if shape.layout is not None else ()
    if sorted(order) == list(range(rank)):
        return tuple(order)
    return tuple(range(rank - 1, -1, -1))


def _element_type_block(shape: Shape) -> list[float]:
    one_hot = [0.0] * len(ELEMENT_TYPE_VOCAB)
    one_hot[_ETYPE_IDS.get(shape.element_type, _ETYPE_IDS["other"])] = 1.0
    bits = ELEMENT_TYPES.get(_main_leaf(shape).element_type, 0)
    return one_hot + [_log(bits)]


def _shape_block(shape: Shape) -> list[float]:
    leaf = _main_leaf(shape)
    dims = [leaf.dims[d] for d in _minor_to_major(leaf)]
    num_leaves = sum(1 for _ in shape.leaves()) if shape.is_tuple else 0
    return (
        _padded([_log(d) for d in dims], MAX_RANK)
        + [_log(sum(dims)), _log(math.prod(dims)) if dims else 0.0, float(len(dims))]
        + [_log(shape.num_elements), _log(shape.byte_size), float(shape.is_tuple), _log(num_leaves)]
    )


def _layout_block(shape: Shape) -> list[float]:
    layout = _main_leaf(shape).layout
    if layout is None:
        return [0.0] * (2 + 2 * MAX_RANK)
    first_tile = tuple(reversed(layout.tiles[0])) if layout.tiles else ()  # minor to major
    return (
        [1.0]
        + _padded([d + 1.0 for d in layout.minor_to_major], MAX_RANK)
        + [float(bool(layout.tiles))]
        + _padded([_slog(t) for t in first_tile], MAX_RANK)
    )


def _window_fields(window: Window) -> list[list[int]]:
    """The six per-dim window fields, with XLA's defaults for those not written."""
    rank = window.rank
    pads = list(window.pad) or [(0, 0)] * rank
    return [
        list(window.size) or [1] * rank,
        list(window.stride) or [1] * rank,
        [lo for lo, _ in pads],
        [hi for _, hi in pads],
        list(window.lhs_dilate) or [1] * rank,
        list(window.rhs_dilate) or [1] * rank,
    ]


def _window_block(inst: Instruction) -> list[float]:
    window = inst.attributes.get("window")
    n_agg = 2 * len(_WINDOW_FIELDS)
    if not isinstance(window, Window):
        return [0.0] * (1 + len(_WINDOW_FIELDS) * MAX_WINDOW_RANK + n_agg)
    fields = _window_fields(window)
    per_dim, agg = [], []
    for name, values in zip(_WINDOW_FIELDS, fields, strict=True):
        scale = _slog if name.startswith("pad") else _log
        per_dim += _padded([scale(v) for v in values], MAX_WINDOW_RANK)
        agg += _sum_prod(values, scale)
    return [float(window.rank)] + per_dim + agg


def _conv_block(inst: Instruction) -> list[float]:
    labels = inst.attributes.get("dim_labels")
    if not isinstance(labels, str) or "->" not in labels or "_" not in labels:
        return [0.0] * (len(_CONV_DIMS) + 3)
    operands, output = labels.split("->", 1)
    lhs, rhs = operands.split("_", 1)
    positions = [
        lhs.find("b"),
        lhs.find("f"),
        rhs.find("i"),
        rhs.find("o"),
        output.find("b"),
        output.find("f"),
    ]
    spatial = sum(c.isdigit() for c in lhs)
    groups = [inst.attributes.get(k, 1) for k in ("feature_group_count", "batch_group_count")]
    return (
        [p + 1.0 for p in positions]
        + [float(spatial)]
        + [_log(g) if isinstance(g, int) else 0.0 for g in groups]
    )


def _dot_block(inst: Instruction) -> list[float]:
    dims = [_int_tuple(inst.attributes.get(k)) for k in _DOT_ATTRS]
    return [h for d in dims for h in _multi_hot(d)] + [float(len(d)) for d in dims]


def _dimensions_block(inst: Instruction) -> list[float]:
    dims = _int_tuple(inst.attributes.get("dimensions"))
    perm = [d + 1.0 for d in dims] if inst.opcode == "transpose" else []
    return _multi_hot(dims) + [float(len(dims))] + _padded(perm, MAX_RANK)


def _triples_block(value: object, scales: tuple) -> list[float]:
    """Per-dim (a, b, c) triples (slice bounds, paddings) as three padded rows."""
    if not (isinstance(value, tuple) and all(isinstance(t, tuple) and len(t) == 3 for t in value)):
        return [0.0] * (3 * MAX_RANK)
    return [x for k, scale in enumerate(scales) for x in _padded([scale(t[k]) for t in value], MAX_RANK)]


def _slice_block(inst: Instruction) -> list[float]:
    return _triples_block(inst.attributes.get("slice"), (_log, _log, _log))


def _pad_block(inst: Instruction) -> list[float]:
    return _triples_block(inst.attributes.get("padding"), (_slog, _slog, _log))


def _node_block(inst: Instruction, is_output: bool) -> list[float]:
    return [float(is_output), float(inst.opcode == "parameter"), _log(len(inst.operands))]


def _tile_block(tile: Sequence[int] | None) -> list[float]:
    if tile is None:
        return [0.0] * (MAX_RANK + 3)
    sizes = [int(t) for t in tile]
    if not sizes or any(t <= 0 for t in sizes):
        raise ValueError(f"tile sizes must be a non-empty sequence of positive ints, got {tuple(tile)!r}")
    return [1.0] + _padded([_log(t) for t in sizes], MAX_RANK) + _sum_prod(sizes)


# ---------------------------------------------------------------------------------------------
# Public featurization
# ---------------------------------------------------------------------------------------------


def node_features(inst: Instruction, is_output: bool, tile: Sequence[int] | None = None) -> np.ndarray:
    """The fixed-layout feature vector of one kernel node (see the module docstring's table).

    Args:
      inst: the node's HLO instruction.
      is_output: whether the node's value leaves the kernel.
      tile: the kernel-level tile sizes, minor-to-major (reverse a Pallas ``block_shape``), or
      None for no tile.

    Returns:
      float32[NUM_NODE_FEATURES], all finite.
    """
    row = (
        _element_type_block(inst.shape)
        + _shape_block(inst.shape)
        + _layout_block(inst.shape)
        + _window_block(inst)
        + _conv_block(inst)
        + _dot_block(inst)
        + _dimensions_block(inst)
        + _slice_block(inst)
        + _pad_block(inst)
        + _node_block(inst, is_output)
        + _tile_block(tile)
    )
    assert len(row) == NUM_NODE_FEATURES, (len(row), NUM_NODE_FEATURES)
    return np.asarray(row, dtype=np.float32)


class KernelGraph(NamedTuple):
    """One kernel as arrays (``n`` nodes, ``m`` edges).

    Attributes:
      opcodes: int32[n], opcode ids (`OPCODE_VOCAB` for tpucost's own graphs).
      node_features: float32[n, F], one row per node (F = `NUM_NODE_FEATURES` for tpucost's own).
      senders: int32[m], the producer node of each edge.
      receivers: int32[m], the consumer node of each edge.
      name: the kernel's name (the HLO instruction name the profiler reports).
      kind: the kernel's kind (fusion kind or opcode).
    """

    opcodes: np.ndarray
    node_features: np.ndarray
    senders: np.ndarray
    receivers: np.ndarray
    name: str
    kind: str

    @property
    def num_nodes(self) -> int:
        return int(self.opcodes.shape[0])

    @property
    def num_edges(self) -> int:
        return int(self.senders.shape[0])


def featurize(kernel: Kernel, tile: Sequence[int] | None = None) -> KernelGraph:
    """The `KernelGraph` of `kernel`; `tile` (minor-to-major tile sizes) goes on every node."""
    outputs = set(kernel.outputs)
    feats = [node_features(node, i in outputs, tile) for i, node in enumerate(kernel.nodes)]
    edges = np.asarray(kernel.edges, dtype=np.int32).reshape(-1, 2)
    return KernelGraph(
        opcodes=np.asarray([opcode_id(n.opcode) for n in kernel.nodes], dtype=np.int32),
        node_features=np.stack(feats) if feats else np.zeros((0, NUM_NODE_FEATURES), np.float32),
        senders=edges[:, 0].copy(),
        receivers=edges[:, 1].copy(),
        name=kernel.name,
        kind=kernel.kind,
    )


# ---------------------------------------------------------------------------------------------
# Batching
# ---------------------------------------------------------------------------------------------

#: Bucket sizes (powers of two) for total nodes, edges and graphs of a padded batch.
DEFAULT_NODE_BUCKETS: tuple[int, ...] = tuple(2**k for k in range(4, 21))
DEFAULT_EDGE_BUCKETS: tuple[int, ...] = tuple(2**k for k in range(4, 22))
DEFAULT_GRAPH_BUCKETS: tuple[int, ...] = tuple(2**k for k in range(1, 15))


def to_graphs_tuple(
    graphs: Sequence[KernelGraph], targets: Sequence[float] | np.ndarray | None = None
) -> jraph.GraphsTuple:
    """Concatenate kernel graphs into one (unpadded) `jraph.GraphsTuple` of numpy arrays.

    Args:
      graphs: G kernel graphs with N nodes and M edges in all.
      targets: G labels (e.g. log runtimes), or None for zeros.

    Returns:
      GraphsTuple with ``nodes = {"opcode": int32[N], "features": float32[N, F]}``,
      ``edges = None``, ``senders``/``receivers`` int32[M] (offset into the batch),
      ``globals`` float32[G, 1] (the targets), ``n_node``/``n_edge`` int32[G].
    """
    if not graphs:
        raise ValueError("to_graphs_tuple needs at least one graph")
    widths = {g.node_features.shape[1] for g in graphs}
    if len(widths) != 1:
        raise ValueError(f"graphs mix feature widths {sorted(widths)}: one batch must use one feature layout")
    n_node = np.array([g.num_nodes for g in graphs], dtype=np.int32)
    offsets = np.concatenate([[0], np.cumsum(n_node)[:-1]]).astype(np.int32)
    if targets is None:
        globals_ = np.zeros((len(graphs), 1), np.float32)
    else:
        globals_ = np.asarray(targets, dtype=np.float32).reshape(-1, 1)
        if globals_.shape[0] != len(graphs):
            raise ValueError(f"got {globals_.shape[0]} targets for {len(graphs)} graphs")
    return jraph.GraphsTuple(
        nodes={
            "opcode": np.concatenate([g.opcodes for g in graphs]).astype(np.int32),
            "features": np.concatenate([g.node_features for g in graphs]).astype(np.float32),
        },
        edges=None,
        senders=np.concatenate([g.senders + o for g, o in zip(graphs, offsets, strict=True)]).astype(
            np.int32
        ),
        receivers=np.concatenate([g.receivers + o for g, o in zip(graphs, offsets, strict=True)]).astype(
            np.int32
        ),
        globals=globals_,
        n_node=n_node,
        n_edge=np.array([g.num_edges for g in graphs], dtype=np.int32),
    )


def bucket(needed: int, buckets: Sequence[int], what: str) -> int:
    """The smallest of ``buckets`` that is >= ``needed``.

    Raises:
      ValueError: none is large enough; the message says ``needed``, ``what`` (e.g. "nodes") and
        the largest bucket.
    """
    for size in sorted(buckets):
        if size >= needed:
            return int(size)
    raise ValueError(f"a batch needs {needed} {what} but the largest {what} bucket is {max(buckets, default=0)}; "
                     "pass larger buckets or a smaller batch")  # fmt: skip


def shared_buckets(chunks: Sequence[Sequence[KernelGraph]]) -> tuple[list[int], list[int], list[int]]:
    """One (node, edge, graph) bucket size each that fits every non-empty chunk, padding included.

    For stacking one padded batch per device: pass the result to `pad_to_bucket` for each chunk.
    Returns single-element lists (``[Np], [Mp], [Gp]``) of the default buckets.
    """
    real = [c for c in chunks if len(c)]
    if not real:
        raise ValueError("shared_buckets needs at least one non-empty chunk")
    nodes = max(sum(g.num_nodes for g in c) for c in real) + 1
    edges = max(sum(g.num_edges for g in c) for c in real)
    graphs = max(max(len(c) for c in real) + 1, 2)
    return (
        [bucket(nodes, DEFAULT_NODE_BUCKETS, "nodes")],
        [bucket(edges, DEFAULT_EDGE_BUCKETS, "edges")],
        [bucket(graphs, DEFAULT_GRAPH_BUCKETS, "graphs")],
    )


def pad_to_bucket(
    graphs_tuple: jraph.GraphsTuple,
    node_buckets: Sequence[int] = DEFAULT_NODE_BUCKETS,
    edge_buckets: Sequence[int] = DEFAULT_EDGE_BUCKETS,
    graph_buckets: Sequence[int] = DEFAULT_GRAPH_BUCKETS,
) -> tuple[jraph.GraphsTuple, np.ndarray, np.ndarray]:
    """Pad a batch to the smallest buckets that fit, with `jraph.pad_with_graphs`.

    There is always at least one padding graph holding at least one padding node (jraph's
    padding graph); padding nodes have opcode 0 and all-zero features, padding edges join
    padding nodes, padding globals are 0.

    Args:
      graphs_tuple: an unpadded batch of G graphs, N nodes, M edges (`to_graphs_tuple`).
      node_buckets, edge_buckets, graph_buckets: allowed padded sizes.

    Returns:
      (padded, graph_mask, node_mask): padded has Gp >= G + 1 graphs, Np >= N + 1 nodes and
      Mp >= M edges; graph_mask bool[Gp] and node_mask bool[Np] are True for the real ones.

    Raises:
      ValueError: no bucket is large enough.
    """
    n_graph = int(graphs_tuple.n_node.shape[0])
    n_node = int(np.sum(graphs_tuple.n_node))
    n_edge = int(np.sum(graphs_tuple.n_edge))
    pad_nodes = bucket(n_node + 1, node_buckets, "nodes")
    pad_edges = bucket(n_edge, edge_buckets, "edges")
    pad_graphs = bucket(max(n_graph + 1, 2), graph_buckets, "graphs")
    padded = jraph.pad_with_graphs(graphs_tuple, pad_nodes, pad_edges, pad_graphs)
    padded = padded._replace(
        senders=np.asarray(padded.senders, dtype=np.int32),
        receivers=np.asarray(padded.receivers, dtype=np.int32),
        n_node=np.asarray(padded.n_node, dtype=np.int32),
        n_edge=np.asarray(padded.n_edge, dtype=np.int32),
    )
    graph_mask = np.arange(pad_graphs) < n_graph
    node_mask = np.arange(pad_nodes) < n_node
    return padded, graph_mask, node_mask


def batches(
    graphs: Sequence[KernelGraph],
    targets: Sequence[float] | np.ndarray | None,
    batch_size: int,
    rng: np.random.Generator | None = None,
    node_buckets: Sequence[int] = DEFAULT_NODE_BUCKETS,
    edge_buckets: Sequence[int] = DEFAULT_EDGE_BUCKETS,
    graph_buckets: Sequence[int] = DEFAULT_GRAPH_BUCKETS,
) -> Iterator[tuple[jraph.GraphsTuple, np.ndarray, np.ndarray]]:
    """Padded batches of `batch_size` graphs (the last may be smaller), one pass over the data.

    Args:
      graphs: the kernel graphs.
      targets: one label per graph, or None.
      batch_size: graphs per batch.
      rng: shuffles the order when given; otherwise the input order is kept.
      node_buckets, edge_buckets, graph_buckets: see `pad_to_bucket`.

    Yields:
      (padded GraphsTuple, graph_mask bool[Gp], node_mask bool[Np]) as from `pad_to_bucket`.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    labels = None if targets is None else np.asarray(targets, dtype=np.float32).reshape(-1)
    if labels is not None and labels.shape[0] != len(graphs):
        raise ValueError(f"got {labels.shape[0]} targets for {len(graphs)} graphs")
    order = rng.permutation(len(graphs)) if rng is not None else np.arange(len(graphs))
    for start in range(0, len(graphs), batch_size):
        idx = order[start : start + batch_size]
        batch = to_graphs_tuple([graphs[i] for i in idx], None if labels is None else labels[idx])
        yield pad_to_bucket(batch, node_buckets, edge_buckets, graph_buckets)
