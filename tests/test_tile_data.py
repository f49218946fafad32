"""Tests of tpucost.tile_data: the tile data set, its storage, collection, merging, splits, TpuGraphs.

Collection mechanics run against a small fake of `tpucost.experiments.tiles` (deterministic shapes, configs,
features, graphs and "runtimes", with a count of measured problems), so they are fast and exact;
when the real `tpucost.experiments.tiles` is importable, one test also collects two tiny problems with it.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import itertools
import json
import math
import re
import types
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest
from conftest import pretend_another_machine, rand_graph

from tpucost import cli, files
from tpucost.experiments import tiles as real_tiles
from tpucost.experiments import tpugraphs
from tpucost.experiments.data import collection, tile_collection
from tpucost.experiments.data import tile as tile_data
from tpucost.experiments.data.tile import MISSING, TileProblem
from tpucost.method import device, features

# ------------------------------------------------------------------------------------ the fake


class FakeFamily(NamedTuple):
    name: str
    dims: tuple[str, ...]
    block_keys: tuple[str, ...]


FAKE_FAMILIES = {
    "matmul": FakeFamily("matmul", ("m", "n", "k"), ("block_m", "block_n", "block_k")),
    "softmax": FakeFamily("softmax", ("rows", "cols"), ("block_rows",)),
    "attention": FakeFamily("attention", ("seq", "head"), ("block_q", "block_k")),
    "reduce": FakeFamily("reduce", ("rows", "cols"), ("block_rows", "block_cols")),
}
BLOCKS = (8, 16, 32)


def make_fake_tiles() -> types.SimpleNamespace:
    """A stand-in for `tpucost.experiments.tiles` with its API; ``fake.measured`` lists every measured problem."""
    fake = types.SimpleNamespace(
        TILE_FAMILIES=FAKE_FAMILIES,
        measured=[],
        lowerings=[],
        fail_on=None,
        tile_lowering=real_tiles.tile_lowering,
    )
    fake.CONFIG_FEATURE_NAMES = ("log_block0", "log_block1", "log_block2", "log_problem", "log_grid")

    def family(name):
        return FAKE_FAMILIES[name]

    def sample_shapes(name, n, rng, backend=None):
        return [
            tuple(int(x) for x in rng.choice([8, 16, 32, 64, 128], size=len(FAKE_FAMILIES[name].dims)))
            for _ in range(n)
        ]

    def legal_configs(name, shape, dtype="float32", backend=None):
        keys = FAKE_FAMILIES[name].block_keys
        choices = [[b for b in BLOCKS if shape[j % len(shape)] % b == 0] for j in range(len(keys))]
        return [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*choices)]

    def grid(shape, config):
        keys = list(config)
        return math.prod(shape[j % len(shape)] // config[k] for j, k in enumerate(keys))

    def config_features(name, shape, dtype, config):
        vals = [math.log2(v) for v in config.values()] + [0.0] * 3
        return np.array([*vals[:3], math.log2(math.prod(shape)), math.log2(grid(shape, config))], np.float32)

    def kernel_graph(name, shape, dtype="float32"):
        n = 2 + len(shape)
        feats = np.zeros((n, features.NUM_NODE_FEATURES), np.float32)
        feats[:, 35 : 35 + len(shape)] = np.log1p(np.asarray(shape, np.float32))
        feats[:, 0] = dtype == "float32"
        return features.KernelGraph(
            opcodes=np.full(n, sorted(FAKE_FAMILIES).index(name) + 1, np.int32),
            node_features=feats,
            senders=np.arange(n - 1, dtype=np.int32),
            receivers=np.arange(1, n, dtype=np.int32),
            name=name,
            kind="fake",
        )

    def measure_configs(name, shape, dtype, configs, repeats=5, warmup=1, lowering=None):
        fake.measured.append(tile_data.problem_key(name, shape, dtype))
        fake.lowerings.append(lowering)
        if fake.fail_on is not None:
            fake.fail_on(len(fake.measured))
        return [100.0 + math.prod(shape) / math.prod(c.values()) * 7 + grid(shape, c) for c in configs]

    fake.family, fake.sample_shapes, fake.legal_configs = family, sample_shapes, legal_configs
    fake.config_features, fake.kernel_graph, fake.measure_configs = (
        config_features,
        kernel_graph,
        measure_configs,
    )
    return fake


@pytest.fixture
def fake(monkeypatch):
    tiles = make_fake_tiles()
    monkeypatch.setattr(tile_collection, "tiles", tiles)
    return tiles


KW = dict(max_configs=3, repeats=1, progress=False)

# ------------------------------------------------------------------------------ in memory, disk


def synthetic(n_problems: int = 5, seed: int = 0) -> tile_data.TileDataset:
    """Problems of two families whose configs have different keys (so MISSING columns occur)."""
    rng = np.random.default_rng(seed)
    problems = []
    for i in range(n_problems):
        fam = ("matmul", "softmax", "attention", "layernorm")[i % 4]
        c = int(rng.integers(1, 5))
        configs = (
            [{"block_m": 8 * (j + 1), "block_n": 16, "block_k": 32} for j in range(c)]
            if fam not in ("softmax", "layernorm")
            else [{"block_rows": 8 * (j + 1)} for j in range(c)]
        )
        problems.append(
            TileProblem(
                fam,
                f"{8 * (i + 1)},{16 + i}",
                "float32",
                rand_graph(rng, int(rng.integers(1, 6))),
                configs,
                rng.random((c, 4)).astype(np.float32),
                rng.uniform(1e3, 1e6, c),
            )
        )
    return tile_data.from_problems(
        problems, source="tpucost", device=device.fingerprint(), config_feature_names=("a", "b", "c", "d")
    )


def test_dataset_accessors_and_round_trip(tmp_path):
    ds = synthetic()
    assert len(ds) == 5 and ds.num_config_features == 4 and ds.config_feature_names == ("a", "b", "c", "d")
    assert ds.config_keys == ("block_m", "block_n", "block_k", "block_rows")
    assert list(ds.configs(0)[0]) == ["block_m", "block_n", "block_k"]  # the family's key order
    assert ds.configs(1) and all(set(c) == {"block_rows"} for c in ds.configs(1))  # softmax: no MISSING keys
    configs = ds.table.groups["config"]
    assert configs.columns["config_values"][configs.offsets[1], 0] == MISSING
    assert (
        sum(len(ds.configs(i)) for i in range(len(ds)))
        == ds.num_configs
        == configs.columns["config_feat"].shape[0]
    )
    assert ds.config_features(2).shape == (len(ds.configs(2)), 4) and ds.runtime_ns(2).dtype == np.float64
    assert (
        ds.problem_id[0] == f"matmul|{ds.shape[0]}|float32" and ds.graph(0).num_nodes == ds.table.n_nodes[0]
    )

    tile_data.save_dataset(ds, tmp_path / "d")
    assert sorted(p.name for p in (tmp_path / "d").iterdir()) == ["device.json", "schema.json", "tiles.npz"]
    back = tile_data.load_dataset(tmp_path / "d")
    assert back.equals(ds) and back.root == tmp_path / "d" and back.device == ds.device
    for i in range(len(ds)):
        a, b = ds.problem(i), back.problem(i)
        assert (a.family, a.shape, a.dtype, a.configs) == (b.family, b.shape, b.dtype, b.configs)
        np.testing.assert_array_equal(a.runtime_ns, b.runtime_ns)
        np.testing.assert_array_equal(a.config_features, b.config_features)
        for x, y in zip(a.graph[:4], b.graph[:4], strict=True):
            np.testing.assert_array_equal(x, y)
    sub = ds.subset([3, 1])
    assert sub.family.tolist() == [ds.family[3], ds.family[1]] and sub.configs(0) == ds.configs(3)
    np.testing.assert_array_equal(sub.graph(1).node_features, ds.graph(1).node_features)
    assert not sub.equals(ds)
    with open(tmp_path / "d" / "schema.json") as f:
        schema = json.load(f)
    assert schema["features"]["layout"] == features.layout_fingerprint()
    assert schema["features"]["num_node_features"] == features.NUM_NODE_FEATURES
    assert back.features == dataclasses.replace(features.TPUCOST_FEATURES, num_config_features=4)


def _save(tmp_path: Path) -> Path:
    return tile_data.save_dataset(synthetic(), tmp_path / "d")


def _edit_npz(root: Path, **changes) -> None:
    with np.load(root / "tiles.npz", allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    for k, v in changes.items():
        if v is None:
            del arrays[k]
        else:
            arrays[k] = v(arrays[k]) if callable(v) else v
    np.savez(root / "tiles.npz", **arrays)


def _edit_json(root: Path, name: str, **changes) -> None:
    doc = json.loads((root / name).read_text())
    for k, v in changes.items():
        if v is None:
            del doc[k]
        else:
            doc[k] = v
    (root / name).write_text(json.dumps(doc))


CORRUPTIONS = {
    "no schema.json": ("schema.json", None, lambda r: (r / "schema.json").unlink()),
    "no tiles.npz": ("tiles.npz", None, lambda r: (r / "tiles.npz").unlink()),
    "no device.json": ("device.json", None, lambda r: (r / "device.json").unlink()),
    "schema not JSON": ("schema.json", None, lambda r: (r / "schema.json").write_text("{oops")),
    "device not an object": ("device.json", None, lambda r: (r / "device.json").write_text("[1, 2]")),
    "tiles.npz garbage": ("tiles.npz", None, lambda r: (r / "tiles.npz").write_bytes(b"not a zip")),
    "schema without config_keys": ("schema.json", "config_keys", lambda r: _edit_json(r, "schema.json", config_keys=None)),
    "schema family keys": ("schema.json", "family_config_keys", lambda r: _edit_json(r, "schema.json", family_config_keys={"matmul": ["x"]})),
    "schema family missing": ("tiles.npz", "family", lambda r: _edit_json(r, "schema.json", family_config_keys={})),
    "schema feature spec": ("schema.json", "features", lambda r: _edit_json(r, "schema.json", features={"layout": "x"})),
    "format version": ("schema.json", "format_version", lambda r: _edit_json(r, "schema.json", format_version=99)),
    "npz format version": ("tiles.npz", "format_version", lambda r: _edit_npz(r, format_version=None)),
    "schema source": ("schema.json", "source", lambda r: _edit_json(r, "schema.json", source="elsewhere")),
    "schema count": ("tiles.npz", "family", lambda r: _edit_json(r, "schema.json", problems=6)),
    "config features not counted": ("schema.json", "features", lambda r: _edit_json(
        r, "schema.json", features=features.TPUCOST_FEATURES.to_dict())),
    "missing config_offsets": ("tiles.npz", "config_offsets", lambda r: _edit_npz(r, config_offsets=None)),
    "node_features float64": ("tiles.npz", "node_features", lambda r: _edit_npz(r, node_features=lambda a: a.astype(np.float64))),
    "family not strings": ("tiles.npz", "family", lambda r: _edit_npz(r, family=lambda a: np.arange(len(a)))),
    "node offsets inconsistent": ("tiles.npz", "node_offsets", lambda r: _edit_npz(r, node_offsets=lambda a: a + 1)),
    "config offsets decreasing": ("tiles.npz", "config_offsets", lambda r: _edit_npz(r, config_offsets=lambda a: a[::-1].copy())),
    "edge outside its graph": ("tiles.npz", "senders", lambda r: _edit_npz(r, senders=lambda a: a + 100)),
    "runtime NaN": ("tiles.npz", "config_runtime_ns", lambda r: _edit_npz(r, config_runtime_ns=lambda a: a * np.nan)),
    "runtime zero": ("tiles.npz", "config_runtime_ns", lambda r: _edit_npz(r, config_runtime_ns=lambda a: a * 0)),
    "config_values one column short": ("tiles.npz", "config_values", lambda r: _edit_npz(r, config_values=lambda a: a[:, :-1])),
    "config_feat 1-d": ("tiles.npz", "config_feat", lambda r: _edit_npz(r, config_feat=lambda a: a.reshape(-1))),
    "pickled objects": ("tiles.npz", "dtype", lambda r: _edit_npz(r, dtype=lambda a: np.array([None] * len(a), object))),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(CORRUPTIONS))
def test_malformed_folders_raise_value_error_naming_file_and_field(tmp_path, case):
    file, field, corrupt = CORRUPTIONS[case]
    root = _save(tmp_path)
    tile_data.load_dataset(root)  # loads before the corruption
    corrupt(root)
    with pytest.raises(ValueError) as info:
        tile_data.load_dataset(root)
    msg = str(info.value)
    assert str(root / file) in msg, msg
    if field is not None:
        assert f"field {field!r}" in msg, msg


def test_a_tile_data_set_of_another_feature_layout_still_loads(tmp_path):
    """Checked against its own spec, not tpucost's current layout."""
    root = _save(tmp_path)
    _edit_json(
        root,
        "schema.json",
        features={**features.TPUCOST_FEATURES.to_dict(), "layout": "0" * 64, "num_config_features": 4},
    )
    assert tile_data.load_dataset(root).features.layout == "0" * 64


