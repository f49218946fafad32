"""A training loop that takes a task and knows nothing of runtimes or tiles.

What differs between the paper's two problems (how a batch is built, the loss, the labels) is a
`Task` (`tpucost.method.tasks.kernel.KernelTask`, `tpucost.method.tasks.tile.TileTask`). The loop owns the rest:
the model (`tpucost.method.models.make_model` of ``config.model`` for the task's ``name``), the optimizer (AdamW or Adam, linear
warmup then cosine decay, gradient clipping), data parallelism over all local devices, the jitted
train and eval steps, epochs, early stopping on the validation loss, the resumable per-epoch state
and the best model (both with `tpucost.method.checkpoint`).

Data parallelism: every step stacks one batch per device along a new leading axis (the task's
``batches`` does that), sharded over the axis "data" of a `jax.sharding.Mesh`; parameters and
optimizer state are replicated (a no-op on one device). A step's loss is the sum of the task's
per-example losses over all devices divided by the number of real examples.

Randomness is a pure function of (seed, epoch) (`_epoch_rng`): the data order and the dropout keys
of a resumed run are those of an uninterrupted one.

Fine-tuning is the same loop started from a trained model's parameters (``init_model``) instead of
a fresh initialisation, e.g. a kernel model that reads the device adapted to a new device's few
minutes of measurements (the lab's leave-one-device-out experiment, ``python -m lab``).
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P
from tqdm import tqdm  # text bars: no ipywidgets needed in notebooks

from tpucost.method import checkpoint
from tpucost.method.features import FeatureSpec
from tpucost.method.models import ModelConfig, make_model

__all__ = [
    "Task",
    "TrainConfig",
    "TrainResult",
    "train_and_evaluate",
    "TRAIN_STATE_FILE",
    "BEST_DIR",
]

#: Name of the per-epoch resumable training state inside a workdir (`tpucost.method.checkpoint`).
TRAIN_STATE_FILE = checkpoint.TRAIN_STATE_FILE
#: Sub-directory of a workdir holding the best model (`tpucost.method.checkpoint.save` format).
BEST_DIR = "best"


class Task(Protocol):
    """What the loop needs from a learning problem.

    ``name`` also names the model the loop trains (`tpucost.method.models.make_model`; a task with
    a ``make_model(config, rngs)`` method builds its own, as the lab's device models do). When
    ``metadata()`` holds ``"features"`` (a `FeatureSpec` dict), the model config's feature spec
    must equal it.
    """

    name: str  # "kernel" | "tile": `tpucost.method.models.TASKS`

    def num_examples(self, part: Sequence[int]) -> int:
        """Examples in ``part`` (may simply be ``len(part)``)."""
        ...

    def train_order(self, part: np.ndarray, rng: np.random.Generator, batch_size: int) -> np.ndarray:
        """An epoch's order of the training examples (indices into ``part``), drawn from ``rng``
        only, so a resumed run gets the same order (plainly: ``rng.permutation(len(part))``)."""
        ...

    def eval_order(self, part: np.ndarray) -> np.ndarray:
        """The order in which to batch the validation examples (indices into ``part``; e.g. by
        size, for less padding; plainly: ``np.arange(len(part))``)."""
        ...

    def batches(
        self, part: np.ndarray, batch_size: int, num_devices: int, order: np.ndarray
    ) -> Iterator[Any]:
        """Numpy batches (typed NamedTuples) of the examples ``part[order[...]]``, ``batch_size`` at a
        time; every leaf stacked with a leading [num_devices] axis."""
        ...

    def loss(
        self, model: nnx.Module, batch: Any, dropout_key: jax.Array | None
    ) -> tuple[jax.Array, jax.Array]:
        """(sum of per-example losses, number of real examples) for ONE device's batch (no leading
        axis); pure jax. ``dropout_key`` is None when evaluating."""
        ...

    def metadata(self) -> dict:
        """JSON-serialisable task metadata saved with the checkpoint (e.g. target norm, feature spec, task name)."""
        ...


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Training hyperparameters.

    Attributes:
      model: the model's `ModelConfig`.
      learning_rate: peak learning rate (after linear warmup, then cosine decay to 1% of it).
      weight_decay: AdamW decoupled weight decay.
      optimizer: "adamw" or "adam".
      warmup_fraction: fraction of all steps spent warming up.
      grad_clip: global gradient-norm clip.
      batch_size: graphs per optimizer step in all (split evenly over the devices).
      eval_batch_size: graphs per evaluation batch.
      epochs: maximum epochs.
      patience: stop after this many epochs without a better validation loss.
      seed: seeds initialisation, data order and dropout.
    """

    model: ModelConfig = dataclasses.field(default_factory=ModelConfig)
    learning_rate: float = 1e-3
    weight_decay: float = 1e-4
    optimizer: str = "adamw"
    warmup_fraction: float = 0.05
    grad_clip: float = 1.0
    batch_size: int = 64
    eval_batch_size: int = 256
    epochs: int = 80
    patience: int = 10
    seed: int = 0

    def __post_init__(self):
        if self.optimizer not in ("adamw", "adam"):
            raise ValueError(f"optimizer must be 'adamw' or 'adam', got {self.optimizer!r}")
        if self.batch_size < 1 or self.eval_batch_size < 1 or self.epochs < 0:
            raise ValueError("batch sizes must be >= 1 and epochs >= 0")

    @classmethod
    def smoke(cls, **overrides: Any) -> TrainConfig:
        """Tiny settings for tests and CI (seconds on a CPU)."""
        model = overrides.pop("model", ModelConfig(opcode_embed=8, hidden=16, num_layers=2))
        base = dict(model=model, learning_rate=3e-3, batch_size=16, eval_batch_size=64, epochs=3, patience=3)
        base.update(overrides)
        return cls(**base)

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["model"] = self.model.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: dict) -> TrainConfig:
        d = dict(d)
        d["model"] = ModelConfig.from_dict(d.get("model", {}))
        return cls(**d)


