"""The tile data set: kernels measured under many block-size (tile) configurations.

One record per *problem*: a kernel family of `tpucost.tiles` (``matmul``, ``softmax``, ...), a
problem shape and a dtype. A problem has ONE kernel graph (``tiles.kernel_graph``, the same for
all its configurations) and C >= 1 configurations (dicts of block sizes, e.g.
``{"block_m": 128, "block_n": 128, "block_k": 64}``), each with a config feature row
(``tiles.config_features``) and a measured runtime (``tiles.measure_configs``: minimum over
repeats, ns). This is the task of the TpuGraphs "tile" collection: rank the configurations of one
kernel. :func:`from_tpugraphs` converts that published collection to the same record.

In memory: :class:`TileDataset`
-------------------------------
Flat arrays with offsets (P problems, N nodes, M edges, C configurations in all, K config keys,
F node features, G config features):

======================  ===============  ==========================================================
array                   dtype / shape    meaning
======================  ===============  ==========================================================
family, shape, dtype    unicode[P]       the problem: family name, shape as ``"384,640,896"`` (a
                                         TpuGraphs file stem for ``source="tpugraphs"``), dtype
node_offsets            int64[P+1]       problem p's nodes are ``node_offsets[p]:[p+1]``
edge_offsets            int64[P+1]       problem p's edges are ``edge_offsets[p]:[p+1]``
opcodes                 int32[N]         opcode ids
node_features           float32[N, F]    node feature rows
senders, receivers      int32[M]         edge endpoints (producer -> consumer), within the graph
config_offsets          int64[P+1]       problem p's configs are ``config_offsets[p]:[p+1]``
config_values           int64[C, K]      block sizes, column k is ``config_keys[k]``;
                                         :data:`MISSING` where a config has no such key
config_feat             float32[C, G]    config feature rows (``config_feature_names``)
config_runtime_ns       float64[C]       measured runtime of each config, ns (finite, > 0)
======================  ===============  ==========================================================

plus ``config_keys`` (K names), ``family_config_keys`` (each family's keys in the order its
configs name them, which ``configs(i)`` keeps), ``config_feature_names`` (G names), ``feature_spec``
(a `tpucost.features.FeatureSpec`: `features.TPUCOST_FEATURES` with ``num_config_features = G``, or
`tpucost.tpugraphs.TILE_FEATURES`), ``source`` (``"tpucost"`` or
``"tpugraphs"``) and ``device`` (`tpucost.device.fingerprint()` of the measuring machine, or
``{"name": "TPU v3 (TpuGraphs)"}``). Problems are stored in a canonical order (family, then
shape, then dtype), so a data set does not depend on how its collection was sharded.

On disk: one folder
-------------------
=================  ===============================================================================
file               content
=================  ===============================================================================
``tiles.npz``      the arrays above (``np.savez_compressed``, read with ``allow_pickle=False``)
``schema.json``    ``{"schema_version", "source", "problems", "configs", "nodes", "edges",
                   "config_keys", "family_config_keys", "config_feature_names", "features"
                   (``FeatureSpec.to_dict()``), "missing_value"}``
``device.json``    the device fingerprint
``log.jsonl``      (collections) one JSON line per measured problem: ``status`` "ok" with
                   family, shape, dtype, configs, runtime_ns, n_legal, wall_s, device_id,
                   load_average, paused_s, time; "error" with the exception; "skipped" (no legal
                   config); and a "start" line per run with its parameters
``PROVENANCE.md``  (collections) how, when, where and on what device it was measured; counts
=================  ===============================================================================

Every file is written atomically (`tpucost.data.write_atomic`); ``schema.json`` last. Reading
validates everything and raises ValueError naming the file and the field (missing field, wrong
dtype or shape, inconsistent offsets, edges outside their graph, non-finite runtimes, a feature
layout other than this tpucost's).

Collection
----------
:func:`collect_tiles` measures a deterministic list of problems (:func:`problem_list`: the
families in turn, shapes drawn with ``tiles.sample_shapes`` in fixed blocks, so the first n
problems of a longer list are the n problems of a shorter one), every n-th for ``shard=(i, n)``.
After each problem it appends its log line, so a killed run loses at most the problem in progress;
calling it again on the same folder skips every problem the log already holds (on the same
device only: ``device.json``) and measures the rest. :func:`finalize_tiles` (run at the end)
rebuilds the data set from the log, recomputing graphs and config features from (family, shape,
dtype, config), which are deterministic. :func:`merge_tiles` joins the folders of several shards.

Splits (by problem)
-------------------
:func:`split_random` shuffles the problems and cuts them 80/10/10. :func:`split_hard` holds out
whole families: test :data:`HARD_TEST_FAMILIES` (``attention``: a composition of a matmul and a
softmax, both seen in training), validation :data:`HARD_VAL_FAMILIES` (``layernorm``, a row-wise
normalisation whose twin ``softmax`` stays in training, as attention's parts do), so that early
stopping, like the test, scores a family never trained on. Both return a
`tpucost.data.Split` whose ``*_programs`` are problem ids (:attr:`TileDataset.problem_id`) and
whose ``train``/``val``/``test`` are problem indices.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import platform
import re
import sys
import time
import traceback
import zipfile
import zlib
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from tpucost import collect, data, device, features, tpugraphs
from tpucost.features import KernelGraph

__all__ = [
    "TILE_SCHEMA_VERSION",
    "MISSING",
    "HARD_TEST_FAMILIES",
    "HARD_VAL_FAMILIES",
    "TILES_FILE",
    "SCHEMA_FILE",
    "DEVICE_FILE",
    "LOG_FILE",
    "PROVENANCE_FILE",
    "TileProblem",
    "TileDataset",
    "from_problems",
    "feature_spec_for",
    "save_tile_dataset",
    "load_tile_dataset",
    "default_tiles_dir",
    "problem_key",
    "problem_list",
    "select_configs",
    "collect_tiles",
    "finalize_tiles",
    "merge_tiles",
    "from_tpugraphs",
    "Split",
    "SPLITS",
    "split",
    "split_random",
    "split_hard",
    "stats",
    "NOISE_FILE",
    "measure_tile_noise",
    "noise_floor",
    "family_table",
]

TILE_SCHEMA_VERSION = 1
#: ``config_values`` entry of a key a configuration does not have.
MISSING = int(np.iinfo(np.int64).min)
#: Families held out as the hard split's test part (see the module docstring).
HARD_TEST_FAMILIES: tuple[str, ...] = ("attention",)
#: Family held out as the hard split's validation part.
HARD_VAL_FAMILIES: tuple[str, ...] = ("layernorm",)

TILES_FILE = "tiles.npz"
SCHEMA_FILE = "schema.json"
DEVICE_FILE = collect.DEVICE  # "device.json"
LOG_FILE = collect.LOG  # "log.jsonl"
PROVENANCE_FILE = "PROVENANCE.md"
#: Name of the bundled folder under `tpucost.data.bundled_dir()`.
BUNDLED_NAME = "tiles_cpu"
#: Device record of the published TpuGraphs collection.
TPUGRAPHS_DEVICE: dict[str, Any] = {"name": "TPU v3 (TpuGraphs)"}
SOURCES = ("tpucost", "tpugraphs")
#: Shapes asked of ``tiles.sample_shapes`` at a time (see `problem_list`).
SHAPE_BLOCK = 16


def _tiles() -> Any:
    """The `tpucost.tiles` module (imported on first use; tests replace this function)."""
    from tpucost import tiles

    return tiles


def _write_atomic(path: Path, write: Any) -> None:
    data.write_atomic(path, write)


def _write_text_atomic(path: Path, text: str) -> None:
    data.write_text_atomic(path, text)


# ------------------------------------------------------------------------------------ in memory


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


# array field -> (dtype, ndim)
_ARRAYS: dict[str, tuple[str, int]] = {
    "family": ("U", 1), "shape": ("U", 1), "dtype": ("U", 1),
    "node_offsets": ("i8", 1), "edge_offsets": ("i8", 1), "config_offsets": ("i8", 1),
    "opcodes": ("i4", 1), "node_features": ("f4", 2), "senders": ("i4", 1), "receivers": ("i4", 1),
    "config_values": ("i8", 2), "config_feat": ("f4", 2), "config_runtime_ns": ("f8", 1),
}  # fmt: skip


@dataclasses.dataclass(frozen=True, eq=False)
class TileDataset:
    """Tile problems as flat arrays with offsets (see the module docstring for every field).

    ``len(ds)`` is the number of problems P; ``ds.problem(i)``, ``ds.graph(i)``,
    ``ds.configs(i)``, ``ds.config_features(i)`` (float32[C_i, G]) and ``ds.runtime_ns(i)``
    (float64[C_i]) give problem ``i``.
    """

    family: np.ndarray
    shape: np.ndarray
    dtype: np.ndarray
    node_offsets: np.ndarray
    edge_offsets: np.ndarray
    opcodes: np.ndarray
    node_features: np.ndarray
    senders: np.ndarray
    receivers: np.ndarray
    config_offsets: np.ndarray
    config_values: np.ndarray
    config_feat: np.ndarray
    config_runtime_ns: np.ndarray
    config_keys: tuple[str, ...]
    family_config_keys: dict[str, tuple[str, ...]]
    config_feature_names: tuple[str, ...]
    feature_spec: features.FeatureSpec
    source: str
    device: dict[str, Any]
    root: Path | None = None

    def __len__(self) -> int:
        return int(self.family.shape[0])

    @property
    def num_configs(self) -> int:
        """C: configurations over all problems."""
        return int(self.config_runtime_ns.shape[0])

    @property
    def num_config_features(self) -> int:
        """G: width of a config feature row."""
        return len(self.config_feature_names)

    @property
    def num_node_features(self) -> int:
        """F: width of a node feature row."""
        return int(self.feature_spec.num_node_features)

    @property
    def configs_per_problem(self) -> np.ndarray:
        """int64[P]: configurations of each problem."""
        return np.diff(self.config_offsets)

    @property
    def problem_id(self) -> np.ndarray:
        """unicode[P]: ``"family|shape|dtype"``, unique per problem (what splits assign)."""
        return _str_array([problem_key(f, s, d) for f, s, d in zip(self.family, self.shape, self.dtype, strict=True)])

    @property
    def config_problem(self) -> np.ndarray:
        """int64[C]: the problem of each configuration row."""
        return np.repeat(np.arange(len(self), dtype=np.int64), self.configs_per_problem)

    def graph(self, i: int) -> KernelGraph:
        """Problem ``i``'s kernel graph (views into the arrays)."""
        n0, n1 = self.node_offsets[i], self.node_offsets[i + 1]
        e0, e1 = self.edge_offsets[i], self.edge_offsets[i + 1]
        return KernelGraph(self.opcodes[n0:n1], self.node_features[n0:n1], self.senders[e0:e1],
                           self.receivers[e0:e1], problem_key(self.family[i], self.shape[i], self.dtype[i]),
                           str(self.family[i]))

    def configs(self, i: int) -> list[dict[str, int]]:
        """Problem ``i``'s configurations as dicts of block sizes (keys in its family's order)."""
        rows = self.config_values[self.config_offsets[i]:self.config_offsets[i + 1]]
        cols = [(k, self.config_keys.index(k)) for k in self.family_config_keys.get(str(self.family[i]), self.config_keys)]
        return [{k: int(row[j]) for k, j in cols if row[j] != MISSING} for row in rows]

    def config_features(self, i: int) -> np.ndarray:
        """float32[C_i, G]: problem ``i``'s config feature rows."""
        return self.config_feat[self.config_offsets[i]:self.config_offsets[i + 1]]

    def runtime_ns(self, i: int) -> np.ndarray:
        """float64[C_i]: problem ``i``'s measured runtimes."""
        return self.config_runtime_ns[self.config_offsets[i]:self.config_offsets[i + 1]]

    def problem(self, i: int) -> TileProblem:
        """Problem ``i`` as one record."""
        return TileProblem(str(self.family[i]), str(self.shape[i]), str(self.dtype[i]), self.graph(i),
                           self.configs(i), self.config_features(i), self.runtime_ns(i))

    def __iter__(self) -> Iterator[TileProblem]:
        return (self.problem(i) for i in range(len(self)))

    def subset(self, indices: Sequence[int] | np.ndarray) -> TileDataset:
        """A new data set of problems ``indices`` (in that order)."""
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        out: dict[str, Any] = {f: getattr(self, f)[idx] for f in ("family", "shape", "dtype")}
        for off, fields in (("node_offsets", ("opcodes", "node_features")), ("edge_offsets", ("senders", "receivers")),
                            ("config_offsets", ("config_values", "config_feat", "config_runtime_ns"))):
            take, out[off] = data._ragged_take(getattr(self, off), idx)
            out.update({f: getattr(self, f)[take] for f in fields})
        return dataclasses.replace(self, **out, root=None)

    def arrays(self) -> dict[str, np.ndarray]:
        """The array fields by name (what ``tiles.npz`` stores)."""
        return {f: getattr(self, f) for f in _ARRAYS}

    def schema(self) -> dict[str, Any]:
        """What ``schema.json`` stores."""
        return {"schema_version": TILE_SCHEMA_VERSION, "source": self.source, "problems": len(self),
                "configs": self.num_configs, "nodes": int(self.opcodes.shape[0]), "edges": int(self.senders.shape[0]),
                "config_keys": list(self.config_keys),
                "family_config_keys": {f: list(k) for f, k in self.family_config_keys.items()},
                "config_feature_names": list(self.config_feature_names),
                "features": self.feature_spec.to_dict(), "missing_value": MISSING}

    def equals(self, other: TileDataset) -> bool:
        """Same problems, graphs, configs, features, runtimes, names and device (not ``root``)."""
        return (self.schema() == other.schema() and self.device == other.device
                and all(np.array_equal(a, other.arrays()[k]) for k, a in self.arrays().items()))