def test_missing_data_sets_say_what_to_do(tmp_path, monkeypatch):
    with pytest.raises(FileNotFoundError, match="collect"):
        tile_data.load_dataset(tmp_path)
    collection.append_log(tmp_path, {"status": "start"})
    with pytest.raises(FileNotFoundError, match="finalize"):
        tile_data.load_dataset(tmp_path)
    monkeypatch.setenv(files.DATA_DIR_ENV, str(tmp_path / "nowhere"))
    assert tile_data.default_data_dir() == tmp_path / "nowhere" / "tiles_cpu"
    with pytest.raises(FileNotFoundError, match=files.DATA_DIR_ENV):
        tile_data.load_dataset()
    tile_data.save_dataset(synthetic(), tmp_path / "nowhere" / "tiles_cpu")
    assert len(tile_data.load_dataset()) == 5


def test_from_problems_refuses_inconsistent_records():
    ds = synthetic(1)
    p = ds.problem(0)
    with pytest.raises(ValueError, match="configs"):
        tile_data.from_problems(
            [p._replace(runtime_ns=np.ones(len(p.configs) + 1))],
            source="tpucost",
            device={},
            config_feature_names=ds.config_feature_names,
        )
    with pytest.raises(ValueError, match="config_feat"):
        tile_data.from_problems(
            [p], source="tpucost", device={}, config_feature_names=("only", "three", "names")
        )
    with pytest.raises(ValueError, match="node_features"):
        tile_data.from_problems([p], source="tpugraphs", device={}, config_feature_names=tuple("abcd"))


