"""The tile-size task: rank the configurations (block shapes) of each kernel by runtime.

The paper's second task (Kaufman et al. 2021, Section 5.2, Table 3). An *example* is one kernel
(a problem: Pallas family + shape + dtype) with its C measured configurations; the model scores
every configuration and is trained with a loss over each kernel's list (`tpucost.method.losses`:
pairwise hinge or logistic rank loss, a listwise loss, or MSE on standardised log runtime as the
regression baseline). Runtimes of different kernels are never compared.

Shapes in a batch: G kernels padded to Gp graphs (`features.pad_to_bucket`), and C configurations
per kernel padded to Cp (the smallest power of two that fits, at most ``max_configs``; a kernel
with more configurations contributes a random subset of ``max_configs`` to each training batch
and all of them, in chunks, at prediction).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple, Protocol

import jax
import jax.numpy as jnp
import jraph
import numpy as np
from flax import nnx

from tpucost.method import checkpoint, features, losses, train
from tpucost.method.features import FeatureSpec, KernelGraph
from tpucost.method.models import ModelConfig
from tpucost.method.splits import Split
from tpucost.method.tasks.kernel import TargetNorm, TrainedModel, load_trained

__all__ = [
    "LOSSES",
    "METHOD_OF_LOSS",
    "METHODS",
    "DEFAULT_LOSS",
    "TileBatch",
    "TileData",
    "TileTask",
    "model_config",
    "train_config",
    "train_model",
    "predict",
    "dataset_scores",
    "default_model_dir",
    "load_model",
    "predicts_runtimes",
    "runtime_ns",
]

#: Losses a tile model can be trained with: every loss of `tpucost.method.losses.LOSSES`.
LOSSES: tuple[str, ...] = tuple(losses.LOSSES)
#: Table 3 row name of the model trained with each loss (`tpucost.method.losses.LOSSES`).
METHOD_OF_LOSS: dict[str, str] = {name: loss.model_name for name, loss in losses.LOSSES.items()}
#: The learned methods of Table 3 (one per loss), in the order of `tpucost.method.losses.LOSSES`.
METHODS: tuple[str, ...] = tuple(METHOD_OF_LOSS.values())
#: The bundled rank model's loss.
DEFAULT_LOSS = "hinge"
#: Allowed padded numbers of configurations per kernel.
CONFIG_BUCKETS: tuple[int, ...] = tuple(2**k for k in range(1, 12))


class TileBatch(NamedTuple):
    """One padded batch of kernels and their configurations (numpy, or stacked [D, ...] per device).

    Attributes:
      graph: padded `jraph.GraphsTuple` of the Gp kernel graphs.
      node_mask: bool[Np], real nodes.
      graph_mask: bool[Gp], real kernels.
      config_features: float32[Gp, Cp, Fc].
      config_mask: bool[Gp, Cp], real configurations.
      targets: float32[Gp, Cp], standardised log runtime (0 for padding).
    """

    graph: jraph.GraphsTuple
    node_mask: np.ndarray
    graph_mask: np.ndarray
    config_features: np.ndarray
    config_mask: np.ndarray
    targets: np.ndarray


class TileData(Protocol):
    """What the task reads of a tile data set (a `tpucost.experiments.data.tile.TileDataset`, or a stand-in in tests)."""

    features: FeatureSpec
    config_feature_names: Sequence[str]
    source: str

    def __len__(self) -> int: ...

    def graph(self, i: int) -> KernelGraph: ...

    def config_features(self, i: int) -> np.ndarray: ...

    def runtime_ns(self, i: int) -> np.ndarray: ...


def _config_bucket(needed: int) -> int:
    return features.bucket(max(needed, 2), CONFIG_BUCKETS, "configurations per kernel")


def _padded_batch(
    graphs: Sequence[features.KernelGraph],
    rows: Sequence[np.ndarray],
    targets: Sequence[np.ndarray],
    sizes: tuple[list[int], list[int], list[int]],
    num_configs: int,
) -> TileBatch:
    """Pad G kernels (graphs, config feature rows [C_g, Fc], targets [C_g]) to ``sizes`` (from
    `features.shared_buckets`) and ``num_configs`` configurations each."""
    padded, graph_mask, node_mask = features.pad_to_bucket(features.to_graphs_tuple(graphs), *sizes)
    num_graphs = len(graph_mask)
    width = rows[0].shape[1]
    feats = np.zeros((num_graphs, num_configs, width), np.float32)
    mask = np.zeros((num_graphs, num_configs), bool)
    y = np.zeros((num_graphs, num_configs), np.float32)
    for g, (r, t) in enumerate(zip(rows, targets, strict=True)):
        feats[g, : len(r)] = r
        mask[g, : len(r)] = True
        y[g, : len(t)] = t
    return TileBatch(padded, node_mask, graph_mask, feats, mask, y)


def _stack(per_device: list[tuple[list, list, list]]) -> TileBatch:
    """Pad the per-device chunks to common sizes and stack them along a leading [D] axis."""
    real = [c for c in per_device if c[0]]
    sizes = features.shared_buckets([c[0] for c in per_device])
    num_configs = _config_bucket(max(len(r) for c in real for r in c[1]))
    out = []
    for chunk in per_device:
        empty = not chunk[0]
        batch = _padded_batch(*(real[0] if empty else chunk), sizes, num_configs)
        if empty:  # a device without kernels: a copy of another with every mask False
            batch = batch._replace(
                node_mask=np.zeros_like(batch.node_mask),
                graph_mask=np.zeros_like(batch.graph_mask),
                config_mask=np.zeros_like(batch.config_mask),
            )
        out.append(batch)
    return jax.tree.map(lambda *xs: np.stack(xs), *out)


@dataclasses.dataclass
class TileTask:
    """The tile task for `tpucost.method.train.train_and_evaluate` (see `tpucost.method.train.Task`).

    Args:
      dataset: the kernels, their configurations and runtimes (`TileData`).
      norm: standardisation of log runtime (fit it on the TRAINING kernels: `TileTask.fit`).
      loss_name: a name in `LOSSES`.
      max_configs: most configurations of one kernel in one training batch.
    """

    dataset: TileData
    norm: TargetNorm
    loss_name: str = DEFAULT_LOSS
    max_configs: int = 32
    name: str = "tile"

    def __post_init__(self):
        self._loss_fn = losses.get(self.loss_name)

    @classmethod
    def fit(cls, dataset: TileData, train_part: Sequence[int], **kwargs: Any) -> TileTask:
        """A task whose target norm is fitted on the runtimes of the kernels ``train_part``."""
        runtimes = np.concatenate([dataset.runtime_ns(int(i)) for i in train_part])
        return cls(dataset, TargetNorm.fit(runtimes), **kwargs)

    def num_examples(self, part: Sequence[int]) -> int:
        return len(part)

    def train_order(self, part: np.ndarray, rng: np.random.Generator, batch_size: int) -> np.ndarray:
        """An epoch's order of the kernels ``part``: a random permutation (``batch_size`` unused)."""
        return rng.permutation(len(part))

    def eval_order(self, part: np.ndarray) -> np.ndarray:
        """The kernels ``part`` in their own order."""
        return np.arange(len(part))

    def _example(self, i: int, rng: np.random.Generator | None) -> tuple:
        rows, runtime = self.dataset.config_features(i), self.dataset.runtime_ns(i)
        if rng is not None and len(rows) > self.max_configs:
            keep = np.sort(rng.choice(len(rows), self.max_configs, replace=False))
            rows, runtime = rows[keep], runtime[keep]
        return self.dataset.graph(i), rows, self.norm.encode(runtime)

    def batches(
        self, part: np.ndarray, batch_size: int, num_devices: int, order: np.ndarray
    ) -> Iterator[TileBatch]:
        """Batches of the kernels ``part[order]``; config subsets are drawn from a generator seeded
        by the order (so each epoch's shuffled order also reshuffles the subsets, reproducibly)."""
        part = np.asarray(part)
        rng = np.random.default_rng(np.asarray(order[:16], dtype=np.int64))
        for start in range(0, len(order), batch_size):
            idx = part[order[start : start + batch_size]]
            chunks = []
            for p in np.array_split(idx, num_devices):
                examples = [self._example(int(i), rng) for i in p]
                chunks.append(
                    tuple(list(x) for x in zip(*examples, strict=True)) if examples else ([], [], [])
                )
            yield _stack(chunks)

    def loss(
        self, model: nnx.Module, batch: TileBatch, dropout_key: jax.Array | None
    ) -> tuple[jax.Array, jax.Array]:
        scores = model(
            batch.graph,
            batch.node_mask,
            batch.graph_mask,
            batch.config_features,
            batch.config_mask,
            dropout_key=dropout_key,
        )
        per_kernel = self._loss_fn(scores, batch.targets, where=batch.config_mask)
        return jnp.sum(jnp.where(batch.graph_mask, per_kernel, 0.0)), jnp.sum(batch.graph_mask)

    def metadata(self) -> dict[str, Any]:
        return {
            "task": self.name,
            "loss": self.loss_name,
            "max_configs": self.max_configs,
            "features": self.dataset.features.to_dict(),
            "norm": {"mean": self.norm.mean, "std": self.norm.std},
            "config_feature_names": list(self.dataset.config_feature_names),
            "source": self.dataset.source,
        }


