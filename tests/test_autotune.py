"""The autotuner (`tpucost.experiments.autotune`): strategies, the device budget, the paper's protocol, the CLI."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import jax
import numpy as np
import pytest

from tpucost import cli
from tpucost.experiments import autotune, plots, tiles
from tpucost.experiments.autotune import evaluators, protocol
from tpucost.experiments.configs import autotune as autotune_config
from tpucost.experiments.programs.examples import EXAMPLES
from tpucost.method.tasks import tile as tile_task

pytestmark = pytest.mark.core  # also run on Colab's versions (make test-colab)

ROOT = Path(__file__).resolve().parents[1]

TARGET = (2, 5, 0, 3)


def _space(choices: int = 6, knobs: int = 4) -> autotune.Space:
    return autotune.Space({f"k{i}": list(range(choices)) for i in range(knobs)})


def _cost(config) -> float:
    """A separable bowl with its minimum 1.0 at TARGET (knob values are their indices)."""
    return 1.0 + sum((config[f"k{i}"] - t) ** 2 for i, t in enumerate(TARGET[: len(config)]))


class Synthetic:
    """A fake evaluator: cost(config) [+ noise], ``seconds`` per call, and a log of what it saw."""

    def __init__(self, cost=_cost, seconds=lambda config: 0.25, uses_device=True):
        self.cost, self.seconds, self.uses_device = cost, seconds, uses_device
        self.calls: list[dict] = []

    def __call__(self, config):
        self.calls.append(dict(config))
        return autotune.Evaluation(float(self.cost(config)), float(self.seconds(config)))


def test_space_keys_defaults_and_neighbours():
    space = _space()
    assert space.size == 6**4 and space.default == {"k0": 0, "k1": 0, "k2": 0, "k3": 0}
    rng = np.random.default_rng(0)
    for _ in range(50):
        c = space.random(rng)
        assert space.config(space.key(c)) == c
        n = space.neighbor(c, rng)
        assert sum(n[k] != c[k] for k in c) == 1
    with pytest.raises(ValueError, match="not one of its choices"):
        space.key({"k0": 9, "k1": 0, "k2": 0, "k3": 0})


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_simulated_annealing_finds_the_optimum_of_a_synthetic_cost(seed):
    space = _space()
    for start in (space.default, space.random(np.random.default_rng(seed + 10))):
        order = autotune.run_search(
            space, Synthetic(), "anneal", start, np.random.default_rng(seed), max_candidates=300
        )
        assert min(ev.cost_ns for _, ev in order) == 1.0
        assert len({space.key(c) for c, _ in order}) == len(order)  # no candidate evaluated twice


def test_random_search_covers_a_small_space_without_repeats():
    space = _space(choices=3, knobs=3)
    order = autotune.run_search(
        space, Synthetic(), "random", space.default, np.random.default_rng(0), max_candidates=100
    )
    assert (
        len(order) == 27 and order[0][0] == space.default
    )  # exhausted: every configuration once, start first
    assert min(ev.cost_ns for _, ev in order) == min(_cost(space.config(k)) for k in space.all_keys())


def test_a_strategy_plugs_in_through_the_protocol():
    class Sweep:  # tries knob values in order: any propose/observe pair is a strategy
        def __init__(self, space, start, rng):
            self.keys = iter(space.all_keys())
            self.space = space

        def propose(self, progress):
            key = next(self.keys, None)
            return None if key is None else self.space.config(key)

        def observe(self, config, cost):
            pass

    space = _space(choices=2, knobs=3)
    order = autotune.run_search(
        space, Synthetic(), Sweep, space.default, np.random.default_rng(0), max_candidates=99
    )
    assert len(order) == 8


@pytest.mark.parametrize("strategy", ["anneal", "random"])
def test_the_device_budget_is_respected(strategy):
    space = _space()
    seconds = lambda c: 0.2 + 0.1 * c["k0"]  # noqa: E731  (0.2 .. 0.7 s per candidate)
    budget = 5.0
    run = autotune.device_only_search(
        space, Synthetic(seconds=seconds), space.default, budget, strategy, seed=1
    )
    longest = 0.7
    assert budget <= run.device_seconds <= budget + longest
    assert run.device_seconds == pytest.approx(sum(seconds(c) for c, _, _ in run.measured))
    run = autotune.model_guided_search(
        space,
        Synthetic(uses_device=False),
        Synthetic(seconds=seconds),
        space.default,
        budget,
        n_candidates=200,
        strategy=strategy,
        seed=1,
    )
    assert budget <= run.device_seconds <= budget + longest
    assert run.search_seconds > 0 and len(run.predicted) == 200


def test_model_guided_measures_only_the_top_predicted_candidates():
    space = _space()
    rng = np.random.default_rng(0)
    noise = {space.key(space.config(k)): float(rng.uniform(0, 3)) for k in space.all_keys()}
    predictor = Synthetic(
        cost=lambda c: _cost(c) + noise[space.key(c)], uses_device=False
    )  # an imperfect model
    measurer = Synthetic()
    run = autotune.model_guided_search(
        space, predictor, measurer, space.default, budget_s=2.0, n_candidates=150, seed=3, guard=None
    )
    ranked = [c for c, _ in sorted(run.predicted, key=lambda p: p[1])]
    assert len(run.predicted) == 150 and len(run.measured) == 8  # 2.0 s at 0.25 s each
    assert measurer.calls == ranked[:8]  # exactly the best-predicted ones, best first
    assert [c for c, _, _ in run.measured] == ranked[:8]


def test_with_a_good_model_model_guided_beats_device_only_from_random_starts():
    """The protocol's point, on a synthetic cost where the model is the truth plus noise."""
    space = _space(choices=8, knobs=4)
    rng = np.random.default_rng(1)
    noise = {k: float(rng.normal(0, 0.5)) for k in space.all_keys()}
    predictor = Synthetic(cost=lambda c: _cost(c) + noise[space.key(c)], uses_device=False)
    gains = []
    for seed in range(3):
        start = space.random(np.random.default_rng([seed, 1]))
        device = autotune.device_only_search(space, Synthetic(), start, 3.0, "anneal", seed)
        guided = autotune.model_guided_search(space, predictor, Synthetic(), start, 3.0, 400, "anneal", seed)
        gains.append(device.best_measured_ns / guided.best_measured_ns)
    assert np.mean(gains) > 1.5, gains