# ------------------------------------------------------------------------- problems and configs


def test_problem_list_is_deterministic_prefix_stable_and_even(fake):
    a = tile_collection.problem_list(11, seed=0)
    assert a == tile_collection.problem_list(11, seed=0) and len(a) == 11 == len(set(a))
    assert tile_collection.problem_list(5, seed=0) == a[:5]
    assert tile_collection.problem_list(40, seed=0)[:11] == a
    assert tile_collection.problem_list(11, seed=1) != a
    counts = {f: sum(p[0] == f for p in a) for f in FAKE_FAMILIES}
    assert max(counts.values()) - min(counts.values()) <= 1, counts
    assert [p[0] for p in a[:4]] == sorted(FAKE_FAMILIES)
    only = tile_collection.problem_list(6, seed=0, families=["softmax"], dtypes=("float32", "bfloat16"))
    assert {p[0] for p in only} == {"softmax"} and [p[2] for p in only[:3]] == [
        "float32",
        "bfloat16",
        "float32",
    ]
    with pytest.raises(ValueError, match="unknown tile families"):
        tile_collection.problem_list(3, families=["nope"])
    # softmax in the fake has 5 x 5 = 25 shapes: asking for more ends when they run out
    assert len(tile_collection.problem_list(100, families=["softmax"])) == 25


