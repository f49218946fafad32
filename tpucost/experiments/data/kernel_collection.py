"""Collecting the kernel data set: corpus programs measured, resumable, merged, checked for noise.

`collect` measures the programs of ``program_ids(n_programs, seed, families)`` (those with ``index %
n == i`` for ``shard=(i, n)``) under each applicable configuration, through the resumable
`tpucost.experiments.data.collection`: `measure_program` compiles, labels every kernel with
`tpucost.method.measure.measure_kernels` (again, in rounds, while a kernel's label has not settled:
`settle_labels`), cuts and featurizes, and writes the records of the pair as
``parts/<program>__<config>.npz`` before its log line. `finalize` deduplicates the parts into the
data set (`tpucost.experiments.data.kernel`); `merge` joins the folders of several shards (of one device).
`measured_runs` and `dispatch_ns_per_kernel` read the log's measured pairs (wall times, summed
labels); `measure_noise` re-measures a sample of kernels: the label noise floor (`remeasure_noise`,
written nowhere);
`collection_progress` says what a run (or several) measured so far and which configurations and
families still bring new kernels per minute of measuring; `occurrence_spread` how far apart the
labels of one kernel are where it was measured more than once (the floor a label by kernel has).
"""

from __future__ import annotations

import dataclasses
import os
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np

from tpucost.experiments.data import collection
from tpucost.experiments.data.kernel import (
    NOISE_FILE,
    KernelDataset,
    concat,
    dedup,
    default_data_dir,
    from_graphs,
    load_dataset,
    read_shard,
    save_dataset,
    save_shard,
)
from tpucost.experiments.programs import (
    Program,
    configurations_for,
    parse_program_id,
    program_from_id,
    program_ids,
)
from tpucost.files import write_json_atomic
from tpucost.method import features, hlo, kernels
from tpucost.method.measure import Measurement, compile_fn, measure_kernels

__all__ = [
    "PARTS",
    "SETTLE_TOLERANCE",
    "settle_labels",
    "measure_program",
    "collect",
    "load_parts",
    "finalize",
    "merge",
    "measured_runs",
    "dispatch_ns_per_kernel",
    "NOISE_RUNS",
    "NOISE_COMPARISON",
    "measure_noise",
    "remeasure_noise",
    "collection_progress",
    "occurrence_spread",
]

#: The folder of a collection's parts (one npz per measured program and configuration).
PARTS = "parts"


#: A kernel's label has settled when a new round of traced runs comes within this fraction of it.
SETTLE_TOLERANCE = 0.03
#: Kernels shorter than this (ns) are not waited for (their spread is the timer's, not the device's).
SETTLE_MIN_NS = 5_000.0


def settle_labels(
    measure_round: Callable[[], dict[str, float]],
    tolerance: float = SETTLE_TOLERANCE,
    max_rounds: int = 4,
    min_ns: float = SETTLE_MIN_NS,
) -> tuple[dict[str, float], int, list[str]]:
    """Labels (kernel -> ns, the minimum over rounds), the rounds run, and the kernels still unsettled.

    ``measure_round()`` measures every kernel once more (a round of traced runs, labels being
    minima). Rounds repeat, at least two and at most ``max_rounds``, while a kernel of at least
    ``min_ns`` has not settled: its new round's label is more than ``tolerance`` away from its
    lowest so far. Only the programs with such a kernel are measured again.
    """
    labels = dict(measure_round())
    unsettled = [k for k, v in labels.items() if v >= min_ns]
    rounds = 1
    while unsettled and rounds < max_rounds:
        again = measure_round()
        rounds += 1
        unsettled = [k for k in unsettled if abs(again.get(k, labels[k]) - labels[k]) > tolerance * labels[k]]
        labels = {k: min(v, again.get(k, v)) for k, v in labels.items()}
    return labels, rounds, unsettled


