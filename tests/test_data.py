"""Tests of tpucost.experiments.data.kernel: records, dedup, npz storage and its validation, splits, stats."""

from __future__ import annotations

import dataclasses
import json
import zipfile
from pathlib import Path

import numpy as np
import pytest

from lab import cli
from tpucost import files
from tpucost.experiments.data import kernel as kernel_data
from tpucost.experiments.data import kernel_collection
from tpucost.method import features
from tpucost.method.features import KernelGraph
from tpucost.method.splits import Split
from tpucost.method.tasks import kernel as kernel_task

F = features.NUM_NODE_FEATURES
FAMILIES = ("mlp", "unet", "gru", "nerf_mlp", "mobilenet_block", "cnn")


def _graph(rng: np.random.Generator, n: int, name: str) -> KernelGraph:
    edges = np.array([(i, i + 1) for i in range(n - 1)], np.int32).reshape(-1, 2)
    return KernelGraph(
        rng.integers(0, 50, n).astype(np.int32),
        rng.normal(size=(n, F)).astype(np.float32),
        edges[:, 0].copy(),
        edges[:, 1].copy(),
        name,
        "kLoop",
    )


def _records(program: str, family: str, config: str, graphs: list[KernelGraph], runtimes: list[float]):
    meta = {
        "program_id": program,
        "family": family,
        "form": "forward",
        "configuration": config,
        "backend": "cpu",
        "device_kind": "cpu",
        "jax_version": "0.0",
    }
    return kernel_data.from_graphs(graphs, runtimes, [1] * len(graphs), meta)


@pytest.fixture
def dataset() -> kernel_data.KernelDataset:
    """12 programs (2 per family), 3 kernels each; kernel 'shared' appears in every program."""
    rng = np.random.default_rng(0)
    shared = _graph(rng, 4, "shared")
    parts = []
    for p in range(12):
        fam = FAMILIES[p % len(FAMILIES)]
        gs = [_graph(rng, 2 + p % 3, f"f.{p}"), _graph(rng, 5, f"g.{p}"), shared._replace(name=f"s.{p}")]
        parts.append(_records(f"{fam}-forward-0-{p}", fam, "default", gs, [10.0 + p, 20.0, 100.0 - p]))
    return kernel_data.dedup(kernel_data.concat(parts))


def _assert_same(a: kernel_data.KernelDataset, b: kernel_data.KernelDataset) -> None:
    for name, arr in a.table.arrays().items():
        other = b.table.arrays()[name]
        assert arr.dtype == other.dtype, name
        np.testing.assert_array_equal(arr, other, err_msg=name)


def test_dedup_keeps_min_and_count(dataset):
    assert len(dataset) == 12 * 2 + 1
    i = int(np.flatnonzero(dataset.count == 12)[0])
    assert dataset.runtime_ns[i] == 100.0 - 11
    assert dataset.program_id[i] == "mlp-forward-0-0" and dataset.name[i] == "s.0"
    assert len(dataset.sources(i)) == 12 and dataset.sources(i)[0] == ("mlp-forward-0-0", "default")
    assert dataset.graph(i).num_nodes == 4 and dataset.graph(i).num_edges == 3


def test_round_trip_exact(dataset, tmp_path):
    kernel_data.save_dataset(dataset, tmp_path / "ds", shard_size=10)
    assert len(list((tmp_path / "ds").glob("kernels-*.npz"))) == 3
    loaded = kernel_data.load_dataset(tmp_path / "ds")
    _assert_same(dataset, loaded)
    g0, g1 = dataset.graph(7), loaded.graph(7)
    for x, y in zip(g0, g1, strict=True):
        np.testing.assert_array_equal(x, y)
    frame = loaded.to_frame()
    assert len(frame) == len(dataset) and {"program_id", "n_nodes", "runtime_ns", "count"} <= set(frame)


