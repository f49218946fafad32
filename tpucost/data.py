"""The kernel data set: featurized kernel graphs with measured runtimes, on disk and in memory.

A *kernel record* is one kernel of one compiled program: its graph (``featurize`` output), its
runtime label (minimum over traced runs, ns) and where it came from. Identical kernels (same
canonical fingerprint, see :func:`fingerprint`) are stored once, with the MIN runtime, a
``count`` of occurrences and the list of (program, configuration) sources.

On-disk format
--------------
A data folder holds ``schema.json`` and shards ``kernels-00000.npz``, ``kernels-00001.npz``, ...
written with ``np.savez_compressed`` and read with ``np.load(allow_pickle=False)`` (no object
arrays, strings are fixed-width unicode). ``collect`` writes parts in the same shard format
(one per program and configuration, not deduplicated) under ``parts/``. With K kernels, N nodes
in all, M edges in all, S sources in all and F node features, a shard holds:

=====================  ================  ===================================================
array                  dtype / shape     meaning
=====================  ================  ===================================================
schema_version         int64[]           :data:`SCHEMA_VERSION`
feature_layout         unicode[]         ``features.layout_fingerprint()``
node_offsets           int64[K+1]        kernel k's nodes are ``node_offsets[k]:[k+1]``
edge_offsets           int64[K+1]        kernel k's edges are ``edge_offsets[k]:[k+1]``
opcodes                int32[N]          opcode ids (``features.OPCODE_VOCAB``)
node_features          float32[N, F]     node feature rows (``features.NODE_FEATURE_NAMES``)
senders, receivers     int32[M]          edge endpoints, indices *within* the kernel
runtime_ns             float64[K]        label: min over traced runs and over duplicates
count                  int64[K]          occurrences merged into this record
calls_per_run          int64[K]          calls of the kernel in one program run
fingerprint            unicode[K]        canonical hash (graph arrays + backend + device kind)
name, kind             unicode[K]        HLO instruction name, fusion kind or opcode
program_id, family,    unicode[K]        metadata of the FIRST occurrence
form, configuration,
backend, device_kind,
jax_version
source_offsets         int64[K+1]        kernel k's sources are ``source_offsets[k]:[k+1]``
source_program_id,     unicode[S]        every (program, configuration, family) the kernel
source_configuration,                    was measured in, first occurrence first
source_family
=====================  ================  ===================================================

``schema.json``: ``{"schema_version", "feature_layout", "num_node_features", "features", "kernels",
"shards": [{"file", "kernels"}], "device"}``; ``features`` is the data set's
`tpucost.features.FeatureSpec` (``to_dict``; absent in data sets written before it was recorded,
which are `tpucost.features.TPUCOST_FEATURES`); ``device`` (`tpucost.device.fingerprint()` of the
machine that measured every label; absent in data sets collected before it was recorded). An
optional ``noise.json`` next to it (``{"median_rel": .., "p90_rel": ..}``, relative run-to-run spread of labels) feeds :func:`stats`.

Splits
------
:func:`split` gives a split by name (one of :data:`SPLITS`). Both splits assign PROGRAMS
(distinct ``source_program_id``) to train, val and test, each program to exactly one part, and
return a :class:`Split` (the programs of each part and the kernel indices of each part). A
deduplicated kernel can have run in programs of several parts; each kernel is in exactly one
kernel part:

* :func:`split_random` shuffles the programs with the seed and cuts them 80/10/10. A kernel any
  train program ran is train, else one any val program ran is val, else test: the test kernels
  are the ones never seen in training (nor in validation).
* :func:`split_hard` holds out whole families: programs of :data:`HARD_TEST_FAMILIES` are test,
  of :data:`HARD_VAL_FAMILIES` val, the rest train. Held-out first: a kernel any test program
  ran is test, else one any val program ran is val, else train, so train shares no kernel with
  the held-out families.

A test program is scored on every kernel it ran (:func:`program_rows`: one row per (program,
kernel), a kernel two test programs ran counts in both), including kernels of the train part;
the rows whose kernel is a test kernel are the "unseen" figures (see ``tpucost.tasks.kernel``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.resources
import json
import os
import zipfile
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from tpucost import features
from tpucost.features import TPUCOST_FEATURES, FeatureSpec, KernelGraph

__all__ = [
    "SCHEMA_VERSION",
    "HARD_TEST_FAMILIES",
    "HARD_VAL_FAMILIES",
    "KernelDataset",
    "fingerprint",
    "from_graphs",
    "concat",
    "dedup",
    "save_shard",
    "read_shard",
    "save_dataset",
    "load_kernel_dataset",
    "DATA_DIR_ENV",
    "bundled_dir",
    "default_data_dir",
    "SPLITS",
    "Split",
    "ProgramRows",
    "split",
    "split_random",
    "split_hard",
    "program_rows",
    "stats",
    "write_atomic",
    "write_text_atomic",
]

SCHEMA_VERSION = 1
#: Families whose programs form the hard test split (never seen in training).
HARD_TEST_FAMILIES: tuple[str, ...] = ("unet", "gru", "nerf_mlp")
#: Family held out for validation in the hard split.
HARD_VAL_FAMILIES: tuple[str, ...] = ("mobilenet_block",)
SHARD_FILE = "kernels-{:05d}.npz"

#: Per-kernel string columns (metadata of the first occurrence).
STR_FIELDS: tuple[str, ...] = (
    "fingerprint", "name", "kind", "program_id", "family", "form", "configuration",
    "backend", "device_kind", "jax_version",
)
SOURCE_FIELDS: tuple[str, ...] = ("source_program_id", "source_configuration", "source_family")
_INT_KERNEL_FIELDS: tuple[str, ...] = ("count", "calls_per_run")
_OFFSETS = {"node_offsets": "opcodes", "edge_offsets": "senders", "source_offsets": "source_program_id"}
#: KernelDataset fields that are not stored as shard arrays.
_NOT_ARRAYS: tuple[str, ...] = ("root", "device", "features")


@dataclasses.dataclass
class KernelDataset:
    """Kernel records in concatenated-ragged arrays (see the module docstring for the fields)."""

    node_offsets: np.ndarray
    edge_offsets: np.ndarray
    opcodes: np.ndarray
    node_features: np.ndarray
    senders: np.ndarray
    receivers: np.ndarray
    runtime_ns: np.ndarray
    count: np.ndarray
    calls_per_run: np.ndarray
    fingerprint: np.ndarray
    name: np.ndarray
    kind: np.ndarray
    program_id: np.ndarray
    family: np.ndarray
    form: np.ndarray
    configuration: np.ndarray
    backend: np.ndarray
    device_kind: np.ndarray
    jax_version: np.ndarray
    source_offsets: np.ndarray
    source_program_id: np.ndarray
    source_configuration: np.ndarray
    source_family: np.ndarray
    root: Path | None = None
    device: dict[str, Any] | None = None  # `tpucost.device.fingerprint()` of the measuring machine
    features: FeatureSpec = TPUCOST_FEATURES  # what the graph arrays mean

    def __len__(self) -> int:
        return int(self.runtime_ns.shape[0])

    @property
    def n_nodes(self) -> np.ndarray:
        """int64[K]: nodes per kernel."""
        return np.diff(self.node_offsets)

    @property
    def n_edges(self) -> np.ndarray:
        """int64[K]: edges per kernel."""
        return np.diff(self.edge_offsets)

    def graph(self, i: int) -> KernelGraph:
        """Kernel ``i`` as a `KernelGraph` (views into the dataset's arrays)."""
        n0, n1 = self.node_offsets[i], self.node_offsets[i + 1]
        e0, e1 = self.edge_offsets[i], self.edge_offsets[i + 1]
        return KernelGraph(
            self.opcodes[n0:n1], self.node_features[n0:n1], self.senders[e0:e1], self.receivers[e0:e1],
            str(self.name[i]), str(self.kind[i]),
        )

    def sources(self, i: int) -> list[tuple[str, str]]:
        """The (program_id, configuration) pairs kernel ``i`` was measured in."""
        s0, s1 = self.source_offsets[i], self.source_offsets[i + 1]
        return list(zip(self.source_program_id[s0:s1].tolist(), self.source_configuration[s0:s1].tolist(), strict=True))

    def to_frame(self) -> pd.DataFrame:
        """One row per kernel: metadata, n_nodes, n_edges, count, calls_per_run, runtime_ns."""
        cols: dict[str, Any] = {f: self.__dict__[f].astype(str) for f in STR_FIELDS}
        cols.update(n_nodes=self.n_nodes, n_edges=self.n_edges, count=self.count,
                    calls_per_run=self.calls_per_run, runtime_ns=self.runtime_ns)
        return pd.DataFrame(cols)

    def subset(self, indices: Sequence[int] | np.ndarray) -> KernelDataset:
        """A new dataset with kernels ``indices`` (in that order)."""
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        out: dict[str, Any] = {f: self.__dict__[f][idx] for f in (*STR_FIELDS, *_INT_KERNEL_FIELDS, "runtime_ns")}
        for off, fields in (
            ("node_offsets", ("opcodes", "node_features")),
            ("edge_offsets", ("senders", "receivers")),
            ("source_offsets", SOURCE_FIELDS),
        ):
            offsets = self.__dict__[off]
            take, new_offsets = _ragged_take(offsets, idx)
            out[off] = new_offsets
            out.update({f: self.__dict__[f][take] for f in fields})
        return KernelDataset(**out, root=self.root, device=self.device, features=self.features)

    def arrays(self) -> dict[str, np.ndarray]:
        """All array fields by name (what a shard stores, less the schema scalars)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in _NOT_ARRAYS}


def _ragged_take(offsets: np.ndarray, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(flat element indices, new offsets) selecting segments ``idx`` of a ragged array."""
    starts, lengths = offsets[idx], offsets[idx + 1] - offsets[idx]
    new_offsets = np.zeros(len(idx) + 1, np.int64)
    np.cumsum(lengths, out=new_offsets[1:])
    take = np.repeat(starts - new_offsets[:-1], lengths) + np.arange(new_offsets[-1], dtype=np.int64)
    return take, new_offsets


# --------------------------------------------------------------------------------------- build


def fingerprint(graph: KernelGraph, backend: str, device_kind: str = "") -> str:
    """Canonical hash of a kernel: opcodes, node features (shapes, attributes), edges, backend.

    The kernel's name is not part of it: the same kernel in two programs has two names.
    """
    h = hashlib.sha256()
    for arr, dtype in ((graph.opcodes, np.int32), (graph.node_features, np.float32),
                       (graph.senders, np.int32), (graph.receivers, np.int32)):
        a = np.ascontiguousarray(arr, dtype=dtype)
        h.update(str(a.shape).encode())
        h.update(a.tobytes())
    h.update(f"|{backend}|{device_kind}".encode())
    return h.hexdigest()[:32]


def from_graphs(graphs: Sequence[KernelGraph], runtime_ns: Sequence[float], calls_per_run: Sequence[int],
                meta: dict[str, str]) -> KernelDataset:
    """Records of kernels of ONE (program, configuration) measurement (count 1 each).

    ``meta`` holds program_id, family, form, configuration, backend, device_kind, jax_version.
    """
    k = len(graphs)
    nodes = np.array([g.num_nodes for g in graphs], np.int64)
    edges = np.array([g.num_edges for g in graphs], np.int64)
    nf = features.NUM_NODE_FEATURES
    cat = lambda xs, dt, shape=(0,): np.concatenate(xs).astype(dt) if xs else np.zeros(shape, dt)  # noqa: E731
    fp = [fingerprint(g, meta["backend"], meta["device_kind"]) for g in graphs]
    col = lambda v: _str_array([v] * k)  # noqa: E731
    return KernelDataset(
        node_offsets=_offsets(nodes), edge_offsets=_offsets(edges),
        opcodes=cat([g.opcodes for g in graphs], np.int32),
        node_features=cat([g.node_features for g in graphs], np.float32, (0, nf)),
        senders=cat([g.senders for g in graphs], np.int32),
        receivers=cat([g.receivers for g in graphs], np.int32),
        runtime_ns=np.asarray(runtime_ns, np.float64).reshape(k),
        count=np.ones(k, np.int64), calls_per_run=np.asarray(calls_per_run, np.int64).reshape(k),
        fingerprint=_str_array(fp), name=_str_array([g.name for g in graphs]),
        kind=_str_array([g.kind for g in graphs]),
        **{f: col(meta[f]) for f in ("program_id", "family", "form", "configuration", "backend",
                                      "device_kind", "jax_version")},
        source_offsets=np.arange(k + 1, dtype=np.int64),
        source_program_id=col(meta["program_id"]), source_configuration=col(meta["configuration"]),
        source_family=col(meta["family"]),
    )


def _offsets(lengths: np.ndarray) -> np.ndarray:
    out = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=out[1:])
    return out


