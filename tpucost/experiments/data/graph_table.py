"""A table of many small graphs: the storage every tpucost data set is built on.

Graph ``g``'s nodes are rows ``node_offsets[g]:node_offsets[g + 1]`` of ``opcodes`` (int32[N]) and
``node_features`` (float32[N, F]); its edges are entries ``edge_offsets[g]:edge_offsets[g + 1]`` of
``senders`` and ``receivers`` (int32[M], node indices within the graph, producer -> consumer).
Besides the graphs a table holds

* ``columns``: one value per graph (arrays of length G: runtimes, names, families, ...);
* ``groups``: ragged lists per graph. A `Group` has offsets (int64[G + 1]) and columns over its
  rows: the kernel data set's sources (the programs a kernel ran in), the tile data set's
  configurations.

What columns and groups a data set has, and of which dtype, is its `TableSchema`. On disk a table
is one npz file: ``node_offsets``, ``edge_offsets``, ``opcodes``, ``node_features``, ``senders``,
``receivers``, each column under its name, and per group ``<group>_offsets`` and its columns.
`save` writes it atomically; `load` reads it with ``allow_pickle=False`` and checks it against the
schema (`check_table`): every field present, of its dtype and shape, offsets increasing from 0 to
their array's length, edges inside their graphs, floats finite. Every error is one line naming the
file and the field (the field checks are `tpucost.files.check_array` and `check_offsets`, which
the TpuGraphs reader uses too).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tpucost.files import check_array, check_offsets, read_npz, save_npz_atomic
from tpucost.method.features import KernelGraph

__all__ = [
    "Column",
    "TableSchema",
    "Group",
    "GraphTable",
    "GRAPH_FIELDS",
    "from_graphs",
    "concat",
    "save",
    "load",
    "check_table",
    "str_array",
    "offsets_from_lengths",
    "stack_rows",
]

#: The arrays of the graphs themselves, with their dtypes.
GRAPH_FIELDS: dict[str, str] = {
    "node_offsets": "i8",
    "edge_offsets": "i8",
    "opcodes": "i4",
    "node_features": "f4",
    "senders": "i4",
    "receivers": "i4",
}


@dataclasses.dataclass(frozen=True)
class Column:
    """One column of a table: its name, its dtype (``"U"`` unicode, or a numpy code such as
    ``"i8"``, ``"f4"``) and, for a 2-d column, the name of its width in the schema's widths."""

    name: str
    dtype: str
    width: str | None = None


@dataclasses.dataclass(frozen=True)
class TableSchema:
    """The columns (one value per graph) and groups (ragged rows per graph) of a data set."""

    columns: tuple[Column, ...]
    groups: Mapping[str, tuple[Column, ...]] = dataclasses.field(default_factory=dict)

    def field_names(self) -> list[str]:
        """Every array name of the npz layout."""
        names = [*GRAPH_FIELDS, *(c.name for c in self.columns)]
        for group, cols in self.groups.items():
            names += [f"{group}_offsets", *(c.name for c in cols)]
        return names


@dataclasses.dataclass(frozen=True, eq=False)
class Group:
    """Ragged rows per graph: graph ``g``'s rows are ``offsets[g]:offsets[g + 1]`` of every column."""

    offsets: np.ndarray
    columns: Mapping[str, np.ndarray]

    def rows(self, i: int) -> slice:
        return slice(int(self.offsets[i]), int(self.offsets[i + 1]))

    @property
    def owner(self) -> np.ndarray:
        """int64[R]: the graph of each row."""
        return np.repeat(np.arange(len(self.offsets) - 1, dtype=np.int64), np.diff(self.offsets))