def model_config(
    dataset: TileData, base: ModelConfig | None = None, config_join: str = "late"
) -> ModelConfig:
    """A GraphSAGE `ModelConfig` whose feature spec matches ``dataset`` (node and config features).

    Its ``kind`` is ``"gnn"`` (the tile model's graph side is GraphSAGE); that the model is the
    tile model is the task's choice: `tpucost.method.models.make_model` with ``task="tile"``."""
    base = base or ModelConfig(hidden=64, num_layers=3)
    return dataclasses.replace(base, kind="gnn", features=dataset.features, config_join=config_join)


# ---------------------------------------------------------------------------------------------
# Prediction
# ---------------------------------------------------------------------------------------------


@nnx.jit
def _scores_jit(model: nnx.Module, batch: TileBatch) -> jax.Array:
    return model(batch.graph, batch.node_mask, batch.graph_mask, batch.config_features, batch.config_mask)


def predict(
    model: nnx.Module,
    graphs: Sequence[features.KernelGraph],
    config_rows: Sequence[np.ndarray],
    chunk: int = 64,
) -> list[np.ndarray]:
    """Cost scores (lower = predicted faster), one float64[C_g] per kernel, for every configuration.

    Each kernel is scored alone, its configurations in chunks of ``chunk`` (padded to a bucket),
    so any number of configurations fits.
    """
    out = []
    for graph, rows in zip(graphs, config_rows, strict=True):
        parts = []
        for start in range(0, len(rows), chunk):
            r = np.asarray(rows[start : start + chunk], np.float32)
            batch = _padded_batch(
                [graph],
                [r],
                [np.zeros(len(r), np.float32)],
                features.shared_buckets([[graph]]),
                _config_bucket(len(r)),
            )
            parts.append(np.asarray(_scores_jit(model, batch))[0, : len(r)])
        out.append(np.concatenate(parts).astype(np.float64))
    return out


