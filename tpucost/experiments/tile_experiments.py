"""Experiments over the tile task: Table 3, and how the models rank a family never trained on.

* `train_models` trains one tile model per loss on a split (`tpucost.method.tasks.tile.train_model`);
  `evaluate_models` scores the trained ones beside the analytical tile model, the heuristics
  (`HEURISTICS`: largest block first, fewest grid steps) and a random ranking on the split's test
  kernels (Table 3, `score_models`); `seed_spread` repeats it over split seeds; `suggest_tiles` ranks
  the legal block shapes of a problem outside the data set.
* `leave_group_out`: for each family F of a tile data set: F's problems are the test part, the
  next family in alphabetical order (wrapping) the validation part (early stopping), every other
  family training; one tile model per loss is trained (`tpucost.method.tasks.tile.train_model`)
  and scored with the baselines by `score_models`, the same code as Table 3. The summary is, per
  row name, the mean over families of Kendall tau and the top-k slowdowns, and the worst family
  by Kendall tau.

Resumable like the kernel experiments: each family's scores are ``OUT/<family>.json`` once done
(a rerun skips it), and a training killed midway resumes from its workdir
``OUT/<family>/tile-<loss>``. ``OUT/leave_group_out.json`` is the summary.
"""

from __future__ import annotations

import math
import os
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tpucost.experiments import tiles
from tpucost.experiments.configs import table3
from tpucost.experiments.data import tile as tile_data
from tpucost.experiments.tiles import analytical as tile_analytical
from tpucost.files import read_json_object, write_json_atomic
from tpucost.method import checkpoint, losses, metrics, train
from tpucost.method.splits import Split
from tpucost.method.tasks import tile as tile_task

__all__ = [
    "train_models",
    "evaluate_models",
    "score_models",
    "HEURISTICS",
    "analytical_scores",
    "fewest_steps_scores",
    "largest_block_scores",
    "largest_block_order",
    "suggest_tiles",
    "seed_spread",
    "seed_summary",
    "seed_runs",
    "LEAVE_GROUP_OUT_FILE",
    "family_split",
    "leave_group_out",
]

#: The experiments' defaults (`tpucost.experiments.configs.table3`).
_DEFAULTS = table3.get_config()
#: The summary `leave_group_out` writes into its folder.
LEAVE_GROUP_OUT_FILE = "leave_group_out.json"

_METRICS = ("kendall_mean", "top1", "top5", "top10")


def family_split(dataset: tile_data.TileDataset, family: str) -> Split:
    """``family``'s problems as test, the next family (alphabetical, wrapping) as validation."""
    families = sorted(set(dataset.family.tolist()))
    if family not in families or len(families) < 3:
        raise ValueError(f"family {family!r}: need it and two others in the data set (it has {families})")
    return tile_data.split_hard(dataset, [family], [families[(families.index(family) + 1) % len(families)]])


def _one_family(
    dataset: tile_data.TileDataset,
    family: str,
    folder: Path,
    loss_names: Sequence[str],
    config: train.TrainConfig | None,
    progress: bool,
) -> dict[str, Any]:
    split = family_split(dataset, family)
    models = {}
    for loss in loss_names:
        workdir = folder / family / f"tile-{loss}"
        tile_task.train_model(dataset, split, workdir, config, loss=loss, progress=progress)
        models[tile_task.METHOD_OF_LOSS[loss]] = workdir
    return score_models(dataset, [int(i) for i in split.test], models)


def leave_group_out(
    dataset: tile_data.TileDataset,
    out_dir: str | os.PathLike,
    config: train.TrainConfig | None = None,
    loss_names: Sequence[str] = _DEFAULTS.leave_family_out_losses,
    progress: bool = True,
) -> dict[str, Any]:
    """Train and score without each family in turn (module docstring); returns and writes the
    summary ``{"families": {F: {row: metrics}}, "mean": {row: metrics}, "worst": {row: {...}}}``."""
    folder = Path(out_dir)
    folder.mkdir(parents=True, exist_ok=True)
    per_family: dict[str, Any] = {}
    for family in sorted(set(dataset.family.tolist())):
        path = folder / f"{family}.json"
        if not path.exists():
            write_json_atomic(path, _one_family(dataset, family, folder, loss_names, config, progress))
        per_family[family] = read_json_object(path)
    rows = list(next(iter(per_family.values())))
    mean = {r: {m: float(np.mean([per_family[f][r][m] for f in per_family])) for m in _METRICS} for r in rows}
    worst = {}
    for r in rows:
        f = min(per_family, key=lambda f: per_family[f][r]["kendall_mean"])
        worst[r] = {"family": f, "kendall_mean": per_family[f][r]["kendall_mean"]}
    summary = {
        "data": str(dataset.root),
        "lowering": dataset.lowering,
        "losses": list(loss_names),
        "families": per_family,
        "mean": mean,
        "worst": worst,
    }
    write_json_atomic(folder / LEAVE_GROUP_OUT_FILE, summary)
    return summary


# ---------------------------------------------------------------------------------------------
# Train one model per loss, score them beside the baselines (Table 3)
# ---------------------------------------------------------------------------------------------