def measure_program(program: Program, config: str, repeats: int = 5) -> tuple[KernelDataset, dict[str, Any]]:
    """Records of one (program, configuration) and the results of its log line (phase timings in s).

    The program is compiled first (``compile_s``); ``measure_kernels`` then reuses JAX's
    in-memory compilation cache, so ``measure_s`` is mostly running and tracing, in the rounds
    of `settle_labels` (``rounds`` and the ``unsettled`` kernels go in the log line).
    """
    fn, options = program.configured(config)
    t0 = time.perf_counter()
    compile_fn(fn, program.args, options)
    t1 = time.perf_counter()
    measured: list[Measurement] = []

    def measure_round() -> dict[str, float]:
        m = measure_kernels(fn, *program.args, repeats=repeats, compiler_options=options)
        measured.append(m)
        return m.runtime_ns

    runtime_ns, rounds, unsettled = settle_labels(measure_round)
    m = dataclasses.replace(measured[0], runtime_ns=runtime_ns)
    t2 = time.perf_counter()
    graphs, labels, calls = [], [], []
    for k in kernels.decompose(m.module or hlo.parse_module(m.hlo_text)):
        label = m.runtime_ns.get(k.name)
        if label is None or not label > 0:
            continue
        graphs.append(features.featurize(k))
        labels.append(label)
        calls.append(m.calls_per_run.get(k.name, k.calls_per_run))
    meta = {
        "program_id": program.program_id,
        "family": program.family,
        "form": program.form,
        "configuration": config,
        "backend": m.backend,
        "device_kind": m.device_kind,
        "jax_version": jax.__version__,
    }
    records = from_graphs(graphs, labels, calls, meta)
    t3 = time.perf_counter()
    kernel_ns = sum(t * m.calls_per_run.get(k, 1) for k, t in m.runtime_ns.items() if k not in m.nested)
    entry = {
        "status": "ok",
        "hparams": program.hparams,  # the split keeps programs of equal hyperparameters together
        "kernels": len(records),
        "missing": len(m.missing),
        "additivity_ratio": m.additivity_ratio,
        "wall_ns": min(m.wall_ns_per_run),
        "kernel_ns_per_run": kernel_ns,
        "repeats": repeats,
        "rounds": rounds,
        "unsettled": len(unsettled),
        "compile_s": t1 - t0,
        "measure_s": t2 - t1,
        "featurize_s": t3 - t2,
    }
    return records, entry


def _part_name(program_id: str, config: str) -> str:
    return re.sub(r"[^\w.\-]", "_", f"{program_id}__{config}") + ".npz"


def _pair_key(entry: Mapping[str, Any]) -> str:
    return f"{entry['program_id']}/{entry['configuration']}"


def _pairs(
    n_programs: int,
    seed: int,
    shard: tuple[int, int],
    configurations: Sequence[str] | None,
    families: Sequence[str] | None,
) -> Iterator[collection.Item]:
    """The (program id, configuration) pairs to measure; programs are built only when measured."""
    i, n = shard
    for index, program_id in enumerate(program_ids(n_programs, seed, families)):
        if index % n != i:
            continue
        family, form, _, _ = parse_program_id(program_id)
        for config in configurations_for(family, form):
            if configurations is None or config in configurations:
                fields = {"program_id": program_id, "configuration": config}
                yield collection.Item(_pair_key(fields), fields, (program_id, config))


