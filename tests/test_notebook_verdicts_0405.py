"""Notebooks 04 and 05 print their verdicts; the few figures their prose states are checked here (issue 38).

A sentence that judges a number ("better than chance", "inside the noise floor", "grows with") is
printed by the notebook's code (`tpucost.experiments.verdicts`), never typed into its prose. What the prose
still states, counts and budgets of the bundled experiments, the paper's figures and the
thresholds, is read from the notebook source and checked against the data it describes, so
re-bundling the data cannot leave the prose behind.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

from tpucost.experiments import autotune, tile_experiments, tiles, verdicts
from tpucost.experiments.configs import autotune as autotune_config

ROOT = Path(__file__).resolve().parents[1]
NB04 = ROOT / "notebooks" / "04_tile_selection.ipynb"
NB05 = ROOT / "notebooks" / "05_autotuner.ipynb"
WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8}
PERCENT = re.compile(r"(?<![\w.,])(\d+(?:\.\d+)?)%")
#: A number in the prose: digits or a word of `WORDS` (``{N}`` in the phrases below).
NUMBER = r"(\d+|" + "|".join(WORDS) + r")"


def _sources(path: Path, kind: str) -> str:
    """The joined source of the notebook's ``kind`` ("markdown" or "code") cells, one space per line break."""
    cells = nbformat.read(path, as_version=4).cells
    return " ".join(" ".join(c.source.split()) for c in cells if c.cell_type == kind)


def _counts(text: str, phrase: str) -> list[int]:
    """Every number (digits or a word) that ``phrase`` (a regex with ``{N}`` where the number stands) finds in ``text``."""
    found = re.findall(phrase.replace("{N}", NUMBER), text, flags=re.I)
    return [int(n) if n.isdigit() else WORDS[n.lower()] for n in found]


@pytest.fixture(scope="module")
def bundled():
    return autotune.bundled_reports()


def test_nb05_states_the_bundled_seeds_budgets_and_noise_processes(bundled):
    prose = _sources(NB05, "markdown")
    seeds = {len(r["seeds"]) for r in bundled.values()}
    assert len(seeds) == 1, f"the bundled reports differ in their number of seeds: {seeds}"
    stated = _counts(prose, r"\b{N} seeds\b")
    assert stated and set(stated) - {1} == seeds, (
        f"the prose says {stated} seeds, the bundled reports have {seeds}"
    )
    program = {r["budget_seconds"] for r in bundled.values() if r["space"] == "program"}
    tile = {r["budget_seconds"] for r in bundled.values() if r["space"] == "tile"}
    for phrase in (r"\b{N}-second budget", r"\b{N} seconds per search"):
        assert _counts(prose, phrase) and set(_counts(prose, phrase)) == program, (phrase, program)
    assert _counts(prose, r"\({N} s in the tile space\)") == [int(b) for b in tile]
    processes = {r["noise"]["processes"] for r in bundled.values()}
    assert _counts(prose, r"measured {N} times \(the experiment's own") == sorted(processes)
    assert _counts(prose, r"re-measurement and {N} more") == [p - 1 for p in processes]
    assert _counts(prose, r"over {N} fresh processes") == sorted(processes)
    n_program = sum(r["space"] == "program" for r in bundled.values())
    assert _counts(prose, r"over the {N} program-space programs") == [n_program]
    kernels = {len(r["knobs"]) for r in bundled.values() if r["space"] == "tile"}
    assert set(_counts(prose, r"{N} Pallas kernels")) == kernels
    assert set(_counts(prose, r"all {N} kernels down")) == kernels


def test_nb05_states_the_measurement_settings_it_runs():
    prose = _sources(NB05, "markdown")
    defaults = autotune_config.get_config()  # the one place autotune's defaults live
    assert _counts(prose, r"each the minimum of {N} runs") == [defaults.repeats]
    assert _counts(prose, r"the minimum of {N} rounds") == [defaults.fresh_rounds]
    assert _counts(prose, r"then {N} interleaved rounds") == [defaults.fresh_rounds]


def test_nb05_percentages_are_the_papers_or_the_significance_level():
    """Percentages in notebook 05's prose: the paper's Section 6.3 figures and `verdicts.ALPHA`, nothing measured."""
    allowed = {100 * v for v in autotune.PAPER_MODEL_VS_DEVICE.values()} | {100 * verdicts.ALPHA}
    stated = [float(p) for p in PERCENT.findall(_sources(NB05, "markdown"))]
    assert stated and set(stated) <= allowed, f"typed-in percentages {sorted(set(stated) - allowed)}"
    assert "ranking_verdict" in _sources(NB05, "code") and "noise_verdict" in _sources(NB05, "code")
    assert "better than chance" not in _sources(NB05, "code"), (
        "the ranking verdict is verdicts.ranking_verdict's"
    )


def test_nb04_states_its_data_and_threshold():
    prose, code = _sources(NB04, "markdown"), _sources(NB04, "code")
    typed = [p for p in PERCENT.findall(prose) if float(p) != 0]  # 0%: where a slowdown's scale starts
    assert not typed, f"typed-in percentages in notebook 04: {typed}"
    assert _counts(prose, r"The {N} families cover") == [len(tiles.TILE_FAMILIES)]
    runs = tile_experiments.seed_runs()
    assert runs is not None
    assert set(_counts(prose, r"on {N} random splits")) == {runs["split_seed"].nunique()}
    lead = re.search(r"\bLEAD = ([\d.]+)", code)
    assert lead and re.findall(r"a lead of at least (0\.\d+) Kendall", prose) == [lead.group(1)], (
        "the prose's Kendall lead is the LEAD the code tests"
    )
    suggestions = (ROOT / "docs" / "results" / "tile_suggestions.txt").read_text()
    shapes = len(re.findall(r"^\(\d+, \d+, \d+\)", suggestions, flags=re.M))
    assert _counts(prose, r"measures {N} new shapes twice") == [shapes]
    assert "trend_verdict" in code and "noise_verdict" in code


def test_nb04_and_nb05_reconcile_their_heuristic_verdicts():
    """Each notebook says what its comparison with the largest-block heuristic measures, and names the other."""
    prose04, prose05 = _sources(NB04, "markdown"), _sources(NB05, "markdown")
    assert "Notebook 05 sets the same tile model against the same largest-block rule" in prose04
    assert "Notebook 04 compared the same tile model with the same largest-block rule" in prose05
    for prose in (prose04, prose05):
        assert "orders the configurations of one kernel" in prose
        assert "runtime of a whole" in prose


@pytest.mark.parametrize(
    "term, definition",
    [("epilogue", "element-wise work"), ("flash", "running softmax"), ("im2col", "neighbourhood")],
)
def test_nb04_defines_its_terms_at_first_use(term, definition):
    prose = _sources(NB04, "markdown")
    first = prose.find(term)
    assert first >= 0 and definition in prose[first : first + 300], (
        f"{term!r} is not defined where first used"
    )


def test_nb05_defines_the_remat_policies_it_offers():
    from tpucost.experiments.programs import examples

    prose = _sources(NB05, "markdown")
    assert "rematerialization" in prose[: prose.find("remat") + 40]
    for policy in examples.REMAT_POLICIES:
        assert re.search(rf"`{policy}` \(", prose), f"remat policy {policy} is not defined"