def train_models(
    dataset: tile_data.TileDataset,
    split: str,
    out_dir: str | os.PathLike,
    config: train.TrainConfig | None = None,
    loss_names: Sequence[str] = _DEFAULTS.losses,
    progress: bool = True,
    seed: int = _DEFAULTS.split_seed,
) -> dict[str, dict[str, Any]]:
    """Train one model per loss on one split, each in the workdir ``out_dir/tile-<split>-<loss>``
    (best model in its ``best/``; a killed run resumes there).

    Returns ``{loss: {"seconds", "best_epoch", "best_val_loss"}}``.
    """
    parts = tile_data.split(dataset, split, seed=seed)
    report = {}
    for loss in loss_names:
        t0 = time.perf_counter()
        workdir = Path(out_dir) / f"tile-{split}-{loss}"
        res = tile_task.train_model(dataset, parts, workdir, config, loss=loss, progress=progress)
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
    model = tile_analytical.AnalyticalTileModel(lowering=dataset.lowering)
    return [model.predict_ns(*_problem(dataset, i), dataset.configs(int(i))) for i in part]


def fewest_steps_scores(dataset: tile_data.TileDataset, part: Sequence[int]) -> list[np.ndarray]:
    """A heuristic baseline with nothing measured or learned: every configuration of the kernels
    ``part`` scored by its number of grid steps (`tpucost.experiments.tiles.tile_cost`), so that the fewest
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


def evaluate_models(
    dataset: tile_data.TileDataset,
    split: str,
    model_dir: str | os.PathLike | None = None,
    seed: int = 0,
) -> dict[str, Any]:
    """Table 3 on the TEST kernels of one split: `score_models` of every tile model
    ``model_dir/tile-<split>-<loss>`` there is (default: the bundled checkpoints), named by
    `tpucost.method.tasks.tile.METHOD_OF_LOSS`, beside the baselines."""
    parts = tile_data.split(dataset, split, seed=seed)
    root = Path(model_dir) if model_dir is not None else checkpoint.bundled_checkpoints_dir()
    models = {
        name: root / f"tile-{split}-{loss}"
        for loss, name in tile_task.METHOD_OF_LOSS.items()
        if (root / f"tile-{split}-{loss}").is_dir()
    }
    if not models:
        raise ValueError(
            f"no tile models (tile-{split}-<loss> folders) in {root}; train them with "
            f"`python -m tpucost train --task tile --split {split} --out {root}`"
        )
    return score_models(dataset, [int(i) for i in parts.test], models, seed)


def score_models(
    dataset: tile_data.TileDataset, test: Sequence[int], models: dict[str, Path], seed: int = 0
) -> dict[str, Any]:
    """`tpucost.method.metrics.ranking_metrics` on the problems ``test`` of every tile model in ``models``
    (row name -> checkpoint folder); the analytical tile model and the `HEURISTICS` (tpucost data
    only); and a random ranking (seeded)."""
    runtimes = [dataset.runtime_ns(i) for i in test]
    out: dict[str, Any] = {}
    for name, path in models.items():
        model = tile_task.load_model(path).model
        out[name] = metrics.ranking_metrics(tile_task.dataset_scores(model, dataset, test), runtimes)
    if dataset.source == "tpucost":
        out["analytical"] = metrics.ranking_metrics(analytical_scores(dataset, test), runtimes)
        for name, scores in HEURISTICS.items():
            out[name] = metrics.ranking_metrics(scores(dataset, test), runtimes)
    rng = np.random.default_rng(seed)
    out["random"] = metrics.ranking_metrics([rng.random(len(r)) for r in runtimes], runtimes)
    return out


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
    bundled one of the random split, `tpucost.method.losses.regression_loss_name`; None when there is none).
    """
    shape = tuple(int(d) for d in shape)
    model, _, _, meta = tile_task.load_model(model_dir)
    configs = tiles.legal_configs(family, shape, dtype, backend)
    if not configs:
        raise ValueError(f"{family} {shape} {dtype} has no legal block configuration")
    graph = tiles.kernel_graph(family, shape, dtype)
    rows = np.stack([tiles.config_features(family, shape, dtype, c) for c in configs])
    scores = tile_task.predict(model, [graph], [rows])[0]
    predicted: np.ndarray | None = (
        tile_task.runtime_ns(meta, scores) if tile_task.predicts_runtimes(meta) else None
    )
    runtime_dir = (
        Path(runtime_model_dir)
        if runtime_model_dir
        else tile_task.default_model_dir("random", losses.regression_loss_name())
    )
    if predicted is None and runtime_dir.is_dir():
        runtime_model, _, _, runtime_meta = tile_task.load_model(runtime_dir)
        predicted = tile_task.runtime_ns(runtime_meta, tile_task.predict(runtime_model, [graph], [rows])[0])
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
    seeds: Sequence[int] = _DEFAULTS.split_seeds,
    out: str | os.PathLike | None = None,
    config: train.TrainConfig | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Tile models of every loss on several random splits: is the rank loss's advantage larger than
    the spread between splits?

    For each split seed (another random 80/10/10 cut of the problems) trains one model per loss
    (`train_models`, the bundled settings unless ``config``) in a temporary folder and scores it on that split's
    TEST problems (`evaluate_models`), beside the analytical model and a random ranking.
    Returns (and writes to ``out`` when given) every run and, per model, the mean, min and max of
    each metric over the seeds (`seed_summary` reads it).
    """
    runs = []
    for seed in seeds:
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            train_models(dataset, "random", tmp, config=config, seed=int(seed), progress=progress)
            table = evaluate_models(dataset, "random", tmp, seed=int(seed))
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
