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
    "TargetNorm",
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


# ---------------------------------------------------------------------------------------------
# Batches
# ---------------------------------------------------------------------------------------------


class KernelBatch(NamedTuple):
    """One padded batch of kernels (numpy; or stacked along a leading axis, one per JAX device).

    Attributes:
      graph: padded `jraph.GraphsTuple` of Gp graphs, Np nodes; ``globals`` float32[Gp, 1] holds
      the standardised targets (0 for padding).
      node_mask: bool[Np], real nodes.
      graph_mask: bool[Gp], real kernels.
      seq_index: int32[Gp, L], each graph's nodes in order (`tpucost.method.models.sequence_index`), for
      the LSTM; None for the GNN.
    """

    graph: jraph.GraphsTuple
    node_mask: np.ndarray
    graph_mask: np.ndarray
    seq_index: np.ndarray | None = None


def _with_sequences(per_device: list[KernelBatch]) -> list[KernelBatch]:
    """Add ``seq_index`` to each device's batch, all padded to one length bucket."""
    lengths = [int(np.max(b.graph.n_node[b.graph_mask], initial=1)) for b in per_device]
    length_bucket = [features.bucket(max(lengths), DEFAULT_LENGTH_BUCKETS, "sequence length")]
    return [
        b._replace(seq_index=sequence_index(b.graph.n_node, b.node_mask, length_bucket)) for b in per_device
    ]


def _stacked_batch(chunks: list[list[KernelGraph]], targets: list[np.ndarray], with_seq: bool) -> KernelBatch:
    """Pad the per-device chunks to common bucket sizes and stack them: leaves get a leading axis.

    An empty chunk becomes a copy of another with all masks False (it contributes nothing).
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
        per_device.append(KernelBatch(padded, node_mask, graph_mask))
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
    """

    dataset: KernelData
    norm: TargetNorm
    with_sequences: bool = False
    name: str = "kernel"

    @classmethod
    def fit(
        cls, dataset: KernelData, train_part: Sequence[int], model: ModelConfig | None = None
    ) -> KernelTask:
        """The task whose target norm is fitted on the kernels ``train_part``, batching for ``model``."""
        runtime = np.asarray(dataset.runtime_ns, dtype=np.float64)
        train_part = np.asarray(train_part)
        return cls(
            dataset,
            TargetNorm.fit(runtime[train_part]),
            with_sequences=model is not None and model.kind == "lstm",
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
            )

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
        )
        per_kernel = losses.get(DEFAULT_LOSS)(
            pred[:, None], batch.graph.globals, where=batch.graph_mask[:, None]
        )
        return jnp.sum(jnp.where(batch.graph_mask, per_kernel, 0.0)), batch.graph_mask.sum()

    def metadata(self) -> dict[str, Any]:
        """``{"task": "kernel", "norm": {"mean", "std"}, "features": the data's FeatureSpec dict}``."""
        return {"task": self.name, "norm": self.norm.to_dict(), "features": self.dataset.features.to_dict()}


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


@jax.jit
def _predict_jit(graphdef_and_params, batch: KernelBatch) -> jax.Array:
    graphdef, params, rest = graphdef_and_params
    model = nnx.merge(graphdef, params, rest)
    return model(batch.graph, batch.node_mask, batch.graph_mask, batch.seq_index)


def _model_config(model: nnx.Module) -> ModelConfig | None:
    config = getattr(model, "config", None)
    return config if isinstance(config, ModelConfig) else None


def predict(
    model: nnx.Module,
    norm: TargetNorm,
    graphs: Sequence[KernelGraph],
    batch_size: int = 256,
) -> np.ndarray:
    """Predicted log(runtime_ns) float64[len(graphs)], in input order (one device, bucketed batches)."""
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
        batch = jax.tree.map(
            lambda x: x[0], _stacked_batch([[graphs[i] for i in idx]], [zeros[idx]], with_seq)
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


def load_model(
    path: str | os.PathLike | None = None,
    spec: FeatureSpec | None = TPUCOST_FEATURES,
    spec_of: str = "tpucost's featurize",
    build: checkpoint.Build | None = None,
) -> TrainedModel:
    """Load a kernel model -> `TrainedModel` (model, target norm, config, metadata), trained on
    feature spec ``spec`` (None: any).

    ``path`` is a checkpoint folder, an experiment folder (its ``gnn/``) or a training workdir holding
    ``best/`` (`train_model`); default: the bundled
    random-split GNN (`default_model_dir`). The same record as the tile task's `load_model`;
    ``build`` is passed on to `tpucost.method.checkpoint.load`.

    Raises:
      ValueError: a file or field is missing or corrupt (one line naming the file), the folder
        holds another task's model, or the model was trained on another feature spec.
    """
    path = Path(path or default_model_dir())
    if (path / "gnn").is_dir():  # an experiment folder: its GNN
        path = path / "gnn"
    if (path / train.BEST_DIR).is_dir():  # a training workdir: its best model
        path = path / train.BEST_DIR
    return load_trained(path, "kernel", spec, spec_of, build)


def load_trained(
    path: str | os.PathLike,
    task: str,
    spec: FeatureSpec | None = None,
    spec_of: str = "the data",
    build: checkpoint.Build | None = None,
) -> TrainedModel:
    """The checkpoint folder ``path`` (`tpucost.method.checkpoint.load`) of a ``task`` model
    (``"kernel"`` or ``"tile"``) with its target norm and training config: both tasks' `load_model`.

    Raises:
      ValueError: a file or field is missing or corrupt (one line naming the file), the folder
        holds another task's model, or the model was trained on another feature spec than ``spec``.
    """
    saved = checkpoint.load(path, spec, spec_of=spec_of, build=build)
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
    return TrainedModel(saved.model, norm, config, saved.meta)


class SavedMethod(NamedTuple):
    """One method of an experiment folder, ready to predict (uncorrected: the training device's runtimes).

    Attributes:
      predict: graphs -> predicted runtime (ns) per graph, float64[n].
      meta: the checkpoint's metadata (``{"path": ...}`` for the analytical model).
      files: the files that make up the method (what a calibration key hashes).
      trained_on: the fingerprint of the device that measured its training labels, or None.
      dispatch_ns_per_kernel: that device's dispatch overhead per kernel, or None.
    """

    predict: Callable[..., np.ndarray]
    meta: dict[str, Any]
    files: list[Path]
    trained_on: dict[str, Any] | None
    dispatch_ns_per_kernel: float | None


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

    def predict_ns(graphs: Sequence[KernelGraph]) -> np.ndarray:
        return np.exp(predict(net.model, net.norm, graphs))

    return SavedMethod(
        predict_ns,
        net.meta,
        sorted((root / method).glob("*")),
        extra.get("device"),
        extra.get("dispatch_ns_per_kernel"),
    )
