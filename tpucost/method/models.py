"""Learned cost models in Flax NNX: GraphSAGE (the paper's model), an LSTM baseline, and the tile model.

The kernel models (`GraphSAGE`, `LSTMBaseline`) read one padded batch of kernel graphs
(`tpucost.method.features.pad_to_bucket`) and return one number per graph: the predicted
log(runtime_ns), standardised with the training set's mean and std (the kernel task,
`tpucost.method.tasks.kernel`, un-standardises). The tile model (`TileGraphSAGE`) runs the same
GraphSAGE graph side (`SAGEEncoder`, shared, not copied) and scores one configuration per row.
Which model `make_model` builds is named by the task (``task="kernel"`` or ``"tile"``), never
inferred from the config.

Shapes used in the docstrings: ``Np`` padded nodes, ``Mp`` padded edges, ``Gp`` padded graphs,
``F`` node features (``config.features.num_node_features``), ``H`` hidden width, ``L`` padded sequence length.

Padding never leaks into real graphs: padding edges join padding nodes only (jraph's convention),
pooling uses the node mask, and the LSTM reads each kernel's own nodes.

Each kernel model is its kernel embedding (`GraphSAGE.pool` of `SAGEEncoder.embed_nodes`,
`LSTMBaseline.final_state`) and a Dense head; the lab's models that read a device descriptor
(``lab.device_models``, outside the package) put the device between the two.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import jraph
import numpy as np
from flax import nnx

from tpucost.compat import ModuleDict, ModuleList
from tpucost.method import features

__all__ = [
    "ModelConfig",
    "SAGEEncoder",
    "GraphSAGE",
    "LSTMBaseline",
    "TileGraphSAGE",
    "make_model",
    "node_graph_ids",
    "sequence_index",
    "DEFAULT_LENGTH_BUCKETS",
    "TASKS",
]

_REDUCES = ("sum", "mean", "max")
_NEIGHBOURS = ("both", "operands", "users")
_CONFIG_JOINS = ("late", "early")
#: The tasks `make_model` builds a model for (`tpucost.method.train.Task.name`).
TASKS: tuple[str, ...] = ("kernel", "tile")

#: Allowed padded sequence lengths for the LSTM's dense [Gp, L] node layout.
DEFAULT_LENGTH_BUCKETS: tuple[int, ...] = tuple(2**k for k in range(3, 17))


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """Hyperparameters of a cost model.

    Attributes:
      kind: the kernel model: "gnn" (GraphSAGE) or "lstm" (the baseline over nodes in topological
      order). The tile task's model is always GraphSAGE-based, so its configs say "gnn"; whether
      the kernel or the tile model is built is the task's choice (`make_model`), not the config's.
      opcode_embed: width of the opcode embedding.
      hidden: width H of node embeddings and of the LSTM state.
      num_layers: K, the number of GraphSAGE layers (ignored by the LSTM).
      reduce: neighbour aggregation, "sum" | "mean" | "max".
      neighbours: which neighbours a node aggregates: "operands" (producers, incoming edges),
      "users" (consumers, outgoing edges) or "both" (default: separate f'_k per direction, the
      two aggregates concatenated, so information flows both ways in K layers and the model
      can tell an op's inputs from its outputs).
      pooling: the per-graph poolings concatenated into the kernel embedding, any non-empty
      subset of ("sum", "mean", "max"). Default ("sum", "max"): sum keeps the kernel's size,
      max picks out the dominant op.
      features: the `tpucost.method.features.FeatureSpec` of the graphs the model reads (F, the node
      feature width, and the opcode vocabulary size come from it); default tpucost's own.
      dropout: dropout rate on node embeddings while training.
      config_join: where a configuration's features join the graph (tile model only; the kernel
      models ignore it): "late" (after pooling) or "early" (at every node).
    """

    kind: str = "gnn"
    opcode_embed: int = 32
    hidden: int = 64
    num_layers: int = 3
    reduce: str = "sum"
    neighbours: str = "both"
    pooling: tuple[str, ...] = ("sum", "max")
    features: features.FeatureSpec = features.TPUCOST_FEATURES
    dropout: float = 0.0
    config_join: str = "late"

    def __post_init__(self):
        if self.kind not in ("gnn", "lstm"):
            raise ValueError(f"kind must be 'gnn' or 'lstm', got {self.kind!r}")
        if self.reduce not in _REDUCES:
            raise ValueError(f"reduce must be one of {_REDUCES}, got {self.reduce!r}")
        if self.neighbours not in _NEIGHBOURS:
            raise ValueError(f"neighbours must be one of {_NEIGHBOURS}, got {self.neighbours!r}")
        pooling = tuple(self.pooling)
        object.__setattr__(self, "pooling", pooling)
        if not pooling or any(p not in _REDUCES for p in pooling) or len(set(pooling)) != len(pooling):
            raise ValueError(f"pooling must be a non-empty subset of {_REDUCES}, got {pooling!r}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")
        if self.config_join not in _CONFIG_JOINS:
            raise ValueError(f"config_join must be one of {_CONFIG_JOINS}, got {self.config_join!r}")
        if not isinstance(self.features, features.FeatureSpec):
            raise ValueError(
                f"features must be a tpucost.method.features.FeatureSpec, got {type(self.features).__name__}"
            )

    def to_dict(self) -> dict:
        """A JSON-ready dict (`from_dict` reads it back)."""
        d = dataclasses.asdict(self)
        d["pooling"] = list(self.pooling)
        d["features"] = self.features.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: dict) -> ModelConfig:
        """Inverse of `to_dict`. A dict written before feature specs existed (``num_features`` and
        ``num_opcodes`` instead of ``features``) maps to `TPUCOST_FEATURES` when its widths are
        tpucost's, else to a spec of those widths with the layout ``"unknown"``."""
        d = dict(d)
        if "pooling" in d:
            d["pooling"] = tuple(d["pooling"])
        if "features" in d:
            d["features"] = features.FeatureSpec.from_dict(d["features"])
        elif "num_features" in d or "num_opcodes" in d:
            d["features"] = _legacy_spec(d.pop("num_features", None), d.pop("num_opcodes", None))
        return cls(**d)


