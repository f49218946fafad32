"""The tile data set: kernels measured under many block-size (tile) configurations.

One record per *problem*: a kernel family of `tpucost.experiments.tiles` (``matmul``, ``softmax``, ...), a
problem shape and a dtype. A problem has ONE kernel graph (``tiles.kernel_graph``, the same for
all its configurations) and C >= 1 configurations (dicts of block sizes, e.g.
``{"block_m": 128, "block_n": 128, "block_k": 64}``), each with a config feature row
(``tiles.config_features``) and a measured runtime (``tiles.measure_configs``: minimum over
repeats, ns). This is the task of the TpuGraphs "tile" collection: rank the configurations of one
kernel. `from_tpugraphs` converts that published collection to the same record.

**Storage**

A `TileDataset` is a `tpucost.experiments.data.graph_table.GraphTable` (P problems) with the columns and the
``config`` group of :data:`TILE_TABLE` (C configurations in all, K config keys, G config features):

======================  ===============  ==========================================================
field                   dtype / shape    meaning
======================  ===============  ==========================================================
family, shape, dtype    unicode[P]       the problem: family name, shape as ``"384,640,896"`` (a
                                         TpuGraphs file stem for ``source="tpugraphs"``), dtype
config_offsets          int64[P+1]       problem p's configs are ``config_offsets[p]:[p+1]``
config_values           int64[C, K]      block sizes, column k is ``config_keys[k]``;
                                         :data:`MISSING` where a config has no such key
config_feat             float32[C, G]    config feature rows (``config_feature_names``)
config_runtime_ns       float64[C]       measured runtime of each config, ns (finite, > 0)
======================  ===============  ==========================================================

plus the graph arrays, ``config_keys`` (K names), ``family_config_keys`` (each family's keys in the
order its configs name them, which ``configs(i)`` keeps), ``config_feature_names`` (G names),
``features`` (the `tpucost.method.features.FeatureSpec` its graphs and config rows follow), ``source``
(``"tpucost"`` or ``"tpugraphs"``) and ``device``. Problems are stored in a canonical order
(family, then shape, then dtype), so a data set does not depend on how its collection was sharded.

A folder holds ``tiles.npz`` (the table and the format version), ``schema.json`` (``{"format",
"format_version", "source", "problems", "configs", "nodes", "edges", "config_keys",
"family_config_keys", "config_feature_names", "features", "missing_value"}``), ``device.json`` and,
for a collection, the `tpucost.experiments.data.collection` log and ``PROVENANCE.md``. Reading validates
everything and raises ValueError naming the file and the field.

Collection: `tpucost.experiments.data.tile_collection` (`collect`, `finalize`, `merge`, the
noise floor `measure_noise`).

Splits (by problem)
-------------------
`split_random` shuffles the problems and cuts them 80/10/10. `split_hard` holds out whole
families: test :data:`HARD_TEST_FAMILIES` (``attention``: a composition of a matmul and a softmax,
both seen in training), validation :data:`HARD_VAL_FAMILIES` (``layernorm``, whose twin
``softmax`` stays in training, as attention's parts do). Both return a
`tpucost.method.splits.Split` of unit ``"problem"``: its ids are `TileDataset.problem_id` and its
rows problem indices.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from tpucost.experiments import tpugraphs
from tpucost.experiments.data import collection, graph_table
from tpucost.experiments.data.graph_table import (
    Column,
    GraphTable,
    Group,
    TableSchema,
    offsets_from_lengths,
    stack_rows,
    str_array,
)
from tpucost.experiments.tiles.lowering import LOWERINGS
from tpucost.files import (
    bundled_dir,
    missing_bundled_hint,
    read_json_object,
    read_npz,
    save_npz_atomic,
    write_json_atomic,
)
from tpucost.method.features import TPUCOST_FEATURES, FeatureSpec, KernelGraph
from tpucost.method.splits import SPLITS, Split, family_parts, random_parts

__all__ = [
    "FORMAT_VERSION",
    "TILE_TABLE",
    "MISSING",
    "HARD_TEST_FAMILIES",
    "HARD_VAL_FAMILIES",
    "TILES_FILE",
    "SCHEMA_FILE",
    "PROVENANCE_FILE",
    "NOISE_FILE",
    "TileProblem",
    "TileDataset",
    "problem_key",
    "shape_text",
    "shape_sort_key",
    "from_problems",
    "feature_spec_for",
    "save_dataset",
    "load_dataset",
    "default_data_dir",
    "from_tpugraphs",
    "SPLITS",
    "split",
    "split_random",
    "split_hard",
    "stats",
    "noise_floor",
    "family_table",
]

FORMAT = "tpucost-tiles"
FORMAT_VERSION = 2
#: ``config_values`` entry of a key a configuration does not have.
MISSING = int(np.iinfo(np.int64).min)
#: Families held out as the hard split's test part (see the module docstring).
HARD_TEST_FAMILIES: tuple[str, ...] = ("attention",)
#: Family held out as the hard split's validation part.
HARD_VAL_FAMILIES: tuple[str, ...] = ("layernorm",)

TILES_FILE = "tiles.npz"
SCHEMA_FILE = "schema.json"
PROVENANCE_FILE = "PROVENANCE.md"
NOISE_FILE = "noise.json"
#: Name of the bundled folder under `tpucost.files.bundled_dir()`.
BUNDLED_NAME = "tiles_cpu"
#: Device record of the published TpuGraphs collection.
TPUGRAPHS_DEVICE: dict[str, Any] = {"name": "TPU v3 (TpuGraphs)"}
SOURCES = ("tpucost", "tpugraphs")

#: The columns and the ``config`` group of a tile table (see the module docstring).
TILE_TABLE = TableSchema(
    columns=(Column("family", "U"), Column("shape", "U"), Column("dtype", "U")),
    groups={
        "config": (
            Column("config_runtime_ns", "f8"),
            Column("config_values", "i8", "num_config_keys"),
            Column("config_feat", "f4", "num_config_features"),
        )
    },
)


class TileProblem(NamedTuple):
    """One problem with its C configurations.

    Attributes:
      family: kernel family name (``"matmul"``, ... ; ``"tpugraphs"`` for converted files).
      shape: the problem shape as ``"384,640,896"`` (a file stem for TpuGraphs).
      dtype: element type name (``"float32"``; ``""`` for TpuGraphs).
      graph: the kernel graph (the same for every configuration).
      configs: C dicts of block sizes.
      config_features: float32[C, G].
      runtime_ns: float64[C].
    """

    family: str
    shape: str
    dtype: str
    graph: KernelGraph
    configs: list[dict[str, int]]
    config_features: np.ndarray
    runtime_ns: np.ndarray


@dataclasses.dataclass(frozen=True, eq=False)
class TileDataset:
    """Tile problems (see the module docstring). ``len(ds)`` is the number of problems P;
    ``ds.problem(i)``, ``ds.graph(i)``, ``ds.configs(i)``, ``ds.config_features(i)`` (float32[C_i, G])
    and ``ds.runtime_ns(i)`` (float64[C_i]) give problem ``i``."""

    table: GraphTable
    config_keys: tuple[str, ...]
    family_config_keys: dict[str, tuple[str, ...]]
    config_feature_names: tuple[str, ...]
    features: FeatureSpec
    source: str
    device: dict[str, Any]
    root: Path | None = None
    #: how the kernels were run when measured (`tpucost.experiments.tiles.lowering.LOWERINGS`); labels of two
    #: lowerings are two kinds of label, like two devices'
    lowering: str = "pallas"

    def __len__(self) -> int:
        return len(self.table)

    @property
    def family(self) -> np.ndarray:
        """unicode[P]: each problem's family."""
        return self.table.columns["family"]

    @property
    def shape(self) -> np.ndarray:
        """unicode[P]: each problem's shape (``"384,640,896"``)."""
        return self.table.columns["shape"]

    @property
    def dtype(self) -> np.ndarray:
        """unicode[P]: each problem's dtype."""
        return self.table.columns["dtype"]

    @property
    def _configs(self) -> Group:
        return self.table.groups["config"]

    @property
    def config_runtime_ns(self) -> np.ndarray:
        """float64[C]: every configuration's runtime, problem after problem."""
        return self._configs.columns["config_runtime_ns"]

    @property
    def num_configs(self) -> int:
        """C: configurations over all problems."""
        return int(self.config_runtime_ns.shape[0])

    @property
    def num_config_features(self) -> int:
        """G: width of a config feature row."""
        return len(self.config_feature_names)

    @property
    def configs_per_problem(self) -> np.ndarray:
        """int64[P]: configurations of each problem."""
        return np.diff(self._configs.offsets)

    @property
    def problem_id(self) -> np.ndarray:
        """unicode[P]: ``"family|shape|dtype"``, unique per problem (what splits assign)."""
        return str_array(
            problem_key(f, s, d) for f, s, d in zip(self.family, self.shape, self.dtype, strict=True)
        )

    @property
    def config_problem(self) -> np.ndarray:
        """int64[C]: the problem of each configuration row."""
        return self._configs.owner

    def graph(self, i: int) -> KernelGraph:
        """Problem ``i``'s kernel graph (views into the arrays)."""
        return self.table.graph(
            i, problem_key(self.family[i], self.shape[i], self.dtype[i]), str(self.family[i])
        )

    def configs(self, i: int) -> list[dict[str, int]]:
        """Problem ``i``'s configurations as dicts of block sizes (keys in its family's order)."""
        rows = self._configs.columns["config_values"][self._configs.rows(i)]
        cols = [
            (k, self.config_keys.index(k))
            for k in self.family_config_keys.get(str(self.family[i]), self.config_keys)
        ]
        return [{k: int(row[j]) for k, j in cols if row[j] != MISSING} for row in rows]

    def config_features(self, i: int) -> np.ndarray:
        """float32[C_i, G]: problem ``i``'s config feature rows."""
        return self._configs.columns["config_feat"][self._configs.rows(i)]

    def runtime_ns(self, i: int) -> np.ndarray:
        """float64[C_i]: problem ``i``'s measured runtimes."""
        return self.config_runtime_ns[self._configs.rows(i)]

    def problem(self, i: int) -> TileProblem:
        """Problem ``i`` as one record."""
        return TileProblem(
            str(self.family[i]),
            str(self.shape[i]),
            str(self.dtype[i]),
            self.graph(i),
            self.configs(i),
            self.config_features(i),
            self.runtime_ns(i),
        )

    def __iter__(self) -> Iterator[TileProblem]:
        return (self.problem(i) for i in range(len(self)))

    def subset(self, indices: Sequence[int] | np.ndarray) -> TileDataset:
        """A new data set of problems ``indices`` (in that order)."""
        return dataclasses.replace(self, table=self.table.subset(indices), root=None)

    def schema(self) -> dict[str, Any]:
        """What ``schema.json`` stores."""
        return {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "source": self.source,
            "problems": len(self),
            "configs": self.num_configs,
            "nodes": int(self.table.opcodes.shape[0]),
            "edges": int(self.table.senders.shape[0]),
            "config_keys": list(self.config_keys),
            "family_config_keys": {f: list(k) for f, k in self.family_config_keys.items()},
            "config_feature_names": list(self.config_feature_names),
            "features": self.features.to_dict(),
            "missing_value": MISSING,
            "lowering": self.lowering,
        }

    def equals(self, other: TileDataset) -> bool:
        """Same problems, graphs, configs, features, runtimes, names and device (not ``root``)."""
        mine, theirs = self.table.arrays(), other.table.arrays()
        return (
            self.schema() == other.schema()
            and self.device == other.device
            and all(np.array_equal(a, theirs[k]) for k, a in mine.items())
        )


