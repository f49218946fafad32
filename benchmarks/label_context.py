"""Does a kernel's label depend on the program it runs in?

The bundled data set (`tpucost/bundled/kernels_cpu`) and the pending measurements of its device
(`lab/pending/be3048b01916`: the families it lacks, mostly Keras convnets) share some
kernels (the same `kernel_hash`: opcode graph and shapes), each measured in programs of its own
folder. This script measures, now and in one process pinned to one core (the label mode), the
pending pairs that ran the most shared kernels and the bundled pairs that ran the most of those, and
prints for the kernels measured on both sides:

* *stored*: pending label / bundled label, as the two folders hold them;
* *now, same session*: the same ratio with both sides measured now (if it stays away from 1, the
  program around a kernel moves its label: context, not the day it was measured);
* *drift*: each side measured now / stored (if near 1, the labels are repeatable in their own
  programs).

Usage: ``python benchmarks/label_context.py [--pairs N] [--max-seconds S]`` on a quiet machine.
"""

from __future__ import annotations

import argparse
import collections
import os
import time
from pathlib import Path

import numpy as np

from tpucost.method import device

PENDING = Path(__file__).resolve().parents[1] / "lab" / "pending" / "be3048b01916"


def _sources(ds, hashes: set[str]) -> dict[tuple[str, str], list[str]]:
    """{(program_id, configuration): the kernels of ``hashes`` it ran}."""
    runs = collections.defaultdict(list)
    kernel = ds.source_kernel
    for row, k in enumerate(kernel.tolist()):
        h = str(ds.kernel_hash[k])
        if h in hashes:
            runs[(str(ds.source_program_id[row]), str(ds.source_configuration[row]))].append(h)
    return runs


def _pick(
    runs: dict[tuple[str, str], list[str]], seconds: dict[tuple[str, str], float], n: int, limit: float
):
    """The ``n`` pairs that ran the most of the kernels, among those measured in under ``limit`` s."""
    fast = [p for p in runs if seconds.get(p, np.inf) < limit]
    return sorted(fast, key=lambda p: (-len(set(runs[p])), p))[:n]


def _measure(pairs, program_from_id, kernel_collection) -> dict[tuple[str, str], dict[str, float]]:
    out = {}
    for pid, config in pairs:
        t0 = time.perf_counter()
        records, _ = kernel_collection.measure_program(program_from_id(pid), config)
        out[(pid, config)] = kernel_collection._min_by_hash(records)
        print(
            f"  measured {pid} / {config}: {len(records)} kernels in {time.perf_counter() - t0:.0f} s",
            flush=True,
        )
    return out


def _least(per_pair: dict[tuple[str, str], dict[str, float]], hashes: set[str]) -> dict[str, float]:
    """{kernel hash of ``hashes``: its least label over the pairs' labels}."""
    best: dict[str, float] = {}
    for labels in per_pair.values():
        for h, t in labels.items():
            if h in hashes:
                best[h] = min(t, best.get(h, t))
    return best


def _describe(name: str, ratio: np.ndarray) -> str:
    if not len(ratio):
        return f"{name}: no kernels"
    return (
        f"{name}: n={len(ratio)}, median {np.median(ratio):.3f}, q10 {np.quantile(ratio, 0.1):.3f}, "
        f"q90 {np.quantile(ratio, 0.9):.3f}, share > 1.1 {np.mean(ratio > 1.1):.2f}, share < 0.9 {np.mean(ratio < 0.9):.2f}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=6, help="pairs measured on each side")
    ap.add_argument("--max-seconds", type=float, default=60.0, help="skip pairs whose collection took longer")
    args = ap.parse_args()
    pinning = device.pin_to_one_core()
    from tpucost.experiments.data import kernel as kernel_data
    from tpucost.experiments.data import kernel_collection
    from tpucost.experiments.programs import program_from_id

    bundled = kernel_data.load_dataset()
    pending = kernel_data.load_dataset(PENDING)
    shared = set(bundled.kernel_hash.tolist()) & set(pending.kernel_hash.tolist())
    stored_a = {
        h: float(t)
        for h, t in zip(bundled.kernel_hash.tolist(), bundled.runtime_ns.tolist(), strict=True)
        if h in shared
    }
    seconds = {}
    for folder in (kernel_data.default_data_dir(), PENDING):
        for e in kernel_collection.measured_runs(folder):
            seconds[(e["program_id"], e["configuration"])] = e.get("compile_s", 0) + e.get("measure_s", 0)
    runs_b = _sources(pending, shared)
    pairs_b = _pick(runs_b, seconds, args.pairs, args.max_seconds)
    wanted = {h for p in pairs_b for h in runs_b[p]}
    pairs_a = _pick(_sources(bundled, wanted), seconds, args.pairs, args.max_seconds)
    load = os.getloadavg()
    print(
        f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, device {device.fingerprint()['id']}, "
        f"{pinning}, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} before"
    )
    print(f"{len(shared)} kernels in both folders; pending pairs {pairs_b}; bundled pairs {pairs_a}")
    stored_b = _least({p: kernel_collection._pair_labels(PENDING, *p) for p in pairs_b}, wanted)
    now_b = _least(_measure(pairs_b, program_from_id, kernel_collection), wanted)
    now_a = _least(_measure(pairs_a, program_from_id, kernel_collection), wanted)
    both = sorted(set(now_a) & set(now_b) & set(stored_b))
    r = {
        "stored": np.array([stored_b[h] / stored_a[h] for h in both]),
        "now": np.array([now_b[h] / now_a[h] for h in both]),
        "drift_bundled": np.array([now_a[h] / stored_a[h] for h in both]),
        "drift_pending": np.array([now_b[h] / stored_b[h] for h in both]),
    }
    ge5 = np.array([stored_a[h] >= 5000 for h in both], bool)
    names = {
        "stored": "pending / bundled, stored labels",
        "now": "pending / bundled, both measured now",
        "drift_bundled": "bundled side, now / stored",
        "drift_pending": "pending side, now / stored (its pair's own label)",
    }
    for subset, keep in (("all", np.ones(len(both), bool)), (">= 5 us (bundled label)", ge5)):
        print(f"kernels measured on both sides, {subset}:")
        for key, label in names.items():
            print("  " + _describe(label, r[key][keep]))
    load = os.getloadavg()
    print(f"# load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} after")


if __name__ == "__main__":
    main()