def test_subset(dataset):
    idx = [5, 0, 24]
    sub = dataset.subset(idx)
    assert len(sub) == 3
    for j, i in enumerate(idx):
        for x, y in zip(sub.graph(j), dataset.graph(i), strict=True):
            np.testing.assert_array_equal(x, y)
        assert sub.sources(j) == dataset.sources(i)


def _rewrite(path, **changes):
    with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    arrays.update(changes)
    np.savez(path, **arrays)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"format_version": np.array(99)}, "format_version"),
        ({"features": np.array("{not json")}, "features"),
        ({"features": np.array('{"layout": "x"}')}, "features"),
        ({"runtime_ns": np.zeros(3)}, "runtime_ns"),
        ({"senders": np.zeros(1, np.int64)}, "senders"),
        ({"opcodes": np.zeros(5, np.float32)}, "opcodes"),
        ({"node_offsets": np.arange(26)}, "node_offsets"),
        ({"name": np.array([{"a": 1}] * 25, dtype=object)}, "name"),
    ],
)
def test_validation_names_file_and_field(dataset, tmp_path, change, field):
    kernel_data.save_dataset(dataset, tmp_path)
    shard = tmp_path / "kernels-00000.npz"
    _rewrite(shard, **change)
    with pytest.raises(ValueError, match=rf"kernels-00000\.npz.*{field}"):
        kernel_data.load_dataset(tmp_path)


def test_schema_json_and_missing(dataset, tmp_path):
    with pytest.raises(FileNotFoundError, match="tpucost collect"):
        kernel_data.load_dataset(tmp_path / "nothing")
    kernel_data.save_dataset(dataset, tmp_path)
    schema = json.loads((tmp_path / "schema.json").read_text())
    (tmp_path / "schema.json").write_text(json.dumps({**schema, "format_version": 0}))
    with pytest.raises(ValueError, match="schema.json.*format_version"):
        kernel_data.load_dataset(tmp_path)
    (tmp_path / "kernels-00000.npz").write_bytes(b"garbage")
    with pytest.raises(ValueError, match="kernels-00000.npz"):
        kernel_data.read_shard(tmp_path / "kernels-00000.npz")
    assert not zipfile.is_zipfile(tmp_path / "kernels-00000.npz")


def test_data_sets_carry_their_feature_spec(dataset, tmp_path):
    assert dataset.features == features.TPUCOST_FEATURES and dataset.subset([0]).features == dataset.features
    kernel_data.save_dataset(dataset, tmp_path)
    schema = json.loads((tmp_path / "schema.json").read_text())
    assert features.FeatureSpec.from_dict(schema["features"]) == features.TPUCOST_FEATURES
    assert kernel_data.load_dataset(tmp_path).features == features.TPUCOST_FEATURES
    (tmp_path / "schema.json").write_text(json.dumps({k: v for k, v in schema.items() if k != "features"}))
    with pytest.raises(ValueError, match="schema.json.*features"):
        kernel_data.load_dataset(tmp_path)
    other = {**schema["features"], "layout": "tpugraphs-tile-v0"}
    (tmp_path / "schema.json").write_text(json.dumps({**schema, "features": other}))
    with pytest.raises(ValueError, match="schema.json.*feature layout"):  # the shards say otherwise
        kernel_data.load_dataset(tmp_path)


def test_a_data_set_of_another_feature_layout_still_loads(dataset, tmp_path):
    """A data set is checked against its own spec, not tpucost's current one: adding a feature to
    tpucost does not make the data sets written before it unreadable."""
    spec = features.FeatureSpec(
        "an-older-layout", features.NUM_NODE_FEATURES, features.TPUCOST_FEATURES.num_opcodes
    )
    older = dataclasses.replace(dataset, features=spec)
    kernel_data.save_dataset(older, tmp_path)
    loaded = kernel_data.load_dataset(tmp_path)
    assert loaded.features == spec and len(loaded) == len(dataset)


