"""Kernel models that read the device: the descriptor of the device that measured a kernel joins
its embedding, so that one model trains on several devices' kernels (the multi-device study).

`tpucost.method.models`' kernel models are a kernel embedding and a Dense head. Here the device's
descriptor features (``float32[Gp, D]``, `lab.descriptor.FEATURE_NAMES`, standardised by a
`DeviceNorm` fitted on the training devices, each device counted once) join that embedding late,
after pooling (`DeviceJoin`): a Dense layer encodes the device, its output is concatenated with the
kernel embedding and one hidden layer mixes the two before the head. One hidden layer, not a plain
concatenation into the head: a linear head would let the device add one offset to every kernel's
log runtime, while a compute-bound and a memory-bound kernel change speed by different factors from
one device to another. `make_device_model` builds `DeviceGraphSAGE` or `DeviceLSTM`.

`DeviceKernelTask` is `tpucost.method.tasks.kernel.KernelTask` with one row of device features per
kernel (``device``, float[K, D]: a data set of several devices' kernels trains one model); its
batches are `DeviceBatch`es and its metadata saves the norm (``"device_norm"`` in config.json, the
width D with it). `load_model` reads such a checkpoint (or an ordinary one), `predict` runs either.
A checkpoint's ``extra`` records its training devices' descriptors (`DESCRIPTORS_EXTRA`) and
dispatch overheads (`DISPATCH_EXTRA`), what `lab.device_cost_model.DeviceCostModel` reads.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from tpucost.files import read_json_object
from tpucost.method import checkpoint, losses
from tpucost.method.features import TPUCOST_FEATURES, FeatureSpec, KernelGraph
from tpucost.method.models import GraphSAGE, LSTMBaseline, ModelConfig
from tpucost.method.tasks import kernel as kernel_task
from tpucost.method.tasks.kernel import KernelBatch, KernelTask, TargetNorm, TrainedModel

__all__ = [
    "DESCRIPTORS_EXTRA",
    "DISPATCH_EXTRA",
    "MIN_DEVICE_STD",
    "DEVICE_CLIP",
    "DeviceNorm",
    "DeviceJoin",
    "DeviceGraphSAGE",
    "DeviceLSTM",
    "make_device_model",
    "DeviceBatch",
    "DeviceKernelTask",
    "DeviceKernelModel",
    "reads_device",
    "load_model",
    "predict",
]

#: The key of a checkpoint's ``extra`` that holds, for a model that reads the device, the
#: descriptor of every device it trained on (``{device_id: DeviceDescriptor.to_dict()}``).
DESCRIPTORS_EXTRA = "descriptors"
#: The key of a checkpoint's ``extra`` that holds each training device's dispatch overhead per
#: kernel (``{device_id: ns or None}``), for a model trained on several devices.
DISPATCH_EXTRA = "dispatch_ns_per_kernel_by_device"
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
    least `MIN_DEVICE_STD`. ``names`` are the features' names (`lab.descriptor.FEATURE_NAMES`
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
# The models
# ---------------------------------------------------------------------------------------------


class DeviceJoin(nnx.Module):
    """The device joins a kernel embedding: ``relu(Dense(concat(embedding, relu(Dense(device)))))``.

    float32[Gp, width] kernel embeddings and float32[Gp, D] device features -> float32[Gp, H].
    """

    def __init__(self, device_width: int, width: int, hidden: int, rngs: nnx.Rngs):
        self.device_encoder = nnx.Linear(device_width, hidden, rngs=rngs)
        self.mix = nnx.Linear(width + hidden, hidden, rngs=rngs)

    def __call__(self, embedding: jax.Array, device: jax.Array) -> jax.Array:
        encoded = nnx.relu(self.device_encoder(device.astype(jnp.float32)))
        return nnx.relu(self.mix(jnp.concatenate([embedding, encoded], axis=-1)))


def _checked(device: jax.Array | None, num_graphs: int, width: int) -> jax.Array:
    """``device`` float32[Gp, D], or ValueError saying what a model that reads the device needs."""
    if device is None:
        raise ValueError(
            f"this model reads the device: pass device=float32[{num_graphs}, {width}] "
            "(the descriptor's features, `lab.descriptor`)"
        )
    if tuple(device.shape) != (num_graphs, width):
        raise ValueError(
            f"device features have shape {tuple(device.shape)}, the model needs ({num_graphs}, {width})"
        )
    return device


class DeviceGraphSAGE(GraphSAGE):
    """`tpucost.method.models.GraphSAGE` whose pooled kernel embedding meets the device
    (``device_join``, `DeviceJoin`) before the head: ``model(graph, node_mask, graph_mask,
    device=float32[Gp, D])``."""

    def __init__(self, config: ModelConfig, device_width: int, rngs: nnx.Rngs):
        super().__init__(config, rngs)
        self.device_width = device_width
        self.device_join = DeviceJoin(device_width, config.hidden * len(config.pooling), config.hidden, rngs)
        self.head = nnx.Linear(config.hidden, 1, rngs=rngs)

    def __call__(self, graph, node_mask, graph_mask, seq_index=None, *, dropout_key=None, device=None):
        del seq_index
        device = _checked(device, graph.n_node.shape[0], self.device_width)
        pooled = self.pool(self.embed_nodes(graph, dropout_key=dropout_key), graph, node_mask)
        return jnp.where(graph_mask, self.head(self.device_join(pooled, device))[:, 0], 0.0)


class DeviceLSTM(LSTMBaseline):
    """`tpucost.method.models.LSTMBaseline` whose final state meets the device before the head."""

    def __init__(self, config: ModelConfig, device_width: int, rngs: nnx.Rngs):
        super().__init__(config, rngs)
        self.device_width = device_width
        self.device_join = DeviceJoin(device_width, config.hidden, config.hidden, rngs)
        self.head = nnx.Linear(config.hidden, 1, rngs=rngs)

    def __call__(self, graph, node_mask, graph_mask, seq_index=None, *, dropout_key=None, device=None):
        device = _checked(device, graph.n_node.shape[0], self.device_width)
        last, has_nodes = self.final_state(graph, node_mask, seq_index, dropout_key)
        return jnp.where(graph_mask & has_nodes, self.head(self.device_join(last, device))[:, 0], 0.0)


def make_device_model(
    config: ModelConfig, device_width: int, rngs: nnx.Rngs | int = 0
) -> DeviceGraphSAGE | DeviceLSTM:
    """A fresh kernel model of ``config`` that reads ``device_width`` device features."""
    if device_width < 1:
        raise ValueError(f"a model that reads the device needs device_width >= 1, got {device_width}")
    if config.features.num_config_features > 0:
        raise ValueError("a kernel model reads no configuration features")
    rngs = nnx.Rngs(rngs) if isinstance(rngs, int) else rngs
    return (DeviceGraphSAGE if config.kind == "gnn" else DeviceLSTM)(config, device_width, rngs)


# ---------------------------------------------------------------------------------------------
# The task
# ---------------------------------------------------------------------------------------------


class DeviceBatch(NamedTuple):
    """A `KernelBatch` and, per padded graph, its device's standardised features float32[Gp, D]
    (0 for padding), stacked along the same leading axis as the batch's leaves."""

    kernels: KernelBatch
    device: np.ndarray