def test_load_tunable_program_and_tile_spaces():
    t = autotune.load_tunable("example:transformer", "program")
    assert set(t.space.knobs) == {"remat_0", "remat_1", "remat_2", "remat_3", "xla"}
    assert t.space.default["xla"] == "default" and t.space.default["remat_0"] == "none"
    assert t.compiler_options({**t.space.default, "xla": "no_fusion"}) == {"xla_disable_hlo_passes": "fusion"}
    t = autotune.load_tunable("example:mixer", "program")
    assert t.space.knobs["scan_unroll"] == (1, 2, 4)
    t = autotune.load_tunable("example:tiled_mlp", "tile")
    assert list(t.space.knobs) == ["mm1", "ln", "mm2", "softmax"]
    for name, (family, shape, dtype) in t.kernels.items():
        tiles.check_config(family, shape, dtype, t.space.default[name])  # the default is legal
    assert t.space.default["mm1"] == {"bm": 128, "bn": 128, "bk": 128}


@pytest.mark.parametrize(
    "name",
    [pytest.param(n, marks=pytest.mark.slow) if n.startswith("nnx_") else n for n in sorted(EXAMPLES)],
)
def test_every_built_in_example_builds_and_compiles_at_its_default(name):
    """`example:NAME` as a learner's search would start it: built at the default, lowered and compiled."""
    space = "tile" if hasattr(EXAMPLES[name], "kernels") else "program"
    t = autotune.load_tunable(f"example:{name}", space)
    fn, args = t.build(t.space.default)
    assert jax.jit(fn).lower(*args).compile().as_text()


