"""Tests of scoring a model on families its training data never ran
(`tpucost.experiments.new_families`; the command that printed it, ``evaluate --new-families DIR``, left
``python -m tpucost`` with issue 53).

The data sets are a few hundred kernels of the bundled data set (`device_packs.small_subset`), cut
by family: the model's training data holds the kernels that only ``mlp`` programs ran, the new
data those that only ``cnn`` and ``jraph_gnn`` programs ran (``norm_softmax`` renamed, a family
written by others). The models are the fitted baselines (seconds to fit)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from device_packs import small_subset

from tpucost.experiments import kernel_experiments, new_families, results
from tpucost.experiments.data import kernel as kernel_data
from tpucost.method import checkpoint, features, metrics
from tpucost.method.tasks.kernel import load_method

pytestmark = pytest.mark.core  # also run on Colab's versions (make test-colab)

BASELINES = ("constant",)  # the analytical model would time kernels to fit its dispatch overhead


def _only(ds: kernel_data.KernelDataset, families: set[str]) -> kernel_data.KernelDataset:
    """The kernels of ``ds`` that only programs of ``families`` ran."""
    outside = np.unique(ds.source_kernel[~np.isin(ds.source_family.astype(str), sorted(families))])
    return ds.subset(np.setdiff1d(np.arange(len(ds)), outside))


@pytest.fixture(scope="module")
def cut(tmp_path_factory, bundled_kernels):
    """(training data, new data, its folder, the folder of baselines fitted on the training data)."""
    source = small_subset(bundled_kernels)
    training, new = _only(source, {"mlp"}), _only(source, {"cnn", "jraph_gnn"})
    root = tmp_path_factory.mktemp("new_families")
    kernel_data.save_dataset(training, root / "training")
    kernel_data.save_dataset(new, root / "new")
    training = kernel_data.load_kernel_dataset(root / "training")
    kernel_experiments.train_models(training, "random", root / "models", methods=BASELINES, progress=False)
    return training, kernel_data.load_kernel_dataset(root / "new"), root


def _known_novelty(training: kernel_data.KernelDataset) -> kernel_data.KernelDataset:
    """New programs of hand-built kernels whose novelty is known by construction, measured on the
    training data's device: q1 (cnn) ran x1 (training kernel 0 at another shape: unseen, not
    structure-novel), x2 (training kernel 1 itself: seen) and x3 (a chain of more nodes than any
    training kernel has: structure-novel); q2 (jraph_gnn, written by others) ran x2 and x4
    (a longer chain: structure-novel)."""
    g0, g1 = training.graph(0), training.graph(1)
    n = int(training.table.n_nodes.max()) + 1

    def chain(opcode: str, nodes: int, name: str) -> features.KernelGraph:
        return features.KernelGraph(
            opcodes=np.full(nodes, features.opcode_id(opcode), np.int32),
            node_features=np.zeros((nodes, training.features.num_node_features), np.float32),
            senders=np.arange(nodes - 1, dtype=np.int32),
            receivers=np.arange(1, nodes, dtype=np.int32),
            name=name,
            kind="kLoop",
        )

    x1 = g0._replace(node_features=g0.node_features + 1.0, name="x1")
    x2, x3, x4 = g1._replace(name="x2"), chain("add", n, "x3"), chain("multiply", n + 1, "x4")
    runtime = {"x1": 2000.0, "x2": float(training.runtime_ns[1]), "x3": 8000.0, "x4": 20000.0}
    columns = training.table.columns
    meta = {f: str(columns[f][1]) for f in ("form", "configuration", "backend", "device_kind", "jax_version")}
    parts = [
        kernel_data.from_graphs(
            gs, [runtime[g.name] for g in gs], [1] * len(gs), {**meta, "program_id": p, "family": f}
        )
        for p, f, gs in (("q1", "cnn", [x1, x2, x3]), ("q2", "jraph_gnn", [x2, x4]))
    ]
    known = kernel_data.dedup(kernel_data.concat(parts))
    assert known.kernel_hash[list(known.name).index("x2")] == training.kernel_hash[1]  # x2 is seen
    return dataclasses.replace(known, device=training.device)


def test_every_row_of_the_new_programs_is_scored_in_each_column(cut):
    training, new, root = cut
    result = new_families.evaluate_new_families(root / "models", training, new, BASELINES)
    assert result["families"] == ["cnn", "jraph_gnn"] and result["device"] == (new.device or {})["id"]
    programs = np.unique(new.source_program_id.astype(str))
    assert result["programs"] == len(programs)
    rows = kernel_data.program_rows(new, programs)
    graphs = [new.graph(int(k)) for k in rows.kernel]
    unseen = ~np.isin(new.kernel_hash[rows.kernel], training.kernel_hash)  # the data sets' stored hashes
    for method in BASELINES:
        pred = load_method(root / "models", method, new.features).predict(graphs)
        true = new.runtime_ns[rows.kernel]
        columns = result["methods"][method]["columns"]
        assert set(columns) == set(kernel_experiments.COLUMNS)
        for name, keep in (("all", np.ones(len(true), bool)), ("unseen", unseen)):
            assert columns[name]["n_kernels"] == keep.sum(), (method, name)
            assert columns[name]["median_ape"] == pytest.approx(metrics.median_ape(pred[keep], true[keep]))
        assert columns["structure_novel"]["n_kernels"] <= unseen.sum()  # a seen kernel is never novel
        by_family = result["methods"][method]["by_family"]
        by_others = rows.family == "jraph_gnn"  # written by others; cnn is not
        assert columns["by_others"]["n_kernels"] == by_family["jraph_gnn"]["n_kernels"] == by_others.sum()
        assert columns["by_others"]["median_ape"] == by_family["jraph_gnn"]["median_ape"]
        assert by_family["cnn"]["n_kernels"] == (~by_others).sum()
    assert set(result["methods"]) == set(BASELINES)  # no network: nothing calibrated by family

    # Each column on rows whose novelty is known by construction (`_known_novelty`): rows q1: x1, x2,
    # x3; q2: x2, x4. Unseen: x1, x3, x4; structure-novel: x3, x4; written by others: q2's two.
    known = _known_novelty(training)
    result = new_families.evaluate_new_families(root / "models", training, known, BASELINES)
    names = {"q1": ["x1", "x2", "x3"], "q2": ["x2", "x4"]}
    for method in BASELINES:
        model = load_method(root / "models", method, known.features)
        ape = {  # each kernel's APE (%), one kernel at a time
            str(known.name[k]): 100 * abs(float(model.predict([known.graph(k)])[0]) / known.runtime_ns[k] - 1)
            for k in range(len(known))
        }
        columns = result["methods"][method]["columns"]
        for column, rows_of in (
            ("all", [x for xs in names.values() for x in xs]),
            ("unseen", ["x1", "x3", "x4"]),
            ("structure_novel", ["x3", "x4"]),
            ("by_others", names["q2"]),
        ):
            assert columns[column]["n_kernels"] == len(rows_of), (method, column)
            assert columns[column]["median_ape"] == pytest.approx(np.median([ape[x] for x in rows_of])), (
                column
            )
        assert columns["structure_novel"]["n_programs"] == 2


def test_a_family_the_training_data_ran_is_refused(cut):
    training, _, root = cut
    with pytest.raises(ValueError, match=r"holds families the model's training data .* ran too: mlp"):
        new_families.evaluate_new_families(root / "models", training, training, BASELINES)


def test_another_device_is_refused(cut):
    training, new, root = cut
    moved = dataclasses.replace(new, device={**(new.device or {}), "id": "otherdevice1"})
    with pytest.raises(ValueError, match=r"measured on device 'otherdevice1'.* leave-one-device-out"):
        new_families.evaluate_new_families(root / "models", training, moved, BASELINES)


def test_calibration_by_family_is_fitted_on_the_other_families_only(cut):
    """Predictions 3x too slow on the kernels only cnn ran, right on those only jraph_gnn ran: each
    family's rows get the other family's offset, so cnn stays 3x off (APE 200%) and jraph_gnn is
    pulled to a third (APE 66.7%). A correction fitted on a family's own kernels would give 0."""
    training, new, _ = cut
    rows = kernel_experiments.HeldOutRows(new, np.unique(new.source_program_id.astype(str)), training)
    family = rows.rows.family.astype(str)
    only = {f: np.setdiff1d(rows.where[family == f], rows.where[family != f]) for f in ("cnn", "jraph_gnn")}
    assert all(len(k) >= 5 for k in only.values())
    factor = np.ones(len(rows.kernels))
    factor[only["cnn"]] = 3.0
    calibrated = new_families.calibrated_by_family(rows, rows.true_by_kernel * factor)
    ape = 100 * np.abs(calibrated / rows.true - 1)
    for f, expected in (("cnn", 200.0), ("jraph_gnn", 100 * 2 / 3)):
        np.testing.assert_allclose(ape[np.isin(rows.where, only[f]) & (family == f)], expected, rtol=1e-9)


