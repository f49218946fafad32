"""lab.adaptation (adapt) and the ``adapt`` command: fine-tuning a kernel model on
this machine's measurements, scored on families the adaptation did not use.

Most tests play "another machine" without compiling anything: the measuring function returns
kernels of the bundled data set, their labels 2x for kernels with a dot or a convolution and 1.2x
for the others."""

from __future__ import annotations

import types
import warnings

import numpy as np
import pytest

from lab import adaptation, cli
from tpucost.experiments import calibration, kernel_experiments
from tpucost.experiments.data import kernel as kernel_data
from tpucost.experiments.data import kernel_collection
from tpucost.experiments.programs import parse_program_id
from tpucost.method import costmodel, device, train
from tpucost.method.correction import kernel_class

#: The families of the first 8 calibration programs (`calibration.calibration_programs`).
FAMILIES = (
    "mlp",
    "cnn",
    "resnet_block",
    "mobilenet_block",
    "unet",
    "transformer_encoder",
    "causal_decoder",
    "lstm",
)
#: Kernels each fake program runs, and the synthetic device's slow-down of each kind of kernel.
PER_PROGRAM, COMPUTE_SCALE, OTHER_SCALE = 60, 2.0, 1.2


def test_analytical_is_refused_before_anything_is_measured(tmp_path):
    for method in ("analytical", "constant"):
        with pytest.raises(ValueError, match=f"method '{method}' cannot be fine-tuned"):
            adaptation.adapt(method=method, out_dir=tmp_path)
    assert not (tmp_path / adaptation.MEASUREMENTS_DIR).exists()


def test_split_families_is_disjoint_seeded_and_holds_out_at_least_one():
    families = ["mlp", "cnn", "mlp", "unet", "lstm", "gru", "cnn"]
    adapt_on, score_on = adaptation.split_families(families, 0.5, seed=0)
    assert not set(adapt_on) & set(score_on) and set(adapt_on) | set(score_on) == set(families)
    assert len(score_on) == round(0.5 * 5) and adapt_on and score_on
    assert adaptation.split_families(families, 0.5, seed=0) == (adapt_on, score_on)
    seeds = {tuple(adaptation.split_families(families, 0.5, seed=s)[1]) for s in range(8)}
    assert len(seeds) > 1  # the seed draws which families score
    assert len(adaptation.split_families(["a", "b"], 0.01, 0)[1]) == 1  # at least one scores ...
    assert len(adaptation.split_families(["a", "b"], 0.99, 0)[0]) == 1  # ... and one adapts
    with pytest.raises(ValueError, match="at least 2 families"):
        adaptation.split_families(["mlp", "mlp"], 0.5, 0)


def test_validation_kernels_hold_out_whole_families():
    families = np.array(["mlp"] * 6 + ["cnn"] * 4 + ["unet"] * 5 + ["gru"] * 3 + ["lstm"] * 2)
    held = adaptation.validation_kernels(families, seed=0)
    held_families = set(families[held])
    assert len(held_families) == 1  # a fifth of 5 families
    assert not held_families & set(families[~held])  # a family is all in or all out
    draws = {tuple(adaptation.validation_kernels(families, seed=s)) for s in range(8)}
    assert len(draws) > 1  # the seed draws the family
    one = adaptation.validation_kernels(np.array(["mlp"] * 10), seed=0)
    assert one.sum() == 2  # one family: a fifth of its kernels
    assert adaptation.validation_kernels(np.array(["mlp"] * 3), seed=0).all()  # too few: all


def test_config_refuses_bad_settings():
    with pytest.raises(ValueError, match="scoring_fraction"):
        adaptation.AdaptConfig(scoring_fraction=1.0)
    with pytest.raises(ValueError, match="minutes"):
        adaptation.AdaptConfig(minutes=0)
    assert adaptation.AdaptConfig.smoke(epochs=3).epochs == 3


# ---------------------------------------------------------------------------------------------
# A tiny model and a synthetic device
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def bundled(bundled_kernels) -> kernel_data.KernelDataset:
    return bundled_kernels


def _family_kernels(ds: kernel_data.KernelDataset, family: str) -> np.ndarray:
    return np.flatnonzero(ds.family.astype(str) == family)


@pytest.fixture(scope="module")
def tiny_model_dir(bundled, tmp_path_factory):
    """A smoke GNN trained on a slice of the bundled data set (saved as its own data set, so that
    `calibration.training_kernel_hashes` finds its training kernels)."""
    root = tmp_path_factory.mktemp("adapt-model")
    keep = np.concatenate([_family_kernels(bundled, f)[: 2 * PER_PROGRAM] for f in FAMILIES])
    kernel_data.save_dataset(bundled.subset(keep), root / "data")
    ds = kernel_data.load_dataset(root / "data")
    kernel_experiments.train_models(
        ds,
        "random",
        root / "model",
        train.TrainConfig.smoke(epochs=15, patience=5),
        methods=("gnn",),
        progress=False,
    )
    return root / "model"


def _synthetic_ns(ds: kernel_data.KernelDataset, kernels: np.ndarray) -> np.ndarray:
    """The synthetic device's labels: 2x for kernels with a dot or a convolution, 1.2x for others."""
    compute = np.array([kernel_class(ds.graph(int(i))).endswith(":compute") for i in kernels])
    return ds.runtime_ns[kernels] * np.where(compute, COMPUTE_SCALE, OTHER_SCALE)