def problem_key(family: str, shape: str | Sequence[int], dtype: str) -> str:
    """``"family|shape|dtype"``: a problem's id (shape as ``"384,640,896"``)."""
    return f"{family}|{_shape_str(shape)}|{dtype}"


def _shape_str(shape: str | Sequence[int]) -> str:
    return shape if isinstance(shape, str) else ",".join(str(int(d)) for d in shape)


def _shape_sort_key(shape: str) -> tuple:
    try:
        return (0, tuple(int(d) for d in shape.split(",")), "")
    except ValueError:
        return (1, (), shape)


def _str_array(values: Sequence[str]) -> np.ndarray:
    return data._str_array(values)


def feature_spec_for(source: str, num_config_features: int) -> features.FeatureSpec:
    """The `FeatureSpec` of a tile data set of ``source`` with ``num_config_features`` config features:
    `features.TPUCOST_FEATURES` (tpucost's node layout) or `tpugraphs.TILE_FEATURES`."""
    if source == "tpucost":
        return dataclasses.replace(features.TPUCOST_FEATURES, num_config_features=int(num_config_features))
    if source == "tpugraphs":
        return tpugraphs.TILE_FEATURES
    raise ValueError(f"source must be one of {SOURCES}, got {source!r}")


def tpugraphs_config_feature_names() -> tuple[str, ...]:
    """Names of TpuGraphs' 24 config features (the files do not name them)."""
    return tuple(f"tpugraphs_config_{j}" for j in range(tpugraphs.NUM_TILE_CONFIG_FEATURES))


