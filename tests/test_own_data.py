"""Notebook 02's own-data path (``COLLECT_PROGRAMS``) and the one band of "adds up".

* How many programs a collection needs: `tpucost.method.splits.min_ids_for_test` (the fewest ids whose
  random 80/10/10 split holds `MIN_TEST_IDS` test ids), the warnings notebook 02 prints when a split
  holds fewer (`few_test_ids_warning`, `split_size_warning`), on synthetic splits and on a tiny data
  set collected here (`tiny_kernels`: 6 programs, so 1 test program).
* Notebook 02 reads one data set after the collection: every cell after the one that sets
  ``data_dir`` uses it, never the ``DATA_DIR`` parameter, and its prose names the minimum the library
  computes.
* One additivity band: `tpucost.experiments.verdicts.ADDS_UP`, used by `tpucost.experiments.data.additivity`, the chart and
  notebook 02, which writes no band of its own.
"""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib
import nbformat
import numpy as np
import pytest

from tpucost.experiments import plots, verdicts
from tpucost.experiments.data import additivity
from tpucost.experiments.data import kernel as kernel_data
from tpucost.method import splits

matplotlib.use("Agg")

NB02 = Path(__file__).resolve().parents[1] / "notebooks" / "02_measure_kernels.ipynb"


def _split_of(parts: np.ndarray) -> splits.Split:
    """A `Split` of programs p0, p1, ... with ``parts`` (0 train, 1 val, 2 test), one row per program."""
    ids = np.array([f"p{i}" for i in range(len(parts))])
    rows = np.arange(len(parts))
    return splits.Split(
        "program", *(np.sort(ids[parts == j]) for j in range(3)), *(rows[parts == j] for j in range(3))
    )


def test_the_fewest_programs_for_three_test_programs_is_26():
    assert splits.MIN_TEST_IDS == 3
    assert splits.min_ids_for_test() == 26
    assert splits.part_sizes(12) == (10, 1, 1)  # the old COLLECT_PROGRAMS = 12: one test program
    assert splits.part_sizes(25) == (21, 2, 2)  # 2.5 test ids round (to even) to 2
    assert splits.part_sizes(26) == (20, 3, 3)
    for n in (3, 12, 25, 26, 40):  # part_sizes is what random_parts does, for every seed
        for seed in range(3):
            counts = np.bincount(splits.random_parts(n, seed), minlength=3)
            assert tuple(counts) == splits.part_sizes(n), (n, seed)
    assert all(splits.part_sizes(n)[2] < 3 for n in range(26))
    assert splits.min_ids_for_test(1) == 3 and splits.min_ids_for_test(5, (0.6, 0.2, 0.2)) == 23
    with pytest.raises(ValueError, match="test fraction"):
        splits.min_ids_for_test(3, (0.9, 0.1, 0.0))


def test_a_split_with_too_few_test_programs_gets_a_warning_naming_the_minimum():
    small = splits.split_size_warning(_split_of(splits.random_parts(12, 0)), "random")
    assert small.startswith("warning: the random split of these 12 programs has 1 test program,")
    assert "fewer than the 3" in small and "use at least 26" in small
    assert splits.split_size_warning(_split_of(splits.random_parts(26, 0)), "random") == ""
    assert splits.few_test_ids_warning(3, "a split") == ""
    assert "has 2 test problems" in splits.few_test_ids_warning(2, "a split", unit="problem")


@pytest.mark.filterwarnings("ignore:measuring XLA.CPU kernels with")
def test_a_tiny_collected_data_set_reads_through_and_is_flagged_too_small(tiny_kernels):
    table = additivity.additivity_table(tiny_kernels.root)  # the collected log, not the bundled one
    assert set(table["program_id"]) == set(tiny_kernels.source_program_id.astype(str))
    for name in kernel_data.SPLITS:
        split = kernel_data.split(tiny_kernels, name)
        warning = splits.split_size_warning(split, name)
        assert len(split.test_ids) < 3 and f"the {name} split of these 6 programs" in warning
        assert "use at least 26" in warning


def _code_cells() -> list[str]:
    return [c.source for c in nbformat.read(NB02, as_version=4).cells if c.cell_type == "code"]


def test_notebook_02_reads_one_data_set_after_collecting():
    code = _code_cells()
    (setter,) = [i for i, c in enumerate(code) if re.search(r"^data_dir = ", c, re.M)]
    assert "kernel_collection.collect(data_dir" in code[setter]
    assert "splits.few_test_ids_warning" in code[setter]  # warns before collecting too few
    later = "\n".join(code[setter + 1 :])
    assert "DATA_DIR" not in later, "a cell after the collection reads the parameter, not data_dir"
    assert not re.search(r"^data_dir = ", later, re.M), "data_dir is set more than once"
    for use in ("additivity_table(data_dir)", "load_dataset(data_dir)", "check_5(top_kind, data_dir)"):
        assert use in later, use
    assert "splits.split_size_warning(split, name)" in later
    assert not any("additivity_table(" in c or "load_dataset(" in c for c in code[:setter])


def test_notebook_02_names_the_minimum_the_library_computes():
    text = "\n".join(c.source for c in nbformat.read(NB02, as_version=4).cells)
    assert "COLLECT_PROGRAMS = 12" not in text
    assert f"`COLLECT_PROGRAMS = {splits.min_ids_for_test()}`" in text
    assert f"{splits.min_ids_for_test()} programs or more" in text


def test_one_band_of_adds_up():
    assert not hasattr(additivity, "ADDITIVE")  # no second name for the band: verdicts.ADDS_UP only
    table = additivity.additivity_table()
    summary = additivity.additivity_summary(table)
    lo, hi = verdicts.ADDS_UP
    assert summary["band"] == [lo, hi] and f"within_{lo}_{hi}" in summary and f"above_{hi}" in summary
    outside = (table["additivity_ratio"] < lo) | (table["additivity_ratio"] > hi)
    assert ((table["reason"] != "") == outside).all()
    ax = plots.additivity_hist(table)
    (band,) = [p for p in ax.patches if p.get_label().endswith(": adds up")]
    assert band.get_label() == f"{lo}-{hi}: adds up"
    matplotlib.pyplot.close("all")
    code = re.sub(r"quantile\([^)]*\)", "", "\n".join(_code_cells()))  # percentiles are no bands
    bands = re.findall(r"(?<![\d.])(?:0\.8|0\.9|1\.1)(?!\d)", code)
    assert not bands, f"notebook 02's code writes the band's ends {bands}: use verdicts.ADDS_UP"
