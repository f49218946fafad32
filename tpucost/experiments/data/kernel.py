"""The kernel data set: featurized kernel graphs with measured runtimes, collected from the corpus.

A *kernel record* is one kernel of one compiled program: its graph (``featurize`` output), its
runtime label (minimum over traced runs, ns) and where it came from. Identical kernels (same
`kernel_hash`) are stored once, with the MIN runtime, a ``count`` of occurrences and the list of
(program, configuration) sources.

Storage
-------
A `KernelDataset` is a `tpucost.experiments.data.graph_table.GraphTable` with the columns and the ``source``
group of :data:`KERNEL_TABLE` (K kernels, S sources in all):

=====================  ================  ===================================================
field                  dtype / shape     meaning
=====================  ================  ===================================================
runtime_ns             float64[K]        label: min over traced runs and over duplicates
count                  int64[K]          occurrences merged into this record
calls_per_run          int64[K]          calls of the kernel in one program run
kernel_hash            unicode[K]        `kernel_hash`: graph arrays + backend + device kind
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

plus the graph arrays. A data folder holds ``schema.json`` (``{"format", "format_version",
"features", "kernels", "shards": [{"file", "kernels"}], "device"}``), shards ``kernels-00000.npz``,
... (one table each, with the format version and the `tpucost.method.features.FeatureSpec` as JSON), and
``device.json``; an optional ``noise.json`` (`measure_noise`) feeds `noise_floor` and `stats`. The data set carries
its `FeatureSpec` and is checked against it; nothing compares it with tpucost's own layout, so a
data set of another layout still loads (a model trained on it must match it).

Collection: `tpucost.experiments.data.kernel_collection` (`collect`, `finalize`, `merge`, the noise floor
`measure_noise`, and the log's measured runs with their dispatch overhead).

Splits
------
Both splits assign PROGRAMS (distinct ``source_program_id``) to train, val and test, and return a
`tpucost.method.splits.Split` (unit ``"program"``). A deduplicated kernel can have run in programs
of several parts; each kernel goes to exactly one part:

* `split_random` shuffles the programs with the seed and cuts them 80/10/10. A kernel any train
  program ran is train, else one any val program ran is val, else test: the test kernels are the
  ones never seen in training (nor in validation). Programs that share family, form and every
  hyperparameter (*twins*, from the ``hparams`` the collection log records, `program_twins`) are
  one program to the split: they all go to the earliest part any of them drew (train before val
  before test), so no test program is a copy of a training program.
* `split_hard` holds out whole families: programs of :data:`HARD_TEST_FAMILIES` are test, of
  :data:`HARD_VAL_FAMILIES` val, the rest train. Held-out first: a kernel any test program ran is
  test, else one any val program ran is val, else train, so train shares no kernel with the
  held-out families.

A test program is scored on every kernel it ran (`program_rows`: one row per (program, kernel)),
including kernels of the train part; the rows whose kernel is a test kernel are the "unseen"
figures (see ``tpucost.method.tasks.kernel``). An unseen kernel is usually a training kernel at another
shape; the rows whose kernel's opcode graph (`structure_hash`: opcodes, edges and kind, shapes
aside) no training kernel has are the "structure-novel" figures (`structure_novel`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from tpucost.experiments.data import collection, graph_table
from tpucost.experiments.data.graph_table import Column, GraphTable, Group, TableSchema, str_array
from tpucost.experiments.programs.corpus import parse_program_id
from tpucost.experiments.programs.families import WRITTEN_BY_OTHERS
from tpucost.files import bundled_dir, missing_bundled_hint, read_json_object, read_npz, write_json_atomic
from tpucost.method.features import OPCODE_VOCAB, TPUCOST_FEATURES, FeatureSpec, KernelGraph
from tpucost.method.splits import SPLITS, Split, family_parts, random_parts

__all__ = [
    "FORMAT_VERSION",
    "KERNEL_TABLE",
    "HARD_TEST_FAMILIES",
    "HARD_VAL_FAMILIES",
    "BUNDLED_NAME",
    "KernelDataset",
    "kernel_hash",
    "structure_hash",
    "structure_novel",
    "from_graphs",
    "concat",
    "dedup",
    "save_dataset",
    "read_shard",
    "load_dataset",
    "default_data_dir",
    "SPLITS",
    "first_test_programs",
    "ProgramRows",
    "split",
    "program_twins",
    "split_random",
    "split_hard",
    "split_leave_out",
    "program_rows",
    "stats",
    "noise_floor",
    "kernel_opcodes",
    "opcode_coverage",
]

FORMAT = "tpucost-kernels"
FORMAT_VERSION = 2
#: Families whose programs form the hard test split (never seen in training).
HARD_TEST_FAMILIES: tuple[str, ...] = ("unet", "gru", "nerf_mlp")
#: Family held out for validation in the hard split.
HARD_VAL_FAMILIES: tuple[str, ...] = ("mobilenet_block",)
#: Name of the bundled folder under `tpucost.files.bundled_dir()`.
BUNDLED_NAME = "kernels_cpu"
SHARD_FILE = "kernels-{:05d}.npz"
SCHEMA_FILE = "schema.json"
NOISE_FILE = "noise.json"

#: Per-kernel string columns (metadata of the first occurrence).
META_FIELDS: tuple[str, ...] = (
    "program_id",
    "family",
    "form",
    "configuration",
    "backend",
    "device_kind",
    "jax_version",
)
#: The columns and the ``source`` group of a kernel table (see the module docstring).
KERNEL_TABLE = TableSchema(
    columns=(
        Column("runtime_ns", "f8"),
        Column("count", "i8"),
        Column("calls_per_run", "i8"),
        Column("kernel_hash", "U"),
        Column("name", "U"),
        Column("kind", "U"),
        *(Column(f, "U") for f in META_FIELDS),
    ),
    groups={
        "source": (
            Column("source_program_id", "U"),
            Column("source_configuration", "U"),
            Column("source_family", "U"),
        )
    },
)


def _column(name: str, doc: str) -> property:
    return property(lambda self: self.table.columns[name], doc=doc)


def _source(name: str, doc: str) -> property:
    return property(lambda self: self.table.groups["source"].columns[name], doc=doc)


@dataclasses.dataclass(frozen=True, eq=False)
class KernelDataset:
    """Kernel records (see the module docstring): a graph table, the `FeatureSpec` its graphs
    follow, the device that measured them and the folder they were read from."""

    table: GraphTable
    features: FeatureSpec = TPUCOST_FEATURES
    device: dict[str, Any] | None = None
    root: Path | None = None

    runtime_ns = _column("runtime_ns", "float64[K]: min over traced runs and duplicates, ns.")
    count = _column("count", "int64[K]: occurrences merged into each record.")
    calls_per_run = _column("calls_per_run", "int64[K]: calls of the kernel in one program run.")
    kernel_hash = _column("kernel_hash", "unicode[K]: `kernel_hash` of each record.")
    name = _column("name", "unicode[K]: HLO instruction name.")
    kind = _column("kind", "unicode[K]: fusion kind or opcode.")
    program_id = _column("program_id", "unicode[K]: program of the first occurrence.")
    family = _column("family", "unicode[K]: its family.")
    form = _column("form", "unicode[K]: its form (forward, grad, train_step).")
    configuration = _column("configuration", "unicode[K]: its configuration.")
    source_program_id = _source("source_program_id", "unicode[S]: every program a kernel ran in.")
    source_configuration = _source("source_configuration", "unicode[S]: the configuration of each source.")
    source_family = _source("source_family", "unicode[S]: the family of each source.")

    def __len__(self) -> int:
        return len(self.table)

    @property
    def source_offsets(self) -> np.ndarray:
        """int64[K+1]: kernel k's sources are ``source_offsets[k]:[k+1]``."""
        return self.table.groups["source"].offsets

    @property
    def source_kernel(self) -> np.ndarray:
        """int64[S]: the kernel of each source row."""
        return self.table.groups["source"].owner

    def graph(self, i: int) -> KernelGraph:
        """Kernel ``i`` as a `KernelGraph` (views into the data set's arrays)."""
        return self.table.graph(i, str(self.name[i]), str(self.kind[i]))

    def sources(self, i: int) -> list[tuple[str, str]]:
        """The (program_id, configuration) pairs kernel ``i`` was measured in."""
        rows = self.table.groups["source"].rows(i)
        return list(
            zip(self.source_program_id[rows].tolist(), self.source_configuration[rows].tolist(), strict=True)
        )

    def to_frame(self) -> pd.DataFrame:
        """One row per kernel: metadata, n_nodes, n_edges, count, calls_per_run, runtime_ns."""
        cols: dict[str, Any] = {
            f: self.table.columns[f].astype(str) for f in ("kernel_hash", "name", "kind", *META_FIELDS)
        }
        cols.update(
            n_nodes=self.table.n_nodes,
            n_edges=self.table.n_edges,
            count=self.count,
            calls_per_run=self.calls_per_run,
            runtime_ns=self.runtime_ns,
        )
        return pd.DataFrame(cols)

    def subset(self, indices: Sequence[int] | np.ndarray) -> KernelDataset:
        """A new data set of kernels ``indices`` (in that order)."""
        return dataclasses.replace(self, table=self.table.subset(indices))


