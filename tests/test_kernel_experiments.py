"""tpucost.experiments.kernel_experiments: leave-one-group-out and the learning curve, on the tiny data set."""

from __future__ import annotations

import json

import numpy as np
import pytest

from lab import cli
from tpucost.experiments import kernel_experiments, results
from tpucost.method import train

pytestmark = pytest.mark.slow  # trains models

GROUPS = {"dense": ("mlp",), "norms": ("norm_softmax",), "recurrent": ("gru",)}
METHODS = ("gnn", "analytical")


def test_leave_group_out_scores_each_group_unseen_and_resumes(tiny_kernels, tmp_path):
    config = train.TrainConfig.smoke()
    summary = kernel_experiments.leave_group_out(
        tiny_kernels, tmp_path, config, METHODS, GROUPS, progress=False
    )
    assert set(summary["groups"]) == {"dense", "norms"} and summary["absent"] == ["recurrent"]
    for group, families in (("dense", ["mlp"]), ("norms", ["norm_softmax"])):
        report = json.loads((tmp_path / group / "evaluation.json").read_text())
        assert summary["groups"][group]["families"] == families
        assert report["test_programs"] == 3 and report["split"] == f"leave-out:{group}"
    for m in METHODS:
        mapes = [summary["groups"][g][m]["mape_ge5us"] for g in ("dense", "norms")]
        mapes = [x for x in mapes if x is not None]
        assert summary[m]["mean_mape_ge5us"] == pytest.approx(np.mean(mapes))
        assert summary[m]["worst_mape_ge5us"] == max(mapes)
    params = tmp_path / "dense" / "gnn" / "params.msgpack"
    before = params.stat().st_mtime_ns
    again = kernel_experiments.leave_group_out(
        tiny_kernels, tmp_path, config, METHODS, GROUPS, progress=False
    )
    assert again == summary and params.stat().st_mtime_ns == before  # finished groups are not retrained


def test_learning_curve_trains_on_nested_parts_and_scores_the_same_kernels(tiny_kernels, tmp_path):
    summary = kernel_experiments.learning_curve(
        tiny_kernels, tmp_path, (1.0, 0.5), train.TrainConfig.smoke(), ("analytical",), progress=False
    )
    small, full = summary["points"]
    assert (small["fraction"], full["fraction"]) == (0.5, 1.0)
    assert (
        small["train_programs"] < full["train_programs"] and small["train_kernels"] <= full["train_kernels"]
    )
    assert small["analytical"]["n_kernels"] == full["analytical"]["n_kernels"] > 0  # the same unseen rows
    assert json.loads((tmp_path / kernel_experiments.LEARNING_CURVE_FILE).read_text()) == summary


def test_the_learning_curve_command_prints_its_summary(tiny_kernels, tmp_path, capsys):
    code = cli.main(
        [
            "experiment",
            "learning-curve",
            "--data",
            str(tiny_kernels.root),
            "--out",
            str(tmp_path),
            "--methods",
            "analytical",
            "--fractions",
            "1",
            "--no-progress",
        ]
    )
    assert code == 0 and json.loads(capsys.readouterr().out)["points"][0]["fraction"] == 1.0


def test_experiment_tables_show_both_experiments_from_their_summaries(tiny_kernels, tmp_path):
    config, methods = train.TrainConfig.smoke(), ("analytical",)
    logo = kernel_experiments.leave_group_out(
        tiny_kernels, tmp_path / results.LEAVE_GROUP_OUT_DIR, config, methods, GROUPS, progress=False
    )
    curve = kernel_experiments.learning_curve(
        tiny_kernels, tmp_path / results.LEARNING_CURVE_DIR, (0.5, 1.0), config, methods, progress=False
    )
    text = results.checkpoint_tables(tmp_path)
    rows = {line.split(" | ")[0].strip("| "): line for line in text.splitlines() if line.startswith("| ")}
    for group, figures in logo["groups"].items():
        mape = figures["analytical"]["mape_ge5us"]
        assert f"{mape:.1f} / {figures['analytical']['kendall_median']:.3f}" in rows[group]
    assert f"**{logo['analytical']['mean_mape_ge5us']:.1f}**" in rows["**mean**"]
    assert f"({logo['analytical']['worst_group']})" in rows["worst"]
    for point in curve["points"]:
        row = rows[f"{point['train_programs']:,} ({point['fraction']:g})"]
        assert (
            f"{point['analytical']['mape_ge5us']:.1f} / " in row and f"| {point['train_kernels']:,} |" in row
        )