def from_problems(problems: Sequence[TileProblem], *, source: str, device: Mapping[str, Any],
                  config_feature_names: Sequence[str], config_keys: Sequence[str] | None = None) -> TileDataset:
    """A data set of ``problems`` in the given order (validated like a loaded one).

    The feature spec follows from ``source`` (`feature_spec_for`). ``config_keys`` defaults to
    every key of every config, in first-seen order.
    """
    spec = feature_spec_for(source, len(config_feature_names))
    if config_keys is None:
        config_keys = list(dict.fromkeys(k for p in problems for c in p.configs for k in c))
    keys = tuple(str(k) for k in config_keys)
    family_keys: dict[str, dict[str, None]] = {}
    for p in problems:
        family_keys.setdefault(p.family, {}).update(dict.fromkeys(k for c in p.configs for k in c))
    col = {k: j for j, k in enumerate(keys)}
    g, f = len(config_feature_names), spec.num_node_features
    values = np.full((sum(len(p.configs) for p in problems), len(keys)), MISSING, np.int64)
    row = 0
    for p in problems:
        name = problem_key(p.family, p.shape, p.dtype)
        if len(p.configs) != len(p.runtime_ns) or len(p.configs) != len(p.config_features):
            raise ValueError(f"problem {name}: {len(p.configs)} configs, {len(p.runtime_ns)} runtimes, "
                             f"{len(p.config_features)} feature rows")
        if np.shape(p.config_features) != (len(p.configs), g):
            raise _bad(f"problem {name}", "config_feat", f"shape {np.shape(p.config_features)}, expected "
                       f"({len(p.configs)}, {g}) ({g} config_feature_names)")
        if np.shape(p.graph.node_features) != (p.graph.num_nodes, f):
            raise _bad(f"problem {name}", "node_features", f"shape {np.shape(p.graph.node_features)}, expected "
                       f"({p.graph.num_nodes}, {f}) ({source} node features)")
        for c in p.configs:
            for k, v in c.items():
                values[row, col[k]] = int(v)
            row += 1
    cat = lambda xs, dt, shape: np.concatenate([np.asarray(x, dt).reshape(shape) for x in xs]) if xs else np.zeros((0, *shape[1:]), dt)  # noqa: E731
    ds = TileDataset(
        family=_str_array([p.family for p in problems]), shape=_str_array([_shape_str(p.shape) for p in problems]),
        dtype=_str_array([p.dtype for p in problems]),
        node_offsets=data._offsets(np.array([p.graph.num_nodes for p in problems], np.int64)),
        edge_offsets=data._offsets(np.array([p.graph.num_edges for p in problems], np.int64)),
        opcodes=cat([p.graph.opcodes for p in problems], np.int32, (-1,)),
        node_features=cat([p.graph.node_features for p in problems], np.float32, (-1, f)),
        senders=cat([p.graph.senders for p in problems], np.int32, (-1,)),
        receivers=cat([p.graph.receivers for p in problems], np.int32, (-1,)),
        config_offsets=data._offsets(np.array([len(p.configs) for p in problems], np.int64)),
        config_values=values,
        config_feat=cat([p.config_features for p in problems], np.float32, (-1, g)),
        config_runtime_ns=cat([p.runtime_ns for p in problems], np.float64, (-1,)),
        config_keys=keys, family_config_keys={f: tuple(k) for f, k in sorted(family_keys.items())},
        config_feature_names=tuple(str(n) for n in config_feature_names),
        feature_spec=spec, source=source, device=dict(device),
    )
    _check_schema("<in memory>", ds.schema())
    _check_arrays("<in memory>", ds.arrays(), ds.schema())
    return ds


# -------------------------------------------------------------------------------------- storage