@dataclasses.dataclass(frozen=True, eq=False)
class GraphTable:
    """G graphs in flat arrays with offsets, plus per-graph columns and ragged groups (module doc)."""

    node_offsets: np.ndarray
    edge_offsets: np.ndarray
    opcodes: np.ndarray
    node_features: np.ndarray
    senders: np.ndarray
    receivers: np.ndarray
    columns: Mapping[str, np.ndarray]
    groups: Mapping[str, Group] = dataclasses.field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.node_offsets.shape[0]) - 1

    @property
    def n_nodes(self) -> np.ndarray:
        """int64[G]: nodes per graph."""
        return np.diff(self.node_offsets)

    @property
    def n_edges(self) -> np.ndarray:
        """int64[G]: edges per graph."""
        return np.diff(self.edge_offsets)

    def graph(self, i: int, name: str = "", kind: str = "") -> KernelGraph:
        """Graph ``i`` as a `KernelGraph` (views into the arrays)."""
        n0, n1 = self.node_offsets[i], self.node_offsets[i + 1]
        e0, e1 = self.edge_offsets[i], self.edge_offsets[i + 1]
        return KernelGraph(
            self.opcodes[n0:n1],
            self.node_features[n0:n1],
            self.senders[e0:e1],
            self.receivers[e0:e1],
            name,
            kind,
        )

    def subset(self, indices: Sequence[int] | np.ndarray) -> GraphTable:
        """A new table of graphs ``indices`` (in that order), with their columns and group rows."""
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        take_n, node_offsets = _ragged_take(self.node_offsets, idx)
        take_e, edge_offsets = _ragged_take(self.edge_offsets, idx)
        groups = {}
        for name, g in self.groups.items():
            take, offsets = _ragged_take(g.offsets, idx)
            groups[name] = Group(offsets, {c: a[take] for c, a in g.columns.items()})
        return GraphTable(
            node_offsets,
            edge_offsets,
            self.opcodes[take_n],
            self.node_features[take_n],
            self.senders[take_e],
            self.receivers[take_e],
            {c: a[idx] for c, a in self.columns.items()},
            groups,
        )

    def with_columns(self, **columns: np.ndarray) -> GraphTable:
        """This table with ``columns`` replaced or added (each of length G)."""
        return dataclasses.replace(self, columns={**self.columns, **columns})

    def with_group(self, name: str, group: Group) -> GraphTable:
        """This table with group ``name`` replaced or added."""
        return dataclasses.replace(self, groups={**self.groups, name: group})

    def arrays(self) -> dict[str, np.ndarray]:
        """The npz layout: graph arrays, columns, and per group its offsets and columns."""
        out = {f: getattr(self, f) for f in GRAPH_FIELDS}
        out.update(self.columns)
        for name, g in self.groups.items():
            out[f"{name}_offsets"] = g.offsets
            out.update(g.columns)
        return out


def str_array(values: Iterable[Any]) -> np.ndarray:
    """A fixed-width unicode array (at least ``<U1``, so an empty array keeps a string dtype)."""
    values = [str(v) for v in values]
    width = max([len(v) for v in values] + [1])
    return np.array(values, dtype=f"<U{width}").reshape(len(values))


def offsets_from_lengths(lengths: Sequence[int] | np.ndarray) -> np.ndarray:
    """int64[len + 1]: 0 followed by the running sum of ``lengths``."""
    out = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(np.asarray(lengths, np.int64), out=out[1:])
    return out


