"""Tests of tpucost.method.costmodel, the kernel task's experiments and the train / evaluate / predict commands,
on a tiny collected data set."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import rand_graph

from tpucost import cli, files
from tpucost.experiments import kernel_experiments, programs, results
from tpucost.experiments.data import collection, kernel_collection
from tpucost.experiments.data import kernel as kernel_data
from tpucost.method import checkpoint, costmodel, features, hlo, kernels, models, train
from tpucost.method.splits import Split
from tpucost.method.tasks import kernel as kernel_task

pytestmark = pytest.mark.core  # also run on Colab's versions (make test-colab)

METHODS = kernel_task.METHODS


@pytest.fixture
def tiny(tiny_kernels) -> kernel_data.KernelDataset:
    return tiny_kernels


@pytest.fixture
def trained(tiny_trained):
    return tiny_trained


def test_training_writes_every_method_and_evaluates_on_test(tiny, trained):
    out, report = trained
    assert (out / "gnn" / "params.msgpack").exists() and (out / "lstm" / "config.json").exists()
    assert (out / "analytical.json").exists() and (out / "constant.json").exists()
    saved = json.loads((out / "evaluation.json").read_text())
    assert set(saved["results"]) == set(METHODS)
    split = kernel_data.split(tiny, "random")
    assert saved["test_kernels"] == len(split.test) > 0 and saved["test_programs"] == len(split.test_ids) > 0
    rows = kernel_data.program_rows(tiny, split.test_ids)
    for method in METHODS:
        result = saved["results"][method]
        assert result["n_kernels"] == len(rows.kernel) and result["n_programs"] == len(split.test_ids)
        assert result["unseen"]["n_kernels"] == np.isin(rows.kernel, split.test).sum() > 0
        # a training kernel is never novel (the exact counts: the hand-built graphs of
        # test_evaluate_split_counts_the_structure_novel_rows_of_hand_built_graphs)
        assert result["structure_novel"]["n_kernels"] <= (~np.isin(rows.kernel, split.train)).sum()
        assert sum(result["n_programs_by_family"].values()) == len(split.test_ids)


def _three_test_programs(runtime_ns: dict[str, float] | None = None, b_is_a_reshaped: bool = False):
    """A data set of kernels s, a, b, c, e (1000 ns each, or ``runtime_ns``) run by three programs,
    p0 (mlp: s, a; training), p1 (unet: s, b) and p2 (jraph_gnn: s, c, e), its split, and a model
    whose prediction is the runtime times 1 + APE / 100 of `APE`. The five graphs have 3 to 7
    nodes, so no two share an opcode graph; with ``b_is_a_reshaped``, b is a's opcode graph with
    other node features (a's fusion at another shape: not structure-novel)."""
    runtime_ns = {"s": 1000.0, "a": 1000.0, "b": 1000.0, "c": 1000.0, "e": 1000.0, **(runtime_ns or {})}
    rng = np.random.default_rng(0)
    s, a, b, c, e = (
        rand_graph(rng, n)._replace(name=name) for n, name in zip((3, 4, 5, 6, 7), "sabce", strict=True)
    )
    if b_is_a_reshaped:
        b = a._replace(node_features=a.node_features + 1.0, name="b")
    meta = {
        "form": "forward",
        "configuration": "default",
        "backend": "cpu",
        "device_kind": "cpu",
        "jax_version": "0",
    }
    programs = {"p0": ("mlp", [s, a]), "p1": ("unet", [s, b]), "p2": ("jraph_gnn", [s, c, e])}
    ds = kernel_data.dedup(
        kernel_data.concat(
            [
                kernel_data.from_graphs(
                    gs,
                    [runtime_ns[g.name] for g in gs],
                    [1] * len(gs),
                    {**meta, "program_id": p, "family": f},
                )
                for p, (f, gs) in programs.items()
            ]
        )
    )
    kernel = {str(n): i for i, n in enumerate(ds.name)}  # s is stored once, first seen in p0 (train)
    split = Split(
        "program",
        np.array(["p0"]),
        np.array([], str),
        np.array(["p1", "p2"]),
        np.array([kernel["s"], kernel["a"]]),
        np.array([], np.int64),
        np.array([kernel["b"], kernel["c"], kernel["e"]]),
    )

    def predict(graphs):
        return np.array([runtime_ns[g.name] * (1 + APE[g.name] / 100) for g in graphs])

    return ds, split, predict


#: The APE (%) of `_three_test_programs`' model on each kernel.
APE = {"s": 100.0, "a": 0.0, "b": 10.0, "c": 10.0, "e": 40.0}


def test_evaluate_split_scores_every_kernel_each_test_program_ran():
    ds, split, predict = _three_test_programs()
    r = kernel_experiments.evaluate_split(ds, split, predict)
    assert (r["n_kernels"], r["n_programs"]) == (5, 2)  # s counts under p1 and p2, a not at all
    assert r["mape_lt5us"] == pytest.approx((55.0 + 50.0) / 2)  # p1: (100 + 10) / 2; p2: (100 + 10 + 40) / 3
    assert r["per_family"]["unet"]["mape_lt5us"] == pytest.approx(55.0)
    assert (r["unseen"]["n_kernels"], r["unseen"]["n_programs"]) == (3, 2)  # b, c, e
    assert r["unseen"]["mape_lt5us"] == pytest.approx((10.0 + 25.0) / 2)
    assert r["n_programs_by_family"] == {"jraph_gnn": 1, "unet": 1}
    # median APE over rows: all 10, 10, 40, 100, 100; unseen 10, 10, 40
    assert (r["median_ape"], r["unseen"]["median_ape"]) == pytest.approx((40.0, 10.0))
    # written by others (jraph_gnn, WRITTEN_BY_OTHERS): p2's rows only, s among them
    others = r["by_others"]
    assert (others["n_kernels"], others["n_programs"]) == (3, 1)
    assert (others["mape_lt5us"], others["median_ape"]) == pytest.approx((50.0, 40.0))


def test_evaluate_split_counts_the_structure_novel_rows_of_hand_built_graphs():
    """Novelty known by construction: the training program p0 ran s and a; b is a at another shape
    (unseen, same opcode graph), c and e have more nodes than any training kernel (structure-novel).
    Rows: p1 (s, b), p2 (s, c, e)."""
    ds, split, predict = _three_test_programs(b_is_a_reshaped=True)
    r = kernel_experiments.evaluate_split(ds, split, predict)
    assert (r["n_kernels"], r["unseen"]["n_kernels"]) == (5, 3)  # b, c, e unseen
    assert (r["structure_novel"]["n_kernels"], r["structure_novel"]["n_programs"]) == (2, 1)  # c, e in p2
    assert r["structure_novel"]["median_ape"] == pytest.approx((APE["c"] + APE["e"]) / 2)
    assert r["structure_novel"]["mape_lt5us"] == pytest.approx((APE["c"] + APE["e"]) / 2)  # p2's mean
    # the same data with b a new graph of five nodes: three structure-novel rows in two programs
    r = kernel_experiments.evaluate_split(*_three_test_programs())
    assert (r["structure_novel"]["n_kernels"], r["structure_novel"]["n_programs"]) == (3, 2)


def test_family_errors_score_each_test_family_and_say_which_way_it_errs():
    ds, split, predict = _three_test_programs({"e": 8000.0})  # e, the one kernel >= 5 us
    rows = kernel_experiments.family_errors(ds, split, predict)
    assert [r["family"] for r in rows] == ["unet", "jraph_gnn"]  # worst median APE first
    unet, gnn = rows
    # unet's rows s and b: APE 100 and 10; jraph_gnn's s, c, e: 100, 10, 40
    assert (unet["rows"], unet["median_ape"], gnn["rows"], gnn["median_ape"]) == pytest.approx(
        (2, 55.0, 3, 40.0)
    )
    assert (unet["ratio_lt5us"], unet["ratio_ge5us"]) == (pytest.approx(1.55), None)
    assert (gnn["ratio_lt5us"], gnn["ratio_ge5us"]) == pytest.approx((1.55, 1.4))
    scores = kernel_experiments.evaluate_split(ds, split, predict)
    summary = {part: scores[part] for part in ("structure_novel", "unseen")}
    summary.update(all_test_program_kernels=scores, by_family=rows)
    table = results.evaluation_summary_table({"gnn": summary})
    assert "unet 2 55.0% 1.55 -; jraph_gnn 3 40.0% 1.55 1.40" in table


def test_opcode_errors_average_the_kernels_holding_each_opcode(tiny):
    split = kernel_data.split(tiny, "random")
    kernels = split.test  # min_ns=0: every unseen test kernel, in the order opcode_errors predicts them
    factor = 1 + np.arange(len(kernels)) / 10  # a fake model: the k-th is predicted (1 + k/10) x its label
    rows = kernel_experiments.opcode_errors(
        tiny, split, lambda graphs: tiny.runtime_ns[kernels] * factor, min_ns=0
    )
    assert rows and [r["mape"] for r in rows] == sorted((r["mape"] for r in rows), reverse=True)
    for row in rows:
        op = features.OPCODE_VOCAB.index(row["opcode"])
        holding = [k for k, i in enumerate(kernels) if op in tiny.graph(int(i)).opcodes]
        assert row["kernels"] == len(holding) and row["opcode"] != "parameter"
        assert row["mape"] == pytest.approx(np.mean(100 * (factor[holding] - 1)))


def test_cost_model_predicts_positive_runtimes(tiny, trained):
    out, _ = trained
    graphs = [tiny.graph(i) for i in range(len(tiny))]
    for method in METHODS:
        pred = costmodel.CostModel.load(out, method).predict(graphs)
        assert pred.shape == (len(tiny),) and np.all(np.isfinite(pred)) and np.all(pred > 0)


@pytest.mark.slow
def test_test_labels_do_not_influence_training_or_early_stopping(tiny, tmp_path):
    """Several epochs of both networks (so early stopping has a choice) and the analytical fit:
    garbage test labels change no validation loss, no chosen epoch and no prediction."""
    split = kernel_data.split(tiny, "random")
    changed = kernel_data.load_dataset(tiny.root)
    changed.runtime_ns[split.test] = 1e9 / changed.runtime_ns[split.test]  # garbage, order reversed
    changed.runtime_ns[split.test[::2]] *= 100.0
    tiny_model = models.ModelConfig(opcode_embed=4, hidden=8, num_layers=1)
    config = train.TrainConfig.smoke(
        epochs=4, patience=4, batch_size=128, model=tiny_model
    )  # one step per epoch
    graphs = [tiny.graph(i) for i in range(len(tiny))]
    runs = []
    for ds, name in ((tiny, "a"), (changed, "b")):
        report = kernel_experiments.train_models(ds, "random", tmp_path / name, config, progress=False)
        preds = {m: costmodel.CostModel.load(tmp_path / name, m).predict(graphs) for m in METHODS}
        runs.append((report["histories"], preds))
    for method in ("gnn", "lstm"):
        assert len(runs[0][0][method]["val_loss"]) == 4  # every epoch ran: a real choice to make
        assert runs[0][0][method]["val_loss"] == runs[1][0][method]["val_loss"]
        np.testing.assert_allclose(runs[0][1][method], runs[1][1][method], rtol=1e-6)
    np.testing.assert_allclose(runs[0][1]["analytical"], runs[1][1]["analytical"], rtol=1e-9)


def test_a_killed_training_resumes_where_it_stopped(tiny, tmp_path, monkeypatch, capsys):
    """`kernel_experiments.train_models` keeps each network's per-epoch state in ``<method>-training`` until it
    finishes: killed after its second epoch, the same call runs only the epochs left and gives the
    model of an uninterrupted run; the state is gone once the checkpoint is saved."""
    tiny_model = models.ModelConfig(opcode_embed=4, hidden=8, num_layers=1)
    config = train.TrainConfig.smoke(epochs=4, patience=4, batch_size=128, model=tiny_model)
    graphs = [tiny.graph(i) for i in range(len(tiny))]
    whole = kernel_experiments.train_models(
        tiny, "random", tmp_path / "whole", config, methods=("gnn",), progress=False
    )
    assert not (tmp_path / "whole" / f"gnn{kernel_experiments.TRAINING_SUFFIX}").exists()
    saving = checkpoint.save_train_state

    def killed_after_two(path, state, *args):
        saving(path, state, *args)
        if state.epoch == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(checkpoint, "save_train_state", killed_after_two)
    with pytest.raises(KeyboardInterrupt):
        kernel_experiments.train_models(
            tiny, "random", tmp_path / "killed", config, methods=("gnn",), progress=False
        )
    assert (
        tmp_path / "killed" / f"gnn{kernel_experiments.TRAINING_SUFFIX}" / train.TRAIN_STATE_FILE
    ).is_file()
    # `train` with another model config into that folder: one line naming the state, no traceback.
    other = [
        "train",
        "--data",
        str(tiny.root),
        "--out",
        str(tmp_path / "killed"),
        "--methods",
        "gnn",
        "--smoke",
    ]
    assert cli.main([*other, "--no-progress"]) == 2
    assert "gnn-training" in capsys.readouterr().err
    monkeypatch.setattr(checkpoint, "save_train_state", saving)
    epochs = []
    running = train._train_epoch
    monkeypatch.setattr(train, "_train_epoch", lambda *a, **k: epochs.append(1) or running(*a, **k))
    resumed = kernel_experiments.train_models(
        tiny, "random", tmp_path / "killed", config, methods=("gnn",), progress=False
    )
    assert len(epochs) == 2 and resumed["histories"]["gnn"] == whole["histories"]["gnn"]
    np.testing.assert_allclose(
        costmodel.CostModel.load(tmp_path / "killed", "gnn").predict(graphs),
        costmodel.CostModel.load(tmp_path / "whole", "gnn").predict(graphs),
        rtol=1e-6,
    )
    assert not (tmp_path / "killed" / f"gnn{kernel_experiments.TRAINING_SUFFIX}").exists()


@pytest.mark.slow
def test_train_cli_takes_the_epochs_patience_and_seed_it_is_given(tiny, tmp_path):
    args = ["train", "--data", str(tiny.root), "--out", str(tmp_path), "--methods", "gnn", "--smoke"]
    assert cli.main([*args, "--epochs", "2", "--patience", "1", "--seed", "3", "--no-progress"]) == 0
    saved = json.loads((tmp_path / "gnn" / "config.json").read_text())["train"]
    assert (saved["epochs"], saved["patience"], saved["seed"]) == (2, 1, 3)


def test_predict_program_covers_every_kernel(trained):
    out, _ = trained

    def f(x, w):
        return jax.nn.softmax(jnp.tanh(x @ w), axis=-1).sum(0)

    args = (jnp.ones((32, 64)), jnp.ones((64, 16)))
    estimate = costmodel.CostModel.load(out, "gnn").predict_program(f, *args)
    names = [k.name for k in kernels.decompose(hlo.parse_module(jax.jit(f).lower(*args).compile().as_text()))]
    assert [k["name"] for k in estimate.kernels] == names
    assert estimate.kernels_ns == pytest.approx(
        sum(k["predicted_ns"] * k["calls_per_run"] for k in estimate.kernels)
    )
    assert estimate.total_ns == pytest.approx(estimate.kernels_ns + estimate.dispatch_ns)


def test_program_totals_add_the_training_programs_dispatch_overhead(tiny, trained):
    """The checkpoint stores the dispatch overhead of its TRAINING programs' runs; totals add it per kernel."""
    out, _ = trained
    split = kernel_data.split(tiny, "random")
    train_runs = [
        e
        for e in collection.read_log(tiny.root)
        if e.get("status") == "ok" and e["program_id"] in split.train_ids
    ]
    expected = kernel_collection.dispatch_ns_per_kernel(train_runs)
    model = costmodel.CostModel.load(out, "gnn")
    assert expected is not None and model.dispatch_ns_per_kernel == pytest.approx(expected)
    estimate = model.predict_hlo(
        jax.jit(lambda x: jnp.tanh(x) @ x).lower(jnp.ones((8, 8))).compile().as_text()
    )
    assert estimate.dispatch_ns == pytest.approx(expected * len(estimate.kernels))

    totals = kernel_experiments.program_totals(
        model, tiny.root, split.test_ids, min_wall_ns=0, progress=False
    )
    runs = [
        e
        for e in collection.read_log(tiny.root)
        if e.get("status") == "ok" and e["program_id"] in split.test_ids
    ]
    assert totals["pairs"] == len(runs) > 0
    ratios = []
    for run in runs:  # every (program, configuration) pair predicted whole, against its wall time
        program = programs.program_from_id(run["program_id"])
        fn, options = program.configured(run["configuration"])
        ratios.append(
            model.predict_program(fn, *program.args, compiler_options=options).total_ns / run["wall_ns"]
        )
    assert totals["median_ratio"] == pytest.approx(np.median(ratios), rel=1e-6)
    assert totals["median_ape"] == pytest.approx(np.median([100 * abs(r - 1) for r in ratios]), rel=1e-6)


def test_dispatch_overhead_is_the_median_unlabelled_time_per_kernel():
    runs = [
        {"wall_ns": 1000.0, "kernel_ns_per_run": 900.0, "kernels": 10},  # 10 ns per kernel
        {"wall_ns": 500.0, "kernel_ns_per_run": 300.0, "kernels": 4},  # 50
        {"wall_ns": 800.0, "kernel_ns_per_run": 780.0, "kernels": 1},
    ]  # 20
    assert kernel_collection.dispatch_ns_per_kernel(runs) == pytest.approx(20.0)
    assert kernel_collection.dispatch_ns_per_kernel([]) is None


def test_cli_predict_and_evaluate(tiny, trained, tmp_path, capsys):
    out, _ = trained
    text = jax.jit(lambda x: jnp.exp(x) @ x).lower(jnp.ones((16, 16))).compile().as_text()
    path = tmp_path / "p.hlo"
    path.write_text(text)
    for method in METHODS:
        assert cli.main(["predict", "--model", str(out), "--method", method, str(path), "--json"]) == 0
        result = json.loads(capsys.readouterr().out)
        assert result["kernels"] and set(result["kernels"][0]) == {"name", "predicted_ns"}
        assert result["kernels_ns"] == pytest.approx(sum(k["predicted_ns"] for k in result["kernels"]))
        assert result["total_ns"] == pytest.approx(result["kernels_ns"] + result["dispatch_ns"])
    assert (
        cli.main(
            [
                "evaluate",
                "--task",
                "kernel",
                "--model",
                str(out),
                "--data",
                str(tiny.root),
                "--split",
                "random",
                "--json",
            ]
        )
        == 0
    )
    table = json.loads(capsys.readouterr().out)
    assert set(table) == set(METHODS)
    headline = {"median_ape", "mape_ge5us", "mape_lt5us", "kendall_median", "n_kernels", "n_programs"}
    saved = json.loads((out / "evaluation.json").read_text())["results"]
    parts = {"structure_novel", "unseen", "all_test_program_kernels"}
    for method, row in table.items():
        assert set(row) == parts | {"n_programs_by_family"}
        assert all(set(row[p]) == headline for p in parts)
        # The headline: structure-novel and unseen rows, with counts; then every row of the test programs.
        for part in ("structure_novel", "unseen"):
            np.testing.assert_equal(row[part], {k: saved[method][part][k] for k in headline})
        everything = row["all_test_program_kernels"]
        np.testing.assert_equal(everything, {k: saved[method][k] for k in headline})
        assert row["structure_novel"]["n_kernels"] <= row["unseen"]["n_kernels"] <= everything["n_kernels"]
        assert sum(row["n_programs_by_family"].values()) == everything["n_programs"]
    assert cli.main(["evaluate", "--model", str(out), "--data", str(tiny.root), "--split", "random"]) == 0
    printed = capsys.readouterr().out
    assert printed.index("Structure-novel test rows (the headline)") < printed.index("Unseen test rows")
    assert printed.index("Unseen test rows") < printed.index("All rows of the test programs")
    by_novelty = ["evaluate", "--model", str(out), "--data", str(tiny.root), "--by-novelty"]
    assert cli.main(by_novelty) == 0
    assert capsys.readouterr().out.strip() == results.novelty_table(saved)
    # --methods: only those (a folder trained with `train --methods gnn` has no lstm to load).
    folder = ["evaluate", "--model", str(out), "--data", str(tiny.root), "--json", "--methods"]
    assert cli.main([*folder, "gnn,analytical"]) == 0
    assert set(json.loads(capsys.readouterr().out)) == {"gnn", "analytical"}
    assert cli.main([*folder, "gnn,rnn"]) == 2
    assert "method must be one of" in capsys.readouterr().err
    bad = tmp_path / "bad.hlo"
    bad.write_text("HloModule m\nENTRY e {\n  ROOT x = f32[] frob()\n}\n")
    assert cli.main(["predict", "--model", str(out), str(bad)]) == 2
    with pytest.raises(SystemExit):
        cli.main(["evaluate", "--task", "layout", "--model", str(out)])  # no such task
    assert (
        cli.main(["evaluate", "--task", "tile", "--model", str(out)]) == 2
    )  # kernel models are not tile models
    assert "no tile models" in capsys.readouterr().err


@pytest.mark.slow
def test_hparam_search_scores_validation_programs_and_resumes(tiny, tmp_path, monkeypatch):
    ds = tiny
    out = tmp_path / "search.json"
    first = kernel_experiments.hparam_search(ds, out, ["gnn-base"], epochs=1, progress=False)
    (trial,) = first["trials"]
    split = kernel_data.split(ds, "random")
    assert first["scored_on"] == "validation" and first["winner"] == "gnn-base"
    assert trial["val_programs"] == len(split.val_ids) and trial["epochs_run"] == 1
    ran = []
    monkeypatch.setattr(
        kernel_experiments,
        "_hparam_trial",
        lambda name, *a, **k: (
            ran.append(name) or {**trial, "trial": name, "val_mape_ge5us": trial["val_mape_ge5us"] - 1}
        ),
    )
    again = kernel_experiments.hparam_search(ds, out, ["gnn-base", "gnn-wide"], epochs=1, progress=False)
    assert ran == ["gnn-wide"] and again["winner"] == "gnn-wide"  # the finished trial is not run again
    with pytest.raises(ValueError, match="unknown trials"):
        kernel_experiments.hparam_search(ds, out, ["gnn-huge"])
    with pytest.raises(ValueError, match="search of the random split, not hard"):
        kernel_experiments.hparam_search(ds, out, ["gnn-base"], split="hard")


def test_the_checkpoints_readme_tables_are_what_experiment_tables_prints():
    readme = (files.bundled_dir() / "checkpoints" / "README.md").read_text()
    tables = results.checkpoint_tables()
    for section in ("## random split", "## hard split", "## Hyperparameter search", "## Whole programs"):
        assert section in tables, section
    missing = [line for line in tables.splitlines() if line.strip() and line not in readme]
    assert not missing, missing[:3]


#: A loop fusion (add, then multiply) over SHAPE, with its two parameters listed in ORDER.
FUSION_HLO = """HloModule m

fused {
  ORDER
  add.1 = SHAPE add(p0, p1)
  ROOT multiply.1 = SHAPE multiply(add.1, p1)
}

ENTRY main {
  a = SHAPE parameter(0)
  b = SHAPE parameter(1)
  ROOT fusion = SHAPE fusion(a, b), kind=kLoop, calls=fused
}
"""
PARAMETERS = ("p0 = SHAPE parameter(0)", "p1 = SHAPE parameter(1)")


def _fusion_graph(shape: str = "f32[8,16]", swapped: bool = False) -> features.KernelGraph:
    """The one kernel of `FUSION_HLO` at ``shape`` (its parameters listed in swapped order: the same
    computation, its nodes numbered differently)."""
    order = "\n  ".join(PARAMETERS[::-1] if swapped else PARAMETERS)
    (kernel,) = kernels.decompose(
        hlo.parse_module(FUSION_HLO.replace("ORDER", order).replace("SHAPE", shape))
    )
    return features.featurize(kernel)


def test_structure_hash_ignores_shapes_and_structure_novel_needs_a_new_graph():
    """The stated choice (`kernel_data.structure_hash`: "opcodes, edges and kind; shapes and
    attributes aside"): another element type or rank of the same fusion is the same opcode graph,
    a kernel_hash apart; another kind or other edges is another graph."""
    g = _fusion_graph()
    assert g.num_nodes == 4 and g.num_edges == 4  # the two parameters, add, multiply
    for other in ("bf16[8,16]", "s32[8,16]", "f32[2,4,16]", "f32[128]"):  # element type, rank
        changed = _fusion_graph(other)
        assert np.array_equal(changed.opcodes, g.opcodes) and not np.array_equal(
            changed.node_features, g.node_features
        ), other
        assert kernel_data.structure_hash(changed) == kernel_data.structure_hash(g), other
        assert kernel_data.kernel_hash(changed, "cpu") != kernel_data.kernel_hash(g, "cpu"), other
    assert kernel_data.structure_hash(g) != kernel_data.structure_hash(g._replace(kind="kInput"))
    # add(p0, p1) -> multiply(add, p1): the edge from add to multiply now leaves p0, so add has no
    # user (moving p1's edge to p0 instead would give the same graph with the parameters renamed)
    mul, add, p0 = g.num_nodes - 1, g.num_nodes - 2, 0
    moved = (g.senders == add) & (g.receivers == mul)
    assert moved.sum() == 1
    rewired = g._replace(senders=np.where(moved, p0, g.senders).astype(np.int32))
    assert kernel_data.structure_hash(rewired) != kernel_data.structure_hash(g)


def test_structure_hash_is_invariant_to_the_order_of_the_nodes():
    g, swapped = _fusion_graph(), _fusion_graph(swapped=True)
    assert sorted(g.opcodes.tolist()) == sorted(swapped.opcodes.tolist())
    assert not np.array_equal(g.opcodes, swapped.opcodes) or not np.array_equal(g.senders, swapped.senders)
    assert kernel_data.structure_hash(swapped) == kernel_data.structure_hash(g)


def test_constant_baseline_is_the_median_of_each_kind_in_log_space():
    from tpucost.method.baselines import KindMedianModel

    model = KindMedianModel().fit([100.0, 400.0, 10.0, 1000.0, 10_000.0], ["a", "a", "b", "b", "b"])
    rng = np.random.default_rng(0)
    graphs = [rand_graph(rng, 3)._replace(kind=k) for k in ("a", "b", "never")]
    np.testing.assert_allclose(model.predict(graphs), [200.0, 1000.0, 400.0])  # geometric medians
    again = KindMedianModel.from_json(model.to_json())
    np.testing.assert_allclose(again.predict(graphs), model.predict(graphs))
    with pytest.raises(ValueError, match="missing field 'log_ns_default'"):
        KindMedianModel.from_json({"log_ns_by_kind": {}})
    with pytest.raises(ValueError, match="every runtime > 0"):
        KindMedianModel().fit([0.0], ["a"])