def problem_key(family: str, shape: str | Sequence[int], dtype: str) -> str:
    """``"family|shape|dtype"``: a problem's id (shape as ``"384,640,896"``)."""
    return f"{family}|{shape_text(shape)}|{dtype}"


def shape_text(shape: str | Sequence[int]) -> str:
    """A problem shape as text: ``(384, 640, 896)`` -> ``"384,640,896"`` (text is kept as it is)."""
    return shape if isinstance(shape, str) else ",".join(str(int(d)) for d in shape)


def shape_sort_key(shape: str) -> tuple:
    """Sorts shapes numerically, dim by dim (a TpuGraphs file stem after every numeric shape)."""
    try:
        return (0, tuple(int(d) for d in shape.split(",")), "")
    except ValueError:
        return (1, (), shape)


def feature_spec_for(source: str, num_config_features: int) -> FeatureSpec:
    """The `FeatureSpec` of a tile data set of ``source`` with ``num_config_features`` config features:
    `features.TPUCOST_FEATURES` (tpucost's node layout) or `tpugraphs.TILE_FEATURES`."""
    if source == "tpucost":
        return dataclasses.replace(TPUCOST_FEATURES, num_config_features=int(num_config_features))
    if source == "tpugraphs":
        return tpugraphs.TILE_FEATURES
    raise ValueError(f"source must be one of {SOURCES}, got {source!r}")