def test_select_configs_keeps_extremes_and_spreads(fake):
    configs = fake.legal_configs("matmul", (32, 32, 32), "float32")
    assert len(configs) == 27
    key = tile_data.problem_key("matmul", (32, 32, 32), "float32")
    keep = tile_collection.select_configs(configs, 6, key, fake.family("matmul").block_keys)
    assert len(keep) == 6 and keep == tile_collection.select_configs(configs, 6, key)
    assert {"block_m": 8, "block_n": 8, "block_k": 8} in keep and {
        "block_m": 32,
        "block_n": 32,
        "block_k": 32,
    } in keep
    assert keep == [c for c in configs if c in keep]  # legal_configs order
    volumes = sorted(math.prod(c.values()) for c in keep)
    assert len(set(volumes)) >= 4  # spread over the range of block volumes, not clustered
    # pairs of equal volume and another shape, which a ranking by volume cannot order
    assert len(volumes) - len(set(volumes)) == 2
    other = tile_collection.select_configs(
        configs, 6, tile_data.problem_key("matmul", (32, 32, 32), "bfloat16")
    )
    assert other[0] == keep[0] and other[-1] == keep[-1]
    assert tile_collection.select_configs(configs, 2, key) == [configs[0], configs[-1]]
    assert tile_collection.select_configs(configs, 1, key) == [configs[-1]]
    assert (
        tile_collection.select_configs(configs, 100, key)
        == configs
        == tile_collection.select_configs(configs, None, key)
    )


# ----------------------------------------------------------------------------------- collection