def _padded(rows: np.ndarray, num_graphs: int, width: int) -> np.ndarray:
    out = np.zeros((num_graphs, width), np.float32)
    out[: len(rows)] = rows
    return out


@dataclasses.dataclass
class DeviceKernelTask(KernelTask):
    """The kernel task of a model that reads the device: ``device`` float[K, D] holds, per kernel,
    the raw descriptor features of the device that measured it, ``device_norm`` their
    standardisation (fit both with `DeviceKernelTask.fit`)."""

    device: np.ndarray | None = None
    device_norm: DeviceNorm | None = None

    def __post_init__(self):
        if self.device is None or self.device_norm is None:
            raise ValueError("a task that reads the device needs device rows and a device norm")
        self.device = np.asarray(self.device, np.float64)
        if self.device.shape != (len(self.dataset), self.device_norm.width):
            raise ValueError(
                f"device rows have shape {self.device.shape}; the data set has {len(self.dataset)} "
                f"kernels and the device norm {self.device_norm.width} features"
            )

    @classmethod
    def fit(
        cls,
        dataset: Any,
        train_part: Sequence[int],
        model: ModelConfig | None = None,
        device: np.ndarray | None = None,
        device_names: Sequence[str] = (),
    ) -> DeviceKernelTask:
        """The task whose target norm and device norm are fitted on the kernels ``train_part``;
        ``device_names`` names the columns of ``device`` (saved with the norm)."""
        if device is None or np.ndim(device) != 2:
            raise ValueError(
                f"a model that reads the device needs device=float[K, D], got {np.shape(device)}"
            )
        plain = KernelTask.fit(dataset, train_part, model)
        device = np.asarray(device, np.float64)
        norm = DeviceNorm.fit(device[np.asarray(train_part)], device_names)
        return cls(dataset, plain.norm, plain.with_sequences, device=device, device_norm=norm)

    def make_model(self, config: ModelConfig, rngs: nnx.Rngs) -> DeviceGraphSAGE | DeviceLSTM:
        """The model the training loop trains (`tpucost.method.train`): one that reads D features."""
        return make_device_model(config, self.device_norm.width, rngs)

    def batches(
        self, part: np.ndarray, batch_size: int, num_devices: int, order: np.ndarray
    ) -> Iterator[DeviceBatch]:
        """`KernelTask.batches`, each with its kernels' standardised device features."""
        part = np.asarray(part)
        plain = super().batches(part, batch_size, num_devices, order)
        for start, batch in zip(range(0, len(order), batch_size), plain, strict=True):
            chunks = np.array_split(part[order[start : start + batch_size]], num_devices)
            gp, width = batch.graph_mask.shape[1], self.device_norm.width
            rows = [_padded(self.device_norm.encode(self.device[c]), gp, width) for c in chunks]
            yield DeviceBatch(batch, np.stack(rows))

    def loss(self, model: nnx.Module, batch: DeviceBatch, dropout_key: jax.Array | None):
        """`KernelTask.loss`, the model given the batch's device features."""
        k = batch.kernels
        pred = model(
            k.graph, k.node_mask, k.graph_mask, k.seq_index, dropout_key=dropout_key, device=batch.device
        )
        per_kernel = losses.get(kernel_task.DEFAULT_LOSS)(
            pred[:, None], k.graph.globals, where=k.graph_mask[:, None]
        )
        return jnp.sum(jnp.where(k.graph_mask, per_kernel, 0.0)), k.graph_mask.sum()

    def metadata(self) -> dict[str, Any]:
        """`KernelTask.metadata` plus ``"device_norm"`` (`DeviceNorm.to_dict`)."""
        return {**super().metadata(), "device_norm": self.device_norm.to_dict()}