def _widths(schema: Mapping[str, Any], spec: FeatureSpec) -> dict[str, int]:
    return {
        "num_node_features": spec.num_node_features,
        "num_config_keys": len(schema["config_keys"]),
        "num_config_features": len(schema["config_feature_names"]),
    }


def from_problems(
    problems: Sequence[TileProblem],
    *,
    source: str,
    device: Mapping[str, Any],
    config_feature_names: Sequence[str],
    config_keys: Sequence[str] | None = None,
    lowering: str = "pallas",
) -> TileDataset:
    """A data set of ``problems`` in the given order (validated like a loaded one); ``lowering``:
    how they were measured (`tpucost.experiments.tiles.lowering.LOWERINGS`).

    The feature spec follows from ``source`` (`feature_spec_for`). ``config_keys`` defaults to
    every key of every config, in first-seen order.
    """
    spec = feature_spec_for(source, len(config_feature_names))
    keys = tuple(
        str(k)
        for k in (
            config_keys
            if config_keys is not None
            else dict.fromkeys(k for p in problems for c in p.configs for k in c)
        )
    )
    family_keys: dict[str, dict[str, None]] = {}
    for p in problems:
        family_keys.setdefault(p.family, {}).update(dict.fromkeys(k for c in p.configs for k in c))
    col = {k: j for j, k in enumerate(keys)}
    g = len(config_feature_names)
    values = np.full((sum(len(p.configs) for p in problems), len(keys)), MISSING, np.int64)
    row = 0
    for p in problems:
        name = problem_key(p.family, p.shape, p.dtype)
        if len(p.configs) != len(p.runtime_ns) or len(p.configs) != len(p.config_features):
            raise ValueError(
                f"problem {name}: {len(p.configs)} configs, {len(p.runtime_ns)} runtimes, "
                f"{len(p.config_features)} feature rows"
            )
        if np.shape(p.config_features) != (len(p.configs), g):
            raise ValueError(
                f"problem {name}: field 'config_feat': shape {np.shape(p.config_features)}, expected "
                f"({len(p.configs)}, {g}) ({g} config_feature_names)"
            )
        if np.shape(p.graph.node_features) != (p.graph.num_nodes, spec.num_node_features):
            raise ValueError(
                f"problem {name}: field 'node_features': shape {np.shape(p.graph.node_features)}, "
                f"expected ({p.graph.num_nodes}, {spec.num_node_features}) ({source} node features)"
            )
        for c in p.configs:
            for k, v in c.items():
                values[row, col[k]] = int(v)
            row += 1
    configs = Group(
        offsets_from_lengths([len(p.configs) for p in problems]),
        {
            "config_runtime_ns": stack_rows([p.runtime_ns for p in problems], "float64"),
            "config_values": values,
            "config_feat": stack_rows([p.config_features for p in problems], "float32", (g,)),
        },
    )
    table = graph_table.from_graphs(
        [p.graph for p in problems],
        {
            "family": str_array(p.family for p in problems),
            "shape": str_array(shape_text(p.shape) for p in problems),
            "dtype": str_array(p.dtype for p in problems),
        },
        {"config": configs},
        spec.num_node_features,
    )
    ds = TileDataset(
        table,
        keys,
        {f: tuple(k) for f, k in sorted(family_keys.items())},
        tuple(str(n) for n in config_feature_names),
        spec,
        source,
        dict(device),
        lowering=lowering,
    )
    _check(Path("<in memory>"), ds.schema(), ds.table, spec)
    return ds


