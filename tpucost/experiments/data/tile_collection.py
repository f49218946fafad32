"""Collecting the tile data set: which problems, which configurations, measured and resumable.

`collect` measures a deterministic list of problems (`problem_list`: the families in turn,
shapes drawn with ``tiles.sample_shapes`` in fixed blocks, so the first n problems of a longer list
are the n problems of a shorter one), every n-th for ``shard=(i, n)``, through the resumable
`tpucost.experiments.data.collection` (one log line per problem with its configs and runtimes). At most
``max_configs`` legal configurations of a problem are measured (`select_configs`). The data set
(`tpucost.experiments.data.tile.TileDataset`) is rebuilt from the log (`finalize`), recomputing graphs and
config features from (family, shape, dtype, config), which are deterministic; `merge` joins
the folders of several shards. `measure_noise` re-measures problems: the ranking noise floor.
"""

from __future__ import annotations

import hashlib
import math
import os
import time
import zlib
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from tpucost.experiments import tiles
from tpucost.experiments.data import collection
from tpucost.experiments.data.tile import (
    NOISE_FILE,
    PROVENANCE_FILE,
    TileDataset,
    TileProblem,
    default_data_dir,
    from_problems,
    load_dataset,
    problem_key,
    save_dataset,
    shape_sort_key,
    shape_text,
    stats,
)
from tpucost.files import write_json_atomic, write_text_atomic
from tpucost.method import device, metrics

__all__ = [
    "SHAPE_BLOCK",
    "problem_list",
    "select_configs",
    "collect",
    "finalize",
    "merge",
    "measure_noise",
    "measure_overhead_share",
    "sample_problems",
]

#: Shapes asked of ``tiles.sample_shapes`` at a time (see `problem_list`).
SHAPE_BLOCK = 16


def _family_shapes(name: str, seed: int, backend: str | None) -> Iterator[tuple[int, ...]]:
    """Distinct shapes of one family, in a fixed order: ``sample_shapes`` in blocks of
    :data:`SHAPE_BLOCK`, block b drawn with ``default_rng([seed, crc32(name), b])``.

    Stops when 4 blocks in a row bring no new shape (the family's shapes are exhausted).
    """
    seen: set[tuple[int, ...]] = set()
    empty, block = 0, 0
    while empty < 4:
        rng = np.random.default_rng([seed, zlib.crc32(name.encode()), block])
        new = 0
        for shape in tiles.sample_shapes(name, SHAPE_BLOCK, rng, backend=backend):
            shape = tuple(int(d) for d in shape)
            if shape not in seen:
                seen.add(shape)
                new += 1
                yield shape
        empty = 0 if new else empty + 1
        block += 1


def problem_list(
    n_problems: int,
    seed: int = 0,
    families: Sequence[str] | None = None,
    dtypes: Sequence[str] = ("float32",),
    backend: str | None = None,
) -> list[tuple[str, tuple[int, ...], str]]:
    """The first ``n_problems`` (family, shape, dtype) of the deterministic problem sequence.

    The families (sorted names of ``tiles.TILE_FAMILIES`` unless given) take turns; each family's
    shapes come from ``tiles.sample_shapes`` in fixed blocks (see `_family_shapes`), and its k-th
    shape gets ``dtypes[k % len(dtypes)]``. The list for n is the first n of the list for any
    larger n, so a collection can grow. A family out of shapes drops out of the rotation.
    """
    names = sorted(tiles.TILE_FAMILIES) if families is None else list(dict.fromkeys(families))
    unknown = [f for f in names if f not in tiles.TILE_FAMILIES]
    if unknown:
        raise ValueError(
            f"unknown tile families {unknown}; tpucost.experiments.tiles has {sorted(tiles.TILE_FAMILIES)}"
        )
    if not dtypes:
        raise ValueError("dtypes must name at least one dtype")
    streams = {f: enumerate(_family_shapes(f, seed, backend)) for f in names}
    out: list[tuple[str, tuple[int, ...], str]] = []
    while len(out) < n_problems and streams:
        for f in list(streams):
            if len(out) >= n_problems:
                break
            item = next(streams[f], None)
            if item is None:
                del streams[f]
                continue
            k, shape = item
            out.append((f, shape, dtypes[k % len(dtypes)]))
    return out


