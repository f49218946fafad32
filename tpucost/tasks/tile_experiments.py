"""Leave one tile family out: how the tile models and the heuristics rank a family never trained on.

For each family F of a tile data set: F's problems are the test part, the next family in
alphabetical order (wrapping) the validation part (early stopping), every other family training;
one tile model per loss is trained (`tasks.tile.train_tile_model`) and scored with the baselines
by `tasks.tile.score_tile_models`, the same code as Table 3. The summary is, per row name, the
mean over families of Kendall tau and the top-k slowdowns, and the worst family by Kendall tau.

Resumable like the kernel experiments: each family's scores are ``OUT/<family>.json`` once done
(a rerun skips it), and a training killed midway resumes from its workdir
``OUT/<family>/tile-<loss>``. ``OUT/leave_family_out.json`` is the summary.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tpucost import train
from tpucost.data import tile as tile_data
from tpucost.data.splits import Split
from tpucost.files import read_json_object, write_json_atomic
from tpucost.tasks import tile as tile_task

__all__ = ["SUMMARY_FILE", "family_split", "leave_family_out"]

#: The summary `leave_family_out` writes into its folder.
SUMMARY_FILE = "leave_family_out.json"

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
        tile_task.train_tile_model(dataset, split, loss, workdir, config, progress)
        models[tile_task.MODEL_NAMES[loss]] = workdir
    return tile_task.score_tile_models(dataset, [int(i) for i in split.test], models)


def leave_family_out(
    dataset: tile_data.TileDataset,
    out: str | os.PathLike,
    loss_names: Sequence[str] = ("hinge", "mse"),
    config: train.TrainConfig | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Train and score without each family in turn (module docstring); returns and writes the
    summary ``{"families": {F: {row: metrics}}, "mean": {row: metrics}, "worst": {row: {...}}}``."""
    folder = Path(out)
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
    write_json_atomic(folder / SUMMARY_FILE, summary)
    return summary