def save_tile_dataset(ds: TileDataset, out_dir: str | os.PathLike) -> Path:
    """Write ``tiles.npz``, ``device.json`` and ``schema.json`` (last) into ``out_dir``, atomically."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    arrays = ds.arrays()
    _write_atomic(out / TILES_FILE, lambda fh: np.savez_compressed(fh, **arrays))
    _write_text_atomic(out / DEVICE_FILE, json.dumps(ds.device, indent=1) + "\n")
    _write_text_atomic(out / SCHEMA_FILE, json.dumps(ds.schema(), indent=1) + "\n")
    return out


def default_tiles_dir() -> Path:
    """The bundled tile data set: ``tpucost.data.bundled_dir() / "tiles_cpu"``."""
    return data.bundled_dir() / BUNDLED_NAME


def load_tile_dataset(path: str | os.PathLike | None = None) -> TileDataset:
    """Load and validate a tile data folder; ``None`` loads the bundled ``tiles_cpu``.

    Raises FileNotFoundError when the folder holds no tile data set at all, ValueError naming the
    file and the field when a file is missing or malformed.
    """
    root = Path(path) if path is not None else default_tiles_dir()
    schema_path, tiles_path, device_path = root / SCHEMA_FILE, root / TILES_FILE, root / DEVICE_FILE
    if not schema_path.exists() and not tiles_path.exists():
        hint = f" {data.missing_bundled_hint(root)}" if path is None else ""
        log_hint = (f" {root / LOG_FILE} exists: build the data set from it with "
                    f"`tpucost.tile_data.finalize_tiles({str(root)!r})`." if (root / LOG_FILE).exists() else "")
        raise FileNotFoundError(
            f"no tile data set at {root} (no {SCHEMA_FILE}, no {TILES_FILE}). Collect one with "
            f"`tpucost.tile_data.collect_tiles(DIR, n_problems)`.{log_hint}{hint}")
    schema = _read_json(schema_path)
    _check_schema(schema_path, schema)
    dev = _read_json(device_path)
    arrays = _read_npz(tiles_path)
    _check_arrays(tiles_path, arrays, schema)
    return TileDataset(**arrays, config_keys=tuple(schema["config_keys"]),
                       family_config_keys={f: tuple(k) for f, k in schema["family_config_keys"].items()},
                       config_feature_names=tuple(schema["config_feature_names"]),
                       feature_spec=features.FeatureSpec.from_dict(schema["features"]), source=schema["source"],
                       device=dev,
                       root=root)


def _read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise ValueError(f"{path}: missing (a tile data folder holds {SCHEMA_FILE}, {TILES_FILE} and {DEVICE_FILE})")
    try:
        value = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"{path}: not JSON: {err}") from err
    if not isinstance(value, dict):
        raise ValueError(f"{path}: expected a JSON object, got {type(value).__name__}")
    return value


def _read_npz(path: Path) -> dict[str, np.ndarray]:
    if not path.is_file():
        raise ValueError(f"{path}: missing (a tile data folder holds {SCHEMA_FILE}, {TILES_FILE} and {DEVICE_FILE})")
    if not zipfile.is_zipfile(path):
        raise ValueError(f"{path}: not an npz (zip) file")
    out = {}
    try:
        with np.load(path, allow_pickle=False) as z:
            for field in _ARRAYS:
                if field not in z.files:
                    raise ValueError(f"{path}: field {field!r}: missing")
                try:
                    out[field] = z[field]
                except ValueError as err:  # object arrays need pickle, refused
                    raise ValueError(f"{path}: field {field!r}: {err}") from err
    except (zipfile.BadZipFile, OSError, EOFError) as err:
        raise ValueError(f"{path}: not a readable npz file: {err}") from err
    return out


def _bad(path: Any, field: str, message: str) -> ValueError:
    return ValueError(f"{path}: field {field!r}: {message}")


def _check_schema(path: Any, schema: dict[str, Any]) -> None:
    """The fields of ``schema.json``: present, well typed, and this tpucost's feature layout."""
    for field in ("schema_version", "source", "problems", "configs", "nodes", "edges", "config_keys", "family_config_keys",
                  "config_feature_names", "features", "missing_value"):
        if field not in schema:
            raise _bad(path, field, "missing")
    if schema["schema_version"] != TILE_SCHEMA_VERSION:
        raise _bad(path, "schema_version", f"{schema['schema_version']!r}, expected {TILE_SCHEMA_VERSION}")
    if schema["source"] not in SOURCES:
        raise _bad(path, "source", f"{schema['source']!r}, expected one of {SOURCES}")
    for field in ("problems", "configs", "nodes", "edges"):
        if not isinstance(schema[field], int) or isinstance(schema[field], bool) or schema[field] < 0:
            raise _bad(path, field, f"expected a count, got {schema[field]!r}")
    for field in ("config_keys", "config_feature_names"):
        names = schema[field]
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names) or len(set(names)) != len(names):
            raise _bad(path, field, "expected a list of distinct strings")
    fk = schema["family_config_keys"]
    if not isinstance(fk, dict) or not all(
            isinstance(k, list) and len(set(k)) == len(k) and set(k) <= set(schema["config_keys"]) for k in fk.values()):
        raise _bad(path, "family_config_keys", "expected {family: [distinct names of config_keys]}")
    if schema["missing_value"] != MISSING:
        raise _bad(path, "missing_value", f"{schema['missing_value']!r}, expected {MISSING}")
    if schema["source"] == "tpugraphs" and len(schema["config_feature_names"]) != tpugraphs.NUM_TILE_CONFIG_FEATURES:
        raise _bad(path, "config_feature_names", f"{len(schema['config_feature_names'])} names, TpuGraphs has "
                   f"{tpugraphs.NUM_TILE_CONFIG_FEATURES}")
    try:
        spec = features.FeatureSpec.from_dict(schema["features"])
    except (TypeError, ValueError, AttributeError) as err:
        raise _bad(path, "features", str(err)) from err
    expected = feature_spec_for(schema["source"], len(schema["config_feature_names"]))
    if spec != expected:
        raise _bad(path, "features", f"{spec.describe()} differs from this tpucost's {expected.describe()} for "
                   f"{schema['source']} tile data: the data set was built with another feature layout; rebuild it "
                   "(finalize_tiles recomputes the features from the log)")


