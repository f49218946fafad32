"""Tests of the device descriptor: its JSON, its features, its cache, a real measurement, the command."""

from __future__ import annotations

import dataclasses
import json
import math

import jax.numpy as jnp
import numpy as np
import pytest

from lab import descriptor
from lab.cli import main
from lab.descriptor import (
    DESCRIPTOR_FILE,
    FEATURE_NAMES,
    DeviceDescriptor,
    cache_sizes,
    load_or_measure,
    read_descriptor,
    working_sets,
    write_descriptor,
)
from tpucost.method import device

pytestmark = pytest.mark.core  # also run on Colab's versions (make test-colab): CostModel.load measures it


def example(device_id: str = "abc123def456", **changes) -> DeviceDescriptor:
    desc = DeviceDescriptor(
        device_id=device_id,
        backend="cpu",
        cores=2,
        cpu_isa=("avx2", "fma", "avx512f"),
        peak_f32_flops=1.0e11,
        peak_bf16_flops=2.0e11,
        bandwidth_bytes_per_s={"L1": 2.0e11, "L2": 1.0e11, "L3": 5.0e10, "DRAM": 1.0e10},
        transcendentals_per_s=1.0e9,
        dispatch_ns=5000.0,
        label_mode=device.LABEL_MODE,
        seconds=12.5,
        device_kind="cpu",
        cpu_model="Some CPU",
        cache_bytes={"L1": 32 << 10, "L2": 1 << 20, "L3": 32 << 20},
        working_set_bytes={"L1": 16 << 10, "L2": 512 << 10, "L3": 16 << 20, "DRAM": 128 << 20},
        jax_version="0.0.0",
    )
    return dataclasses.replace(desc, **changes)


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TPUCOST_CACHE_DIR", str(tmp_path / "cache"))


def test_round_trip_through_dict_and_file(tmp_path):
    desc = example()
    assert DeviceDescriptor.from_dict(json.loads(json.dumps(desc.to_dict()))) == desc
    write_descriptor(desc, tmp_path / "pack" / DESCRIPTOR_FILE)
    assert read_descriptor(tmp_path / "pack" / DESCRIPTOR_FILE) == desc


def test_accelerator_levels_may_be_null():
    desc = example(backend="tpu", bandwidth_bytes_per_s={"L1": None, "L2": None, "L3": None, "DRAM": 8e11})
    assert DeviceDescriptor.from_dict(desc.to_dict()) == desc


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("cores", 0),
        ("cores", "two"),
        ("peak_f32_flops", -1.0),
        ("peak_bf16_flops", "fast"),
        ("dispatch_ns", float("nan")),
        ("device_id", 7),
        ("cpu_isa", "avx2"),
        ("bandwidth_bytes_per_s", {"L1": 1.0, "DRAM": 2.0}),
        ("version", 99),
    ],
)
def test_bad_input_names_the_source_and_field(field, value):
    d = example().to_dict()
    d[field] = value
    with pytest.raises(ValueError, match=rf"^pack/descriptor.json: field '{field}'"):
        DeviceDescriptor.from_dict(d, source="pack/descriptor.json")


def test_bad_level_value_and_missing_field_are_named():
    d = example().to_dict()
    d["bandwidth_bytes_per_s"]["L2"] = "quick"
    with pytest.raises(ValueError, match=r"field 'bandwidth_bytes_per_s.L2'"):
        DeviceDescriptor.from_dict(d)
    d = example().to_dict()
    del d["transcendentals_per_s"]
    with pytest.raises(ValueError, match=r"field 'transcendentals_per_s': missing"):
        DeviceDescriptor.from_dict(d)


def test_unreadable_file_names_it(tmp_path):
    path = tmp_path / DESCRIPTOR_FILE
    path.write_text("[1, 2]")
    with pytest.raises(ValueError, match=str(path)):
        read_descriptor(path)


def test_features_are_finite_in_order_and_scaled():
    f = example().features()
    assert f.dtype == np.float32 and f.shape == (len(FEATURE_NAMES),)
    assert np.all(np.isfinite(f))
    named = dict(zip(FEATURE_NAMES, f.tolist(), strict=True))
    assert named["log10_peak_f32_gflops"] == pytest.approx(2.0)  # 100 GFLOP/s
    assert named["log10_peak_bf16_gflops"] == pytest.approx(math.log10(200.0))
    assert named["log10_bandwidth_l1_gbytes"] == pytest.approx(math.log10(200.0))
    assert named["log10_bandwidth_dram_gbytes"] == pytest.approx(1.0)
    assert named["log10_exp_per_ns"] == pytest.approx(0.0)
    assert named["log10_dispatch_us"] == pytest.approx(math.log10(5.0))
    assert (named["isa_avx2"], named["isa_avx512f"], named["isa_amx"]) == (1.0, 1.0, 0.0)
    assert named["log2_cores"] == pytest.approx(1.0)
    assert FEATURE_NAMES.index("log2_cores") == len(FEATURE_NAMES) - 1


def test_missing_values_take_the_documented_defaults():
    desc = example(
        peak_bf16_flops=0.0,
        bandwidth_bytes_per_s={"L1": 2e11, "L2": None, "L3": None, "DRAM": 1e10},
        transcendentals_per_s=0.0,
    )
    named = dict(zip(FEATURE_NAMES, desc.features().tolist(), strict=True))
    assert named["log10_peak_bf16_gflops"] == named["log10_peak_f32_gflops"]
    assert named["log10_bandwidth_l2_gbytes"] == named["log10_bandwidth_l3_gbytes"] == pytest.approx(1.0)
    assert named["log10_exp_per_ns"] == 0.0
    assert np.all(np.isfinite(desc.features()))


