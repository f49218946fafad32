"""Every notebook is built to teach from, the same way (issue 11).

For each ``notebooks/0*.ipynb``: an opening markdown cell (the badge cell, or one of the first few
markdown cells) with **Objectives**, **Prerequisites** and a table of sections with their minutes;
a ``## Exercises`` section whose numbered exercises are each labelled Warm-up, Core or Stretch with
a time estimate, each with a self-check code cell that calls ``solutions.check_N(...)``;
``## Recap`` and ``## References`` headings; and for every numbered exercise N a solution
``exercise_N`` and a self-check ``check_N`` in ``tpucost.solutions.nbNN``, and a test
``test_nbNN_exercise_N`` in tests/test_exercises.py that runs the check with the solution's answer
(it passes), with a wrong answer (it fails) and with none (it says "not attempted yet").
"""

from __future__ import annotations

import ast
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
SELF_CHECK = re.compile(r"^#\s*Self-check\s+(\d+)\b", re.I)
EXERCISE_TESTS = Path(__file__).with_name("test_exercises.py")
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
    """Exercise numbers N with a self-check cell: a cell opening ``# Self-check N: ...`` that calls
    ``solutions.check_N(`` (the grading function, which computes the right answer itself)."""
    numbers: set[int] = set()
    for cell in code_cells:
        for line in cell.source.splitlines():
            match = SELF_CHECK.match(line)
            if match and f"solutions.check_{match.group(1)}(" in cell.source:
                numbers.add(int(match.group(1)))
    return numbers


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_exercise_has_a_self_check_cell(path):
    cells = _cells(path)
    _, code = _section(cells, "Exercises")
    missing = sorted(set(_exercises(cells)) - _self_checked(code))
    assert not missing, (
        f"{path.name}: exercises {missing} have no self-check cell (a '# Self-check N: ...' cell "
        "that calls solutions.check_N(...))"
    )


