"""The book's sources: the README stays a landing page, its links and the pages' links resolve,
module docstrings do not repeat the pages, and tools/build_docs.py stages make demo's notebooks
as they ran (no Sphinx needed here; tests/test_site.py checks the built site in a browser)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import nbformat
import project_tools
import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"

build_docs = project_tools.load("build_docs")

#: Words in a row that a module docstring may share with a page: a title or a phrase, not prose.
SHARED_WORDS = 14


def test_the_readme_is_a_landing_page_linking_every_page():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 150, f"README.md has {len(readme.splitlines())} lines (at most 150)"
    linked = set(re.findall(r"\]\(docs/([a-z-]+\.md)\)", readme))
    pages = {p.name for p in DOCS.glob("*.md")} - {"index.md"}
    assert pages <= linked, f"pages the README does not link: {sorted(pages - linked)}"
    assert "make docs" in readme and "make docs-check" in readme


def test_every_relative_link_of_the_readme_and_pages_resolves():
    for source in [ROOT / "README.md", *DOCS.rglob("*.md")]:
        for target in re.findall(r"\]\(([^)#:\s]+)(?:#[^)]*)?\)", source.read_text()):
            assert (source.parent / target).exists(), (
                f"{source.relative_to(ROOT)} links {target}: no such file"
            )


def words(text: str) -> list[str]:
    """The lowercase words of a text, punctuation and markup dropped."""
    return re.findall(r"[a-z0-9]+(?:[.'_-][a-z0-9]+)*", text.lower())


def runs(text: str, n: int = SHARED_WORDS) -> set[tuple[str, ...]]:
    """Every run of ``n`` consecutive words of a text."""
    w = words(text)
    return {tuple(w[i : i + n]) for i in range(len(w) - n + 1)}


def test_no_module_docstring_repeats_the_readme_or_a_page():
    pages = {p: runs(p.read_text()) for p in [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]}
    repeated = []
    for module in sorted((ROOT / "tpucost").rglob("*.py")):
        docstring = ast.get_docstring(ast.parse(module.read_text())) or ""
        for page, page_runs in pages.items():
            if shared := runs(docstring) & page_runs:
                example = " ".join(sorted(shared)[0])
                repeated.append(f"{module.relative_to(ROOT)} and {page.relative_to(ROOT)}: {example!r}")
    assert not repeated, "module docstrings repeat the pages' prose:\n" + "\n".join(repeated)


def test_the_repetition_check_catches_a_copied_sentence():
    sentence = (
        "the budget is checked before each measurement so that a search ends at most one candidate late"
    )
    assert runs(f"Autotuning. {sentence.capitalize()}.") & runs(f"As the page says, {sentence}; see below.")
    assert not runs("the budget is checked before each measurement") & runs(sentence.replace("each", "every"))


def _executed(folder: Path, name: str, change: str = "") -> Path:
    """An executed copy of notebook ``name`` as make demo writes it (outputs stay empty here)."""
    nb = nbformat.read(ROOT / "notebooks" / name, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code" and change:
            cell.source += change
            break
    nb.metadata["tpucost_run"] = {
        "started": "2026-12-04T18:01:00+00:00",
        "seconds": 492.4,
        "device": "cpu 'AMD EPYC' [be3048b01916]",
        "load_average": 1.31,
        "smoke": False,
    }
    folder.mkdir(exist_ok=True)
    nbformat.write(nb, folder / name)
    return folder / name


def _notebook_names() -> list[str]:
    return [p.name for p in sorted((ROOT / "notebooks").glob("0*.ipynb"))]


def test_a_notebook_page_shows_its_run_and_a_badge_the_book_serves(tmp_path):
    names = _notebook_names()
    for name in names:
        _executed(tmp_path, name)
    found = build_docs.executed_notebooks(tmp_path)
    assert [source.name for source, _ in found] == names
    page = build_docs.notebook_page(found[0][1])
    assert (
        build_docs.LOCAL_BADGE in page.cells[0].source and build_docs.COLAB_BADGE not in page.cells[0].source
    )
    assert f"notebooks/{names[0]}" in page.cells[0].source, "the badge still opens this notebook on Colab"
    run = (
        "*Executed by `make demo` on 2026-12-04 18:01 UTC in **8 min 12 s** on cpu 'AMD EPYC' [be3048b01916] "
        "(load average 1.31 at the end). On your machine the numbers differ.*"
    )
    title = next(line for line in page.cells[0].source.splitlines() if line.startswith("# "))
    assert f"{title}\n\n{run}\n" in page.cells[0].source, "the run line comes right under the title"
    original = found[0][1].cells[0].source.replace(build_docs.COLAB_BADGE, build_docs.LOCAL_BADGE)
    assert page.cells[0].source.replace(f"\n{run}\n", "") == original
    assert [c.source for c in page.cells[1:]] == [c.source for c in found[0][1].cells[1:]]


@pytest.mark.parametrize("problem", ["missing", "unrecorded", "stale"])
def test_missing_unrecorded_or_stale_executed_notebooks_are_refused(tmp_path, problem):
    names = _notebook_names()
    for name in names:
        _executed(
            tmp_path, name, change="\n# edited since" if problem == "stale" and name == names[2] else ""
        )
    if problem == "missing":
        (tmp_path / names[1]).unlink()
    if problem == "unrecorded":
        nb = nbformat.read(tmp_path / names[3], as_version=4)
        del nb.metadata["tpucost_run"]
        nbformat.write(nb, tmp_path / names[3])
    expected = {
        "missing": f"{names[1]} is missing: run `make demo` first",
        "unrecorded": f"{names[3]} has no run record",
        "stale": f"{names[2]} was executed from older code",
    }[problem]
    with pytest.raises(build_docs.StaleNotebook, match=re.escape(expected)):
        build_docs.executed_notebooks(tmp_path)


def test_the_api_reference_has_a_page_per_module(tmp_path):
    build_docs.api_pages(tmp_path)
    names = build_docs.module_names()
    assert {"tpucost.method.hlo", "tpucost.method.autotune.search", "tpucost.experiments.data.kernel"} <= set(
        names
    )
    assert sorted(p.stem for p in tmp_path.glob("tpucost*.md")) == names
    index = (tmp_path / "index.md").read_text()
    assert all(f"\n{name}\n" in index for name in names)


def test_prose_edited_since_the_run_is_shown_as_the_notebook_has_it(tmp_path):
    names = _notebook_names()
    for name in names:
        path = _executed(tmp_path, name)
        nb = nbformat.read(path, as_version=4)
        markdown = next(c for c in nb.cells[1:] if c.cell_type == "markdown")
        markdown.source = "An old sentence, since rewritten."
        nbformat.write(nb, path)
    for (_source, nb), name in zip(build_docs.executed_notebooks(tmp_path), names, strict=True):
        now = nbformat.read(ROOT / "notebooks" / name, as_version=4)
        assert [c.source for c in nb.cells] == [c.source for c in now.cells], name
