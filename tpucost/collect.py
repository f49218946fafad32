"""Collect the kernel data set: compile, measure, decompose and featurize corpus programs.

For each program of ``generate_programs(n_programs, seed)`` (those with ``index % n == i`` for
``shard=(i, n)``) and each applicable configuration, :func:`collect` compiles the program,
labels its kernels with :func:`tpucost.measure.measure_kernels`, cuts the measured HLO into
kernels, featurizes them and appends the records. The output folder is append-only:

===========================  =====================================================================
path                         content
===========================  =====================================================================
``parts/<program>__<config>.npz``  records of one (program, configuration), a shard in the
                             ``tpucost.data`` format, written atomically (tmp file + ``os.replace``)
``log.jsonl``                one JSON line per (program, configuration): ``status`` "ok" (kernels,
                             missing, additivity_ratio, timings) or "error" (the exception text)
``schema.json``, ``kernels-*.npz``  the deduplicated data set, written by :func:`finalize`
===========================  =====================================================================

A killed run loses at most the (program, configuration) in flight; ``resume=True`` skips the
pairs the log already reports (ok or error). A part is written before its log line, so a part
without a line is simply measured again.
"""

from __future__ import annotations

import json
import os
import re
import time
import traceback
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import jax

from tpucost import data, features, hlo, kernels
from tpucost.measure import Measurement, measure_kernels
from tpucost.programs import CONFIGURATIONS, Program, Variant, applicable_configurations, generate_programs

__all__ = ["collect", "finalize", "merge", "measure_program", "measure_noise", "read_log", "load_parts"]

LOG = "log.jsonl"
PARTS = "parts"


def _part_name(program_id: str, config: str) -> str:
    return re.sub(r"[^\w.\-]", "_", f"{program_id}__{config}") + ".npz"


def read_log(out_dir: str | os.PathLike) -> list[dict[str, Any]]:
    """The log entries of ``out_dir`` (a torn last line from a killed run is ignored)."""
    path = Path(out_dir) / LOG
    entries = []
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                entries.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return entries