# --------------------------------------------------------------------------------------- build


def kernel_hash(graph: KernelGraph, backend: str, device_kind: str = "") -> str:
    """A hash of a kernel: opcodes, node features (shapes, attributes), edges, backend, device kind.

    The kernel's name is not part of it: the same kernel in two programs has two names.
    """
    h = hashlib.sha256()
    for arr, dtype in (
        (graph.opcodes, np.int32),
        (graph.node_features, np.float32),
        (graph.senders, np.int32),
        (graph.receivers, np.int32),
    ):
        a = np.ascontiguousarray(arr, dtype=dtype)
        h.update(str(a.shape).encode())
        h.update(a.tobytes())
    h.update(f"|{backend}|{device_kind}".encode())
    return h.hexdigest()[:32]


def structure_hash(graph: KernelGraph) -> str:
    """A hash of a kernel's opcode graph: its opcodes, edges and kind; shapes and attributes aside.

    Two kernels with the same structure hash differ at most in shapes, layouts and attributes: the
    same fusion at another size. `kernel_hash` tells those apart, this does not. The order in which
    the HLO lists the ops does not count: each node's label is refined with the sorted labels of its
    operands and of its users until no class splits further (Weisfeiler-Lehman), and the hash is of
    the sorted final labels, the edge count and the kind. (Like any such refinement it can give two
    differently wired graphs of the same local structure one hash; on the bundled data set it merged
    10 of 2,231 classes that the order-dependent hash had kept apart, and no test row changed part.)
    """
    n = len(graph.opcodes)
    labels = [str(int(op)) for op in graph.opcodes]
    operands: list[list[int]] = [[] for _ in range(n)]
    users: list[list[int]] = [[] for _ in range(n)]
    for s, r in zip(graph.senders.tolist(), graph.receivers.tolist(), strict=True):
        users[s].append(r)
        operands[r].append(s)
    classes = len(set(labels))
    for _ in range(n):
        labels = [
            hashlib.sha1(
                f"{labels[i]}|{sorted(labels[j] for j in operands[i])}|{sorted(labels[j] for j in users[i])}".encode()
            ).hexdigest()[:16]
            for i in range(n)
        ]
        if len(set(labels)) == classes:
            break
        classes = len(set(labels))
    return hashlib.sha256(f"{sorted(labels)}|{len(graph.senders)}|{graph.kind}".encode()).hexdigest()[:32]