def test_collect_logs_each_problem_and_resumes_without_remeasuring(fake, tmp_path):
    out = tmp_path / "run"
    ds = tile_collection.collect(out, 2, seed=0, **KW)
    first = list(fake.measured)
    assert len(first) == 2 and len(ds) == 2
    log = collection.read_log(out)
    ok = [e for e in log if e["status"] == "ok"]
    assert [tile_data.problem_key(e["family"], e["shape"], e["dtype"]) for e in ok] == first
    for e in ok:
        assert set(e) >= {
            "family",
            "shape",
            "dtype",
            "configs",
            "runtime_ns",
            "wall_s",
            "device_id",
            "load_average",
            "time",
        }
        assert 1 <= len(e["configs"]) <= 3 and len(e["runtime_ns"]) == len(e["configs"])
        assert e["device_id"] == device.fingerprint()["id"]
    assert {p.name for p in out.iterdir()} >= {
        "tiles.npz",
        "schema.json",
        "device.json",
        "log.jsonl",
        "PROVENANCE.md",
    }
    prov = (out / "PROVENANCE.md").read_text()
    assert "collect(" in prov and "problems: 2" in prov and device.fingerprint()["id"] in prov

    grown = tile_collection.collect(out, 5, seed=0, **KW)
    assert fake.measured[:2] == first and len(fake.measured) == 5  # only the 3 new problems measured
    assert len(grown) == 5 and set(grown.problem_id) == {
        tile_data.problem_key(*p) for p in tile_collection.problem_list(5)
    }
    assert tile_data.load_dataset(out).equals(grown)
    old = {pid: i for i, pid in enumerate(ds.problem_id)}
    for j, pid in enumerate(grown.problem_id):
        if pid in old:
            np.testing.assert_array_equal(grown.runtime_ns(j), ds.runtime_ns(old[pid]))
    # each problem's graph and config features are the tiles module's, configs the kept ones
    for i in range(len(grown)):
        p = grown.problem(i)
        shape = tuple(int(d) for d in p.shape.split(","))
        np.testing.assert_array_equal(
            p.graph.node_features, fake.kernel_graph(p.family, shape, p.dtype).node_features
        )
        np.testing.assert_array_equal(
            p.config_features, [fake.config_features(p.family, shape, p.dtype, c) for c in p.configs]
        )
        assert p.configs == tile_collection.select_configs(
            fake.legal_configs(p.family, shape), 3, grown.problem_id[i]
        )
    assert tile_collection.collect(out, 5, seed=0, **KW).equals(grown) and len(fake.measured) == 5


def test_a_killed_run_keeps_the_finished_problems(fake, tmp_path):
    def die(n):
        if n == 2:
            raise KeyboardInterrupt  # like a kill: not caught as a measuring error

    fake.fail_on = die
    with pytest.raises(KeyboardInterrupt):
        tile_collection.collect(tmp_path / "killed", 4, **KW)
    ok = [e for e in collection.read_log(tmp_path / "killed") if e["status"] == "ok"]
    assert (
        len(ok) == 1
        and tile_data.problem_key(ok[0]["family"], ok[0]["shape"], ok[0]["dtype"]) == fake.measured[0]
    )
    assert not (tmp_path / "killed" / "tiles.npz").exists()
    assert len(tile_collection.finalize(tmp_path / "killed")) == 1  # what was measured is usable
    with open(tmp_path / "killed" / "log.jsonl", "a") as fh:
        fh.write('{"family": "matmul", "sha')  # a line torn by the kill
    fake.fail_on, killed_first = None, fake.measured[0]
    fake.measured.clear()
    resumed = tile_collection.collect(tmp_path / "killed", 4, **KW)
    assert killed_first not in fake.measured and len(fake.measured) == 3
    statuses = [e["status"] for e in collection.read_log(tmp_path / "killed")]
    assert statuses.count("ok") == 4 and statuses.count("start") == 2  # no line lost to the tear
    fake.measured.clear()
    assert resumed.equals(tile_collection.collect(tmp_path / "straight", 4, **KW))


def test_a_failing_problem_is_logged_and_not_retried(fake, tmp_path):
    def fail(n):
        if n == 2:
            raise RuntimeError("Mosaic lowering failed")

    fake.fail_on = fail
    ds = tile_collection.collect(tmp_path, 3, **KW)
    errors = [e for e in collection.read_log(tmp_path) if e["status"] == "error"]
    assert len(errors) == 1 and "Mosaic lowering failed" in errors[0]["error"] and len(ds) == 2
    assert (
        tile_data.problem_key(errors[0]["family"], errors[0]["shape"], errors[0]["dtype"])
        not in ds.problem_id
    )
    fake.fail_on = None
    tile_collection.collect(tmp_path, 3, **KW)
    assert len(fake.measured) == 3


def test_max_load_pauses_before_a_problem(fake, tmp_path, monkeypatch):
    loads = iter([9.0, 9.0, 9.0, 0.5])  # busy, busy (start line, first check), ... then quiet
    sleeps = []
    monkeypatch.setattr(collection, "load_average", lambda: next(loads, 0.5))
    monkeypatch.setattr(collection.time, "sleep", sleeps.append)
    tile_collection.collect(tmp_path, 2, max_load=2.0, **KW)
    ok = [e for e in collection.read_log(tmp_path) if e["status"] == "ok"]
    assert sleeps == [15.0, 15.0] and ok[0]["paused_s"] == 30.0 and ok[1]["paused_s"] == 0.0
    assert ok[0]["load_average"] == 0.5


