"""Build the book (`make docs`): docs/ plus `make demo`'s executed notebooks, rendered by Sphinx.

    python tools/build_docs.py [--executed build] [--out build/site]

Nothing is executed: each notebook page shows the outputs `make demo` recorded in
``build/NN_*.ipynb`` (or, with ``--executed build/tested-notebooks``, those `make test` recorded
when `tests/test_wheel.py` ran the notebooks from the wheel: `make test` builds its book into
``build/tested-site`` that way), with who ran it, when, where and in how long. The sources are
staged in ``docs-src`` beside ``--out`` (docs/ as it is, the notebooks, one API page per module,
the bundled data's provenance files), then Sphinx writes the static site to ``--out``.
"""

from __future__ import annotations

import argparse
import os
import pkgutil
import shutil
import sys
import time
from datetime import datetime
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

from notebook_header import BADGE_IMAGE as COLAB_BADGE  # noqa: E402
from notebook_header import repository_url  # noqa: E402

LOCAL_BADGE = "../_static/colab-badge.svg"  # the book loads nothing from other hosts
PROVENANCE = {  # page name: the bundled file it shows
    "kernel-data": "tpucost/bundled/kernels_cpu/PROVENANCE.md",
    "tile-data": "tpucost/bundled/tiles_cpu/PROVENANCE.md",
    "checkpoints": "tpucost/bundled/checkpoints/README.md",
    "calibration": "tpucost/bundled/calibration/README.md",
    "autotune": "tpucost/bundled/autotune/README.md",
}


class StaleNotebook(Exception):
    """An executed copy is missing, or was executed from other sources than notebooks/ holds now."""


def _cells_and_code(nb: nbformat.NotebookNode) -> list[tuple[str, str | None]]:
    """Each cell's type, with its source for a code cell: what an executed copy must share with
    the notebook for its outputs to be the notebook's."""
    return [(cell.cell_type, cell.source if cell.cell_type == "code" else None) for cell in nb.cells]


def executed_notebooks(executed_dir: Path) -> list[tuple[Path, nbformat.NotebookNode]]:
    """Each notebooks/0*.ipynb's executed copy in ``executed_dir``, its markdown cells as the
    notebook has them now; raises StaleNotebook naming the first one that is missing, unrecorded,
    or whose code cells differ from the notebook's."""
    found = []
    for source in sorted((ROOT / "notebooks").glob("0*.ipynb")):
        copy = executed_dir / source.name
        if not copy.is_file():
            raise StaleNotebook(
                f"{copy} is missing: run `make demo` first (build/tested-notebooks: tests/test_wheel.py)"
            )
        nb = nbformat.read(copy, as_version=4)
        if "tpucost_run" not in nb.metadata:
            raise StaleNotebook(f"{copy} has no run record (metadata 'tpucost_run'): run `make demo` again")
        current = nbformat.read(source, as_version=4)
        if _cells_and_code(nb) != _cells_and_code(current):
            raise StaleNotebook(f"{copy} was executed from older code than {source}: run `make demo` again")
        for executed, now in zip(nb.cells, current.cells, strict=True):
            executed.source = now.source  # prose edited since the run needs no second run
        found.append((source, nb))
    return found


def run_line(run: dict) -> str:
    """One sentence saying who ran a notebook (``make demo`` unless its record says otherwise),
    when, on which device, in how long and under what load."""
    started = datetime.fromisoformat(run["started"])
    minutes, seconds = divmod(round(run["seconds"]), 60)
    took = f"{minutes} min {seconds} s" if minutes else f"{seconds} s"
    smoke = " with `TPUCOST_SMOKE=1` (tiny settings)" if run.get("smoke") else ""
    by = run.get("by", "`make demo`")
    return (
        f"*Executed by {by} on {started:%Y-%m-%d %H:%M %Z}{smoke} in **{took}** on {run['device']} "
        f"(load average {run['load_average']:.2f} at the end). On your machine the numbers differ.*"
    )