@dataclasses.dataclass
class TrainResult:
    """What `train_and_evaluate` returns.

    Attributes:
      history: {"train_loss": [...], "val_loss": [...]}, one entry per epoch run (the task's loss;
      train loss is the mean over the epoch's steps).
      best_epoch: 1-based epoch of the lowest validation loss (0 if no epoch ran, or if no epoch beat
      the starting parameters of a fine-tuning).
      best_val_loss: that loss.
      model: the model holding the best-validation parameters.
      config: the training config.
      num_devices: devices the data-parallel steps ran on.
      start_epoch: epochs already done when this call started (>0 after a resume).
      metadata: the task's metadata (`Task.metadata`), as saved with the checkpoint.
    """

    history: dict[str, list[float]]
    best_epoch: int
    best_val_loss: float
    model: nnx.Module
    config: TrainConfig
    num_devices: int
    start_epoch: int = 0
    metadata: dict[str, Any] = dataclasses.field(default_factory=dict)


# ---------------------------------------------------------------------------------------------
# Jitted steps
# ---------------------------------------------------------------------------------------------


def _make_optimizer(config: TrainConfig, total_steps: int) -> optax.GradientTransformation:
    total_steps = max(int(total_steps), 1)
    warmup = max(1, int(config.warmup_fraction * total_steps))
    schedule = optax.warmup_cosine_decay_schedule(
        0.0, config.learning_rate, warmup, max(total_steps, warmup + 1), end_value=0.01 * config.learning_rate
    )
    if config.optimizer == "adamw":
        opt = optax.adamw(schedule, weight_decay=config.weight_decay)
    else:
        opt = optax.adam(schedule)
    return optax.chain(optax.clip_by_global_norm(config.grad_clip), opt)


def _stacked_loss(
    task: Task, graphdef, params, rest, batch: Any, keys: jax.Array | None
) -> tuple[jax.Array, jax.Array]:
    """The task's (loss sum, real examples) over a stacked [D, ...] batch, summed over devices."""

    def per_device(b, k):
        return task.loss(nnx.merge(graphdef, params, rest), b, k)

    if keys is None:
        s, n = jax.vmap(lambda b: per_device(b, None))(batch)
    else:
        s, n = jax.vmap(per_device)(batch, keys)
    return s.sum(), n.sum()