def test_cache_sizes_from_sysfs_and_defaults(tmp_path):
    for i, (level, kind, size) in enumerate(
        [(1, "Data", "48K"), (1, "Instruction", "32K"), (2, "Unified", "2048K")]
    ):
        folder = tmp_path / f"index{i}"
        folder.mkdir()
        (folder / "level").write_text(f"{level}\n")
        (folder / "type").write_text(f"{kind}\n")
        (folder / "size").write_text(f"{size}\n")
    assert cache_sizes(tmp_path) == {"L1": 48 << 10, "L2": 2 << 20, "L3": None}
    assert cache_sizes(tmp_path / "missing") == descriptor.DEFAULT_CACHE_BYTES
    sets = working_sets(cache_sizes(tmp_path))
    assert sets == {"L1": 24 << 10, "L2": 1 << 20, "L3": None, "DRAM": 64 << 20}


def _count_measurements(monkeypatch) -> list[float]:
    calls: list[float] = []

    def fake(budget_s: float = 60.0) -> DeviceDescriptor:
        calls.append(budget_s)
        fp = device.fingerprint()
        return example(device_id=fp["id"], label_mode=fp["label_mode"])

    monkeypatch.setattr(descriptor, "measure_descriptor", fake)
    return calls


def test_the_cache_is_used_on_the_second_call(monkeypatch):
    calls = _count_measurements(monkeypatch)
    first = load_or_measure()
    second = load_or_measure()
    assert len(calls) == 1 and first == second
    assert descriptor.descriptor_cache_path(device.fingerprint()).is_file()
    load_or_measure(force=True)
    assert len(calls) == 2


def test_the_cache_is_kept_per_device_id(monkeypatch, tmp_path):
    calls = _count_measurements(monkeypatch)
    path = tmp_path / "one.json"
    here = load_or_measure(path)
    other = dict(device.fingerprint(), id="0123456789ab")
    monkeypatch.setattr(device, "fingerprint", lambda: dict(other))
    there = load_or_measure(path)
    assert len(calls) == 2 and there.device_id == "0123456789ab" != here.device_id
    assert load_or_measure(path) == there and len(calls) == 2
    path.write_text("not json")  # a broken cache is measured again, not an error
    assert load_or_measure(path) == there and len(calls) == 3


def test_roofline_takes_the_measured_peaks():
    desc = example()
    roofline = descriptor.roofline(desc)
    assert roofline.peak_flops == desc.peak_f32_flops
    assert roofline.peak_transcendentals == desc.transcendentals_per_s
    assert roofline.bandwidth_bytes_per_s == desc.bandwidth_bytes_per_s["DRAM"]
    assert roofline.launch_overhead_ns == desc.dispatch_ns
    with pytest.raises(ValueError, match="transcendentals_per_s"):
        descriptor.roofline(example(transcendentals_per_s=0.0))


def test_describe_command_pins_first_and_prints_json(monkeypatch, capsys, tmp_path):
    calls = _count_measurements(monkeypatch)
    pinned: list[bool] = []
    monkeypatch.setattr(device, "pin_to_one_core", lambda: pinned.append(not calls))
    assert main(["device", "describe", "--json", "--out", str(tmp_path / "pack") + "/"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert pinned == [True] and len(calls) == 1  # pinned before measuring
    assert DeviceDescriptor.from_dict(printed) == read_descriptor(tmp_path / "pack" / DESCRIPTOR_FILE)
    assert printed["device_id"] == device.fingerprint()["id"]
    assert main(["device", "describe"]) == 0  # the table, from the cache
    table = capsys.readouterr().out
    assert "bandwidth DRAM" in table and "10.0 GB/s" in table and len(calls) == 1


@pytest.mark.measures
@pytest.mark.slow
def test_a_real_measurement_is_positive_and_ordered():
    desc = descriptor.measure_descriptor(budget_s=3.0)
    assert desc.seconds < 30.0, desc
    assert desc.device_id == device.fingerprint()["id"]
    assert desc.peak_f32_flops > 0 and desc.transcendentals_per_s > 0 and desc.dispatch_ns > 0
    measured = {k: v for k, v in desc.bandwidth_bytes_per_s.items() if v is not None}
    assert all(v > 0 for v in measured.values()) and "DRAM" in measured
    first_level = next(iter(measured))
    assert measured[first_level] >= measured["DRAM"], desc.bandwidth_bytes_per_s
    assert np.all(np.isfinite(desc.features()))
    assert DeviceDescriptor.from_dict(desc.to_dict()) == desc


def test_a_benchmark_fills_its_time_share_with_more_runs():
    calls = []
    x = jnp.ones(4)

    def fn(a):
        calls.append(1)
        return a

    assert descriptor._best_time_s(fn, (x,), share_s=0.0, min_runs=3, warmup=1) > 0
    assert len(calls) == 1 + 3  # a warm-up and the minimum runs, no share
    calls.clear()
    descriptor._best_time_s(fn, (x,), share_s=0.05, min_runs=3, warmup=0)
    assert len(calls) > 3  # runs went on for the share