def dataset_scores(model: nnx.Module, dataset: TileData, part: Sequence[int]) -> list[np.ndarray]:
    """`predict` for the kernels ``part`` of a data set (every configuration of each)."""
    part = [int(i) for i in part]
    return predict(model, [dataset.graph(i) for i in part], [dataset.config_features(i) for i in part])


# ---------------------------------------------------------------------------------------------
# Checkpoints and training settings
# ---------------------------------------------------------------------------------------------


def default_model_dir(split: str = "random", loss: str = DEFAULT_LOSS) -> Path:
    """The bundled tile model ``tile-<split>-<loss>`` (trained on the bundled tile data)."""
    return checkpoint.bundled_checkpoints_dir() / f"tile-{split}-{loss}"


def load_model(
    path: str | os.PathLike | None = None, spec: FeatureSpec | None = None, spec_of: str = "the data"
) -> TrainedModel:
    """Load a tile model -> `TrainedModel` (model, target norm, config, metadata: loss, features),
    trained on feature spec ``spec`` (None: any).

    ``path`` is a checkpoint folder or a training workdir holding ``best/``; default: the bundled
    random-split rank model (`default_model_dir`). The same record as the kernel task's `load_model`.
    """
    path = Path(path or default_model_dir())
    if (path / train.BEST_DIR).is_dir():  # a training workdir: its best model
        path = path / train.BEST_DIR
    return load_trained(path, "tile", spec, spec_of)


def train_config(dataset: TileData, **changes: Any) -> train.TrainConfig:
    """The bundled tile models' training settings for ``dataset`` (16 kernels per batch, 40
    epochs, patience 8), with ``changes`` (e.g. ``epochs=10``) applied."""
    config = train.TrainConfig(model=model_config(dataset), batch_size=16, epochs=40, patience=8)
    return dataclasses.replace(config, **changes)


def train_model(
    dataset: TileData,
    split: Split,
    workdir: str | os.PathLike | None,
    config: train.TrainConfig | None = None,
    *,
    loss: str = DEFAULT_LOSS,
    progress: bool = True,
) -> train.TrainResult:
    """Train one tile model with ``loss`` on ``split.train`` (early stopping on ``split.val``;
    default settings: `train_config`); its best model is ``workdir/best`` (`load_model` reads it; None:
    kept in memory only)."""
    config = config or train_config(dataset)
    task = TileTask.fit(dataset, split.train, loss_name=loss)
    return train.train_and_evaluate(task, config, split.train, split.val, workdir=workdir, progress=progress)


def predicts_runtimes(meta: dict[str, Any]) -> bool:
    """Whether a tile model (its config.json) was trained with a regression loss, so that its
    scores are standardised log runtimes (`runtime_ns`); a rank model's only order one kernel."""
    return meta.get("loss") in losses.LOSSES and losses.LOSSES[meta["loss"]].regression and "norm" in meta


def runtime_ns(meta: dict[str, Any], scores: np.ndarray) -> np.ndarray:
    """Runtimes (ns) from the scores of a regression tile model (`predicts_runtimes`)."""
    return np.exp(TargetNorm.from_dict(meta["norm"]).decode(scores))
