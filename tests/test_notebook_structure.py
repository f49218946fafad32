"""Every notebook is built to teach from, the same way (issue 11).

For each ``notebooks/0*.ipynb``: an opening markdown cell (the badge cell, or one of the first few
markdown cells) with **Objectives**, **Prerequisites** and a table of sections with their minutes;
a ``## Exercises`` section whose numbered exercises are each labelled Warm-up, Core or Stretch with
a time estimate, each with a self-check code cell that names it; ``## Recap`` and ``## References``
headings; and for every numbered exercise N a function ``exercise_N`` in
``tpucost.solutions.nbNN`` (the solutions themselves run in tests/test_solutions.py).
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("0*.ipynb"))

#: How an exercise opens: ``1. **Warm-up (5 min).**``, ``2. **Core (10-15 min, on a TPU).**``.
EXERCISE = re.compile(r"^(\d+)\.\s+\*\*(Warm-up|Core|Stretch)\s*\((\d+)(?:\s*-\s*\d+)?\s*min\b[^)]*\)")
NUMBERED = re.compile(r"^(\d+)\.\s")
SELF_CHECK = re.compile(r"^#\s*Self-checks?\b", re.I)
MINUTES_ROW = re.compile(r"^\|.*\b\d+(?:\s*-\s*\d+)?\s*min\b.*\|\s*$")
#: How many markdown cells from the top may hold the opening (objectives, prerequisites, sections).
OPENING_CELLS = 3


def _cells(path: Path) -> list[nbformat.NotebookNode]:
    return nbformat.read(path, as_version=4).cells


def _flat(cells) -> list[tuple[str, object]]:
    """The notebook as a sequence: ("md", line) for each markdown line, ("code", cell) for each code cell."""
    items: list[tuple[str, object]] = []
    for cell in cells:
        if cell.cell_type == "markdown":
            items += [("md", line) for line in cell.source.splitlines()]
        elif cell.cell_type == "code":
            items.append(("code", cell))
    return items


def _headings(cells) -> list[str]:
    """The text of every markdown ``## `` heading, in order."""
    return [line[3:].strip() for kind, line in _flat(cells) if kind == "md" and line.startswith("## ")]


def _section(cells, title: str) -> tuple[list[str], list[nbformat.NotebookNode]]:
    """The markdown lines and the code cells from the ``## <title>`` heading to the next ``## `` heading."""
    items = _flat(cells)
    starts = [i for i, (kind, line) in enumerate(items) if kind == "md" and line.startswith(f"## {title}")]
    assert starts, f"no '## {title}' heading"
    lines, code = [], []
    for kind, item in items[starts[0] + 1 :]:
        if kind == "md" and item.startswith("## "):
            break
        (lines if kind == "md" else code).append(item)
    return lines, code


def _exercises(cells) -> dict[int, re.Match | None]:
    """Numbered items of the exercises section: number -> its label match (None when unlabelled)."""
    lines, _ = _section(cells, "Exercises")
    found: dict[int, re.Match | None] = {}
    for line in lines:
        if NUMBERED.match(line):
            found[int(NUMBERED.match(line).group(1))] = EXERCISE.match(line)
    return found


def _solutions_module(path: Path):
    return importlib.import_module(f"tpucost.solutions.nb{path.name[:2]}")


