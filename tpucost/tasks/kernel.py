"""The kernel task: predict each kernel's runtime (the paper's fusion task, Table 2).

An example is one kernel of a `tpucost.data.kernel.KernelDataset`; the target is its log(runtime_ns),
standardised with the mean and std of the TRAINING kernels (`TargetNorm`); the loss is the squared
error (`KernelTask`, for `tpucost.train.train_and_evaluate`). Batches are padded to buckets
(`tpucost.features.pad_to_bucket`), so each bucket combination compiles once.

The experiment of a split (`run_experiment`) trains the GNN and the LSTM baseline, fits the
analytical baseline (`tpucost.analytical`) and the constant baseline (`tpucost.baselines`: the
median runtime of each kernel kind) on the TRAINING part only, evaluates all four on the held-out
TEST programs (`evaluate_split`) and writes::

    out_dir/gnn/            checkpoint (`tpucost.checkpoint` folder, with this task's metadata)
    out_dir/lstm/           checkpoint
    out_dir/analytical.json fitted roofline + per-kind coefficients
    out_dir/constant.json   median log runtime per kernel kind
    out_dir/evaluation.json the Table-2 style results, split sizes, training histories and times

`load_method` reads one method of such a folder back as a predictor (what
`tpucost.costmodel.CostModel` serves); `evaluate_methods` scores the saved methods again and
`program_totals` compares whole-program estimates with measured wall times.

The split is by program (``random``, seed 0) or by family (``hard``): see `tpucost.data.kernel.split`.
Test labels are never used for training, early stopping or fitting coefficients. Evaluation is by
real program: each test program is scored on every kernel it ran (`tpucost.data.kernel.program_rows`),
grouped under that program, whatever part the kernel is in; the ``"unseen"`` figures keep only the
rows whose kernel is a test kernel (never seen in training), and the ``"structure_novel"`` figures
only the rows whose kernel's opcode graph no training kernel has at any shape
(`tpucost.data.kernel.structure_novel`): most unseen kernels are training kernels at other shapes.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple, Protocol

import jax
import jax.numpy as jnp
import jraph
import numpy as np
from flax import nnx
from tqdm import tqdm

from tpucost import analytical, baselines, checkpoint, evaluate, features, train
from tpucost.data import kernel as kernel_data
from tpucost.data import kernel_collection
from tpucost.data.kernel import KernelDataset
from tpucost.data.splits import Split
from tpucost.features import TPUCOST_FEATURES, FeatureSpec, KernelGraph
from tpucost.files import write_json_atomic
from tpucost.models import DEFAULT_LENGTH_BUCKETS, ModelConfig, sequence_index
from tpucost.programs import program_from_id

__all__ = [
    "METHODS",
    "TargetNorm",
    "KernelBatch",
    "KernelTask",
    "length_grouped_order",
    "KernelModel",
    "SavedMethod",
    "predict_log_ns",
    "load_model",
    "load_method",
    "run_experiment",
    "evaluate_split",
    "evaluate_methods",
    "opcode_errors",
    "program_totals",
]

#: The methods of an experiment folder, in table order: gnn, lstm, analytical, constant.
METHODS: tuple[str, ...] = ("gnn", "lstm", "analytical", "constant")
#: An experiment folder's analytical model.
ANALYTICAL_FILE = "analytical.json"
#: An experiment folder's constant baseline (`tpucost.baselines.KindMedianModel`).
CONSTANT_FILE = "constant.json"
#: The methods fitted in seconds from the training labels (no network): their file in an experiment folder.
FITTED_FILES = {"analytical": ANALYTICAL_FILE, "constant": CONSTANT_FILE}
#: An experiment folder's results.
EVALUATION_FILE = "evaluation.json"
#: A network's resumable training state is kept in ``<experiment folder>/<method>`` + this until it finishes.
TRAINING_SUFFIX = "-training"


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
    """One padded batch of kernels (numpy; or stacked along a leading [D] axis, one per device).

    Attributes:
      graph: padded `jraph.GraphsTuple` of Gp graphs, Np nodes; ``globals`` float32[Gp, 1] holds
      the standardised targets (0 for padding).
      node_mask: bool[Np], real nodes.
      graph_mask: bool[Gp], real kernels.
      seq_index: int32[Gp, L], each graph's nodes in order (`tpucost.models.sequence_index`), for
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
    """Pad the per-device chunks to common bucket sizes and stack them: leaves get a leading [D] axis.

    An empty chunk becomes a copy of another with all masks False (it contributes nothing).
    """
    real = [i for i, c in enumerate(chunks) if c]
    tuples = {i: features.to_graphs_tuple(chunks[i], targets[i]) for i in real}
    sizes = features.shared_buckets(chunks)
    per_device = []
    for i in range(len(chunks)):
        padded, graph_mask, node_mask = features.pad_to_bucket(tuples[i if i in tuples else real[0]], *sizes)
        if i not in tuples:
            graph_mask, node_mask = np.zeros_like(graph_mask), np.zeros_like(node_mask)
        per_device.append(KernelBatch(padded, node_mask, graph_mask))
    if with_seq:
        per_device = _with_sequences(per_device)
    return jax.tree.map(lambda *xs: np.stack(xs), *per_device)