def _str_array(values: Iterable[str]) -> np.ndarray:
    """A fixed-width unicode array (at least ``<U1``, so empty arrays keep a string dtype)."""
    values = [str(v) for v in values]
    width = max([len(v) for v in values] + [1])
    return np.array(values, dtype=f"<U{width}").reshape(len(values))


def concat(parts: Sequence[KernelDataset]) -> KernelDataset:
    """All records of ``parts``, in order (no deduplication)."""
    if not parts:
        return from_graphs([], [], [], dict.fromkeys(("program_id", "family", "form", "configuration",
                                                       "backend", "device_kind", "jax_version"), ""))
    out: dict[str, Any] = {}
    for f in parts[0].arrays():
        if f in _OFFSETS:
            lengths = np.concatenate([np.diff(p.__dict__[f]) for p in parts])
            out[f] = _offsets(lengths)
        elif f in STR_FIELDS or f in SOURCE_FIELDS:
            out[f] = _str_array(np.concatenate([p.__dict__[f].astype(str) for p in parts]).tolist())
        else:
            out[f] = np.concatenate([p.__dict__[f] for p in parts])
    devices = {json.dumps(p.device, sort_keys=True) for p in parts if p.device is not None}
    for p in parts[1:]:
        parts[0].features.check_matches(p.features, "one part", "another")
    return KernelDataset(**out, root=None, device=parts[0].device if len(devices) == 1 else None,
                         features=parts[0].features)


