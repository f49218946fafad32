"""Training, evaluation, checkpoints and batched prediction for `tpucost.models`.

The fusion task of the paper: squared error on log(runtime_ns), standardised with the mean and
std of the TRAINING kernels. Batches are padded to buckets (`features.pad_to_bucket`), so each
bucket combination compiles once. Training is data parallel over all local devices: every step
stacks one padded batch per device along a new leading axis, sharded over a `jax.sharding.Mesh`
axis "data"; parameters and optimizer state are replicated (a no-op on one device).

Checkpoints use msgpack (`flax.serialization`) and JSON, never pickle.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import flax
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx, serialization
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P
from tqdm import tqdm  # text bars: no ipywidgets needed in notebooks

from tpucost import features
from tpucost.features import KernelGraph
from tpucost.models import DEFAULT_LENGTH_BUCKETS, ModelConfig, make_model, sequence_index

__all__ = [
    "TrainConfig",
    "TargetNorm",
    "TrainResult",
    "train_and_evaluate",
    "evaluate",
    "predict_log_ns",
    "save_checkpoint",
    "load_checkpoint",
    "TRAIN_STATE_FILE",
]

#: Name of the per-epoch resumable training state inside a workdir.
TRAIN_STATE_FILE = "train_state.msgpack"
#: Sub-directory of a workdir holding the best model (`save_checkpoint` format).
BEST_DIR = "best"


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


@dataclasses.dataclass(frozen=True)
class TargetNorm:
    """Standardisation of log(runtime_ns): z = (log(ns) - mean) / std (fitted on training kernels)."""

    mean: float
    std: float

    @classmethod
    def fit(cls, runtime_ns: np.ndarray) -> TargetNorm:
        y = np.log(np.asarray(runtime_ns, dtype=np.float64))
        return cls(float(y.mean()), float(max(y.std(), 1e-6)))

    def encode(self, runtime_ns: np.ndarray) -> np.ndarray:
        return ((np.log(np.asarray(runtime_ns, dtype=np.float64)) - self.mean) / self.std).astype(np.float32)

    def decode(self, z: np.ndarray) -> np.ndarray:
        """Standardised predictions -> log(runtime_ns)."""
        return np.asarray(z, dtype=np.float64) * self.std + self.mean


@dataclasses.dataclass
class TrainResult:
    """What `train_and_evaluate` returns.

    Attributes:
      history: {"train_loss": [...], "val_loss": [...]}, one entry per epoch run (MSE on
        standardised log runtime; train loss is the mean over the epoch's steps).
      best_epoch: 1-based epoch of the lowest validation loss (0 if no epoch ran).
      best_val_loss: that loss.
      model: the model holding the best-validation parameters.
      norm: the target standardisation.
      config: the training config.
      num_devices: devices the data-parallel steps ran on.
      start_epoch: epochs already done when this call started (>0 after a resume).
    """

    history: dict[str, list[float]]
    best_epoch: int
    best_val_loss: float
    model: nnx.Module
    norm: TargetNorm
    config: TrainConfig
    num_devices: int
    start_epoch: int = 0


# ---------------------------------------------------------------------------------------------
# Batching (numpy): one padded batch per device, stacked along a leading axis
# ---------------------------------------------------------------------------------------------


def _bucket(needed: int, buckets: Sequence[int]) -> int:
    for b in sorted(buckets):
        if b >= needed:
            return int(b)
    raise ValueError(f"need {needed} but the largest bucket is {max(buckets)}")


def _stacked_batch(chunks: list[list[KernelGraph]], targets: list[np.ndarray], with_seq: bool) -> dict:
    """Pad the per-device chunks to common bucket sizes and stack them: leaves get a leading [D] axis.

    An empty chunk becomes a copy of another with all masks False (it contributes nothing).
    """
    real = [i for i, c in enumerate(chunks) if c]
    tuples = {i: features.to_graphs_tuple(chunks[i], targets[i]) for i in real}
    n_nodes = max(int(t.n_node.sum()) for t in tuples.values()) + 1
    n_edges = max(int(t.n_edge.sum()) for t in tuples.values())
    n_graphs = max(max(len(chunks[i]) for i in real) + 1, 2)
    sizes = (
        [_bucket(n_nodes, features.DEFAULT_NODE_BUCKETS)],
        [_bucket(n_edges, features.DEFAULT_EDGE_BUCKETS)],
        [_bucket(n_graphs, features.DEFAULT_GRAPH_BUCKETS)],
    )
    per_dev = []
    for i in range(len(chunks)):
        padded, gmask, nmask = features.pad_to_bucket(tuples[i if i in tuples else real[0]], *sizes)
        if i not in tuples:
            gmask, nmask = np.zeros_like(gmask), np.zeros_like(nmask)
        item = {"graph": padded, "graph_mask": gmask, "node_mask": nmask}
        per_dev.append(item)
    if with_seq:
        lengths = [int(np.max(d["graph"].n_node[d["graph_mask"]], initial=1)) for d in per_dev]
        length_bucket = [_bucket(max(lengths), DEFAULT_LENGTH_BUCKETS)]
        for d in per_dev:
            d["seq_index"] = sequence_index(d["graph"].n_node, d["node_mask"], length_bucket)
    return jax.tree.map(lambda *xs: np.stack(xs), *per_dev)


def _step_batches(graphs: Sequence[KernelGraph], targets: np.ndarray, batch_size: int, num_devices: int,
                  order: np.ndarray, with_seq: bool) -> Iterator[dict]:
    for start in range(0, len(order), batch_size):
        idx = order[start : start + batch_size]
        parts = np.array_split(idx, num_devices)
        yield _stacked_batch([[graphs[i] for i in p] for p in parts], [targets[p] for p in parts], with_seq)


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


def _batch_loss(graphdef, params, rest, batch: dict, keys: jax.Array | None) -> tuple[jax.Array, jax.Array]:
    """Sum of squared errors and number of real graphs over a stacked [D, ...] batch."""

    def per_device(b, k):
        model = nnx.merge(graphdef, params, rest)
        pred = model(b["graph"], b["node_mask"], b["graph_mask"], b.get("seq_index"), dropout_key=k)
        err = jnp.where(b["graph_mask"], (pred - b["graph"].globals[:, 0]) ** 2, 0.0)
        return err.sum(), b["graph_mask"].sum()

    if keys is None:
        s, n = jax.vmap(lambda b: per_device(b, None))(batch)
    else:
        s, n = jax.vmap(per_device)(batch, keys)
    return s.sum(), n.sum()


class _Steps:
    """Jitted train / eval steps for one graphdef, optimizer and mesh."""

    def __init__(self, graphdef, rest, tx: optax.GradientTransformation, mesh: Mesh):
        self.mesh = mesh
        self.data = NamedSharding(mesh, P("data"))
        self.replicated = NamedSharding(mesh, P())

        def train_step(params, opt_state, batch, key):
            keys = jax.random.split(key, mesh.size)

            def loss_fn(p):
                s, n = _batch_loss(graphdef, p, rest, batch, keys)
                return s / jnp.maximum(n, 1), n

            (loss, _), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
            updates, opt_state = tx.update(grads, opt_state, params)
            return optax.apply_updates(params, updates), opt_state, loss

        def eval_step(params, batch):
            return _batch_loss(graphdef, params, rest, batch, None)

        self.train_step = jax.jit(train_step, out_shardings=self.replicated)
        self.eval_step = jax.jit(eval_step, out_shardings=self.replicated)

    def put(self, batch: dict) -> dict:
        return jax.device_put(batch, self.data)


def _evaluate(steps: _Steps, params, batches: Sequence[dict]) -> float:
    total, count = 0.0, 0
    for b in batches:
        s, n = steps.eval_step(params, steps.put(b))
        total += float(s)
        count += int(n)
    return total / max(count, 1)


def evaluate(model: nnx.Module, norm: TargetNorm, graphs: Sequence[KernelGraph], runtime_ns: np.ndarray,
             batch_size: int = 256) -> dict[str, float]:
    """MSE on standardised log runtime and median / mean absolute percentage error (in %)."""
    pred = predict_log_ns(model, norm, graphs, batch_size)
    z_err = (pred - np.log(runtime_ns)) / norm.std
    ape = np.abs(np.exp(pred) / np.asarray(runtime_ns) - 1.0) * 100.0
    return {"mse_std_log": float(np.mean(z_err**2)), "median_ape": float(np.median(ape)),
            "mean_ape": float(np.mean(ape))}


# ---------------------------------------------------------------------------------------------
# Serialisation helpers (msgpack, no pickle)
# ---------------------------------------------------------------------------------------------


def _str_keys(tree: Any) -> Any:
    if isinstance(tree, dict):
        return {str(k): _str_keys(v) for k, v in tree.items()}
    return np.asarray(tree)


def _restore_like(template: Any, loaded: Any, where: str = "params") -> Any:
    """Rebuild `template` (a pure dict of arrays, maybe with int keys) from str-keyed `loaded`."""
    if isinstance(template, dict):
        if not isinstance(loaded, dict):
            raise ValueError(f"checkpoint field {where} should be a dict")
        out = {}
        for k, v in template.items():
            if str(k) not in loaded:
                raise ValueError(f"checkpoint is missing field {where}/{k}")
            out[k] = _restore_like(v, loaded[str(k)], f"{where}/{k}")
        return out
    arr = np.asarray(loaded)
    if arr.shape != np.shape(template):
        raise ValueError(f"checkpoint field {where} has shape {arr.shape}, the model needs {np.shape(template)}")
    return arr.astype(np.asarray(template).dtype)


def _params_dict(model: nnx.Module) -> dict:
    return jax.tree.map(np.asarray, nnx.to_pure_dict(nnx.state(model, nnx.Param)))


def _load_params_into(model: nnx.Module, pure: dict) -> None:
    state = nnx.state(model, nnx.Param)
    nnx.replace_by_pure_dict(state, jax.tree.map(jnp.asarray, _restore_like(nnx.to_pure_dict(state), pure)))
    nnx.update(model, state)


def _leaves_dict(tree: Any) -> dict:
    return {str(i): np.asarray(x) for i, x in enumerate(jax.tree.leaves(tree))}


def _from_leaves(template: Any, loaded: dict, where: str) -> Any:
    leaves, treedef = jax.tree.flatten(template)
    if len(loaded) != len(leaves):
        raise ValueError(f"{where}: checkpoint has {len(loaded)} arrays, expected {len(leaves)}")
    new = []
    for i, t in enumerate(leaves):
        arr = np.asarray(loaded[str(i)])
        if arr.shape != np.shape(t):
            raise ValueError(f"{where}: array {i} has shape {arr.shape}, expected {np.shape(t)}")
        new.append(jnp.asarray(arr, dtype=jnp.asarray(t).dtype))
    return jax.tree.unflatten(treedef, new)


def _atomic_write_bytes(path: Path, blob: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(blob)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def save_checkpoint(path_dir: str | os.PathLike, model: nnx.Module, config: TrainConfig | ModelConfig,
                    norm: TargetNorm, extra: dict | None = None) -> Path:
    """Write ``params.msgpack`` and ``config.json`` to ``path_dir`` atomically (tmp dir, then rename).

    config.json holds the TrainConfig (or just the ModelConfig), the target mean/std, the feature
    layout fingerprint and version, jax/flax versions and ``extra`` (JSON-serialisable metadata).
    """
    path = Path(path_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(config, TrainConfig):
        cfg = {"train": config.to_dict(), "model": config.model.to_dict()}
    else:
        cfg = {"train": None, "model": config.to_dict()}
    meta = {
        **cfg,
        "norm": {"mean": norm.mean, "std": norm.std},
        "feature_layout": features.layout_fingerprint(),
        "feature_layout_version": features.FEATURE_LAYOUT_VERSION,
        "num_node_features": features.NUM_NODE_FEATURES,
        "jax_version": jax.__version__,
        "flax_version": flax.__version__,
        "extra": extra or {},
    }
    tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.tmp"))
    try:
        (tmp / "params.msgpack").write_bytes(serialization.msgpack_serialize(_str_keys(_params_dict(model))))
        (tmp / "config.json").write_text(json.dumps(meta, indent=2, sort_keys=True))
        old = None
        if path.exists():
            old = path.parent / f".{path.name}.old{os.getpid()}"
            os.replace(path, old)
        os.replace(tmp, path)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return path


def load_checkpoint(path_dir: str | os.PathLike) -> tuple[nnx.Module, TrainConfig | ModelConfig, TargetNorm, dict]:
    """Load a `save_checkpoint` directory -> (model, config, norm, meta).

    ``config`` is the TrainConfig when one was saved, else the ModelConfig.

    Raises:
      ValueError: a file or field is missing, a shape differs, or the checkpoint was trained on
        another feature layout (fingerprint mismatch).
    """
    path = Path(path_dir)
    cfg_file, params_file = path / "config.json", path / "params.msgpack"
    for f in (cfg_file, params_file):
        if not f.is_file():
            raise ValueError(f"checkpoint {path} is missing {f.name}")
    try:
        meta = json.loads(cfg_file.read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"checkpoint {cfg_file} is not valid JSON: {e}") from e
    for key in ("model", "norm", "feature_layout"):
        if key not in meta:
            raise ValueError(f"checkpoint {cfg_file} is missing field {key!r}")
    if meta["feature_layout"] != features.layout_fingerprint():
        raise ValueError(
            f"checkpoint {path} was trained on feature layout {meta['feature_layout'][:12]}... "
            f"(version {meta.get('feature_layout_version')}), but this tpucost uses "
            f"{features.layout_fingerprint()[:12]}... (version {features.FEATURE_LAYOUT_VERSION}); "
            "retrain the model or use the tpucost version it was trained with")
    model_cfg = ModelConfig.from_dict(meta["model"])
    config: TrainConfig | ModelConfig = (
        TrainConfig.from_dict(meta["train"]) if meta.get("train") else model_cfg)
    norm = TargetNorm(float(meta["norm"]["mean"]), float(meta["norm"]["std"]))
    model = make_model(model_cfg, 0)
    _load_params_into(model, serialization.msgpack_restore(params_file.read_bytes()))
    return model, config, norm, meta


# ---------------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------------


def _epoch_rng(seed: int, epoch: int) -> tuple[np.random.Generator, jax.Array]:
    """Data-order generator and dropout key of one epoch; a pure function of (seed, epoch) so a
    resumed run sees the same randomness as an uninterrupted one."""
    return np.random.default_rng([seed, epoch]), jax.random.fold_in(jax.random.key(seed), epoch)


def train_and_evaluate(config: TrainConfig, dataset, train_idx: np.ndarray, val_idx: np.ndarray,
                       workdir: str | os.PathLike | None = None, progress: bool = True) -> TrainResult:
    """Train on ``dataset[train_idx]``, early-stop on ``dataset[val_idx]``.

    Args:
      config: hyperparameters.
      dataset: a `tpucost.data.KernelDataset` (``graph(i)``, ``runtime_ns``).
      train_idx, val_idx: kernel indices.
      workdir: when given, a resumable training state is saved there after every epoch
        (``train_state.msgpack``) and the best model in ``workdir/best`` (`save_checkpoint`);
        a later call with the same workdir resumes after the last finished epoch.
      progress: show a tqdm bar.

    Returns:
      A `TrainResult` whose model holds the best-validation parameters.
    """
    train_idx, val_idx = np.asarray(train_idx), np.asarray(val_idx)
    if len(train_idx) == 0 or len(val_idx) == 0:
        raise ValueError("train_and_evaluate needs non-empty train and validation sets")
    runtime = np.asarray(dataset.runtime_ns, dtype=np.float64)
    norm = TargetNorm.fit(runtime[train_idx])
    train_graphs = [dataset.graph(int(i)) for i in train_idx]
    val_graphs = [dataset.graph(int(i)) for i in val_idx]
    y_train, y_val = norm.encode(runtime[train_idx]), norm.encode(runtime[val_idx])

    devices = jax.devices()
    mesh = Mesh(np.array(devices), ("data",))
    n_dev = len(devices)
    with_seq = config.model.kind == "lstm"
    steps_per_epoch = math.ceil(len(train_graphs) / config.batch_size)

    model = make_model(config.model, nnx.Rngs(config.seed))
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    tx = _make_optimizer(config, steps_per_epoch * config.epochs)
    opt_state = tx.init(params)
    steps = _Steps(graphdef, rest, tx, mesh)

    history: dict[str, list[float]] = {"train_loss": [], "val_loss": []}
    best = {"epoch": 0, "val": math.inf, "params": None, "bad": 0}
    start_epoch = 0
    state_file = Path(workdir) / TRAIN_STATE_FILE if workdir is not None else None
    if state_file is not None and state_file.exists():
        saved = serialization.msgpack_restore(state_file.read_bytes())
        if json.loads(saved["model_config"]) != config.model.to_dict():
            raise ValueError(f"{state_file} was written for another model config; use a fresh workdir")
        params = _from_leaves(params, saved["params"], "params")
        opt_state = _from_leaves(opt_state, saved["opt_state"], "opt_state")
        best_params = _from_leaves(params, saved["best_params"], "best_params")
        start_epoch = int(saved["epoch"])
        history = {k: [float(x) for x in saved["history"][k]] for k in history}
        best = {"epoch": int(saved["best_epoch"]), "val": float(saved["best_val"]), "params": best_params,
                "bad": int(saved["bad_epochs"])}

    params = jax.device_put(params, steps.replicated)
    opt_state = jax.device_put(opt_state, steps.replicated)
    val_order = np.argsort([g.num_nodes for g in val_graphs], kind="stable")  # less padding
    val_batches = list(_step_batches(val_graphs, y_val, config.eval_batch_size, n_dev, val_order, with_seq))

    bar = tqdm(total=config.epochs, initial=min(start_epoch, config.epochs), desc="epochs",
               disable=not progress, leave=False)
    epoch = start_epoch
    while epoch < config.epochs and best["bad"] < config.patience:
        rng, key = _epoch_rng(config.seed, epoch)
        order = rng.permutation(len(train_graphs))
        losses = []
        for s, batch in enumerate(_step_batches(train_graphs, y_train, config.batch_size, n_dev, order, with_seq)):
            params, opt_state, loss = steps.train_step(params, opt_state, steps.put(batch),
                                                       jax.random.fold_in(key, s))
            losses.append(loss)
        train_loss = float(np.mean([float(x) for x in losses]))
        val_loss = _evaluate(steps, params, val_batches)
        epoch += 1
        history["train_loss"].append(train_loss)
        history["val_loss"].append(val_loss)
        if val_loss < best["val"]:
            best.update(epoch=epoch, val=val_loss, params=params, bad=0)
        else:
            best["bad"] += 1
        bar.update(1)
        bar.set_postfix(train=f"{train_loss:.4f}", val=f"{val_loss:.4f}", best=f"{best['val']:.4f}")
        if state_file is not None:
            _save_train_state(state_file, config, epoch, params, opt_state, best, history)
    bar.close()

    if best["params"] is not None:
        model = nnx.merge(graphdef, jax.device_get(best["params"]), rest)
    result = TrainResult(history=history, best_epoch=best["epoch"], best_val_loss=best["val"], model=model,
                         norm=norm, config=config, num_devices=n_dev, start_epoch=start_epoch)
    if workdir is not None:
        save_checkpoint(Path(workdir) / BEST_DIR, model, config, norm,
                        extra={"best_epoch": best["epoch"], "best_val_loss": best["val"], "history": history,
                               "num_train": len(train_idx), "num_val": len(val_idx)})
    return result


def _save_train_state(path: Path, config: TrainConfig, epoch: int, params, opt_state, best: dict,
                      history: dict) -> None:
    state = {
        "epoch": epoch,
        "model_config": json.dumps(config.model.to_dict(), sort_keys=True),
        "train_config": json.dumps(config.to_dict(), sort_keys=True),
        "params": _leaves_dict(jax.device_get(params)),
        "opt_state": _leaves_dict(jax.device_get(opt_state)),
        "best_params": _leaves_dict(jax.device_get(best["params"] if best["params"] is not None else params)),
        "best_epoch": best["epoch"],
        "best_val": best["val"],
        "bad_epochs": best["bad"],
        "history": {k: list(v) for k, v in history.items()},
        "rng": {"seed": config.seed, "next_epoch": epoch},  # epoch randomness = f(seed, epoch)
    }
    _atomic_write_bytes(path, serialization.msgpack_serialize(state))


# ---------------------------------------------------------------------------------------------
# Prediction
# ---------------------------------------------------------------------------------------------


@jax.jit
def _predict_jit(graphdef_and_params, batch):
    graphdef, params, rest = graphdef_and_params
    model = nnx.merge(graphdef, params, rest)
    return model(batch["graph"], batch["node_mask"], batch["graph_mask"], batch.get("seq_index"))


def predict_log_ns(model: nnx.Module, norm: TargetNorm, graphs: Sequence[KernelGraph],
                   batch_size: int = 256) -> np.ndarray:
    """Predicted log(runtime_ns) float64[len(graphs)], in input order (one device, bucketed batches)."""
    if len(graphs) == 0:
        return np.zeros((0,), np.float64)
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    with_seq = isinstance(getattr(model, "config", None), ModelConfig) and model.config.kind == "lstm"
    order = np.argsort([g.num_nodes for g in graphs], kind="stable")  # similar sizes share a batch
    out = np.empty(len(graphs), np.float64)
    zeros = np.zeros(len(graphs), np.float32)
    for start in range(0, len(order), batch_size):
        idx = order[start : start + batch_size]
        batch = jax.tree.map(lambda x: x[0], _stacked_batch([[graphs[i] for i in idx]], [zeros[idx]], with_seq))
        pred = np.asarray(_predict_jit((graphdef, params, rest), batch))
        out[idx] = pred[: len(idx)]
    return norm.decode(out)