def _legacy_spec(num_features: int | None, num_opcodes: int | None) -> features.FeatureSpec:
    """The spec of an old config that gave only the widths (None: tpucost's)."""
    own = features.TPUCOST_FEATURES
    spec = features.FeatureSpec(
        "unknown", int(num_features or own.num_node_features), int(num_opcodes or own.num_opcodes)
    )
    return own if dataclasses.replace(spec, layout=own.layout) == own else spec


# ---------------------------------------------------------------------------------------------
# Segment helpers
# ---------------------------------------------------------------------------------------------


def node_graph_ids(n_node: jax.Array, num_nodes: int) -> jax.Array:
    """int32[Np]: the graph of each node, from ``n_node`` int32[Gp] (sums to Np)."""
    return jnp.repeat(jnp.arange(n_node.shape[0]), n_node, total_repeat_length=num_nodes)


def _segment_reduce(
    data: jax.Array, segment_ids: jax.Array, num_segments: int, counts: jax.Array, how: str
) -> jax.Array:
    """Reduce rows of ``data`` [E, H] into [S, H]; empty segments give 0 for every ``how``."""
    if how == "sum":
        return jax.ops.segment_sum(data, segment_ids, num_segments)
    if how == "mean":
        total = jax.ops.segment_sum(data, segment_ids, num_segments)
        return total / jnp.maximum(counts, 1.0)[:, None]
    out = jax.ops.segment_max(data, segment_ids, num_segments)
    return jnp.where(counts[:, None] > 0, out, 0.0)