def dedup(ds: KernelDataset) -> KernelDataset:
    """Merge records with the same fingerprint: MIN runtime, summed count, all sources.

    The first record of each fingerprint (in ``ds`` order) gives the graph and metadata; the
    output keeps first-occurrence order.
    """
    fps = ds.fingerprint
    _, first, inverse = np.unique(fps, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")  # unique id -> output position, by first occurrence
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    group = rank[inverse.reshape(-1)]
    out = ds.subset(first[order])
    runtime = np.full(len(order), np.inf)
    np.minimum.at(runtime, group, ds.runtime_ns)
    out.runtime_ns = runtime
    out.count = np.bincount(group, weights=ds.count, minlength=len(order)).astype(np.int64)
    # sources, grouped by output record, original order within a group
    src_group = np.repeat(group, np.diff(ds.source_offsets))
    src_order = np.argsort(src_group, kind="stable")
    out.source_offsets = _offsets(np.bincount(src_group, minlength=len(order)))
    for f in SOURCE_FIELDS:
        out.__dict__[f] = ds.__dict__[f][src_order]
    return out


# ------------------------------------------------------------------------------------- storage


def write_atomic(path: str | os.PathLike, write: Any) -> Path:
    """Write a file all at once or not at all: ``write(fh)`` fills a temporary file beside
    ``path`` (opened in binary mode), which is flushed, synced and renamed onto ``path``.

    A process killed mid-write leaves the old file (or none), never a torn one.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def write_text_atomic(path: str | os.PathLike, text: str) -> Path:
    """`write_atomic` for text (UTF-8)."""
    return write_atomic(path, lambda fh: fh.write(text.encode("utf-8")))


def _atomic_savez(path: Path, arrays: dict[str, np.ndarray]) -> None:
    write_atomic(path, lambda fh: np.savez_compressed(fh, **arrays))


def save_shard(ds: KernelDataset, path: str | os.PathLike) -> Path:
    """Write ``ds`` as one npz shard (atomically: a temporary file, then ``os.replace``)."""
    path = Path(path)
    arrays = ds.arrays()
    arrays["schema_version"] = np.array(SCHEMA_VERSION, np.int64)
    arrays["feature_layout"] = np.array(features.layout_fingerprint())
    _atomic_savez(path, arrays)
    return path


def save_dataset(ds: KernelDataset, out_dir: str | os.PathLike, shard_size: int = 100_000) -> Path:
    """Write ``ds`` as shards of at most ``shard_size`` kernels plus ``schema.json``.

    Shards of an earlier save that are no longer listed are removed.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    shards = []
    for j, start in enumerate(range(0, max(len(ds), 1), shard_size)):
        part = ds.subset(np.arange(start, min(start + shard_size, len(ds))))
        save_shard(part, out_dir / SHARD_FILE.format(j))
        shards.append({"file": SHARD_FILE.format(j), "kernels": len(part)})
    schema = {"schema_version": SCHEMA_VERSION, "feature_layout": features.layout_fingerprint(),
              "num_node_features": features.NUM_NODE_FEATURES, "features": ds.features.to_dict(),
              "kernels": len(ds), "shards": shards}
    if ds.device is not None:
        schema["device"] = ds.device
    write_text_atomic(out_dir / "schema.json", json.dumps(schema, indent=1) + "\n")
    keep = {s["file"] for s in shards}
    for old in out_dir.glob("kernels-*.npz"):
        if old.name not in keep:
            old.unlink()
    return out_dir


_DTYPES: dict[str, str] = {
    "node_offsets": "i8", "edge_offsets": "i8", "source_offsets": "i8", "opcodes": "i4",
    "node_features": "f4", "senders": "i4", "receivers": "i4", "runtime_ns": "f8", "count": "i8",
    "calls_per_run": "i8",
}


def read_shard(path: str | os.PathLike) -> KernelDataset:
    """Load and validate one shard; ValueError names the file and the bad field."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: shard not found")
    if not zipfile.is_zipfile(path):
        raise ValueError(f"{path}: not an npz (zip) shard")
    try:
        with np.load(path, allow_pickle=False) as z:
            data = {k: _read_field(path, z, k) for k in z.files}
    except (zipfile.BadZipFile, OSError, EOFError) as err:
        raise ValueError(f"{path}: not a readable npz shard: {err}") from err
    _check_header(path, data)
    fields = [f.name for f in dataclasses.fields(KernelDataset) if f.name not in _NOT_ARRAYS]
    for f in fields:
        if f not in data:
            raise ValueError(f"{path}: field {f!r}: missing")
    for f, kind in _DTYPES.items():
        if data[f].dtype != np.dtype(kind):
            raise ValueError(f"{path}: field {f!r}: dtype {data[f].dtype}, expected {np.dtype(kind)}")
    for f in (*STR_FIELDS, *SOURCE_FIELDS):
        if data[f].dtype.kind != "U" or data[f].ndim != 1:
            raise ValueError(f"{path}: field {f!r}: expected a 1-d unicode array, got {data[f].dtype}")
    _check_lengths(path, data)
    return KernelDataset(**{f: data[f] for f in fields}, root=path.parent)


def _read_field(path: Path, z: Any, key: str) -> np.ndarray:
    try:
        return z[key]
    except ValueError as err:  # object arrays need pickle, refused
        raise ValueError(f"{path}: field {key!r}: {err}") from err


def _check_header(path: Path, data: dict[str, np.ndarray]) -> None:
    for f in ("schema_version", "feature_layout"):
        if f not in data:
            raise ValueError(f"{path}: field {f!r}: missing")
    if data["schema_version"].shape != () or int(data["schema_version"]) != SCHEMA_VERSION:
        raise ValueError(f"{path}: field 'schema_version': {data['schema_version']!r}, expected {SCHEMA_VERSION}")
    if str(data["feature_layout"]) != features.layout_fingerprint():
        raise ValueError(f"{path}: field 'feature_layout': fingerprint {str(data['feature_layout'])[:12]}... "
                         "differs from this tpucost's features.layout_fingerprint(); re-collect the data")


def _check_lengths(path: Path, data: dict[str, np.ndarray]) -> None:
    """Shapes agree: offsets monotone and ending at their array's length, edges within kernels."""
    if data["node_offsets"].ndim != 1 or data["node_offsets"].shape[0] < 1:
        raise ValueError(f"{path}: field 'node_offsets': expected a 1-d array of K+1 offsets")
    k = data["node_offsets"].shape[0] - 1
    for f in (*STR_FIELDS, *_INT_KERNEL_FIELDS, "runtime_ns"):
        if data[f].shape != (k,):
            raise ValueError(f"{path}: field {f!r}: shape {data[f].shape}, expected ({k},)")
    for off, target in _OFFSETS.items():
        o = data[off]
        if o.shape != (k + 1,) or o[0] != 0 or np.any(np.diff(o) < 0) or o[-1] != data[target].shape[0]:
            raise ValueError(f"{path}: field {off!r}: not {k + 1} increasing offsets from 0 to len({target})")
    n = data["opcodes"].shape[0]
    if data["node_features"].shape != (n, features.NUM_NODE_FEATURES):
        raise ValueError(f"{path}: field 'node_features': shape {data['node_features'].shape}, "
                         f"expected ({n}, {features.NUM_NODE_FEATURES})")
    m = data["senders"].shape[0]
    for f in ("senders", "receivers"):
        if data[f].shape != (m,):
            raise ValueError(f"{path}: field {f!r}: shape {data[f].shape}, expected ({m},)")
        size = np.repeat(np.diff(data["node_offsets"]), np.diff(data["edge_offsets"]))
        if m and (data[f].min() < 0 or np.any(data[f] >= size)):
            raise ValueError(f"{path}: field {f!r}: node index outside its kernel")
    for f in ("source_configuration", "source_family"):
        if data[f].shape != data["source_program_id"].shape:
            raise ValueError(f"{path}: field {f!r}: length differs from 'source_program_id'")
    if k and not np.all(np.isfinite(data["runtime_ns"])):
        raise ValueError(f"{path}: field 'runtime_ns': non-finite values")


#: Environment variable that points the bundled-data lookups at another folder (same layout).
DATA_DIR_ENV = "TPUCOST_DATA_DIR"


def bundled_dir() -> Path:
    """Folder of the bundled data sets and checkpoints: ``$TPUCOST_DATA_DIR``, else package data.

    The package ships ``tpucost/bundled/`` (``kernels_cpu/``, ``checkpoints/``) inside the wheel and
    finds it with ``importlib.resources``, so ``pip install`` of the repository carries it.
    """
    override = os.environ.get(DATA_DIR_ENV)
    if override:
        return Path(override)
    return Path(str(importlib.resources.files("tpucost") / "bundled"))


def missing_bundled_hint(path: Path) -> str:
    """The sentence a default-path error ends with: where it looked and how to look elsewhere."""
    where = f"${DATA_DIR_ENV}={os.environ[DATA_DIR_ENV]}" if os.environ.get(DATA_DIR_ENV) else "the installed package"
    return (f"(looked in {path}, from {where}; set {DATA_DIR_ENV} to a folder laid out like tpucost/bundled/ "
            f"or pass a path explicitly)")


def default_data_dir() -> Path:
    """The bundled data folder: ``bundled_dir() / "kernels_cpu"``."""
    return bundled_dir() / "kernels_cpu"


def load_kernel_dataset(path: str | os.PathLike | None = None) -> KernelDataset:
    """Load a data folder (``schema.json`` + shards) or one ``.npz`` shard, validated.

    ``path=None`` loads the bundled ``kernels_cpu`` (see :func:`bundled_dir`). Raises FileNotFoundError when the
    data is missing, ValueError naming the file and field when it is malformed.
    """
    root = Path(path) if path is not None else default_data_dir()
    if root.is_file():
        return read_shard(root)
    schema_path = root / "schema.json"
    if not schema_path.exists():
        hint = f" {missing_bundled_hint(root)}" if path is None else ""
        raise FileNotFoundError(
            f"no kernel data set at {root} (no schema.json). Collect one with "
            f"`python -m tpucost collect --out DIR` (or merge shards with `python -m tpucost data merge`).{hint}"
        )
    try:
        schema = json.loads(schema_path.read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"{schema_path}: not JSON: {err}") from err
    if schema.get("schema_version") != SCHEMA_VERSION:
        raise ValueError(f"{schema_path}: field 'schema_version': {schema.get('schema_version')!r}, "
                         f"expected {SCHEMA_VERSION}")
    if schema.get("feature_layout") != features.layout_fingerprint():
        raise ValueError(f"{schema_path}: field 'feature_layout': differs from features.layout_fingerprint()")
    parts = [read_shard(root / s["file"]) for s in schema.get("shards", [])]
    ds = concat(parts)
    ds.root = root
    ds.device = schema.get("device")
    ds.features = _schema_features(schema_path, schema)
    if len(ds) != schema.get("kernels"):
        raise ValueError(f"{schema_path}: field 'kernels': {schema.get('kernels')}, shards hold {len(ds)}")
    return ds


def _schema_features(path: Path, schema: dict[str, Any]) -> FeatureSpec:
    """The data set's feature spec from ``schema.json`` (tpucost's own when not recorded)."""
    if "features" not in schema:
        return TPUCOST_FEATURES
    try:
        spec = FeatureSpec.from_dict(schema["features"])
    except (TypeError, ValueError, AttributeError) as err:
        raise ValueError(f"{path}: field 'features': {err}") from err
    spec.check_matches(TPUCOST_FEATURES, f"data set {path}", "tpucost's featurize")
    return spec


# -------------------------------------------------------------------------------------- splits

#: The names `split` knows: by program (``random``) and by family (``hard``).
SPLITS: tuple[str, ...] = ("random", "hard")


@dataclasses.dataclass(frozen=True, eq=False)
class Split:
    """Programs assigned to parts, and the kernels that go with them (see "Splits" above).

    Attributes:
      train_programs, val_programs, test_programs: unicode[P_part], sorted program ids; every
        program of the data set (distinct ``source_program_id``) is in exactly one of them.
      train, val, test: int64[K_part], sorted kernel indices; every kernel is in exactly one.

    Iterating yields the kernel indices ``(train, val, test)``, so
    ``train, val, test = split_random(ds)`` works.
    """

    train_programs: np.ndarray
    val_programs: np.ndarray
    test_programs: np.ndarray
    train: np.ndarray
    val: np.ndarray
    test: np.ndarray

    def __iter__(self) -> Iterator[np.ndarray]:
        return iter((self.train, self.val, self.test))


class ProgramRows(NamedTuple):
    """What some programs ran: one row per distinct (program, kernel) pair, sorted by program, kernel.

    Attributes:
      kernel: int64[R], kernel index of each row.
      program_id: unicode[R], the program that ran it.
      family: unicode[R], that program's family.
    """

    kernel: np.ndarray
    program_id: np.ndarray
    family: np.ndarray


def _source_kernel(ds: KernelDataset) -> np.ndarray:
    """int64[S]: the kernel of each source row."""
    return np.repeat(np.arange(len(ds), dtype=np.int64), np.diff(ds.source_offsets))


def _program_families(ds: KernelDataset) -> tuple[np.ndarray, np.ndarray]:
    """(programs unicode[P] sorted, family unicode[P]) over all sources; ValueError if a program has two."""
    pairs = np.unique(np.stack([ds.source_program_id.astype(str), ds.source_family.astype(str)]), axis=1)
    programs, counts = np.unique(pairs[0], return_counts=True)
    if np.any(counts > 1):
        raise ValueError(f"programs in several families: {programs[counts > 1][:5].tolist()}")
    return programs, pairs[1]


def _cuts(n: int, fractions: Sequence[float]) -> np.ndarray:
    """Where to cut ``n`` shuffled programs into three parts of the given fractions."""
    sizes = np.round(np.asarray(fractions) * n).astype(int)
    if n >= 3:
        sizes[1:] = [max(1, k) if f > 0 else k for k, f in zip(sizes[1:], fractions[1:], strict=True)]
    sizes[0] = n - sizes[1:].sum()
    return np.cumsum(sizes)[:2]


def _assign(ds: KernelDataset, programs: np.ndarray, program_part: np.ndarray, held_out_first: bool) -> Split:
    """The `Split` given each program's part (``programs`` unicode[P] sorted, ``program_part`` int[P] in 0, 1, 2).

    A kernel's part is over the parts of its sources' programs: the lowest (train before val
    before test) or, with ``held_out_first``, the highest (test before val before train).
    """
    source_part = program_part[np.searchsorted(programs, ds.source_program_id)]
    if held_out_first:
        kernel_part = np.zeros(len(ds), np.int64)
        np.maximum.at(kernel_part, _source_kernel(ds), source_part)
    else:
        kernel_part = np.full(len(ds), 2, np.int64)
        np.minimum.at(kernel_part, _source_kernel(ds), source_part)
    return Split(*(programs[program_part == j] for j in range(3)),
                 *(np.flatnonzero(kernel_part == j) for j in range(3)))


def split_random(ds: KernelDataset, seed: int = 0, fractions: Sequence[float] = (0.8, 0.1, 0.1)) -> Split:
    """Programs shuffled with ``seed`` and cut by ``fractions``; kernels seen in training are train.

    Every program (distinct ``source_program_id``) goes to one part. A kernel any train program
    ran is train, else one any val program ran is val, else test: the test kernels are those never
    seen in training or validation. Deterministic. With at least three programs, a part with a
    non-zero fraction gets at least one program.
    """
    if len(fractions) != 3 or min(fractions) < 0 or not np.isclose(sum(fractions), 1.0):
        raise ValueError(f"fractions must be 3 non-negative numbers summing to 1, got {fractions}")
    programs = np.unique(ds.source_program_id.astype(str))
    perm = np.random.default_rng(seed).permutation(len(programs))
    part_of = np.empty(len(programs), np.int64)
    for j, chunk in enumerate(np.split(perm, _cuts(len(programs), fractions))):
        part_of[chunk] = j
    return _assign(ds, programs, part_of, held_out_first=False)


def split_hard(ds: KernelDataset, test_families: Sequence[str] = HARD_TEST_FAMILIES,
               val_families: Sequence[str] = HARD_VAL_FAMILIES) -> Split:
    """Whole families held out: programs by family; held-out kernels go with the held-out part.

    A program of a test family is a test program, of a validation family a val program, else a
    train program. A kernel any test program ran is test, else one any val program ran is val,
    else train: train shares no kernel with the held-out families.
    """
    programs, families = _program_families(ds)
    part_of = np.where(np.isin(families, list(test_families)), 2,
                       np.where(np.isin(families, list(val_families)), 1, 0))
    return _assign(ds, programs, part_of, held_out_first=True)


def split(ds: KernelDataset, name: str, seed: int = 0) -> Split:
    """The ``random`` (by program, `split_random` with ``seed``) or ``hard`` (by family,
    `split_hard`) `Split` of ``ds``; it unpacks as the (train, val, test) kernel indices."""
    if name == "random":
        return split_random(ds, seed)
    if name == "hard":
        return split_hard(ds)
    raise ValueError(f"split must be one of {SPLITS}, got {name!r}")


def program_rows(ds: KernelDataset, programs: Sequence[str] | np.ndarray) -> ProgramRows:
    """Every kernel each of ``programs`` ran (from the sources), once per (program, kernel).

    A kernel several of the programs ran gives one row for each of them.
    """
    keep = np.isin(ds.source_program_id, np.asarray(programs, dtype=str))
    kernel, program, family = _source_kernel(ds)[keep], ds.source_program_id[keep], ds.source_family[keep]
    order = np.lexsort((kernel, program))
    kernel, program, family = kernel[order], program[order], family[order]
    first = np.ones(len(kernel), bool)
    first[1:] = (kernel[1:] != kernel[:-1]) | (program[1:] != program[:-1])
    return ProgramRows(kernel[first], program[first], family[first])


# --------------------------------------------------------------------------------------- stats

QUANTILES: tuple[float, ...] = (0.0, 0.1, 0.5, 0.9, 1.0)


def stats(ds: KernelDataset) -> dict[str, Any]:
    """Summary: kernel and program counts, kernels per family/configuration, runtime quantiles, noise.

    "families" and "configurations" count distinct names over all sources; "kernels_per_family"
    and "kernels_per_configuration" map a name to its number of kernel records (first
    occurrence); "programs" counts distinct programs over all sources. Noise comes from ``noise.json`` next to
    the data (keys ``median_rel``/``p90_rel``, and ``*_ge5us`` for kernels of at least 5 us), else
    None. ``device`` is the fingerprint of the machine that measured the data (None if unrecorded).
    """
    noise: dict[str, Any] = {}
    if ds.root is not None and (ds.root / "noise.json").exists():
        noise = json.loads((ds.root / "noise.json").read_text())
    rt = ds.runtime_ns
    return {
        "kernels": len(ds),
        "occurrences": int(ds.count.sum()),
        "programs": int(len(np.unique(ds.source_program_id))),
        "families": int(len(np.unique(ds.source_family))),
        "configurations": int(len(np.unique(ds.source_configuration))),
        "kernels_per_family": _value_counts(ds.family),
        "kernels_per_configuration": _value_counts(ds.configuration),
        "runtime_ns_quantiles": {str(q): (float(np.quantile(rt, q)) if len(rt) else None) for q in QUANTILES},
        "noise_median_rel": noise.get("median_rel", noise.get("noise_median_rel")),
        "noise_p90_rel": noise.get("p90_rel", noise.get("noise_p90_rel")),
        "noise_median_rel_ge5us": noise.get("median_rel_ge5us"),
        "noise_p90_rel_ge5us": noise.get("p90_rel_ge5us"),
        "device": ds.device,
    }


def _value_counts(values: np.ndarray) -> dict[str, int]:
    names, counts = np.unique(values.astype(str), return_counts=True)
    return {str(n): int(c) for n, c in zip(names, counts, strict=True)}
