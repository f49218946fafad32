"""The tile task end to end on a small real tile data set with synthetic runtimes.

Runtimes are a known function of each configuration (its grid steps and bytes moved), so a model
that learns from the configuration features can rank them and one that cannot is caught.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from tpucost import checkpoint, device, evaluate, tile_data, tiles, train
from tpucost.models import ModelConfig
from tpucost.tasks import tile as tile_task

SHAPES = {"matmul": [(64, 256, 256), (128, 256, 128), (64, 128, 256), (128, 128, 256), (256, 128, 128),
                     (64, 384, 256), (192, 128, 256), (128, 384, 128)],
          "softmax": [(128, 256), (256, 128), (64, 512), (192, 256), (384, 128), (256, 256)]}


def _runtime(family, shape, config):
    cost = tiles.tile_cost(family, shape, "float32", config)
    return 2_000.0 * cost.steps + cost.total_bytes / 50.0 + 1_000.0


@pytest.fixture(scope="module")
def dataset():
    problems = []
    for family, shapes in SHAPES.items():
        for shape in shapes:
            configs = tiles.legal_configs(family, shape)[:12]
            problems.append(tile_data.TileProblem(
                family, ",".join(map(str, shape)), "float32", tiles.kernel_graph(family, shape),
                configs, np.stack([tiles.config_features(family, shape, "float32", c) for c in configs]),
                np.asarray([_runtime(family, shape, c) for c in configs])))
    return tile_data.from_problems(problems, source="tpucost", device=device.fingerprint(),
                                   config_feature_names=tiles.CONFIG_FEATURE_NAMES)


@pytest.fixture(scope="module")
def split(dataset):
    return tile_data.split_random(dataset, seed=0, fractions=(0.6, 0.2, 0.2))


def _config(dataset, **model):
    return train.TrainConfig(model=tile_task.tile_model_config(dataset, ModelConfig(hidden=32, num_layers=2, **model)),
                             learning_rate=3e-3, batch_size=4, epochs=30, patience=30, seed=0)


def test_batches_have_masks_and_fixed_shapes(dataset, split):
    task = tile_task.TileTask.fit(dataset, split.train, max_configs=8)
    batch = next(task.batches(split.train, 3, 1, np.arange(len(split.train))))
    g, c = batch.config_mask.shape[1:]
    assert batch.config_features.shape == (1, g, c, len(tiles.CONFIG_FEATURE_NAMES))
    assert batch.graph_mask[0].sum() == 3 and batch.config_mask[0].sum() == 3 * 8  # subsets of 8 configs
    assert not batch.config_mask[0][~batch.graph_mask[0]].any()
    assert task.metadata()["features"] == dataset.feature_spec.to_dict()


@pytest.mark.parametrize("loss", ["hinge", "mse"])
def test_training_ranks_held_out_kernels(dataset, split, loss, tmp_path):
    result = tile_task.train_tile_model(dataset, split, loss, tmp_path / loss, _config(dataset), progress=False)
    test = [int(i) for i in split.test]
    scores = tile_task.predict_scores(result.model, [dataset.graph(i) for i in test],
                                      [dataset.config_features(i) for i in test])
    metrics = evaluate.ranking_metrics(scores, [dataset.runtime_ns(i) for i in test])
    assert metrics["kendall_mean"] > 0.6, metrics
    model, meta = tile_task.load_tile_model(tmp_path / loss / "best")
    assert meta["loss"] == loss and meta["task"] == "tile"
    again = tile_task.predict_scores(model, [dataset.graph(test[0])], [dataset.config_features(test[0])])
    np.testing.assert_allclose(again[0], scores[0], rtol=1e-5, atol=1e-5)


def test_early_join_trains_too(dataset, split):
    cfg = dataclasses.replace(_config(dataset, config_join="early"), epochs=2)
    result = tile_task.train_tile_model(dataset, split, "logistic", None, cfg, progress=False)
    scores = tile_task.predict_scores(result.model, [dataset.graph(0)], [dataset.config_features(0)])
    assert scores[0].shape == (len(dataset.runtime_ns(0)),) and np.isfinite(scores[0]).all()


def test_scores_do_not_depend_on_chunking(dataset, split):
    cfg = dataclasses.replace(_config(dataset), epochs=1)
    model = tile_task.train_tile_model(dataset, split, "listwise", None, cfg, progress=False).model
    whole = tile_task.predict_scores(model, [dataset.graph(0)], [dataset.config_features(0)])[0]
    pieces = tile_task.predict_scores(model, [dataset.graph(0)], [dataset.config_features(0)], chunk=5)[0]
    np.testing.assert_allclose(whole, pieces, rtol=1e-5, atol=1e-5)


def test_a_kernel_checkpoint_is_not_a_tile_model(tmp_path):
    kernel_dir = checkpoint.bundled_checkpoints_dir() / "kernel-random" / "gnn"
    if not kernel_dir.is_dir():
        pytest.skip("no bundled kernel checkpoint")
    with pytest.raises(ValueError, match="not a tile model"):
        tile_task.load_tile_model(kernel_dir)