def select_configs(
    configs: Sequence[Mapping[str, int]],
    max_configs: int | None,
    key: str,
    block_keys: Sequence[str] | None = None,
) -> list[dict[str, int]]:
    """At most ``max_configs`` of ``configs``, deterministic given ``key`` (the problem id).

    Ordered by block volume (the product of the ``block_keys`` values, all values if None), the
    smallest-block and the largest-block configs are always kept. The rest is cut into equal
    strata of volume, and each stratum gives a **pair**: one random config (seeded by ``key``) and
    its twin, a config of the same volume and another shape where the stratum has one (else the
    nearest volume). So the kept configs spread over the range of block sizes (working sets on
    both sides of the caches), and blocks of equal volume but different aspect, which differ in
    operand re-reads and not in the number of grid steps, sit side by side: a ranking by volume
    alone cannot order a pair. An odd budget ends with one single pick. The kept configs stay in
    ``configs`` order.
    """
    configs = [dict(c) for c in configs]
    if max_configs is None or len(configs) <= max_configs:
        return configs
    if max_configs < 1:
        raise ValueError(f"max_configs must be at least 1, got {max_configs}")

    def volume(c: dict[str, int]) -> float:
        vals = [c[k] for k in block_keys if k in c] if block_keys else list(c.values())
        return float(np.prod(np.asarray(vals, np.float64))) if vals else 0.0

    order = sorted(range(len(configs)), key=lambda j: (volume(configs[j]), j))
    keep = {order[-1]} if max_configs == 1 else {order[0], order[-1]}
    budget = max_configs - len(keep)
    if budget > 0:
        rng = np.random.default_rng(int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "little"))
        n_strata = (budget + 1) // 2
        for s, stratum in enumerate(np.array_split(np.asarray(order[1:-1]), n_strata)):
            stratum = [int(j) for j in stratum]
            if not stratum:
                continue
            first = stratum[rng.integers(len(stratum))]
            keep.add(first)
            if s == n_strata - 1 and budget % 2:
                continue  # the odd one: a single pick
            others = [j for j in stratum if j != first]
            if others:
                twin = min(
                    others, key=lambda j: (abs(volume(configs[j]) - volume(configs[first])), rng.random())
                )
                keep.add(twin)
    return [configs[j] for j in sorted(keep)]


# ------------------------------------------------------------------------------------ collection


def _entry_key(entry: Mapping[str, Any]) -> str:
    return problem_key(entry["family"], entry["shape"], entry["dtype"])


def _finite_or_none(x: Any) -> float | None:
    try:
        x = float(x)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def _measure_problem(
    item: collection.Item,
    max_configs: int | None,
    repeats: int,
    cache: dict[str, TileProblem],
    lowering: str,
) -> dict[str, Any]:
    """The log line of one problem: its legal configs, at most ``max_configs`` of them measured."""
    family, shape, dtype = item.payload
    legal = tiles.legal_configs(family, shape, dtype)
    configs = select_configs(legal, max_configs, item.key, tuple(tiles.family(family).block_keys))
    if not configs:
        return {"status": "skipped", "reason": "no legal config", "n_legal": 0}
    runtimes = list(tiles.measure_configs(family, shape, dtype, configs, repeats=repeats, lowering=lowering))
    if len(runtimes) != len(configs):
        raise ValueError(f"measure_configs returned {len(runtimes)} runtimes for {len(configs)} configs")
    entry = {
        "status": "ok",
        "configs": configs,
        "runtime_ns": [_finite_or_none(r) for r in runtimes],
        "n_legal": len(legal),
        "repeats": repeats,
    }
    # the graph and config features now, so that a problem they fail on is an error here, not at
    # finalize (which recomputes them for problems of earlier runs)
    record = _problem_from_entry({**item.fields, **entry})
    if record is not None:
        cache[item.key] = record
    return entry