# -------------------------------------------------------------------------------------- storage


def save_dataset(ds: TileDataset, out_dir: str | os.PathLike) -> Path:
    """Write ``tiles.npz``, ``device.json`` and ``schema.json`` (last) into ``out_dir``, atomically."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    save_npz_atomic(
        out / TILES_FILE, {**ds.table.arrays(), "format_version": np.array(FORMAT_VERSION, np.int64)}
    )
    write_json_atomic(out / collection.DEVICE, ds.device)
    write_json_atomic(out / SCHEMA_FILE, ds.schema())
    return out


def default_data_dir() -> Path:
    """The bundled tile data set: ``tpucost.files.bundled_dir() / "tiles_cpu"``."""
    return bundled_dir() / BUNDLED_NAME


def load_dataset(path: str | os.PathLike | None = None) -> TileDataset:
    """Load and validate a tile data folder; ``None`` loads the bundled ``tiles_cpu``.

    Raises FileNotFoundError when the folder holds no tile data set at all, ValueError naming the
    file and the field when a file is missing or malformed.
    """
    root = Path(path) if path is not None else default_data_dir()
    schema_path, tiles_path, device_path = root / SCHEMA_FILE, root / TILES_FILE, root / collection.DEVICE
    if not schema_path.exists() and not tiles_path.exists():
        hint = f" {missing_bundled_hint(root)}" if path is None else ""
        log_hint = (
            f" {root / collection.LOG} exists: build the data set from it with "
            f"`tpucost.experiments.data.tile_collection.finalize({str(root)!r})`."
            if (root / collection.LOG).exists()
            else ""
        )
        raise FileNotFoundError(
            f"no tile data set at {root} (no {SCHEMA_FILE}, no {TILES_FILE}). Collect one with "
            f"`tpucost.experiments.data.tile_collection.collect(DIR, n_problems)`.{log_hint}{hint}"
        )
    for p in (schema_path, tiles_path, device_path):
        if not p.is_file():
            raise ValueError(
                f"{p}: missing (a tile data folder holds {SCHEMA_FILE}, {TILES_FILE} and {collection.DEVICE})"
            )
    schema = read_json_object(schema_path)
    spec = _check_schema(schema_path, schema)
    arrays = read_npz(tiles_path)
    if "format_version" not in arrays or int(arrays["format_version"]) != FORMAT_VERSION:
        raise ValueError(f"{tiles_path}: field 'format_version': missing or not {FORMAT_VERSION}")
    table = graph_table.from_arrays(arrays, TILE_TABLE, tiles_path)
    _check(tiles_path, schema, table, spec)
    return TileDataset(
        table,
        tuple(schema["config_keys"]),
        {f: tuple(k) for f, k in schema["family_config_keys"].items()},
        tuple(schema["config_feature_names"]),
        spec,
        schema["source"],
        read_json_object(device_path),
        root,
        schema.get("lowering", "pallas"),  # written before there were two lowerings: Pallas
    )


def _bad(path: Any, field: str, message: str) -> ValueError:
    return ValueError(f"{path}: field {field!r}: {message}")


def _check_schema(path: Path, schema: dict[str, Any]) -> FeatureSpec:
    """The fields of ``schema.json``, present and well typed; returns its feature spec."""
    for field in (
        "format",
        "format_version",
        "source",
        "problems",
        "configs",
        "nodes",
        "edges",
        "config_keys",
        "family_config_keys",
        "config_feature_names",
        "features",
        "missing_value",
    ):
        if field not in schema:
            raise _bad(path, field, "missing")
    for field, expected in (
        ("format", FORMAT),
        ("format_version", FORMAT_VERSION),
        ("missing_value", MISSING),
    ):
        if schema[field] != expected:
            raise _bad(path, field, f"{schema[field]!r}, expected {expected!r}")
    if schema["source"] not in SOURCES:
        raise _bad(path, "source", f"{schema['source']!r}, expected one of {SOURCES}")
    if schema.get("lowering", "pallas") not in LOWERINGS:
        raise _bad(path, "lowering", f"{schema['lowering']!r}, expected one of {LOWERINGS}")
    for field in ("problems", "configs", "nodes", "edges"):
        if not isinstance(schema[field], int) or isinstance(schema[field], bool) or schema[field] < 0:
            raise _bad(path, field, f"expected a count, got {schema[field]!r}")
    for field in ("config_keys", "config_feature_names"):
        names = schema[field]
        if (
            not isinstance(names, list)
            or not all(isinstance(n, str) for n in names)
            or len(set(names)) != len(names)
        ):
            raise _bad(path, field, "expected a list of distinct strings")
    fk = schema["family_config_keys"]
    if not isinstance(fk, dict) or not all(
        isinstance(k, list) and len(set(k)) == len(k) and set(k) <= set(schema["config_keys"])
        for k in fk.values()
    ):
        raise _bad(path, "family_config_keys", "expected {family: [distinct names of config_keys]}")
    try:
        spec = FeatureSpec.from_dict(schema["features"])
    except (TypeError, ValueError, AttributeError) as err:
        raise _bad(path, "features", str(err)) from err
    if spec.num_config_features != len(schema["config_feature_names"]):
        raise _bad(
            path,
            "features",
            f"{spec.num_config_features} config features, but "
            f"{len(schema['config_feature_names'])} config_feature_names",
        )
    return spec


def _check(path: Path, schema: Mapping[str, Any], table: GraphTable, spec: FeatureSpec) -> None:
    """The table against ``TILE_TABLE`` and the counts of ``schema``."""
    graph_table.check_table(path, table, TILE_TABLE, _widths(schema, spec))
    configs = table.groups["config"]
    for field, count, value in (
        ("family", "problems", len(table)),
        ("opcodes", "nodes", len(table.opcodes)),
        ("senders", "edges", len(table.senders)),
        ("config_runtime_ns", "configs", len(configs.columns["config_runtime_ns"])),
    ):
        if value != schema[count]:
            raise _bad(path, field, f"length {value}, {SCHEMA_FILE} says {schema[count]} {count}")
    unnamed = sorted(set(table.columns["family"].tolist()) - set(schema["family_config_keys"]))
    if unnamed:
        raise _bad(
            path, "family", f"families {unnamed[:5]} have no entry in {SCHEMA_FILE} 'family_config_keys'"
        )
    if np.any(np.diff(configs.offsets) == 0):
        raise _bad(path, "config_offsets", "a problem without configurations")
    rt = configs.columns["config_runtime_ns"]
    if len(rt) and not np.all(rt > 0):
        raise _bad(path, "config_runtime_ns", "runtimes must be finite and positive")


# ------------------------------------------------------------------------------------ TpuGraphs


def _tpugraphs_family(stem: str) -> str:
    """The model part of a TpuGraphs tile file name: ``alexnet_train_batch_32_-1bae27a41d70f4a7`` ->
    ``alexnet_train_batch_32`` (the stem itself when it has no trailing hash)."""
    m = re.match(r"^(.*?)_-?[0-9a-f]{8,}$", stem)
    return m.group(1) if m and m.group(1) else stem


def from_tpugraphs(
    directory: str | os.PathLike, limit: int | None = None, family: str | None = "tpugraphs"
) -> TileDataset:
    """The TpuGraphs tile files of ``directory`` (``tpugraphs.read_tile_dir``) as a `TileDataset`.

    One problem per file: ``shape`` is the file stem, ``dtype`` ``""``, ``family`` the given name
    (``None``: the model name parsed from the stem, for splits by model), configs ``{"config": j}``
    (TpuGraphs gives no block sizes), the 24 published config features, runtimes from
    ``config_runtime``. Configs with a runtime of 0 are dropped, and files left without one.
    """
    problems = []
    for k in tpugraphs.read_tile_dir(directory, limit):
        keep = np.flatnonzero(k.runtimes_ns > 0)
        if not len(keep):
            continue
        problems.append(
            TileProblem(
                family if family is not None else _tpugraphs_family(k.name),
                k.name,
                "",
                k.graph,
                [{"config": int(j)} for j in keep],
                k.tile_configs[keep],
                k.runtimes_ns[keep].astype(np.float64),
            )
        )
    names = tuple(f"tpugraphs_config_{j}" for j in range(tpugraphs.NUM_TILE_CONFIG_FEATURES))
    return from_problems(
        problems,
        source="tpugraphs",
        device=TPUGRAPHS_DEVICE,
        config_feature_names=names,
        config_keys=("config",),
    )


# -------------------------------------------------------------------------------------- splits


def _split(ds: TileDataset, part: np.ndarray) -> Split:
    ids = ds.problem_id
    idx = [np.flatnonzero(part == j) for j in range(3)]
    return Split("problem", *(np.sort(ids[i]) for i in idx), *idx)


def split(ds: TileDataset, name: str, seed: int = 0) -> Split:
    """The split called ``name``: ``"random"`` (`split_random` with ``seed``) or ``"hard"`` (`split_hard`)."""
    if name == "random":
        return split_random(ds, seed=seed)
    if name == "hard":
        return split_hard(ds)
    raise ValueError(f"unknown split {name!r}; expected one of {SPLITS}")


def split_random(ds: TileDataset, seed: int = 0, fractions: Sequence[float] = (0.8, 0.1, 0.1)) -> Split:
    """Problems shuffled with ``seed`` and cut by ``fractions`` (each problem in one part)."""
    return _split(ds, random_parts(len(ds), seed, fractions))


def split_hard(
    ds: TileDataset,
    test_families: Sequence[str] = HARD_TEST_FAMILIES,
    val_families: Sequence[str] = HARD_VAL_FAMILIES,
) -> Split:
    """Whole families held out: problems of ``test_families`` are test, of ``val_families`` val.

    Every named family must occur in ``ds`` (ValueError listing the families it has).
    """
    present = set(ds.family.tolist())
    missing = [f for f in (*test_families, *val_families) if f not in present]
    if missing:
        raise ValueError(f"families {missing} are not in this tile data set (it has {sorted(present)})")
    return _split(ds, family_parts(ds.family, test_families, val_families))


# --------------------------------------------------------------------------------------- stats


def _summary(values: np.ndarray) -> dict[str, float | None]:
    if not len(values):
        return {"min": None, "median": None, "max": None}
    cast = int if np.issubdtype(np.asarray(values).dtype, np.integer) else float
    return {"min": cast(np.min(values)), "median": float(np.median(values)), "max": cast(np.max(values))}


def stats(ds: TileDataset) -> dict[str, Any]:
    """Summary for the CLI: counts per family, configs per problem, runtimes, best/worst spread.

    ``best_over_worst`` summarises, over problems, the slowest config's runtime over the fastest's
    (how much choosing the tile matters); ``best_over_worst_per_family`` is its median per family.
    """
    families = ds.family.astype(str)
    fam, counts = np.unique(families, return_counts=True)
    cfg_fam = ds.family[ds.config_problem] if ds.num_configs else np.zeros(0, str)
    spread = np.array([ds.runtime_ns(i).max() / ds.runtime_ns(i).min() for i in range(len(ds))])
    return {
        "source": ds.source,
        "problems": len(ds),
        "configs": ds.num_configs,
        "problems_per_family": {str(f): int(c) for f, c in zip(fam, counts, strict=True)},
        "configs_per_family": {str(f): int(np.sum(cfg_fam == f)) for f in fam},
        "configs_per_problem": _summary(ds.configs_per_problem),
        "runtime_ns": _summary(ds.config_runtime_ns),
        "best_over_worst": _summary(spread),
        "best_over_worst_per_family": {str(f): float(np.median(spread[families == f])) for f in fam},
        "nodes_per_graph": _summary(ds.table.n_nodes),
        "num_config_features": ds.num_config_features,
        "num_node_features": ds.features.num_node_features,
        "device": ds.device,
    }


def noise_floor(ds: TileDataset) -> dict[str, Any] | None:
    """The ranking metrics of a second measurement against the first (``noise.json`` of the data
    set's folder, `measure_noise`), or None when the folder has none."""
    if ds.root is None or not (Path(ds.root) / NOISE_FILE).is_file():
        return None
    report = read_json_object(Path(ds.root) / NOISE_FILE)
    return {k: report[k] for k in ("kendall_mean", "top1", "top5", "top10", "n_kernels") if k in report}


def family_table(ds: TileDataset) -> pd.DataFrame:
    """One row per family: problems, configurations, median runtime (ms) and the median over its
    problems of slowest / fastest configuration."""
    rows: dict[str, dict[str, list[float]]] = {}
    for i in range(len(ds)):
        r = ds.runtime_ns(i)
        row = rows.setdefault(str(ds.family[i]), {"configs": [], "runtime": [], "spread": []})
        row["configs"].append(len(r))
        row["runtime"].extend(r.tolist())
        row["spread"].append(float(r.max() / r.min()))
    return pd.DataFrame(
        {
            family: {
                "problems": len(v["configs"]),
                "configurations": int(sum(v["configs"])),
                "median runtime (ms)": float(np.median(v["runtime"]) / 1e6),
                "median slowest / fastest": float(np.median(v["spread"])),
            }
            for family, v in rows.items()
        }
    ).T