def test_shards_are_disjoint_and_merge_equals_one_run(fake, tmp_path):
    whole = tile_collection.collect(tmp_path / "whole", 7, **KW)
    parts = [tile_collection.collect(tmp_path / f"s{i}", 7, shard=(i, 3), **KW) for i in range(3)]
    ids = [set(p.problem_id) for p in parts]
    assert all(ids) and sum(map(len, ids)) == 7 and set.union(*ids) == set(whole.problem_id)
    assert not (ids[0] & ids[1]) and not (ids[0] & ids[2]) and not (ids[1] & ids[2])
    merged = tile_collection.merge([tmp_path / f"s{i}" for i in (2, 0, 1)], tmp_path / "merged")
    assert merged.equals(whole)
    assert tile_data.load_dataset(tmp_path / "merged").equals(whole)
    assert collection.read_device(tmp_path / "merged") == whole.device
    assert len([e for e in collection.read_log(tmp_path / "merged") if e["status"] == "ok"]) == 7
    assert "merge(" in (tmp_path / "merged" / "PROVENANCE.md").read_text()
    assert tile_collection.finalize(tmp_path / "merged").equals(whole)
    with pytest.raises(ValueError, match="shard"):
        tile_collection.collect(tmp_path / "bad", 3, shard=(3, 3), **KW)


def test_one_device_per_folder_and_per_merge(fake, tmp_path, monkeypatch):
    tile_collection.collect(tmp_path / "here", 2, shard=(0, 2), **KW)
    with monkeypatch.context() as m:
        pretend_another_machine(m)
        with pytest.raises(ValueError, match="a data set comes from one device"):
            tile_collection.collect(tmp_path / "here", 2, shard=(0, 2), **KW)
        tile_collection.collect(tmp_path / "there", 2, shard=(1, 2), **KW)
    with pytest.raises(ValueError, match="Some Other CPU"):
        tile_collection.merge([tmp_path / "here", tmp_path / "there"], tmp_path / "merged")
    (tmp_path / "there" / "device.json").unlink()
    with pytest.raises(ValueError, match="device.json"):
        tile_collection.merge([tmp_path / "here", tmp_path / "there"], tmp_path / "merged")


def test_a_folder_holds_one_lowering_and_the_data_set_records_it(fake, tmp_path):
    """The lowering reaches every measurement, the log's start line and the data set's schema; a
    folder (or a merge) of another lowering's labels is refused."""
    ds = tile_collection.collect(tmp_path / "loop", 2, lowering="xla_loop", **KW)
    assert fake.lowerings == ["xla_loop", "xla_loop"] and ds.lowering == "xla_loop"
    assert tile_data.load_dataset(tmp_path / "loop").lowering == "xla_loop"
    assert json.loads((tmp_path / "loop" / "schema.json").read_text())["lowering"] == "xla_loop"
    with pytest.raises(ValueError, match="'xla_loop' tile lowering, not 'pallas'"):
        tile_collection.collect(tmp_path / "loop", 3, lowering="pallas", **KW)
    tile_collection.collect(tmp_path / "pallas", 2, shard=(1, 2), lowering="pallas", **KW)
    with pytest.raises(ValueError, match="mixes tile lowerings"):
        tile_collection.merge([tmp_path / "loop", tmp_path / "pallas"], tmp_path / "merged")
    with pytest.raises(ValueError, match="unknown tile lowering"):
        tile_collection.collect(tmp_path / "other", 1, lowering="mosaic", **KW)


def test_a_data_set_written_before_lowerings_is_a_pallas_one(tmp_path):
    ds = synthetic()
    tile_data.save_dataset(ds, tmp_path)
    schema = json.loads((tmp_path / "schema.json").read_text())
    del schema["lowering"]
    (tmp_path / "schema.json").write_text(json.dumps(schema))
    assert tile_data.load_dataset(tmp_path).lowering == "pallas"
    schema["lowering"] = "mosaic"
    (tmp_path / "schema.json").write_text(json.dumps(schema))
    with pytest.raises(ValueError, match="field 'lowering'"):
        tile_data.load_dataset(tmp_path)


# ---------------------------------------------------------------------------------------- splits