def _check_arrays(path: Any, arrays: dict[str, np.ndarray], schema: dict[str, Any]) -> None:
    """dtypes, shapes and offsets of the arrays agree with each other and with ``schema``."""
    for field, (kind, ndim) in _ARRAYS.items():
        a = arrays[field]
        if kind == "U":
            if a.dtype.kind != "U":
                raise _bad(path, field, f"dtype {a.dtype}, expected a unicode string array")
        elif a.dtype != np.dtype(kind):
            raise _bad(path, field, f"dtype {a.dtype}, expected {np.dtype(kind)}")
        if a.ndim != ndim:
            raise _bad(path, field, f"shape {a.shape}, expected {ndim} dimension(s)")
    p = arrays["family"].shape[0]
    if p != schema["problems"]:
        raise _bad(path, "family", f"{p} problems, {SCHEMA_FILE} says {schema['problems']}")
    for field in ("shape", "dtype"):
        if arrays[field].shape != (p,):
            raise _bad(path, field, f"shape {arrays[field].shape}, expected ({p},)")
    for off, target in (("node_offsets", "opcodes"), ("edge_offsets", "senders"), ("config_offsets", "config_runtime_ns")):
        o = arrays[off]
        if o.shape != (p + 1,) or o[0] != 0 or np.any(np.diff(o) < 0) or o[-1] != arrays[target].shape[0]:
            raise _bad(path, off, f"not {p + 1} non-decreasing offsets from 0 to len({target}) = {arrays[target].shape[0]}")
    n, m, c = arrays["opcodes"].shape[0], arrays["senders"].shape[0], arrays["config_runtime_ns"].shape[0]
    for field, count in (("opcodes", "nodes"), ("senders", "edges"), ("config_runtime_ns", "configs")):
        if arrays[field].shape[0] != schema[count]:
            raise _bad(path, field, f"length {arrays[field].shape[0]}, {SCHEMA_FILE} says {schema[count]} {count}")
    f = schema["features"]["num_node_features"]
    for field, shape in (("node_features", (n, f)), ("receivers", (m,)),
                         ("config_values", (c, len(schema["config_keys"]))),
                         ("config_feat", (c, len(schema["config_feature_names"])))):
        if arrays[field].shape != shape:
            raise _bad(path, field, f"shape {arrays[field].shape}, expected {shape}")
    unnamed = sorted(set(arrays["family"].tolist()) - set(schema["family_config_keys"]))
    if unnamed:
        raise _bad(path, "family", f"families {unnamed[:5]} have no entry in {SCHEMA_FILE} 'family_config_keys'")
    if np.any(np.diff(arrays["config_offsets"]) == 0):
        raise _bad(path, "config_offsets", "a problem without configurations")
    size = np.repeat(np.diff(arrays["node_offsets"]), np.diff(arrays["edge_offsets"]))
    for field in ("senders", "receivers"):
        if m and (arrays[field].min() < 0 or np.any(arrays[field] >= size)):
            raise _bad(path, field, "node index outside its graph")
    if n and arrays["opcodes"].min() < 0:
        raise _bad(path, "opcodes", "negative opcode ids")
    rt = arrays["config_runtime_ns"]
    if c and not (np.all(np.isfinite(rt)) and np.all(rt > 0)):
        raise _bad(path, "config_runtime_ns", "runtimes must be finite and positive")
    for field in ("node_features", "config_feat"):
        if arrays[field].size and not np.all(np.isfinite(arrays[field])):
            raise _bad(path, field, "non-finite values")


# ------------------------------------------------------------------------------------- problems


def _family_seed(name: str) -> int:
    return zlib.crc32(name.encode())


def _family_shapes(tiles: Any, name: str, seed: int, backend: str | None) -> Iterator[tuple[int, ...]]:
    """Distinct shapes of one family, in a fixed order: ``sample_shapes`` in blocks of
    :data:`SHAPE_BLOCK`, block b drawn with ``default_rng([seed, crc32(name), b])``.

    Stops when 4 blocks in a row bring no new shape (the family's shapes are exhausted).
    """
    seen: set[tuple[int, ...]] = set()
    empty, block = 0, 0
    while empty < 4:
        rng = np.random.default_rng([seed, _family_seed(name), block])
        new = 0
        for shape in tiles.sample_shapes(name, SHAPE_BLOCK, rng, backend=backend):
            shape = tuple(int(d) for d in shape)
            if shape not in seen:
                seen.add(shape)
                new += 1
                yield shape
        empty = 0 if new else empty + 1
        block += 1


def problem_list(n_problems: int, seed: int = 0, families: Sequence[str] | None = None,
                 dtypes: Sequence[str] = ("float32",), backend: str | None = None) -> list[tuple[str, tuple[int, ...], str]]:
    """The first ``n_problems`` (family, shape, dtype) of the deterministic problem sequence.

    The families (sorted names of ``tiles.FAMILIES`` unless given) take turns; each family's
    shapes come from ``tiles.sample_shapes`` in fixed blocks (see `_family_shapes`), and its k-th
    shape gets ``dtypes[k % len(dtypes)]``. The list for n is the first n of the list for any
    larger n, so a collection can grow. A family out of shapes drops out of the rotation.
    """
    tiles = _tiles()
    names = sorted(tiles.FAMILIES) if families is None else list(dict.fromkeys(families))
    unknown = [f for f in names if f not in tiles.FAMILIES]
    if unknown:
        raise ValueError(f"unknown tile families {unknown}; tpucost.tiles has {sorted(tiles.FAMILIES)}")
    if not dtypes:
        raise ValueError("dtypes must name at least one dtype")
    streams = {f: enumerate(_family_shapes(tiles, f, seed, backend)) for f in names}
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


def _problem_seed(key: str) -> int:
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "little")


