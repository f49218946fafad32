"""Collection throughput with and without the precompile worker, and whether it disturbs the labels.

    PYTHONPATH=. python benchmarks/collect_prefetch.py [--programs 6] [--repeats 5] [--families mlp,cnn] [--ahead 4]

Measures the (program, configuration) pairs of ``collect(out, programs, 0)`` (those of
``benchmarks/collect_speed.py``) three times, each in a fresh process pinned to one core as
`collect` is: without the worker (A), with the precompile worker of
`lab.precompile` on the other core (P), and without it again (B). Each
pair is measured as `collect` measures it (`kernel_collection.measure_program`; with the worker,
`Precompiler.prepare` first). Prints, per run, the distinct kernels (by ``kernel_hash``) per hour
of wall time (from before the worker starts to the last pair), the seconds spent compiling and
the cache hits; then the ratio P / A and P / B; then the relative difference ``|x - a| / a`` of the
labels of one kernel (same pair, same HLO name) between A and P and between A and B (the noise
floor of this moment on this machine), for kernels of 5 us or more and for all.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from lab import precompile
from tpucost.experiments.data import collection, kernel_collection
from tpucost.experiments.programs import configurations_for, parse_program_id, program_from_id, program_ids
from tpucost.method import device

#: Labels of kernels this long or longer (ns) are compared on their own (the noise floor's threshold).
LARGE_NS = 5_000.0


def pair_keys(n_programs: int, families: list[str] | None) -> list[str]:
    """The pairs `collect(out, n_programs, 0, families=families)` measures, in its order."""
    keys = []
    for program_id in program_ids(n_programs, 0, families):
        family, form, _, _ = parse_program_id(program_id)
        keys += [f"{program_id}/{config}" for config in configurations_for(family, form)]
    return keys


def run_pairs(keys: list[str], repeats: int, with_worker: bool, ahead: int) -> dict[str, Any]:
    """Measure ``keys`` in this (pinned) process: labels by pair and kernel name, timings, worker."""
    t0 = time.perf_counter()
    worker = precompile.start(keys, ahead) if with_worker else None
    if with_worker and worker is None:
        raise SystemExit(f"no precompile worker here: {precompile.unavailable()}")
    labels: dict[str, dict[str, float]] = {}
    hashes: set[str] = set()
    compile_s, errors, built = 0.0, 0, {}
    for key in keys:
        program_id, config = key.split("/")
        try:
            if program_id not in built:
                built = {program_id: program_from_id(program_id)}
            if worker is not None:
                worker.prepare(key)
            records, entry = kernel_collection.measure_program(built[program_id], config, repeats)
        except Exception as err:  # noqa: BLE001 - counted, as collect logs it and goes on
            print(f"{key}: {type(err).__name__}: {err}", file=sys.stderr)
            errors += 1
            continue
        compile_s += entry["compile_s"]
        hashes |= set(records.kernel_hash.tolist())
        labels[key] = dict(zip(records.name.tolist(), records.runtime_ns.tolist(), strict=True))
    wall_s = time.perf_counter() - t0
    return {
        "wall_s": wall_s,
        "compile_s": compile_s,
        "errors": errors,
        "distinct_kernels": len(hashes),
        "labels": labels,
        "worker": worker.stop() if worker is not None else None,
    }


def child(args: argparse.Namespace) -> None:
    """One run, in a process of its own pinned to one core before JAX starts."""
    pinning = device.pin_to_one_core()
    keys = json.loads(Path(args.pairs).read_text())
    result = run_pairs(keys, args.repeats, args.child == "worker", args.ahead)
    result["pinning"] = str(pinning)
    Path(args.result).write_text(json.dumps(result))


def spawn(mode: str, pairs: Path, folder: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Run ``mode`` ("plain" or "worker") in a fresh process and read its result."""
    result = folder / f"{mode}_{time.time_ns()}.json"
    command = [sys.executable, __file__, "--child", mode, "--pairs", str(pairs), "--result", str(result)]
    command += ["--repeats", str(args.repeats), "--ahead", str(args.ahead)]
    load = collection.load_average()
    subprocess.run(command, check=True, env=device.cpu_only_env())
    return {**json.loads(result.read_text()), "load_before": load}


def label_difference(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Median and 90th percentile of ``|b - a| / a`` over the kernels both runs labelled."""
    rows = [
        (ns, abs(b["labels"][key][name] - ns) / ns)
        for key, kernels in a["labels"].items()
        for name, ns in kernels.items()
        if ns > 0 and name in b["labels"].get(key, {})
    ]
    out: dict[str, Any] = {}
    for label, rel in (("ge5us", [r for ns, r in rows if ns >= LARGE_NS]), ("all", [r for _, r in rows])):
        out[label] = (
            len(rel),
            float(np.median(rel)) if rel else None,
            float(np.quantile(rel, 0.9)) if rel else None,
        )
    return out


def report(runs: dict[str, dict[str, Any]], n_pairs: int) -> None:
    """Print the three runs, the ratios and the label differences."""
    rate = {name: 3600 * r["distinct_kernels"] / r["wall_s"] for name, r in runs.items()}
    for name, r in runs.items():
        worker = r["worker"] or {}
        hits = f", cache hits {worker['cache_hits']}/{worker['cache_requests']}" if worker else ""
        prepared = (
            f", pairs compiled by the worker {worker['prepared']}, here {worker['compiled_here']}, "
            f"waited {worker['waited_s']:.1f} s"
            if worker
            else ""
        )
        print(
            f"{name}: {n_pairs - r['errors']}/{n_pairs} pairs, {r['distinct_kernels']} distinct kernels in "
            f"{r['wall_s']:.1f} s = {rate[name]:,.0f} distinct kernels per hour; compiling here "
            f"{r['compile_s']:.1f} s{hits}{prepared} (load average before: {r['load_before']})"
        )
    p = "P (worker)"
    print(f"ratio P / A: {rate[p] / rate['A (plain)']:.2f}x; P / B: {rate[p] / rate['B (plain)']:.2f}x")
    for name, other in (("A vs P (worker beside)", p), ("A vs B (noise: neither)", "B (plain)")):
        diff = label_difference(runs["A (plain)"], runs[other])
        cells = [
            f"{which}: n={n}, median {100 * med:.1f}%, p90 {100 * p90:.1f}%"
            for which, (n, med, p90) in diff.items()
            if med is not None
        ]
        print(f"labels {name}: " + "; ".join(cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--families", default=None, help="comma-separated families (default: all)")
    parser.add_argument("--ahead", type=int, default=precompile.AHEAD)
    parser.add_argument("--child", choices=("plain", "worker"), help=argparse.SUPPRESS)
    parser.add_argument("--pairs", help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    folder = Path(tempfile.mkdtemp(prefix="collect_prefetch_"))
    keys = pair_keys(args.programs, args.families.split(",") if args.families else None)
    pairs = folder / "pairs.json"
    pairs.write_text(json.dumps(keys))
    print(
        f"{len(keys)} (program, configuration) pairs, repeats {args.repeats}, ahead {args.ahead}, cores {os.cpu_count()}"
    )
    runs = {}
    for name, mode in (("A (plain)", "plain"), ("P (worker)", "worker"), ("B (plain)", "plain")):
        runs[name] = spawn(mode, pairs, folder, args)
    report(runs, len(keys))


if __name__ == "__main__":
    main()