def collect(
    out_dir: str | os.PathLike,
    n_programs: int,
    seed: int = 0,
    shard: tuple[int, int] = (0, 1),
    *,
    families: Sequence[str] | None = None,
    repeats: int = 5,
    progress: bool = True,
    max_load: float | None = None,
    resume: bool = False,
    configurations: Sequence[str] | None = None,
    do_finalize: bool = True,
    max_steal: float | None = None,
    give_up_s: float = 1800.0,
    commit_every_s: float | None = None,
    on_chunk: collection.ChunkHook | None = None,
    stop_after_s: float | None = None,
    compile_ahead: Callable[[list[str]], Any] | None = None,
) -> dict[str, Any]:
    """Measure programs into ``out_dir`` (see "Collection" above); returns a summary dict.

    With ``max_load`` (``max_steal``) set, the run pauses before a pair while the 1-minute load
    average (the share of CPU time the hypervisor stole during the last pair) is above it: measure
    on a quiet machine (`collection.wait_until_quiet`, waiting at most ``give_up_s``). ``on_chunk(out_dir, summary)`` is called
    every ``commit_every_s`` seconds and after the last pair, ``stop_after_s`` ends the run early
    (`collection.run`). ``compile_ahead(keys)``, given the keys of the pairs still to measure
    in order, may start a worker that compiles them ahead (the lab's precompile worker on the spare
    core, ``python -m lab collect-pack``): an object with ``prepare(key)``, called before each
    pair, and ``stop()``, which returns what it did; or None. ``max_load`` then allows the worker's
    own 1. The summary counts pairs, kernel records, errors, seconds,
    seconds paused, the median and largest steal share, and says whether the run ``stopped``
    early (``precompile``: what the worker did, None when off). Raises FileExistsError when
    ``out_dir`` already has a log and ``resume`` is False.
    """
    out = Path(out_dir)
    if not 0 <= shard[0] < shard[1]:
        raise ValueError(f"shard must be (i, n) with 0 <= i < n, got {shard}")
    if (out / collection.LOG).exists() and not resume:
        raise FileExistsError(
            f"{out / collection.LOG} exists: pass resume=True (--resume) to continue that run"
        )
    counts = {"kernels": 0}
    built: dict[str, Program] = {}  # the program in hand: its configurations come one after another
    items = list(_pairs(n_programs, seed, shard, configurations, families))
    worker = None
    if compile_ahead is not None:
        done_keys = {_pair_key(e) for e in collection.read_log(out) if e.get("status") in collection.DONE}
        worker = compile_ahead([i.key for i in items if i.key not in done_keys])
        if worker is not None and max_load is not None:
            max_load += 1.0  # the worker's own process on the other core

    def measure(item: collection.Item) -> dict[str, Any]:
        if worker is not None:
            worker.prepare(item.key)
        program_id, config = item.payload
        if program_id not in built:
            built.clear()
            built[program_id] = program_from_id(program_id)
        program = built[program_id]
        records, entry = measure_program(program, config, repeats)
        (out / PARTS).mkdir(exist_ok=True)
        save_shard(records, out / PARTS / _part_name(program.program_id, config))  # before the log line
        counts["kernels"] += len(records)
        return entry

    start = {
        "n_programs": n_programs,
        "seed": seed,
        "shard": list(shard),
        "repeats": repeats,
        "resume": resume,
        "families": list(families) if families else None,
        "configurations": list(configurations) if configurations else None,
        "max_load": max_load,
        "max_steal": max_steal,
        "compile_ahead": worker is not None,
    }
    try:
        done = collection.run(
            out,
            items,
            _pair_key,
            measure,
            start,
            max_load=max_load,
            max_steal=max_steal,
            give_up_s=give_up_s,
            commit_every_s=commit_every_s,
            on_chunk=on_chunk,
            stop_after_s=stop_after_s,
            progress=progress,
            desc="collect",
            unit="config",
        )
    finally:
        worker_summary = worker.stop() if worker is not None else None
    summary = {
        "pairs": done["measured"],
        "kernels": counts["kernels"],
        **{k: done[k] for k in ("errors", "seconds", "paused_s", "steal_median", "steal_max", "stopped")},
        "precompile": worker_summary,
    }
    if do_finalize:
        summary["dataset_kernels"] = len(finalize(out))
    return summary


def load_parts(folder: str | os.PathLike) -> KernelDataset:
    """All part files of a collect folder (or of its ``parts/``), in file-name order."""
    d = Path(folder)
    if (d / PARTS).is_dir():
        d = d / PARTS
    return concat([read_shard(p) for p in sorted(d.glob("*.npz"))])


def finalize(out_dir: str | os.PathLike, shard_size: int = 100_000) -> KernelDataset:
    """Deduplicate ``out_dir``'s parts into shards + ``schema.json`` in ``out_dir``."""
    return merge([out_dir], out_dir, shard_size)


def _part_files(folders: Sequence[str | os.PathLike]) -> dict[str, Path]:
    """``{file name: path}`` of the parts of collect folders (each folder's ``parts/``, or the
    folder itself); a part present in several folders is taken from the first."""
    files: dict[str, Path] = {}
    for folder in map(Path, folders):
        d = folder / PARTS if (folder / PARTS).is_dir() else folder
        for p in d.glob("*.npz"):
            files.setdefault(p.name, p)
    return files