class KernelData(Protocol):
    """What the task reads of a data set (a `tpucost.data.kernel.KernelDataset`, or a stand-in in tests)."""

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
    """The kernel task for `tpucost.train.train_and_evaluate` (see `tpucost.train.Task`).

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
        return cls(
            dataset,
            TargetNorm.fit(runtime[np.asarray(train_part)]),
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
        """Sum of squared errors on standardised log runtime, and the number of real kernels."""
        pred = model(batch.graph, batch.node_mask, batch.graph_mask, batch.seq_index, dropout_key=dropout_key)
        err = jnp.where(batch.graph_mask, (pred - batch.graph.globals[:, 0]) ** 2, 0.0)
        return err.sum(), batch.graph_mask.sum()

    def metadata(self) -> dict[str, Any]:
        """``{"task": "kernel", "norm": {"mean", "std"}, "features": the data's FeatureSpec dict}``."""
        return {"task": self.name, "norm": self.norm.to_dict(), "features": self.dataset.features.to_dict()}


# ---------------------------------------------------------------------------------------------
# Prediction
# ---------------------------------------------------------------------------------------------


@jax.jit
def _predict_jit(graphdef_and_params, batch: KernelBatch) -> jax.Array:
    graphdef, params, rest = graphdef_and_params
    model = nnx.merge(graphdef, params, rest)
    return model(batch.graph, batch.node_mask, batch.graph_mask, batch.seq_index)


def predict_log_ns(
    model: nnx.Module, norm: TargetNorm, graphs: Sequence[KernelGraph], batch_size: int = 256
) -> np.ndarray:
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
        batch = jax.tree.map(
            lambda x: x[0], _stacked_batch([[graphs[i] for i in idx]], [zeros[idx]], with_seq)
        )
        out[idx] = np.asarray(_predict_jit((graphdef, params, rest), batch))[: len(idx)]
    return norm.decode(out)


class KernelModel(NamedTuple):
    """A loaded kernel-task checkpoint: the model, its target norm, its config and all its metadata.

    ``config`` is the `tpucost.train.TrainConfig` when one was saved, else the `ModelConfig`.
    """

    model: nnx.Module
    norm: TargetNorm
    config: train.TrainConfig | ModelConfig
    meta: dict[str, Any]


def load_model(
    path_dir: str | os.PathLike, spec: FeatureSpec = TPUCOST_FEATURES, spec_of: str = "tpucost's featurize"
) -> KernelModel:
    """Load a kernel-task checkpoint folder (`tpucost.checkpoint.load`) trained on feature spec ``spec``.

    Raises:
      ValueError: a file or field is missing or corrupt (one line naming the file), the folder
        holds another task's model, or the model was trained on another feature spec.
    """
    saved = checkpoint.load(path_dir, spec, spec_of=spec_of)
    cfg_file = Path(path_dir) / checkpoint.CONFIG_FILE
    if saved.task != "kernel":
        raise ValueError(f"checkpoint {cfg_file}: a {saved.task!r} task model, not a kernel one")
    if "norm" not in saved.meta:
        raise ValueError(f"checkpoint {cfg_file} is missing field 'norm'")
    try:
        norm = TargetNorm.from_dict(saved.meta["norm"])
        config = train.TrainConfig.from_dict(saved.meta["train"]) if saved.meta.get("train") else saved.config
    except (KeyError, TypeError, ValueError) as err:
        raise ValueError(f"checkpoint {cfg_file}: field 'norm' or 'train': {err}") from err
    return KernelModel(saved.model, norm, config, saved.meta)


class SavedMethod(NamedTuple):
    """One method of an experiment folder, ready to predict (uncorrected: the training device's runtimes).

    Attributes:
      predict: graphs -> predicted runtime (ns) per graph, float64[n].
      meta: the checkpoint's metadata (``{"path": ...}`` for the analytical model).
      files: the files that make up the method (what a calibration key hashes).
      trained_on: the fingerprint of the device that measured its training labels, or None.
      dispatch_ns_per_kernel: that device's dispatch overhead per kernel, or None.
    """

    predict: Callable[[Sequence[KernelGraph]], np.ndarray]
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
    return SavedMethod(
        lambda graphs: np.exp(predict_log_ns(net.model, net.norm, graphs)),
        net.meta,
        sorted((root / method).glob("*")),
        extra.get("device"),
        extra.get("dispatch_ns_per_kernel"),
    )


# ---------------------------------------------------------------------------------------------
# Experiments: train every method of a split, evaluate on its test programs
# ---------------------------------------------------------------------------------------------


def _graphs(ds: KernelDataset, idx: np.ndarray) -> list[KernelGraph]:
    return [ds.graph(int(i)) for i in idx]


def _method_config(base: train.TrainConfig, kind: str) -> train.TrainConfig:
    return dataclasses.replace(base, model=dataclasses.replace(base.model, kind=kind))


def _training_dispatch_ns(dataset: KernelDataset, parts: Split) -> float | None:
    """Dispatch overhead per kernel over the training programs' measured pairs (None without a log)."""
    if dataset.root is None:
        return None
    return kernel_collection.dispatch_ns_per_kernel(
        kernel_collection.measured_runs(dataset.root, parts.train_ids)
    )


def _previous_report(path: Path, split: str, test_kernels: int, test_programs: int) -> dict[str, Any]:
    """An earlier ``evaluation.json`` of the same split and test part (kernels and programs), else {}."""
    if not path.exists():
        return {}
    report = json.loads(path.read_text())
    same = (
        report.get("split") == split
        and report.get("test_kernels") == test_kernels
        and report.get("test_programs") == test_programs
    )
    return report if same else {}


def _new_report(dataset: KernelDataset, split: str, parts: Split, data_dir: str | None) -> dict[str, Any]:
    """The header of ``evaluation.json``: the split's sizes, the device and the training dispatch overhead."""
    return {
        "split": split,
        "data": data_dir or str(dataset.root),
        "kernels": len(dataset),
        "train_kernels": len(parts.train),
        "val_kernels": len(parts.val),
        "test_kernels": len(parts.test),
        "train_programs": len(parts.train_ids),
        "val_programs": len(parts.val_ids),
        "test_programs": len(parts.test_ids),
        "train_configs": {},
        "results": {},
        "histories": {},
        "train_seconds": {},
        "backend": jax.default_backend(),
        "jax_version": jax.__version__,
        "device": dataset.device,
        "dispatch_ns_per_kernel": _training_dispatch_ns(dataset, parts),
    }


def _fit_baseline(
    method: str, dataset: KernelDataset, parts: Split, out: Path, report: dict[str, Any]
) -> None:
    """Fit a baseline of `FITTED_FILES` (``analytical`` or ``constant``) on the training kernels; write its file."""
    runtime, kinds = dataset.runtime_ns[parts.train], dataset.kind[parts.train]
    if method == "analytical":
        model: Any = analytical.AnalyticalModel()
        model.fit(_graphs(dataset, parts.train), runtime, kinds)
    else:
        model = baselines.KindMedianModel().fit(runtime, kinds)
    saved = {
        **json.loads(model.to_json()),
        "device": dataset.device,
        "dispatch_ns_per_kernel": report["dispatch_ns_per_kernel"],
    }
    write_json_atomic(out / FITTED_FILES[method], saved, indent=2)


def _train_network(
    dataset: KernelDataset,
    split: str,
    parts: Split,
    out: Path,
    config: train.TrainConfig,
    report: dict[str, Any],
    progress: bool,
) -> None:
    """Train one network (``config.model.kind``) and save its checkpoint under ``out/<kind>``.

    The training state is saved after every epoch in ``out/<kind>-training`` (`TRAINING_SUFFIX`),
    so a killed run resumes there with the same command; it is removed once the checkpoint is saved.
    """
    task = KernelTask.fit(dataset, parts.train, config.model)
    method = config.model.kind
    workdir = out / f"{method}{TRAINING_SUFFIX}"
    result = train.train_and_evaluate(
        task, config, parts.train, parts.val, workdir=workdir, progress=progress
    )
    checkpoint.save(
        out / method,
        result.model,
        result.config,
        task.metadata(),
        extra={
            "split": split,
            "best_epoch": result.best_epoch,
            "best_val_loss": result.best_val_loss,
            "device": dataset.device,
            "dispatch_ns_per_kernel": report["dispatch_ns_per_kernel"],
        },
    )
    shutil.rmtree(workdir)
    report["histories"][method] = result.history
    report["train_configs"][method] = result.config.to_dict()


def run_experiment(
    dataset: KernelDataset,
    split: str,
    out_dir: str | Path,
    config: train.TrainConfig | None = None,
    methods: Sequence[str] = METHODS,
    progress: bool = True,
    data_dir: str | None = None,
    parts: Split | None = None,
) -> dict[str, Any]:
    """Train/fit each method on the split's train part, evaluate on its test programs, save all.

    ``split`` names the split (`tpucost.data.kernel.split`), or, with ``parts`` given, labels
    that `Split` (e.g. ``"leave-out:recurrent"``, `tpucost.tasks.kernel_experiments`).
    Methods trained earlier into the same ``out_dir`` (same split) keep their entries in
    ``evaluation.json`` (their test figures computed again), so methods can be trained in separate
    calls with their own configs.
    Returns the content of ``evaluation.json``.
    """
    config = config or train.TrainConfig()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    parts = kernel_data.split(dataset, split) if parts is None else parts
    report = _new_report(dataset, split, parts, data_dir)
    previous = _previous_report(out / EVALUATION_FILE, split, len(parts.test), len(parts.test_ids))
    for key in ("train_configs", "results", "histories", "train_seconds"):
        report[key].update({m: v for m, v in previous.get(key, {}).items() if m not in methods})
    for method in report["results"]:  # trained earlier: scored again, with today's metrics
        saved = load_method(out, method, dataset.features, "the data set")
        report["results"][method] = evaluate_split(dataset, parts, saved.predict)
    for method in methods:
        start = time.perf_counter()
        if method in FITTED_FILES:
            _fit_baseline(method, dataset, parts, out, report)
        else:
            _train_network(dataset, split, parts, out, _method_config(config, method), report, progress)
        report["train_seconds"][method] = time.perf_counter() - start
        report["results"][method] = evaluate_split(
            dataset, parts, load_method(out, method, dataset.features, "the data set").predict
        )
    write_json_atomic(out / EVALUATION_FILE, report)
    return report


def evaluate_split(
    ds: KernelDataset, split: Split, predict: Callable[[list[KernelGraph]], np.ndarray]
) -> dict[str, Any]:
    """Metrics of ``predict`` (graphs -> ns, float[n]) on the test programs of ``split``.

    One row per (test program, kernel it ran), grouped under that program, labelled with the
    kernel's runtime. Returns the `tpucost.evaluate.runtime_metrics` dict of all rows, plus
    ``"unseen"`` (the same on the rows whose kernel is in ``split.test``), ``"structure_novel"``
    (on the rows whose kernel's opcode graph no kernel of ``split.train`` has,
    `tpucost.data.kernel.structure_novel`) and ``"n_programs_by_family"`` ({family: number of
    test programs}).
    """
    rows = kernel_data.program_rows(ds, split.test_ids)
    kernels, where = np.unique(rows.kernel, return_inverse=True)
    where = where.reshape(-1)
    pred = np.asarray(predict(_graphs(ds, kernels)), np.float64).reshape(-1)[where]
    true = ds.runtime_ns[rows.kernel]
    result = evaluate.runtime_metrics(pred, true, rows.program_id, rows.family)
    novel = kernel_data.structure_novel(ds, kernels, split.train)[where]
    for name, keep in (("unseen", np.isin(rows.kernel, split.test)), ("structure_novel", novel)):
        result[name] = evaluate.runtime_metrics(
            pred[keep], true[keep], rows.program_id[keep], rows.family[keep]
        )
    _, first = np.unique(rows.program_id, return_index=True)
    families, counts = np.unique(rows.family[first], return_counts=True)
    result["n_programs_by_family"] = {str(f): int(c) for f, c in zip(families, counts, strict=True)}
    return result


def opcode_errors(
    ds: KernelDataset,
    split: Split,
    predict: Callable[[list[KernelGraph]], np.ndarray],
    min_ns: float = 5_000.0,
) -> list[dict[str, Any]]:
    """Where the model is weak, by opcode: over the split's unseen test kernels of >= ``min_ns``,
    per HLO opcode (parameters aside) the kernels containing it, their MAPE and median APE (%),
    worst MAPE first. A kernel counts once for every opcode it holds."""
    kernels = split.test[ds.runtime_ns[split.test] >= min_ns]
    if not len(kernels):
        return []
    ape = 100 * np.abs(np.asarray(predict(_graphs(ds, kernels)), np.float64) / ds.runtime_ns[kernels] - 1)
    kernel, opcode = kernel_data.kernel_opcodes(ds, kernels)
    ape_of = ape[np.searchsorted(kernels, kernel)]
    rows = []
    for op in np.unique(opcode):
        name = features.OPCODE_VOCAB[int(op)]
        if name != "parameter":
            a = ape_of[opcode == op]
            rows.append(
                {
                    "opcode": name,
                    "kernels": len(a),
                    "mape": float(a.mean()),
                    "median_ape": float(np.median(a)),
                }
            )
    return sorted(rows, key=lambda r: -r["mape"])


def evaluate_methods(
    model_dir: str | Path, dataset: KernelDataset, split: str, methods: Sequence[str] = METHODS
) -> dict[str, dict[str, Any]]:
    """`evaluate_split` of each saved method of ``model_dir`` on the split's test programs
    (``{"gnn": {...}, ...}``); the raw predictions, for the device the models were trained on."""
    parts = kernel_data.split(dataset, split)
    where = f"data set {dataset.root}" if dataset.root is not None else "the data set"
    return {
        m: evaluate_split(dataset, parts, load_method(model_dir, m, dataset.features, where).predict)
        for m in methods
    }


class ProgramCostModel(Protocol):
    """What `program_totals` needs of a model (a `tpucost.costmodel.CostModel`)."""

    dispatch_ns_per_kernel: float

    def predict_program(self, fn: Callable[..., Any], *args: Any, compiler_options: Any = None) -> Any: ...


def program_totals(
    model: ProgramCostModel,
    data_dir: str | Path,
    program_ids: Sequence[str],
    min_wall_ns: float = 1e6,
    limit: int | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """``model.predict_program`` totals against the wall times measured when ``data_dir`` was collected.

    Takes the measured (program, configuration) pairs of ``program_ids`` (use test programs) whose wall
    time is at least ``min_wall_ns`` (at most ``limit`` of them, a fixed random choice), rebuilds
    and compiles each (never runs it) and predicts its total: kernels plus dispatch overhead.
    Returns the number of pairs, the median ratio predicted/measured, the median absolute error
    (%), the fraction within 10%, and the median ratio of the kernels alone (no dispatch overhead).
    """
    pairs = [e for e in kernel_collection.measured_runs(data_dir, program_ids) if e["wall_ns"] >= min_wall_ns]
    if limit is not None and len(pairs) > limit:
        pick = np.random.default_rng(0).choice(len(pairs), size=limit, replace=False)
        pairs = [pairs[i] for i in sorted(pick)]
    total, kernels_only = [], []
    for entry in tqdm(pairs, disable=not progress, desc="program totals", unit="program"):
        program = program_from_id(entry["program_id"])
        fn, options = program.configured(entry["configuration"])
        estimate = model.predict_program(fn, *program.args, compiler_options=options)
        total.append(estimate.total_ns / entry["wall_ns"])
        kernels_only.append(estimate.kernels_ns / entry["wall_ns"])
    ratio = np.asarray(total)
    if not len(ratio):
        return {"pairs": 0}
    return {
        "pairs": len(ratio),
        "median_ratio": float(np.median(ratio)),
        "median_ape": float(100 * np.median(np.abs(ratio - 1))),
        "within_10pct": float(np.mean(np.abs(ratio - 1) <= 0.1)),
        "median_ratio_kernels_only": float(np.median(kernels_only)),
        "dispatch_ns_per_kernel": model.dispatch_ns_per_kernel,
    }