class _Steps:
    """Jitted train / eval steps of one task, graphdef, optimizer and mesh.

    One training step, top to bottom: a dropout key per device; the task's loss summed over the
    devices' batches and divided by the number of real examples; its gradient with respect to
    every parameter (`jax.value_and_grad`); the optimizer's update (clipping, AdamW, the learning
    rate schedule: `_make_optimizer`) applied to the parameters. The eval step is the same loss
    without dropout and without the update, its sum and count kept apart so that `_mean_loss`
    weighs every example once.

    Taught in notebook 03, section 1 (one step of gradient descent by hand against
    ``KernelTask.loss``) and section 2 (`train_and_evaluate`), `notebooks/03_train_cost_model.ipynb`.
    """

    def __init__(self, task: Task, graphdef, rest, tx: optax.GradientTransformation, mesh: Mesh):
        self.mesh = mesh
        self.data = NamedSharding(mesh, P("data"))
        self.replicated = NamedSharding(mesh, P())

        def train_step(params, opt_state, batch, key):
            keys = jax.random.split(key, mesh.size)  # one dropout key per device

            def loss_fn(p):
                s, n = _stacked_loss(task, graphdef, p, rest, batch, keys)
                return s / jnp.maximum(n, 1), n

            (loss, _), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
            updates, opt_state = tx.update(grads, opt_state, params)  # clip, AdamW, schedule
            return optax.apply_updates(params, updates), opt_state, loss

        def eval_step(params, batch):
            return _stacked_loss(task, graphdef, params, rest, batch, None)

        self.train_step = jax.jit(train_step, out_shardings=self.replicated)
        self.eval_step = jax.jit(eval_step, out_shardings=self.replicated)

    def put(self, batch: Any) -> Any:
        return jax.device_put(batch, self.data)


def _mean_loss(steps: _Steps, params, batches: Sequence[Any]) -> float:
    """The task's loss over all examples of ``batches`` (sum over examples / number of examples)."""
    total, count = 0.0, 0
    for b in batches:
        s, n = steps.eval_step(params, steps.put(b))
        total += float(s)
        count += int(n)
    return total / max(count, 1)


# ---------------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------------


def _epoch_rng(seed: int, epoch: int) -> tuple[np.random.Generator, jax.Array]:
    """Data-order generator and dropout key of one epoch; a pure function of (seed, epoch) so a
    resumed run sees the same randomness as an uninterrupted one."""
    return np.random.default_rng([seed, epoch]), jax.random.fold_in(jax.random.key(seed), epoch)


def _check_features(task: Task, metadata: dict[str, Any], config: TrainConfig) -> None:
    """The model config must read the task's graphs (when the task names their feature spec)."""
    if "features" in metadata:
        config.model.features.check_matches(
            FeatureSpec.from_dict(metadata["features"]), "the model config", f"the {task.name} task's data"
        )


def _train_epoch(
    steps: _Steps, task: Task, config: TrainConfig, state: checkpoint.TrainState, train_part: np.ndarray
) -> float:
    """One epoch over ``train_part`` in the epoch's order; updates ``state``; the mean step loss."""
    rng, key = _epoch_rng(config.seed, state.epoch)
    order = np.asarray(task.train_order(train_part, rng, config.batch_size))
    losses = []
    for s, batch in enumerate(task.batches(train_part, config.batch_size, steps.mesh.size, order)):
        state.params, state.opt_state, loss = steps.train_step(
            state.params, state.opt_state, steps.put(batch), jax.random.fold_in(key, s)
        )
        losses.append(loss)
    return float(np.mean([float(x) for x in losses]))


def _record(state: checkpoint.TrainState, train_loss: float, val_loss: float) -> None:
    """Count the finished epoch, its losses, and the best epoch so far."""
    state.epoch += 1
    state.history["train_loss"].append(train_loss)
    state.history["val_loss"].append(val_loss)
    if val_loss < state.best_val:
        state.best_epoch, state.best_val, state.best_params, state.bad_epochs = (
            state.epoch,
            val_loss,
            state.params,
            0,
        )
    else:
        state.bad_epochs += 1


def _start_as_best(steps: _Steps, state: checkpoint.TrainState, val_batches: list[Any]) -> None:
    """Make the starting parameters the best so far (epoch 0, their validation loss): fine-tuning
    then keeps them unless an epoch does better on the validation examples."""
    state.best_val = _mean_loss(steps, state.params, val_batches)
    state.best_params, state.best_epoch, state.bad_epochs = state.params, 0, 0


def _run_epochs(
    steps: _Steps,
    task: Task,
    config: TrainConfig,
    state: checkpoint.TrainState,
    train_part: np.ndarray,
    val_batches: list[Any],
    state_file: Path | None,
    progress: bool,
) -> None:
    """Epochs until ``config.epochs`` or ``config.patience`` epochs without improvement."""
    bar = tqdm(
        total=config.epochs,
        initial=min(state.epoch, config.epochs),
        desc="epochs",
        disable=not progress,
        leave=False,
    )
    while state.epoch < config.epochs and state.bad_epochs < config.patience:
        train_loss = _train_epoch(steps, task, config, state, train_part)
        val_loss = _mean_loss(steps, state.params, val_batches)
        _record(state, train_loss, val_loss)
        bar.update(1)
        bar.set_postfix(train=f"{train_loss:.4f}", val=f"{val_loss:.4f}", best=f"{state.best_val:.4f}")
        if state_file is not None:
            checkpoint.save_train_state(state_file, state, config, task.metadata())
    bar.close()


