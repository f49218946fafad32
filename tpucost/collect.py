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
``device.json``              `tpucost.device.fingerprint()` of the machine that measured the parts
``schema.json``, ``kernels-*.npz``  the deduplicated data set, written by :func:`finalize`
===========================  =====================================================================

A data set comes from one device: ``--resume`` on a machine whose fingerprint differs from
``device.json`` is refused, and so is merging folders of different devices (unless asked).

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
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np

from tpucost import data, device, features, hlo, kernels
from tpucost.measure import Measurement, compile_fn, measure_kernels
from tpucost.programs import (
    CONFIGURATIONS,
    Program,
    applicable_configurations,
    generate_programs,
    program_from_id,
)

__all__ = ["collect", "finalize", "merge", "measure_program", "measure_noise", "read_log", "load_parts",
           "configured_program", "dispatch_ns_per_kernel", "measured_runs"]

LOG = "log.jsonl"
PARTS = "parts"
DEVICE = "device.json"


def read_device(out_dir: str | os.PathLike) -> dict[str, Any] | None:
    """The fingerprint of the device that measured a collect folder (None for older folders)."""
    path = Path(out_dir) / DEVICE
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: not JSON: {err}") from err


def _claim_device(out_dir: Path, fingerprint: dict[str, Any]) -> None:
    """Write ``device.json``, or refuse to add this device's labels to another device's folder."""
    recorded = read_device(out_dir)
    if recorded is None:
        data.write_text_atomic(out_dir / DEVICE, json.dumps(fingerprint, indent=1))
    elif device.differences(recorded, fingerprint):
        raise ValueError(
            f"{out_dir / DEVICE}: this collection was measured on {device.describe(recorded)}, this machine is "
            f"{device.describe(fingerprint)} ({'; '.join(device.differences(recorded, fingerprint))}); "
            "a data set comes from one device: collect into a new folder")


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