def collect(
    out_dir: str | os.PathLike,
    n_problems: int,
    seed: int = 0,
    shard: tuple[int, int] = (0, 1),
    *,
    families: Sequence[str] | None = None,
    repeats: int = 5,
    progress: bool = True,
    max_load: float | None = None,
    max_configs: int | None = 24,
    dtypes: Sequence[str] = ("float32",),
    lowering: str | None = None,
) -> TileDataset:
    """Measure the problems of `problem_list` (every ``shard[1]``-th from ``shard[0]``) into ``out_dir``.

    ``lowering``: how each kernel runs (`tpucost.experiments.tiles.build`; default the backend's); a folder
    holds one lowering's labels (ValueError when its log has another).

    Each problem: its legal configs (``tiles.legal_configs``), at most ``max_configs`` of them
    (`select_configs`), measured with ``tiles.measure_configs(..., repeats=repeats)``; then one log
    line. Problems already in the log are not measured again; the folder must have been measured
    on this device. With ``max_load``, waits before each problem while the 1-minute load average
    is above it. Returns the data set of everything in the folder's log (`finalize`).
    """
    if not 0 <= shard[0] < shard[1]:
        raise ValueError(f"shard must be (i, n) with 0 <= i < n, got {shard}")
    out = Path(out_dir)
    lowering = tiles.tile_lowering(None, lowering)
    if (out / collection.LOG).exists() and (before := log_lowering(collection.read_log(out))) != lowering:
        raise ValueError(
            f"{out / collection.LOG}: measured with the {before!r} tile lowering, not {lowering!r}; "
            "a data set holds one lowering's labels: collect into a new folder"
        )
    problems = problem_list(n_problems, seed, families, dtypes)[shard[0] :: shard[1]]
    items = [
        collection.Item(problem_key(*p), {"family": p[0], "shape": list(p[1]), "dtype": p[2]}, p)
        for p in problems
    ]
    cache: dict[str, TileProblem] = {}
    start = {
        "n_problems": n_problems,
        "seed": seed,
        "shard": list(shard),
        "families": list(families) if families else None,
        "dtypes": list(dtypes),
        "max_configs": max_configs,
        "repeats": repeats,
        "lowering": lowering,
    }
    collection.run(
        out,
        items,
        _entry_key,
        lambda item: _measure_problem(item, max_configs, repeats, cache, lowering),
        start,
        max_load=max_load,
        progress=progress,
        desc="collect tiles",
        unit="problem",
    )
    call = (
        f"collect({str(out)!r}, n_problems={n_problems}, seed={seed}, shard={tuple(shard)}, "
        f"families={families!r}, max_configs={max_configs}, repeats={repeats}, max_load={max_load}, "
        f"dtypes={tuple(dtypes)!r}, lowering={lowering!r})"
    )
    return _build_and_save(out, collection.read_log(out), collection.read_device(out), call, [out], cache)


def finalize(out_dir: str | os.PathLike) -> TileDataset:
    """Rebuild ``out_dir``'s data set (``tiles.npz``, ``schema.json``, ``PROVENANCE.md``) from its log."""
    out = Path(out_dir)
    if not (out / collection.LOG).exists():
        raise FileNotFoundError(f"{out / collection.LOG}: no collection log to build a tile data set from")
    dev = collection.read_device(out)
    if dev is None:
        raise ValueError(
            f"{out / collection.DEVICE}: missing: the device that measured {out / collection.LOG} is unknown"
        )
    return _build_and_save(out, collection.read_log(out), dev, f"finalize({str(out)!r})", [out])


def merge(folders: Sequence[str | os.PathLike], out_dir: str | os.PathLike) -> TileDataset:
    """Join the collection folders ``folders`` (shards of one device) into ``out_dir``.

    Every folder must have a ``device.json`` naming the same device (ValueError naming two folders
    otherwise). ``out_dir`` gets their log lines (each distinct line once, folder order), the
    device, and the data set built from the merged log: a problem measured in several folders is
    taken from the first. Problems are stored in canonical order, so merged shards equal one run.
    """
    roots = [Path(d) for d in folders]
    if not roots:
        raise ValueError("merge needs at least one folder")
    for r in roots:
        if not (r / collection.LOG).exists():
            raise FileNotFoundError(f"{r / collection.LOG}: not a tile collection folder (no log)")
        if collection.read_device(r) is None:
            raise ValueError(f"{r / collection.DEVICE}: missing: cannot tell which device measured {r}")
    dev = collection.one_device(roots)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out / collection.DEVICE, dev)
    collection.merge_logs(roots, out)
    call = f"merge({[str(r) for r in roots]!r}, {str(out)!r})"
    return _build_and_save(out, collection.read_log(out), dev, call, roots)