def test_split_by_name(dataset):
    assert (
        kernel_data.split(dataset, "random").test.tolist() == kernel_data.split_random(dataset).test.tolist()
    )
    assert kernel_data.split(dataset, "hard").test.tolist() == kernel_data.split_hard(dataset).test.tolist()
    with pytest.raises(ValueError, match="random"):
        kernel_data.split(dataset, "sideways")


def _sources(ds: kernel_data.KernelDataset, i: int) -> tuple[set[str], set[str]]:
    """(programs, families) kernel ``i`` was measured in."""
    s0, s1 = ds.source_offsets[i], ds.source_offsets[i + 1]
    return set(ds.source_program_id[s0:s1].tolist()), set(ds.source_family[s0:s1].tolist())


def _assert_partition(ds: kernel_data.KernelDataset, split: Split) -> None:
    """Every program is in exactly one part, every kernel in exactly one part."""
    parts = (split.train_ids, split.val_ids, split.test_ids)
    everyone = np.concatenate(parts).tolist()
    assert sorted(everyone) == sorted(set(ds.source_program_id.tolist()))  # once each, all of them
    assert sorted(np.concatenate(list(split)).tolist()) == list(range(len(ds)))


def test_split_random_assigns_programs_and_keeps_test_kernels_unseen(dataset):
    shared = int(np.flatnonzero(dataset.count == 12)[0])  # ran in every program
    first_program_held_out = 0
    for seed in range(10):
        split = kernel_data.split_random(dataset, seed=seed)
        _assert_partition(dataset, split)
        assert all(len(p) for p in (split.train_ids, split.val_ids, split.test_ids))
        train_p, val_p = set(split.train_ids), set(split.val_ids)
        for i in split.train:
            assert _sources(dataset, i)[0] & train_p
        for i in split.val:
            assert _sources(dataset, i)[0] & val_p and not _sources(dataset, i)[0] & train_p
        assert len(split.test)
        for i in split.test:  # unseen: no source in a train (or val) program
            assert _sources(dataset, i)[0] <= set(split.test_ids)
        assert shared in split.train  # whatever its first program's part
        first_program_held_out += dataset.program_id[shared] not in train_p
    assert first_program_held_out  # some seed put the shared kernel's first program in val or test
    train, val, test = split = kernel_data.split_random(dataset, seed=3)  # unpacks as kernel indices
    again = kernel_data.split_random(dataset, seed=3)
    assert all(np.array_equal(a, b) for a, b in zip((train, val, test), again, strict=True))
    assert np.array_equal(split.test_ids, again.test_ids)
    other = kernel_data.split_random(dataset, seed=4)
    assert not np.array_equal(split.test_ids, other.test_ids)


def test_split_hard_holds_out_whole_families(dataset):
    split = kernel_data.split_hard(dataset)
    _assert_partition(dataset, split)
    family_of = dict(zip(dataset.source_program_id.tolist(), dataset.source_family.tolist(), strict=True))
    assert {family_of[p] for p in split.test_ids} == set(kernel_data.HARD_TEST_FAMILIES)
    assert {family_of[p] for p in split.val_ids} == set(kernel_data.HARD_VAL_FAMILIES)
    held_out = set(kernel_data.HARD_TEST_FAMILIES) | set(kernel_data.HARD_VAL_FAMILIES)
    assert not {family_of[p] for p in split.train_ids} & held_out
    assert len(split.train_ids) + len(split.val_ids) + len(split.test_ids) == 12
    for i in split.train:  # no train kernel was ever measured in a held-out family
        assert not _sources(dataset, i)[1] & held_out
    rows = kernel_data.program_rows(dataset, split.test_ids)
    assert set(rows.kernel.tolist()) == set(split.test.tolist())  # all a test program ran is held out
    shared = int(np.flatnonzero(dataset.count == 12)[0])
    assert shared in split.test and dataset.family[shared] == "mlp"  # first seen in a train family
    again = kernel_data.split_hard(dataset)
    assert all(np.array_equal(a, b) for a, b in zip(split, again, strict=True))