def structure_novel(ds: KernelDataset, kernels: np.ndarray, training: np.ndarray) -> np.ndarray:
    """bool[len(kernels)]: True where no kernel of ``training`` (indices) has that kernel's
    `structure_hash`, i.e. the model never trained on that opcode graph at any shape."""
    seen = {structure_hash(ds.graph(int(i))) for i in training}
    return np.array([structure_hash(ds.graph(int(i))) not in seen for i in kernels], dtype=bool)


def from_graphs(
    graphs: Sequence[KernelGraph],
    runtime_ns: Sequence[float],
    calls_per_run: Sequence[int],
    meta: Mapping[str, str],
    spec: FeatureSpec = TPUCOST_FEATURES,
) -> KernelDataset:
    """Records of the kernels of ONE (program, configuration) measurement (count 1 each).

    ``meta`` holds program_id, family, form, configuration, backend, device_kind, jax_version.
    """
    k = len(graphs)
    col = lambda v: str_array([v] * k)  # noqa: E731
    columns = {
        "runtime_ns": np.asarray(runtime_ns, np.float64).reshape(k),
        "count": np.ones(k, np.int64),
        "calls_per_run": np.asarray(calls_per_run, np.int64).reshape(k),
        "kernel_hash": str_array(kernel_hash(g, meta["backend"], meta["device_kind"]) for g in graphs),
        "name": str_array(g.name for g in graphs),
        "kind": str_array(g.kind for g in graphs),
        **{f: col(meta[f]) for f in META_FIELDS},
    }
    sources = Group(
        np.arange(k + 1, dtype=np.int64),
        {
            "source_program_id": col(meta["program_id"]),
            "source_configuration": col(meta["configuration"]),
            "source_family": col(meta["family"]),
        },
    )
    table = graph_table.from_graphs(graphs, columns, {"source": sources}, spec.num_node_features)
    return KernelDataset(table, spec)


