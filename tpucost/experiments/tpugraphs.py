"""Read the "tile" collection of the public TpuGraphs data set (Google, 2023).

TpuGraphs' tile collection holds one ``.npz`` file per TPU v3 kernel, with the measured runtimes
of many tile sizes of that kernel:

==============================  ==============  =========================================================
field                           shape, dtype    meaning
==============================  ==============  =========================================================
``node_feat``                   (n, 140) float  TpuGraphs' own per-node features
``node_opcode``                 (n,) int        TpuGraphs' own opcode ids
``edge_index``                  (m, 2) int      ``[u, v]``: node u consumes node v's output
``config_feat``                 (c, 24) float   features of each tile-size configuration
``config_runtime``              (c,) int        runtime of each configuration, in ns
``config_runtime_normalizers``  (c,) int        runtime of the default tile size (to normalize)
==============================  ==============  =========================================================

`read_tile_npz` returns a `TileKernel` whose ``graph`` is a `tpucost.method.features.KernelGraph` with
edges turned around to tpucost's producer -> consumer direction (sender v, receiver u).

Note: TpuGraphs' 140 node features and its opcode ids are *not* tpucost's feature layout
(`tpucost.method.features.NODE_FEATURE_NAMES`) or opcode vocabulary (`tpucost.method.features.OPCODE_VOCAB`).
The two kinds of `KernelGraph` fit the same model code, but a model must be trained and used on
one or the other, never a mix: `TILE_FEATURES` is the `tpucost.method.features.FeatureSpec` of these
graphs (tpucost's own is `tpucost.method.features.TPUCOST_FEATURES`), and models and checkpoints compare it.

Files are loaded with ``allow_pickle=False``; malformed files raise `ValueError` naming the file
and the field.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import numpy as np

from tpucost.files import check_array, read_npz
from tpucost.method.features import FeatureSpec, KernelGraph

__all__ = [
    "NUM_TILE_NODE_FEATURES",
    "NUM_TILE_CONFIG_FEATURES",
    "NUM_TILE_OPCODES",
    "TILE_FEATURES",
    "TILE_FIELDS",
    "TileKernel",
    "read_tile_npz",
    "read_tile_dir",
]

#: Width of ``node_feat`` in the published files.
NUM_TILE_NODE_FEATURES = 140
#: Width of ``config_feat`` in the published files.
NUM_TILE_CONFIG_FEATURES = 24
#: Size of TpuGraphs' opcode vocabulary (``node_opcode`` ids are below it).
NUM_TILE_OPCODES = 120
#: The feature spec of TpuGraphs tile graphs: their node features, opcode ids and config features.
TILE_FEATURES = FeatureSpec(
    "tpugraphs-tile-v0", NUM_TILE_NODE_FEATURES, NUM_TILE_OPCODES, NUM_TILE_CONFIG_FEATURES
)

# field -> (allowed dtype kinds, shape; None: any length)
_SPEC: dict[str, tuple[str, tuple[int | None, ...]]] = {
    "node_feat": ("f", (None, NUM_TILE_NODE_FEATURES)),
    "node_opcode": ("iu", (None,)),
    "edge_index": ("iu", (None, 2)),
    "config_feat": ("f", (None, NUM_TILE_CONFIG_FEATURES)),
    "config_runtime": ("iu", (None,)),
    "config_runtime_normalizers": ("iuf", (None,)),
}
#: The fields every tile file must hold.
TILE_FIELDS: tuple[str, ...] = tuple(_SPEC)


class TileKernel(NamedTuple):
    """One kernel of the TpuGraphs tile collection (``n`` nodes, ``m`` edges, ``c`` configs).

    Attributes:
      name: the file's stem (TpuGraphs' tile id).
      graph: the kernel graph: ``opcodes`` int32[n] (TpuGraphs' ids), ``node_features``
      float32[n, 140] (TpuGraphs' features), ``senders``/``receivers`` int32[m]
      (producer -> consumer), ``kind = "tpugraphs-tile"``.
      tile_configs: float32[c, 24], the features of each tile-size configuration.
      runtimes_ns: int64[c], measured runtime of each configuration.
      normalizers: the runtime of the default tile size per configuration, shape [c]
      (as stored: int64 in the published files).
    """

    name: str
    graph: KernelGraph
    tile_configs: np.ndarray
    runtimes_ns: np.ndarray
    normalizers: np.ndarray

    @property
    def num_configs(self) -> int:
        return int(self.runtimes_ns.shape[0])


def _bad(path: Path, field: str, message: str) -> ValueError:
    return ValueError(f"{path}: field {field!r}: {message}")


def _check(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """Every field present, of its kinds and shape (`tpucost.files.check_array`), and consistent."""
    for field, (kinds, shape) in _SPEC.items():
        if field not in arrays:
            raise _bad(path, field, f"missing (the file has {sorted(arrays)})")
        check_array(path, field, arrays[field], kinds, shape)
    n = arrays["node_feat"].shape[0]
    c = arrays["config_feat"].shape[0]
    if n == 0:
        raise _bad(path, "node_feat", "has no nodes")
    check_array(path, "node_opcode", arrays["node_opcode"], "iu", (n,))
    for field in ("config_runtime", "config_runtime_normalizers"):
        check_array(path, field, arrays[field], _SPEC[field][0], (c,))
    opcodes = arrays["node_opcode"]
    if opcodes.min() < 0 or opcodes.max() > np.iinfo(np.int32).max:
        raise _bad(path, "node_opcode", f"opcode ids out of range: min {opcodes.min()}, max {opcodes.max()}")
    edges = arrays["edge_index"]
    if edges.size and (edges.min() < 0 or edges.max() >= n):
        raise _bad(
            path, "edge_index", f"node index out of range [0, {n}): min {edges.min()}, max {edges.max()}"
        )
    for field in ("config_runtime", "config_runtime_normalizers"):
        if (arrays[field] < 0).any():
            raise _bad(path, field, "holds negative runtimes")


def read_tile_npz(path: str | Path) -> TileKernel:
    """Read and validate one tile file of TpuGraphs.

    Raises:
      FileNotFoundError: there is no file at `path`.
      ValueError: the file is not an npz archive, or a field is missing, of the wrong dtype
      kind or shape, stored as a pickled object array, or inconsistent with the others
      (lengths, edge indices outside ``[0, n)``); the message names the file and the field.
    """
    path = Path(path)
    arrays = read_npz(path)
    _check(path, arrays)
    edges = arrays["edge_index"].astype(np.int32)
    graph = KernelGraph(
        opcodes=arrays["node_opcode"].astype(np.int32),
        node_features=arrays["node_feat"].astype(np.float32),
        senders=edges[:, 1].copy(),  # v: the producer
        receivers=edges[:, 0].copy(),  # u: the consumer
        name=path.stem,
        kind="tpugraphs-tile",
    )
    return TileKernel(
        name=path.stem,
        graph=graph,
        tile_configs=arrays["config_feat"].astype(np.float32),
        runtimes_ns=arrays["config_runtime"].astype(np.int64),
        normalizers=arrays["config_runtime_normalizers"],
    )


def read_tile_dir(directory: str | Path, limit: int | None = None) -> Iterator[TileKernel]:
    """The tile files of `directory` (``*.npz``, sorted by name), at most `limit` of them.

    Raises:
      NotADirectoryError: `directory` is not a directory.
      ValueError: a file is malformed (see `read_tile_npz`).
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise NotADirectoryError(f"{directory} is not a directory")
    files = sorted(directory.glob("*.npz"))
    for path in files if limit is None else files[:limit]:
        yield read_tile_npz(path)