def _scores(median_ape, n=10):
    return {"median_ape": median_ape, "mape_ge5us": median_ape, "mape_lt5us": None, "kendall_median": 0.5,
            "n_kernels": n, "n_programs": 2}  # fmt: skip


@pytest.mark.parametrize(
    ("gnn", "verdict"), [(20.0, "30.0 points lower than"), (60.0, "not lower than (+10.0 points)")]
)
def test_the_table_says_whether_a_learned_model_beats_the_best_heuristic(gnn, verdict):
    def method(ape):
        columns = {c: _scores(ape) for c in kernel_experiments.COLUMNS}
        return {"columns": columns, "by_family": {"jraph_gnn": _scores(ape)}}

    result = {
        "programs": 2,
        "families": ["jraph_gnn"],
        "data": "d",
        "device": "dev",
        "noise": None,
        "methods": {"gnn": method(gnn), "analytical": method(70.0), "constant": method(50.0)},
    }
    text = results.new_families_table(result)
    assert "no noise floor recorded" in text
    assert (
        f"gnn, structure-novel rows: median APE {gnn:.1f}%, {verdict} the best heuristic's (constant, 50.0%)."
        in text
    )
    assert text.count("best heuristic") == len(results.NEW_FAMILY_COLUMNS)


PENDING = Path(__file__).resolve().parents[1] / "tpucost" / "bundled" / "pending" / "be3048b01916"
QUOTED = Path(__file__).resolve().parents[1] / "docs" / "results" / "new_families.json"