def _masked_pool(
    h: jax.Array, graph_ids: jax.Array, node_mask: jax.Array, num_graphs: int, how: str
) -> jax.Array:
    """Pool node embeddings h [Np, H] over the REAL nodes of each graph -> [Gp, H]."""
    mask = node_mask.astype(h.dtype)
    counts = jax.ops.segment_sum(mask, graph_ids, num_graphs)
    if how == "max":
        h = jnp.where(node_mask[:, None], h, -jnp.inf)
    else:
        h = h * mask[:, None]
    return _segment_reduce(h, graph_ids, num_graphs, counts, how)


# ---------------------------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------------------------


class _NodeEncoder(nnx.Module):
    """eps0_i = relu(Dense(concat(embed(opcode_i), features_i))): int32[Np], float32[Np, F] -> [Np, H]."""

    def __init__(self, config: ModelConfig, rngs: nnx.Rngs):
        self.embed = nnx.Embed(config.features.num_opcodes, config.opcode_embed, rngs=rngs)
        self.dense = nnx.Linear(
            config.opcode_embed + config.features.num_node_features, config.hidden, rngs=rngs
        )

    def __call__(self, opcode: jax.Array, feats: jax.Array) -> jax.Array:
        opcode = jnp.clip(opcode, 0, self.embed.num_embeddings - 1)
        x = jnp.concatenate([self.embed(opcode), feats.astype(jnp.float32)], axis=-1)
        return nnx.relu(self.dense(x))


class _SAGELayer(nnx.Module):
    """One GraphSAGE layer: eps_k_i = l2norm(relu(f_k(concat(eps_i, REDUCE_j relu(f'_k(eps_j))))))."""

    def __init__(self, config: ModelConfig, rngs: nnx.Rngs):
        h = config.hidden
        self.reduce = config.reduce
        self.neighbours = config.neighbours
        dirs = ("operands", "users") if config.neighbours == "both" else (config.neighbours,)
        self.dirs = dirs
        self.msg = ModuleDict({d: nnx.Linear(h, h, rngs=rngs) for d in dirs})
        self.combine = nnx.Linear(h * (1 + len(dirs)), h, rngs=rngs)

    def __call__(self, h: jax.Array, senders: jax.Array, receivers: jax.Array) -> jax.Array:
        """h [Np, H], senders/receivers int32[Mp] (producer -> consumer) -> [Np, H]."""
        n = h.shape[0]
        ones = jnp.ones(senders.shape, h.dtype)
        parts = [h]
        for d in self.dirs:
            m = nnx.relu(self.msg[d](h))
            # operands of i: edges j -> i (gather at senders, scatter to receivers); users: reverse.
            src, dst = (senders, receivers) if d == "operands" else (receivers, senders)
            deg = jax.ops.segment_sum(ones, dst, n)
            parts.append(_segment_reduce(m[src], dst, n, deg, self.reduce))
        out = nnx.relu(self.combine(jnp.concatenate(parts, axis=-1)))
        return out * jax.lax.rsqrt(jnp.maximum(jnp.sum(out * out, axis=-1, keepdims=True), 1e-12))


