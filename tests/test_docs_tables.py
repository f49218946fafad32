"""The book's result tables are the bundled JSON, cell by cell (`tpucost.experiments.results`).

Each table the pages of docs/ show (the data set's numbers, Table 2, the whole programs, Table 3,
the autotuning experiments) is found by its header row and compared cell by cell with the same
table rendered from the bundled files: a retrained model, a re-collected data set or a rerun
experiment fails here until the pages show its numbers (``python -m lab experiment tables
--pages`` prints them).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest

from tpucost.experiments import results
from tpucost.experiments.data import additivity

DOCS = Path(__file__).resolve().parents[1] / "docs"
ADDITIVITY = DOCS / "results" / "additivity.json"


@functools.cache
def rendered(name: str) -> str:
    """One table rendered from the bundled files, once per process (rendering loads the data sets, so
    it waits for the test that asks instead of running while the tests are collected)."""
    return results.PAGE_TABLES[name]()


def pages() -> str:
    """The text of every page of the book written by hand (docs/*.md), one after another."""
    return "\n\n".join(p.read_text() for p in sorted(DOCS.glob("*.md")))


def cells(line: str) -> list[str]:
    """The cells of one Markdown table row."""
    return [c.strip() for c in line.strip().strip("|").split("|")]


def page_table(text: str, header: str) -> list[list[str]]:
    """The rows (as cells) of the table whose first line is ``header``, up to the first non-row."""
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if cells(line) == cells(header)]
    assert len(starts) == 1, f"the pages have {len(starts)} tables headed {header!r}"
    rows = []
    for line in lines[starts[0] :]:
        if not line.strip().startswith("|"):
            break
        rows.append(cells(line))
    return rows


def differences(shown: list[list[str]], expected: list[list[str]]) -> list[str]:
    """Every cell where the page's table differs from the expected one, named by row and column."""
    out = []
    if len(shown) != len(expected):
        out.append(f"{len(shown) - 2} rows on the page, {len(expected) - 2} in the data")
    header = expected[0]
    for r, (a, b) in enumerate(zip(shown, expected, strict=False)):
        for c, (x, y) in enumerate(zip(a, b, strict=False)):
            if x != y:
                out.append(f"row {r - 1}, column {header[c]!r}: page {x!r}, bundled data {y!r}")
        if len(a) != len(b):
            out.append(f"row {r - 1}: {len(a)} cells on the page, {len(b)} in the data")
    return out


@pytest.mark.parametrize("name", list(results.PAGE_TABLES))
def test_page_table_is_the_bundled_data(name):
    expected = [cells(line) for line in rendered(name).splitlines()]
    assert len(expected) > 2, f"{name}: no rows rendered from the bundled data"
    shown = page_table(pages(), rendered(name).splitlines()[0])
    wrong = differences(shown, expected)
    assert not wrong, f"table {name!r} differs from the bundled data:\n" + "\n".join(wrong)


def test_a_changed_number_is_caught():
    """Change one cell of a rendered table: the comparison names that cell."""
    table = rendered("kernel results (Table 2)")
    expected = [cells(line) for line in table.splitlines()]
    first = table.splitlines()[2]
    edited = table.replace(first, first.replace("| random | gnn | ", "| random | gnn | 9", 1), 1)
    assert edited != table
    shown = page_table(edited, table.splitlines()[0])
    wrong = differences(shown, expected)
    assert len(wrong) == 1 and wrong[0].startswith("row 1, column 'structure-novel: MAPE >=5us"), wrong


def test_the_bundled_additivity_output_is_the_data_sets_and_the_data_page_quotes_it():
    """docs/results/additivity.json is `data additivity --json` of the bundled data set as it is
    now, and the "Additivity" paragraph of docs/data.md quotes its figures."""
    bundled = json.loads(ADDITIVITY.read_text())
    now = json.loads(json.dumps(additivity.additivity_summary(additivity.additivity_table(None))))
    assert bundled == now, (
        "docs/results/additivity.json is stale: rerun `python -m lab data additivity --json`"
    )
    text = (DOCS / "data.md").read_text()
    ge1 = bundled["pairs_ge_1ms"]
    for figure in (
        f"{bundled['pairs']:,} measured",
        f"median {bundled['median']:.2f}",
        f"{bundled['within_0.9_1.1']:.0%} within 0.9-1.1",
        f"({ge1['pairs']:,})",
        f"median {ge1['median']:.2f}",
        f"{ge1['within_0.9_1.1']:.0%} within 0.9-1.1",
        f"(max {ge1['max']:.2f})",
        f"{bundled['dispatch_ns_per_kernel'] / 1000:.2f} us per kernel",
        f"**{bundled['with_dispatch_ge_1ms']['median']:.2f}**",
    ):
        assert figure in text, f"the data page's Additivity paragraph does not show {figure!r}"