def _exercise_tests() -> set[str]:
    """Names of the test functions in tests/test_exercises.py."""
    tree = ast.parse(EXERCISE_TESTS.read_text())
    return {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_self_check_is_graded_both_ways(path):
    """Each exercise's check runs in tests/test_exercises.py on the solution's answer (it must pass)
    and on a wrong one (it must fail): `assert_grades` in every ``test_nbNN_exercise_N``."""
    module = _solutions_module(path)
    numbers = sorted(_exercises(_cells(path)))
    no_check = [n for n in numbers if not callable(getattr(module, f"check_{n}", None))]
    assert not no_check, f"{module.__name__} has no check_N for exercises {no_check}"
    tests = _exercise_tests()
    source = EXERCISE_TESTS.read_text()
    untested = [n for n in numbers if f"test_nb{path.name[:2]}_exercise_{n}" not in tests]
    assert not untested, f"tests/test_exercises.py has no test_nb{path.name[:2]}_exercise_N for {untested}"
    for n in numbers:
        body = source.split(f"def test_nb{path.name[:2]}_exercise_{n}(")[1].split("\ndef ")[0]
        assert "assert_grades(" in body and f"check_{n}" in body, (
            f"test_nb{path.name[:2]}_exercise_{n} does not grade check_{n} with a right and a wrong answer"
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
        nbformat.v4.new_code_cell("# Self-check 2: a number\nanswer = None\nsolutions.check_2(answer)"),
        nbformat.v4.new_code_cell("# Self-check 1: nothing graded here\nprint(1)"),
        nbformat.v4.new_code_cell("# Self-check 3: the wrong grader\nsolutions.check_2(None)"),
    ]
    assert _self_checked(checks) == {2}
    good = "1. **Warm-up (5 min).** Count the kernels."
    assert EXERCISE.match(good).group(2, 3) == ("Warm-up", "5")
    assert EXERCISE.match("3. **Stretch (15-20 min).** Go further.").group(2) == "Stretch"
    assert EXERCISE.match("4. **Core (30 min, on a Colab TPU).** Collect.").group(3) == "30"
    assert not EXERCISE.match("5. **Core (a while).** No minutes.")
    assert MINUTES_ROW.match("| 1 | parse the HLO | 5 min |") and not MINUTES_ROW.match(
        "| 1 | parse | five |"
    )


# ---------------------------------------------------------------------------------------------
# Minutes: the opening table, the section headings, the exercises and docs/workshop.md agree
# ---------------------------------------------------------------------------------------------

WORKSHOP = ROOT / "docs" / "workshop.md"
SECTION_ROW = re.compile(r"^\|\s*(\d+)\s*\|.*\|\s*(\d+) min\b[^|]*\|\s*$")
EXERCISE_ROW = re.compile(r"^\|\s*\|\s*exercises \((\w+): ([\d, and]+) min\)\s*\|\s*(\d+) min\s*\|\s*$")
TIMED_HEADING = re.compile(r"^(##|###) (?:(\d+)\. )?.*\((\d+) min\)\s*$")
AGENDA_ROW = re.compile(r"^\|\s*(\d+):(\d\d)-(\d+):(\d\d)\s*\|\s*(.*?)\s*\|\s*(.*?)\s*\|\s*(.*?)\s*\|\s*$")


def _opening_minutes(path: Path) -> tuple[dict[int, int], list[int], int]:
    """The opening table: minutes per section number, the listed exercise minutes, their total."""
    text = "\n".join(c.source for c in _cells(path) if c.cell_type == "markdown")
    sections = {int(m.group(1)): int(m.group(2)) for m in map(SECTION_ROW.match, text.splitlines()) if m}
    (row,) = [m for m in map(EXERCISE_ROW.match, text.splitlines()) if m]
    listed = [int(x) for x in re.findall(r"\d+", row.group(2))]
    return sections, listed, int(row.group(3))


def _section_total(path: Path) -> int:
    return sum(_opening_minutes(path)[0].values())


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_section_minutes_agree_with_the_headings_and_exercises(path):
    sections, listed, total = _opening_minutes(path)
    headed: dict[int, int] = {}
    current = None
    for kind, line in _flat(_cells(path)):
        m = TIMED_HEADING.match(line) if kind == "md" else None
        if m and m.group(1) == "##" and m.group(2):
            current = int(m.group(2))
            headed[current] = int(m.group(3))
        elif m and m.group(1) == "###" and current is not None:
            headed[current] += int(m.group(3))  # a timed sub-section adds to its section
    assert headed == {k: v for k, v in sections.items() if k > 0}, (path.name, headed, sections)
    minutes = {n: int(m.group(3)) for n, m in _exercises(_cells(path)).items()}
    assert listed == [minutes[n] for n in sorted(minutes)], (path.name, listed, minutes)
    assert total == sum(listed), f"{path.name}: exercises row says {total} min, they add up to {sum(listed)}"


def test_the_workshop_agenda_gives_each_notebook_its_minutes():
    """docs/workshop.md: a notebook's block lasts the sum of its sections; an exercise block lasts
    the sum of the exercises it names, at the notebook's minutes; every row's span is its minutes."""
    by_number = {p.name[:2]: p for p in NOTEBOOKS}
    seen = set()
    for line in WORKSHOP.read_text().splitlines():
        m = AGENDA_ROW.match(line)
        if not m:
            continue
        h0, m0, h1, m1, block, what, minutes = m.groups()
        span = (int(h1) * 60 + int(m1)) - (int(h0) * 60 + int(m0))
        stated = re.match(r"(\d+) min", minutes)
        if stated:
            assert span == int(stated.group(1)), f"{line}: {span} min between its times"
        notebook = re.match(r"\*\*(\d\d) ·", block)
        exercises = re.match(r"exercises (\d\d)$", block)
        if notebook:
            assert stated and int(stated.group(1)) == _section_total(by_number[notebook.group(1)]), line
            seen.add(notebook.group(1))
        elif exercises:
            _, listed, _ = _opening_minutes(by_number[exercises.group(1)])
            picked = re.findall(r"(\d+) \((?:warm-up|core|stretch), (\d+) min\)", what.split(";")[0])
            assert picked, line
            for number, mins in picked:
                assert int(mins) == listed[int(number) - 1], (
                    f"{line}: exercise {number} is {listed[int(number) - 1]} min"
                )
            assert int(stated.group(1)) == sum(int(mins) for _, mins in picked), line
    assert seen == set(by_number), f"the agenda has no block for notebooks {sorted(set(by_number) - seen)}"