def merge(
    folders: Sequence[str | os.PathLike],
    out_dir: str | os.PathLike,
    shard_size: int = 100_000,
    allow_mixed_devices: bool = False,
) -> KernelDataset:
    """Deduplicate the parts of several collect folders into one data set in ``out_dir``.

    Parts are taken in file-name order over all folders (a part present in two folders is read
    once), so the result does not depend on how the runs were sharded. Folders measured on
    different devices are refused unless ``allow_mixed_devices``. ``out_dir`` also gets the
    folders' log lines, each once (what `measure_noise`, the additivity table and program totals read).
    """
    roots = [Path(d).parent if Path(d).name == PARTS else Path(d) for d in folders]
    fingerprint = collection.one_device(roots, allow_mixed_devices)
    files = _part_files(roots)
    ds = dataclasses.replace(
        dedup(concat([read_shard(files[name]) for name in sorted(files)])), device=fingerprint
    )
    save_dataset(ds, out_dir, shard_size)
    collection.merge_logs(roots, Path(out_dir))
    return load_dataset(out_dir)


def measured_runs(
    folder: str | os.PathLike, program_ids: Iterable[str] | None = None
) -> list[dict[str, Any]]:
    """The log lines of the (program, configuration) pairs measured without error, optionally only
    those of ``program_ids``: wall time, summed labels, kernels, ... (see `measure_program`)."""
    wanted = None if program_ids is None else {str(p) for p in program_ids}
    return [e for e in _measured(collection.read_log(folder)) if wanted is None or e["program_id"] in wanted]


def _measured(entries: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The log lines of pairs measured without error."""
    return [dict(e) for e in entries if e.get("status") == "ok" and "program_id" in e]


def dispatch_ns_per_kernel(entries: Iterable[Mapping[str, Any]]) -> float | None:
    """The device's dispatch overhead per kernel: the median over measured pairs (log lines of
    `measure_program`) of (wall time - summed labels) / kernels, the time a run spends launching
    kernels that no label holds. A program's predicted total adds this much per kernel."""
    gaps = [
        (e["wall_ns"] - e["kernel_ns_per_run"]) / max(int(e["kernels"]), 1)
        for e in entries
        if e.get("wall_ns") is not None and e.get("kernel_ns_per_run") is not None
    ]
    return float(np.median(gaps)) if gaps else None


def _folder_progress(folder: Path, entries: list[dict[str, Any]], ok: list[dict[str, Any]]) -> dict[str, Any]:
    """One folder's log (``ok``: its measured pairs): pairs, errors, programs, minutes measured
    and paused, settling rounds."""
    rounds = [e for e in ok if "rounds" in e]
    return {
        "folder": str(folder),
        "pairs": len(ok),
        "errors": sum(e.get("status") == "error" for e in entries),
        "programs": len({e["program_id"] for e in ok}),
        "measuring_min": round(sum(float(e.get("wall_s", 0.0)) for e in ok) / 60, 1),
        "paused_min": round(sum(float(e.get("paused_s", 0.0)) for e in ok) / 60, 1),
        "rounds": {
            str(k): sum(e["rounds"] == k for e in rounds) for k in sorted({e["rounds"] for e in rounds})
        },
        "unsettled_kernels": sum(int(e["unsettled"]) for e in rounds),
        "kernel_records": sum(int(e["kernels"]) for e in rounds),
    }


def _new_per_minute(new: Mapping[str, int], seconds: Mapping[str, float]) -> dict[str, dict[str, float]]:
    """``{key: {"new", "measuring_s", "new_per_min"}}``, the best yield first."""
    rows = {
        k: {
            "new": new[k],
            "measuring_s": round(seconds[k], 1),
            "new_per_min": 60 * new[k] / max(seconds[k], 1e-9),
        }
        for k in new
    }
    return dict(sorted(rows.items(), key=lambda kv: -kv[1]["new_per_min"]))