def _problem_from_entry(entry: Mapping[str, Any]) -> TileProblem | None:
    """The record of a measured log entry (graph and features recomputed), None if no valid runtime."""
    family, shape, dtype = entry["family"], tuple(int(d) for d in entry["shape"]), entry["dtype"]
    pairs = [
        (dict(c), float(r))
        for c, r in zip(entry["configs"], entry["runtime_ns"], strict=True)
        if r is not None and math.isfinite(r) and r > 0
    ]
    if not pairs:
        return None
    configs = [c for c, _ in pairs]
    feats = np.stack(
        [np.asarray(tiles.config_features(family, shape, dtype, c), np.float32).reshape(-1) for c in configs]
    )
    return TileProblem(
        family,
        shape_text(shape),
        dtype,
        tiles.kernel_graph(family, shape, dtype),
        configs,
        feats,
        np.array([r for _, r in pairs], np.float64),
    )


def log_lowering(entries: Sequence[Mapping[str, Any]]) -> str:
    """The tile lowering a collection log was measured with: its start lines' ``lowering`` (those
    written before there were two lowerings: ``"pallas"``); ValueError when they disagree."""
    found = {e.get("lowering", "pallas") for e in entries if e.get("status") == "start"}
    if len(found) > 1:
        raise ValueError(
            f"the log mixes tile lowerings {sorted(found)}: a data set holds one lowering's labels"
        )
    return found.pop() if found else "pallas"


def _build(
    entries: Sequence[Mapping[str, Any]], dev: Mapping[str, Any], cache: dict[str, TileProblem] | None = None
) -> TileDataset:
    """The data set of the log's "ok" entries: first entry per problem, canonical order."""
    ok: dict[str, Mapping[str, Any]] = {}
    for e in entries:
        if e.get("status") == "ok":
            ok.setdefault(_entry_key(e), e)
    order = sorted(
        ok.values(), key=lambda e: (e["family"], shape_sort_key(shape_text(e["shape"])), e["dtype"])
    )
    problems = []
    for e in order:
        key = _entry_key(e)
        try:
            p = (cache or {}).get(key) or _problem_from_entry(e)
        except Exception as err:
            raise ValueError(
                f"problem {key} of the log: cannot rebuild its graph or config features: "
                f"{type(err).__name__}: {err}"
            ) from err
        if p is not None:
            problems.append(p)
    return from_problems(
        problems,
        source="tpucost",
        device=dev or {},
        config_feature_names=tuple(tiles.CONFIG_FEATURE_NAMES),
        lowering=log_lowering(entries),
    )


def _build_and_save(
    out: Path,
    entries: Sequence[Mapping[str, Any]],
    dev: dict[str, Any] | None,
    call: str,
    roots: Sequence[Path],
    cache: dict[str, TileProblem] | None = None,
) -> TileDataset:
    ds = _build(entries, dev or {}, cache)
    save_dataset(ds, out)
    st = stats(ds)
    counts = (
        f"problems: {st['problems']} ({', '.join(f'{k} {v}' for k, v in st['problems_per_family'].items())}); "
        f"configurations: {st['configs']} (per problem min {st['configs_per_problem']['min']}, "
        f"median {st['configs_per_problem']['median']}, max {st['configs_per_problem']['max']})"
    )
    device_line = device.describe(ds.device) if ds.device.get("id") else ds.device.get("name", "unrecorded")
    write_text_atomic(
        out / PROVENANCE_FILE,
        collection.provenance(
            "Tile data set provenance",
            entries,
            f"tpucost.experiments.data.tile_collection.{call}",
            roots,
            device_line,
            counts,
            ("n_problems", "seed", "shard", "families", "dtypes", "max_configs", "repeats", "lowering"),
        ),
    )
    return load_dataset(out)