def _ragged_take(offsets: np.ndarray, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(flat element indices, new offsets) selecting segments ``idx`` of a ragged array."""
    starts, lengths = offsets[idx], offsets[idx + 1] - offsets[idx]
    new_offsets = offsets_from_lengths(lengths)
    take = np.repeat(starts - new_offsets[:-1], lengths) + np.arange(new_offsets[-1], dtype=np.int64)
    return take, new_offsets


def stack_rows(arrays: Sequence[np.ndarray], dtype: str, trailing: tuple[int, ...] = ()) -> np.ndarray:
    """The rows of ``arrays`` (each reshaped to ``(-1, *trailing)``) stacked as ``dtype``; empty: zero rows."""
    if not arrays:
        return np.zeros((0, *trailing), dtype)
    return np.concatenate([np.asarray(a, dtype).reshape(-1, *trailing) for a in arrays])


def from_graphs(
    graphs: Sequence[KernelGraph],
    columns: Mapping[str, np.ndarray],
    groups: Mapping[str, Group] | None = None,
    num_node_features: int | None = None,
) -> GraphTable:
    """A table of ``graphs`` with the given per-graph ``columns`` and ``groups``.

    ``num_node_features`` gives the node feature width of an empty table (else the graphs' own).
    """
    width = (
        num_node_features
        if num_node_features is not None
        else (graphs[0].node_features.shape[1] if graphs else 0)
    )
    return GraphTable(
        offsets_from_lengths([g.num_nodes for g in graphs]),
        offsets_from_lengths([g.num_edges for g in graphs]),
        stack_rows([g.opcodes for g in graphs], "int32"),
        stack_rows([g.node_features for g in graphs], "float32", (width,)),
        stack_rows([g.senders for g in graphs], "int32"),
        stack_rows([g.receivers for g in graphs], "int32"),
        dict(columns),
        dict(groups or {}),
    )


def _cat(parts: Sequence[np.ndarray]) -> np.ndarray:
    if parts and parts[0].dtype.kind == "U":
        return str_array(np.concatenate([p.astype(str) for p in parts]).tolist())
    return np.concatenate(parts)


def concat(tables: Sequence[GraphTable]) -> GraphTable:
    """The graphs of ``tables`` in order, with their columns and groups (the same names in each)."""
    if not tables:
        raise ValueError("concat needs at least one table")
    first = tables[0]
    for t in tables[1:]:
        if set(t.columns) != set(first.columns) or set(t.groups) != set(first.groups):
            raise ValueError(
                f"tables with other columns or groups cannot be joined: {sorted(first.columns)} "
                f"and {sorted(t.columns)}"
            )
    joined = {
        f: np.concatenate([getattr(t, f) for t in tables]) for f in GRAPH_FIELDS if not f.endswith("offsets")
    }
    groups = {
        name: Group(
            offsets_from_lengths(np.concatenate([np.diff(t.groups[name].offsets) for t in tables])),
            {c: _cat([t.groups[name].columns[c] for t in tables]) for c in g.columns},
        )
        for name, g in first.groups.items()
    }
    return GraphTable(
        offsets_from_lengths(np.concatenate([t.n_nodes for t in tables])),
        offsets_from_lengths(np.concatenate([t.n_edges for t in tables])),
        **joined,
        columns={c: _cat([t.columns[c] for t in tables]) for c in first.columns},
        groups=groups,
    )


# ------------------------------------------------------------------------------------- on disk


def save(table: GraphTable, path: str | os.PathLike, extra: Mapping[str, np.ndarray] | None = None) -> Path:
    """Write ``table`` (and ``extra`` arrays, e.g. a format version) as one npz, atomically."""
    return save_npz_atomic(path, {**table.arrays(), **(extra or {})})


def load(path: str | os.PathLike, schema: TableSchema, widths: Mapping[str, int]) -> GraphTable:
    """Read an npz written by `save` and check it against ``schema`` (`check_table`)."""
    arrays = read_npz(path)
    table = from_arrays(arrays, schema, path)
    check_table(path, table, schema, widths)
    return table


def from_arrays(
    arrays: Mapping[str, np.ndarray], schema: TableSchema, path: Any = "<in memory>"
) -> GraphTable:
    """The table of the npz layout ``arrays``; ValueError naming ``path`` and a missing field."""
    for name in schema.field_names():
        if name not in arrays:
            raise ValueError(f"{path}: field {name!r}: missing")
    groups = {
        name: Group(arrays[f"{name}_offsets"], {c.name: arrays[c.name] for c in cols})
        for name, cols in schema.groups.items()
    }
    return GraphTable(
        *(arrays[f] for f in GRAPH_FIELDS),
        columns={c.name: arrays[c.name] for c in schema.columns},
        groups=groups,
    )


def _check_edges(path: Any, table: GraphTable) -> None:
    size = np.repeat(table.n_nodes, table.n_edges)
    for name in ("senders", "receivers"):
        ends = getattr(table, name)
        if len(ends) and (ends.min() < 0 or np.any(ends >= size)):
            raise ValueError(f"{path}: field {name!r}: node index outside its graph")
    if len(table.opcodes) and table.opcodes.min() < 0:
        raise ValueError(f"{path}: field 'opcodes': negative opcode ids")


def check_table(path: Any, table: GraphTable, schema: TableSchema, widths: Mapping[str, int]) -> None:
    """Every field of ``table`` as ``schema`` and ``widths`` (``num_node_features`` and the widths
    its 2-d columns name) say; ValueError naming ``path`` and the first bad field."""
    g = len(table)
    check_offsets(path, "node_offsets", table.node_offsets, g, len(table.opcodes), "opcodes")
    check_offsets(path, "edge_offsets", table.edge_offsets, g, len(table.senders), "senders")
    n, m = len(table.opcodes), len(table.senders)
    for name, shape in (
        ("opcodes", (n,)),
        ("node_features", (n, widths["num_node_features"])),
        ("senders", (m,)),
        ("receivers", (m,)),
    ):
        check_array(path, name, getattr(table, name), GRAPH_FIELDS[name], shape)
    _check_edges(path, table)
    for col in schema.columns:
        check_array(
            path, col.name, table.columns[col.name], col.dtype, (g, widths[col.width]) if col.width else (g,)
        )
    for name, cols in schema.groups.items():
        group = table.groups[name]
        rows = len(group.columns[cols[0].name]) if cols else 0
        check_offsets(path, f"{name}_offsets", group.offsets, g, rows, cols[0].name if cols else "")
        for col in cols:
            check_array(
                path,
                col.name,
                group.columns[col.name],
                col.dtype,
                (rows, widths[col.width]) if col.width else (rows,),
            )
