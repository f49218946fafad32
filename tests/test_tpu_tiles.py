"""The tile task on real TPU measurements (`tpucost.experiments.tpu_tiles`): TpuGraphs' raw sweeps.

Expected figures come from the provenance README (/work/shared/tpu-ground-truth/README.md, copied
into docs/tiles.md), from the raw protobuf fields read here with the low-level `wire` calls, or by
hand; not from the module under test.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from tpucost import cli
from tpucost.experiments import tpu_tiles
from tpucost.method import wire


@pytest.fixture(scope="module")
def sweeps():
    return tpu_tiles.load_tpu_sweeps()


@pytest.fixture(scope="module")
def quick():
    """`evaluate` without the learned model (the baselines only: fast)."""
    return tpu_tiles.evaluate(learned=False)


def test_counts_match_the_provenance_readme(sweeps):
    assert len(sweeps) == 15
    assert sum(len(k.configs) for k in sweeps) == 752  # 754 runs, 2 with error
    assert all(sum(c.is_default for c in k.configs) == 1 for k in sweeps)
    by_name = {k.name: k for k in sweeps}
    k = by_name["fusion.191"]
    t = k.runtimes
    assert len(k.configs) == 579  # 581 runs less the 2 errors
    assert t[k.default_index] == 151_565
    assert (t.min(), t.max()) == (137_344, 3_963_794)
    assert int(np.sum(t < 151_565)) == 8
    assert k.kernel.kind == "kOutput" and "convolution" in k.hlo_text
    assert max(len(k.configs) for k in sweeps if k.name != "fusion.191") == 61


def _raw_runs(module_index: int) -> list[tuple[int, bool]]:
    """(compute_time_ns, is_default) of one module's runs, straight from the protobuf fields."""
    buf = tpu_tiles.default_path().read_bytes()
    module = wire.field_values(buf, 1)[module_index]
    out = []
    for run in wire.field_values(module, 3):
        profile = wire.field_values(run, 4)[0]
        out.append((wire.field_values(profile, 4)[0], bool(wire.field_values(run, 5))))
    return out


def test_default_rank_by_hand(quick):
    runs = _raw_runs(12)  # reshape.37: three runs of one (empty) configuration
    assert runs == [(270_591, True), (504_700, False), (238_068, False)]
    # by hand: 238,068 < 270,591 (the default) < 504,700 -> the default is 2nd of 3
    rows = {r["kernel"]: r for r in quick["per_kernel"]}
    assert rows["reshape.37"]["default_rank"] == 2
    assert rows["reshape.37"]["faster_than_default"] == 1
    assert rows["fusion.191"]["default_rank"] == 9  # README: 8 configurations faster than the default


def test_damaged_files_fail_in_one_line_naming_the_file(tmp_path):
    data = tpu_tiles.default_path().read_bytes()
    truncated = tmp_path / "truncated.pb"
    truncated.write_bytes(data[: len(data) // 2])
    garbled = tmp_path / "garbled.pb"  # a copy that went through a lossy UTF-8 decode
    garbled.write_bytes(data.decode("utf-8", errors="replace").encode("utf-8"))
    for path in (truncated, garbled):
        with pytest.raises(ValueError) as err:
            tpu_tiles.load_tpu_sweeps(path)
        assert str(path) in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(ValueError, match="cannot read"):
        tpu_tiles.load_tpu_sweeps(tmp_path / "missing.pb")


def test_24_config_features_of_a_hand_written_config():
    # TpuGraphs' FeaturizeTileSizeConfig: per list, 6 leading values (0-padded), sum, product (0 if empty)
    row = tpu_tiles.config_features((3, 1, 24, 3), (12, 4, 4, 3, 2, 1, 5), ())
    expected = [3, 1, 24, 3, 0, 0, 31, 216] + [12, 4, 4, 3, 2, 1, 31, 5760] + [0] * 8
    assert row.shape == (24,) and row.dtype == np.float32
    np.testing.assert_array_equal(row, np.asarray(expected, np.float32))
    assert len(tpu_tiles.CONFIG_FEATURE_NAMES) == 24
    assert tpu_tiles.CONFIG_FEATURE_NAMES[6:8] == ("kernel_bounds_sum", "kernel_bounds_product")


def test_steps_of_fusion_191_default_by_hand(sweeps):
    k = next(k for k in sweeps if k.name == "fusion.191")
    # output f32[32,12,12,384]{3,0,2,1:T(8,128)} -> physical (12,12,32,384) -> tiles (12,12,4,3);
    # bounds (12,4,4,3): 1*3*1*1 = 3 blocks. filter f32[3,3,192,384]{3,2,1,0} -> tiles (3,3,24,3);
    # bounds (3,1,24,3): 1*3*1*1 = 3 blocks. 9 steps.
    scores = tpu_tiles.method_scores(k)
    assert scores["fewest_steps"][k.default_index] == 9
    assert scores["largest_block"][k.default_index] == pytest.approx(-np.log(12 * 4 * 4 * 3 * 3 * 24 * 3))


def test_baselines_against_hand_formulas(sweeps, quick):
    m = quick["methods"]
    assert quick["n_configs"] == 752 and quick["n_kernels"] == 15
    # the compiler's default as a pick: its top-1 is default / best - 1, averaged over kernels
    hand = np.mean([k.runtimes[k.default_index] / k.runtimes.min() - 1 for k in sweeps])
    assert m["default"]["top1"] == pytest.approx(hand)
    # a random pick's expected top-1 is mean / best - 1
    hand = np.mean([k.runtimes.mean() / k.runtimes.min() - 1 for k in sweeps])
    assert m["random_expected"]["top1"] == pytest.approx(hand)
    assert m["random_expected"]["top10"] <= m["random_expected"]["top5"] <= m["random_expected"]["top1"]
    # Kendall: 15 kernels less 3 single-configuration reshapes and the 2-configuration fusion.250
    assert all(r["n_kernels_tau"] == 11 and r["n_kernels"] == 15 for r in m.values())


@pytest.mark.slow
def test_cli_json_keys(capsys):
    assert cli.main(["evaluate", "--task", "tile", "--split", "tpu-v3", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["measured_on"] == "TPU (v3 per the TpuGraphs paper)"
    assert "op_tuning_data.pb" in out["source"] and out["n_configs"] == 752
    for name in ("analytical", "largest_block", "fewest_steps", "default", "random", "gnn_rank"):
        assert {"kendall_mean", "top1", "top5", "n_kernels", "n_configs"} <= set(out["methods"][name])
    assert len(out["per_kernel"]) == 15 and "gnn_rank_from_cpu" in out["skipped"]
    assert -1 <= out["methods"]["gnn_rank"]["kendall_mean"] <= 1


def test_cli_damaged_file_is_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.pb"
    bad.write_bytes(tpu_tiles.default_path().read_bytes()[:1000])
    assert cli.main(["evaluate", "--task", "tile", "--split", "tpu-v3", "--data", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(bad) in err


@pytest.mark.slow
def test_landscape_of_fusion_191():
    df = tpu_tiles.landscape("fusion.191")
    assert len(df) == 579 and df["is_default"].sum() == 1
    assert df["runtime_ns"].is_monotonic_increasing
    assert {"analytical_rank", "fewest_steps_rank", "gnn_rank_rank", "measured_rank"} <= set(df.columns)
    assert df.loc[df["is_default"], "measured_rank"].item() == 9
