"""Tests of the kernel model that reads the device (`lab.device_models`): the model, the task's
device rows, the checkpoint, fine-tuning from a trained model, and `DeviceCostModel.load` on a
device the model never saw."""

from __future__ import annotations

import json
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import rand_graph
from flax import nnx

from lab import descriptor, device_models
from lab.device_cost_model import DeviceCostModel
from lab.tests.device_packs import fake_descriptor
from tpucost.method import checkpoint, device, features, models, train
from tpucost.method.models import ModelConfig
from tpucost.method.tasks import kernel
from tpucost.method.train import TrainConfig

pytestmark = pytest.mark.core  # also run on Colab's versions (make test-colab)

D = len(descriptor.FEATURE_NAMES)
SMALL = dict(opcode_embed=8, hidden=16, num_layers=1)


@pytest.fixture(scope="module")
def graphs() -> list[features.KernelGraph]:
    rng = np.random.default_rng(0)
    return [rand_graph(rng, n) for n in (1, 3, 5, 8, 4, 2)]


class Kernels:
    """A stand-in kernel data set (`tpucost.method.tasks.kernel.KernelData`)."""

    features = features.TPUCOST_FEATURES

    def __init__(self, graphs: list[features.KernelGraph]):
        self.graphs = graphs
        self.runtime_ns = np.exp(6.0 + 0.3 * np.array([g.num_nodes for g in graphs]))

    def __len__(self) -> int:
        return len(self.graphs)

    def graph(self, i: int) -> features.KernelGraph:
        return self.graphs[i]


def _batch(graphs, device_rows=None):
    padded, gmask, nmask = features.pad_to_bucket(features.to_graphs_tuple(graphs))
    seq = models.sequence_index(padded.n_node, nmask)
    dev = None
    if device_rows is not None:
        dev = np.zeros((len(gmask), device_rows.shape[1]), np.float32)
        dev[: len(device_rows)] = device_rows
    return jax.tree.map(jnp.asarray, padded), jnp.asarray(nmask), jnp.asarray(gmask), jnp.asarray(seq), dev


@pytest.mark.slow
def test_a_model_without_a_device_is_the_model_it_always_was(graphs):
    config = ModelConfig(**SMALL)
    assert ModelConfig.from_dict(config.to_dict()) == config
    model = models.make_model(config, 0)
    params = nnx.to_pure_dict(nnx.state(model, nnx.Param))
    assert sorted(params) == ["encoder", "head", "layers"]
    assert params["head"]["kernel"].shape == (config.hidden * len(config.pooling), 1)
    graph, nmask, gmask, seq, _ = _batch(graphs)
    by_hand = model.head(model.pool(model.embed_nodes(graph), graph, nmask))[
        :, 0
    ]  # head on the pooled kernel
    out = model(graph, nmask, gmask, seq)
    np.testing.assert_array_equal(np.asarray(out), np.asarray(jnp.where(gmask, by_hand, 0.0)))
    with pytest.raises(ValueError, match="reads no device"):
        device_models.predict(model, kernel.TargetNorm(0.0, 1.0), graphs, np.zeros(D))


@pytest.mark.slow
def test_the_lstm_and_the_bundled_checkpoints_keep_their_parameter_trees():
    lstm = nnx.to_pure_dict(nnx.state(models.make_model(ModelConfig(kind="lstm", **SMALL), 0), nnx.Param))
    assert sorted(lstm) == ["cell", "encoder", "head"] and lstm["head"]["kernel"].shape == (16, 1)
    # The bundled checkpoints (configs without the key) load into this tree, shape by shape.
    saved = checkpoint.load(kernel.default_model_dir("random") / "gnn")
    assert not hasattr(saved.model, "device_join")