def measured_runs(out_dir: str | os.PathLike, program_ids: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """The log entries of the (program, configuration) pairs measured without error, optionally
    only those of ``program_ids``: wall time, summed labels, kernels, ... (see `measure_program`)."""
    wanted = None if program_ids is None else {str(p) for p in program_ids}
    return [e for e in read_log(out_dir)
            if e.get("status") == "ok" and (wanted is None or e["program_id"] in wanted)]


def _append_log(out_dir: Path, entry: dict[str, Any]) -> None:
    with open(out_dir / LOG, "a") as fh:
        fh.write(json.dumps(entry) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def _load_average() -> float | None:
    """The machine's 1-minute load average (None where the OS does not report one)."""
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


def _wait_until_quiet(max_load: float | None, bar: Any, poll_s: float = 15.0, give_up_s: float = 1800.0) -> float:
    """Pause while the load average exceeds ``max_load`` (another process is loading the machine).

    Returns the seconds paused. Gives up waiting after ``give_up_s`` (the log records the load).
    """
    paused, load = 0.0, _load_average()
    while max_load is not None and load is not None and load > max_load and paused < give_up_s:
        bar.set_description(f"paused: load average {load:.2f} > {max_load}")
        time.sleep(poll_s)
        paused += poll_s
        load = _load_average()
    return paused


def configured_program(program: Program, config: str) -> tuple[Any, dict[str, Any]]:
    """The program's function as configuration ``config`` builds it, and the compiler options to use."""
    return program.configured_fn(config), dict(CONFIGURATIONS[config].compiler_options)


def measure_program(program: Program, config: str, repeats: int = 5) -> tuple[data.KernelDataset, dict[str, Any]]:
    """Records of one (program, configuration) and its log entry (with phase timings in s).

    The program is compiled first (``compile_s``); ``measure_kernels`` then reuses JAX's
    in-memory compilation cache, so ``measure_s`` is mostly running and tracing.
    """
    fn, options = configured_program(program, config)
    t0 = time.perf_counter()
    compile_fn(fn, program.args, options)
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
            do_finalize: bool = True, max_load: float | None = None) -> dict[str, Any]:
    """Measure programs into ``out_dir`` (see the module docstring); returns a summary dict.

    Every log line records the machine's load average; with ``max_load`` set, the run pauses
    before a program while the 1-minute load average is above it (measure on a quiet machine).

    Raises FileExistsError when ``out_dir`` already has a log and ``resume`` is False.
    """
    from tqdm import tqdm  # text bars: no ipywidgets needed in notebooks

    out = Path(out_dir)
    if not 0 <= shard[0] < shard[1]:
        raise ValueError(f"shard must be (i, n) with 0 <= i < n, got {shard}")
    if (out / LOG).exists() and not resume:
        raise FileExistsError(f"{out / LOG} exists: pass resume=True (--resume) to continue that run")
    try:
        (out / PARTS).mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ValueError(f"cannot write the collection folder {out}: {err.strerror or err}") from err
    fingerprint = device.fingerprint()
    _claim_device(out, fingerprint)
    done = {(e["program_id"], e["configuration"]) for e in read_log(out) if e.get("status") in ("ok", "error")}
    _append_log(out, {"status": "start", "n_programs": n_programs, "seed": seed, "shard": list(shard),
                      "repeats": repeats, "resume": resume, "time": time.time(), "device_id": fingerprint["id"],
                      "load_average": _load_average(),
                      "families": list(families) if families else None})
    n_kernels = n_errors = n_pairs = 0
    t_start = time.perf_counter()
    bar = tqdm(total=None, disable=not progress, unit="config", desc="collect")
    for program, configs in _todo(n_programs, seed, shard, configurations, families, done):
        for config in configs:
            paused = _wait_until_quiet(max_load, bar)
            bar.set_description(f"{program.program_id} {config}")
            load = _load_average()
            try:
                records, entry = measure_program(program, config, repeats)
                data.save_shard(records, out / PARTS / _part_name(program.program_id, config))
            except Exception as err:  # noqa: BLE001 - a failing program is logged and skipped
                entry = {"program_id": program.program_id, "configuration": config, "status": "error",
                         "error": f"{type(err).__name__}: {err}",
                         "traceback": traceback.format_exc(limit=3)}
                n_errors += 1
            entry.update(load_average=load, paused_s=paused, device_id=fingerprint["id"])
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


def _one_device(parts_dirs: Sequence[Path], allow_mixed_devices: bool) -> dict[str, Any] | None:
    """The device of every folder; raises ValueError naming two folders whose devices differ."""
    found = [(d, read_device(d)) for d in parts_dirs]
    known = [(d, fp) for d, fp in found if fp is not None]
    for d, fp in known[1:]:
        diff = device.differences(known[0][1], fp)
        if diff and not allow_mixed_devices:
            raise ValueError(
                f"{known[0][0]} was measured on {device.describe(known[0][1])} and {d} on {device.describe(fp)} "
                f"({'; '.join(diff)}): labels of different devices do not belong in one data set "
                "(pass --allow-mixed-devices to merge them anyway)")
    if allow_mixed_devices and len({fp["id"] for _, fp in known}) > 1:
        return None
    return known[0][1] if known and len(known) == len(found) else None


def merge(parts_dirs: Sequence[str | os.PathLike], out_dir: str | os.PathLike,
          shard_size: int = 100_000, allow_mixed_devices: bool = False) -> data.KernelDataset:
    """Deduplicate the parts of several collect folders into one data set in ``out_dir``.

    Parts are taken in file-name order over all folders (a part present in two folders, e.g. a
    re-run, is read once), so the result does not depend on how the runs were sharded. Folders
    measured on different devices (their ``device.json``) are refused unless
    ``allow_mixed_devices``; the data set records the device when all folders name the same one.
    A new ``out_dir`` also gets the folders' ``log.jsonl`` lines, each line once, in folder order
    (what `measure_noise`, `additivity_table` and the program totals read).
    """
    roots = [Path(d).parent if Path(d).name == PARTS else Path(d) for d in parts_dirs]
    fingerprint = _one_device(roots, allow_mixed_devices)
    files: dict[str, Path] = {}
    for d in roots:
        d = d / PARTS if (d / PARTS).is_dir() else d
        for p in d.glob("*.npz"):
            files.setdefault(p.name, p)
    ds = data.dedup(data.concat([data.read_shard(files[name]) for name in sorted(files)]))
    ds.device = fingerprint
    data.save_dataset(ds, out_dir, shard_size)
    if Path(out_dir).resolve() not in {r.resolve() for r in roots}:
        if fingerprint is not None:
            data.write_text_atomic(Path(out_dir) / DEVICE, json.dumps(fingerprint, indent=1))
        _merge_logs(roots, Path(out_dir) / LOG)
    return data.load_kernel_dataset(out_dir)


def _merge_logs(roots: Sequence[Path], out: Path) -> None:
    """Write the log lines of every folder to ``out``, each distinct line once, in folder order."""
    lines: dict[str, None] = {}
    for root in roots:
        if (root / LOG).exists():
            lines.update((line, None) for line in (root / LOG).read_text().splitlines() if line.strip())
    if lines:
        data.write_text_atomic(out, "".join(f"{line}\n" for line in lines))


def dispatch_ns_per_kernel(entries: Iterable[Mapping[str, Any]]) -> float | None:
    """The device's dispatch overhead per kernel, from measured (program, configuration) pairs.

    ``entries`` are log lines of `measure_program` (keys ``wall_ns``, ``kernel_ns_per_run``,
    ``kernels``). Returns the median over pairs of (wall time - summed labels) / kernels: the time
    a run spends launching kernels that no kernel's label holds. A program's predicted runtime is
    the sum of its kernels' plus this much per kernel. None when there is no pair.
    """
    gaps = [(e["wall_ns"] - e["kernel_ns_per_run"]) / max(int(e["kernels"]), 1)
            for e in entries if e.get("wall_ns") is not None and e.get("kernel_ns_per_run") is not None]
    return float(np.median(gaps)) if gaps else None


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
    root = Path(data_dir) if data_dir is not None else data.default_data_dir()
    ds = data.load_kernel_dataset(root)
    repeats = repeats or max((int(e.get("repeats", 5)) for e in measured_runs(root)), default=5)
    rng = np.random.default_rng(seed)
    picked = rng.choice(len(ds), size=min(sample, len(ds)), replace=False)
    wanted: dict[tuple[str, str], list[int]] = {}
    for i in picked:
        wanted.setdefault((str(ds.program_id[i]), str(ds.configuration[i])), []).append(int(i))
    programs = {pid: program_from_id(pid) for pid, _ in wanted}
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
    data.write_text_atomic(root / "noise.json", json.dumps(result, indent=1))
    return result


def _progress(items: list, enabled: bool) -> Any:
    from tqdm import tqdm  # text bars: no ipywidgets needed in notebooks

    return tqdm(items, disable=not enabled, desc="re-measure", unit="program")


def additivity_table(data_dir: str | os.PathLike | None = None) -> Any:
    """One row per measured (program, configuration): family, wall time, summed labels, ratio.

    The ratio is the sum of the program's top-level kernel labels over its wall time (min of
    several ``block_until_ready`` runs): the paper's assumption is that it is 1. ``reason`` says
    why a ratio is far from 1 (outside :data:`ADDITIVE`), judged from the program itself.
    """
    import pandas as pd

    root = Path(data_dir) if data_dir is not None else data.default_data_dir()
    rows = measured_runs(root)
    frame = pd.DataFrame(rows, columns=["program_id", "configuration", "wall_ns", "kernel_ns_per_run",
                                        "additivity_ratio", "kernels"])
    frame.insert(1, "family", frame["program_id"].str.split("-").str[0])
    frame.insert(2, "form", frame["program_id"].str.split("-").str[1])
    frame["reason"] = [_additivity_reason(r) for r in frame.itertuples()]
    return frame


#: The window in which summed labels count as adding up to the program's wall time.
ADDITIVE = (0.8, 1.1)


def _additivity_reason(row: Any) -> str:
    ratio, wall = row.additivity_ratio, row.wall_ns
    if ADDITIVE[0] <= ratio <= ADDITIVE[1]:
        return ""
    if ratio < ADDITIVE[0] and wall < 300_000:
        return "short program: the dispatch overhead of each kernel call is not in any kernel"
    if ratio < ADDITIVE[0]:
        return "time between kernels (executor scheduling, thread hand-offs) is not in any kernel"
    return "kernels overlapped (async work counted in two labels) or loop bodies measured per call"


def _ratio_summary(ratio: Any) -> dict[str, Any]:
    lo, hi = ADDITIVE
    if not len(ratio):
        return {"pairs": 0}
    return {
        "pairs": int(len(ratio)),
        "median": float(ratio.median()),
        "p10": float(ratio.quantile(0.1)),
        "p90": float(ratio.quantile(0.9)),
        "max": float(ratio.max()),
        f"within_{lo}_{hi}": float(((ratio >= lo) & (ratio <= hi)).mean()),
        f"above_{hi}": float((ratio > hi).mean()),
    }


def additivity_summary(table: Any) -> dict[str, Any]:
    """Summed labels / wall time over the collection's (program, configuration) pairs.

    ``{"pairs", "median", "p10", "p90", "max", "within_0.8_1.1", "above_1.1", "pairs_ge_1ms":
    {same keys for pairs whose wall time is at least 1 ms}, "dispatch_ns_per_kernel",
    "with_dispatch_ge_1ms", "median_by_family", "outside_by_reason"}`` (fractions in 0-1).
    ``dispatch_ns_per_kernel`` is the median over pairs of (wall time - summed labels) / kernels:
    the per-kernel overhead a program's prediction adds to the sum of its kernels;
    ``with_dispatch_ge_1ms`` is the ratio (summed labels + that overhead per kernel) / wall time
    over the pairs of at least 1 ms: its median and the fraction within 10% of 1.
    """
    far = table[table["reason"] != ""]
    dispatch = dispatch_ns_per_kernel(table.to_dict("records"))
    long = table[table["wall_ns"] >= 1e6]
    with_dispatch = (long["kernel_ns_per_run"] + (dispatch or 0.0) * long["kernels"]) / long["wall_ns"]
    return {
        **_ratio_summary(table["additivity_ratio"]),
        "pairs_ge_1ms": _ratio_summary(long["additivity_ratio"]),
        "dispatch_ns_per_kernel": dispatch,
        "with_dispatch_ge_1ms": {"pairs": int(len(with_dispatch)),
                                 "median": float(with_dispatch.median()) if len(long) else None,
                                 "within_0.9_1.1": float(((with_dispatch - 1).abs() <= 0.1).mean()) if len(long) else None},
        "median_by_family": {k: float(v) for k, v in table.groupby("family")["additivity_ratio"].median().items()},
        "outside_by_reason": {k: int(v) for k, v in far["reason"].value_counts().items()},
    }