# ---------------------------------------------------------------------------------------------
# Checkpoints and prediction
# ---------------------------------------------------------------------------------------------


class DeviceKernelModel(NamedTuple):
    """A loaded checkpoint of a model that reads the device: `TrainedModel`'s fields and its norm."""

    model: nnx.Module
    norm: TargetNorm
    config: Any
    meta: dict[str, Any]
    device_norm: DeviceNorm


def reads_device(net: TrainedModel | DeviceKernelModel) -> bool:
    """Whether a loaded model (`load_model`) reads the device."""
    return isinstance(net, DeviceKernelModel)


def load_model(
    path_dir: str | os.PathLike, spec: FeatureSpec = TPUCOST_FEATURES, spec_of: str = "tpucost's featurize"
) -> TrainedModel | DeviceKernelModel:
    """A kernel-task checkpoint: a `DeviceKernelModel` when its config.json holds ``"device_norm"``,
    else `tpucost.method.tasks.kernel.load_model`'s `TrainedModel`. ValueError naming the file."""
    cfg_file = Path(path_dir) / checkpoint.CONFIG_FILE
    saved = read_json_object(cfg_file, "checkpoint") if cfg_file.is_file() else {}
    if "device_norm" not in saved:
        return kernel_task.load_model(path_dir, spec, spec_of)
    try:
        device_norm = DeviceNorm.from_dict(saved["device_norm"])
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        raise ValueError(f"checkpoint {cfg_file}: field 'device_norm': {err}") from err
    net = kernel_task.load_model(
        path_dir, spec, spec_of, build=lambda config, meta: make_device_model(config, device_norm.width)
    )
    return DeviceKernelModel(*net, device_norm)


