"""The tile-size task: rank the configurations (block shapes) of each kernel by runtime.

The paper's second task (Kaufman et al. 2021, Section 5.2, Table 3). An *example* is one kernel
(a problem: Pallas family + shape + dtype) with its C measured configurations; the model scores
every configuration and is trained with a loss over each kernel's list (`tpucost.losses`:
pairwise hinge or logistic rank loss, a listwise loss, or MSE on standardised log runtime as the
regression baseline). Runtimes of different kernels are never compared.

Shapes in a batch: G kernels padded to Gp graphs (`features.pad_to_bucket`), and C configurations
per kernel padded to Cp (the smallest power of two that fits, at most ``max_configs``; a kernel
with more configurations contributes a random subset of ``max_configs`` to each training batch
and all of them, in chunks, at prediction).
"""

from __future__ import annotations

import dataclasses
import math
import os
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import jraph
import numpy as np
import pandas as pd
from flax import nnx

from tpucost import analytical, checkpoint, evaluate, features, losses, tiles, train
from tpucost.data import tile as tile_data
from tpucost.data.splits import Split
from tpucost.files import read_json_object, write_json_atomic
from tpucost.models import ModelConfig
from tpucost.tasks.kernel import TargetNorm

__all__ = [
    "TileBatch",
    "TileTask",
    "LOSS_NAMES",
    "tile_model_config",
    "predict_scores",
    "tile_train_config",
    "train_tile_model",
    "train_tile_models",
    "evaluate_tile_models",
    "default_tile_model_dir",
    "load_tile_model",
    "suggest_tiles",
    "dataset_scores",
    "analytical_scores",
    "fewest_steps_scores",
    "largest_block_scores",
    "largest_block_order",
    "HEURISTICS",
    "score_tile_models",
    "MODEL_NAMES",
    "predicts_runtimes",
    "runtime_ns",
    "seed_spread",
    "seed_summary",
    "seed_runs",
]

#: Losses a tile model can be trained with: every loss of `tpucost.losses.LOSSES`.
LOSS_NAMES: tuple[str, ...] = tuple(losses.LOSSES)
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
    """The tile task for `tpucost.train.train_and_evaluate` (see `tpucost.train.Task`).

    Args:
      dataset: a `tpucost.data.tile.TileDataset`.
      norm: standardisation of log runtime (fit it on the TRAINING kernels: `TileTask.fit`).
      loss_name: a name in `LOSS_NAMES`.
      max_configs: most configurations of one kernel in one training batch.
    """

    dataset: tile_data.TileDataset
    norm: TargetNorm
    loss_name: str = DEFAULT_LOSS
    max_configs: int = 32
    name: str = "tile"

    def __post_init__(self):
        self._loss_fn = losses.rank_loss(self.loss_name)

    @classmethod
    def fit(cls, dataset: tile_data.TileDataset, train_part: Sequence[int], **kwargs: Any) -> TileTask:
        """A task whose target norm is fitted on the runtimes of the kernels ``train_part``."""
        runtimes = np.concatenate([dataset.runtime_ns(int(i)) for i in train_part])
        return cls(dataset, TargetNorm.fit(runtimes), **kwargs)

    def num_examples(self, part: Sequence[int]) -> int:
        return len(part)

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


def tile_model_config(
    dataset: tile_data.TileDataset, base: ModelConfig | None = None, config_join: str = "late"
) -> ModelConfig:
    """A GraphSAGE `ModelConfig` whose feature spec matches ``dataset`` (node and config features)."""
    base = base or ModelConfig(hidden=64, num_layers=3)
    return dataclasses.replace(base, kind="gnn", features=dataset.features, config_join=config_join)


# ---------------------------------------------------------------------------------------------
# Prediction
# ---------------------------------------------------------------------------------------------


@nnx.jit
def _scores_jit(model: nnx.Module, batch: TileBatch) -> jax.Array:
    return model(batch.graph, batch.node_mask, batch.graph_mask, batch.config_features, batch.config_mask)


