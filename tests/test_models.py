"""Tests of tpucost.method.models on small synthetic kernel graphs."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import rand_graph

from tpucost.method import features, models
from tpucost.method.models import ModelConfig

pytestmark = pytest.mark.core  # also run on Colab's versions (make test-colab)

F = features.NUM_NODE_FEATURES


def predict(
    model, graphs, node_buckets=features.DEFAULT_NODE_BUCKETS, graph_buckets=features.DEFAULT_GRAPH_BUCKETS
) -> np.ndarray:
    padded, gmask, nmask = features.pad_to_bucket(
        features.to_graphs_tuple(graphs), node_buckets=node_buckets, graph_buckets=graph_buckets
    )
    seq = models.sequence_index(padded.n_node, nmask)
    out = model(jax.tree.map(jnp.asarray, padded), jnp.asarray(nmask), jnp.asarray(gmask), jnp.asarray(seq))
    assert out.shape == gmask.shape
    return np.asarray(out)


@pytest.fixture(scope="module")
def graphs() -> list[features.KernelGraph]:
    rng = np.random.default_rng(0)
    return [rand_graph(rng, n) for n in (1, 2, 5, 9, 3, 12, 7, 4)]


SMALL = dict(opcode_embed=8, hidden=16, num_layers=2)


@pytest.mark.parametrize("kind", ["gnn", "lstm"])
def test_shapes_and_padding_graphs_are_zero(graphs, kind):
    model = models.make_model(ModelConfig(kind=kind, **SMALL), 0)
    out = predict(model, graphs[:4])
    assert out.dtype == np.float32 and np.all(np.isfinite(out))
    assert out.shape[0] >= 5
    np.testing.assert_array_equal(out[4:], 0.0)
    assert len(set(np.round(out[:4], 6))) == 4  # different graphs, different predictions


GNN_VARIANTS = [
    dict(reduce="sum", pooling=("sum", "max")),
    dict(reduce="mean", pooling=("mean",)),
    dict(reduce="max", pooling=("max",)),
    dict(reduce="max", pooling=("sum", "mean", "max"), neighbours="operands"),
    dict(reduce="mean", pooling=("sum",), neighbours="users"),
]


@pytest.mark.parametrize("variant", GNN_VARIANTS + [dict(kind="lstm")], ids=str)
def test_padding_and_other_graphs_do_not_leak(graphs, variant):
    model = models.make_model(ModelConfig(**SMALL, **variant), 1)
    base = predict(model, graphs[:4])[:4]
    # Same graphs, much more padding.
    padded_more = predict(model, graphs[:4], node_buckets=(256,), graph_buckets=(64,))[:4]
    # Same graphs followed by other (larger) graphs: other buckets, other sequence length.
    with_others = predict(model, graphs)[:4]
    np.testing.assert_allclose(padded_more, base, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(with_others, base, rtol=1e-5, atol=1e-5)


def test_reduce_variants_differ(graphs):
    outs = [
        predict(models.make_model(ModelConfig(**SMALL, reduce=r), 0), graphs)[:8]
        for r in ("sum", "mean", "max")
    ]
    assert not np.allclose(outs[0], outs[1]) and not np.allclose(outs[1], outs[2])


def test_empty_neighbourhoods_are_finite():
    rng = np.random.default_rng(3)
    lone = rand_graph(rng, 1)  # no edges at all
    for r in ("sum", "mean", "max"):
        out = predict(models.make_model(ModelConfig(**SMALL, reduce=r, pooling=("max",)), 0), [lone])
        assert np.all(np.isfinite(out))


def _permute(g: features.KernelGraph, perm: np.ndarray) -> features.KernelGraph:
    """Reorder nodes: new node k is old node perm[k]."""
    inv = np.argsort(perm)
    return g._replace(
        opcodes=g.opcodes[perm],
        node_features=g.node_features[perm],
        senders=inv[g.senders].astype(np.int32),
        receivers=inv[g.receivers].astype(np.int32),
    )


def test_lstm_order_matters_gnn_does_not(graphs):
    g = graphs[5]
    perm = np.random.default_rng(0).permutation(g.num_nodes)
    h = _permute(g, perm)
    lstm = models.make_model(ModelConfig(kind="lstm", **SMALL), 0)
    gnn = models.make_model(ModelConfig(kind="gnn", **SMALL), 0)
    assert abs(predict(lstm, [g])[0] - predict(lstm, [h])[0]) > 1e-4
    np.testing.assert_allclose(predict(gnn, [g])[0], predict(gnn, [h])[0], rtol=1e-5, atol=1e-5)


def test_sequence_index():
    n_node = np.array([3, 1, 4, 0])  # graph 2 is jraph's padding graph (4 padding nodes)
    node_mask = np.array([True] * 4 + [False] * 4)
    idx = models.sequence_index(n_node, node_mask, length_buckets=(2, 8))
    assert idx.shape == (4, 8)
    np.testing.assert_array_equal(idx[0], [0, 1, 2, 2, 2, 2, 2, 2])
    np.testing.assert_array_equal(idx[1], [3] * 8)
    np.testing.assert_array_equal(idx[2:], 0)
    with pytest.raises(ValueError, match="length bucket"):
        models.sequence_index(n_node, node_mask, length_buckets=(2,))


def test_config_validation_and_round_trip():
    with pytest.raises(ValueError):
        ModelConfig(reduce="median")
    with pytest.raises(ValueError):
        ModelConfig(pooling=())
    with pytest.raises(ValueError):
        ModelConfig(neighbours="siblings")
    with pytest.raises(ValueError):
        ModelConfig(kind="transformer")
    cfg = ModelConfig(kind="lstm", pooling=["mean", "max"], dropout=0.1)
    assert cfg.pooling == ("mean", "max")
    assert ModelConfig.from_dict(cfg.to_dict()) == cfg


def test_lstm_needs_seq_index(graphs):
    model = models.make_model(ModelConfig(kind="lstm", **SMALL), 0)
    padded, gmask, nmask = features.pad_to_bucket(features.to_graphs_tuple(graphs[:2]))
    with pytest.raises(ValueError, match="seq_index"):
        model(jax.tree.map(jnp.asarray, padded), jnp.asarray(nmask), jnp.asarray(gmask))


def test_dropout_only_with_key(graphs):
    model = models.make_model(ModelConfig(**SMALL, dropout=0.5), 0)
    padded, gmask, nmask = features.pad_to_bucket(features.to_graphs_tuple(graphs))
    args = (jax.tree.map(jnp.asarray, padded), jnp.asarray(nmask), jnp.asarray(gmask))
    np.testing.assert_array_equal(model(*args), model(*args))
    a = model(*args, dropout_key=jax.random.key(0))
    b = model(*args, dropout_key=jax.random.key(1))
    assert not np.allclose(a, b)
