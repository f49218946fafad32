"""The figures of the kernel models trained on the whole first pack (the bundled data set merged with
its device's pending measurements, not bundled yet): ``docs/results/first_pack_retrain.json``
(quoted by docs/cost-model.md) is what the checkpoints in the pending folder score now.

Slow and newest-only: it merges the two folders (``python -m lab data merge``, about 30 s) and
scores each split's test programs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lab import packs
from tpucost.experiments import kernel_experiments
from tpucost.experiments.data import kernel as kernel_data
from tpucost.experiments.data import kernel_collection

ROOT = Path(__file__).resolve().parents[2]
PENDING = packs.PENDING_DIR / "be3048b01916"
CHECKPOINTS = PENDING / "checkpoints"
QUOTED = ROOT / "docs" / "results" / "first_pack_retrain.json"
PARTS = ("structure_novel", "unseen", "by_others", "all_test_program_kernels")


@pytest.mark.slow
@pytest.mark.newest_only
@pytest.mark.skipif(not CHECKPOINTS.is_dir(), reason="the pending measurements are in the repository only")
def test_the_quoted_first_pack_figures_are_the_pending_checkpoints(tmp_path):
    merged = kernel_collection.merge([kernel_data.default_data_dir(), PENDING], tmp_path / "merged")
    quoted = json.loads(QUOTED.read_text())
    text = " ".join((ROOT / "docs" / "cost-model.md").read_text().split())
    for split in ("random", "hard"):
        results = kernel_experiments.evaluate_models(merged, split, CHECKPOINTS / f"kernel-{split}", ["gnn"])
        now = results["gnn"]
        shown_parts = [
            p for p in PARTS if p in quoted[split]["gnn"]
        ]  # the hard split's test: no code by others
        assert shown_parts == [p for p in PARTS if p == "all_test_program_kernels" or now[p]["n_kernels"]]
        for part in shown_parts:
            scores = now if part == "all_test_program_kernels" else now[part]
            shown = quoted[split]["gnn"][part]
            assert scores["n_kernels"] == shown["n_kernels"], (split, part)
            assert scores["median_ape"] == pytest.approx(shown["median_ape"], abs=0.05), (split, part)
            assert scores["mape_ge5us"] == pytest.approx(shown["mape_ge5us"], abs=0.05), (split, part)
    novel = quoted["random"]["gnn"]["structure_novel"]
    assert f"{novel['mape_ge5us']:.1f}% MAPE on the {novel['n_kernels']:,} structure-novel rows" in text