def _initial_model(config: TrainConfig, task: Task, init_model: nnx.Module | None) -> nnx.Module:
    """A fresh model of ``config.model`` for the task, holding ``init_model``'s parameters when given
    (which must be a model of the same config)."""
    build = getattr(task, "make_model", None)
    rngs = nnx.Rngs(config.seed)
    model = make_model(config.model, rngs, task=task.name) if build is None else build(config.model, rngs)
    if init_model is not None:
        if getattr(init_model, "config", None) != config.model:
            raise ValueError(
                "init_model is a model of another config than config.model: fine-tune with its own config"
            )
        nnx.update(model, jax.tree.map(jnp.asarray, nnx.state(init_model, nnx.Param)))
    return model


def train_and_evaluate(
    task: Task,
    config: TrainConfig,
    train_part: np.ndarray,
    val_part: np.ndarray,
    workdir: str | os.PathLike | None = None,
    progress: bool = True,
    init_model: nnx.Module | None = None,
) -> TrainResult:
    """Train on the examples ``train_part`` of ``task``, early-stop on ``val_part``.

    Args:
      task: the learning problem (`Task`).
      config: hyperparameters.
      train_part, val_part: the task's example indices (e.g. kernel indices of a data set).
      workdir: when given, a resumable training state is saved there after every epoch
      (``train_state.msgpack``) and the best model in ``workdir/best`` (`tpucost.method.checkpoint.save`,
      with the task's metadata); a later call with the same workdir resumes after the last
      finished epoch.
      progress: show a tqdm bar.
      init_model: start from this model's parameters (fine-tuning; a model of ``config.model``)
      instead of a fresh initialisation; a resumed training state still takes precedence. The
      starting parameters compete as epoch 0: an epoch replaces them only with a lower validation
      loss, so the result is never worse on ``val_part`` than the model it started from.

    Returns:
      A `TrainResult` whose model holds the best-validation parameters.
    """
    train_part, val_part = np.asarray(train_part), np.asarray(val_part)
    if task.num_examples(train_part) == 0 or task.num_examples(val_part) == 0:
        raise ValueError("train_and_evaluate needs non-empty train and validation sets")
    metadata = task.metadata()
    _check_features(task, metadata, config)
    mesh = Mesh(np.array(jax.devices()), ("data",))
    model = _initial_model(config, task, init_model)
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    tx = _make_optimizer(config, math.ceil(task.num_examples(train_part) / config.batch_size) * config.epochs)
    state = checkpoint.TrainState(0, params, tx.init(params))
    state_file = Path(workdir) / TRAIN_STATE_FILE if workdir is not None else None
    if state_file is not None and state_file.exists():
        state = checkpoint.load_train_state(state_file, state, config, metadata)
    start_epoch = state.epoch
    steps = _Steps(task, graphdef, rest, tx, mesh)
    state.params = jax.device_put(state.params, steps.replicated)
    state.opt_state = jax.device_put(state.opt_state, steps.replicated)
    val_order = np.asarray(task.eval_order(val_part))
    val_batches = list(task.batches(val_part, config.eval_batch_size, mesh.size, val_order))
    if init_model is not None and state.epoch == 0:
        _start_as_best(steps, state, val_batches)
    _run_epochs(steps, task, config, state, train_part, val_batches, state_file, progress)
    if state.best_params is not None:
        model = nnx.merge(graphdef, jax.device_get(state.best_params), rest)
    result = TrainResult(
        history=state.history,
        best_epoch=state.best_epoch,
        best_val_loss=state.best_val,
        model=model,
        config=config,
        num_devices=mesh.size,
        start_epoch=start_epoch,
        metadata=metadata,
    )
    if workdir is not None:
        checkpoint.save(
            Path(workdir) / BEST_DIR,
            model,
            config,
            metadata,
            extra={
                "best_epoch": state.best_epoch,
                "best_val_loss": state.best_val,
                "history": state.history,
                "num_train": task.num_examples(train_part),
                "num_val": task.num_examples(val_part),
            },
        )
    return result
