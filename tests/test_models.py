"""Tests of tpucost.method.models on small synthetic kernel graphs."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import rand_graph
from flax import nnx

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


TILE_SPEC = dataclasses.replace(features.TPUCOST_FEATURES, num_config_features=3)


def test_the_task_names_the_model_not_the_feature_widths():
    tile_config = ModelConfig(**SMALL, features=TILE_SPEC)
    assert type(models.make_model(tile_config, 0, task="tile")) is models.TileGraphSAGE
    assert type(models.make_model(ModelConfig(**SMALL), 0)) is models.GraphSAGE
    assert type(models.make_model(ModelConfig(kind="lstm", **SMALL), 0, task="kernel")) is models.LSTMBaseline
    with pytest.raises(ValueError, match="no configuration features"):
        models.make_model(
            tile_config, 0
        )  # the kernel task: configuration features are not inferred to mean tiles
    with pytest.raises(ValueError, match="num_config_features"):
        models.make_model(ModelConfig(**SMALL), 0, task="tile")
    with pytest.raises(ValueError, match="kind 'gnn'"):
        models.make_model(dataclasses.replace(tile_config, kind="lstm"), 0, task="tile")
    with pytest.raises(ValueError, match="task must be"):
        models.make_model(ModelConfig(**SMALL), 0, task="fusion")


def test_the_tile_model_runs_the_kernel_model_s_graph_side(graphs):
    """Same seed, same graph side: the tile model's kernel embedding is GraphSAGE's, and its score
    is the MLP of that embedding and the configuration's encoding (late join)."""
    tile = models.make_model(ModelConfig(**SMALL, features=TILE_SPEC), 0, task="tile")
    gnn = models.make_model(ModelConfig(**SMALL), 0)
    tile_params = nnx.to_pure_dict(nnx.state(tile, nnx.Param))
    gnn_params = nnx.to_pure_dict(nnx.state(gnn, nnx.Param))
    # the parameter trees the bundled checkpoints were saved with
    assert sorted(gnn_params) == ["encoder", "head", "layers"]
    assert sorted(tile_params) == ["config_encoder", "encoder", "head", "layers", "mlp"]
    for part in ("encoder", "layers"):  # initialised first, in the same order
        jax.tree.map(np.testing.assert_array_equal, tile_params[part], gnn_params[part])
    padded, gmask, nmask = features.pad_to_bucket(features.to_graphs_tuple(graphs[:3]))
    graph, nmask, gmask = jax.tree.map(jnp.asarray, padded), jnp.asarray(nmask), jnp.asarray(gmask)
    config_features = jax.random.normal(jax.random.key(0), (len(gmask), 4, 3))
    config_mask = jnp.broadcast_to(gmask[:, None], (len(gmask), 4))
    scores = tile(graph, nmask, gmask, config_features, config_mask)
    kernel = gnn.pool(gnn.embed_nodes(graph), graph, nmask)  # [Gp, 2H]
    configs = nnx.relu(tile.config_encoder(config_features))  # [Gp, 4, H]
    kernel = jnp.broadcast_to(kernel[:, None], (*configs.shape[:2], kernel.shape[-1]))
    by_hand = tile.head(nnx.relu(tile.mlp(jnp.concatenate([kernel, configs], axis=-1))))[..., 0]
    np.testing.assert_allclose(scores[:3], by_hand[:3], rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(scores[3:], 0.0)
