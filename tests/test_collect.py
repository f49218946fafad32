"""Tests of tpucost.collect and the data CLI on a tiny corpus (CPU)."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import jax
import numpy as np
import pytest
from conftest import pretend_another_machine

from lab import cli as lab_cli
from tpucost import cli
from tpucost.experiments import verdicts
from tpucost.experiments.data import additivity, collection, kernel_collection
from tpucost.experiments.data import kernel as kernel_data
from tpucost.experiments.programs import compile_program, generate_programs
from tpucost.method import device, hlo, kernels

pytestmark = [
    pytest.mark.skipif(jax.default_backend() != "cpu", reason="collected on XLA:CPU"),
    pytest.mark.measures,
]

N, FAMILIES, CONFIGS, REPEATS = 4, ("mlp", "norm_softmax"), ("default", "ynn_dot_only"), 2
ROOT = Path(__file__).resolve().parents[1]


def _cli_args(out: Path, *extra: str) -> list[str]:
    return [
        "collect",
        "--out",
        str(out),
        "--programs",
        str(N),
        "--repeats",
        str(REPEATS),
        "--families",
        ",".join(FAMILIES),
        "--configs",
        ",".join(CONFIGS),
        "--no-progress",
        *extra,
    ]


def _pairs(ds: kernel_data.KernelDataset) -> set[tuple[str, str]]:
    return set(zip(ds.source_program_id.tolist(), ds.source_configuration.tolist(), strict=True))


@pytest.fixture(scope="module")
def reference_dir(tmp_path_factory) -> Path:
    """The folder of an uninterrupted in-process run of the tiny corpus."""
    out = tmp_path_factory.mktemp("reference")
    kernel_collection.collect(
        out, N, 0, repeats=REPEATS, configurations=CONFIGS, families=FAMILIES, progress=False
    )
    return out


@pytest.fixture(scope="module")
def reference(reference_dir) -> kernel_data.KernelDataset:
    """The data set of that run."""
    return kernel_data.load_dataset(reference_dir)


def test_progress_counts_what_merge_keeps(reference_dir, reference, capsys):
    log = [e for e in collection.read_log(reference_dir) if e.get("status") == "ok"]
    p = kernel_collection.collection_progress([reference_dir, reference_dir])
    first, again = p["folders"]
    assert first == again | {"folder": first["folder"]} and first["pairs"] == len(log)
    assert first["programs"] == N and first["measuring_min"] == round(sum(e["wall_s"] for e in log) / 60, 1)
    assert sum(int(k) * v for k, v in first["rounds"].items()) == sum(e["rounds"] for e in log)
    # The second copy of the folder brings nothing new: every kernel is counted once, as merge does.
    assert p["distinct_kernels"] == len(reference)
    for by in ("by_configuration", "by_family"):
        assert sum(row["new"] for row in p[by].values()) == len(reference)
    assert set(p["by_family"]) == set(FAMILIES) and set(p["by_configuration"]) <= set(CONFIGS)
    rates = [row["new_per_min"] for row in p["by_family"].values()]
    assert rates == sorted(rates, reverse=True)
    assert lab_cli.main(["data", "progress", str(reference_dir)]) == 0
    assert f"{len(reference)} distinct kernels" in capsys.readouterr().out
    assert lab_cli.main(["data", "progress", str(reference_dir / "nowhere")]) == 2
    assert "no collection log" in capsys.readouterr().err


def test_collect_records(reference):
    assert len(reference) > 0 and np.all(reference.runtime_ns > 0)
    assert set(reference.family) == set(FAMILIES) and set(reference.configuration) <= set(CONFIGS)
    assert {p for p, _ in _pairs(reference)} == {p.program_id for p in generate_programs(N, 0, FAMILIES)}
    assert np.all(reference.count >= 1) and reference.count.sum() >= len(reference)


def test_labels_are_measured_again_until_they_settle():
    rounds = iter(
        [
            {"long": 100_000.0, "noisy": 50_000.0, "short": 1_000.0},
            {"long": 101_000.0, "noisy": 80_000.0, "short": 500.0},  # long settles (1%), noisy does not
            {"long": 90_000.0, "noisy": 40_000.0, "short": 100.0},  # settled kernels are not followed
            {"long": 100_000.0, "noisy": 40_500.0, "short": 100.0},  # noisy settles (1.25% of 40000)
        ]
    )
    labels, n, unsettled = kernel_collection.settle_labels(lambda: next(rounds), tolerance=0.03, max_rounds=6)
    assert (n, unsettled) == (4, [])
    assert labels == {"long": 90_000.0, "noisy": 40_000.0, "short": 100.0}  # minima over every round
    steady = kernel_collection.settle_labels(lambda: {"a": 10_000.0}, max_rounds=6)
    assert steady == ({"a": 10_000.0}, 2, [])  # two rounds at least: one cannot show a spread
    drifting = iter([{"a": 10_000.0 * 0.9**i} for i in range(10)])
    assert kernel_collection.settle_labels(lambda: next(drifting), max_rounds=3)[1:] == (3, ["a"])
    assert kernel_collection.settle_labels(lambda: {"tiny": 10.0})[1] == 1  # nothing >= 5 us to wait for


def test_collect_logs_the_rounds(reference):
    lines = [e for e in collection.read_log(reference.root) if e.get("status") == "ok"]
    assert lines and all(e["rounds"] >= 1 and e["unsettled"] >= 0 and "hparams" in e for e in lines)


def test_collect_logs_the_quiet_gate(reference):
    lines = [e for e in collection.read_log(reference.root) if e.get("status") == "ok"]
    assert lines and all(e["paused_s"] == 0.0 and e["pause_reason"] is None for e in lines)  # no gate asked
    on_linux = collection.cpu_times() is not None
    assert all((0.0 <= e["steal_share"] <= 1.0) if on_linux else e["steal_share"] is None for e in lines)


def test_record_names_match_hlo_kernels():
    program = next(generate_programs(1, 0, FAMILIES))
    records, entry = kernel_collection.measure_program(program, "default", repeats=REPEATS)
    names = {
        k.name for k in kernels.decompose(hlo.parse_module(compile_program(program, "default").as_text()))
    }
    assert set(records.name) <= names
    assert len(records) == len(names) - entry["missing"] and entry["status"] == "ok"
    assert np.all(records.runtime_ns > 0) and 0 < entry["additivity_ratio"]


def test_resume_after_kill(tmp_path, reference):
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "tpucost", *_cli_args(out)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # kill once the first program's configurations are logged
        ok = [e for e in collection.read_log(out) if e.get("status") == "ok"]
        if len({e["program_id"] for e in ok}) >= 1 and len(ok) >= len(CONFIGS):
            break
        time.sleep(0.02)
    assert proc.poll() is None, "the run finished before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (out / "schema.json").exists()
    done_before = {
        (e["program_id"], e["configuration"]) for e in collection.read_log(out) if e.get("status") == "ok"
    }
    subprocess.run([*cmd, "--resume"], cwd=ROOT, env=env, check=True, capture_output=True)
    log = [e for e in collection.read_log(out) if e.get("status") == "ok"]
    pairs = [(e["program_id"], e["configuration"]) for e in log]
    assert len(pairs) == len(set(pairs)), "a pair was measured twice"
    assert done_before < set(pairs)
    resumed = kernel_data.load_dataset(out)
    assert set(resumed.program_id) == set(reference.program_id)
    assert _pairs(resumed) == _pairs(reference)
    assert set(resumed.kernel_hash) == set(reference.kernel_hash)


def test_merge_shards_equals_single_run(tmp_path, reference):
    for i in range(2):
        kernel_collection.collect(
            tmp_path / f"s{i}",
            N,
            0,
            shard=(i, 2),
            repeats=REPEATS,
            configurations=CONFIGS,
            families=FAMILIES,
            progress=False,
            do_finalize=False,
        )
    assert (
        lab_cli.main(
            ["data", "merge", "--out", str(tmp_path / "merged"), str(tmp_path / "s0"), str(tmp_path / "s1")]
        )
        == 0
    )
    merged = kernel_data.load_dataset(tmp_path / "merged")
    assert _pairs(merged) == _pairs(reference)
    assert list(merged.kernel_hash) == list(reference.kernel_hash)  # same order: parts sorted by name
    np.testing.assert_array_equal(merged.count, reference.count)
    done = {
        (e["program_id"], e["configuration"])
        for e in collection.read_log(tmp_path / "merged")
        if e.get("status") == "ok"
    }
    assert done == {
        (e["program_id"], e["configuration"])
        for e in collection.read_log(reference.root)
        if e.get("status") == "ok"
    }  # the merged log holds every measured pair: noise can re-measure


def test_collect_refuses_existing_without_resume(tmp_path):
    (tmp_path / "log.jsonl").write_text("")
    with pytest.raises(FileExistsError, match="resume"):
        kernel_collection.collect(tmp_path, 1, progress=False)


def test_cli_stats_json(reference, capsys):
    assert cli.main(["data", "stats", str(reference.root), "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert {
        "kernels",
        "programs",
        "families",
        "configurations",
        "runtime_ns_quantiles",
        "noise_median_rel",
        "noise_p90_rel",
    } <= set(s)
    assert s["kernels"] == len(reference) and s["programs"] == N
    assert cli.main(["data", "stats", str(reference.root)]) == 0
    assert "kernels" in capsys.readouterr().out


def test_noise_remeasures_a_sample(tmp_path):
    out = tmp_path / "noise"
    kernel_collection.collect(
        out, 2, 0, repeats=REPEATS, configurations=("default",), families=("mlp",), progress=False
    )
    result = kernel_collection.measure_noise(out, sample=6, seed=1, progress=False)
    assert result["sampled"] == min(6, len(kernel_data.load_dataset(out)))
    assert result["matched"] >= 1 and result["median_rel"] >= 0 and result["p90_rel"] >= result["median_rel"]
    rows = result["rows"]
    assert all(r["stored_ns"] > 0 and r["remeasured_ns"] > 0 for r in rows)
    s = kernel_data.stats(kernel_data.load_dataset(out))
    assert s["noise_median_rel"] == result["median_rel"] and s["noise_p90_rel"] == result["p90_rel"]
    # Each re-measured pair was logged: a rerun (e.g. after a kill) measures nothing again.
    runs = collection.read_log(out / kernel_collection.NOISE_RUNS)
    pairs = [e for e in runs if e.get("status") == "ok"]
    assert len(pairs) >= len({(r["program_id"], r["configuration"]) for r in rows}) >= 1
    again = kernel_collection.measure_noise(out, sample=6, seed=1, progress=False)
    assert again["rows"] == rows
    rerun = [e for e in collection.read_log(out / kernel_collection.NOISE_RUNS) if e.get("status") == "start"]
    assert rerun[-1]["todo"] == 0 and rerun[-1]["already_done"] == len(pairs)


def test_noise_compares_a_kernel_with_itself_in_the_same_pair(tmp_path, monkeypatch):
    """A kernel runs several times in one program (instances of one hash, whose runtimes differ
    with their context) and in several programs. Re-measured with its instances in another order
    (the least of each unchanged), every label is the same again: the floor must be exactly 0.
    Taking the last instance against the data set's label (the least over every pair) would not be."""
    out = tmp_path / "noise"
    kernel_collection.collect(
        out, 2, 0, repeats=REPEATS, configurations=("default",), families=("mlp",), progress=False
    )
    parts = {p.name: kernel_data.read_shard(p) for p in (out / kernel_collection.PARTS).glob("*.npz")}
    spread = [
        np.ptp(part.runtime_ns[part.kernel_hash == h])
        for part in parts.values()
        for h in np.unique(part.kernel_hash)
    ]
    assert max(spread) > 0  # some kernel's instances differ, or this test proves nothing

    def reordered(program, configuration, repeats):
        part = parts[kernel_collection._part_name(program.program_id, configuration)]
        runtime = part.runtime_ns.copy()
        for h in np.unique(part.kernel_hash):
            where = np.flatnonzero(part.kernel_hash == h)
            runtime[where] = runtime[where][::-1]
        table = dataclasses.replace(part.table, columns={**part.table.columns, "runtime_ns": runtime})
        return dataclasses.replace(part, table=table), {}

    monkeypatch.setattr(kernel_collection, "measure_program", reordered)
    result = kernel_collection.remeasure_noise(out, 50, 0, REPEATS, False, runs_dir=tmp_path / "runs")
    assert result["comparison"] == kernel_collection.NOISE_COMPARISON and result["matched"] > 0
    assert [r["rel_diff"] for r in result["rows"]] == [0.0] * result["matched"]