def predict_scores(
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


def dataset_scores(
    model: nnx.Module, dataset: tile_data.TileDataset, part: Sequence[int]
) -> list[np.ndarray]:
    """`predict_scores` for the kernels ``part`` of a data set (every configuration of each)."""
    part = [int(i) for i in part]
    return predict_scores(model, [dataset.graph(i) for i in part], [dataset.config_features(i) for i in part])


# ---------------------------------------------------------------------------------------------
# Experiments: the bundled models and Table 3
# ---------------------------------------------------------------------------------------------


def default_tile_model_dir(split: str = "random", loss: str = DEFAULT_LOSS) -> Path:
    """The bundled tile model ``tile-<split>-<loss>`` (trained on the bundled tile data)."""
    return checkpoint.bundled_checkpoints_dir() / f"tile-{split}-{loss}"


def load_tile_model(path: str | os.PathLike | None = None) -> tuple[nnx.Module, dict[str, Any]]:
    """Load a tile model -> (model, its config.json with the task metadata: loss, norm, features).

    ``path`` is a checkpoint folder or a training workdir holding ``best/``; default: the bundled
    random-split rank model.
    """
    path = Path(path or default_tile_model_dir())
    if (path / train.BEST_DIR).is_dir():  # a training workdir: its best model
        path = path / train.BEST_DIR
    saved = checkpoint.load(path)
    if saved.task != "tile":
        raise ValueError(f"checkpoint {path} is a {saved.task!r} model, not a tile model")
    return saved.model, saved.meta


def tile_train_config(dataset: tile_data.TileDataset, **changes: Any) -> train.TrainConfig:
    """The bundled tile models' training settings for ``dataset`` (16 kernels per batch, 40
    epochs, patience 8), with ``changes`` (e.g. ``epochs=10``) applied."""
    config = train.TrainConfig(model=tile_model_config(dataset), batch_size=16, epochs=40, patience=8)
    return dataclasses.replace(config, **changes)


def train_tile_model(
    dataset: tile_data.TileDataset,
    split: Split,
    loss: str,
    workdir: str | os.PathLike,
    config: train.TrainConfig | None = None,
    progress: bool = True,
) -> train.TrainResult:
    """Train one tile model with ``loss`` on ``split.train`` (early stopping on ``split.val``;
    default settings: `tile_train_config`)."""
    config = config or tile_train_config(dataset)
    task = TileTask.fit(dataset, split.train, loss_name=loss)
    return train.train_and_evaluate(task, config, split.train, split.val, workdir=workdir, progress=progress)


def train_tile_models(
    dataset: tile_data.TileDataset,
    split_name: str,
    out_dir: str | os.PathLike,
    loss_names: Sequence[str] = LOSS_NAMES,
    config: train.TrainConfig | None = None,
    seed: int = 0,
    progress: bool = True,
) -> dict[str, dict[str, Any]]:
    """Train one model per loss on one split, each in the workdir ``out_dir/tile-<split>-<loss>``
    (best model in its ``best/``; a killed run resumes there).

    Returns ``{loss: {"seconds", "best_epoch", "best_val_loss"}}``.
    """
    split = tile_data.split(dataset, split_name, seed=seed)
    report = {}
    for loss in loss_names:
        t0 = time.perf_counter()
        res = train_tile_model(
            dataset, split, loss, Path(out_dir) / f"tile-{split_name}-{loss}", config, progress
        )
        report[loss] = {
            "seconds": time.perf_counter() - t0,
            "best_epoch": res.best_epoch,
            "best_val_loss": res.best_val_loss,
        }
    return report


def _problem(dataset: tile_data.TileDataset, i: int) -> tuple[str, tuple[int, ...], str]:
    """Problem ``i`` of ``dataset`` as the cost functions take it: family, shape, dtype."""
    family = str(dataset.family[i])
    return family, tiles.parse_problem_shape(family, str(dataset.shape[i])), str(dataset.dtype[i])


def analytical_scores(dataset: tile_data.TileDataset, part: Sequence[int]) -> list[np.ndarray]:
    """The analytical tile model's runtime estimates (ns) for every configuration of the kernels ``part``."""
    model = analytical.AnalyticalTileModel(lowering=dataset.lowering)
    return [model.predict_ns(*_problem(dataset, i), dataset.configs(int(i))) for i in part]


def fewest_steps_scores(dataset: tile_data.TileDataset, part: Sequence[int]) -> list[np.ndarray]:
    """A heuristic baseline with nothing measured or learned: every configuration of the kernels
    ``part`` scored by its number of grid steps (`tpucost.tiles.tile_cost`), so that the fewest
    steps, that is the largest blocks, rank first. Configurations with as many steps tie (a top-k
    pick keeps their data-set order). On XLA:CPU, where Pallas runs in interpret mode and every
    grid step costs about the same, this is the baseline a learned tile model has to beat."""
    return [
        np.asarray(
            [tiles.tile_cost(*_problem(dataset, i), c).steps for c in dataset.configs(int(i))], np.float64
        )
        for i in part
    ]


def largest_block_scores(dataset: tile_data.TileDataset, part: Sequence[int]) -> list[np.ndarray]:
    """The heuristic a learner tries first, with nothing measured or learned: every configuration
    of the kernels ``part`` scored by ``-sum(log block dims)``, so that the largest block (by
    volume) ranks first. Blocks of equal volume tie (a top-k pick keeps their data-set order).
    Where a family's grid steps are the problem's volume over the block's, it orders like
    `fewest_steps_scores`; the two differ where a block dim does not divide the grid (a block of a
    reduction or a squeezed dim)."""
    return [
        np.asarray([-sum(math.log(v) for v in c.values()) for c in dataset.configs(int(i))], np.float64)
        for i in part
    ]


def largest_block_order(configs: Sequence[Mapping[str, int]]) -> list[int]:
    """Indices of ``configs``, largest block volume first (equal volumes keep their order): the
    `largest_block_scores` heuristic for configurations outside the data set."""
    return sorted(range(len(configs)), key=lambda j: -math.prod(configs[j].values()))


#: Table 3 row names of the heuristics, each a function ``(dataset, part) -> scores`` (lower first).
HEURISTICS: dict[str, Callable[[tile_data.TileDataset, Sequence[int]], list[np.ndarray]]] = {
    "largest_block": largest_block_scores,
    "fewest_steps": fewest_steps_scores,
}


#: Table 3 row name of the model trained with each loss (`tpucost.losses.LOSSES`).
MODEL_NAMES: dict[str, str] = {name: loss.model_name for name, loss in losses.LOSSES.items()}


def evaluate_tile_models(
    dataset: tile_data.TileDataset,
    split_name: str,
    model_root: str | os.PathLike | None = None,
    seed: int = 0,
) -> dict[str, Any]:
    """Table 3 on the TEST kernels of one split: `score_tile_models` of every tile model
    ``model_root/tile-<split>-<loss>`` there is (default root: the bundled checkpoints), named by
    `MODEL_NAMES`, beside the baselines."""
    split = tile_data.split(dataset, split_name, seed=seed)
    root = Path(model_root) if model_root is not None else checkpoint.bundled_checkpoints_dir()
    models = {
        name: root / f"tile-{split_name}-{loss}"
        for loss, name in MODEL_NAMES.items()
        if (root / f"tile-{split_name}-{loss}").is_dir()
    }
    if not models:
        raise ValueError(
            f"no tile models (tile-{split_name}-<loss> folders) in {root}; train them with "
            f"`python -m tpucost train --task tile --split {split_name} --out {root}`"
        )
    return score_tile_models(dataset, [int(i) for i in split.test], models, seed)


def score_tile_models(
    dataset: tile_data.TileDataset, test: Sequence[int], models: dict[str, Path], seed: int = 0
) -> dict[str, Any]:
    """`tpucost.evaluate.ranking_metrics` on the problems ``test`` of every tile model in ``models``
    (row name -> checkpoint folder); the analytical tile model and the `HEURISTICS` (tpucost data
    only); and a random ranking (seeded)."""
    runtimes = [dataset.runtime_ns(i) for i in test]
    out: dict[str, Any] = {}
    for name, path in models.items():
        model, _ = load_tile_model(path)
        out[name] = evaluate.ranking_metrics(dataset_scores(model, dataset, test), runtimes)
    if dataset.source == "tpucost":
        out["analytical"] = evaluate.ranking_metrics(analytical_scores(dataset, test), runtimes)
        for name, scores in HEURISTICS.items():
            out[name] = evaluate.ranking_metrics(scores(dataset, test), runtimes)
    rng = np.random.default_rng(seed)
    out["random"] = evaluate.ranking_metrics([rng.random(len(r)) for r in runtimes], runtimes)
    return out


def predicts_runtimes(meta: dict[str, Any]) -> bool:
    """Whether a tile model (its config.json) was trained with a regression loss, so that its
    scores are standardised log runtimes (`runtime_ns`); a rank model's only order one kernel."""
    return meta.get("loss") in losses.LOSSES and losses.LOSSES[meta["loss"]].regression and "norm" in meta


def runtime_ns(meta: dict[str, Any], scores: np.ndarray) -> np.ndarray:
    """Runtimes (ns) from the scores of a regression tile model (`predicts_runtimes`)."""
    return np.exp(TargetNorm.from_dict(meta["norm"]).decode(scores))


def suggest_tiles(
    family: str,
    shape: Sequence[int],
    dtype: str = "float32",
    top: int = 5,
    model_dir: str | os.PathLike | None = None,
    runtime_model_dir: str | os.PathLike | None = None,
    backend: str | None = None,
) -> list[dict[str, Any]]:
    """The ``top`` legal configurations of a new kernel by the tile model's score, best first.

    Returns ``[{"config": {...}, "score": float, "predicted_ns": float | None}]``. The order comes
    from the rank model (``model_dir``, default the bundled random-split hinge model); a rank
    model's scores order the configurations of ONE kernel but are not runtimes, so
    ``predicted_ns`` comes from the regression tile model (``runtime_model_dir``, default the
    bundled one of the random split, `tpucost.losses.regression_loss_name`; None when there is none).
    """
    shape = tuple(int(d) for d in shape)
    model, meta = load_tile_model(model_dir)
    configs = tiles.legal_configs(family, shape, dtype, backend)
    if not configs:
        raise ValueError(f"{family} {shape} {dtype} has no legal block configuration")
    graph = tiles.kernel_graph(family, shape, dtype)
    rows = np.stack([tiles.config_features(family, shape, dtype, c) for c in configs])
    scores = predict_scores(model, [graph], [rows])[0]
    predicted: np.ndarray | None = runtime_ns(meta, scores) if predicts_runtimes(meta) else None
    runtime_dir = (
        Path(runtime_model_dir)
        if runtime_model_dir
        else default_tile_model_dir("random", losses.regression_loss_name())
    )
    if predicted is None and runtime_dir.is_dir():
        runtime_model, runtime_meta = load_tile_model(runtime_dir)
        predicted = runtime_ns(runtime_meta, predict_scores(runtime_model, [graph], [rows])[0])
    order = np.argsort(scores, kind="stable")[: max(int(top), 1)]
    return [
        {
            "config": configs[i],
            "score": float(scores[i]),
            "predicted_ns": None if predicted is None else float(predicted[i]),
        }
        for i in order
    ]


def seed_spread(
    dataset: tile_data.TileDataset,
    seeds: Sequence[int],
    out: str | os.PathLike | None = None,
    config: train.TrainConfig | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Tile models of every loss on several random splits: is the rank loss's advantage larger than
    the spread between splits?

    For each split seed (another random 80/10/10 cut of the problems) trains one model per loss
    (`train_tile_models`, the bundled settings unless ``config``) in a temporary folder and scores it on that split's
    TEST problems (`evaluate_tile_models`), beside the analytical model and a random ranking.
    Returns (and writes to ``out`` when given) every run and, per model, the mean, min and max of
    each metric over the seeds (`seed_summary` reads it).
    """
    runs = []
    for seed in seeds:
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            train_tile_models(dataset, "random", tmp, config=config, seed=int(seed), progress=progress)
            table = evaluate_tile_models(dataset, "random", tmp, seed=int(seed))
            runs.append({"split_seed": int(seed), "seconds": time.perf_counter() - t0, "results": table})
    summary: dict[str, dict[str, Any]] = {}
    for name in runs[0]["results"] if runs else []:
        for metric in ("kendall_mean", "top1", "top5", "top10"):
            values = [r["results"][name][metric] for r in runs]
            summary.setdefault(name, {})[metric] = {
                "mean": float(np.mean(values)),
                "min": float(np.min(values)),
                "max": float(np.max(values)),
            }
        summary[name]["test_kernels"] = int(sum(r["results"][name]["n_kernels"] for r in runs))
    report = {"data": str(dataset.root), "split": "random", "runs": runs, "summary": summary}
    if out is not None:
        write_json_atomic(out, report)
    return report


def _seed_report(path: str | os.PathLike | None) -> dict[str, Any] | None:
    """The report `seed_spread` wrote at ``path`` (default: the bundled ``tile_seeds.json``), or
    None when there is no such file."""
    path = Path(path) if path is not None else checkpoint.bundled_checkpoints_dir() / "tile_seeds.json"
    return read_json_object(path) if path.is_file() else None


def seed_summary(path: str | os.PathLike | None = None) -> Any:
    """The spread of Table 3 over several random splits (written by `seed_spread`; default:
    the bundled ``tile_seeds.json``) as a DataFrame: per model the mean, min and max Kendall tau and
    the mean top-1 slowdown (%); None when the file does not exist."""
    report = _seed_report(path)
    if report is None:
        return None
    seeds = [r["split_seed"] for r in report["runs"]]
    return pd.DataFrame(
        {
            name: {
                "Kendall mean": m["kendall_mean"]["mean"],
                "Kendall min": m["kendall_mean"]["min"],
                "Kendall max": m["kendall_mean"]["max"],
                "top1 % (mean)": 100 * m["top1"]["mean"],
                "test kernels (all splits)": m["test_kernels"],
            }
            for name, m in report["summary"].items()
        }
    ).T.rename_axis(f"random splits {seeds}")


def seed_runs(path: str | os.PathLike | None = None) -> Any:
    """Every run of `seed_spread` (default: the bundled ``tile_seeds.json``), one row per split seed
    and model: ``split_seed``, ``model``, ``kendall_mean``, ``top1``, ``top5``, ``top10``,
    ``n_kernels`` (pandas); None when the file does not exist. `seed_summary` is its summary."""
    report = _seed_report(path)
    if report is None:
        return None
    return pd.DataFrame(
        [
            {
                "split_seed": int(run["split_seed"]),
                "model": name,
                **{k: m[k] for k in ("kendall_mean", "top1", "top5", "top10", "n_kernels") if k in m},
            }
            for run in report["runs"]
            for name, m in run["results"].items()
        ]
    )