def collection_progress(folders: Sequence[str | os.PathLike]) -> dict[str, Any]:
    """What collect folders (of one device, e.g. several runs to be merged) hold so far.

    Per folder: its log's pairs, errors, programs, minutes measuring and paused for load, and how
    many pairs took each number of `settle_labels` rounds (with the kernels still unsettled after
    them, of all kernel records). Over all folders, in the order the pairs were measured: the
    distinct kernels (by ``kernel_hash``, as `merge` counts them) and, per configuration and per
    family, how many of them each brought first and how fast (per minute of measuring): what to
    collect next when time is short. Reads the log and each part's ``kernel_hash`` only.

    Raises FileNotFoundError naming the folders that hold no collection log.
    """
    missing = [str(f) for f in folders if not (Path(f) / collection.LOG).exists()]
    if missing:
        raise FileNotFoundError(f"no collection log ({collection.LOG}) in {', '.join(missing)}")
    measured: list[tuple[float, Path, dict[str, Any]]] = []
    summaries = []
    for folder in map(Path, folders):
        entries = collection.read_log(folder)
        ok = _measured(entries)
        summaries.append(_folder_progress(folder, entries, ok))
        measured += [(float(e.get("time", 0.0)), folder, e) for e in ok]
    seen: set[str] = set()
    new: dict[str, dict[str, int]] = {"configuration": {}, "family": {}}
    seconds: dict[str, dict[str, float]] = {"configuration": {}, "family": {}}
    for _, folder, e in sorted(measured, key=lambda m: m[0]):
        part = folder / PARTS / _part_name(e["program_id"], e["configuration"])
        if not part.exists():
            continue
        with np.load(part, allow_pickle=False) as z:
            hashes = set(z["kernel_hash"].tolist())
        fresh = len(hashes - seen)
        seen |= hashes
        for by, key in (
            ("configuration", e["configuration"]),
            ("family", parse_program_id(e["program_id"])[0]),
        ):
            new[by][key] = new[by].get(key, 0) + fresh
            seconds[by][key] = seconds[by].get(key, 0.0) + float(e.get("wall_s", 0.0))
    return {
        "folders": summaries,
        "distinct_kernels": len(seen),
        "by_configuration": _new_per_minute(new["configuration"], seconds["configuration"]),
        "by_family": _new_per_minute(new["family"], seconds["family"]),
    }


#: Where `measure_noise` logs its re-measured pairs, inside the data folder (a rerun resumes).
NOISE_RUNS = "noise_runs"
#: How a noise floor compares labels: per (program, configuration), the least over a kernel's
#: instances in the pair, stored (its part) against re-measured. Floors without this field took the
#: last instance re-measured against the data set's label (the least over every pair and instance),
#: which counts a kernel's context (its instances' 10x spread in one program) as noise.
NOISE_COMPARISON = "pair minimum"


def measure_noise(
    data_dir: str | os.PathLike | None = None,
    sample: int = 200,
    seed: int = 0,
    repeats: int | None = None,
    progress: bool = True,
    max_load: float | None = None,
    *,
    max_steal: float | None = None,
) -> dict[str, Any]:
    """Re-measure a random sample of a data set's kernels and compare with the stored labels.

    Picks ``sample`` kernels at random, regenerates the (program, configuration) each was first
    measured in, measures it again and matches kernels by `kernel_hash`. The relative difference
    ``|new - stored| / stored`` of the same kernel in the same pair (each the least over the
    kernel's instances in the program, `NOISE_COMPARISON`; stored: the pair's part in ``parts/``,
    else the data set's label) is the label noise: no model can predict labels closer than that. Returns (and writes to ``noise.json`` beside the data) its median and 90th
    percentile, plus the per-kernel rows (`remeasure_noise`). Must run on the device that measured the
    data, in a fresh process (``python -m tpucost data noise``), on an otherwise idle machine. Each
    re-measured pair is one line of ``noise_runs/log.jsonl`` (`collection.run`): a killed run
    loses at most the pair it was measuring, and a rerun measures only the pairs still missing.
    """
    root = Path(data_dir) if data_dir is not None else default_data_dir()
    result = remeasure_noise(
        root,
        sample,
        seed,
        repeats,
        progress,
        max_load=max_load,
        max_steal=max_steal,
        runs_dir=root / NOISE_RUNS,
    )
    rows = result.pop("rows")
    result.update(command=f"python -m tpucost data noise {root} --sample {sample} --seed {seed}", rows=rows)
    write_json_atomic(root / NOISE_FILE, result)
    return result