@pytest.mark.parametrize("kind", ["gnn", "lstm"])
def test_the_descriptor_changes_the_predictions(graphs, kind):
    model = device_models.make_device_model(ModelConfig(kind=kind, **SMALL), D, 0)
    assert hasattr(model, "device_join") and model.head.in_features == 16
    graph, nmask, gmask, seq, _ = _batch(graphs)
    rows = lambda d: _batch(graphs, np.tile(d.features(), (len(graphs), 1)))[4]  # noqa: E731
    slow, fast = fake_descriptor("a", 2.0, 2.0), fake_descriptor("b", 0.5, 0.5)
    out_slow = np.asarray(model(graph, nmask, gmask, seq, device=rows(slow)))
    out_fast = np.asarray(model(graph, nmask, gmask, seq, device=rows(fast)))
    n = len(graphs)
    assert np.all(np.abs(out_slow[:n] - out_fast[:n]) > 1e-6)
    np.testing.assert_array_equal(out_slow, np.asarray(model(graph, nmask, gmask, seq, device=rows(slow))))
    np.testing.assert_array_equal(out_slow[n:], 0.0)  # padding graphs stay 0
    with pytest.raises(ValueError, match="reads the device"):
        model(graph, nmask, gmask, seq)
    with pytest.raises(ValueError, match="device_width"):
        device_models.make_device_model(ModelConfig(**SMALL), 0)


def test_the_device_norm_counts_each_device_once_and_clips():
    rows = np.array([[1.0, 5.0], [1.0, 5.0], [1.0, 5.0], [3.0, 5.0]])  # three kernels of one device
    norm = device_models.DeviceNorm.fit(rows, ("a", "b"))
    assert norm.mean == (2.0, 5.0) and norm.std == (1.0, device_models.MIN_DEVICE_STD)
    z = norm.encode(np.array([[3.0, 5.0], [2.0, 100.0]]))
    np.testing.assert_allclose(z, [[1.0, 0.0], [0.0, device_models.DEVICE_CLIP]])
    assert device_models.DeviceNorm.from_dict(json.loads(json.dumps(norm.to_dict()))) == norm
    with pytest.raises(ValueError, match="width"):
        norm.encode(np.zeros((1, 3)))


def test_the_task_batches_each_kernel_s_device(graphs):
    data = Kernels(graphs)
    rows = np.stack([fake_descriptor(f"d{i % 2}", 1.0 + i % 2).features() for i in range(len(graphs))])
    config = ModelConfig(**SMALL)
    with pytest.raises(ValueError, match="device=float"):
        device_models.DeviceKernelTask.fit(data, np.arange(4), config)
    task = device_models.DeviceKernelTask.fit(data, np.arange(4), config, rows, descriptor.FEATURE_NAMES)
    assert task.metadata()["device_norm"]["names"] == list(descriptor.FEATURE_NAMES)
    (batch,) = task.batches(np.arange(len(graphs)), 16, 1, np.arange(len(graphs)))
    assert batch.device.shape == (1, batch.kernels.graph_mask.shape[1], D)
    np.testing.assert_array_equal(batch.device[0, : len(graphs)], task.device_norm.encode(rows))
    np.testing.assert_array_equal(batch.device[0, len(graphs) :], 0.0)
    plain = kernel.KernelTask.fit(data, np.arange(4), config)
    (plain_batch,) = plain.batches(np.arange(len(graphs)), 16, 1, np.arange(len(graphs)))
    jax.tree.map(
        np.testing.assert_array_equal, plain_batch, batch.kernels
    )  # the same kernels, the device beside
    assert "device_norm" not in plain.metadata()


def _device_checkpoint(tmp_path, graphs, trained_on: list[descriptor.DeviceDescriptor]):
    """An experiment folder holding a GNN that reads the device, trained on ``trained_on`` (one epoch)."""
    data = Kernels(graphs)
    rows = np.stack([trained_on[i % len(trained_on)].features() for i in range(len(graphs))])
    cfg = TrainConfig.smoke(epochs=1, model=ModelConfig(**SMALL))
    task = device_models.DeviceKernelTask.fit(
        data, np.arange(len(graphs)), cfg.model, rows, descriptor.FEATURE_NAMES
    )
    result = train.train_and_evaluate(task, cfg, np.arange(4), np.arange(4, 6), progress=False)
    extra = {device_models.DESCRIPTORS_EXTRA: {d.device_id: d.to_dict() for d in trained_on}}
    checkpoint.save(tmp_path / "gnn", result.model, cfg, task.metadata(), extra=extra)
    return result, task


