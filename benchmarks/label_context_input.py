"""Does telling the GNN the size of the program around a kernel undo the merged first pack's regression?

`benchmarks/label_context.py` measured the same small kernel 1.4x slower inside the pending folder's large
Keras programs than inside the bundled data set's programs, and `benchmarks/label_context_ablation.py`
showed the hard split's held-out families lose most where those kernels are trained on. Here the kernel
model reads, per kernel, the size of the program its label comes from as a global input (through the
device join of `lab.device_models`, which takes any per-kernel row of numbers): the log of the kernel
count of the smallest (program, configuration) pair that ran it (a kernel's label is its least over every
pair, and the smallest program is the one whose label is least moved). With ``--repeats`` it also reads
the log of the repeats its label was the least of (the bundled data set measured 20, the pending
folder 5); with ``--control`` it reads a constant instead (the same network, nothing to learn from). It trains on the hard split with the bundled settings and prints the figures of
``docs/results/first_pack_retrain.txt`` (median APE and MAPE >= 5 us over the test rows, the
structure-novel rows, and `evaluate --by-family`'s line).

Usage: ``PYTHONPATH=. python benchmarks/label_context_input.py [MERGED OUT] [--repeats | --control] [--seed N]`` with MERGED
from ``python -m lab data merge --out MERGED tpucost/bundled/kernels_cpu lab/pending/be3048b01916``;
without them (``make bench``) it merges the two folders into a temporary folder and trains beside it.
Trains (minutes to a quarter of an hour on 2 cores); measures nothing. A probe: the CLI's models do
not read a program size.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from label_context_ablation import FIRST, merged_first_pack  # the script's folder is on sys.path

from lab.device_models import DeviceKernelTask, predict  # the checkout on PYTHONPATH (make bench)
from tpucost.experiments import kernel_experiments, results
from tpucost.experiments.data import kernel as kernel_data
from tpucost.method import train


def program_sizes(ds: kernel_data.KernelDataset) -> np.ndarray:
    """float[K]: per kernel, the kernel count of the smallest (program, configuration) pair that ran it."""
    pair = np.char.add(
        np.char.add(ds.source_program_id.astype(str), "/"), ds.source_configuration.astype(str)
    )
    names, which, counts = np.unique(pair, return_inverse=True, return_counts=True)
    size_of_source = counts[which.reshape(-1)].astype(np.float64)
    return np.minimum.reduceat(size_of_source, ds.source_offsets[:-1])


def context_rows(
    ds: kernel_data.KernelDataset, with_repeats: bool, control: bool = False
) -> tuple[np.ndarray, list[str]]:
    """float[K, D]: the global input of each kernel, and the names of its columns (``control``: one
    column equal for every kernel, the same network with nothing to read)."""
    if control:
        return np.ones((len(ds), 1)), ["constant"]
    columns, names = [np.log(program_sizes(ds))], ["log_program_kernels"]
    if with_repeats:
        first = kernel_data.load_dataset(FIRST)
        repeats = np.where(np.isin(ds.kernel_hash, first.kernel_hash), 20.0, 5.0)
        columns.append(np.log(repeats))
        names.append("log_repeats")
    return np.stack(columns, axis=1), names


def predictor(ds: kernel_data.KernelDataset, trained: train.TrainResult, task: DeviceKernelTask) -> Callable:
    """graphs -> predicted ns, for graphs of ``ds``'s kernels: each is predicted with its own row of
    ``task.device`` (found by its kernel hash), the signature `kernel_experiments.evaluate_split` takes."""
    index = {h: i for i, h in enumerate(ds.kernel_hash)}
    backend, device_kind = (str(ds.table.columns[c][0]) for c in ("backend", "device_kind"))  # one device

    def predict_ns(graphs: list) -> np.ndarray:
        rows = [index[kernel_data.kernel_hash(g, backend, device_kind)] for g in graphs]
        log_ns = predict(trained.model, task.norm, graphs, task.device[rows], task.device_norm)
        return np.exp(log_ns)

    return predict_ns


def scores(ds: kernel_data.KernelDataset, split: kernel_data.Split, predict_ns: Callable) -> dict:
    """What `evaluate` prints for these rows: median APE and MAPE >= 5 us (median over programs) on
    all test rows and on the structure-novel rows, and `evaluate --by-family`'s rows."""
    result = kernel_experiments.evaluate_split(ds, split, predict_ns)
    return {
        **{
            part: {k: r[k] for k in ("n_kernels", "median_ape", "mape_ge5us")}
            for part, r in (("all", result), ("structure_novel", result["structure_novel"]))
        },
        "families": kernel_experiments.family_errors(ds, split, predict_ns),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "merged", nargs="?", help="the merged first pack (default: merge the two folders now)"
    )
    parser.add_argument(
        "out", nargs="?", help="a folder for the training state and figures.json (default: beside the merge)"
    )
    parser.add_argument("--repeats", action="store_true", help="also read the label's repeats")
    parser.add_argument("--control", action="store_true", help="read a constant instead (the same network)")
    parser.add_argument("--seed", type=int, default=0, help="the training seed (default 0, the bundled one)")
    args = parser.parse_args()
    if (args.merged is None) != (args.out is None):
        parser.error("give both MERGED and OUT, or neither")
    merged_dir, ds = merged_first_pack(args.merged)
    out = Path(args.out) if args.out is not None else merged_dir.parent / "label_context_input"
    split = kernel_data.split(ds, "hard")
    rows_ctx, names = context_rows(ds, args.repeats, args.control)
    base = train.TrainConfig()
    config = dataclasses.replace(
        base,
        model=dataclasses.replace(base.model, hidden=128),
        seed=args.seed,
    )
    task = DeviceKernelTask.fit(ds, split.train, config.model, rows_ctx, names)
    start = time.perf_counter()
    result = train.train_and_evaluate(
        task, config, split.train, split.val, workdir=out / "training", progress=False
    )
    seconds = time.perf_counter() - start
    figures = scores(ds, split, predictor(ds, result, task))
    figures.update(
        inputs=names,
        seed=args.seed,
        best_epoch=result.best_epoch,
        epochs=len(result.history["val_loss"]),
        train_seconds=round(seconds),
    )
    (out / "figures.json").write_text(json.dumps(figures, indent=1))
    print(
        f"inputs {', '.join(names)}, seed {args.seed}; best epoch {result.best_epoch} of {figures['epochs']} ({seconds:.0f} s)"
    )
    for part in ("all", "structure_novel"):
        f = figures[part]
        print(
            f"  {part} ({f['n_kernels']:,} rows): median APE {f['median_ape']:.1f}, MAPE >=5us {f['mape_ge5us']:.1f}"
        )
    print("  " + "; ".join(results.family_line(f) for f in figures["families"]))


if __name__ == "__main__":
    main()