class SAGEEncoder(nnx.Module):
    """The GraphSAGE graph side, shared by the kernel model (`GraphSAGE`) and the tile model
    (`TileGraphSAGE`): node inputs eps_0 (``encoder``), K layers (``layers``, with ``dropout``
    before each while training), and the masked poolings of the real nodes of each graph.

    A subclass adds its own head. The attribute names ``encoder``, ``layers`` and ``dropout`` are
    the top of both models' parameter trees, so the saved checkpoints rely on them.
    """

    def __init__(self, config: ModelConfig, rngs: nnx.Rngs):
        self.config = config
        self.encoder = _NodeEncoder(config, rngs)
        self.layers = ModuleList([_SAGELayer(config, rngs) for _ in range(config.num_layers)])
        self.dropout = nnx.Dropout(config.dropout)

    def propagate(
        self, h: jax.Array, graph: jraph.GraphsTuple, dropout_key: jax.Array | None = None
    ) -> jax.Array:
        """The K layers on input node embeddings h float32[Np, H] -> eps_K, float32[Np, H]."""
        for k, layer in enumerate(self.layers):
            if dropout_key is not None and self.config.dropout > 0:
                h = self.dropout(h, deterministic=False, rngs=jax.random.fold_in(dropout_key, k))
            h = layer(h, graph.senders, graph.receivers)
        return h

    def embed_nodes(self, graph: jraph.GraphsTuple, *, dropout_key: jax.Array | None = None) -> jax.Array:
        """Node embeddings eps_K, float32[Np, H]: `propagate` of the node inputs eps_0."""
        h0 = self.encoder(graph.nodes["opcode"], graph.nodes["features"])
        return self.propagate(h0, graph, dropout_key)

    def pool(self, h: jax.Array, graph: jraph.GraphsTuple, node_mask: jax.Array) -> jax.Array:
        """Kernel embeddings float32[Gp, H * len(pooling)]: each of ``config.pooling`` over the real
        nodes of each graph, concatenated."""
        num_graphs = graph.n_node.shape[0]
        gid = node_graph_ids(graph.n_node, h.shape[0])
        return jnp.concatenate(
            [_masked_pool(h, gid, node_mask, num_graphs, how) for how in self.config.pooling], axis=-1
        )


class GraphSAGE(SAGEEncoder):
    """The paper's GraphSAGE kernel model: `SAGEEncoder` (node inputs, K layers, pooling), then a
    Dense head from the kernel embedding to one number.

    ``model(graph, node_mask, graph_mask)`` with a padded `jraph.GraphsTuple` (nodes
    ``{"opcode": int32[Np], "features": float32[Np, F]}``, senders/receivers int32[Mp],
    n_node int32[Gp]) and masks bool[Np], bool[Gp] returns float32[Gp]: standardised
    log(runtime_ns) per graph (0 for padding graphs).

    Taught in notebook 03, section 1 (`notebooks/03_train_cost_model.ipynb`: one layer, the
    pooling and the head written out by hand against this class).
    """

    def __init__(self, config: ModelConfig, rngs: nnx.Rngs):
        super().__init__(config, rngs)  # encoder, layers, dropout
        self.head = nnx.Linear(config.hidden * len(config.pooling), 1, rngs=rngs)

    def __call__(
        self,
        graph: jraph.GraphsTuple,
        node_mask: jax.Array,
        graph_mask: jax.Array,
        seq_index: jax.Array | None = None,
        *,
        dropout_key: jax.Array | None = None,
    ) -> jax.Array:
        """Predictions float32[Gp]; ``seq_index`` is ignored (LSTM only); ``dropout_key`` enables dropout."""
        del seq_index
        h = self.embed_nodes(graph, dropout_key=dropout_key)  # [Np, H]
        pooled = self.pool(h, graph, node_mask)  # [Gp, H * len(pooling)]
        return jnp.where(graph_mask, self.head(pooled)[:, 0], 0.0)