def sample_problems(n_problems: int, sample: int, seed: int) -> np.ndarray:
    """Sorted indices of ``min(sample, n_problems)`` distinct problems drawn with ``seed``: the
    problems a re-measurement (noise floor, overhead share) measures again."""
    return np.sort(
        np.random.default_rng(seed).choice(n_problems, size=min(sample, n_problems), replace=False)
    )


def measure_noise(
    data_dir: str | os.PathLike | None = None,
    sample: int = 20,
    seed: int = 0,
    repeats: int = 5,
    progress: bool = True,
) -> dict[str, Any]:
    """Measure ``sample`` problems of a collected folder (default: the bundled data) a second time; write
    and return ``noise.json``.

    The noise floor of the ranking metrics: Kendall's tau and top-k slowdown of the first
    measurement used as a "model" of the second. No model can agree with a measurement much better
    than a second measurement does. Must run on the device that collected the folder, in the same
    label mode, on a quiet machine.
    """
    out = Path(data_dir) if data_dir is not None else default_data_dir()
    ds = load_dataset(out)
    fp = collection.require_device(ds.device, out / collection.DEVICE, "a noise floor")
    chosen = sample_problems(len(ds), sample, seed)
    first, second, rows = [], [], []
    for i in tqdm(chosen, disable=not progress, desc="noise", unit="problem"):
        i = int(i)
        shape = tiles.parse_problem_shape(str(ds.family[i]), str(ds.shape[i]))
        again = np.asarray(
            tiles.measure_configs(
                str(ds.family[i]),
                shape,
                str(ds.dtype[i]),
                ds.configs(i),
                repeats=repeats,
                lowering=ds.lowering,
            ),
            np.float64,
        )
        first.append(ds.runtime_ns(i))
        second.append(again)
        rows.append(
            {"problem": str(ds.problem_id[i]), "median_ratio": float(np.median(again / ds.runtime_ns(i)))}
        )
    report = {
        **metrics.ranking_metrics(first, second),
        "device_id": fp["id"],
        "sample": len(chosen),
        "seed": seed,
        "repeats": repeats,
        "load_average": collection.load_average(),
        "time": time.time(),
        "problems": rows,
    }
    write_json_atomic(out / NOISE_FILE, report, indent=2)
    return report


def measure_overhead_share(
    data_dir: str | os.PathLike | None = None,
    sample: int = 20,
    seed: int = 0,
    repeats: int = 5,
    progress: bool = True,
    lowering: str | None = None,
) -> dict[str, Any]:
    """The per-step overhead share (`tpucost.experiments.tiles.step_overhead_shares`) of ``sample`` problems of a
    tile data set (default: the bundled one), every configuration of each, measured here.

    ``lowering``: how to run the kernels (default: the data set's). Returns the median share over
    all configurations and over the problems' medians, the device
    that measured (both runtimes of a share are this device's; the data set's labels are not used),
    and per problem its median share and how many configurations it has.
    """
    ds = load_dataset(data_dir)
    lowering = lowering or ds.lowering
    chosen = sample_problems(len(ds), sample, seed)
    rows, every = [], []
    for i in tqdm(chosen, disable=not progress, desc="overhead", unit="problem"):
        i = int(i)
        family = str(ds.family[i])
        shape = tiles.parse_problem_shape(family, str(ds.shape[i]))
        shares = tiles.step_overhead_shares(
            family, shape, str(ds.dtype[i]), ds.configs(i), repeats=repeats, lowering=lowering
        )
        every.extend(shares)
        rows.append(
            {
                "problem": str(ds.problem_id[i]),
                "configs": len(shares),
                "median_share": float(np.median(shares)),
            }
        )
    medians = [r["median_share"] for r in rows]
    return {
        "data": str(ds.root),
        "sample": len(rows),
        "seed": seed,
        "repeats": repeats,
        "lowering": lowering,
        "median_share": float(np.median(every)),
        "median_of_problem_medians": float(np.median(medians)),
        "p90_share": float(np.percentile(every, 90)),
        "device": device.fingerprint(),
        "load_average": collection.load_average(),
        "problems": rows,
    }