def select_configs(configs: Sequence[Mapping[str, int]], max_configs: int | None, key: str,
                   block_keys: Sequence[str] | None = None) -> list[dict[str, int]]:
    """At most ``max_configs`` of ``configs``, deterministic given ``key`` (the problem id).

    Ordered by block volume (the product of the ``block_keys`` values, all values if None), the
    smallest-block and the largest-block configs are always kept; the others are one random
    config from each of ``max_configs - 2`` equal strata of the rest (seeded by ``key``), so they
    spread over the range of block sizes. The kept configs stay in ``configs`` order.
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
    if max_configs > 2:
        rng = np.random.default_rng(_problem_seed(key))
        for stratum in np.array_split(np.asarray(order[1:-1]), max_configs - 2):
            if len(stratum):
                keep.add(int(stratum[rng.integers(len(stratum))]))
    return [configs[j] for j in sorted(keep)]


# ------------------------------------------------------------------------------------ collection


def _entry_key(entry: Mapping[str, Any]) -> str:
    return problem_key(entry["family"], entry["shape"], entry["dtype"])


def _block_keys(tiles: Any, name: str) -> tuple[str, ...] | None:
    try:
        return tuple(tiles.family(name).block_keys)
    except Exception:  # noqa: BLE001 - only a preference for the volume order
        return None


def _finite_or_none(x: Any) -> float | None:
    try:
        x = float(x)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def collect_tiles(out_dir: str | os.PathLike, n_problems: int, seed: int = 0, shard: tuple[int, int] = (0, 1),
                  families: Sequence[str] | None = None, max_configs: int | None = 24, repeats: int = 5,
                  progress: bool = True, max_load: float | None = None,
                  dtypes: Sequence[str] = ("float32",)) -> TileDataset:
    """Measure the problems of `problem_list` (every ``shard[1]``-th from ``shard[0]``) into ``out_dir``.

    Each problem: its legal configs (``tiles.legal_configs``), at most ``max_configs`` of them
    (`select_configs`), measured with ``tiles.measure_configs(..., repeats=repeats)``; then one
    log line (see the module docstring). Problems already in the log (ok, error or skipped) are
    not measured again; the folder must have been measured on this device (``device.json``),
    else ValueError. With ``max_load``, waits before each problem while the 1-minute load average
    is above it. Returns the data set of everything in the folder's log (`finalize_tiles`).
    """
    from tqdm import tqdm  # text bars: no ipywidgets needed in notebooks

    tiles = _tiles()
    out = Path(out_dir)
    if not 0 <= shard[0] < shard[1]:
        raise ValueError(f"shard must be (i, n) with 0 <= i < n, got {shard}")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ValueError(f"cannot write the collection folder {out}: {err.strerror or err}") from err
    fp = device.fingerprint()
    collect._claim_device(out, fp)
    _end_torn_line(out / LOG_FILE)
    done = {_entry_key(e) for e in collect.read_log(out) if e.get("status") in ("ok", "error", "skipped")}
    problems = problem_list(n_problems, seed, families, dtypes)[shard[0]::shard[1]]
    todo = [p for p in problems if problem_key(*p) not in done]
    collect._append_log(out, {
        "status": "start", "n_problems": n_problems, "seed": seed, "shard": list(shard),
        "families": list(families) if families else None, "dtypes": list(dtypes), "max_configs": max_configs,
        "repeats": repeats, "todo": len(todo), "already_done": len(problems) - len(todo), "argv": list(sys.argv),
        "time": time.time(), "device_id": fp["id"], "load_average": collect._load_average()})
    cache: dict[str, TileProblem] = {}
    bar = tqdm(total=len(todo), disable=not progress, unit="problem", desc="collect tiles")
    for family, shape, dtype in todo:
        paused = collect._wait_until_quiet(max_load, bar)
        key = problem_key(family, shape, dtype)
        bar.set_description(key)
        load, t0 = collect._load_average(), time.perf_counter()
        entry: dict[str, Any] = {"family": family, "shape": list(shape), "dtype": dtype}
        try:
            legal = tiles.legal_configs(family, shape, dtype)
            configs = select_configs(legal, max_configs, key, _block_keys(tiles, family))
            if not configs:
                entry.update(status="skipped", reason="no legal config", n_legal=0)
            else:
                runtimes = list(tiles.measure_configs(family, shape, dtype, configs, repeats=repeats))
                if len(runtimes) != len(configs):
                    raise ValueError(f"measure_configs returned {len(runtimes)} runtimes for {len(configs)} configs")
                entry.update(status="ok", configs=configs, runtime_ns=[_finite_or_none(r) for r in runtimes],
                             n_legal=len(legal), repeats=repeats)
                # the graph and config features now, so that a problem they fail on is an error here,
                # not at finalize (which recomputes them for problems of earlier runs)
                record = _problem_from_entry(tiles, entry)
                if record is not None:
                    cache[key] = record
        except Exception as err:  # noqa: BLE001 - a failing problem is logged and skipped
            entry.update(status="error", error=f"{type(err).__name__}: {err}", traceback=traceback.format_exc(limit=3))
        entry.update(wall_s=round(time.perf_counter() - t0, 4), device_id=fp["id"], load_average=load,
                     paused_s=paused, time=time.time())
        collect._append_log(out, entry)
        bar.update(1)
    bar.close()
    call = (f"collect_tiles({str(out)!r}, n_problems={n_problems}, seed={seed}, shard={tuple(shard)}, "
            f"families={families!r}, max_configs={max_configs}, repeats={repeats}, max_load={max_load}, "
            f"dtypes={tuple(dtypes)!r})")
    return _build_and_save(out, collect.read_log(out), collect.read_device(out), call, [out], cache)


def _end_torn_line(log: Path) -> None:
    """End a last line a killed run left without its newline, so that the next line stays whole
    (`collect.read_log` skips the torn line)."""
    if log.exists() and log.stat().st_size:
        with open(log, "rb") as fh:
            fh.seek(-1, os.SEEK_END)
            torn = fh.read(1) != b"\n"
        if torn:
            with open(log, "ab") as fh:
                fh.write(b"\n")


def finalize_tiles(out_dir: str | os.PathLike) -> TileDataset:
    """Rebuild ``out_dir``'s data set (``tiles.npz``, ``schema.json``, ``PROVENANCE.md``) from its log."""
    out = Path(out_dir)
    if not (out / LOG_FILE).exists():
        raise FileNotFoundError(f"{out / LOG_FILE}: no collection log to build a tile data set from")
    dev = collect.read_device(out)
    if dev is None:
        raise ValueError(f"{out / DEVICE_FILE}: missing: the device that measured {out / LOG_FILE} is unknown")
    return _build_and_save(out, collect.read_log(out), dev, f"finalize_tiles({str(out)!r})", [out])


def merge_tiles(dirs: Sequence[str | os.PathLike], out_dir: str | os.PathLike) -> TileDataset:
    """Join the collection folders ``dirs`` (shards of one device) into ``out_dir``.

    Every folder must have a ``device.json`` naming the same device (ValueError naming two folders
    otherwise). ``out_dir`` gets their log lines (each distinct line once, folder order), the
    device, and the data set built from the merged log: a problem measured in several folders is
    taken from the first. Problems are stored in canonical order, so merged shards equal one run.
    """
    roots = [Path(d) for d in dirs]
    if not roots:
        raise ValueError("merge_tiles needs at least one folder")
    for r in roots:
        if not (r / LOG_FILE).exists():
            raise FileNotFoundError(f"{r / LOG_FILE}: not a tile collection folder (no log)")
        if collect.read_device(r) is None:
            raise ValueError(f"{r / DEVICE_FILE}: missing: cannot tell which device measured {r}")
    dev = collect._one_device(roots, allow_mixed_devices=False)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    _write_text_atomic(out / DEVICE_FILE, json.dumps(dev, indent=1))
    collect._merge_logs(roots, out / LOG_FILE)  # out's own lines too, when it is one of ``dirs``
    entries = collect.read_log(out)
    call = f"merge_tiles({[str(r) for r in roots]!r}, {str(out)!r})"
    return _build_and_save(out, entries, dev, call, roots)


def _problem_from_entry(tiles: Any, entry: Mapping[str, Any]) -> TileProblem | None:
    """The record of a measured log entry (graph and features recomputed), None if no valid runtime."""
    family, shape, dtype = entry["family"], tuple(int(d) for d in entry["shape"]), entry["dtype"]
    pairs = [(dict(c), float(r)) for c, r in zip(entry["configs"], entry["runtime_ns"], strict=True)
             if r is not None and math.isfinite(r) and r > 0]
    if not pairs:
        return None
    configs = [c for c, _ in pairs]
    feats = np.stack([np.asarray(tiles.config_features(family, shape, dtype, c), np.float32).reshape(-1)
                      for c in configs])
    graph = tiles.kernel_graph(family, shape, dtype)
    return TileProblem(family, _shape_str(shape), dtype, graph, configs, feats,
                       np.array([r for _, r in pairs], np.float64))


