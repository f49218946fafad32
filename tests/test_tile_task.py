"""The tile task end to end on a small real tile data set with synthetic runtimes.

Runtimes are a known function of each configuration (its grid steps and bytes moved), so a model
that learns from the configuration features can rank them and one that cannot is caught.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from tpucost.experiments import results, tile_experiments, tiles
from tpucost.experiments.data import tile as tile_data
from tpucost.method import checkpoint, device, measure, metrics, models, train
from tpucost.method.models import ModelConfig
from tpucost.method.tasks import tile as tile_task

pytestmark = pytest.mark.core  # also run on Colab's versions (make test-colab)

SHAPES = {
    "matmul": [
        (64, 256, 256),
        (128, 256, 128),
        (64, 128, 256),
        (128, 128, 256),
        (256, 128, 128),
        (64, 384, 256),
        (192, 128, 256),
        (128, 384, 128),
    ],
    "softmax": [(128, 256), (256, 128), (64, 512), (192, 256), (384, 128), (256, 256)],
}


def _runtime(family, shape, config):
    cost = tiles.tile_cost(family, shape, "float32", config)
    return 2_000.0 * cost.steps + cost.total_bytes / 50.0 + 1_000.0


@pytest.fixture(scope="module")
def dataset():
    return _dataset(SHAPES)


def _dataset(shapes_of: dict) -> tile_data.TileDataset:
    problems = []
    for family, shapes in shapes_of.items():
        for shape in shapes:
            configs = tiles.legal_configs(family, shape)[:12]
            problems.append(
                tile_data.TileProblem(
                    family,
                    ",".join(map(str, shape)),
                    "float32",
                    tiles.kernel_graph(family, shape),
                    configs,
                    np.stack([tiles.config_features(family, shape, "float32", c) for c in configs]),
                    np.asarray([_runtime(family, shape, c) for c in configs]),
                )
            )
    return tile_data.from_problems(
        problems,
        source="tpucost",
        device=device.fingerprint(),
        config_feature_names=tiles.CONFIG_FEATURE_NAMES,
    )


@pytest.fixture(scope="module")
def split(dataset):
    return tile_data.split_random(dataset, seed=0, fractions=(0.6, 0.2, 0.2))


def _config(dataset, **model):
    return train.TrainConfig(
        model=tile_task.model_config(dataset, ModelConfig(hidden=32, num_layers=2, **model)),
        learning_rate=3e-3,
        batch_size=4,
        epochs=30,
        patience=30,
        seed=0,
    )


def test_batches_have_masks_and_fixed_shapes(dataset, split):
    task = tile_task.TileTask.fit(dataset, split.train, max_configs=8)
    batch = next(task.batches(split.train, 3, 1, np.arange(len(split.train))))
    g, c = batch.config_mask.shape[1:]
    assert batch.config_features.shape == (1, g, c, len(tiles.CONFIG_FEATURE_NAMES))
    assert batch.graph_mask[0].sum() == 3 and batch.config_mask[0].sum() == 3 * 8  # subsets of 8 configs
    assert not batch.config_mask[0][~batch.graph_mask[0]].any()
    assert task.metadata()["features"] == dataset.features.to_dict()


@pytest.mark.slow
@pytest.mark.parametrize("loss", ["hinge", "mse"])
def test_training_ranks_held_out_kernels(dataset, split, loss, tmp_path):
    result = tile_task.train_model(
        dataset, split, tmp_path / loss, _config(dataset), loss=loss, progress=False
    )
    test = [int(i) for i in split.test]
    scores = tile_task.predict(
        result.model, [dataset.graph(i) for i in test], [dataset.config_features(i) for i in test]
    )
    ranking = metrics.ranking_metrics(scores, [dataset.runtime_ns(i) for i in test])
    assert ranking["kendall_mean"] > 0.6, ranking
    model, _, _, meta = tile_task.load_model(tmp_path / loss / "best")
    assert meta["loss"] == loss and meta["task"] == "tile"
    again = tile_task.predict(model, [dataset.graph(test[0])], [dataset.config_features(test[0])])
    np.testing.assert_allclose(again[0], scores[0], rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_early_join_trains_too(dataset, split):
    cfg = dataclasses.replace(_config(dataset, config_join="early"), epochs=2)
    result = tile_task.train_model(dataset, split, None, cfg, loss="logistic", progress=False)
    scores = tile_task.predict(result.model, [dataset.graph(0)], [dataset.config_features(0)])
    assert scores[0].shape == (len(dataset.runtime_ns(0)),) and np.isfinite(scores[0]).all()


def test_scores_do_not_depend_on_chunking(dataset):
    model = models.make_model(_config(dataset).model, rngs=0, task="tile")  # untrained will do
    whole = tile_task.predict(model, [dataset.graph(0)], [dataset.config_features(0)])[0]
    pieces = tile_task.predict(model, [dataset.graph(0)], [dataset.config_features(0)], chunk=5)[0]
    np.testing.assert_allclose(whole, pieces, rtol=1e-5, atol=1e-5)


def test_a_kernel_checkpoint_is_not_a_tile_model(tmp_path):
    kernel_dir = checkpoint.bundled_checkpoints_dir() / "kernel-random" / "gnn"
    if not kernel_dir.is_dir():
        pytest.skip("no bundled kernel checkpoint")
    with pytest.raises(ValueError, match="not a tile model"):
        tile_task.load_model(kernel_dir)


@pytest.mark.slow
def test_cli_train_evaluate_suggest(dataset, tmp_path, capsys):
    import json

    from tpucost import cli

    data_dir = tile_data.save_dataset(dataset, tmp_path / "tiles")
    out = tmp_path / "models"
    assert (
        cli.main(
            [
                "train",
                "--task",
                "tile",
                "--data",
                str(data_dir),
                "--losses",
                "hinge,mse",
                "--out",
                str(out),
                "--smoke",
                "--no-progress",
            ]
        )
        == 0
    )
    capsys.readouterr()
    assert (
        cli.main(
            [
                "evaluate",
                "--task",
                "tile",
                "--data",
                str(data_dir),
                "--model",
                str(out),
                "--split",
                "random",
                "--json",
            ]
        )
        == 0
    )
    table = json.loads(capsys.readouterr().out)
    assert set(table) == {"gnn_rank", "gnn_mse", "analytical", "largest_block", "fewest_steps", "random"}
    assert {"kendall_mean", "top1", "top5", "top10"} <= set(table["gnn_rank"])
    assert (
        cli.main(
            [
                "suggest-tiles",
                "matmul",
                "--shape",
                "128,256,256",
                "--top",
                "3",
                "--json",
                "--model",
                str(out / "tile-random-hinge"),
            ]
        )
        == 0
    )
    result = json.loads(capsys.readouterr().out)
    legal = tiles.legal_configs("matmul", (128, 256, 256))
    assert result["shape"] == [128, 256, 256] and len(result["suggestions"]) == 3
    assert all(s["config"] in legal for s in result["suggestions"])
    scores = [s["score"] for s in result["suggestions"]]
    assert scores == sorted(scores)


@pytest.mark.measures
def test_cli_measure_tiles_and_bad_shape(capsys):
    import json

    from tpucost import cli

    assert (
        cli.main(["measure-tiles", "softmax", "--shape", "64,128", "--repeats", "1", "--all-cores", "--json"])
        == 0
    )
    result = json.loads(capsys.readouterr().out)
    runtimes = [m["runtime_ns"] for m in result["measurements"]]
    assert len(runtimes) == len(tiles.legal_configs("softmax", (64, 128))) and runtimes == sorted(runtimes)
    assert cli.main(["suggest-tiles", "matmul", "--shape", "12,x", "--json"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "matmul" in err[0]


@pytest.mark.slow
def test_trains_on_the_published_tpugraphs_format(tmp_path):
    """`train --task tile --tpugraphs DIR`: the same model code on 140 node / 24 config features."""
    from test_tpugraphs import tile_arrays, write

    for seed in range(6):
        write(tmp_path / f"model{seed}_-{seed:04x}.npz", tile_arrays(seed))
    ds = tile_data.from_tpugraphs(tmp_path)
    assert ds.features.num_node_features == 140 and ds.features.num_config_features == 24
    split = tile_data.split_random(ds, seed=0, fractions=(0.5, 0.25, 0.25))
    config = train.TrainConfig(
        model=tile_task.model_config(ds, ModelConfig(hidden=8, num_layers=1)),
        batch_size=2,
        epochs=1,
        patience=1,
    )
    result = tile_task.train_model(ds, split, None, config, loss="hinge", progress=False)
    assert result.model.config.features == ds.features
    with pytest.raises(ValueError, match="no tile models"):
        tile_experiments.evaluate_models(ds, "random", tmp_path / "no-models")


#: Matmul problems (M, N, K) that are not in the bundled tile data set (checked in the test).
NEW_MATMULS = [(128, 384, 256), (256, 384, 384), (128, 640, 384)]
#: The most that measurement noise may add to the 5% target of the suggestion test: a run noisier
#: than that fails instead of loosening the test (the bundled tile data's top-5 noise floor is 3.7%).
SUGGESTION_NOISE_CAP = 0.10
#: Alternating pairs that time the model's best pick against the fastest configuration again.
HEAD_TO_HEAD_ROUNDS = 7


@pytest.mark.quiet
@pytest.mark.newest_only
def test_bundled_suggestions_are_within_5_percent_of_the_best_measured():
    """The issue's target: the best measured of `suggest_tiles --top 5` is within 5% of the best of
    every legal configuration, plus the noise of a top-5 pick, at most `SUGGESTION_NOISE_CAP`: the
    larger of the bundled tile data's top-5 noise floor and this host's in this run (each the top-5
    slowdown of picking by one measurement and checking with a second; the bundled one was measured
    on another host). Each configuration is compiled once and timed in two passes (as
    `tiles.measure_configs` times it, under the bundled data's lowering); its runtime is the faster.
    Where the fastest is not among the five, that and the fastest of the five are timed again, side
    by side (`head_to_head_slowdown`), and the new timings are the ones held to the allowance.

    The five are the bundled rank model's: its five lowest scores among the legal configurations,
    computed here from the model. A heuristic or another scorer in its place fails that check, and a
    random scorer the measured one (random picks of five land within the allowance on all three
    shapes about one time in 25, by the runtimes measured here). Measured, the model's five and the largest-block heuristic's are
    the same configurations up to order on these shapes (`benchmarks/tile_suggestions.py`; Table 3
    of the bundled models agrees): no measured bound tells the two apart on this CPU.

    Marked ``newest_only``: the bundled tile models learned kernels built by jaxlib 0.10.2; under
    Colab's jaxlib 0.7.2 the interpreted kernels differ, and one clean-clone run there measured the
    best of the top 5 16% slower than the best (two others passed), so nothing is promised there."""
    ds = tile_data.load_dataset()
    bundled_noise = tile_data.noise_floor(ds)["top5"]
    model = tile_task.load_model().model
    known = {
        tuple(int(v) for v in s.split(",")) for f, s in zip(ds.family, ds.shape, strict=True) if f == "matmul"
    }
    for shape in NEW_MATMULS:
        assert shape not in known
        configs = tiles.legal_configs("matmul", shape)
        suggested = tile_experiments.suggest_tiles("matmul", shape, top=5)
        rows = np.stack([tiles.config_features("matmul", shape, "float32", c) for c in configs])
        scores = tile_task.predict(model, [tiles.kernel_graph("matmul", shape)], [rows])[0]
        best_scored = np.argsort(scores, kind="stable")[:5]
        assert [s["config"] for s in suggested] == [configs[i] for i in best_scored], shape
        assert [s["score"] for s in suggested] == pytest.approx(scores[best_scored], rel=1e-6), shape
        compiled = []
        for config in configs:
            fn, args = tiles.build("matmul", shape, "float32", config, lowering=ds.lowering)
            compiled.append((measure.compile_fn(fn, args), args))
        first, second = (
            np.array([measure.best_wall_time_ns(run, args, 5, 1, 2.0) for run, args in compiled])
            for _ in range(2)
        )
        # This host's noise now, as the bundled floor is defined: pick by one pass, check with the other.
        noise_here = metrics.top_k_slowdown(first, second, 5)
        runtime = np.minimum(first, second)
        picked = [configs.index(s["config"]) for s in suggested]
        ours, fastest = picked[int(np.argmin(runtime[picked]))], int(np.argmin(runtime))
        slowdown = 0.0
        if fastest not in picked:  # time the two again, side by side: a fresh estimate of the gap
            slowdown = head_to_head_slowdown(compiled[ours], compiled[fastest])
        allowance = 0.05 + min(SUGGESTION_NOISE_CAP, max(bundled_noise, noise_here))
        assert slowdown <= allowance, (shape, configs[ours], configs[fastest], slowdown, noise_here)


def head_to_head_slowdown(ours: tuple, fastest: tuple, rounds: int = HEAD_TO_HEAD_ROUNDS) -> float:
    """How much slower ``ours`` is than ``fastest`` (each a compiled function and its arguments),
    timed again in ``rounds`` alternating pairs: the median of the pairs' ratios, minus 1.

    The two were chosen by the same passes that measured them: the fastest of twenty is the one whose
    timings happened to come out lowest, so the gap those passes show is biased towards ours looking
    slow (one clean-clone run measured 10.1% where a rerun measured 0). New timings, taken after the
    choice, are not biased by it; alternating the pair puts both under the same load."""
    ratios = [
        measure.best_wall_time_ns(*ours, 5, 1, 2.0) / measure.best_wall_time_ns(*fastest, 5, 1, 2.0)
        for _ in range(rounds)
    ]
    return float(np.median(ratios) - 1)


@pytest.mark.slow
def test_seed_spread_trains_every_loss_per_split_seed(dataset, tmp_path):
    config = dataclasses.replace(_config(dataset), epochs=1)
    report = tile_experiments.seed_spread(
        dataset, [0, 1], tmp_path / "seeds.json", config=config, progress=False
    )
    assert [r["split_seed"] for r in report["runs"]] == [0, 1]
    assert set(report["summary"]) == {
        *tile_task.METHODS,
        "analytical",
        *tile_experiments.HEURISTICS,
        "random",
    }
    for name, row in report["summary"].items():
        values = [r["results"][name]["kendall_mean"] for r in report["runs"]]
        assert row["kendall_mean"]["min"] == min(values) and row["kendall_mean"]["max"] == max(values)
        assert row["test_kernels"] == sum(r["results"][name]["n_kernels"] for r in report["runs"])
    table = tile_experiments.seed_summary(tmp_path / "seeds.json")
    assert table.loc["gnn_rank", "Kendall min"] == report["summary"]["gnn_rank"]["kendall_mean"]["min"]


def test_fewest_steps_scores_rank_the_largest_blocks_first(dataset):
    part = list(range(len(dataset)))
    scores = tile_experiments.fewest_steps_scores(dataset, part)
    assert len(scores) == len(dataset)
    for i, s in zip(part, scores, strict=True):
        family, configs = str(dataset.family[i]), dataset.configs(i)
        shape = tiles.parse_problem_shape(family, str(dataset.shape[i]))
        steps = [tiles.tile_cost(family, shape, "float32", c).steps for c in configs]
        assert list(s) == steps and s.dtype == np.float64
        volume = [np.prod(list(c.values())) for c in configs]
        assert int(np.argmin(s)) == int(np.argmax(volume))  # fewest steps: the largest block
    # the synthetic runtimes grow with the steps, so the heuristic ranks them well
    runtimes = [dataset.runtime_ns(i) for i in part]
    assert metrics.ranking_metrics(scores, runtimes)["kendall_mean"] > 0.5


def test_largest_block_scores_put_the_largest_volume_first_and_tie_equal_volumes(dataset):
    part = list(range(len(dataset)))
    scores = tile_experiments.largest_block_scores(dataset, part)
    for i, s in zip(part, scores, strict=True):
        volume = np.array([np.prod(list(c.values()), dtype=np.float64) for c in dataset.configs(i)])
        np.testing.assert_allclose(s, -np.log(volume))
        assert int(np.argmin(s)) == int(np.argmax(volume))
        same = volume[:, None] == volume[None, :]
        assert np.array_equal(np.isclose(s[:, None], s[None, :]), same)  # equal volume: a tie


@pytest.mark.slow
def test_table_3_has_both_heuristics_beside_the_models(dataset, split, tmp_path):
    """`tile_experiments.evaluate_models` reports ``largest_block`` and ``fewest_steps`` on the same test kernels
    as the models, computed by the same metric from the heuristics' scores."""
    config = dataclasses.replace(_config(dataset), epochs=1)
    tile_experiments.train_models(
        dataset, "random", tmp_path, config=config, loss_names=["hinge"], progress=False
    )
    table = tile_experiments.evaluate_models(dataset, "random", tmp_path)
    assert {"gnn_rank", "analytical", "largest_block", "fewest_steps", "random"} <= set(table)
    test = [int(i) for i in tile_data.split(dataset, "random").test]
    runtimes = [dataset.runtime_ns(i) for i in test]
    for name, scores in tile_experiments.HEURISTICS.items():
        assert table[name] == metrics.ranking_metrics(scores(dataset, test), runtimes)
    # The synthetic runtimes grow with the steps: the heuristics rank far better than random.
    assert table["fewest_steps"]["kendall_mean"] > table["random"]["kendall_mean"] + 0.3


def test_seed_runs_are_the_runs_behind_seed_summary():
    runs = tile_experiments.seed_runs()
    summary = tile_experiments.seed_summary()
    assert runs is not None and summary is not None
    assert set(runs["model"]) == set(summary.index)
    means = runs.groupby("model")["kendall_mean"].mean()
    for model, value in means.items():
        assert value == pytest.approx(summary.loc[model, "Kendall mean"])
    assert tile_experiments.seed_runs("/nonexistent/tile_seeds.json") is None


@pytest.mark.measures
def test_cli_data_overhead_reports_a_share_per_problem_measured_here(dataset, tmp_path, capsys):
    import json

    from tpucost import cli

    data_dir = tile_data.save_dataset(dataset, tmp_path / "tiles")
    argv = ["data", "overhead", str(data_dir), "--sample", "2", "--repeats", "1", "--all-cores", "--json"]
    assert cli.main([*argv, "--no-progress", "--lowering", "xla_loop"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["sample"] == 2 and report["lowering"] == "xla_loop" and len(report["problems"]) == 2
    assert report["device"]["id"] == device.fingerprint()["id"]
    medians = [p["median_share"] for p in report["problems"]]
    assert report["median_of_problem_medians"] == pytest.approx(float(np.median(medians)))
    assert all(0 < m < 3 for m in medians) and all(
        p["problem"] in set(dataset.problem_id) for p in report["problems"]
    )
    assert cli.main(["data", "overhead", str(tmp_path / "nothing"), "--all-cores"]) == 2
    assert "no tile data set" in capsys.readouterr().err


@pytest.mark.slow
def test_leave_family_out_holds_each_family_out_scores_like_table_3_and_resumes(tmp_path, monkeypatch):
    ds = _dataset({**SHAPES, "reduce": [(64, 512), (128, 256), (32, 1024), (64, 256)]})
    config = dataclasses.replace(_config(ds), epochs=1)
    summary = tile_experiments.leave_group_out(ds, tmp_path, config, ["hinge"], progress=False)
    families = summary["families"]
    assert list(families) == ["matmul", "reduce", "softmax"]
    for family, rows in families.items():
        split = tile_experiments.family_split(ds, family)
        assert set(ds.family[split.test]) == {family}
        assert family not in set(ds.family[split.train]) | set(ds.family[split.val])
        assert {"gnn_rank", "analytical", "largest_block", "fewest_steps", "random"} <= set(rows)
        assert rows["gnn_rank"]["n_kernels"] == len(split.test)
        runtimes = [ds.runtime_ns(int(i)) for i in split.test]
        heuristic = tile_experiments.largest_block_scores(ds, [int(i) for i in split.test])
        assert rows["largest_block"] == metrics.ranking_metrics(heuristic, runtimes)
    for row, ranking in summary["mean"].items():
        assert ranking["kendall_mean"] == pytest.approx(
            np.mean([families[f][row]["kendall_mean"] for f in families])
        )
        worst = summary["worst"][row]
        assert worst["kendall_mean"] == min(families[f][row]["kendall_mean"] for f in families)
    table = results.tile_leave_family_out_table(summary)
    assert "largest block first" in table and f"{summary['mean']['gnn_rank']['kendall_mean']:.3f}" in table

    # Resumed: the finished families are read back, nothing is trained again.
    monkeypatch.setattr(tile_task, "train_model", lambda *a, **k: pytest.fail("trained again"))
    again = tile_experiments.leave_group_out(ds, tmp_path, config, ["hinge"], progress=False)
    assert again["mean"] == summary["mean"]
    with pytest.raises(ValueError, match="two others"):
        tile_experiments.family_split(_dataset(SHAPES), "matmul")


def test_largest_block_order_ranks_new_configurations_like_the_scores():
    """For configurations outside the data set: largest volume first, equal volumes in their own
    order (8x256 before 16x128 before 256x8, all of volume 2048), the smallest last."""
    configs = [
        {"bm": 8, "bn": 256},
        {"bm": 4, "bn": 4},
        {"bm": 16, "bn": 128},
        {"bm": 64, "bn": 64},
        {"bm": 256, "bn": 8},
    ]
    assert tile_experiments.largest_block_order(configs) == [3, 0, 2, 4, 1]