class LSTMBaseline(nnx.Module):
    """LSTM over each kernel's node embeddings in topological order; final state -> Dense(1).

    Needs ``seq_index`` int32[Gp, L] from `sequence_index` (the node ids of each graph in order,
    built in numpy per batch); the prediction reads the LSTM output at each graph's last real
    node, so padding positions (after it) cannot leak (`final_state`).
    """

    def __init__(self, config: ModelConfig, rngs: nnx.Rngs):
        self.config = config
        self.encoder = _NodeEncoder(config, rngs)
        self.dropout = nnx.Dropout(config.dropout)
        self.cell = nnx.OptimizedLSTMCell(config.hidden, config.hidden, rngs=rngs)
        self.head = nnx.Linear(config.hidden, 1, rngs=rngs)

    def __call__(
        self,
        graph: jraph.GraphsTuple,
        node_mask: jax.Array,
        graph_mask: jax.Array,
        seq_index: jax.Array | None = None,
        *,
        dropout_key: jax.Array | None = None,
    ) -> jax.Array:
        """Predictions float32[Gp] from seq_index int32[Gp, L]."""
        last, has_nodes = self.final_state(graph, node_mask, seq_index, dropout_key)
        return jnp.where(graph_mask & has_nodes, self.head(last)[:, 0], 0.0)

    def final_state(
        self,
        graph: jraph.GraphsTuple,
        node_mask: jax.Array,
        seq_index: jax.Array | None,
        dropout_key: jax.Array | None = None,
    ) -> tuple[jax.Array, jax.Array]:
        """The LSTM's output at each graph's last real node, float32[Gp, H], and whether the graph
        has a real node, bool[Gp]."""
        if seq_index is None:
            raise ValueError("LSTMBaseline needs seq_index (see tpucost.method.models.sequence_index)")
        h = self.encoder(graph.nodes["opcode"], graph.nodes["features"])
        if dropout_key is not None and self.config.dropout > 0:
            h = self.dropout(h, deterministic=False, rngs=dropout_key)
        seq = h[seq_index]  # [Gp, L, H]
        zeros = jnp.zeros((seq.shape[0], self.config.hidden), seq.dtype)
        # A plain lax.scan over time (not nnx.RNN, whose nnx.scan cannot run under the trainer's
        # vmap over devices); the model stays a pure function of its params.
        _, out = jax.lax.scan(lambda carry, x: self.cell(carry, x), (zeros, zeros), jnp.swapaxes(seq, 0, 1))
        out = jnp.swapaxes(out, 0, 1)  # [Gp, L, H]
        num_graphs = graph.n_node.shape[0]
        gid = node_graph_ids(graph.n_node, h.shape[0])
        lengths = jax.ops.segment_sum(node_mask.astype(jnp.int32), gid, num_graphs)
        last = out[jnp.arange(num_graphs), jnp.clip(lengths - 1, 0, seq.shape[1] - 1)]
        return last, lengths > 0


def sequence_index(
    n_node: np.ndarray, node_mask: np.ndarray, length_buckets: Sequence[int] = DEFAULT_LENGTH_BUCKETS
) -> np.ndarray:
    """Dense per-graph node layout for the LSTM, built in numpy (so shapes come from buckets).

    Args:
      n_node: int[Gp], nodes per padded graph (nodes of graph g are contiguous, in topological order).
      node_mask: bool[Np], True for real nodes.
      length_buckets: allowed L; the smallest >= the longest real graph is used.

    Returns:
      int32[Gp, L]: row g lists graph g's real node ids in order, then repeats its last real node
      (or node 0 for graphs with no real nodes).
    """
    n_node = np.asarray(n_node, dtype=np.int64)
    node_mask = np.asarray(node_mask, dtype=bool)
    offsets = np.concatenate([[0], np.cumsum(n_node)[:-1]])
    gid = np.repeat(np.arange(len(n_node)), n_node)
    lengths = np.bincount(gid[node_mask[: len(gid)]], minlength=len(n_node))
    L = features.bucket(int(lengths.max(initial=1)), length_buckets, "sequence length")
    pos = np.minimum(np.arange(L)[None, :], np.maximum(lengths, 1)[:, None] - 1)
    idx = offsets[:, None] + pos
    idx = np.where(lengths[:, None] > 0, idx, 0)
    return idx.astype(np.int32)


