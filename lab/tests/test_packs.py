"""Tests of lab.packs: the device packs, their counts, the noise gate and ``data packs``."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from lab import cli, descriptor, packs
from tpucost import files
from tpucost.experiments.data import kernel as kernel_data
from tpucost.method import features
from tpucost.method.features import KernelGraph

#: The first pack's device: the host that measured the bundled kernels_cpu (its device.json).
FIRST_PACK_DEVICE = "be3048b01916"
DEVICE = {
    "id": "0123456789ab",
    "backend": "cpu",
    "cpu_model": "Test CPU",
    "cpu_isa": ["avx2"],
    "jaxlib": "0.0",
}
#: The fields the "Done when" of issue 40 names, and those the listing adds.
REQUIRED = {"device_id", "kernels", "kernels_by_others", "noise", "passes_gate"}
LISTED = REQUIRED | {
    "path",
    "cpu_model",
    "cpu_isa",
    "jaxlib",
    "label_mode",
    "has_descriptor",
    "families",
    "programs",
    "size_bytes",
}


def _noise(median: float | None = 0.02, p90: float | None = 0.1, n: int = 72) -> dict:
    return {"median_rel_ge5us": median, "p90_rel_ge5us": p90, "n_ge5us": n, "rows": []}


def _graph(rng: np.random.Generator, n: int, name: str) -> KernelGraph:
    edges = np.array([(i, i + 1) for i in range(n - 1)], np.int32).reshape(-1, 2)
    return KernelGraph(
        rng.integers(0, 50, n).astype(np.int32),
        rng.normal(size=(n, features.NUM_NODE_FEATURES)).astype(np.float32),
        edges[:, 0].copy(),
        edges[:, 1].copy(),
        name,
        "kLoop",
    )


def _program(program: str, family: str, graphs: list[KernelGraph]) -> kernel_data.KernelDataset:
    meta = {
        "program_id": program,
        "family": family,
        "form": "forward",
        "configuration": "default",
        "backend": "cpu",
        "device_kind": "cpu",
        "jax_version": "0.0",
    }
    return kernel_data.from_graphs(graphs, [100.0] * len(graphs), [1] * len(graphs), meta)


def _dataset(seed: int = 0) -> kernel_data.KernelDataset:
    """Two programs written here (mlp, cnn) and one written by others (keras_vgg): 7 distinct kernels.
    ``shared`` runs first in mlp, then in keras_vgg (its first occurrence's family is mlp);
    ``here`` runs in mlp and cnn only; ``a`` and ``b`` in keras_vgg only."""
    rng = np.random.default_rng(seed)
    shared, here = _graph(rng, 4, "shared"), _graph(rng, 3, "here")
    mlp = _program("mlp-forward-0-0", "mlp", [shared, here, _graph(rng, 2, "m")])
    cnn = _program("cnn-forward-0-1", "cnn", [here, _graph(rng, 5, "c1"), _graph(rng, 6, "c2")])
    vgg = _program("keras_vgg-forward-0-2", "keras_vgg", [shared, _graph(rng, 3, "a"), _graph(rng, 4, "b")])
    ds = kernel_data.dedup(kernel_data.concat([mlp, cnn, vgg]))
    return dataclasses.replace(ds, device=DEVICE)


def _pack(folder: Path, noise: dict | None = None, seed: int = 0) -> Path:
    kernel_data.save_dataset(_dataset(seed), folder)
    files.write_json_atomic(folder / kernel_data.NOISE_FILE, _noise() if noise is None else noise)
    return folder


def test_kernels_by_others_counts_every_source_of_a_kernel(tmp_path):
    ds = _dataset()
    counts = packs.pack_counts(ds)
    # shared (first seen in mlp, also in keras_vgg), a and b: the family of the first occurrence would say 2
    assert counts == {"kernels": 7, "kernels_by_others": 3, "families": 3, "programs": 3}
    here_only = ds.subset(np.flatnonzero(ds.family != "keras_vgg"))
    assert packs.pack_counts(here_only)["kernels"] == 5
    summary = packs.summarize_pack(_pack(tmp_path / "pack"))
    assert (summary.device_id, summary.kernels, summary.kernels_by_others) == (DEVICE["id"], 7, 3)
    assert (summary.families, summary.programs, summary.cpu_model, summary.cpu_isa) == (
        3,
        3,
        "Test CPU",
        ["avx2"],
    )
    assert summary.passes_gate and not summary.has_descriptor
    assert summary.size_bytes == sum(f.stat().st_size for f in (tmp_path / "pack").iterdir())


def test_gate_thresholds():
    assert (packs.GATE.min_ns, packs.GATE.max_median_rel, packs.GATE.max_p90_rel) == (5_000.0, 0.05, 0.25)
    gate = packs.passes_gate
    assert gate(packs.PackNoise(0.049, 0.2, 72, "single"))
    assert not gate(packs.PackNoise(0.051, 0.2, 72, "single"))
    assert gate(packs.PackNoise(0.02, 0.249, 72, "single"))
    assert not gate(packs.PackNoise(0.02, 0.251, 72, "single"))
    assert not gate(packs.PackNoise(0.02, 0.1, packs.GATE.min_kernels - 1, "single"))
    assert gate(packs.PackNoise(0.02, 0.1, packs.GATE.min_kernels, "single"))
    assert not gate(packs.PackNoise(None, None, 0, "single")) and not gate(None)


def test_a_pack_at_the_gates_edges(tmp_path):
    assert packs.summarize_pack(_pack(tmp_path / "a", _noise(median=0.049))).passes_gate
    assert not packs.summarize_pack(_pack(tmp_path / "b", _noise(median=0.051))).passes_gate
    assert not packs.summarize_pack(_pack(tmp_path / "c", _noise(p90=0.251))).passes_gate
    (tmp_path / "c" / kernel_data.NOISE_FILE).unlink()
    summary = packs.summarize_pack(tmp_path / "c")
    assert summary.noise is None and not summary.passes_gate


def test_start_and_end_noise_takes_the_worse(tmp_path):
    folder = _pack(tmp_path / "p", {"start": _noise(0.01, 0.1, 50), "end": _noise(0.06, 0.12, 40)})
    noise = packs.read_noise(folder)
    assert noise == packs.PackNoise(0.06, 0.12, 40, "end")
    assert not packs.summarize_pack(folder).passes_gate
    files.write_json_atomic(
        folder / kernel_data.NOISE_FILE, {"start": _noise(0.03, 0.2, 50), "end": _noise()}
    )
    assert packs.read_noise(folder) == packs.PackNoise(0.03, 0.2, 50, "start")
    assert packs.summarize_pack(folder).passes_gate
    files.write_json_atomic(folder / kernel_data.NOISE_FILE, {"start": _noise(0.03, 0.2, 50)})
    assert packs.read_noise(folder).measurement == "start"


@pytest.mark.parametrize(
    ("noise", "field"),
    [
        ({**_noise(), "median_rel_ge5us": "1%"}, "'median_rel_ge5us'"),
        ({**_noise(), "p90_rel_ge5us": -0.1}, "'p90_rel_ge5us'"),
        ({"median_rel_ge5us": 0.01, "p90_rel_ge5us": 0.1}, "'n_ge5us'"),
        ({**_noise(), "n_ge5us": True}, "'n_ge5us'"),
        ({"start": _noise(), "end": [1]}, "'end'"),
        ({"start": _noise(), "end": {**_noise(), "n_ge5us": -1}}, "'end.n_ge5us'"),
        ({"start": {**_noise(), "median_rel_ge5us": None}}, "'start.median_rel_ge5us'"),
    ],
)
def test_malformed_noise_names_file_and_field(tmp_path, noise, field):
    folder = _pack(tmp_path / "p", noise)
    with pytest.raises(ValueError, match=f"noise.json: field {field}"):
        packs.summarize_pack(folder)


def test_missing_or_malformed_files_are_named(tmp_path):
    folder = _pack(tmp_path / "p")
    (folder / kernel_data.NOISE_FILE).write_text("{not json")
    with pytest.raises(ValueError, match="noise.json: not JSON"):
        packs.summarize_pack(folder)
    (folder / kernel_data.NOISE_FILE).unlink()
    files.write_json_atomic(folder / "device.json", {**DEVICE, "id": 7})
    with pytest.raises(ValueError, match="device.json: field 'id'"):
        packs.summarize_pack(folder)
    files.write_json_atomic(folder / "device.json", {**DEVICE, "id": "another"})
    with pytest.raises(ValueError, match="device.json: field 'id': 'another', but schema.json"):
        packs.summarize_pack(folder)
    (folder / "device.json").unlink()
    with pytest.raises(ValueError, match="device.json: missing"):
        packs.summarize_pack(folder)
    with pytest.raises(ValueError, match="schema.json: missing"):
        packs.summarize_pack(tmp_path / "nothing")
    folder = _pack(tmp_path / "q")
    (folder / "kernels-00000.npz").unlink()
    with pytest.raises(ValueError, match="kernels-00000.npz"):
        packs.summarize_pack(folder)


def _descriptor(device_id: str) -> descriptor.DeviceDescriptor:
    return descriptor.DeviceDescriptor(
        device_id=device_id,
        backend="cpu",
        cores=1,
        cpu_isa=("avx2",),
        peak_f32_flops=1e11,
        peak_bf16_flops=5e10,
        bandwidth_bytes_per_s={level: 1e10 for level in descriptor.LEVELS},
        transcendentals_per_s=1e9,
        dispatch_ns=1500.0,
        label_mode="one kernel at a time on one core",
        seconds=42.0,
    )


def test_a_pack_has_a_descriptor_of_its_own_device(tmp_path):
    folder = _pack(tmp_path / "p")
    path = folder / descriptor.DESCRIPTOR_FILE
    descriptor.write_descriptor(_descriptor(DEVICE["id"]), path)
    assert packs.summarize_pack(folder).has_descriptor
    descriptor.write_descriptor(_descriptor("another"), path)
    with pytest.raises(ValueError, match="descriptor.json: field 'device_id': 'another'"):
        packs.summarize_pack(folder)
    files.write_json_atomic(path, {**_descriptor(DEVICE["id"]).to_dict(), "dispatch_ns": "fast"})
    with pytest.raises(ValueError, match="descriptor.json.*dispatch_ns"):
        packs.summarize_pack(folder)


def test_pack_file_is_used_only_while_the_shards_are_the_same(tmp_path):
    folder = _pack(tmp_path / "p")
    path = packs.write_pack_file(folder)
    assert path == folder / packs.PACK_FILE
    assert packs.summarize_pack(folder) == packs.summarize_pack(folder, use_cache=False)
    cached = files.read_json_object(path)
    files.write_json_atomic(path, {**cached, "kernels_by_others": 5})  # the cache is what is read
    assert packs.summarize_pack(folder).kernels_by_others == 5
    assert packs.summarize_pack(folder, use_cache=False).kernels_by_others == 3
    files.write_json_atomic(path, {**cached, "written_by_others": ["mlp"]})  # counted with other families
    assert packs.summarize_pack(folder).kernels_by_others == 3
    files.write_json_atomic(path, {**cached, "kernels_by_others": 5})
    kernel_data.save_dataset(_dataset(seed=1), folder)  # other kernels: the cache is stale
    assert packs.summarize_pack(folder).kernels_by_others == 3
    files.write_json_atomic(path, {**cached, "format_version": 99})
    with pytest.raises(ValueError, match="pack.json: field 'format'"):
        packs.summarize_pack(folder)


def test_bundled_packs_start_with_the_first_pack(monkeypatch, tmp_path):
    monkeypatch.delenv(files.DATA_DIR_ENV, raising=False)
    assert packs.bundled_packs()[0] == kernel_data.default_data_dir()
    first = packs.list_packs()[0]
    schema = files.read_json_object(kernel_data.default_data_dir() / kernel_data.SCHEMA_FILE)
    assert first.device_id == FIRST_PACK_DEVICE == schema["device"]["id"]
    assert first.kernels == schema["kernels"] and first.passes_gate
    noise = files.read_json_object(first.path / kernel_data.NOISE_FILE)
    fields = ("median_rel_ge5us", "p90_rel_ge5us", "n_ge5us")
    assert first.noise == packs.PackNoise(*(noise[f] for f in fields), "single")
    monkeypatch.setenv(files.DATA_DIR_ENV, str(tmp_path))  # later packs: packs/<device_id>/, sorted
    for name in ("zz", "aa"):
        _pack(tmp_path / packs.PACKS_DIR / name)
    (tmp_path / packs.PACKS_DIR / "empty").mkdir()
    _pack(tmp_path / kernel_data.BUNDLED_NAME)
    assert packs.bundled_packs() == [
        tmp_path / kernel_data.BUNDLED_NAME,
        tmp_path / packs.PACKS_DIR / "aa",
        tmp_path / packs.PACKS_DIR / "zz",
    ]


@pytest.mark.slow
def test_the_first_packs_cached_counts_match_its_data(monkeypatch):
    """``tpucost/bundled/kernels_cpu/pack.json`` (``python -m lab data packs --write
    tpucost/bundled/kernels_cpu``) holds the counts of the data set it sits beside."""
    monkeypatch.delenv(files.DATA_DIR_ENV, raising=False)
    folder = kernel_data.default_data_dir()
    ds = kernel_data.load_dataset(folder)
    cached = files.read_json_object(folder / packs.PACK_FILE)
    assert {
        k: cached[k] for k in ("kernels", "kernels_by_others", "families", "programs")
    } == packs.pack_counts(ds)
    assert packs.summarize_pack(folder) == packs.summarize_pack(folder, use_cache=False)
    assert packs.summarize_pack(folder).kernels == len(ds)


def test_data_packs_cli(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv(files.DATA_DIR_ENV, raising=False)
    folder = _pack(tmp_path / "p", _noise(median=0.051))
    assert cli.main(["data", "packs", "--json", str(folder)]) == 0
    (listed,) = json.loads(capsys.readouterr().out)
    assert set(listed) == LISTED and {"median_rel_ge5us", "p90_rel_ge5us", "n_ge5us"} <= set(listed["noise"])
    assert (listed["device_id"], listed["kernels_by_others"], listed["passes_gate"]) == (
        DEVICE["id"],
        3,
        False,
    )
    assert listed["noise"]["median_rel_ge5us"] == 0.051
    assert cli.main(["data", "packs", "--json"]) == 0
    bundled = json.loads(capsys.readouterr().out)
    assert bundled[0]["device_id"] == FIRST_PACK_DEVICE and all(set(p) == LISTED for p in bundled)
    assert cli.main(["data", "packs", "--write", str(folder)]) == 0
    out = capsys.readouterr().out
    assert DEVICE["id"] in out and "5.1%" in out and "fails" in out
    assert (folder / packs.PACK_FILE).is_file()
    (folder / kernel_data.NOISE_FILE).write_text('{"median_rel_ge5us": 0.01}')
    assert cli.main(["data", "packs", str(folder)]) == 2
    assert "noise.json: field 'n_ge5us'" in capsys.readouterr().err


def test_a_device_has_one_pack(tmp_path, monkeypatch):
    a, b = _pack(tmp_path / "a"), _pack(tmp_path / "b", seed=1)
    with pytest.raises(ValueError, match=r"a\b.* and .*b are packs of one device \(.*a device has one pack"):
        packs.list_packs([a, b])
    assert [s.path for s in packs.list_packs([a])] == [a] and packs.pack_device_id(a) == DEVICE["id"]
    monkeypatch.setenv(files.DATA_DIR_ENV, str(tmp_path / "bundled"))
    assert packs.bundled_pack_of(DEVICE["id"]) is None
    later = _pack(tmp_path / "bundled" / packs.PACKS_DIR / DEVICE["id"])
    assert packs.bundled_pack_of(DEVICE["id"]) == later and packs.bundled_pack_of("another") is None
    _pack(tmp_path / "bundled" / kernel_data.BUNDLED_NAME)  # a second bundled pack of that device
    with pytest.raises(ValueError, match="a device has one pack"):
        packs.list_packs()
