"""The kernel task: predict each kernel's runtime (the paper's fusion task, Table 2).

An example is one kernel of a data set (`KernelData`: `tpucost.experiments.data.kernel.KernelDataset`
is one); the target is its log(runtime_ns), standardised with the mean and std of the TRAINING
kernels (`TargetNorm`); the loss is the squared error on that target (`tpucost.method.losses`,
``"mse"``), and `KernelTask` is what `tpucost.method.train.train_and_evaluate` trains. Batches are
padded to buckets (`tpucost.method.features.pad_to_bucket`), so each bucket combination compiles once.

`train_model` trains one network on a split, `predict` runs a trained model on kernel graphs (log
runtime), `load_model` reads one checkpoint (a `TrainedModel`, the record the tile task's
`load_model` returns too) and `load_method` one method of an experiment folder (a network, the
analytical model or the constant baseline) as a predictor, what `tpucost.method.costmodel.CostModel` serves. Training every method
of a split and scoring it (Table 2) is `tpucost.experiments.kernel_experiments.train_models`.

A model that reads the device (``ModelConfig.device_features`` D > 0) gets, with each kernel,
the descriptor features of the device that measured it (`tpucost.method.descriptor`): the task's
``device`` rows, float32[K, D] (one per kernel, so a data set of several devices' kernels trains
one model), standardised by a `DeviceNorm` fitted on the training devices and saved with the
checkpoint (``"device_norm"`` in its config.json). A model without a device is built, trained,
saved and loaded exactly as before.

Taught in notebook 03, sections 2-3. The tile task (`tpucost.method.tasks.tile`) has the same verbs.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple, Protocol

import jax
import jax.numpy as jnp
import jraph
import numpy as np
from flax import nnx

from tpucost.method import analytical, baselines, checkpoint, features, losses, train
from tpucost.method.features import TPUCOST_FEATURES, FeatureSpec, KernelGraph
from tpucost.method.models import DEFAULT_LENGTH_BUCKETS, ModelConfig, sequence_index
from tpucost.method.splits import Split

__all__ = [
    "LOSSES",
    "DEFAULT_LOSS",
    "METHODS",
    "DESCRIPTORS_EXTRA",
    "DISPATCH_EXTRA",
    "TargetNorm",
    "MIN_DEVICE_STD",
    "DEVICE_CLIP",
    "DeviceNorm",
    "KernelBatch",
    "KernelData",
    "KernelTask",
    "length_grouped_order",
    "TrainedModel",
    "SavedMethod",
    "predict",
    "default_model_dir",
    "load_model",
    "load_trained",
    "train_model",
    "load_method",
]

#: The kernel task's loss, a name in `tpucost.method.losses.LOSSES`: squared error on standardised log runtime.
DEFAULT_LOSS = "mse"
#: Losses a kernel model can be trained with: only `DEFAULT_LOSS` (the tile task has several).
LOSSES: tuple[str, ...] = (DEFAULT_LOSS,)
#: The methods of an experiment folder, in table order: gnn, lstm, analytical, constant.
METHODS: tuple[str, ...] = ("gnn", "lstm", "analytical", "constant")
#: An experiment folder's analytical model.
ANALYTICAL_FILE = "analytical.json"
#: An experiment folder's constant baseline (`tpucost.method.baselines.KindMedianModel`).
CONSTANT_FILE = "constant.json"
#: The methods fitted in seconds from the training labels (no network): their file in an experiment folder.
FITTED_FILES = {"analytical": ANALYTICAL_FILE, "constant": CONSTANT_FILE}
#: The key of a checkpoint's ``extra`` that holds, for a model that reads the device, the
#: descriptor of every device it trained on (``{device_id: DeviceDescriptor.to_dict()}``).
DESCRIPTORS_EXTRA = "descriptors"
#: The key of a checkpoint's ``extra`` that holds each training device's dispatch overhead per
#: kernel (``{device_id: ns or None}``), for a model trained on several devices.
DISPATCH_EXTRA = "dispatch_ns_per_kernel_by_device"


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

    def to_dict(self) -> dict[str, float]:
        return {"mean": self.mean, "std": self.std}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TargetNorm:
        return cls(float(d["mean"]), float(d["std"]))


#: The smallest standard deviation of a device feature (log units): a feature equal on every
#: training device would otherwise turn another device's small difference into a huge input.
MIN_DEVICE_STD = 0.1
#: Standardised device features are clipped to [-DEVICE_CLIP, DEVICE_CLIP]: a device far outside
#: the training devices is read as the nearest edge of what the model learned, not extrapolated.
DEVICE_CLIP = 4.0


@dataclasses.dataclass(frozen=True)
class DeviceNorm:
    """Standardisation of device descriptor features, fitted on the training devices.

    ``encode(x) = clip((x - mean) / std, -DEVICE_CLIP, DEVICE_CLIP)`` per feature; ``std`` is at
    least `MIN_DEVICE_STD`. ``names`` are the features' names (`tpucost.method.descriptor.FEATURE_NAMES`
    when the rows came from descriptors; empty when unknown).
    """

    mean: tuple[float, ...]
    std: tuple[float, ...]
    names: tuple[str, ...] = ()

    def __post_init__(self):
        object.__setattr__(self, "mean", tuple(float(x) for x in self.mean))
        object.__setattr__(self, "std", tuple(float(x) for x in self.std))
        object.__setattr__(self, "names", tuple(str(x) for x in self.names))
        if len(self.std) != len(self.mean) or (self.names and len(self.names) != len(self.mean)):
            raise ValueError(
                f"device norm: {len(self.mean)} means, {len(self.std)} stds and {len(self.names)} names"
            )
        if not all(np.isfinite(self.mean)) or not all(s > 0 and np.isfinite(s) for s in self.std):
            raise ValueError("device norm: means must be finite and stds positive")

    @property
    def width(self) -> int:
        """D, the number of device features."""
        return len(self.mean)

    @classmethod
    def fit(cls, rows: np.ndarray, names: Sequence[str] = ()) -> DeviceNorm:
        """Mean and std of each feature over the DISTINCT rows of ``rows`` float[K, D] (each device
        once, however many kernels it measured); std floored at `MIN_DEVICE_STD`."""
        rows = np.asarray(rows, np.float64)
        if rows.ndim != 2 or not len(rows):
            raise ValueError(f"device norm: fit needs rows float[K, D] with K >= 1, got shape {rows.shape}")
        if not np.all(np.isfinite(rows)):
            raise ValueError("device norm: device features must be finite")
        distinct = np.unique(rows, axis=0)
        return cls(
            tuple(distinct.mean(axis=0)),
            tuple(np.maximum(distinct.std(axis=0), MIN_DEVICE_STD)),
            tuple(names),
        )

    def encode(self, rows: np.ndarray) -> np.ndarray:
        """float32[..., D]: the standardised, clipped features of ``rows`` float[..., D]."""
        rows = np.asarray(rows, np.float64)
        if rows.shape[-1:] != (self.width,):
            raise ValueError(
                f"device features have width {rows.shape[-1:]}, the norm was fitted on {self.width}"
            )
        z = (rows - np.asarray(self.mean)) / np.asarray(self.std)
        return np.clip(z, -DEVICE_CLIP, DEVICE_CLIP).astype(np.float32)

    def to_dict(self) -> dict[str, list]:
        """``{"mean", "std", "names"}`` as lists (what a checkpoint's config.json holds)."""
        return {"mean": list(self.mean), "std": list(self.std), "names": list(self.names)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> DeviceNorm:
        """The inverse of `to_dict`."""
        return cls(tuple(d["mean"]), tuple(d["std"]), tuple(d.get("names", ())))


# ---------------------------------------------------------------------------------------------
# Batches
# ---------------------------------------------------------------------------------------------


class KernelBatch(NamedTuple):
    """One padded batch of kernels (numpy; or stacked along a leading [D] axis, one per device).

    Attributes:
      graph: padded `jraph.GraphsTuple` of Gp graphs, Np nodes; ``globals`` float32[Gp, 1] holds
      the standardised targets (0 for padding).
      node_mask: bool[Np], real nodes.
      graph_mask: bool[Gp], real kernels.
      seq_index: int32[Gp, L], each graph's nodes in order (`tpucost.method.models.sequence_index`), for
      the LSTM; None for the GNN.
      device: float32[Gp, D], the standardised descriptor features of the device that measured
      each kernel (0 for padding), for a model that reads the device; None otherwise. (The
      graph's ``globals`` hold the targets, so the device has a field of its own.)
    """

    graph: jraph.GraphsTuple
    node_mask: np.ndarray
    graph_mask: np.ndarray
    seq_index: np.ndarray | None = None
    device: np.ndarray | None = None


def _with_sequences(per_device: list[KernelBatch]) -> list[KernelBatch]:
    """Add ``seq_index`` to each device's batch, all padded to one length bucket."""
    lengths = [int(np.max(b.graph.n_node[b.graph_mask], initial=1)) for b in per_device]
    length_bucket = [features.bucket(max(lengths), DEFAULT_LENGTH_BUCKETS, "sequence length")]
    return [
        b._replace(seq_index=sequence_index(b.graph.n_node, b.node_mask, length_bucket)) for b in per_device
    ]


def _padded_rows(rows: np.ndarray | None, num_graphs: int) -> np.ndarray | None:
    """float32[num_graphs, D]: ``rows`` float32[n, D] followed by zero rows (None stays None)."""
    if rows is None:
        return None
    out = np.zeros((num_graphs, rows.shape[1]), np.float32)
    out[: len(rows)] = rows
    return out


def _stacked_batch(
    chunks: list[list[KernelGraph]],
    targets: list[np.ndarray],
    with_seq: bool,
    devices: list[np.ndarray] | None = None,
) -> KernelBatch:
    """Pad the per-device chunks to common bucket sizes and stack them: leaves get a leading [D] axis.

    ``devices``: per chunk, the standardised device features of its kernels (float32[n, D]), or
    None for a model that reads no device. An empty chunk becomes a copy of another with all masks
    False (it contributes nothing).
    """
    real = [i for i, c in enumerate(chunks) if c]
    tuples = {i: features.to_graphs_tuple(chunks[i], targets[i]) for i in real}
    sizes = features.shared_buckets(chunks)
    per_device = []
    for i in range(len(chunks)):
        source = i if i in tuples else real[0]
        padded, graph_mask, node_mask = features.pad_to_bucket(tuples[source], *sizes)
        if i not in tuples:
            graph_mask, node_mask = np.zeros_like(graph_mask), np.zeros_like(node_mask)
        rows = None if devices is None else _padded_rows(devices[source], len(graph_mask))
        per_device.append(KernelBatch(padded, node_mask, graph_mask, device=rows))
    if with_seq:
        per_device = _with_sequences(per_device)
    return jax.tree.map(lambda *xs: np.stack(xs), *per_device)


class KernelData(Protocol):
    """What the task reads of a data set (a `tpucost.experiments.data.kernel.KernelDataset`, or a stand-in in tests)."""

    features: FeatureSpec
    runtime_ns: np.ndarray

    def __len__(self) -> int: ...

    def graph(self, i: int) -> KernelGraph: ...


def length_grouped_order(
    order: np.ndarray, lengths: np.ndarray, batch_size: int, rng: np.random.Generator, window: int = 32
) -> np.ndarray:
    """``order`` rearranged so each batch of ``batch_size`` holds examples of similar length.

    ``order`` (a random permutation of ``range(len(lengths))``) is cut into windows of ``window``
    batches; each window is sorted by length and cut into batches, and the full batches of all
    windows are shuffled with ``rng`` (the one short batch, if any, stays last, so batches are
    still consecutive runs of ``batch_size``). Batches stay random in which examples meet and in
    what order they come, but a batch pads to a length near its own examples', not to the
    longest of a random draw. A permutation of ``order``.
    """
    order = np.asarray(order)
    lengths = np.asarray(lengths)
    span = window * batch_size
    grouped = np.concatenate(
        [c[np.argsort(lengths[c], kind="stable")] for c in np.split(order, range(span, len(order), span))]
        or [order]
    )
    full = len(grouped) // batch_size
    batches = grouped[: full * batch_size].reshape(full, batch_size)[rng.permutation(full)]
    return np.concatenate([batches.reshape(-1), grouped[full * batch_size :]])


@dataclasses.dataclass
class KernelTask:
    """The kernel task for `tpucost.method.train.train_and_evaluate` (see `tpucost.method.train.Task`).

    Args:
      dataset: the kernels and their runtimes (``graph(i)``, ``runtime_ns``, ``features``).
      norm: the target standardisation (fit it on the TRAINING kernels: `KernelTask.fit`).
      with_sequences: build the LSTM's ``seq_index`` in every batch.
      device: for a model that reads the device: per kernel, the (raw) descriptor features of the
      device that measured it, float[K, D]; None for a model that reads none.
      device_norm: their standardisation (fit it on the training kernels' devices: `KernelTask.fit`).
    """

    dataset: KernelData
    norm: TargetNorm
    with_sequences: bool = False
    name: str = "kernel"
    device: np.ndarray | None = None
    device_norm: DeviceNorm | None = None

    def __post_init__(self):
        if (self.device is None) != (self.device_norm is None):
            raise ValueError(
                "a kernel task reads the device with both device rows and a device norm, or neither"
            )
        if self.device is not None:
            self.device = np.asarray(self.device, np.float64)
            if self.device.shape != (len(self.dataset), self.device_norm.width):
                raise ValueError(
                    f"device rows have shape {self.device.shape}; the data set has {len(self.dataset)} "
                    f"kernels and the device norm {self.device_norm.width} features"
                )

    @classmethod
    def fit(
        cls,
        dataset: KernelData,
        train_part: Sequence[int],
        model: ModelConfig | None = None,
        device: np.ndarray | None = None,
        device_names: Sequence[str] = (),
    ) -> KernelTask:
        """The task whose target norm (and device norm) is fitted on the kernels ``train_part``,
        batching for ``model``.

        ``device`` (float[K, D], per kernel its device's descriptor features) is needed exactly
        when ``model`` reads the device (``model.device_features`` = D > 0); ``device_names``
        names its columns (saved with the norm).
        """
        runtime = np.asarray(dataset.runtime_ns, dtype=np.float64)
        train_part = np.asarray(train_part)
        width = 0 if model is None else model.device_features
        if model is not None and width and device is None:
            raise ValueError(f"the model reads the device ({width} features): pass device=float[K, {width}]")
        device_norm = None
        if device is not None:
            device = np.asarray(device, np.float64)
            if device.ndim != 2 or (model is not None and device.shape[1] != width):
                raise ValueError(
                    f"device rows have shape {device.shape}; the model reads {width} device features"
                )
            device_norm = DeviceNorm.fit(device[train_part], device_names)
        return cls(
            dataset,
            TargetNorm.fit(runtime[train_part]),
            with_sequences=model is not None and model.kind == "lstm",
            device=device,
            device_norm=device_norm,
        )

    def num_examples(self, part: Sequence[int]) -> int:
        return len(part)

    def _num_nodes(self, part: np.ndarray) -> np.ndarray:
        """int[len(part)]: each kernel's node count (what its batch is padded for)."""
        return np.array([self.dataset.graph(int(i)).num_nodes for i in np.asarray(part)], dtype=np.int64)

    def eval_order(self, part: np.ndarray) -> np.ndarray:
        """Kernels by size (stable): similar sizes share a batch, so batches carry less padding."""
        return np.argsort(self._num_nodes(part), kind="stable")

    def train_order(self, part: np.ndarray, rng: np.random.Generator, batch_size: int) -> np.ndarray:
        """An epoch's order of the kernels ``part``: a random permutation; for the LSTM, one whose
        batches hold kernels of similar length (`length_grouped_order`), since each LSTM batch
        is padded to its longest kernel."""
        order = rng.permutation(len(part))
        if not self.with_sequences:
            return order
        return length_grouped_order(order, self._num_nodes(part), batch_size, rng)

    def batches(
        self, part: np.ndarray, batch_size: int, num_devices: int, order: np.ndarray
    ) -> Iterator[KernelBatch]:
        """`KernelBatch`es of the kernels ``part[order]``, ``batch_size`` at a time, split over devices."""
        part = np.asarray(part)
        runtime = np.asarray(self.dataset.runtime_ns, dtype=np.float64)
        for start in range(0, len(order), batch_size):
            chunks = np.array_split(part[order[start : start + batch_size]], num_devices)
            yield _stacked_batch(
                [[self.dataset.graph(int(i)) for i in c] for c in chunks],
                [self.norm.encode(runtime[c]) for c in chunks],
                self.with_sequences,
                self._device_rows(chunks),
            )

    def _device_rows(self, chunks: list[np.ndarray]) -> list[np.ndarray] | None:
        """Per chunk of kernel indices, their standardised device features (None without a device)."""
        if self.device is None or self.device_norm is None:
            return None
        return [self.device_norm.encode(self.device[c]) for c in chunks]

    def loss(
        self, model: nnx.Module, batch: KernelBatch, dropout_key: jax.Array | None
    ) -> tuple[jax.Array, jax.Array]:
        """Sum of squared errors on standardised log runtime (the registered loss `DEFAULT_LOSS`, each
        kernel a list of one), and the number of real kernels."""
        pred = model(
            batch.graph,
            batch.node_mask,
            batch.graph_mask,
            batch.seq_index,
            dropout_key=dropout_key,
            **_device_input(batch),
        )
        per_kernel = losses.get(DEFAULT_LOSS)(
            pred[:, None], batch.graph.globals, where=batch.graph_mask[:, None]
        )
        return jnp.sum(jnp.where(batch.graph_mask, per_kernel, 0.0)), batch.graph_mask.sum()

    def metadata(self) -> dict[str, Any]:
        """``{"task": "kernel", "norm": {"mean", "std"}, "features": the data's FeatureSpec dict}``,
        plus ``"device_norm"`` (`DeviceNorm.to_dict`) when the task reads the device."""
        meta = {"task": self.name, "norm": self.norm.to_dict(), "features": self.dataset.features.to_dict()}
        if self.device_norm is not None:
            meta["device_norm"] = self.device_norm.to_dict()
        return meta


def train_model(
    dataset: KernelData,
    split: Split,
    workdir: str | os.PathLike | None,
    config: train.TrainConfig | None = None,
    *,
    progress: bool = True,
) -> train.TrainResult:
    """Train one kernel network (``config.model.kind``: the GNN by default) on ``split.train``, early
    stopping on ``split.val``; its best model is ``workdir/best`` (`load_model` reads it), and a killed
    run resumes from ``workdir`` (None: kept in memory only). The tile task's `train_model` has the same shape."""
    config = config or train.TrainConfig()
    task = KernelTask.fit(dataset, split.train, config.model)
    return train.train_and_evaluate(task, config, split.train, split.val, workdir=workdir, progress=progress)


# ---------------------------------------------------------------------------------------------
# Prediction
# ---------------------------------------------------------------------------------------------


def _device_input(batch: KernelBatch) -> dict[str, Any]:
    """The model's ``device`` keyword for ``batch``: only when the batch carries device features,
    so a model without a device is called exactly as before."""
    return {} if batch.device is None else {"device": batch.device}


@jax.jit
def _predict_jit(graphdef_and_params, batch: KernelBatch) -> jax.Array:
    graphdef, params, rest = graphdef_and_params
    model = nnx.merge(graphdef, params, rest)
    return model(batch.graph, batch.node_mask, batch.graph_mask, batch.seq_index, **_device_input(batch))


def _model_config(model: nnx.Module) -> ModelConfig | None:
    config = getattr(model, "config", None)
    return config if isinstance(config, ModelConfig) else None


def _prediction_rows(
    model: nnx.Module, n: int, device: np.ndarray | None, device_norm: DeviceNorm | None
) -> np.ndarray | None:
    """float32[n, D]: the standardised device features of ``n`` kernels for a model that reads the
    device (``device`` float[D] for all, or float[n, D]; encoded with ``device_norm`` when given);
    None for a model that reads none (ValueError when it is given one, or needs one and has none)."""
    config = _model_config(model)
    width = 0 if config is None else config.device_features
    if not width:
        if device is not None:
            raise ValueError(
                "this model reads no device (its config's device_features is 0): pass device=None"
            )
        return None
    if device is None:
        raise ValueError(
            f"this model reads the device: pass device=float[{width}] (a descriptor's features(), "
            "`tpucost.method.descriptor`) and the checkpoint's device_norm"
        )
    rows = np.asarray(device, np.float64)
    rows = np.broadcast_to(rows, (n, rows.shape[-1])) if rows.ndim == 1 else rows
    if rows.shape != (n, width):
        raise ValueError(f"device features have shape {rows.shape}, expected ({n}, {width}) or ({width},)")
    return device_norm.encode(rows) if device_norm is not None else rows.astype(np.float32)


def predict(
    model: nnx.Module,
    norm: TargetNorm,
    graphs: Sequence[KernelGraph],
    batch_size: int = 256,
    device: np.ndarray | None = None,
    device_norm: DeviceNorm | None = None,
) -> np.ndarray:
    """Predicted log(runtime_ns) float64[len(graphs)], in input order (one device, bucketed batches).

    For a model that reads the device: ``device`` is the descriptor features of the device to
    predict for (float[D], or float[len(graphs), D], one row per kernel), standardised with
    ``device_norm`` (the checkpoint's, `KernelModel.device_norm`; None: ``device`` is already
    standardised). A model that reads no device takes neither.
    """
    rows = _prediction_rows(model, len(graphs), device, device_norm)
    if len(graphs) == 0:
        return np.zeros((0,), np.float64)
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    config = _model_config(model)
    with_seq = config is not None and config.kind == "lstm"
    order = np.argsort([g.num_nodes for g in graphs], kind="stable")  # similar sizes share a batch
    out = np.empty(len(graphs), np.float64)
    zeros = np.zeros(len(graphs), np.float32)
    for start in range(0, len(order), batch_size):
        idx = order[start : start + batch_size]
        devices = None if rows is None else [rows[idx]]
        batch = jax.tree.map(
            lambda x: x[0], _stacked_batch([[graphs[i] for i in idx]], [zeros[idx]], with_seq, devices)
        )
        out[idx] = np.asarray(_predict_jit((graphdef, params, rest), batch))[: len(idx)]
    return norm.decode(out)


def default_model_dir(split: str = "random") -> Path:
    """The bundled experiment folder of a split (its methods' checkpoints and fitted files): ``tpucost.files.bundled_dir() / "checkpoints" / "kernel-<split>"``."""
    return checkpoint.bundled_checkpoints_dir() / f"kernel-{split}"


class TrainedModel(NamedTuple):
    """A loaded checkpoint of either task (`load_model` here and in `tpucost.method.tasks.tile`):
    the model, its target norm, its config and all its metadata.

    ``config`` is the `tpucost.method.train.TrainConfig` when one was saved, else the `ModelConfig`.
    """

    model: nnx.Module
    norm: TargetNorm
    config: train.TrainConfig | ModelConfig
    meta: dict[str, Any]

    @property
    def device_norm(self) -> DeviceNorm | None:
        """The standardisation of the device features (``meta["device_norm"]``, checked by
        `load_model`) for a model that reads the device, else None."""
        saved = self.meta.get("device_norm")
        return None if saved is None else DeviceNorm.from_dict(saved)

    @property
    def reads_device(self) -> bool:
        """Whether the model takes a device descriptor (``ModelConfig.device_features`` > 0)."""
        return "device_norm" in self.meta


def load_model(
    path: str | os.PathLike | None = None,
    spec: FeatureSpec | None = TPUCOST_FEATURES,
    spec_of: str = "tpucost's featurize",
) -> TrainedModel:
    """Load a kernel model -> `TrainedModel` (model, target norm, config, metadata), trained on
    feature spec ``spec`` (None: any).

    ``path`` is a checkpoint folder, an experiment folder (its ``gnn/``) or a training workdir holding
    ``best/`` (`train_model`); default: the bundled
    random-split GNN (`default_model_dir`). The same record as the tile task's `load_model`.

    Raises:
      ValueError: a file or field is missing or corrupt (one line naming the file), the folder
        holds another task's model, or the model was trained on another feature spec.
    """
    path = Path(path or default_model_dir())
    if (path / "gnn").is_dir():  # an experiment folder: its GNN
        path = path / "gnn"
    if (path / train.BEST_DIR).is_dir():  # a training workdir: its best model
        path = path / train.BEST_DIR
    return load_trained(path, "kernel", spec, spec_of)


def load_trained(
    path: str | os.PathLike, task: str, spec: FeatureSpec | None = None, spec_of: str = "the data"
) -> TrainedModel:
    """The checkpoint folder ``path`` (`tpucost.method.checkpoint.load`) of a ``task`` model
    (``"kernel"`` or ``"tile"``) with its target norm and training config: both tasks' `load_model`.

    Raises:
      ValueError: a file or field is missing or corrupt (one line naming the file), the folder
        holds another task's model, or the model was trained on another feature spec than ``spec``.
    """
    saved = checkpoint.load(path, spec, spec_of=spec_of)
    cfg_file = Path(path) / checkpoint.CONFIG_FILE
    if saved.task != task:
        raise ValueError(f"checkpoint {cfg_file}: a {saved.task!r} task model, not a {task} model")
    if "norm" not in saved.meta:
        raise ValueError(f"checkpoint {cfg_file} is missing field 'norm'")
    try:
        norm = TargetNorm.from_dict(saved.meta["norm"])
        config = train.TrainConfig.from_dict(saved.meta["train"]) if saved.meta.get("train") else saved.config
    except (KeyError, TypeError, ValueError) as err:
        raise ValueError(f"checkpoint {cfg_file}: field 'norm' or 'train': {err}") from err
    _check_device_norm(cfg_file, saved)
    return TrainedModel(saved.model, norm, config, saved.meta)


def _check_device_norm(cfg_file: Path, saved: checkpoint.SavedModel) -> None:
    """The checkpoint's device norm is there exactly when its model reads the device, of its width."""
    width = saved.config.device_features
    if "device_norm" not in saved.meta:
        if width:
            raise ValueError(
                f"checkpoint {cfg_file} is missing field 'device_norm' (its model reads the device)"
            )
        return
    try:
        device_norm = DeviceNorm.from_dict(saved.meta["device_norm"])
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        raise ValueError(f"checkpoint {cfg_file}: field 'device_norm': {err}") from err
    if device_norm.width != width:
        raise ValueError(
            f"checkpoint {cfg_file}: field 'device_norm' has {device_norm.width} features, the model reads {width}"
        )


class SavedMethod(NamedTuple):
    """One method of an experiment folder, ready to predict (uncorrected: the training device's runtimes).

    Attributes:
      predict: graphs -> predicted runtime (ns) per graph, float64[n]. A network that reads the
      device takes the device too: ``predict(graphs, device=features)`` (float[D], a descriptor's
      ``features()``, raw: the checkpoint's device norm standardises it).
      meta: the checkpoint's metadata (``{"path": ...}`` for the analytical model).
      files: the files that make up the method (what a calibration key hashes).
      trained_on: the fingerprint of the device that measured its training labels, or None.
      dispatch_ns_per_kernel: that device's dispatch overhead per kernel, or None.
      reads_device: whether ``predict`` needs ``device=`` (a network with ``device_features`` > 0).
    """

    predict: Callable[..., np.ndarray]
    meta: dict[str, Any]
    files: list[Path]
    trained_on: dict[str, Any] | None
    dispatch_ns_per_kernel: float | None
    reads_device: bool = False


def _not_trained(path: Path) -> FileNotFoundError:
    return FileNotFoundError(f"{path} not found: train with `python -m tpucost train --task kernel`")


def load_method(
    model_dir: str | os.PathLike,
    method: str,
    spec: FeatureSpec = TPUCOST_FEATURES,
    spec_of: str = "tpucost's featurize",
) -> SavedMethod:
    """Method ``method`` (one of `METHODS`) of the experiment folder ``model_dir``.

    The networks must have been trained on feature spec ``spec`` (the analytical model reads tpucost's own
    feature columns, so it needs `TPUCOST_FEATURES`). Raises FileNotFoundError when the method was
    not trained there, ValueError when it is corrupt or of another feature spec.
    """
    root = Path(model_dir)
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if method in FITTED_FILES:
        path = root / FITTED_FILES[method]
        if not path.exists():
            raise _not_trained(path)
        TPUCOST_FEATURES.check_matches(spec, f"the {method} model {path}", spec_of)
        saved = json.loads(path.read_text())
        fitted = analytical.AnalyticalModel if method == "analytical" else baselines.KindMedianModel
        model = fitted.from_json(saved)
        return SavedMethod(
            model.predict,
            {"path": str(path)},
            [path],
            saved.get("device"),
            saved.get("dispatch_ns_per_kernel"),
        )
    if not (root / method).exists():
        raise _not_trained(root / method)
    net = load_model(root / method, spec, spec_of)
    extra = net.meta.get("extra", {})

    def predict_ns(graphs: Sequence[KernelGraph], device: np.ndarray | None = None) -> np.ndarray:
        return np.exp(predict(net.model, net.norm, graphs, device=device, device_norm=net.device_norm))

    return SavedMethod(
        predict_ns,
        net.meta,
        sorted((root / method).glob("*")),
        extra.get("device"),
        extra.get("dispatch_ns_per_kernel"),
        net.reads_device,
    )
