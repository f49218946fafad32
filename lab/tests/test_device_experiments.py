"""Tests of lab.device_experiments: several device packs in one data set, the
adaptation budgets, the noise gate, and leave-one-device-out on synthetic packs (`device_packs`)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from lab import cli, descriptor, device_experiments, lodo
from lab.device_cost_model import DeviceCostModel
from lab.tests.device_packs import DEVICES, RENAMED, small_subset, write_fake_packs
from tpucost.experiments.data import collection
from tpucost.experiments.data import kernel as kernel_data
from tpucost.method import train

pytestmark = pytest.mark.core  # also run on Colab's versions (make test-colab)


def _noise(folder, median=0.01, p90=0.1, n=40):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / kernel_data.NOISE_FILE).write_text(
        json.dumps({"median_rel_ge5us": median, "p90_rel_ge5us": p90, "n_ge5us": n})
    )
    return folder


def test_fewer_than_two_gated_packs_is_a_clear_error(tmp_path):
    good, noisy, silent = _noise(tmp_path / "good"), _noise(tmp_path / "noisy", p90=0.4), tmp_path / "silent"
    silent.mkdir()
    with pytest.raises(ValueError, match=r"at least 2 .* got 1 pack\(s\), 1 passing") as one:
        device_experiments.leave_one_device_out([good], tmp_path / "out", lodo.get_smoke_config())
    assert "none fails" in str(one.value)
    with pytest.raises(ValueError, match=r"got 3 pack\(s\), 1 passing") as three:
        device_experiments.leave_one_device_out([good, noisy, silent], tmp_path / "out")
    message = str(three.value)
    assert f"{noisy}: median 0.01, p90 0.4" in message and f"{silent}: no noise.json" in message
    assert not (tmp_path / "out").exists()


def test_two_packs_of_one_device_are_refused(tmp_path):
    a, b = _noise(tmp_path / "a"), _noise(tmp_path / "b")
    for folder in (a, b):
        (folder / "device.json").write_text(json.dumps({"id": "samedevice01", "cpu_isa": []}))
    with pytest.raises(ValueError, match=r"are packs of one device \(samedevice01\): a device has one pack"):
        device_experiments.leave_one_device_out([a, b], tmp_path / "out", lodo.get_smoke_config())
    assert not (tmp_path / "out").exists()


def test_a_pack_without_a_descriptor_is_an_error_naming_it(tmp_path):
    with pytest.raises(ValueError, match=f"device pack {tmp_path / 'p'} has no descriptor.json"):
        device_experiments.combined_dataset([tmp_path / "p"])


def test_adaptation_pairs_fit_the_minutes_in_log_order(tmp_path):
    lines = [
        {"status": "start"},
        {"program_id": "a", "configuration": "default", "status": "ok", "wall_s": 50.0},
        {"program_id": "a", "configuration": "x", "status": "error", "wall_s": 500.0},  # not measured
        {"program_id": "b", "configuration": "default", "status": "ok", "compile_s": 40.0, "measure_s": 20.0},
        {"program_id": "c", "configuration": "default", "status": "ok", "wall_s": 10.0},
    ]
    (tmp_path / collection.LOG).write_text("".join(json.dumps(e) + "\n" for e in lines))
    assert device_experiments.pair_seconds(lines[3]) == 60.0  # a log written before wall_s
    assert device_experiments.adaptation_pairs(tmp_path, 1.0) == [("a", "default")]
    assert device_experiments.adaptation_pairs(tmp_path, 2.0) == [
        ("a", "default"),
        ("b", "default"),
        ("c", "default"),
    ]
    assert device_experiments.adaptation_pairs(tmp_path, 0.5) == []


@pytest.fixture(scope="module")
def fake_packs(tmp_path_factory, bundled_kernels):
    """Three synthetic device packs (`device_packs.write_fake_packs`) of a few hundred kernels."""
    source = small_subset(bundled_kernels)
    return source, write_fake_packs(source, tmp_path_factory.mktemp("packs"))


@pytest.mark.slow
def test_combined_dataset_labels_each_kernel_with_its_device(fake_packs):
    _, folders = fake_packs
    ds, rows, descriptors = device_experiments.combined_dataset(folders)
    assert list(descriptors) == [d for d, _, _ in DEVICES]
    sizes = [len(kernel_data.load_dataset(f)) for f in folders]
    assert len(ds) == len(rows) == sum(sizes)
    np.testing.assert_array_equal(np.bincount(rows), sizes)
    features = device_experiments.device_features(rows, descriptors)
    assert features.shape == (len(ds), len(descriptor.FEATURE_NAMES))
    np.testing.assert_array_equal(features[-1], descriptors[DEVICES[-1][0]].features())
    pair = device_experiments.adaptation_pairs(folders[0], 2.0)
    kernels = device_experiments.pair_kernels(ds, pair)
    assert len(kernels) and all(set(ds.sources(int(k))) & set(pair) for k in kernels)
    with pytest.raises(ValueError, match="several packs of one device"):
        device_experiments.combined_dataset([folders[0], folders[0]])


@pytest.mark.slow
def test_leave_one_device_out_scores_every_method_and_column_and_resumes(
    fake_packs, tmp_path, monkeypatch, capsys
):
    _, folders = fake_packs
    config = lodo.get_smoke_config()
    summary = device_experiments.leave_one_device_out(folders, tmp_path, config, progress=False)
    ids = [d for d, _, _ in DEVICES]
    assert list(summary["devices"]) == ids and summary["left_out"] == {}
    names = device_experiments.method_names(config.minutes)
    assert (
        len(names) == 2 + 4 * 3
    )  # zero-shot, roofline; calibrated, fine-tuned, roofline, constant x 2/5/10 min
    for device_id in ids:
        result = summary["devices"][device_id]
        assert result["trained_on"] == [d for d in ids if d != device_id]
        assert result["noise"]["median_rel_ge5us"] == 0.01 and result["noise"]["p90_rel_ge5us"] == 0.1
        assert [result["adaptation"][k]["minutes"] for k in ("2", "5", "10")] == [2.0, 5.0, 10.0]
        assert list(result["methods"]) == names
        for method, scores in result["methods"].items():
            assert set(scores) == set(device_experiments.COLUMNS), method
            assert scores["all"]["n_kernels"] >= scores["unseen"]["n_kernels"] > 0
            assert scores["structure_novel"]["n_kernels"] <= scores["unseen"]["n_kernels"]
            assert scores["by_others"]["n_kernels"] > 0 and scores["all"]["median_ape"] >= 0
        scored = result["methods"]["zero-shot"]["all"]["n_programs"]
        assert scored == result["evaluation_programs"]
        assert (tmp_path / device_id / device_experiments.RESULT_FILE).is_file()
        # The checkpoint's model reads the device; on a device it never saw it measures this one.
        cm = DeviceCostModel.load(
            tmp_path / device_id, "gnn", descriptor=result_descriptor(folders, device_id)
        )
        assert set(cm.trained_descriptors) == set(result["trained_on"])
    for device_id in ids:  # fine-tuning moved the model, or kept it when no epoch did better
        result = summary["devices"][device_id]
        tuned, zero_shot = result["methods"]["fine-tuned-10min"], result["methods"]["zero-shot"]
        kept = result["adaptation"]["10"]["fine_tune_best_epoch"] == 0
        assert (tuned == zero_shot) == kept, device_id
    table = device_experiments.lodo_table(summary)
    assert len(table) == (len(ids) + 1) * len(names) and set(table["device"]) == {*ids, "mean"}
    assert {"median_ape_by_others", "median_ape_structure_novel", "noise_p90_ge5us"} <= set(table.columns)

    # A rerun skips the finished devices: nothing is trained again.
    monkeypatch.setattr(train, "train_and_evaluate", lambda *a, **k: pytest.fail("trained again"))
    assert device_experiments.leave_one_device_out(folders, tmp_path, config, progress=False) == summary
    argv = [
        "experiment",
        "leave-one-device-out",
        "--packs",
        ",".join(map(str, folders)),
        "--out",
        str(tmp_path),
    ]
    assert cli.main([*argv, "--smoke", "--no-progress"]) == 0
    assert "fine-tuned-10min" in capsys.readouterr().out
    with pytest.raises(ValueError, match="other settings"):
        device_experiments.leave_one_device_out(folders, tmp_path, lodo.get_config(), progress=False)
    assert RENAMED[1] in kernel_data.load_dataset(folders[0]).family


def result_descriptor(folders, device_id: str) -> descriptor.DeviceDescriptor:
    """The descriptor of the fake pack of ``device_id``."""
    (folder,) = [f for f in folders if f.name == device_id]
    return descriptor.read_descriptor(folder / descriptor.DESCRIPTOR_FILE)