def notebook_page(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The notebook as its page shows it: the badge image served by the book itself, and the run
    line under the title."""
    page = nbformat.from_dict(nb)
    first = page.cells[0]
    if COLAB_BADGE not in first.source or "\n# " not in first.source:
        raise StaleNotebook(
            "the notebook's first cell has no Colab badge or title (python tools/notebook_header.py)"
        )
    head, _, tail = first.source.replace(COLAB_BADGE, LOCAL_BADGE).partition("\n# ")
    title, _, rest = tail.partition("\n")
    first.source = f"{head}\n# {title}\n\n{run_line(nb.metadata['tpucost_run'])}\n{rest}"
    return page


def module_names() -> list[str]:
    """Every module of the tpucost package, dotted, in import-path order (no ``__main__``)."""
    import tpucost

    names = ["tpucost"] + [
        info.name
        for info in pkgutil.walk_packages(tpucost.__path__, "tpucost.")
        if not info.name.endswith("__main__")
    ]
    return sorted(names)


def index_page(folder: Path, title: str, text: str, pages: list[str]) -> None:
    """``folder/index.md``: a title, a paragraph and a table of contents of ``pages``."""
    toc = "\n".join(pages)
    page = f"# {title}\n\n{text}\n\n```{{toctree}}\n:maxdepth: 1\n\n{toc}\n```\n"
    (folder / "index.md").write_text(page, encoding="utf-8")


def api_pages(folder: Path) -> None:
    """One page per module (its docstring and the public members it defines, by autodoc; a package
    that re-exports its modules' names shows only its docstring) and an index of them."""
    folder.mkdir(parents=True, exist_ok=True)
    names = module_names()
    for name in names:
        (folder / f"{name}.md").write_text(
            f"# `{name}`\n\n```{{eval-rst}}\n.. automodule:: {name}\n   :members:\n   :ignore-module-all:\n```\n",
            encoding="utf-8",
        )
    index_page(
        folder,
        "API reference",
        "Generated from the docstrings, one page per module. "
        "[How the pieces fit](../architecture.md) says which stage each module is.",
        names,
    )


def provenance_pages(folder: Path) -> None:
    """The bundled data sets', checkpoints' and experiments' own provenance files, as pages."""
    folder.mkdir(parents=True, exist_ok=True)
    for page, source in PROVENANCE.items():
        shutil.copyfile(ROOT / source, folder / f"{page}.md")
    index_page(
        folder,
        "Bundled data and its provenance",
        "What ships inside the package, each with where, when and by which command it was made "
        "(the files under `tpucost/bundled/`).",
        list(PROVENANCE),
    )


def stage(executed_dir: Path, source_dir: Path) -> None:
    """Write the book's sources to ``source_dir``: docs/, notebook pages, API and provenance pages."""
    notebooks = executed_notebooks(executed_dir)
    if source_dir.exists():
        shutil.rmtree(source_dir)
    shutil.copytree(ROOT / "docs", source_dir)
    for source, nb in notebooks:
        (source_dir / "notebooks").mkdir(exist_ok=True)
        nbformat.write(notebook_page(nb), source_dir / "notebooks" / source.name)
    api_pages(source_dir / "api")
    provenance_pages(source_dir / "provenance")


def build(source_dir: Path, out: Path) -> int:
    """Run Sphinx (HTML) on the staged sources, from scratch (``-E``: no state kept from an earlier
    build), warnings as errors. Returns Sphinx's exit status."""
    from sphinx.cmd.build import build_main

    os.environ["TPUCOST_ROOT"] = str(ROOT)
    doctrees = out.parent / "doctrees"
    return build_main(
        ["-b", "html", "-E", "-q", "-W", "--keep-going", "-d", str(doctrees), str(source_dir), str(out)]
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--executed",
        type=Path,
        default=ROOT / "build",
        help="the executed notebooks: make demo's output folder, or build/tested-notebooks (make test's)",
    )
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "site")
    args = parser.parse_args()
    start = time.time()
    try:
        stage(args.executed, args.out.parent / "docs-src")
    except StaleNotebook as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    status = build(args.out.parent / "docs-src", args.out)
    if status == 0:
        print(
            f"built {args.out / 'index.html'} in {time.time() - start:.0f} s (repository {repository_url()})"
        )
    return status


if __name__ == "__main__":
    raise SystemExit(main())