def _build(entries: Sequence[Mapping[str, Any]], dev: Mapping[str, Any],
           cache: dict[str, TileProblem] | None = None) -> TileDataset:
    """The data set of the log's "ok" entries: first entry per problem, canonical order."""
    tiles = _tiles()
    ok: dict[str, Mapping[str, Any]] = {}
    for e in entries:
        if e.get("status") == "ok":
            ok.setdefault(_entry_key(e), e)
    order = sorted(ok.values(), key=lambda e: (e["family"], _shape_sort_key(_shape_str(e["shape"])), e["dtype"]))
    problems = []
    for e in order:
        key = _entry_key(e)
        try:
            p = (cache or {}).get(key) or _problem_from_entry(tiles, e)
        except Exception as err:
            raise ValueError(f"problem {key} of the log: cannot rebuild its graph or config features: "
                             f"{type(err).__name__}: {err}") from err
        if p is not None:
            problems.append(p)
    return from_problems(problems, source="tpucost", device=dev or {},
                         config_feature_names=tuple(tiles.CONFIG_FEATURE_NAMES))


def _build_and_save(out: Path, entries: Sequence[Mapping[str, Any]], dev: dict[str, Any] | None, call: str,
                    roots: Sequence[Path], cache: dict[str, TileProblem] | None = None) -> TileDataset:
    ds = _build(entries, dev or {}, cache)
    save_tile_dataset(ds, out)
    _write_text_atomic(out / PROVENANCE_FILE, _provenance(ds, entries, call, roots))
    return load_tile_dataset(out)


def _provenance(ds: TileDataset, entries: Sequence[Mapping[str, Any]], call: str, roots: Sequence[Path]) -> str:
    st = stats(ds)
    starts = [e for e in entries if e.get("status") == "start"]
    measured = [e for e in entries if e.get("status") in ("ok", "error", "skipped")]
    count = lambda s: sum(e.get("status") == s for e in measured)  # noqa: E731
    wall = sum(float(e.get("wall_s") or 0) for e in measured)
    loads = [e["load_average"] for e in measured if e.get("load_average") is not None]
    lines = [
        "# Tile data set provenance",
        "",
        f"Written by `tpucost.tile_data.{call}` on {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}, "
        f"host `{platform.node()}`, Python {platform.python_version()}.",
        "",
        f"- command line: `{' '.join(sys.argv)}`",
        f"- device: {device.describe(ds.device) if ds.device.get('id') else ds.device.get('name', 'unrecorded')}",
        f"- from: {', '.join(f'`{r}`' for r in roots)}",
        f"- problems: {st['problems']} ({', '.join(f'{k} {v}' for k, v in st['problems_per_family'].items())}); "
        f"configurations: {st['configs']} (per problem min {st['configs_per_problem']['min']}, "
        f"median {st['configs_per_problem']['median']}, max {st['configs_per_problem']['max']})",
        f"- log: {count('ok')} problems measured, {count('error')} errors, {count('skipped')} without a legal "
        f"config; {wall:.0f} s measuring; load average median "
        f"{float(np.median(loads)) if loads else float('nan'):.2f}, max {max(loads) if loads else float('nan'):.2f}",
        "- runs (the log's start lines):",
    ]
    for s in starts:
        params = {k: s.get(k) for k in ("n_problems", "seed", "shard", "families", "dtypes", "max_configs", "repeats",
                                        "todo", "already_done", "device_id")}
        when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(s["time"])) if s.get("time") else "?"
        lines.append(f"  - {when}: `{' '.join(s.get('argv') or [])}` {json.dumps(params)}")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------ TpuGraphs


def _tpugraphs_family(stem: str) -> str:
    """The model part of a TpuGraphs tile file name: ``alexnet_train_batch_32_-1bae27a41d70f4a7`` ->
    ``alexnet_train_batch_32`` (the stem itself when it has no trailing hash)."""
    m = re.match(r"^(.*?)_-?[0-9a-f]{8,}$", stem)
    return m.group(1) if m and m.group(1) else stem


def from_tpugraphs(directory: str | os.PathLike, limit: int | None = None,
                   family: str | None = "tpugraphs") -> TileDataset:
    """The TpuGraphs tile files of ``directory`` (``tpugraphs.read_tile_dir``) as a `TileDataset`.

    One problem per file: ``shape`` is the file stem, ``dtype`` ``""``, ``family`` the given name
    (``None``: the model name parsed from the stem, e.g. ``alexnet_train_batch_32``, for splits
    by model), configs ``{"config": j}`` (TpuGraphs gives no block sizes), the 24 published config
    features, runtimes from ``config_runtime``. Configs with a runtime of 0 are dropped, and files
    left without one. ``source="tpugraphs"``, ``device={"name": "TPU v3 (TpuGraphs)"}``. The 140
    node features and opcode ids are TpuGraphs' own (see `tpucost.tpugraphs`).
    """
    problems = []
    for k in tpugraphs.read_tile_dir(directory, limit):
        keep = np.flatnonzero(k.runtimes_ns > 0)
        if not len(keep):
            continue
        problems.append(TileProblem(family if family is not None else _tpugraphs_family(k.name), k.name, "", k.graph,
                                    [{"config": int(j)} for j in keep], k.tile_configs[keep],
                                    k.runtimes_ns[keep].astype(np.float64)))
    return from_problems(problems, source="tpugraphs", device=TPUGRAPHS_DEVICE,
                         config_feature_names=tpugraphs_config_feature_names(),
                         config_keys=("config",))


# -------------------------------------------------------------------------------------- splits


#: The split of problems into train/val/test parts (`tpucost.data.Split`; here ``*_programs`` are
#: problem ids and ``train``/``val``/``test`` problem indices).
Split = data.Split
#: The names `split` knows.
SPLITS: tuple[str, ...] = ("random", "hard")


def split(ds: TileDataset, name: str, seed: int = 0) -> Split:
    """The split called ``name``: ``"random"`` (`split_random` with ``seed``) or ``"hard"`` (`split_hard`)."""
    if name == "random":
        return split_random(ds, seed=seed)
    if name == "hard":
        return split_hard(ds)
    raise ValueError(f"unknown split {name!r}; expected one of {SPLITS}")


def split_random(ds: TileDataset, seed: int = 0, fractions: Sequence[float] = (0.8, 0.1, 0.1)) -> data.Split:
    """Problems shuffled with ``seed`` and cut by ``fractions`` (each problem in one part).

    Returns a `tpucost.data.Split`: ``train_programs``/... are sorted problem ids, ``train``/...
    sorted problem indices. With at least three problems, a part with a non-zero fraction gets at
    least one.
    """
    if len(fractions) != 3 or min(fractions) < 0 or not np.isclose(sum(fractions), 1.0):
        raise ValueError(f"fractions must be 3 non-negative numbers summing to 1, got {fractions}")
    perm = np.random.default_rng(seed).permutation(len(ds))
    part = np.empty(len(ds), np.int64)
    for j, chunk in enumerate(np.split(perm, data._cuts(len(ds), fractions))):
        part[chunk] = j
    return _split(ds, part)