def test_random_split_partitions_problems():
    ds = synthetic(30)
    split = tile_data.split_random(ds, seed=0)
    parts = [split.train, split.val, split.test]
    assert sorted(np.concatenate(parts).tolist()) == list(range(30))
    assert [len(p) for p in parts] == [24, 3, 3]
    assert np.array_equal(split.train_ids, np.sort(ds.problem_id[split.train]))
    again = tile_data.split_random(ds, seed=0)
    assert all(np.array_equal(a, b) for a, b in zip(split, again, strict=True))
    assert not np.array_equal(tile_data.split_random(ds, seed=1).train, split.train)
    with pytest.raises(ValueError, match="fractions"):
        tile_data.split_random(ds, fractions=(0.5, 0.5))
    assert np.array_equal(tile_data.split(ds, "random", seed=1).test, tile_data.split_random(ds, seed=1).test)
    assert np.array_equal(tile_data.split(ds, "hard").test, tile_data.split_hard(ds).test)
    with pytest.raises(ValueError, match="unknown split"):
        tile_data.split(ds, "easy")


def test_hard_split_holds_out_whole_families():
    ds = synthetic(30)
    split = tile_data.split_hard(ds)
    assert set(ds.family[split.test]) == {"attention"} and set(ds.family[split.val]) == {"layernorm"}
    assert set(ds.family[split.train]) == {"matmul", "softmax"}
    assert sorted(np.concatenate(list(split)).tolist()) == list(range(30))
    assert len(split.test) == int(np.sum(ds.family == "attention"))
    custom = tile_data.split_hard(ds, test_families=("matmul",), val_families=())
    assert set(ds.family[custom.test]) == {"matmul"} and len(custom.val) == 0
    with pytest.raises(ValueError, match="conv"):
        tile_data.split_hard(ds, val_families=("conv",))
    with pytest.raises(ValueError, match="both"):
        tile_data.split_hard(ds, test_families=("matmul",), val_families=("matmul",))


# ------------------------------------------------------------------------------------ TpuGraphs


def _tpugraphs_file(path: Path, seed: int, runtimes=None) -> dict[str, np.ndarray]:
    """A kernel in the published TpuGraphs tile format (as tests/test_tpugraphs.py writes one)."""
    rng = np.random.default_rng(seed)
    n, c = 4 + seed, 3
    arrays = {
        "node_feat": rng.normal(size=(n, 140)).astype(np.float32),
        "node_opcode": rng.integers(0, 120, size=n).astype(np.int32),
        "edge_index": np.array([[j + 1, j] for j in range(n - 1)], dtype=np.int32),  # [consumer, producer]
        "config_feat": rng.normal(size=(c, 24)).astype(np.float32),
        "config_runtime": np.asarray(
            runtimes if runtimes is not None else rng.integers(1_000, 10**6, c), np.int64
        ),
        "config_runtime_normalizers": np.full(c, 5_000, dtype=np.int64),
    }
    np.savez(path, **arrays)
    return arrays


def test_from_tpugraphs(tmp_path):
    src = tmp_path / "tile"
    src.mkdir()
    a = _tpugraphs_file(src / "alexnet_train_batch_32_-1bae27a41d70f4a7.npz", 0)
    b = _tpugraphs_file(
        src / "resnet_v1_50_official_batch_128_bf16_7f3c0e2a9d1b4c55.npz", 1, runtimes=[0, 2_000, 3_000]
    )
    _tpugraphs_file(src / "zero_-00000000deadbeef.npz", 2, runtimes=[0, 0, 0])
    ds = tile_data.from_tpugraphs(src)
    assert len(ds) == 2 and ds.source == "tpugraphs" and ds.device == {"name": "TPU v3 (TpuGraphs)"}
    assert (
        ds.family.tolist() == ["tpugraphs"] * 2 and ds.shape[0] == "alexnet_train_batch_32_-1bae27a41d70f4a7"
    )
    assert (
        ds.num_config_features == 24
        and ds.features.num_node_features == 140
        and ds.config_keys == ("config",)
    )
    assert ds.features == tpugraphs.TILE_FEATURES
    assert ds.configs(0) == [{"config": 0}, {"config": 1}, {"config": 2}]
    assert ds.configs(1) == [{"config": 1}, {"config": 2}]  # the zero runtime is dropped
    np.testing.assert_array_equal(ds.runtime_ns(0), a["config_runtime"].astype(np.float64))
    np.testing.assert_array_equal(ds.config_features(0), a["config_feat"])
    np.testing.assert_array_equal(ds.config_features(1), b["config_feat"][1:])
    g = ds.graph(0)
    np.testing.assert_array_equal(g.node_features, a["node_feat"])
    np.testing.assert_array_equal(g.senders, a["edge_index"][:, 1])  # producer -> consumer
    tile_data.save_dataset(ds, tmp_path / "tg")
    assert tile_data.load_dataset(tmp_path / "tg").equals(ds)
    assert len(tile_data.from_tpugraphs(src, limit=1)) == 1
    by_model = tile_data.from_tpugraphs(src, family=None)
    assert by_model.family.tolist() == ["alexnet_train_batch_32", "resnet_v1_50_official_batch_128_bf16"]
    assert tile_data.split_hard(by_model, ("alexnet_train_batch_32",), ()).test.tolist() == [0]
    bad = src / "broken.npz"
    np.savez(bad, node_feat=np.zeros((2, 140), np.float32))
    with pytest.raises(ValueError, match=re.escape("broken.npz: field 'node_opcode'")):
        tile_data.from_tpugraphs(src)