@pytest.mark.measures
def test_program_evaluators_on_a_built_in_example():
    t = autotune.load_tunable("example:mixer", "program")
    measurer = autotune.DeviceEvaluator(t, repeats=2)
    ev = measurer(t.space.default)
    assert ev.cost_ns > 0 and 0 < ev.compile_seconds < ev.seconds
    from tpucost.method.costmodel import CostModel

    predictor = autotune.ProgramPredictor(t, CostModel.load(calibrated=False))
    first = predictor(t.space.default)
    assert first.cost_ns > 0 and first.compile_seconds > 0
    again = predictor(t.space.default)
    assert again.cached and again.seconds == 0 and again.cost_ns == first.cost_ns
    assert predictor.counter.candidates == 1


@pytest.mark.slow
def test_tile_predictor_scores_without_compiling():
    if not tile_task.default_model_dir().is_dir():
        pytest.fail(
            f"the bundled tile model is part of the package: {tile_task.default_model_dir()} is missing"
        )
    t = autotune.load_tunable("example:tiled_mlp", "tile")
    predictor = autotune.TilePredictor(t)
    rng = np.random.default_rng(0)
    configs = [t.space.random(rng) for _ in range(20)]
    costs = [predictor(c).cost_ns for c in configs]
    assert all(np.isfinite(costs)) and all(c > 0 for c in costs)
    assert all(ev.compile_seconds == 0 for ev in predictor.cache.values())
    cold = autotune.TilePredictor(t, batched=False)
    assert cold(configs[0]).cost_ns == pytest.approx(costs[0], rel=1e-4)


TINY = """
import jax
import jax.numpy as jnp
import jax
import numpy as np


def tiny(config):
    x = jnp.asarray(np.random.default_rng(0).standard_normal((64, 64)), jnp.float32)
    act = jnp.tanh if config["act"] == "tanh" else jax.nn.relu
    return (lambda x: act(x @ x).sum()), (x,)


tiny.space = {"act": ["tanh", "relu"]}
"""

ENTRY_KEYS = {
    "best_config",
    "best_measured_ns",
    "speedup_vs_default",
    "device_seconds",
    "candidates_measured",
    "candidates_predicted",
}


def _run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "tpucost", "autotune", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=300,
        check=False,
    )


