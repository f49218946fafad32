"""A family written by others in a third library: graph networks built with jraph's model zoo.

jraph (DeepMind's graph-network library, a core dependency of this package: the cost model itself
is a jraph GraphSAGE) ships the message-passing layers of several papers in ``jraph._src.models``:
the graph convolution of Kipf & Welling (symmetric degree normalisation), graph attention
(segment softmax over each node's incoming edges), the full graph network of Battaglia et al.
(edge, node and global updates), the interaction network and deep sets. Their gathers,
segment reductions, degree normalisation and per-graph broadcasts are jraph's code, not this
project's; only the update functions (dense layers) are written here. One family:

``jraph_gnn``
    a random jraph model (``gcn``, ``gat``, ``graph_network``, ``interaction_network`` or
    ``deep_sets``), 1-3 layers, on a batch of random graphs, read out by a per-graph mean of the
    node features and a dense layer to one value per graph.

No extra dependency: jraph is installed with the package.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import jraph
import numpy as np

from tpucost.experiments.programs import blocks
from tpucost.experiments.programs.blocks import (
    WRITTEN_BY_OTHERS_GROUP,
    Batch,
    Model,
    Params,
    ProgramFamily,
    Variant,
)

__all__ = ["JRAPH_FAMILIES", "JRAPH_MODELS"]

#: The jraph models the family draws from.
JRAPH_MODELS = ("gcn", "gat", "graph_network", "interaction_network", "deep_sets")

_ACTIVATIONS = {"relu": jax.nn.relu, "gelu": jax.nn.gelu, "tanh": jnp.tanh}


def _hparams(rng: np.random.Generator) -> dict[str, Any]:
    """The family's hyperparameters (JSON values): model, sizes, layers, dtype."""
    hp = {
        "model": blocks.pick(rng, list(JRAPH_MODELS)),
        "graphs": blocks.pick(rng, [1, 4, 16]),
        "nodes_per_graph": blocks.pick(rng, [16, 64, 256]),
        "edges_per_node": blocks.pick(rng, [2, 4, 8]),
        "dim": blocks.pick(rng, [8, 32, 64, 128]),
        "layers": blocks.pick(rng, [1, 2, 3]),
        "activation": blocks.pick(rng, list(_ACTIVATIONS)),
        "dtype": blocks.random_dtype(rng),
    }
    # Only the hyperparameters the model uses: two programs with equal hparams are twins.
    if hp["model"] == "gat":
        hp["heads"] = blocks.pick(rng, [1, 2, 4])
    if hp["model"] == "gcn":
        hp["self_edges"] = blocks.pick(rng, [True, False])
    return hp


def _layer_params(rng: np.random.Generator, hp: dict[str, Any]) -> Params:
    """One layer's dense weights; which ones depends on the model (feature width ``dim``)."""
    d, dt = hp["dim"], hp["dtype"]
    shapes = {
        "gcn": {"node": (d, d)},
        "gat": {"query": (d, d), "logit": (2 * d // hp.get("heads", 1), 1)},
        "graph_network": {"edge": (4 * d, d), "node": (4 * d, d), "global": (3 * d, d)},
        "interaction_network": {"edge": (3 * d, d), "node": (2 * d, d)},
        "deep_sets": {"node": (2 * d, d), "global": (d, d)},
    }[hp["model"]]
    return {name: blocks.dense_init(rng, n_in, n_out, dt) for name, (n_in, n_out) in shapes.items()}


def _layer(hp: dict[str, Any], q: Params) -> Callable[[jraph.GraphsTuple], jraph.GraphsTuple]:
    """One jraph layer whose update functions are the dense layers ``q``."""
    act = _ACTIVATIONS[hp["activation"]]

    def mlp(name: str) -> Callable[..., jax.Array]:
        return lambda *xs: act(blocks.dense(q[name], jnp.concatenate(xs, axis=-1)))

    model = hp["model"]
    if model == "gcn":
        return jraph.GraphConvolution(mlp("node"), add_self_edges=hp["self_edges"])
    if model == "gat":

        def query(nodes: jax.Array) -> jax.Array:  # (n, d) -> (n, heads, d / heads)
            return blocks.dense(q["query"], nodes).reshape(nodes.shape[0], hp["heads"], -1)

        def logit(sent: jax.Array, received: jax.Array, edges: jax.Array) -> jax.Array:
            return jax.nn.leaky_relu(blocks.dense(q["logit"], jnp.concatenate([sent, received], -1)))

        return jraph.GAT(query, logit)
    if model == "graph_network":
        return jraph.GraphNetwork(mlp("edge"), mlp("node"), mlp("global"))
    if model == "interaction_network":
        return jraph.InteractionNetwork(mlp("edge"), mlp("node"))
    return jraph.DeepSets(mlp("node"), mlp("global"))


def jraph_gnn(rng: np.random.Generator) -> Model:
    """A random jraph model zoo network on a batch of random graphs (see the module docstring)."""
    hp = _hparams(rng)
    g, d, dt = hp["graphs"], hp["dim"], hp["dtype"]
    n = g * hp["nodes_per_graph"]
    e = n * hp["edges_per_node"]
    # Edges stay inside their graph (sender and receiver are drawn from the same graph's nodes)
    # and are ordered by graph, as jraph's ``n_edge`` counts them.
    graph_of_edge = np.sort(rng.integers(0, g, e))
    first = graph_of_edge * hp["nodes_per_graph"]
    params = {f"layer{i}": _layer_params(rng, hp) for i in range(hp["layers"])}
    params["readout"] = blocks.dense_init(rng, d, 1, dt)
    batch = {
        "nodes": blocks.normal(rng, (n, d), dt),
        "edges": blocks.normal(rng, (e, d), dt),
        "globals": blocks.normal(rng, (g, d), dt),
        "senders": blocks.ints(first + rng.integers(0, hp["nodes_per_graph"], e)),
        "receivers": blocks.ints(first + rng.integers(0, hp["nodes_per_graph"], e)),
        "n_node": blocks.ints(np.full(g, hp["nodes_per_graph"])),
        "n_edge": blocks.ints(np.bincount(graph_of_edge, minlength=g)),
        "target": blocks.normal(rng, (g, 1), dt),
    }

    def apply(p: Params, b: Batch, v: Variant) -> jax.Array:
        graph = jraph.GraphsTuple(
            nodes=b["nodes"],
            edges=b["edges"],
            globals=b["globals"],
            senders=b["senders"],
            receivers=b["receivers"],
            n_node=b["n_node"],
            n_edge=b["n_edge"],
        )
        for i in range(hp["layers"]):  # GAT's default node update joins the heads back to d
            graph = _layer(hp, p[f"layer{i}"])(graph)
        node_graph = jnp.repeat(jnp.arange(g), b["n_node"], total_repeat_length=n)
        pooled = jax.ops.segment_sum(graph.nodes, node_graph, g) / hp["nodes_per_graph"]
        return blocks.dense(p["readout"], pooled)

    return Model(hp, params, batch, apply)


#: The registry records of the jraph families, by name (written by others).
JRAPH_FAMILIES: dict[str, ProgramFamily] = {
    f.name: f for f in (ProgramFamily("jraph_gnn", jraph_gnn, WRITTEN_BY_OTHERS_GROUP, written_here=False),)
}