def split_hard(ds: TileDataset, test_families: Sequence[str] = HARD_TEST_FAMILIES,
               val_families: Sequence[str] = HARD_VAL_FAMILIES) -> data.Split:
    """Whole families held out: problems of ``test_families`` are test, of ``val_families`` val.

    Every named family must occur in ``ds`` (ValueError listing the families it has).
    """
    present = set(ds.family.tolist())
    missing = [f for f in (*test_families, *val_families) if f not in present]
    if missing:
        raise ValueError(f"families {missing} are not in this tile data set (it has {sorted(present)})")
    if set(test_families) & set(val_families):
        raise ValueError(f"a family cannot be both test and validation: {sorted(set(test_families) & set(val_families))}")
    part = np.where(np.isin(ds.family, list(test_families)), 2, np.where(np.isin(ds.family, list(val_families)), 1, 0))
    return _split(ds, part.astype(np.int64))


def _split(ds: TileDataset, part: np.ndarray) -> data.Split:
    ids = ds.problem_id
    idx = [np.flatnonzero(part == j) for j in range(3)]
    return data.Split(*(np.sort(ids[i]) for i in idx), *idx)


# --------------------------------------------------------------------------------------- stats


def _summary(values: np.ndarray) -> dict[str, float | None]:
    if not len(values):
        return {"min": None, "median": None, "max": None}
    cast = int if np.issubdtype(np.asarray(values).dtype, np.integer) else float
    return {"min": cast(np.min(values)), "median": float(np.median(values)), "max": cast(np.max(values))}


def stats(ds: TileDataset) -> dict[str, Any]:
    """Summary for the CLI: counts per family, configs per problem, runtimes, best/worst spread.

    ``best_over_worst`` summarises, over problems, the slowest config's runtime over the fastest's
    (how much choosing the tile matters).
    """
    fam, counts = np.unique(ds.family.astype(str), return_counts=True)
    cfg_fam = ds.family[ds.config_problem] if ds.num_configs else np.zeros(0, str)
    per = ds.configs_per_problem
    spread = np.array([ds.runtime_ns(i).max() / ds.runtime_ns(i).min() for i in range(len(ds))])
    return {
        "source": ds.source,
        "problems": len(ds),
        "configs": ds.num_configs,
        "problems_per_family": {str(f): int(c) for f, c in zip(fam, counts, strict=True)},
        "configs_per_family": {str(f): int(np.sum(cfg_fam == f)) for f in fam},
        "configs_per_problem": _summary(per),
        "runtime_ns": _summary(ds.config_runtime_ns),
        "best_over_worst": _summary(spread),
        "nodes_per_graph": _summary(np.diff(ds.node_offsets)),
        "num_config_features": ds.num_config_features,
        "num_node_features": ds.num_node_features,
        "device": ds.device,
    }


# --------------------------------------------------------------------------------- noise floor

#: File of a tile data set folder holding its noise floor (`measure_tile_noise`).
NOISE_FILE = "noise.json"


def measure_tile_noise(out_dir: str | os.PathLike, sample: int = 20, seed: int = 0, repeats: int = 5,
                       progress: bool = True) -> dict[str, Any]:
    """Measure ``sample`` problems of a collected folder a second time; write and return ``noise.json``.

    The noise floor of the ranking metrics: Kendall's tau and top-k slowdown of the first
    measurement used as a "model" of the second. No model can agree with a measurement much better
    than a second measurement does. Must run on the device that collected the folder (same
    ``device.json`` id), in the same label mode, on a quiet machine.
    """
    from tqdm import tqdm

    from tpucost import evaluate

    out = Path(out_dir)
    ds = load_tile_dataset(out)
    fp = device.fingerprint()
    if ds.device.get("id") != fp["id"]:
        raise ValueError(f"{out / DEVICE_FILE}: measured on {device.describe(ds.device)}, this is "
                         f"{device.describe(fp)}: a noise floor needs the same device")
    tiles = _tiles()
    rng = np.random.default_rng(seed)
    chosen = np.sort(rng.choice(len(ds), size=min(sample, len(ds)), replace=False))
    first, second, rows = [], [], []
    for i in tqdm(chosen, disable=not progress, desc="noise", unit="problem"):
        i = int(i)
        again = np.asarray(tiles.measure_configs(str(ds.family[i]), tiles.parse_shape(str(ds.family[i]), str(ds.shape[i])),
                                                 str(ds.dtype[i]), ds.configs(i), repeats=repeats), np.float64)
        first.append(ds.runtime_ns(i))
        second.append(again)
        rows.append({"problem": str(ds.problem_id[i]), "median_ratio": float(np.median(again / ds.runtime_ns(i)))})
    metrics = evaluate.ranking_metrics(first, second)
    report = {**metrics, "device_id": fp["id"], "sample": len(chosen), "seed": seed, "repeats": repeats,
              "load_average": collect._load_average(), "time": time.time(), "problems": rows}
    data.write_text_atomic(out / NOISE_FILE, json.dumps(report, indent=2) + "\n")
    return report


def noise_floor(ds: TileDataset) -> dict[str, Any] | None:
    """The ranking metrics of a second measurement against the first (``noise.json`` of the data
    set's folder, `measure_tile_noise`), or None when the folder has none."""
    if ds.root is None or not (Path(ds.root) / NOISE_FILE).is_file():
        return None
    report = _read_json(Path(ds.root) / NOISE_FILE)
    return {k: report[k] for k in ("kendall_mean", "top1", "top5", "top10", "n_kernels") if k in report}


def family_table(ds: TileDataset) -> Any:
    """One row per family: problems, configurations, median runtime (ms) and the median over its
    problems of slowest / fastest configuration (a pandas DataFrame, for notebooks)."""
    import pandas as pd

    rows: dict[str, dict[str, list[float]]] = {}
    for i in range(len(ds)):
        r = ds.runtime_ns(i)
        row = rows.setdefault(str(ds.family[i]), {"configs": [], "runtime": [], "spread": []})
        row["configs"].append(len(r))
        row["runtime"].extend(r.tolist())
        row["spread"].append(float(r.max() / r.min()))
    return pd.DataFrame({family: {"problems": len(v["configs"]), "configurations": int(sum(v["configs"])),
                                  "median runtime (ms)": float(np.median(v["runtime"]) / 1e6),
                                  "median slowest / fastest": float(np.median(v["spread"]))}
                         for family, v in rows.items()}).T