class TileGraphSAGE(SAGEEncoder):
    """The paper's tile-size model: a kernel's graph plus one feature vector per configuration.

    ``model(graph, node_mask, graph_mask, config_features, config_mask)`` returns float32[Gp, Cp]:
    one cost score per (kernel, configuration), higher = slower (0 for padding). The graph side
    is the same GraphSAGE encoder as the kernel model; the configuration features
    ``float32[Gp, Cp, Fc]`` (``Fc = config.features.num_config_features``) join it

    * ``config.config_join == "late"``: after pooling: the kernel embedding (computed once) is
      concatenated with each configuration's encoding, then an MLP scores each pair;
    * ``"early"``: at every node: each configuration's encoding is added to every node's input
      embedding and the GraphSAGE layers run once per configuration (Cp times the work).

    Taught in notebook 04, section 3 (`notebooks/04_tile_selection.ipynb`).
    """

    def __init__(self, config: ModelConfig, rngs: nnx.Rngs):
        width = config.features.num_config_features
        if width < 1:
            raise ValueError("TileGraphSAGE needs config.features.num_config_features >= 1")
        super().__init__(config, rngs)  # encoder, layers, dropout: the kernel model's graph side
        self.config_encoder = nnx.Linear(width, config.hidden, rngs=rngs)
        pooled = config.hidden * len(config.pooling)
        self.mlp = nnx.Linear(pooled + config.hidden, config.hidden, rngs=rngs)
        self.head = nnx.Linear(config.hidden, 1, rngs=rngs)

    def __call__(
        self,
        graph: jraph.GraphsTuple,
        node_mask: jax.Array,
        graph_mask: jax.Array,
        config_features: jax.Array,
        config_mask: jax.Array,
        *,
        dropout_key: jax.Array | None = None,
    ) -> jax.Array:
        """Cost scores float32[Gp, Cp] from config_features float32[Gp, Cp, Fc], config_mask bool[Gp, Cp]."""
        h0 = self.encoder(graph.nodes["opcode"], graph.nodes["features"])
        cfg = nnx.relu(self.config_encoder(config_features.astype(jnp.float32)))  # [Gp, Cp, H]
        if self.config.config_join == "early":
            gid = node_graph_ids(graph.n_node, h0.shape[0])

            def pooled_with(c: jax.Array) -> jax.Array:  # c [Gp, H]: one configuration per graph
                return self.pool(self.propagate(h0 + c[gid], graph, dropout_key), graph, node_mask)

            pooled = jax.vmap(pooled_with, in_axes=1, out_axes=1)(cfg)  # [Gp, Cp, P]
        else:
            pooled = self.pool(self.propagate(h0, graph, dropout_key), graph, node_mask)  # [Gp, P]
            pooled = jnp.broadcast_to(pooled[:, None, :], (*cfg.shape[:2], pooled.shape[-1]))
        joint = nnx.relu(self.mlp(jnp.concatenate([pooled, cfg], axis=-1)))
        scores = self.head(joint)[..., 0]
        return jnp.where(graph_mask[:, None] & config_mask, scores, 0.0)


def make_model(
    config: ModelConfig, rngs: nnx.Rngs | int = 0, task: str = "kernel"
) -> GraphSAGE | LSTMBaseline | TileGraphSAGE:
    """A freshly initialised model of ``task`` for ``config`` (``rngs`` an nnx.Rngs or a seed).

    How the model is chosen: the task names it, nothing is inferred from the config's widths.

    * ``task="kernel"``: `GraphSAGE` when ``config.kind == "gnn"``, `LSTMBaseline` when ``"lstm"``;
      a kernel model reads no configuration features, so ``config.features`` must have none.
    * ``task="tile"``: `TileGraphSAGE`; ``config.kind`` must be ``"gnn"`` (its graph side is
      GraphSAGE), as every saved tile config says.

    `tpucost.method.train.train_and_evaluate` passes its task's ``name``, and
    `tpucost.method.checkpoint.load` the ``"task"`` saved in the checkpoint's metadata.
    """
    if isinstance(rngs, int):
        rngs = nnx.Rngs(rngs)
    if task == "tile":
        if config.kind != "gnn":
            raise ValueError(f"the tile model is a GraphSAGE model (kind 'gnn'), got kind {config.kind!r}")
        return TileGraphSAGE(config, rngs)
    if task != "kernel":
        raise ValueError(f"task must be one of {TASKS}, got {task!r}")
    if config.features.num_config_features > 0:
        raise ValueError(
            f"a kernel model reads no configuration features, but the feature spec has "
            f"{config.features.num_config_features}; the tile model is make_model(..., task='tile')"
        )
    return GraphSAGE(config, rngs) if config.kind == "gnn" else LSTMBaseline(config, rngs)