def test_program_rows_one_row_per_program_and_kernel():
    rng = np.random.default_rng(1)
    g, h, k = _graph(rng, 3, "g"), _graph(rng, 4, "h"), _graph(rng, 5, "k")
    ds = kernel_data.dedup(
        kernel_data.concat(
            [
                _records("a-0", "mlp", "default", [g, g._replace(name="g2"), h], [1.0, 2.0, 3.0]),  # g twice
                _records("a-0", "mlp", "fast", [g], [1.5]),  # same program, another configuration
                _records("b-1", "gru", "default", [k, g], [4.0, 5.0]),
            ]
        )
    )
    assert ds.program_id.tolist() == ["a-0", "a-0", "b-1"]  # g, h, k: g's first program is a-0
    rows = kernel_data.program_rows(ds, ["b-1", "a-0"])
    assert list(zip(rows.program_id.tolist(), rows.kernel.tolist(), rows.family.tolist(), strict=True)) == [
        ("a-0", 0, "mlp"),
        ("a-0", 1, "mlp"),
        ("b-1", 0, "gru"),
        ("b-1", 2, "gru"),
    ]
    only_b = kernel_data.program_rows(ds, ["b-1"])
    assert only_b.kernel.tolist() == [0, 2] and set(only_b.program_id) == {"b-1"}  # g under b-1 too
    assert len(kernel_data.program_rows(ds, []).kernel) == 0


def test_stats(dataset, tmp_path):
    kernel_data.save_dataset(dataset, tmp_path)
    (tmp_path / "noise.json").write_text(json.dumps({"median_rel": 0.02, "p90_rel": 0.1}))
    s = kernel_data.stats(kernel_data.load_dataset(tmp_path))
    assert s["kernels"] == 25 and s["programs"] == 12 and s["occurrences"] == 36
    assert set(s["runtime_ns_quantiles"]) == {"0.0", "0.1", "0.5", "0.9", "1.0"}
    assert s["runtime_ns_quantiles"]["0.0"] == 10.0
    assert (s["noise_median_rel"], s["noise_p90_rel"]) == (0.02, 0.1)
    assert kernel_data.stats(dataset)["noise_median_rel"] is None
    assert s["families"] == len(FAMILIES) and s["families_written_by_others"] == 0
    keras = _records("keras_vgg-forward-0-99", "keras_vgg", "default", [dataset.graph(0)], [5.0])
    assert (
        kernel_data.stats(kernel_data.dedup(kernel_data.concat([dataset, keras])))[
            "families_written_by_others"
        ]
        == 1
    )


def test_bundled_data_is_package_data_and_tpucost_data_dir_overrides(monkeypatch, tmp_path, bundled_kernels):
    import tpucost
    from tpucost.method import costmodel

    monkeypatch.delenv(files.DATA_DIR_ENV, raising=False)
    assert files.bundled_dir() == Path(tpucost.__file__).parent / "bundled"
    assert (kernel_data.default_data_dir() / "schema.json").is_file()
    assert (kernel_task.default_model_dir("random") / "gnn" / "config.json").is_file()

    monkeypatch.setenv(files.DATA_DIR_ENV, str(tmp_path))
    with pytest.raises(FileNotFoundError, match="TPUCOST_DATA_DIR"):
        kernel_data.load_dataset()
    with pytest.raises(FileNotFoundError, match="TPUCOST_DATA_DIR"):
        costmodel.CostModel.load(method="gnn")
    # 7 of the bundled kernels in the folder the override names: those load, not the bundled 31,843
    # (loading a copy of the whole bundled set, as this test did, takes ~4 CPU seconds).
    kernel_data.save_dataset(bundled_kernels.subset(np.arange(7)), tmp_path / "kernels_cpu")
    loaded = kernel_data.load_dataset()
    assert len(loaded) == 7 and loaded.root == tmp_path / "kernels_cpu"