def remeasure_noise(
    data_dir: str | os.PathLike,
    sample: int = 200,
    seed: int = 0,
    repeats: int | None = None,
    progress: bool = True,
    *,
    max_load: float | None = None,
    max_steal: float | None = None,
    runs_dir: str | os.PathLike,
) -> dict[str, Any]:
    """What `measure_noise` returns, written nowhere but the re-measured pairs' log in ``runs_dir``.

    ``repeats`` defaults to the most the data's log used. The result: ``sampled``, ``matched``,
    ``repeats``, ``seed``, ``median_rel``, ``p90_rel``, the same over kernels of at least 5 us
    (``median_rel_ge5us``, ``p90_rel_ge5us``, ``n_ge5us``), ``time`` and the per-kernel ``rows``.
    """
    root = Path(data_dir)
    ds = load_dataset(root)
    collection.require_device(ds.device, root, "a noise floor")
    repeats = repeats or max((int(e.get("repeats", 5)) for e in measured_runs(root)), default=5)
    picked = np.random.default_rng(seed).choice(len(ds), size=min(sample, len(ds)), replace=False)
    wanted: dict[tuple[str, str], list[int]] = {}
    for i in picked:
        wanted.setdefault((str(ds.program_id[i]), str(ds.configuration[i])), []).append(int(i))
    fresh = _remeasured_pairs(Path(runs_dir), sorted(wanted), repeats, progress, (max_load, max_steal))
    rows = []
    for pair, indices in sorted(wanted.items()):
        stored = _pair_labels(root, *pair)
        for i in indices:
            h = str(ds.kernel_hash[i])
            if h in fresh.get(pair, {}):
                rows.append(_noise_row(ds, i, stored.get(h, float(ds.runtime_ns[i])), fresh[pair][h]))
    rel = np.array([r["rel_diff"] for r in rows])
    big = np.array([r["rel_diff"] for r in rows if r["stored_ns"] >= 5_000])
    return {
        "comparison": NOISE_COMPARISON,
        "sampled": int(len(picked)),
        "matched": len(rows),
        "repeats": repeats,
        "seed": seed,
        "median_rel": float(np.median(rel)) if len(rel) else None,
        "p90_rel": float(np.quantile(rel, 0.9)) if len(rel) else None,
        "median_rel_ge5us": float(np.median(big)) if len(big) else None,
        "p90_rel_ge5us": float(np.quantile(big, 0.9)) if len(big) else None,
        "n_ge5us": int(len(big)),
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "rows": rows,
    }


def _remeasured_pairs(
    folder: Path,
    pairs: Sequence[tuple[str, str]],
    repeats: int,
    progress: bool,
    gate: tuple[float | None, float | None],
) -> dict[tuple[str, str], dict[str, float]]:
    """``{(program, configuration): {kernel_hash: runtime_ns}}`` of ``pairs`` measured again with
    ``repeats``, each logged in ``folder`` as soon as it is measured (earlier lines are reused);
    ``gate``: the run's ``(max_load, max_steal)``."""

    def key_of(e: Mapping[str, Any]) -> str:
        return f"{e['program_id']}|{e['configuration']}|{e['repeats']}|{e.get('comparison')}"

    def measure(item: collection.Item) -> dict[str, Any]:
        records, _ = measure_program(
            program_from_id(item.fields["program_id"]), item.fields["configuration"], repeats
        )
        return {"status": "ok", "runtime_ns": _min_by_hash(records)}

    items = [
        collection.Item(key_of(f), f, None)
        for f in (
            {"program_id": pid, "configuration": config, "repeats": repeats, "comparison": NOISE_COMPARISON}
            for pid, config in pairs
        )
    ]
    start = {"task": "noise", "repeats": repeats}
    collection.run(
        folder,
        items,
        key_of,
        measure,
        start,
        max_load=gate[0],
        max_steal=gate[1],
        progress=progress,
        desc="re-measure",
        unit="program",
    )
    return {
        (e["program_id"], e["configuration"]): e["runtime_ns"]
        for e in collection.read_log(folder)
        if e.get("status") == "ok"
        and e.get("repeats") == repeats
        and e.get("comparison") == NOISE_COMPARISON
        and "runtime_ns" in e
    }


def _min_by_hash(records: KernelDataset) -> dict[str, float]:
    """``{kernel_hash: runtime_ns}`` of one measured pair: a kernel that runs several times in the
    program (instances of one hash) gets the least of its instances, as a label does."""
    best: dict[str, float] = {}
    for h, t in zip(records.kernel_hash.tolist(), records.runtime_ns.tolist(), strict=True):
        best[h] = min(t, best.get(h, t))
    return best


def _pair_labels(root: Path, program_id: str, configuration: str) -> dict[str, float]:
    """The pair's own labels when it was measured (`_min_by_hash` of its part in ``parts/``), {}
    when the folder keeps no parts (the data set's label, the least over every pair, stands in)."""
    path = root / PARTS / _part_name(program_id, configuration)
    return _min_by_hash(read_shard(path)) if path.is_file() else {}


