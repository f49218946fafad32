"""Tests of tpucost.costmodel and the train / evaluate / predict commands, on a tiny collected data set."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tpucost import cli, collect, costmodel, data, hlo, kernels, train

METHODS = ("gnn", "lstm", "analytical")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> data.KernelDataset:
    """Six small programs measured on this CPU (default configuration only)."""
    out = tmp_path_factory.mktemp("tiny")
    collect.collect(out, 6, 0, repeats=2, configurations=("default",), families=("mlp", "norm_softmax"),
                    progress=False)
    return data.load_kernel_dataset(out)


@pytest.fixture(scope="module")
def trained(tiny, tmp_path_factory):
    out = tmp_path_factory.mktemp("models")
    report = costmodel.train_kernel_models(tiny, "random", out, train.TrainConfig.smoke(), progress=False)
    return out, report


def test_training_writes_every_method_and_evaluates_on_test(tiny, trained):
    out, report = trained
    assert (out / "gnn" / "params.msgpack").exists() and (out / "lstm" / "config.json").exists()
    assert (out / "analytical.json").exists()
    saved = json.loads((out / "evaluation.json").read_text())
    assert set(saved["results"]) == set(METHODS)
    _, _, test_idx = costmodel.split_indices(tiny, "random")
    assert saved["test_kernels"] == len(test_idx) > 0
    for method in METHODS:
        assert saved["results"][method]["n_kernels"] == len(test_idx)


def test_cost_model_predicts_positive_runtimes(tiny, trained):
    out, _ = trained
    graphs = [tiny.graph(i) for i in range(len(tiny))]
    for method in METHODS:
        pred = costmodel.CostModel.load(out, method).predict(graphs)
        assert pred.shape == (len(tiny),) and np.all(np.isfinite(pred)) and np.all(pred > 0)


def test_test_labels_do_not_influence_training(tiny, tmp_path):
    _, _, test_idx = costmodel.split_indices(tiny, "random")
    changed = data.load_kernel_dataset(tiny.root)
    changed.runtime_ns[test_idx] *= 100.0
    graphs = [tiny.graph(i) for i in range(len(tiny))]
    preds = []
    for ds, name in ((tiny, "a"), (changed, "b")):
        costmodel.train_kernel_models(ds, "random", tmp_path / name, train.TrainConfig.smoke(epochs=1),
                                      methods=("gnn", "analytical"), progress=False)
        preds.append([costmodel.CostModel.load(tmp_path / name, m).predict(graphs) for m in ("gnn", "analytical")])
    np.testing.assert_allclose(preds[0][0], preds[1][0], rtol=1e-6)
    np.testing.assert_allclose(preds[0][1], preds[1][1], rtol=1e-9)


def test_predict_program_covers_every_kernel(trained):
    out, _ = trained

    def f(x, w):
        return jax.nn.softmax(jnp.tanh(x @ w), axis=-1).sum(0)

    args = (jnp.ones((32, 64)), jnp.ones((64, 16)))
    estimate = costmodel.CostModel.load(out, "gnn").predict_program(f, *args)
    names = [k.name for k in kernels.decompose(hlo.parse_module(jax.jit(f).lower(*args).compile().as_text()))]
    assert [k["name"] for k in estimate.kernels] == names
    assert estimate.total_ns == pytest.approx(sum(k["predicted_ns"] * k["calls_per_run"] for k in estimate.kernels))


def test_cli_predict_and_evaluate(tiny, trained, tmp_path, capsys):
    out, _ = trained
    text = jax.jit(lambda x: jnp.exp(x) @ x).lower(jnp.ones((16, 16))).compile().as_text()
    path = tmp_path / "p.hlo"
    path.write_text(text)
    for method in METHODS:
        assert cli.main(["predict", "--model", str(out), "--method", method, str(path), "--json"]) == 0
        result = json.loads(capsys.readouterr().out)
        assert result["kernels"] and set(result["kernels"][0]) == {"name", "predicted_ns"}
        assert result["total_ns"] == pytest.approx(sum(k["predicted_ns"] for k in result["kernels"]))
    assert cli.main(["evaluate", "--task", "kernel", "--model", str(out), "--data", str(tiny.root),
                     "--split", "random", "--json"]) == 0
    table = json.loads(capsys.readouterr().out)
    assert set(table) == set(METHODS)
    for row in table.values():
        assert set(row) == {"mape_ge5us", "mape_lt5us", "kendall_median", "n_kernels", "n_programs"}
    bad = tmp_path / "bad.hlo"
    bad.write_text("HloModule m\nENTRY e {\n  ROOT x = f32[] frob()\n}\n")
    assert cli.main(["predict", "--model", str(out), str(bad)]) == 2
    with pytest.raises(SystemExit):
        cli.main(["evaluate", "--task", "tile", "--model", str(out)])