def test_first_test_programs_keeps_their_unseen_kernels_and_the_other_parts(bundled_kernels):
    ds = bundled_kernels
    split = kernel_data.split(ds, "random")
    small = kernel_data.first_test_programs(ds, split, 5)
    assert list(small.test_ids) == list(split.test_ids[:5])
    ran = set(kernel_data.program_rows(ds, small.test_ids).kernel)
    assert set(small.test) == ran & set(split.test) and set(small.test) < set(split.test)
    assert small.train is split.train and small.val is split.val


def test_opcode_coverage_counts_each_kernel_once_per_opcode(bundled_kernels):
    ds = bundled_kernels
    part = np.arange(0, len(ds), 97)  # a spread of kernels
    expected: dict[str, int] = {}
    for i in part:
        for op in {features.OPCODE_VOCAB[int(o)] for o in ds.graph(int(i)).opcodes}:
            expected[op] = expected.get(op, 0) + 1
    coverage = kernel_data.opcode_coverage(ds, part)
    assert coverage == expected and list(coverage.values()) == sorted(coverage.values(), reverse=True)
    everything = kernel_data.opcode_coverage(ds)
    assert coverage["parameter"] <= len(part) and all(everything[op] >= n for op, n in coverage.items())


@pytest.mark.slow
def test_data_coverage_cli_names_the_opcodes_training_lacks(tmp_path, capsys, bundled_kernels):

    (tmp_path / "sort.hlo").write_text(
        "HloModule m\n\ncmp {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
        "  ROOT lt = pred[] compare(a, b), direction=LT\n}\n\n"
        "ENTRY e {\n  p = f32[64]{0} parameter(0)\n  t = f32[64]{0} tanh(p)\n"
        "  ROOT s = f32[64]{0} sort(t), dimensions={0}, to_apply=cmp\n}\n"
    )
    assert cli.main(["data", "coverage", "--against", str(tmp_path), "--min", "1000000", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    training = kernel_data.split(bundled_kernels, "random").train
    assert result["training_kernels"] == len(training)
    against = result["against"]
    assert against["files"] == 1 and {"sort", "tanh"} <= set(against["opcodes"])
    assert against["opcodes"]["sort"]["training_kernels"] == result["opcodes"].get("sort", 0)
    assert set(against["below_min"]) == set(against["opcodes"])  # nothing is in a million kernels
    (tmp_path / "bad.hlo").write_text("HloModule m\nENTRY e {\n  ROOT x = f32[] frob(\n}\n")
    assert cli.main(["data", "coverage", "--against", str(tmp_path / "bad.hlo")]) == 2
    assert "bad.hlo" in capsys.readouterr().err


def test_programs_sharing_every_hyperparameter_go_to_one_part(dataset, tmp_path):
    """Twins (same family, form and hparams in the collection log) are one program to the split:
    without the log they land in different parts for some seed; with it, never, and no twin of a
    training program is a test program."""
    kernel_data.save_dataset(dataset, tmp_path / "ds")
    programs = sorted(set(dataset.source_program_id.tolist()))
    twins = {"mlp-forward-0-0", "mlp-forward-0-6"}  # same family and form; given equal hparams below
    apart = [
        s for s in range(20) if len({_part_of(kernel_data.split_random(dataset, s), p) for p in twins}) > 1
    ]
    assert apart, "no seed separates the twins: the test could not fail"
    with open(tmp_path / "ds" / "log.jsonl", "w") as log:
        for p in programs:
            hparams = {"width": 8} if p in twins else {"width": programs.index(p)}
            log.write(
                json.dumps({"program_id": p, "configuration": "default", "status": "ok", "hparams": hparams})
                + "\n"
            )
    loaded = kernel_data.load_dataset(tmp_path / "ds")
    twin_index = kernel_data.program_twins(loaded, np.array(programs))
    assert (twin_index != np.arange(len(programs))).sum() == 1
    for seed in apart:
        split = kernel_data.split_random(loaded, seed)
        _assert_partition(loaded, split)
        parts = {_part_of(split, p) for p in twins}
        assert len(parts) == 1 and parts <= {0, 1, 2}
        before = {_part_of(kernel_data.split_random(dataset, seed), p) for p in twins}
        assert parts == {min(before)}  # the earliest part either drew


def _part_of(split: Split, program: str) -> int:
    return next(j for j, ids in enumerate((split.train_ids, split.val_ids, split.test_ids)) if program in ids)


def test_split_leave_out_holds_out_the_group_and_shares_no_kernel(dataset):
    split = kernel_data.split_leave_out(dataset, ("gru", "unet"), seed=1)
    _assert_partition(dataset, split)
    assert {p.split("-")[0] for p in split.test_ids} == {"gru", "unet"}
    assert not {p.split("-")[0] for p in np.concatenate([split.train_ids, split.val_ids])} & {"gru", "unet"}
    assert len(split.val_ids) >= 1
    for i in split.train:  # no training kernel ran in a held-out program
        assert not _sources(dataset, i)[0] & set(split.test_ids)
    with pytest.raises(ValueError, match="no test program"):
        kernel_data.split_leave_out(dataset, ("lstm",))
    with pytest.raises(ValueError, match="no training program"):
        kernel_data.split_leave_out(dataset, FAMILIES)


def _fake_part(folder: Path, name: str, hashes: list[str], runtime_ns: list[float]) -> None:
    """A collect part holding only what `occurrence_spread` reads."""
    (folder / kernel_collection.PARTS).mkdir(parents=True, exist_ok=True)
    np.savez(
        folder / kernel_collection.PARTS / name, kernel_hash=np.array(hashes), runtime_ns=np.array(runtime_ns)
    )


def test_occurrence_spread_compares_labels_of_one_kernel(tmp_path, capsys):
    one, two = tmp_path / "one", tmp_path / "two"
    _fake_part(one, "a__default.npz", ["x", "x", "y"], [10_000.0, 15_000.0, 8_000.0])
    _fake_part(one, "b__default.npz", ["x", "y", "z"], [12_000.0, 8_000.0, 4_000.0])
    _fake_part(two, "c__default.npz", ["x"], [11_000.0])
    _fake_part(two, "a__default.npz", ["x"], [1.0])  # a part both folders hold is read once (the first)
    s = kernel_collection.occurrence_spread([one, two], min_ns=5_000.0)
    # x ran twice in run a (10 and 15 us) and in three runs; y in two runs, 8 us each; z is one
    # occurrence of 4 us (left out).
    assert s["same_run"] == {"kernels": 1, "median": 0.5, "p90": 0.5}
    # y's two runs agree (0); x's two runs drawn from a (10 us first), b (12 us) and c (11 us).
    across = s["across_runs"]
    assert across["kernels"] == 2
    assert any(
        across["median"] == pytest.approx(v / 2) and across["p90"] == pytest.approx(0.9 * v)
        for v in (0.2, 0.1, 1 / 11)
    )
    # x's four occurrences cut into halves: one minimum is 10 us, the other 11 or 12 us.
    assert s["split_half_min"]["kernels"] == 1
    assert any(s["split_half_min"]["median"] == pytest.approx(v) for v in (0.1, 0.2))
    above = kernel_collection.occurrence_spread([one, two], min_ns=9_000.0)
    assert above["across_runs"]["kernels"] == 1 and above["same_run"]["kernels"] == 1
    assert kernel_collection.occurrence_spread([one, two], min_ns=20_000.0)["same_run"] == {
        "kernels": 0,
        "median": None,
        "p90": None,
    }
    assert cli.main(["data", "spread", str(one), str(two)]) == 0
    assert "two places in one measured run" in capsys.readouterr().out
    with pytest.raises(FileNotFoundError, match="no collected parts"):
        kernel_collection.occurrence_spread([tmp_path / "empty"])
    assert cli.main(["data", "spread", str(tmp_path / "empty")]) == 2
    assert "no collected parts" in capsys.readouterr().err