class _Graphs:
    """Kernel graphs as the task's data (`tpucost.method.tasks.kernel.KernelData`; labels unused)."""

    features = TPUCOST_FEATURES

    def __init__(self, graphs: Sequence[KernelGraph]):
        self.graphs = list(graphs)
        self.runtime_ns = np.ones(len(self.graphs))

    def __len__(self) -> int:
        return len(self.graphs)

    def graph(self, i: int) -> KernelGraph:
        return self.graphs[i]


@jax.jit
def _predict_jit(graphdef_and_params, batch: DeviceBatch) -> jax.Array:
    graphdef, params, rest = graphdef_and_params
    k = nnx.merge(graphdef, params, rest)
    return k(
        batch.kernels.graph,
        batch.kernels.node_mask,
        batch.kernels.graph_mask,
        batch.kernels.seq_index,
        device=batch.device,
    )


def predict(
    model: nnx.Module,
    norm: TargetNorm,
    graphs: Sequence[KernelGraph],
    device: np.ndarray | None = None,
    device_norm: DeviceNorm | None = None,
    batch_size: int = 256,
) -> np.ndarray:
    """Predicted log(runtime_ns) float64[len(graphs)], in input order: `tpucost.method.tasks.kernel.predict`
    for a model that reads no device (``device`` None); for one that reads the device, for the
    device of ``device`` (raw descriptor features, float[D] for every kernel or float[n, D]),
    standardised with ``device_norm`` (the checkpoint's)."""
    if not isinstance(model, DeviceGraphSAGE | DeviceLSTM):
        if device is not None:
            raise ValueError("this model reads no device: pass device=None")
        return kernel_task.predict(model, norm, graphs, batch_size)
    if device is None or device_norm is None:
        raise ValueError(
            f"this model reads the device: pass device=float[{model.device_width}] (a descriptor's "
            "features(), `lab.descriptor`) and the checkpoint's device_norm"
        )
    if not graphs:
        return np.zeros((0,), np.float64)
    rows = np.asarray(device, np.float64)
    rows = np.broadcast_to(rows, (len(graphs), rows.shape[-1])) if rows.ndim == 1 else rows
    task = DeviceKernelTask(
        _Graphs(graphs), norm, model.config.kind == "lstm", device=rows, device_norm=device_norm
    )
    part = np.arange(len(graphs))
    order = task.eval_order(part)
    split = nnx.split(model, nnx.Param, ...)
    out = np.empty(len(graphs), np.float64)
    for start, batch in zip(
        range(0, len(order), batch_size), task.batches(part, batch_size, 1, order), strict=True
    ):
        idx = order[start : start + batch_size]
        out[idx] = np.asarray(_predict_jit(split, jax.tree.map(lambda x: x[0], batch)))[: len(idx)]
    return norm.decode(out)