@pytest.mark.slow
@pytest.mark.newest_only
@pytest.mark.skipif(not PENDING.is_dir(), reason="the pending measurements are in the repository only")
def test_the_quoted_new_family_figures_are_the_bundled_models(bundled_kernels):
    """docs/results/new_families.json (quoted by docs/cost-model.md) is what the bundled random-split
    checkpoints score on the pending measurements now: a retrained model or re-measured data fails here."""
    quoted = json.loads(QUOTED.read_text())["random"]
    now = new_families.evaluate_new_families(
        checkpoint.bundled_checkpoints_dir() / "kernel-random",
        bundled_kernels,
        kernel_data.load_kernel_dataset(PENDING),
    )
    assert now["families"] == quoted["families"] and set(now["methods"]) == set(quoted["methods"])
    for method, result in now["methods"].items():
        for column, scores in result["columns"].items():
            shown = quoted["methods"][method]["columns"][column]
            assert scores["n_kernels"] == shown["n_kernels"], (method, column)
            assert scores["median_ape"] == pytest.approx(shown["median_ape"], abs=0.05), (method, column)
    text = " ".join((QUOTED.parents[1] / "cost-model.md").read_text().split())
    gnn = quoted["methods"]["gnn"]["columns"]
    assert f"{gnn['by_others']['median_ape']:.1f}% on the {gnn['by_others']['n_kernels']:,} rows" in text