def test_there_are_notebooks():
    assert len(NOTEBOOKS) >= 3


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_opening_has_objectives_prerequisites_and_timed_sections(path):
    opening = [c.source for c in _cells(path) if c.cell_type == "markdown"][:OPENING_CELLS]
    text = "\n".join(opening)
    assert opening and opening[0].lstrip().splitlines()[0].startswith(("[![Open In Colab]", "# ")), path.name
    assert re.search(r"^#\s+\S", text, re.M), f"{path.name}: no title in the opening cells"
    assert "Objectives" in text, f"{path.name}: no Objectives in the first {OPENING_CELLS} markdown cells"
    assert "Prerequisites" in text, (
        f"{path.name}: no Prerequisites in the first {OPENING_CELLS} markdown cells"
    )
    rows = [ln for ln in text.splitlines() if MINUTES_ROW.match(ln.strip())]
    assert len(rows) >= 2, f"{path.name}: no table of sections with their minutes ('| ... | 5 min |')"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_recap_references_and_exercises_headings(path):
    titles = _headings(_cells(path))
    for title in ("Exercises", "Recap", "References"):
        assert any(t.startswith(title) for t in titles), f"{path.name}: no '## {title}' heading"
    refs, _ = _section(_cells(path), "References")
    assert any("](http" in ln for ln in refs), f"{path.name}: the references have no links"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_each_exercise_is_graded_and_timed(path):
    exercises = _exercises(_cells(path))
    assert exercises, f"{path.name}: the exercises section has no numbered exercises"
    assert sorted(exercises) == list(range(1, len(exercises) + 1)), (
        f"{path.name}: exercises numbered {sorted(exercises)}"
    )
    unlabelled = [n for n, m in exercises.items() if m is None]
    assert not unlabelled, (
        f"{path.name}: exercises {unlabelled} do not open with 'N. **Warm-up|Core|Stretch (M min).**'"
    )


def _self_checked(code_cells) -> set[int]:
    """Exercise numbers that a self-check cell names: a comment line ``# Self-check 2: ...`` or
    ``# Self-checks for exercises 2 and 3 ...``, in a cell that asserts or prints what to expect."""
    numbers: set[int] = set()
    for cell in code_cells:
        if "assert" not in cell.source and "expect" not in cell.source.lower():
            continue
        for line in cell.source.splitlines():
            if SELF_CHECK.match(line):
                numbers |= {int(n) for n in re.findall(r"\b(\d+)\b", line.split(":")[0])}
    return numbers


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_exercise_has_a_self_check_cell(path):
    cells = _cells(path)
    _, code = _section(cells, "Exercises")
    missing = sorted(set(_exercises(cells)) - _self_checked(code))
    assert not missing, (
        f"{path.name}: exercises {missing} have no self-check cell (a '# Self-check N' comment "
        "in a cell that asserts or prints what to expect)"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_exercise_has_a_solution(path):
    module = _solutions_module(path)
    missing = [n for n in _exercises(_cells(path)) if not callable(getattr(module, f"exercise_{n}", None))]
    assert not missing, f"{module.__name__} has no exercise_N for exercises {missing}"


def test_the_structure_checks_catch_a_bad_notebook():
    """The checks above fail on a notebook that lacks the structure (so they can fail at all)."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("# A title\n\nSome prose."),
        nbformat.v4.new_markdown_cell("## Exercises\n\n1. Do something.\n2. **Core.** No minutes."),
        nbformat.v4.new_code_cell("print('no check')"),
    ]
    exercises = _exercises(nb.cells)
    assert sorted(exercises) == [1, 2] and all(m is None for m in exercises.values())
    _, code = _section(nb.cells, "Exercises")
    assert _self_checked(code) == set()
    checks = [
        nbformat.v4.new_code_cell("# Self-checks for exercises 2 and 3: ...\nassert True"),
        nbformat.v4.new_code_cell("# Self-check 1: nothing checked here\nprint(1)"),
    ]
    assert _self_checked(checks) == {2, 3}
    good = "1. **Warm-up (5 min).** Count the kernels."
    assert EXERCISE.match(good).group(2, 3) == ("Warm-up", "5")
    assert EXERCISE.match("3. **Stretch (15-20 min).** Go further.").group(2) == "Stretch"
    assert EXERCISE.match("4. **Core (30 min, on a Colab TPU).** Collect.").group(3) == "30"
    assert not EXERCISE.match("5. **Core (a while).** No minutes.")
    assert MINUTES_ROW.match("| 1 | parse the HLO | 5 min |") and not MINUTES_ROW.match(
        "| 1 | parse | five |"
    )