@pytest.mark.slow
def test_checkpoint_round_trip_keeps_the_device_width_and_norm(tmp_path, graphs):
    known = fake_descriptor("fakedev00001")
    result, task = _device_checkpoint(tmp_path, graphs, [known, fake_descriptor("fakedev00002", 3.0)])
    saved = json.loads((tmp_path / "gnn" / "config.json").read_text())
    assert saved["device_norm"] == task.device_norm.to_dict()
    net = device_models.load_model(tmp_path / "gnn")
    assert (
        device_models.reads_device(net)
        and net.device_norm == task.device_norm
        and net.model.device_width == D
    )
    before = device_models.predict(result.model, task.norm, graphs, known.features(), task.device_norm)
    after = device_models.predict(net.model, net.norm, graphs, known.features(), net.device_norm)
    np.testing.assert_array_equal(before, after)
    with pytest.raises(ValueError, match="reads the device"):
        device_models.predict(net.model, net.norm, graphs)
    del saved["device_norm"]  # read as a model without a device: its parameters do not fit
    (tmp_path / "gnn" / "config.json").write_text(json.dumps(saved))
    with pytest.raises(ValueError, match="checkpoint"):
        device_models.load_model(tmp_path / "gnn")


def test_fine_tuning_starts_from_the_given_model(graphs):
    data = Kernels(graphs)
    cfg = TrainConfig.smoke(epochs=0, model=ModelConfig(**SMALL))
    start = models.make_model(cfg.model, 7)  # not the seed the loop initialises with
    task = kernel.KernelTask.fit(data, np.arange(4), cfg.model)
    kept = train.train_and_evaluate(
        task, cfg, np.arange(4), np.arange(4, 6), progress=False, init_model=start
    )
    np.testing.assert_array_equal(
        kernel.predict(kept.model, task.norm, graphs), kernel.predict(start, task.norm, graphs)
    )
    with pytest.raises(ValueError, match="another config"):
        train.train_and_evaluate(
            task, cfg, np.arange(4), np.arange(4, 6), init_model=models.make_model(ModelConfig(hidden=8), 0)
        )


def test_fine_tuning_keeps_the_starting_weights_when_no_epoch_beats_them(graphs):
    data = Kernels(graphs)
    wreck = TrainConfig.smoke(epochs=1, batch_size=1, learning_rate=50.0, model=ModelConfig(**SMALL))
    start = models.make_model(wreck.model, 7)
    task = kernel.KernelTask.fit(data, np.arange(4), wreck.model)
    kept = train.train_and_evaluate(task, wreck, np.arange(4), np.arange(4), progress=False, init_model=start)
    assert kept.best_epoch == 0 and kept.history["val_loss"][0] > kept.best_val_loss
    np.testing.assert_array_equal(
        kernel.predict(kept.model, task.norm, graphs), kernel.predict(start, task.norm, graphs)
    )
    fresh = train.train_and_evaluate(task, wreck, np.arange(4), np.arange(4), progress=False)
    assert fresh.best_epoch == 1  # without a starting model, the first epoch is the best so far


@pytest.mark.slow
def test_cost_model_load_on_a_device_it_never_saw_measures_the_descriptor(tmp_path, graphs, monkeypatch):
    here = device.fingerprint()
    trained = [fake_descriptor("fakedev00001"), fake_descriptor(here["id"], 2.0, 1.5)]
    _device_checkpoint(tmp_path, graphs, trained)
    measured = fake_descriptor("measured-here", 0.7, 0.9)
    calls = []
    monkeypatch.setattr(descriptor, "load_or_measure", lambda *a, **k: calls.append(1) or measured)
    with warnings.catch_warnings():  # trained on this device: its pack's descriptor, no measuring
        warnings.simplefilter("error")
        on_known = DeviceCostModel.load(tmp_path, "gnn")
    assert on_known.descriptor == trained[1] and not calls
    other = dict(here, cpu_model="Some Other CPU", id="otherdevice1")
    monkeypatch.setattr(device, "fingerprint", lambda: dict(other))
    with pytest.warns(UserWarning, match="zero-shot"):
        zero_shot = DeviceCostModel.load(tmp_path, "gnn")
    assert calls == [1] and zero_shot.descriptor == measured
    predicted = zero_shot.predict(graphs)
    assert predicted.shape == (len(graphs),) and np.all(np.isfinite(predicted) & (predicted > 0))
    assert not np.allclose(predicted, on_known.predict(graphs))  # another device, other runtimes
    given = DeviceCostModel.load(tmp_path, "gnn", descriptor=trained[0].to_dict())
    assert given.descriptor == trained[0] and given.loaded_with["descriptor"]["device_id"] == "fakedev00001"
