"""Tests of tpucost.experiments.tpugraphs: reading TpuGraphs tile npz files and refusing malformed ones."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from tpucost.experiments import tpugraphs
from tpucost.experiments.tpugraphs import TILE_FIELDS, TileKernel, read_tile_dir, read_tile_npz
from tpucost.method.features import featurize, to_graphs_tuple
from tpucost.method.hlo import parse_module
from tpucost.method.kernels import decompose

N, M, C = 5, 4, 3
NEGATE = "HloModule m\nENTRY %e (a: f32[4]) -> f32[4] {\n  %a = f32[4]{0} parameter(0)\n  ROOT %n = f32[4]{0} negate(%a)\n}\n"


def tile_arrays(seed: int = 0) -> dict[str, np.ndarray]:
    """A small kernel in the published format and dtypes."""
    rng = np.random.default_rng(seed)
    return {
        "node_feat": rng.normal(size=(N, 140)).astype(np.float32),
        "node_opcode": rng.integers(0, 120, size=N).astype(np.int32),
        # [u, v]: u consumes v's output. Nodes 0, 1 feed 2; 2 feeds 3 and 4.
        "edge_index": np.array([[2, 0], [2, 1], [3, 2], [4, 2]], dtype=np.int32),
        "config_feat": rng.normal(size=(C, 24)).astype(np.float32),
        "config_runtime": rng.integers(1_000, 1_000_000, size=C).astype(np.int64),
        "config_runtime_normalizers": np.full(C, 5_000, dtype=np.int64),
    }


def write(path: Path, arrays: dict[str, np.ndarray]) -> Path:
    np.savez(path, **arrays)
    return path


def test_read_back_exactly(tmp_path):
    arrays = tile_arrays()
    kernel = read_tile_npz(write(tmp_path / "alexnet_train_batch_32_-1bae27a41d70f4a7.npz", arrays))
    assert isinstance(kernel, TileKernel)
    assert kernel.name == "alexnet_train_batch_32_-1bae27a41d70f4a7" == kernel.graph.name
    assert kernel.graph.kind == "tpugraphs-tile"
    np.testing.assert_array_equal(kernel.graph.node_features, arrays["node_feat"])
    np.testing.assert_array_equal(kernel.graph.opcodes, arrays["node_opcode"])
    np.testing.assert_array_equal(kernel.graph.senders, arrays["edge_index"][:, 1])  # producers
    np.testing.assert_array_equal(kernel.graph.receivers, arrays["edge_index"][:, 0])  # consumers
    assert kernel.graph.senders.tolist() == [0, 1, 2, 2] and kernel.graph.receivers.tolist() == [2, 2, 3, 4]
    np.testing.assert_array_equal(kernel.tile_configs, arrays["config_feat"])
    np.testing.assert_array_equal(kernel.runtimes_ns, arrays["config_runtime"])
    np.testing.assert_array_equal(kernel.normalizers, arrays["config_runtime_normalizers"])
    assert kernel.graph.opcodes.dtype == np.int32 and kernel.graph.node_features.dtype == np.float32
    assert kernel.graph.senders.dtype == np.int32 and kernel.runtimes_ns.dtype == np.int64
    assert kernel.tile_configs.dtype == np.float32 and kernel.num_configs == C


def test_other_integer_widths_and_compression(tmp_path):
    arrays = tile_arrays()
    arrays["node_opcode"] = arrays["node_opcode"].astype(np.uint8)
    arrays["edge_index"] = arrays["edge_index"].astype(np.int64)
    path = tmp_path / "k.npz"
    np.savez_compressed(path, **arrays, extra_field=np.zeros(2))
    kernel = read_tile_npz(path)
    assert kernel.graph.opcodes.dtype == np.int32 and kernel.graph.senders.dtype == np.int32
    np.testing.assert_array_equal(kernel.graph.opcodes, arrays["node_opcode"])


def test_graphs_convert_to_a_graphs_tuple(tmp_path):
    kernels = [read_tile_npz(write(tmp_path / f"k{i}.npz", tile_arrays(i))) for i in range(2)]
    gt = to_graphs_tuple([k.graph for k in kernels])
    assert gt.nodes["features"].shape == (2 * N, 140) and gt.senders.tolist()[M:] == [5, 6, 7, 7]
    own = featurize(decompose(parse_module(NEGATE))[0])
    with pytest.raises(ValueError, match="feature layout"):
        to_graphs_tuple([kernels[0].graph, own])


def test_read_tile_dir_sorted_with_limit(tmp_path):
    for name in ("b", "c", "a"):
        write(tmp_path / f"{name}.npz", tile_arrays())
    (tmp_path / "notes.txt").write_text("not a tile file")
    assert [k.name for k in read_tile_dir(tmp_path)] == ["a", "b", "c"]
    assert [k.name for k in read_tile_dir(tmp_path, limit=2)] == ["a", "b"]
    assert list(read_tile_dir(tmp_path, limit=0)) == []
    with pytest.raises(NotADirectoryError):
        next(read_tile_dir(tmp_path / "missing"))


def _with(field: str, value) -> dict[str, np.ndarray]:
    arrays = tile_arrays()
    arrays[field] = value
    return arrays


def _without(field: str) -> dict[str, np.ndarray]:
    arrays = tile_arrays()
    del arrays[field]
    return arrays


def _object_array() -> np.ndarray:
    return np.array([1, "two", None, 4, 5], dtype=object)


MALFORMED = {
    **{f"missing {f}": (f, _without(f)) for f in TILE_FIELDS},
    "node_feat int": ("node_feat", _with("node_feat", np.zeros((N, 140), np.int32))),
    "node_opcode float": ("node_opcode", _with("node_opcode", np.zeros(N, np.float32))),
    "edge_index float": ("edge_index", _with("edge_index", np.zeros((M, 2), np.float32))),
    "config_feat int": ("config_feat", _with("config_feat", np.zeros((C, 24), np.int64))),
    "config_runtime float": ("config_runtime", _with("config_runtime", np.ones(C, np.float64))),
    "config_runtime_normalizers str": ("config_runtime_normalizers", _with("config_runtime_normalizers", np.array(["a"] * C))),
    "node_feat 139 columns": ("node_feat", _with("node_feat", np.zeros((N, 139), np.float32))),
    "node_feat 1-d": ("node_feat", _with("node_feat", np.zeros(N * 140, np.float32))),
    "node_feat NaN": ("node_feat", _with("node_feat", np.full((N, 140), np.nan, np.float32))),
    "node_feat no nodes": ("node_feat", _with("node_feat", np.zeros((0, 140), np.float32))),
    "node_opcode 2-d": ("node_opcode", _with("node_opcode", np.zeros((N, 1), np.int32))),
    "node_opcode short": ("node_opcode", _with("node_opcode", np.zeros(N - 1, np.int32))),
    "node_opcode negative": ("node_opcode", _with("node_opcode", np.full(N, -1, np.int32))),
    "edge_index 3 columns": ("edge_index", _with("edge_index", np.zeros((M, 3), np.int32))),
    "edge_index 1-d": ("edge_index", _with("edge_index", np.zeros(2 * M, np.int32))),
    "edge_index too large": ("edge_index", _with("edge_index", np.array([[2, 0], [2, N]], np.int32))),
    "edge_index negative": ("edge_index", _with("edge_index", np.array([[2, -1]], np.int32))),
    "config_feat 23 columns": ("config_feat", _with("config_feat", np.zeros((C, 23), np.float32))),
    "config_runtime 2-d": ("config_runtime", _with("config_runtime", np.ones((C, 1), np.int64))),
    "config_runtime short": ("config_runtime", _with("config_runtime", np.ones(C - 1, np.int64))),
    "config_runtime negative": ("config_runtime", _with("config_runtime", np.full(C, -5, np.int64))),
    "normalizers long": ("config_runtime_normalizers", _with("config_runtime_normalizers", np.ones(C + 1, np.int64))),
    "node_opcode pickled objects": ("node_opcode", _with("node_opcode", _object_array())),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_files_raise_value_error_naming_file_and_field(tmp_path, case):
    field, arrays = MALFORMED[case]
    path = write(tmp_path / "bad_kernel.npz", arrays)
    with pytest.raises(ValueError, match=re.escape(f"field {field!r}")) as info:
        read_tile_npz(path)
    assert "bad_kernel.npz" in str(info.value)


def test_not_an_npz_archive(tmp_path):
    garbage = tmp_path / "garbage.npz"
    garbage.write_bytes(b"this is not a zip archive at all")
    with pytest.raises(ValueError, match="garbage.npz"):
        read_tile_npz(garbage)
    npy = tmp_path / "plain.npz"
    with npy.open("wb") as fh:
        np.save(fh, np.zeros(3))
    with pytest.raises(ValueError, match="plain.npz"):
        read_tile_npz(npy)
    with pytest.raises(FileNotFoundError):
        read_tile_npz(tmp_path / "missing.npz")


UNPICKLED: list[str] = []


def _record_unpickling(tag: str) -> str:
    UNPICKLED.append(tag)
    return tag


class _Trap:
    """An object whose unpickling leaves a trace: loading it would run code from the file."""

    def __reduce__(self):
        return (_record_unpickling, ("unpickled",))


def test_allow_pickle_false_is_respected(tmp_path, monkeypatch):
    arrays = _with("config_feat", np.array([_Trap()] * C, dtype=object))
    path = write(tmp_path / "trap.npz", arrays)
    UNPICKLED.clear()
    with pytest.raises(
        ValueError,
        match=re.escape("field 'config_feat': Object arrays cannot be loaded when allow_pickle=False"),
    ):
        read_tile_npz(path)
    assert UNPICKLED == []

    calls = []
    real_load = np.load

    def spy(*args, **kwargs):
        calls.append(kwargs.get("allow_pickle"))
        return real_load(*args, **kwargs)

    monkeypatch.setattr(tpugraphs.np, "load", spy)
    read_tile_npz(write(tmp_path / "ok.npz", tile_arrays()))
    assert calls == [False]