def _noise_row(ds: KernelDataset, i: int, old: float, new: float) -> dict[str, Any]:
    """One re-measured kernel: its stored label in the pair (``old``), the new one and their
    relative difference."""
    return {
        "kernel": str(ds.name[i]),
        "program_id": str(ds.program_id[i]),
        "configuration": str(ds.configuration[i]),
        "stored_ns": old,
        "remeasured_ns": float(new),
        "rel_diff": abs(float(new) - old) / old,
    }


def _spread(pairs: Sequence[tuple[float, float]]) -> dict[str, Any]:
    """``{"kernels", "median", "p90"}`` of ``|a - b| / min(a, b)`` over ``pairs`` (one per kernel)."""
    rel = np.array([abs(a - b) / min(a, b) for a, b in pairs], dtype=np.float64)
    if not len(rel):
        return {"kernels": 0, "median": None, "p90": None}
    return {"kernels": len(rel), "median": float(np.median(rel)), "p90": float(np.quantile(rel, 0.9))}


def _occurrences(folders: Sequence[str | os.PathLike]) -> dict[str, list[tuple[str, float]]]:
    """``{kernel_hash: [(part name, label ns), ...]}`` over the parts of collect folders (a part
    present in two folders read once, as `merge` does)."""
    files = _part_files(folders)
    if not files:
        raise FileNotFoundError(f"no collected parts ({PARTS}/*.npz) in {', '.join(map(str, folders))}")
    found: dict[str, list[tuple[str, float]]] = {}
    for name in sorted(files):
        with np.load(files[name], allow_pickle=False) as z:
            for h, ns in zip(z["kernel_hash"].tolist(), z["runtime_ns"].tolist(), strict=True):
                found.setdefault(h, []).append((name, float(ns)))
    return found


def occurrence_spread(
    folders: Sequence[str | os.PathLike], min_ns: float = SETTLE_MIN_NS, seed: int = 0
) -> dict[str, Any]:
    """How far apart the labels of one kernel are where collect folders measured it more than once.

    A kernel (one ``kernel_hash``) often runs at several places of a program and in many
    programs; each occurrence has its own label in the folders' parts. Over kernels whose lowest
    label is at least ``min_ns``, the relative difference ``|a - b| / min(a, b)`` of:

    * ``same_run``: two occurrences in one measured pair (the same traced runs, so the same
      moment): what the kernel's place in the program (what ran before it, what is in cache)
      changes, which no re-measurement removes;
    * ``across_runs``: occurrences in two different pairs (another program or configuration,
      measured at another time), drawn at random;
    * ``split_half_min``: kernels with at least 4 occurrences, their occurrences cut at random into
      two halves and the minimum of each half compared: how reproducible a data set's label (the
      minimum over occurrences, `tpucost.experiments.data.kernel.dedup`) is, from half the occurrences.

    Each is ``{"kernels", "median", "p90"}`` with one value per kernel. Reads each part's
    ``kernel_hash`` and ``runtime_ns`` only; measures nothing. Raises FileNotFoundError when the
    folders hold no parts.
    """
    rng = np.random.default_rng(seed)
    same, across, halves = [], [], []
    for occurrences in _occurrences(folders).values():
        if len(occurrences) < 2 or min(ns for _, ns in occurrences) < min_ns:
            continue
        by_part: dict[str, list[float]] = {}
        for part, ns in occurrences:
            by_part.setdefault(part, []).append(ns)
        twice = next((labels for labels in by_part.values() if len(labels) > 1), None)
        if twice is not None:
            same.append((twice[0], twice[1]))
        if len(by_part) > 1:
            a, b = rng.choice(len(by_part), size=2, replace=False)
            parts = list(by_part.values())
            across.append((parts[a][0], parts[b][0]))
        if len(occurrences) >= 4:
            labels = rng.permutation([ns for _, ns in occurrences])
            half = len(labels) // 2
            halves.append((float(labels[:half].min()), float(labels[half:].min())))
    return {
        "min_ns": min_ns,
        "seed": seed,
        "same_run": _spread(same),
        "across_runs": _spread(across),
        "split_half_min": _spread(halves),
    }