def test_additivity_table_and_cli(tmp_path, capsys):
    out = tmp_path / "add"
    kernel_collection.collect(
        out, 2, 0, repeats=REPEATS, configurations=("default",), families=("mlp",), progress=False
    )
    table = additivity.additivity_table(out)
    assert len(table) == 2 and set(table["family"]) == {"mlp"}
    assert (table["additivity_ratio"] > 0).all()
    lo, hi = verdicts.ADDS_UP
    far = (table["additivity_ratio"] < lo) | (table["additivity_ratio"] > hi)
    assert ((table["reason"] != "") == far).all()
    assert lab_cli.main(["data", "additivity", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["pairs"] == 2 and set(summary["median_by_family"]) == {"mlp"}
    assert summary["band"] == [lo, hi]
    for key in ("median", "p10", "p90", "max", f"within_{lo}_{hi}", f"above_{hi}"):
        assert 0 <= summary[key] < 100, key
    assert summary["pairs_ge_1ms"]["pairs"] == int((table["wall_ns"] >= 1e6).sum())
    assert (
        summary[f"within_{lo}_{hi}"]
        == ((table["additivity_ratio"] >= lo) & (table["additivity_ratio"] <= hi)).mean()
    )
    assert lab_cli.main(["data", "additivity", str(tmp_path / "empty")]) == 2


def test_collection_records_its_device(reference, capsys):
    recorded = collection.read_device(reference.root)
    assert recorded == reference.device and recorded["id"] == device.fingerprint()["id"]
    assert cli.main(["data", "stats", str(reference.root), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["device"]["id"] == recorded["id"]


def test_resume_on_another_device_is_refused(tmp_path, monkeypatch):
    out = tmp_path / "run"
    kernel_collection.collect(
        out, 1, 0, repeats=REPEATS, configurations=("default",), families=("mlp",), progress=False
    )
    pretend_another_machine(monkeypatch)
    with pytest.raises(ValueError, match="a data set comes from one device"):
        kernel_collection.collect(
            out,
            2,
            0,
            repeats=REPEATS,
            configurations=("default",),
            families=("mlp",),
            progress=False,
            resume=True,
        )


def test_merge_refuses_folders_of_different_devices(tmp_path, monkeypatch, capsys):
    kwargs = dict(
        repeats=REPEATS, configurations=("default",), families=("mlp",), progress=False, do_finalize=False
    )
    kernel_collection.collect(tmp_path / "here", 2, 0, shard=(0, 2), **kwargs)
    with monkeypatch.context() as m:
        pretend_another_machine(m)
        kernel_collection.collect(tmp_path / "there", 2, 0, shard=(1, 2), **kwargs)
    args = [
        "data",
        "merge",
        "--out",
        str(tmp_path / "merged"),
        str(tmp_path / "here"),
        str(tmp_path / "there"),
    ]
    assert lab_cli.main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Some Other CPU" in err and str(tmp_path / "here") in err
    assert lab_cli.main([*args, "--allow-mixed-devices"]) == 0
    assert kernel_data.load_dataset(tmp_path / "merged").device is None  # no single device to name


def test_collect_into_an_unwritable_folder_is_one_line(capsys):
    assert (
        cli.main(
            [
                "collect",
                "--out",
                "/proc/tpucost-cannot-be-here",
                "--programs",
                "1",
                "--all-cores",
                "--no-progress",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert (
        err.startswith("error: cannot write the collection folder /proc/tpucost-cannot-be-here")
        and err.count("\n") == 1
    )
