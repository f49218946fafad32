"""Hyperparameter search for the kernel cost models, scored on the VALIDATION programs only.

Each trial trains one configuration (`tpucost.train.train_and_evaluate` of the kernel task, early
stopping on the validation loss) on the random split's training part and scores the best-validation
model on the validation programs the way `tpucost.tasks.kernel.evaluate_split` scores test programs (median MAPE
of kernels >= 5 us, median Kendall tau). The test programs are never touched, so the winner's test
figures stay honest. Results go to a JSON file, one entry per trial, written after every trial: a
killed search resumes where it stopped (finished trials are skipped).

    python tools/hparam_search.py --out build/hparam_search.json            # every trial
    python tools/hparam_search.py --out build/hparam_search.json --trials gnn-base,gnn-wide

The trials below are the ones run for the bundled checkpoints; their budget (epochs) is cut so the
whole search takes about 20 minutes on 2 cores. The winner is the trial with the lowest validation
MAPE (kernels >= 5 us).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from tpucost import data, train
from tpucost.models import ModelConfig
from tpucost.tasks import kernel

#: name -> (model config, training overrides). Budget: ``epochs`` each (the cosine schedule decays over it).
TRIALS: dict[str, tuple[ModelConfig, dict[str, Any]]] = {
    "gnn-base": (ModelConfig(kind="gnn"), {}),
    "gnn-lr3e-3": (ModelConfig(kind="gnn"), {"learning_rate": 3e-3}),
    "gnn-wide": (ModelConfig(kind="gnn", hidden=128), {}),
    "gnn-deep": (ModelConfig(kind="gnn", num_layers=5), {}),
    "gnn-mean-max": (ModelConfig(kind="gnn", pooling=("mean", "max")), {}),
    "gnn-batch32": (ModelConfig(kind="gnn"), {"batch_size": 32}),
}
SEARCH_EPOCHS = 12


def run_trial(name: str, ds: data.KernelDataset, split: data.Split, epochs: int, progress: bool) -> dict[str, Any]:
    """Train trial ``name`` and score it on the validation programs."""
    model_config, overrides = TRIALS[name]
    config = dataclasses.replace(train.TrainConfig(model=model_config, epochs=epochs), **overrides)
    start = time.perf_counter()
    task = kernel.KernelTask.fit(ds, split.train, config.model)
    result = train.train_and_evaluate(task, config, split.train, split.val, progress=progress)
    seconds = time.perf_counter() - start
    as_test = dataclasses.replace(split, test_programs=split.val_programs, test=split.val)
    scored = kernel.evaluate_split(
        ds, as_test, lambda graphs: np.exp(kernel.predict_log_ns(result.model, task.norm, graphs)))
    return {"trial": name, "config": config.to_dict(), "epochs_run": len(result.history["val_loss"]),
            "best_epoch": result.best_epoch, "best_val_loss": result.best_val_loss, "seconds": seconds,
            "val_mape_ge5us": scored["mape_ge5us"], "val_mape_lt5us": scored["mape_lt5us"],
            "val_kendall_median": scored["kendall_median"], "val_programs": len(split.val_programs)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="results JSON (resumed when it exists)")
    parser.add_argument("--data", default=None, help="data folder (default: the bundled data set)")
    parser.add_argument("--trials", default=",".join(TRIALS), help="comma-separated trial names")
    parser.add_argument("--epochs", type=int, default=SEARCH_EPOCHS)
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)
    names = [n for n in args.trials.split(",") if n]
    unknown = sorted(set(names) - set(TRIALS))
    if unknown:
        print(f"error: unknown trials {unknown}; choose from {sorted(TRIALS)}", file=sys.stderr)
        return 2
    ds = data.load_kernel_dataset(args.data)
    split = data.split(ds, "random")
    out = Path(args.out)
    done = json.loads(out.read_text()) if out.exists() else {"data": str(ds.root), "device": ds.device, "trials": []}
    finished = {t["trial"] for t in done["trials"]}
    for name in names:
        if name in finished:
            continue
        entry = run_trial(name, ds, split, args.epochs, not args.no_progress)
        done["trials"].append(entry)
        out.parent.mkdir(parents=True, exist_ok=True)
        data.write_text_atomic(out, json.dumps(done, indent=1))
        print(f"{name}: val MAPE >= 5 us {entry['val_mape_ge5us']:.1f}%, Kendall {entry['val_kendall_median']:.3f}, "
              f"{entry['epochs_run']} epochs, {entry['seconds']:.0f} s", flush=True)
    best = min(done["trials"], key=lambda t: t["val_mape_ge5us"])
    print(f"winner: {best['trial']} (val MAPE >= 5 us {best['val_mape_ge5us']:.1f}%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