@pytest.fixture
def synthetic_device(bundled, monkeypatch):
    """`kernel_collection.measure_program` (and building the program) replaced by the synthetic
    device: a calibration program of family F runs PER_PROGRAM kernels of the bundled family F, half
    of them in the tiny model's data set (`tiny_model_dir`), half not.
    Returns the list of the programs measured, one entry per call."""
    calls: list[str] = []

    def build(program_id: str):
        family, form, _, _ = parse_program_id(program_id)
        return types.SimpleNamespace(program_id=program_id, family=family, form=form, hparams={})

    def measure(program, config, repeats=5):
        calls.append(program.program_id)
        first = PER_PROGRAM + PER_PROGRAM // 2
        kernels = _family_kernels(bundled, program.family)[first : first + PER_PROGRAM]
        labels = _synthetic_ns(bundled, kernels)
        meta = {
            "program_id": program.program_id,
            "family": program.family,
            "form": program.form,
            "configuration": config,
            **{
                f: str(bundled.table.columns[f][kernels[0]])
                for f in ("backend", "device_kind", "jax_version")
            },
        }
        graphs = [bundled.graph(int(i)) for i in kernels]
        records = kernel_data.from_graphs(graphs, labels, np.ones(len(kernels), np.int64), meta)
        total = float(labels.sum())
        return records, {
            "status": "ok",
            "kernels": len(kernels),
            "wall_ns": 1.1 * total,
            "kernel_ns_per_run": total,
        }

    monkeypatch.setattr(kernel_collection, "program_from_id", build)
    monkeypatch.setattr(kernel_collection, "measure_program", measure)
    return calls


@pytest.mark.slow  # trains a smoke GNN and fine-tunes it
def test_adapting_to_a_synthetic_device(tiny_model_dir, synthetic_device, tmp_path):
    config = adaptation.AdaptConfig(minutes=5, n_programs=len(FAMILIES), epochs=8)
    report = adaptation.adapt(tiny_model_dir, "gnn", out_dir=tmp_path, config=config, progress=False)
    assert len(synthetic_device) == len(FAMILIES)

    # Families: disjoint, every measured one on one side.
    assert not set(report["adaptation_families"]) & set(report["scoring_families"])
    assert set(report["adaptation_families"]) | set(report["scoring_families"]) == set(FAMILIES)

    # Left out of the scores: the model's training kernels and the adaptation kernels.
    ds = kernel_data.load_dataset(tmp_path / adaptation.MEASUREMENTS_DIR)
    training = calibration.training_kernel_hashes(tiny_model_dir)
    split = adaptation.family_split(ds, report["adaptation_families"], training)
    scored = set(ds.kernel_hash[split.rows.kernel].tolist())
    assert scored and not scored & training and not scored & set(ds.kernel_hash[split.adaptation].tolist())
    assert report["training_kernels_left_out"] == split.training_left_out > 0
    assert report["scoring_kernels"] == len(np.unique(split.rows.kernel))
    assert set(split.rows.family.tolist()) <= set(report["scoring_families"])

    # Fine-tuning on the adaptation families lowers the error on the others.
    before, tuned = (report["methods"][m]["median_ape"] for m in ("before", "fine-tuned"))
    assert tuned < before, report["methods"]

    # The fine-tuned model loads here without a warning, as this device's model, and predicts.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = costmodel.CostModel.load(tmp_path, "gnn")
    assert model.trained_on["id"] == device.fingerprint()["id"]
    predicted = model.predict([ds.graph(int(k)) for k in split.rows.kernel[:20]])
    assert np.all(np.isfinite(predicted)) and np.all(predicted > 0)
    assert "lower after fine-tuning" in adaptation.adaptation_table(report)

    # A rerun measures nothing again and splits the same families.
    again = adaptation.adapt(tiny_model_dir, "gnn", out_dir=tmp_path, config=config, progress=False)
    assert len(synthetic_device) == len(FAMILIES) and again["seconds_measuring_now"] == 0
    assert again["scoring_families"] == report["scoring_families"]


@pytest.mark.slow
def test_a_spent_budget_is_not_measured_again(tiny_model_dir, synthetic_device, tmp_path):
    # A budget of one program: the first program ends it; a rerun finds it spent.
    config = adaptation.AdaptConfig(minutes=1e-6, n_programs=len(FAMILIES))
    with pytest.raises(ValueError, match="at least 2 families"):
        adaptation.adapt(tiny_model_dir, "gnn", out_dir=tmp_path, config=config, progress=False)
    assert len(synthetic_device) == 1
    with pytest.raises(ValueError, match="at least 2 families"):
        adaptation.adapt(tiny_model_dir, "gnn", out_dir=tmp_path, config=config, progress=False)
    assert len(synthetic_device) == 1


@pytest.mark.slow
@pytest.mark.measures  # compiles and times 3 calibration programs on this machine
@pytest.mark.filterwarnings(
    "ignore:measuring XLA.CPU kernels with"
)  # --all-cores: this process stays unpinned
def test_adapt_end_to_end_on_this_machine(tiny_model_dir, tmp_path, capsys):
    args = ["adapt", "--model", str(tiny_model_dir), "--out", str(tmp_path), "--programs", "3"]
    args += ["--minutes", "5", "--repeats", "2", "--epochs", "1", "--no-progress", "--all-cores"]
    assert cli.main(args) == 0, capsys.readouterr().err
    table = capsys.readouterr().out
    for name in adaptation.METHOD_ORDER:
        assert name in table
    report = adaptation.adapt(
        tiny_model_dir,
        out_dir=tmp_path,
        config=adaptation.AdaptConfig(minutes=5, n_programs=3, repeats=2, epochs=1),
        progress=False,
    )
    assert report["measured_programs"] == 3 and report["seconds_measuring_now"] == 0
    assert report["scoring_rows"] > 0 and report["device"]["id"] == device.fingerprint()["id"]