@pytest.mark.measures
@pytest.mark.timeout(300)
def test_cli_json_on_a_tiny_program_with_a_fresh_process_remeasurement(tmp_path):
    (tmp_path / "tiny.py").write_text(textwrap.dedent(TINY))
    proc = _run_cli(
        "--space",
        "program",
        "--program",
        "tiny.py:tiny",
        "--budget-seconds",
        "0.3",
        "--seeds",
        "1",
        "--candidates",
        "4",
        "--repeats",
        "2",
        "--workdir",
        "work",
        "--json",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    # Resumable: the header, then per start four arms at equal device seconds and the two
    # model-using arms at equal wall time.
    assert len((tmp_path / "work" / autotune.JOURNAL_NAME).read_text().splitlines()) == 1 + 2 * (4 + 2)
    report = json.loads(proc.stdout)
    assert {"space", "program", "default_ns", "strategies", "wall_time", "noise"} <= set(report)
    assert report["space"] == "program" and report["program"] == "tiny.py:tiny" and report["default_ns"] > 0
    for budget in (report, report["wall_time"]):
        assert set(budget["strategies"]) == set(autotune.ARMS)
        assert set(budget["model_guided_faster_than"]) == set(autotune.ARMS) - {"model_guided"}
        for strategy, starts in budget["strategies"].items():
            assert set(starts) == {"from_default", "from_random"}
            for entry in starts.values():
                assert ENTRY_KEYS <= set(entry)
                assert set(entry["best_config"]) == {"act", "xla"}
                assert entry["speedup_vs_default"] == pytest.approx(
                    report["default_ns"] / entry["best_measured_ns"]
                )
                assert entry["candidates_measured"] >= 1
                uses_model = strategy in ("model_guided", "random_order")
                if budget is report:  # (at equal wall time a tiny budget may end before a score)
                    assert (entry["candidates_predicted"] > 0) == uses_model
                else:
                    assert uses_model or entry["candidates_predicted"] == 0
                assert entry["candidates_predicted"] <= 4
    wall = report["wall_time"]
    assert wall["budget_seconds"] == 0.3 and wall["scoring"] in ("beside", "sequential")
    # The heuristic arm without NAME.heuristic: the default, then each other compile option.
    assert report["heuristic_candidates"] == len(
        autotune.load_tunable(f"{tmp_path}/tiny.py:tiny").space.knobs["xla"]
    )
    noise = report["noise"]
    assert (
        noise["processes"] == 1 + 3
        and noise["spread"] >= 0
        and noise["runtime_ns"][0] == report["default_ns"]
    )
    fresh = report["fresh_process"]
    assert fresh["configs"] >= 1 and report["backend"] == fresh["backend"] == noise["backend"]
    if report["backend"] == "cpu":  # re-measured in other processes (each told JAX_PLATFORMS=cpu)
        assert (
            fresh["pid"] != fresh["parent_pid"] and fresh["separate_process"] and noise["separate_processes"]
        )
    else:  # one process holds a TPU or GPU: re-measured in the experiment's own (tests/test_one_process.py)
        assert fresh["pid"] == fresh["parent_pid"] and not fresh["separate_process"]


def test_cli_bad_program_is_one_line_and_exit_2(tmp_path, capsys):
    (tmp_path / "broken.py").write_text("raise ImportError('no such thing')\n")
    (tmp_path / "plain.py").write_text("x = 1\n")
    for spec, expected in (
        (str(tmp_path / "nosuch.py:f"), "no such file"),
        ("example:nope", "no built-in example"),
        ("justaname", "expected FILE.py:NAME"),
        (str(tmp_path / "broken.py:f"), "importing"),
        (str(tmp_path / "plain.py:f"), "defines no 'f'"),
        (str(tmp_path / "plain.py:x"), "not callable"),
    ):
        code = cli.main(["autotune", "--program", spec, "--budget-seconds", "1", "--all-cores"])
        err = capsys.readouterr().err
        assert code == 2, spec
        assert len(err.strip().splitlines()) == 1 and err.startswith("error: ") and expected in err, err
    code = cli.main(
        ["autotune", "--space", "tile", "--program", "example:mixer", "--budget-seconds", "1", "--all-cores"]
    )
    assert code == 2 and "NAME.kernels" in capsys.readouterr().err


def test_cli_bad_program_in_a_fresh_process(tmp_path):
    proc = _run_cli("--program", "nosuch.py:f", "--budget-seconds", "1", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == ["error: --program nosuch.py:f: no such file nosuch.py"]


# ------------------------------------------------------------------------- reports and the bundled results


def _report(program: str = "example:x", gains=(0.1, -0.05), noise: float | None = 0.02) -> dict:
    """A small report of the shape `autotune` writes (two seeds)."""
    entry = {
        "best_config": {"k": 1},
        "best_measured_ns": 9.0,
        "speedup_vs_default": 1.1,
        "speedup_spread": {"mean": 1.1, "min": 1.0, "max": 1.2, "std": 0.1},
        "device_seconds": 5.0,
        "candidates_measured": 3.0,
        "candidates_predicted": 0.0,
    }
    report = {
        "program": program,
        "space": "program",
        "default_ns": 10.0,
        "seeds": [0, 1],
        "budget_seconds": 5.0,
        "strategies": {s: {st: dict(entry) for st in autotune.STARTS} for s in autotune.ARMS},
        "model_guided_faster_than_device_only": {
            st: {"mean": float(np.mean(gains)), "min": min(gains), "max": max(gains)}
            for st in autotune.STARTS
        },
    }
    faster = {
        other: {st: {"mean": 0.01 * k, "min": 0.0, "max": 0.02 * k} for st in autotune.STARTS}
        for k, other in enumerate(("device_only", "random_order", "heuristic"), start=1)
    }
    faster["device_only"] = report["model_guided_faster_than_device_only"]  # one figure, two names
    report["model_guided_faster_than"] = faster
    report["wall_time"] = {
        "budget_seconds": 5.0,
        "strategies": report["strategies"],
        "model_guided_faster_than": {o: g for o, g in faster.items() if o != "heuristic"},
    }
    if noise is not None:
        report["noise"] = {"spread": noise}
    return report


def test_report_and_comparison_tables():
    table = autotune.report_table(_report())
    assert len(table) == 2 * 4 * 2 and set(table["strategy"]) == set(autotune.ARMS)  # budgets x arms x starts
    assert set(table["budget"]) == set(autotune.BUDGETS)
    assert len(autotune.report_table(_report(), budget="wall_time")) == 8
    comparison = autotune.arms_comparison_table({"a": _report("a"), "b": _report("b", noise=None)})
    assert comparison["model vs control %"].iloc[0] == pytest.approx(2.0)
    assert comparison["model vs heuristic %"].iloc[0] == pytest.approx(3.0)
    assert comparison["wall: model vs device-only %"].iloc[0] == pytest.approx(2.5)
    assert comparison["wall: model vs control %"].iloc[0] == pytest.approx(2.0)
    assert list(comparison["program"]) == ["a", "a", "b", "b"]
    assert comparison["model vs device-only %"].iloc[0] == pytest.approx(2.5)
    assert list(comparison["paper %"][:2]) == [2.0, 8.0]
    assert comparison["noise floor %"].iloc[0] == pytest.approx(2.0) and np.isnan(
        comparison["noise floor %"].iloc[2]
    )


def test_findings_say_what_the_numbers_say():
    report = _report("example:a", gains=(0.01, 0.03))
    report["strategies"]["model_guided"]["from_random"] = {
        **report["strategies"]["model_guided"]["from_random"],
        "speedup_vs_default": 0.95,
    }
    report["strategies"]["device_only"]["from_random"] = {
        **report["strategies"]["device_only"]["from_random"],
        "speedup_vs_default": 0.9,
    }
    lines = autotune.findings(report)
    random_line = next(line for line in lines if "from random:" in line)
    assert "both end below it" in random_line and "model guided 0.950x" in random_line
    default_line = next(line for line in lines if "from default:" in line)
    assert "below it" not in default_line
    control = [line for line in lines if "random-order control" in line]
    assert control[0].strip().endswith("+2.0% (per seed +0.0 .. +4.0, inside this run's 2.0% noise floor)")
    heuristic = [line for line in lines if "vs the heuristic" in line]
    assert "+3.0%" in heuristic[0] and "better by more than this run's 2.0% noise floor" in heuristic[0]
    assert any("equal wall time" in line for line in lines)
    assert not any("noise floor" in line for line in autotune.findings(_report(noise=None)))


def test_a_loss_beyond_the_floor_reads_worse_and_a_live_floor_is_at_least_the_bundled_one():
    report = _report("example:a", gains=(-0.05, -0.03))

    def device_only(lines):
        return next(line for line in lines if "vs device-only, equal device seconds" in line)

    line = device_only(autotune.findings(report))
    assert (
        "-4.0%" in line and "worse by more than this run's 2.0% noise floor" in line and "below" not in line
    )
    # the bundled experiment of the same program measured a 5% floor: -4% is inside it, not a loss
    line = device_only(autotune.findings(report, _report("example:a", noise=0.05)))
    assert "inside the bundled experiment's 5.0% noise floor" in line
    # a smaller bundled floor does not lower the live one
    assert "this run's 2.0%" in device_only(autotune.findings(report, _report("example:a", noise=0.01)))
    report["noise"]["processes"] = 2  # two measurements of the default: the floor says so
    assert "(2 measurements of the default)" in device_only(autotune.findings(report))


def test_bundled_reports_errors_name_the_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="no autotuning reports"):
        autotune.bundled_reports(tmp_path)
    (tmp_path / "a.json").write_text('{"program": "a",\n "space": }')
    with pytest.raises(ValueError, match=r"a\.json: line 2, column"):
        autotune.bundled_reports(tmp_path)
    (tmp_path / "a.json").write_text('{"program": "a"}')
    with pytest.raises(ValueError, match=r"a\.json: not an autotuning report, missing \['default_ns'"):
        autotune.bundled_reports(tmp_path)
    (tmp_path / "a.json").write_text(json.dumps(_report("example:a")))
    assert list(autotune.bundled_reports(tmp_path)) == ["example:a"]


def test_speedup_panels_share_their_y_axis_within_a_space():
    import matplotlib

    matplotlib.use("Agg")
    tile = {**_report("c"), "space": "tile"}
    fig = plots.plot_speedup_panels({"a": _report("a"), "b": _report("b", noise=None), "c": tile})
    left, right, third = fig.axes
    assert left.get_shared_y_axes().joined(left, right)
    assert not left.get_shared_y_axes().joined(left, third)
    assert "a (program), 2 seeds" in left.get_title() and any(
        "noise floor" in t.get_text() for t in left.get_legend().get_texts()
    )


def test_the_bundled_experiments_are_the_pages():
    """The autotuning page's results come from the bundled reports: one host, measured noise."""
    from tpucost.experiments.programs.examples import IN_DISTRIBUTION

    reports = autotune.bundled_reports()
    programs = [p for p, r in reports.items() if r["space"] == "program"]
    outside = [p for p in programs if p.removeprefix("example:") not in IN_DISTRIBUTION]
    assert len(outside) >= 3 and "example:tiled_mlp" in reports, "three programs from outside the corpus"
    assert len({r["device"] for r in reports.values()}) == 1, "one host for every bundled experiment"
    page = (ROOT / "docs" / "autotuning.md").read_text()
    for program, r in reports.items():
        assert len(r["seeds"]) >= 4 and r["noise"]["processes"] >= 2, program
        assert set(r["strategies"]) == set(autotune.ARMS) and "wall_time" in r, program
        for start, c in r["model_guided_faster_than_device_only"].items():
            assert f"**{100 * c['mean']:+.1f}%**" in page, (program, start)


def _predicted_ms_by_hand(config: dict) -> float:
    """The bundled GNN's estimate (ms) of TINY at ``config`` (compile option "default": none),
    summed here over the kernels of the compiled program."""
    from tpucost.experiments import programs
    from tpucost.method import features, hlo, kernels
    from tpucost.method.tasks import kernel as kernel_task

    assert config["xla"] == "default" and not programs.CONFIGURATIONS["default"].compiler_options
    namespace: dict = {}
    exec(textwrap.dedent(TINY), namespace)
    fn, args = namespace["tiny"](config)
    found = kernels.decompose(hlo.parse_module(jax.jit(fn).lower(*args).compile().as_text()))
    gnn = kernel_task.load_method(kernel_task.default_model_dir(), "gnn")
    predicted_ns = gnn.predict([features.featurize(k) for k in found])
    assert found and (predicted_ns > 0).all()
    calls = np.array([k.calls_per_run for k in found])
    return float((predicted_ns * calls).sum() + gnn.dispatch_ns_per_kernel * len(found)) / 1e6


@pytest.mark.measures
def test_measurement_noise_and_compare_predicted_and_measured(tmp_path, monkeypatch):
    (tmp_path / "tiny.py").write_text(textwrap.dedent(TINY))
    spec = f"{tmp_path}/tiny.py:tiny"
    noise = autotune.measurement_noise(spec, processes=2, rounds=2)
    assert len(noise["runtime_ns"]) == 2 and noise["spread"] >= 0 and noise["config"]["act"] == "tanh"
    assert noise["backend"] == jax.default_backend() and noise["separate_processes"] == (
        noise["backend"] == "cpu"
    )
    with pytest.raises(ValueError, match="processes"):
        autotune.measurement_noise(spec, processes=1)
    from tpucost.method.costmodel import CostModel

    t, model = autotune.load_tunable(spec), CostModel.load(calibrated=False)
    configs = [t.space.default, {"act": "relu", "xla": "default"}]
    compiles = []
    real_compile = evaluators.compile_fn
    monkeypatch.setattr(evaluators, "compile_fn", lambda *a: compiles.append(1) or real_compile(*a))
    table = autotune.compare_predicted_and_measured(t, configs, model, repeats=2)
    assert len(compiles) == len(configs)  # each configuration compiled once, for both columns
    assert list(table["act"]) == ["tanh", "relu"] and table["measured / first"].iloc[0] == 1.0
    # The predictions, computed here without the autotuner or `CostModel`: the program built from
    # TINY's source, compiled by jax.jit, cut into kernels, each predicted by the bundled GNN itself
    # (`load_method`), summed with its calls per run plus the dispatch overhead per kernel.
    assert list(table["predicted ms"]) == pytest.approx([_predicted_ms_by_hand(c) for c in configs], rel=1e-6)
    assert (table["measured ms"] > 0).all() and (table["compile s"] < table["device s"]).all()


def test_progress_is_drawn_in_measured_milliseconds():
    import matplotlib

    matplotlib.use("Agg")
    run = autotune.SearchRun("device_only", "from_default", 0, {"k": 0})
    run.measured = [({"k": 0}, 2e6, 1.0), ({"k": 1}, 3e6, 2.0), ({"k": 2}, 1.5e6, 3.0)]
    ax = plots.plot_progress([run], default_ns=1.8e6)
    line, default = ax.get_lines()
    assert list(line.get_ydata()[1:]) == [2.0, 2.0, 1.5]  # best so far, in ms, as measured
    assert list(default.get_ydata()) == [1.8, 1.8] and "ms" in ax.get_ylabel()


# ------------------------------------------------------------------------------------------ resuming


def _tiny_autotune(spec: str, workdir: Path, **kw):
    return autotune.autotune(spec, autotune_config.get_smoke_config(**kw), workdir=workdir)


@pytest.mark.measures
@pytest.mark.timeout(300)
def test_a_killed_autotune_resumes_from_its_journal(tmp_path, monkeypatch):
    (tmp_path / "tiny.py").write_text(textwrap.dedent(TINY))
    spec, workdir = f"{tmp_path}/tiny.py:tiny", tmp_path / "work"
    first = _tiny_autotune(spec, workdir)
    journal = workdir / autotune.JOURNAL_NAME
    lines = journal.read_text().splitlines()
    assert len(lines) == 1 + 2 * 6  # the header, then 2 starts x (4 arms + 2 at equal wall time)
    # Killed while writing the third search: two complete lines and half of the next survive.
    journal.write_text("\n".join(lines[:3]) + "\n" + lines[3][: len(lines[3]) // 2])
    ran = []
    original = protocol._one_search

    def recording(*args, **kwargs):
        run = original(*args, **kwargs)
        ran.append((run.start, run.strategy, run.budget))
        return run

    monkeypatch.setattr(protocol, "_one_search", recording)
    second = _tiny_autotune(spec, workdir)
    # Only the searches not journalled ran again.
    assert ran == [(r.start, r.strategy, r.budget) for r in first.runs[2:]]
    assert [dataclasses.asdict(r) for r in second.runs[:2]] == [dataclasses.asdict(r) for r in first.runs[:2]]
    assert len(journal.read_text().splitlines()) == 13
    # Device accounting counts the resumed searches too.
    assert second.report["rates"]["device"]["candidates"] >= sum(len(r.measured) for r in second.runs[:2])
    with pytest.raises(
        ValueError, match=r"autotune-runs\.jsonl: written for another experiment \(budget_seconds"
    ):
        autotune.autotune(
            spec,
            autotune_config.AutotuneConfig(
                budget_s=0.5, seeds=(0,), n_candidates=2, repeats=1, fresh_process=False
            ),
            workdir=workdir,
        )
    journal.write_text("not json\n")
    with pytest.raises(ValueError, match=r"autotune-runs\.jsonl: line 1, column 1"):
        _tiny_autotune(spec, workdir)


def test_comparison_table_quotes_the_paper_for_the_program_space_only():
    tile = {**_report("c"), "space": "tile"}
    comparison = autotune.arms_comparison_table({"a": _report("a"), "c": tile})
    assert list(comparison["paper %"][:2]) == [2.0, 8.0]
    assert comparison["paper %"][2:].isna().all()