def _append_log(out_dir: Path, entry: dict[str, Any]) -> None:
    with open(out_dir / LOG, "a") as fh:
        fh.write(json.dumps(entry) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def _config_fn(program: Program, config: str) -> Any:
    """The program's function as configuration ``config``'s variant."""
    variant = CONFIGURATIONS[config].variant
    return program.fn if variant == Variant() else program.build(variant)


def measure_program(program: Program, config: str, repeats: int = 5) -> tuple[data.KernelDataset, dict[str, Any]]:
    """Records of one (program, configuration) and its log entry (with phase timings in s).

    The program is compiled first (``compile_s``); ``measure_kernels`` then reuses JAX's
    in-memory compilation cache, so ``measure_s`` is mostly running and tracing.
    """
    fn = _config_fn(program, config)
    options = dict(CONFIGURATIONS[config].compiler_options)
    t0 = time.perf_counter()
    jax.jit(fn).lower(*program.args).compile(compiler_options=options or None)
    t1 = time.perf_counter()
    m: Measurement = measure_kernels(fn, *program.args, repeats=repeats, compiler_options=options)
    t2 = time.perf_counter()
    graphs, labels, calls = [], [], []
    for k in kernels.decompose(m.module or hlo.parse_module(m.hlo_text)):
        label = m.runtime_ns.get(k.name)
        if label is None or not label > 0:
            continue
        graphs.append(features.featurize(k))
        labels.append(label)
        calls.append(m.calls_per_run.get(k.name, k.calls_per_run))
    meta = {"program_id": program.program_id, "family": program.family, "form": program.form,
            "configuration": config, "backend": m.backend, "device_kind": m.device_kind,
            "jax_version": jax.__version__}
    records = data.from_graphs(graphs, labels, calls, meta)
    t3 = time.perf_counter()
    kernel_ns = sum(t * m.calls_per_run.get(k, 1) for k, t in m.runtime_ns.items() if k not in m.nested)
    entry = {
        "program_id": program.program_id, "configuration": config, "status": "ok",
        "kernels": len(records), "missing": len(m.missing), "additivity_ratio": m.additivity_ratio,
        "wall_ns": min(m.wall_ns_per_run), "kernel_ns_per_run": kernel_ns, "repeats": repeats,
        "compile_s": t1 - t0, "measure_s": t2 - t1, "featurize_s": t3 - t2,
    }
    return records, entry


def _todo(n_programs: int, seed: int, shard: tuple[int, int], configurations: Sequence[str] | None,
          families: Sequence[str] | None, done: set[tuple[str, str]]) -> Iterator[tuple[Program, list[str]]]:
    i, n = shard
    for index, program in enumerate(generate_programs(n_programs, seed, families)):
        if index % n != i:
            continue
        configs = [c for c in applicable_configurations(program)
                   if (configurations is None or c in configurations) and (program.program_id, c) not in done]
        if configs:
            yield program, configs


def collect(out_dir: str | os.PathLike, n_programs: int, seed: int = 0, shard: tuple[int, int] = (0, 1),
            resume: bool = False, repeats: int = 5, configurations: Sequence[str] | None = None,
            progress: bool = True, families: Sequence[str] | None = None,
            do_finalize: bool = True) -> dict[str, Any]:
    """Measure programs into ``out_dir`` (see the module docstring); returns a summary dict.

    Raises FileExistsError when ``out_dir`` already has a log and ``resume`` is False.
    """
    from tqdm import tqdm  # text bars: no ipywidgets needed in notebooks

    out = Path(out_dir)
    if not 0 <= shard[0] < shard[1]:
        raise ValueError(f"shard must be (i, n) with 0 <= i < n, got {shard}")
    if (out / LOG).exists() and not resume:
        raise FileExistsError(f"{out / LOG} exists: pass resume=True (--resume) to continue that run")
    (out / PARTS).mkdir(parents=True, exist_ok=True)
    done = {(e["program_id"], e["configuration"]) for e in read_log(out) if e.get("status") in ("ok", "error")}
    _append_log(out, {"status": "start", "n_programs": n_programs, "seed": seed, "shard": list(shard),
                      "repeats": repeats, "resume": resume, "time": time.time(),
                      "families": list(families) if families else None})
    n_kernels = n_errors = n_pairs = 0
    t_start = time.perf_counter()
    bar = tqdm(total=None, disable=not progress, unit="config", desc="collect")
    for program, configs in _todo(n_programs, seed, shard, configurations, families, done):
        for config in configs:
            bar.set_description(f"{program.program_id} {config}")
            try:
                records, entry = measure_program(program, config, repeats)
                data.save_shard(records, out / PARTS / _part_name(program.program_id, config))
            except Exception as err:  # noqa: BLE001 - a failing program is logged and skipped
                entry = {"program_id": program.program_id, "configuration": config, "status": "error",
                         "error": f"{type(err).__name__}: {err}",
                         "traceback": traceback.format_exc(limit=3)}
                n_errors += 1
            _append_log(out, entry)
            n_kernels += entry.get("kernels", 0)
            n_pairs += 1
            bar.update(1)
            bar.set_postfix(kernels=n_kernels, kernels_per_s=f"{n_kernels / (time.perf_counter() - t_start):.1f}")
    bar.close()
    summary = {"pairs": n_pairs, "kernels": n_kernels, "errors": n_errors, "seconds": time.perf_counter() - t_start}
    if do_finalize:
        summary["dataset_kernels"] = len(finalize(out))
    return summary


def load_parts(parts_dir: str | os.PathLike) -> data.KernelDataset:
    """All part files of a collect folder (or of its ``parts/``), in file-name order."""
    d = Path(parts_dir)
    if (d / PARTS).is_dir():
        d = d / PARTS
    return data.concat([data.read_shard(p) for p in sorted(d.glob("*.npz"))])


def finalize(out_dir: str | os.PathLike, shard_size: int = 100_000) -> data.KernelDataset:
    """Deduplicate ``out_dir``'s parts into shards + ``schema.json`` in ``out_dir``."""
    return merge([out_dir], out_dir, shard_size)


def merge(parts_dirs: Sequence[str | os.PathLike], out_dir: str | os.PathLike,
          shard_size: int = 100_000) -> data.KernelDataset:
    """Deduplicate the parts of several collect folders into one data set in ``out_dir``.

    Parts are taken in file-name order over all folders (a part present in two folders, e.g. a
    re-run, is read once), so the result does not depend on how the runs were sharded.
    """
    files: dict[str, Path] = {}
    for d in parts_dirs:
        d = Path(d)
        d = d / PARTS if (d / PARTS).is_dir() else d
        for p in d.glob("*.npz"):
            files.setdefault(p.name, p)
    ds = data.dedup(data.concat([data.read_shard(files[name]) for name in sorted(files)]))
    data.save_dataset(ds, out_dir, shard_size)
    return data.load_kernel_dataset(out_dir)


def _collection_settings(data_dir: Path) -> tuple[int, int, list[str] | None]:
    """(n_programs, seed, families) of the collect run that made ``data_dir`` (its log's start line)."""
    for entry in read_log(data_dir):
        if entry.get("status") == "start":
            return int(entry["n_programs"]), int(entry["seed"]), entry.get("families")
    raise ValueError(f"{data_dir / LOG}: no 'start' line; cannot tell which corpus made this data set")


def measure_noise(data_dir: str | os.PathLike | None = None, sample: int = 200, seed: int = 0,
                  repeats: int | None = None, progress: bool = True) -> dict[str, Any]:
    """Re-measure a random sample of a data set's kernels and compare with the stored labels.

    Picks ``sample`` kernels at random, regenerates the (program, configuration) each was first
    measured in, measures it again in this process and matches kernels by fingerprint. The
    relative difference ``|new - stored| / stored`` of the same kernel between two measurements
    is the label noise: no model can predict labels closer than that. Returns (and writes to
    ``noise.json`` beside the data) its median and 90th percentile, plus the per-kernel rows.
    Run it in a fresh process (``python -m tpucost data noise``), on an otherwise idle machine.
    """
    import numpy as np

    root = Path(data_dir) if data_dir is not None else data.default_data_dir()
    ds = data.load_kernel_dataset(root)
    n_programs, corpus_seed, families = _collection_settings(root)
    log = [e for e in read_log(root) if e.get("status") == "ok"]
    repeats = repeats or max((int(e.get("repeats", 5)) for e in log), default=5)
    rng = np.random.default_rng(seed)
    picked = rng.choice(len(ds), size=min(sample, len(ds)), replace=False)
    wanted: dict[tuple[str, str], list[int]] = {}
    for i in picked:
        wanted.setdefault((str(ds.program_id[i]), str(ds.configuration[i])), []).append(int(i))
    programs = {p.program_id: p for p in generate_programs(n_programs, corpus_seed, families)
                if any(pid == p.program_id for pid, _ in wanted)}
    rows = []
    for (pid, config), indices in _progress(sorted(wanted.items()), progress):
        records, _ = measure_program(programs[pid], config, repeats)
        fresh = dict(zip(records.fingerprint.tolist(), records.runtime_ns.tolist(), strict=True))
        for i in indices:
            new = fresh.get(str(ds.fingerprint[i]))
            if new is not None:
                old = float(ds.runtime_ns[i])
                rows.append({"kernel": str(ds.name[i]), "program_id": pid, "configuration": config,
                             "stored_ns": old, "remeasured_ns": new, "rel_diff": abs(new - old) / old})
    rel = np.array([r["rel_diff"] for r in rows])
    big = np.array([r["rel_diff"] for r in rows if r["stored_ns"] >= 5_000])
    result = {
        "sampled": int(len(picked)), "matched": len(rows), "repeats": repeats, "seed": seed,
        "median_rel": float(np.median(rel)) if len(rel) else None,
        "p90_rel": float(np.quantile(rel, 0.9)) if len(rel) else None,
        "median_rel_ge5us": float(np.median(big)) if len(big) else None,
        "p90_rel_ge5us": float(np.quantile(big, 0.9)) if len(big) else None,
        "n_ge5us": int(len(big)),
        "command": f"python -m tpucost data noise {root} --sample {sample} --seed {seed}",
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "rows": rows,
    }
    (root / "noise.json").write_text(json.dumps(result, indent=1))
    return result


def _progress(items: list, enabled: bool) -> Any:
    from tqdm import tqdm  # text bars: no ipywidgets needed in notebooks

    return tqdm(items, disable=not enabled, desc="re-measure", unit="program")


def additivity_table(data_dir: str | os.PathLike | None = None) -> Any:
    """One row per measured (program, configuration): family, wall time, summed labels, ratio.

    The ratio is the sum of the program's top-level kernel labels over its wall time (min of
    several ``block_until_ready`` runs): the paper's assumption is that it is 1. ``reason`` says
    why a ratio is far from 1 (outside 0.7-1.3), judged from the program itself.
    """
    import pandas as pd

    root = Path(data_dir) if data_dir is not None else data.default_data_dir()
    rows = [e for e in read_log(root) if e.get("status") == "ok"]
    frame = pd.DataFrame(rows, columns=["program_id", "configuration", "wall_ns", "kernel_ns_per_run",
                                        "additivity_ratio", "kernels"])
    frame.insert(1, "family", frame["program_id"].str.split("-").str[0])
    frame.insert(2, "form", frame["program_id"].str.split("-").str[1])
    frame["reason"] = [_additivity_reason(r) for r in frame.itertuples()]
    return frame


def _additivity_reason(row: Any) -> str:
    ratio, wall = row.additivity_ratio, row.wall_ns
    if 0.7 <= ratio <= 1.3:
        return ""
    if ratio < 0.7 and wall < 300_000:
        return "short program: per-run dispatch overhead (~50-150 us on CPU) is not in any kernel"
    if ratio < 0.7:
        return "time between kernels (executor scheduling, thread hand-offs) is not in any kernel"
    return "kernels overlapped (async work counted in two labels) or loop bodies measured per call"


def additivity_summary(table: Any) -> dict[str, Any]:
    """Quantiles of the additivity ratio, per-family medians, and the pairs outside 0.7-1.3 by reason."""
    ratio = table["additivity_ratio"]
    far = table[table["reason"] != ""]
    return {
        "pairs": int(len(table)),
        "quantiles": {str(q): float(ratio.quantile(q)) for q in (0.1, 0.25, 0.5, 0.75, 0.9)},
        "within_0.7_1.3": float(((ratio >= 0.7) & (ratio <= 1.3)).mean()),
        "median_by_family": {k: float(v) for k, v in table.groupby("family")["additivity_ratio"].median().items()},
        "outside_by_reason": {k: int(v) for k, v in far["reason"].value_counts().items()},
    }
