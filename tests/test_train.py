"""Tests of tpucost.method.train (with the kernel task) on a small synthetic data set (no measured data needed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import rand_graph
from flax import nnx

from tpucost.method import features, train
from tpucost.method.models import ModelConfig, make_model
from tpucost.method.tasks import kernel, tile
from tpucost.method.train import TrainConfig

pytestmark = pytest.mark.core  # also run on Colab's versions (make test-colab)

F = features.NUM_NODE_FEATURES


class ToyDataset:
    """Duck-typed stand-in for `tpucost.experiments.data.KernelDataset`: runtime depends on size, opcodes, features."""

    features = features.TPUCOST_FEATURES

    def __init__(self, n: int, seed: int = 0):
        rng = np.random.default_rng(seed)
        self.graphs = [rand_graph(rng, int(k), max_opcode=20) for k in rng.integers(1, 12, n)]
        log_ns = np.array(
            [
                6.0 + 0.3 * g.num_nodes + 0.1 * g.opcodes.sum() / 10 + 2.0 * g.node_features[:, 0].max()
                for g in self.graphs
            ]
        )
        self.runtime_ns = np.exp(log_ns)

    def __len__(self) -> int:
        return len(self.graphs)

    def graph(self, i: int) -> features.KernelGraph:
        return self.graphs[i]


SMOKE = TrainConfig.smoke()


def fit(cfg: TrainConfig, ds, train_idx, val_idx, **kwargs) -> train.TrainResult:
    """`train.train_and_evaluate` of the kernel task on ``ds`` (norm fitted on ``train_idx``)."""
    return train.train_and_evaluate(
        kernel.KernelTask.fit(ds, train_idx, cfg.model), cfg, train_idx, val_idx, **kwargs
    )


def norm_of(result: train.TrainResult) -> kernel.TargetNorm:
    return kernel.TargetNorm.from_dict(result.metadata["norm"])


@pytest.fixture(scope="module")
def toy() -> ToyDataset:
    return ToyDataset(48)


def test_smoke_config_and_round_trip():
    cfg = TrainConfig.smoke(epochs=7)
    assert cfg.epochs == 7 and cfg.model.hidden == 16
    assert TrainConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg
    with pytest.raises(ValueError):
        TrainConfig(optimizer="sgd")


def test_target_norm():
    norm = kernel.TargetNorm.fit(np.exp([1.0, 2.0, 3.0]))
    assert norm.mean == pytest.approx(2.0)
    np.testing.assert_allclose(norm.decode(norm.encode(np.exp([5.0]))), [5.0], rtol=1e-6)


@pytest.mark.slow
def test_overfit_tiny_set(toy):
    cfg = TrainConfig.smoke(epochs=30, patience=100, learning_rate=1e-2, batch_size=8)
    idx = np.arange(32)
    r = fit(cfg, toy, idx, idx, progress=False)
    losses = r.history["train_loss"]
    assert len(losses) == 30 and r.num_devices >= 1
    assert losses[-1] < 0.1 * losses[0], losses
    assert r.best_val_loss == min(r.history["val_loss"])
    assert r.history["val_loss"][r.best_epoch - 1] == r.best_val_loss
    # The target statistics come from the training part only.
    norm = norm_of(r)
    assert norm.mean == pytest.approx(float(np.mean(np.log(toy.runtime_ns[idx]))))
    # The returned model is the best-validation one.
    graphs = [toy.graph(i) for i in idx]
    pred = kernel.predict(r.model, norm, graphs, batch_size=8)
    mse = np.mean(((pred - np.log(toy.runtime_ns[idx])) / norm.std) ** 2)
    assert mse == pytest.approx(r.best_val_loss, rel=1e-3, abs=1e-5)
    ape = np.abs(np.exp(pred) / toy.runtime_ns[idx] - 1.0) * 100.0
    assert np.median(ape) < 100


@pytest.mark.slow
def test_determinism(toy):
    cfg = TrainConfig.smoke(epochs=3, model=ModelConfig(opcode_embed=8, hidden=16, num_layers=2, dropout=0.2))
    runs = [fit(cfg, toy, np.arange(32), np.arange(32, 48), progress=False) for _ in range(2)]
    assert runs[0].history == runs[1].history
    other = fit(
        TrainConfig.smoke(epochs=3, seed=1, model=cfg.model),
        toy,
        np.arange(32),
        np.arange(32, 48),
        progress=False,
    )
    assert other.history != runs[0].history


def test_early_stopping(toy):
    cfg = TrainConfig.smoke(epochs=20, patience=1, learning_rate=0.5)  # diverges quickly
    r = fit(cfg, toy, np.arange(32), np.arange(32, 48), progress=False)
    n = len(r.history["val_loss"])
    assert n < 20
    assert r.best_epoch == n - 1  # stopped after one epoch without improvement


def test_lstm_batches_group_similar_lengths_and_stay_a_pure_function_of_the_rng():
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 1500, 1000) ** np.where(rng.random(1000) < 0.9, 0.4, 1.0)
    order = kernel.length_grouped_order(
        np.random.default_rng(1).permutation(1000), lengths, 64, np.random.default_rng(2)
    )
    assert sorted(order.tolist()) == list(range(1000))  # every example once
    again = kernel.length_grouped_order(
        np.random.default_rng(1).permutation(1000), lengths, 64, np.random.default_rng(2)
    )
    assert np.array_equal(order, again)

    def padded(o):  # what the LSTM pads to: each batch's longest example, for each of its slots
        return sum(lengths[o[s : s + 64]].max() * len(o[s : s + 64]) for s in range(0, len(o), 64))

    shuffled = np.random.default_rng(1).permutation(1000)
    assert padded(order) < 0.5 * padded(shuffled), (padded(order), padded(shuffled))
    # with windows of 4 batches (256 examples): the short batch (40) is the last window's longest,
    # and stays last; the full ones come in a random order, not window after window
    small = kernel.length_grouped_order(shuffled, lengths, 64, np.random.default_rng(2), window=4)
    last_window = shuffled[768:]
    assert set(small[960:].tolist()) == set(
        last_window[np.argsort(lengths[last_window], kind="stable")][192:].tolist()
    )
    first_window = set(shuffled[:256].tolist())
    assert [set(small[s : s + 64].tolist()) <= first_window for s in range(0, 256, 64)] != [True] * 4


def test_only_the_lstm_task_reorders_training_batches(toy):
    part = np.arange(40)
    gnn_task = kernel.KernelTask.fit(toy, part, ModelConfig(kind="gnn"))
    lstm_task = kernel.KernelTask.fit(toy, part, ModelConfig(kind="lstm"))
    plain = np.random.default_rng(5).permutation(40)
    assert np.array_equal(gnn_task.train_order(part, np.random.default_rng(5), 8), plain)
    grouped = lstm_task.train_order(part, np.random.default_rng(5), 8)
    assert not np.array_equal(grouped, plain) and sorted(grouped.tolist()) == part.tolist()


def test_both_tasks_implement_the_whole_task_protocol():
    verbs = ("num_examples", "train_order", "eval_order", "batches", "loss", "metadata")
    assert all(callable(getattr(train.Task, v, None)) for v in verbs) and "name" in train.Task.__annotations__
    for task in (kernel.KernelTask, tile.TileTask):
        assert all(getattr(task, v) is not getattr(train.Task, v) for v in verbs), task
    # the tile task's orders are the plain ones its bundled models were trained with
    part = np.arange(10, 30)
    tile_task = tile.TileTask(None, kernel.TargetNorm(0.0, 1.0))
    plain = np.random.default_rng(5).permutation(len(part))
    assert np.array_equal(tile_task.train_order(part, np.random.default_rng(5), 8), plain)
    assert np.array_equal(tile_task.eval_order(part), np.arange(len(part)))


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["gnn", "lstm"])
def test_the_kernel_loss_is_the_registered_mse_bit_for_bit(toy, kind):
    """`KernelTask.loss` (the registry's "mse", one kernel per list) equals the squared error
    written out, to the bit, values and gradients, with padding graphs in the batch."""
    cfg = ModelConfig(kind=kind, opcode_embed=8, hidden=16, num_layers=2, dropout=0.2)
    task = kernel.KernelTask.fit(toy, np.arange(32), cfg)
    part = np.arange(37)  # 37 kernels: padded to more graphs
    batch = jax.tree.map(lambda x: jnp.asarray(x[0]), next(task.batches(part, 37, 1, np.arange(37))))
    assert not bool(batch.graph_mask.all())
    graphdef, params, rest = nnx.split(make_model(cfg, 3), nnx.Param, ...)

    def written_out(p, key):
        pred = nnx.merge(graphdef, p, rest)(
            batch.graph, batch.node_mask, batch.graph_mask, batch.seq_index, dropout_key=key
        )
        err = jnp.where(batch.graph_mask, (pred - batch.graph.globals[:, 0]) ** 2, 0.0)
        return err.sum(), batch.graph_mask.sum()

    def registered(p, key):
        return task.loss(nnx.merge(graphdef, p, rest), batch, key)

    for key in (None, jax.random.key(4)):  # jitted, as in training
        (want, n_want), g_want = jax.jit(jax.value_and_grad(written_out, has_aux=True))(params, key)
        (got, n_got), g_got = jax.jit(jax.value_and_grad(registered, has_aux=True))(params, key)
        assert float(want) > 0 and int(n_got) == int(n_want) == 37
        assert np.array_equal(np.asarray(got), np.asarray(want))
        jax.tree.map(np.testing.assert_array_equal, g_got, g_want)


def test_predict_keeps_order_and_is_batch_independent(toy):
    r_model = make_model(SMOKE.model, 0)
    norm = kernel.TargetNorm(7.0, 2.0)
    graphs = [toy.graph(i) for i in range(20)]
    all_at_once = kernel.predict(r_model, norm, graphs, batch_size=256)
    one_by_one = np.concatenate([kernel.predict(r_model, norm, [g]) for g in graphs[:5]])
    np.testing.assert_allclose(all_at_once[:5], one_by_one, rtol=1e-5, atol=1e-5)
    assert kernel.predict(r_model, norm, []).shape == (0,)


@pytest.mark.slow
def test_resume_per_epoch(tmp_path, toy):
    work = tmp_path / "work"
    r2 = fit(
        TrainConfig.smoke(epochs=2, patience=100),
        toy,
        np.arange(32),
        np.arange(32, 48),
        workdir=work,
        progress=False,
    )
    assert (work / train.TRAIN_STATE_FILE).is_file() and (work / "best" / "config.json").is_file()
    assert r2.start_epoch == 0 and len(r2.history["val_loss"]) == 2
    r4 = fit(
        TrainConfig.smoke(epochs=4, patience=100),
        toy,
        np.arange(32),
        np.arange(32, 48),
        workdir=work,
        progress=False,
    )
    assert r4.start_epoch == 2
    assert len(r4.history["val_loss"]) == 4
    assert r4.history["val_loss"][:2] == r2.history["val_loss"]
    # A workdir for another model is refused.
    other = TrainConfig.smoke(epochs=5, model=ModelConfig(hidden=8, opcode_embed=8, num_layers=1))
    with pytest.raises(ValueError, match="another model config"):
        fit(other, toy, np.arange(32), np.arange(32, 48), workdir=work, progress=False)


#: Data-parallel training: the same run as `_data_parallel_run` here, on 4 host devices.
SUBPROCESS = textwrap.dedent("""
    import json, sys
    import jax
    sys.path.insert(0, sys.argv[1])
    from test_train import _data_parallel_run
    print(json.dumps({"device_count": jax.device_count(), **_data_parallel_run()}))
""")


def _data_parallel_run() -> dict:
    """A short training on all devices of this process (global batch 16; no dropout, whose keys
    differ per device): the devices it ran on, its losses and its best parameters, flattened.
    42 training examples: each epoch's last batch (10) splits unevenly over 4 devices (3, 3, 2, 2)."""
    import jax

    cfg = TrainConfig.smoke(epochs=4, patience=100, learning_rate=1e-2, batch_size=16)
    r = fit(cfg, ToyDataset(48), np.arange(42), np.arange(42, 48), progress=False)
    from flax import nnx

    leaves = jax.tree_util.tree_leaves(nnx.state(r.model, nnx.Param))
    return {
        "num_devices": r.num_devices,
        "train_loss": r.history["train_loss"],
        "val_loss": r.history["val_loss"],
        "params": [np.asarray(leaf, np.float64).ravel().tolist() for leaf in leaves],
    }


@pytest.mark.slow
def test_data_parallel_on_4_host_devices_equals_one_device():
    """Training on 4 host devices (each a quarter of every global batch, gradients summed over
    them) gives the losses and parameters of the same training on one device, to float32 rounding."""
    import jax

    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4", JAX_PLATFORMS="cpu")
    proc = subprocess.Popen(
        [sys.executable, "-c", SUBPROCESS, str(Path(__file__).parent)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert jax.device_count() == 1
        one = _data_parallel_run()  # meanwhile, here, on this process's one device
        stdout, stderr = proc.communicate(timeout=300)
    finally:
        proc.kill()
    assert proc.returncode == 0, stderr[-3000:]
    four = json.loads(stdout.strip().splitlines()[-1])
    assert four["device_count"] == four["num_devices"] == 4 and one["num_devices"] == 1
    assert one["train_loss"][-1] < one["train_loss"][0], one["train_loss"]  # it did train
    # (Measured here: losses within 1e-7 relative, the 7057 parameters within 4e-7 absolute.)
    for key in ("train_loss", "val_loss"):
        np.testing.assert_allclose(four[key], one[key], rtol=1e-5, err_msg=key)
    assert [len(p) for p in four["params"]] == [len(p) for p in one["params"]]
    for i, (p4, p1) in enumerate(zip(four["params"], one["params"], strict=True)):
        np.testing.assert_allclose(p4, p1, rtol=1e-5, atol=1e-6, err_msg=f"parameter array {i}")