# ----------------------------------------------------------------------------------------- stats


def test_stats():
    ds = synthetic(7)
    st = tile_data.stats(ds)
    assert st["problems"] == 7 and st["configs"] == ds.num_configs and st["source"] == "tpucost"
    assert st["problems_per_family"] == {"attention": 2, "layernorm": 1, "matmul": 2, "softmax": 2}
    assert sum(st["configs_per_family"].values()) == ds.num_configs
    per = ds.configs_per_problem
    assert st["configs_per_problem"] == {"min": per.min(), "median": float(np.median(per)), "max": per.max()}
    assert (
        st["runtime_ns"]["min"] == ds.config_runtime_ns.min()
        and st["runtime_ns"]["max"] == ds.config_runtime_ns.max()
    )
    assert st["best_over_worst"]["min"] >= 1.0
    spread = {
        f: [ds.runtime_ns(i).max() / ds.runtime_ns(i).min() for i in range(len(ds)) if ds.family[i] == f]
        for f in st["problems_per_family"]
    }
    assert st["best_over_worst_per_family"] == pytest.approx({f: np.median(v) for f, v in spread.items()})
    json.dumps(st)


def test_cli_tile_stats_prints_the_spreads(capsys):
    """`data stats --task tile` on the bundled tile data: the tile page's spreads come from it."""
    assert cli.main(["data", "stats", "--task", "tile", "--json"]) == 0
    st = json.loads(capsys.readouterr().out)
    assert st["problems"] == len(tile_data.load_dataset())
    assert cli.main(["data", "stats", "--task", "tile"]) == 0
    out = capsys.readouterr().out
    assert f"best_over_worst: min {st['best_over_worst']['min']:.4g}" in out
    assert f"reduce {st['best_over_worst_per_family']['reduce']:.4g}" in out


# ------------------------------------------------------------------------- with the real tiles


@pytest.mark.skipif(
    importlib.util.find_spec("tpucost.experiments.tiles") is None,
    reason="tpucost.experiments.tiles is not there yet",
)
@pytest.mark.measures
def test_collect_with_the_real_tiles_module(tmp_path, monkeypatch):
    from tpucost.experiments import tiles

    family = "softmax" if "softmax" in tiles.TILE_FAMILIES else sorted(tiles.TILE_FAMILIES)[0]
    ds = tile_collection.collect(tmp_path, 2, families=[family], max_configs=2, repeats=1, progress=False)
    assert (
        len(ds) == 2
        and set(ds.family) == {family}
        and ds.num_config_features == len(tiles.CONFIG_FEATURE_NAMES)
    )
    assert all(1 <= len(ds.configs(i)) <= 2 for i in range(len(ds))) and np.all(ds.config_runtime_ns > 0)
    calls = []
    monkeypatch.setattr(tiles, "measure_configs", lambda *a, **k: calls.append(a) or [1.0] * len(a[3]))
    assert tile_collection.collect(tmp_path, 3, families=[family], max_configs=2, repeats=1, progress=False)
    assert len(calls) == 1  # only the third problem


def test_sample_problems_are_distinct_sorted_and_fixed_by_the_seed():
    """The noise floor and the overhead share re-measure the same problems for the same seed."""
    chosen = tile_collection.sample_problems(308, 20, seed=0)
    assert len(chosen) == 20 and len(set(chosen.tolist())) == 20 and np.all(np.diff(chosen) > 0)
    assert np.array_equal(chosen, tile_collection.sample_problems(308, 20, seed=0))
    assert not np.array_equal(chosen, tile_collection.sample_problems(308, 20, seed=1))
    assert tile_collection.sample_problems(5, 20, seed=0).tolist() == [0, 1, 2, 3, 4]  # all of a small set
