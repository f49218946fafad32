"""Every exercise solution of the notebooks runs (`tpucost.solutions`), on small settings."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from tpucost import train
from tpucost.data import additivity
from tpucost.data import kernel as kernel_data
from tpucost.data import tile as tile_data
from tpucost.models import ModelConfig
from tpucost.solutions import nb04
from tpucost.tasks import tile as tile_task


@pytest.fixture(scope="module")
def bundled_tiles():
    try:
        return tile_data.load_tile_dataset()
    except FileNotFoundError as err:
        pytest.fail(f"the bundled tile data set is part of the package: {err}")


def _small(ds, split):
    keep = np.concatenate([split.train[:12], split.val[:4], split.test[:4]])
    small = ds.subset(keep)
    n = [12, 4, 4]
    idx = np.arange(len(keep))
    return small, dataclasses.replace(
        split, train=idx[: n[0]], val=idx[n[0] : n[0] + n[1]], test=idx[n[0] + n[1] :]
    )


def test_nb04_solutions_run(bundled_tiles, capsys):
    ds, split = _small(bundled_tiles, tile_data.split(bundled_tiles, "random"))
    config = train.TrainConfig(
        model=tile_task.tile_model_config(ds, ModelConfig(hidden=16, num_layers=1)),
        batch_size=4,
        epochs=1,
        patience=1,
    )
    answer = nb04.exercise_1()
    assert answer["block_keys"] == ["bk", "bq"] and 1 <= answer["legal_configs"] <= 200
    table = nb04.exercise_2(ds, split, config, losses=("hinge", "listwise"), seeds=(0,))
    assert len(table) == 2 and table["kendall_mean"].between(-1, 1).all()
    table = nb04.exercise_3(bundled_tiles)
    assert {"random", "hard"} == set(table.columns) and "gnn_rank" in table.index
    table = nb04.exercise_4(ds, split, config)
    assert list(table["join"]) == ["late", "early"] and (table["train_seconds"] > 0).all()
    assert "kendall_mean" in capsys.readouterr().out


# ---------------------------------------------------------------------------------------------
# Notebooks 01-03: every solution on small settings (about half a minute in all on 2 CPU cores)
# ---------------------------------------------------------------------------------------------


def test_nb01_solutions_run(capsys):
    from tpucost.solutions import nb01

    small = {"batch": 2, "image": 8, "channels": 4}
    answer = nb01.exercise_1(**small)
    assert (
        answer["changed_kernels"] and answer["opcode_difference"].get("multiply", 0) < 0
    )  # no multiply by 1/4
    assert answer["kernels"]["avg"] == answer["kernels"]["max"]
    counts = nb01.exercise_2(**small)
    assert counts["fusion_off"] > counts["default"] > 0
    changed = nb01.exercise_3(((2, 8), (4, 16)), channels=4)
    assert changed and "num_elements" in changed
    assert not [c for c in changed if c.startswith(("etype", "layout", "window", "conv_", "dot_"))], changed
    broken = nb01.exercise_4()
    assert broken["kernels"] > 0 and broken["error"]["line"] == broken["corrupted_line"]
    window = nb01.exercise_5(**small)
    for compiled in window.values():
        assert compiled["window_size"] == compiled["from_features"] == (3, 3)
    assert window["library fusions off"]["kind"] == "convolution"
    assert "opcode_difference" in capsys.readouterr().out


@pytest.fixture(scope="module")
def bundled_kernels():
    return kernel_data.load_kernel_dataset()


@pytest.mark.filterwarnings("ignore:measuring XLA.CPU kernels with")  # the label mode needs a fresh process
def test_nb02_solutions_run(bundled_kernels, capsys):
    from tpucost.programs import generate_programs
    from tpucost.solutions import nb02

    program = next(p for p in generate_programs(13, 0) if p.family == "mlp")
    table = nb02.exercise_1(program, repeats=2)
    assert table.loc["fusion off", "kernels"] > table.loc["fusion on (default)", "kernels"]
    noise = nb02.exercise_2(program, repeats=(1, 2))
    assert list(noise["repeats"]) == [1, 2] and (noise["median_rel_diff"] >= 0).all()
    lowest = nb02.exercise_3(additivity.additivity_table())
    assert (
        lowest["family"] in {p.split("-")[0] for p in bundled_kernels.source_program_id}
        and lowest["median_ratio"] < 1
    )
    frame = bundled_kernels.to_frame()
    sample = frame[frame["program_id"].isin(frame["program_id"].unique()[:40])]
    tau = nb02.exercise_4(sample)
    assert -1 < tau["kendall_tau_all"] < 1
    kinds = nb02.exercise_5(kernel_data.default_data_dir())
    assert (
        np.allclose(kinds["collected %"], kinds["reference %"])
        and abs(kinds["collected %"].sum() - 100) < 1e-6
    )
    assert "kernels" in capsys.readouterr().out


def test_nb03_solutions_run(bundled_kernels, capsys):
    from tpucost import costmodel
    from tpucost.models import ModelConfig
    from tpucost.solutions import nb03

    ds = bundled_kernels
    split = kernel_data.split(ds, "random")
    graphs = [ds.graph(int(i)) for i in split.test[:6]]
    for reduce in ("mean", "max"):  # "sum" is written out in the notebook itself
        assert nb03.exercise_1(graphs, reduce=reduce) < 1e-5
    table = nb03.exercise_2(ds, max_programs=1, methods=("analytical", "gnn"))
    assert set(table.columns.get_level_values(1)) == {"random", "hard"} and list(table.index) == [
        "analytical",
        "gnn",
    ]
    test = dataclasses.replace(split, test=split.test[:200])
    analytical = costmodel.CostModel.load(method="analytical", calibrated=False).predict
    rarity = nb03.exercise_3(ds, test, analytical)
    assert -1 <= rarity["kendall_tau"] <= 1 and (rarity["table"]["train kernels"] >= 0).all()
    # One tiny run each (the notebook's defaults train every setting with three seeds).
    tiny = {
        "base": ModelConfig(opcode_embed=8, hidden=16, num_layers=1),
        "seeds": (0,),
        "train_kernels": 48,
        "epochs": 1,
    }
    runs = nb03.exercise_4(ds, split.train, split.val[:32], reduces=("max",), **tiny)
    assert list(runs["setting"]) == ["max"] and (runs["best_val_loss"] > 0).all()
    runs = nb03.exercise_5(ds, split.train, split.val[:32], poolings=(("mean",),), **tiny)
    assert list(runs["setting"]) == ["mean"] and (runs["best_val_loss"] > 0).all()
    assert "spread" in capsys.readouterr().out