def concat(parts: Sequence[KernelDataset]) -> KernelDataset:
    """All records of ``parts``, in order (no deduplication); one device when all name the same."""
    if not parts:
        return from_graphs([], [], [], dict.fromkeys(META_FIELDS, ""))
    for p in parts[1:]:
        parts[0].features.check_matches(p.features, "one part", "another")
    devices = {json.dumps(p.device, sort_keys=True) for p in parts if p.device is not None}
    return KernelDataset(
        graph_table.concat([p.table for p in parts]),
        parts[0].features,
        parts[0].device if len(devices) == 1 else None,
    )


def dedup(ds: KernelDataset) -> KernelDataset:
    """Merge records with the same `kernel_hash`: MIN runtime, summed count, all sources.

    The first record of each hash (in ``ds`` order) gives the graph and metadata; the output keeps
    first-occurrence order.
    """
    _, first, inverse = np.unique(ds.kernel_hash, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")  # unique id -> output position, by first occurrence
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    group = rank[inverse.reshape(-1)]
    runtime = np.full(len(order), np.inf)
    np.minimum.at(runtime, group, ds.runtime_ns)
    count = np.bincount(group, weights=ds.count, minlength=len(order)).astype(np.int64)
    # sources, grouped by output record, original order within a group
    src_group = group[ds.source_kernel]
    src_order = np.argsort(src_group, kind="stable")
    sources = Group(
        graph_table.offsets_from_lengths(np.bincount(src_group, minlength=len(order))),
        {c: a[src_order] for c, a in ds.table.groups["source"].columns.items()},
    )
    table = (
        ds.table.subset(first[order])
        .with_columns(runtime_ns=runtime, count=count)
        .with_group("source", sources)
    )
    return dataclasses.replace(ds, table=table)


# ------------------------------------------------------------------------------------- storage


def _widths(spec: FeatureSpec) -> dict[str, int]:
    return {"num_node_features": spec.num_node_features}


def save_shard(ds: KernelDataset, path: str | os.PathLike) -> Path:
    """Write ``ds`` as one npz (the table, the format version and the feature spec), atomically."""
    return graph_table.save(
        ds.table,
        path,
        {
            "format_version": np.array(FORMAT_VERSION, np.int64),
            "features": np.array(json.dumps(ds.features.to_dict())),
        },
    )


def read_shard(path: str | os.PathLike) -> KernelDataset:
    """Load and validate one shard (or part); ValueError names the file and the bad field."""
    path = Path(path)
    arrays = read_npz(path)
    for field in ("format_version", "features"):
        if field not in arrays:
            raise ValueError(
                f"{path}: field {field!r}: missing (not a tpucost kernel shard of format {FORMAT_VERSION})"
            )
    if arrays["format_version"].shape != () or int(arrays["format_version"]) != FORMAT_VERSION:
        raise ValueError(
            f"{path}: field 'format_version': {arrays['format_version']!r}, expected {FORMAT_VERSION}"
        )
    try:
        spec = _spec(path, "features", json.loads(str(arrays["features"])))
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: field 'features': not JSON ({err})") from None
    table = graph_table.from_arrays(arrays, KERNEL_TABLE, path)
    graph_table.check_table(path, table, KERNEL_TABLE, _widths(spec))
    if len(table) and not np.all(table.columns["runtime_ns"] > 0):
        raise ValueError(f"{path}: field 'runtime_ns': labels must be positive")
    return KernelDataset(table, spec, root=path.parent)


def _spec(path: Path, field: str, value: Any) -> FeatureSpec:
    try:
        return FeatureSpec.from_dict(value)
    except (TypeError, ValueError, AttributeError) as err:
        raise ValueError(f"{path}: field {field!r}: {err}") from err


def save_dataset(ds: KernelDataset, out_dir: str | os.PathLike, shard_size: int = 100_000) -> Path:
    """Write ``ds`` as shards of at most ``shard_size`` kernels plus ``schema.json`` (and
    ``device.json``); shards of an earlier save that are no longer listed are removed."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    shards = []
    for j, start in enumerate(range(0, max(len(ds), 1), shard_size)):
        part = ds.subset(np.arange(start, min(start + shard_size, len(ds))))
        save_shard(part, out_dir / SHARD_FILE.format(j))
        shards.append({"file": SHARD_FILE.format(j), "kernels": len(part)})
    schema = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "features": ds.features.to_dict(),
        "kernels": len(ds),
        "shards": shards,
        "device": ds.device,
    }
    if ds.device is not None:
        write_json_atomic(out_dir / collection.DEVICE, ds.device)
    write_json_atomic(out_dir / SCHEMA_FILE, schema)
    keep = {s["file"] for s in shards}
    for old in out_dir.glob("kernels-*.npz"):
        if old.name not in keep:
            old.unlink()
    return out_dir


def default_data_dir() -> Path:
    """The bundled kernel data set: ``tpucost.files.bundled_dir() / "kernels_cpu"``."""
    return bundled_dir() / BUNDLED_NAME


def load_dataset(path: str | os.PathLike | None = None) -> KernelDataset:
    """Load a data folder (``schema.json`` + shards) or one ``.npz`` shard, validated.

    ``path=None`` loads the bundled ``kernels_cpu``. Raises FileNotFoundError when the data is
    missing, ValueError naming the file and field when it is malformed.
    """
    root = Path(path) if path is not None else default_data_dir()
    if root.is_file():
        return read_shard(root)
    schema_path = root / SCHEMA_FILE
    if not schema_path.exists():
        hint = f" {missing_bundled_hint(root)}" if path is None else ""
        raise FileNotFoundError(
            f"no kernel data set at {root} (no {SCHEMA_FILE}). Collect one with "
            f"`python -m tpucost collect --out DIR` (or merge shards with `python -m lab data merge`).{hint}"
        )
    schema = read_json_object(schema_path)
    for field, expected in (("format", FORMAT), ("format_version", FORMAT_VERSION)):
        if schema.get(field) != expected:
            raise ValueError(f"{schema_path}: field {field!r}: {schema.get(field)!r}, expected {expected!r}")
    spec = _spec(schema_path, "features", schema.get("features"))
    parts = [read_shard(root / s["file"]) for s in schema.get("shards", [])]
    for s, part in zip(schema.get("shards", []), parts, strict=True):
        spec.check_matches(part.features, f"{schema_path}", f"{root / s['file']}")
    ds = dataclasses.replace(concat(parts), features=spec, device=schema.get("device"), root=root)
    if len(ds) != schema.get("kernels"):
        raise ValueError(f"{schema_path}: field 'kernels': {schema.get('kernels')}, shards hold {len(ds)}")
    return ds


# -------------------------------------------------------------------------------------- splits


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


def _program_families(ds: KernelDataset) -> tuple[np.ndarray, np.ndarray]:
    """(programs unicode[P] sorted, family unicode[P]) over all sources; ValueError if a program has two."""
    pairs = np.unique(np.stack([ds.source_program_id.astype(str), ds.source_family.astype(str)]), axis=1)
    programs, counts = np.unique(pairs[0], return_counts=True)
    if np.any(counts > 1):
        raise ValueError(f"programs in several families: {programs[counts > 1][:5].tolist()}")
    return programs, pairs[1]


def _assign(ds: KernelDataset, programs: np.ndarray, program_part: np.ndarray, held_out_first: bool) -> Split:
    """The `Split` given each program's part (``programs`` unicode[P] sorted, ``program_part`` int[P] in 0, 1, 2).

    A kernel's part is over the parts of its sources' programs: the lowest (train before val
    before test) or, with ``held_out_first``, the highest (test before val before train).
    """
    source_part = program_part[np.searchsorted(programs, ds.source_program_id)]
    if held_out_first:
        kernel_part = np.zeros(len(ds), np.int64)
        np.maximum.at(kernel_part, ds.source_kernel, source_part)
    else:
        kernel_part = np.full(len(ds), 2, np.int64)
        np.minimum.at(kernel_part, ds.source_kernel, source_part)
    return Split(
        "program",
        *(programs[program_part == j] for j in range(3)),
        *(np.flatnonzero(kernel_part == j) for j in range(3)),
    )


def program_twins(ds: KernelDataset, programs: np.ndarray) -> np.ndarray:
    """int64[P]: for each of ``programs``, the index of the first program sharing its family, form
    and every hyperparameter (itself when it has no twin or no recorded hyperparameters).

    Hyperparameters come from the ``hparams`` of the log lines next to the data (`collect`
    records them; data sets collected before that have none, and no twins)."""
    key_of: dict[str, str] = {}
    if ds.root is not None:
        for e in collection.read_log(ds.root):
            if e.get("status") == "ok" and "hparams" in e:
                family, form, _, _ = parse_program_id(str(e["program_id"]))
                key_of[str(e["program_id"])] = json.dumps([family, form, e["hparams"]], sort_keys=True)
    first: dict[str, int] = {}
    return np.array(
        [first.setdefault(key_of.get(str(p), str(p)), i) for i, p in enumerate(programs)], np.int64
    )


def split_random(ds: KernelDataset, seed: int = 0, fractions: Sequence[float] = (0.8, 0.1, 0.1)) -> Split:
    """Programs shuffled with ``seed`` and cut by ``fractions``; kernels seen in training are train.

    A kernel any train program ran is train, else one any val program ran is val, else test: the
    test kernels are those never seen in training or validation. Twins (`program_twins`) go to
    the earliest part any of them drew. Deterministic.
    """
    programs = np.unique(ds.source_program_id.astype(str))
    part = random_parts(len(programs), seed, fractions)
    twin = program_twins(ds, programs)
    earliest = np.full(len(programs), 2, np.int64)
    np.minimum.at(earliest, twin, part)
    return _assign(ds, programs, earliest[twin], held_out_first=False)


def split_hard(
    ds: KernelDataset,
    test_families: Sequence[str] = HARD_TEST_FAMILIES,
    val_families: Sequence[str] = HARD_VAL_FAMILIES,
) -> Split:
    """Whole families held out; a kernel any held-out program ran goes with the held-out part, so
    train shares no kernel with the held-out families."""
    programs, families = _program_families(ds)
    return _assign(ds, programs, family_parts(families, test_families, val_families), held_out_first=True)


def split_leave_out(
    ds: KernelDataset, test_families: Sequence[str], seed: int = 0, val_fraction: float = 0.1
) -> Split:
    """``test_families`` held out (one group of `tpucost.experiments.programs.FAMILY_GROUPS`, for
    leave-one-group-out); ``val_fraction`` of the other programs, drawn with ``seed``, are
    validation. Held-out first, as `split_hard`: train shares no kernel with the test families.
    ValueError when the data set has no program of ``test_families`` or nothing else."""
    programs, families = _program_families(ds)
    held_out = np.isin(families, list(test_families))
    if not held_out.any() or held_out.all():
        raise ValueError(
            f"holding out {sorted(test_families)} leaves {'no test' if not held_out.any() else 'no training'} "
            f"program in this data set (families {sorted(set(families.tolist()))})"
        )
    part = np.full(len(programs), 2, np.int64)
    rest = np.flatnonzero(~held_out)
    part[rest] = random_parts(len(rest), seed, (1 - val_fraction, val_fraction, 0.0))
    return _assign(ds, programs, part, held_out_first=True)


def split(ds: KernelDataset, name: str, seed: int = 0) -> Split:
    """The ``random`` (by program, `split_random` with ``seed``) or ``hard`` (by family,
    `split_hard`) `Split` of ``ds``; it unpacks as the (train, val, test) kernel indices."""
    if name == "random":
        return split_random(ds, seed)
    if name == "hard":
        return split_hard(ds)
    raise ValueError(f"split must be one of {SPLITS}, got {name!r}")


def first_test_programs(ds: KernelDataset, split: Split, n: int) -> Split:
    """``split`` scoring only its first ``n`` test programs and the test kernels they ran (quick
    evaluations, e.g. a notebook's smoke run); the training and validation parts are unchanged."""
    ids = split.test_ids[:n]
    test = np.intersect1d(split.test, program_rows(ds, ids).kernel)
    return dataclasses.replace(split, test_ids=ids, test=test)


def program_rows(ds: KernelDataset, programs: Sequence[str] | np.ndarray) -> ProgramRows:
    """Every kernel each of ``programs`` ran (from the sources), once per (program, kernel)."""
    keep = np.isin(ds.source_program_id, np.asarray(programs, dtype=str))
    kernel, program, family = ds.source_kernel[keep], ds.source_program_id[keep], ds.source_family[keep]
    order = np.lexsort((kernel, program))
    kernel, program, family = kernel[order], program[order], family[order]
    first = np.ones(len(kernel), bool)
    first[1:] = (kernel[1:] != kernel[:-1]) | (program[1:] != program[:-1])
    return ProgramRows(kernel[first], program[first], family[first])


# --------------------------------------------------------------------------------------- stats

QUANTILES: tuple[float, ...] = (0.0, 0.1, 0.5, 0.9, 1.0)


def _value_counts(values: np.ndarray) -> dict[str, int]:
    names, counts = np.unique(values.astype(str), return_counts=True)
    return {str(n): int(c) for n, c in zip(names, counts, strict=True)}


def kernel_opcodes(ds: KernelDataset, kernels: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(kernel int64[N], opcode id int64[N]): each (kernel, opcode it contains) once, for ``kernels``
    (indices; default all). Opcode ids index `tpucost.method.features.OPCODE_VOCAB`; for data sets of
    tpucost's own feature layout only (ValueError otherwise)."""
    if ds.features.layout != TPUCOST_FEATURES.layout:
        raise ValueError(f"opcodes need tpucost's feature layout; this data set has {ds.features.layout!r}")
    table = ds.table
    graph_of_node = np.repeat(np.arange(len(table)), table.n_nodes)
    counted = np.zeros(len(table), bool)
    counted[np.arange(len(table)) if kernels is None else np.asarray(kernels, np.int64)] = True
    keep = counted[graph_of_node]
    pairs = np.unique(np.stack([graph_of_node[keep], table.opcodes[keep].astype(np.int64)]), axis=1)
    return pairs[0], pairs[1]


def opcode_coverage(ds: KernelDataset, kernels: np.ndarray | None = None) -> dict[str, int]:
    """Per HLO opcode, how many kernels contain it at least once (``kernels``: indices to count,
    e.g. a split's ``train`` part; default all), most common first (see `kernel_opcodes`)."""
    _, opcodes = kernel_opcodes(ds, kernels)
    ids, counts = np.unique(opcodes, return_counts=True)
    order = np.lexsort((ids, -counts))
    return {OPCODE_VOCAB[int(ids[i])]: int(counts[i]) for i in order}


def noise_floor(ds: KernelDataset) -> dict[str, Any] | None:
    """The label noise of a second measurement against the first (``noise.json`` of the data set's
    folder, `tpucost.experiments.data.kernel_collection.measure_noise`; a device pack's
    ``{"start", "end"}`` form gives its end's), or None when the folder has none."""
    if ds.root is None or not (ds.root / NOISE_FILE).exists():
        return None
    noise = read_json_object(ds.root / NOISE_FILE)
    if isinstance(noise.get("end") or noise.get("start"), dict):  # a device pack's two floors
        noise = noise.get("end") or noise["start"]
    return noise


def stats(ds: KernelDataset) -> dict[str, Any]:
    """Summary: kernel and program counts, kernels per family/configuration, runtime quantiles, noise.

    "families" and "configurations" count distinct names over all sources
    ("families_written_by_others": those of `tpucost.experiments.programs.WRITTEN_BY_OTHERS`); "kernels_per_family"
    and "kernels_per_configuration" map a name to its number of kernel records (first
    occurrence); "programs" counts distinct programs over all sources. Noise comes from
    `noise_floor`, else None. ``device`` is the fingerprint of the machine that measured the data.
    """
    noise = noise_floor(ds) or {}
    rt = ds.runtime_ns
    return {
        "kernels": len(ds),
        "occurrences": int(ds.count.sum()),
        "programs": int(len(np.unique(ds.source_program_id))),
        "families": int(len(np.unique(ds.source_family))),
        "families_written_by_others": int(np.isin(np.unique(ds.source_family), WRITTEN_BY_OTHERS).sum()),
        "configurations": int(len(np.unique(ds.source_configuration))),
        "kernels_per_family": _value_counts(ds.family),
        "kernels_per_configuration": _value_counts(ds.configuration),
        "runtime_ns_quantiles": {str(q): (float(np.quantile(rt, q)) if len(rt) else None) for q in QUANTILES},
        "noise_median_rel": noise.get("median_rel"),
        "noise_p90_rel": noise.get("p90_rel"),
        "noise_median_rel_ge5us": noise.get("median_rel_ge5us"),
        "noise_p90_rel_ge5us": noise.get("p90_rel_ge5us"),
        "device": ds.device,
    }
