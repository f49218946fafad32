"""Write each notebook's "Open in Colab" badge and install cell from pyproject.toml's [project.urls].

    python tools/notebook_header.py          # rewrite notebooks/0*.ipynb in place
    python tools/notebook_header.py --check  # exit 1 if a notebook disagrees (the tests run this check)

`[project.urls] Repository` is the one place that says where tpucost lives. Every notebook's first
markdown cell starts with a Colab badge pointing at that repository, and its first code cell (the
install cell) installs from it. The README's badges are checked against the same URL by the tests.
The install cell refuses a runtime whose jax is older than pyproject.toml's lower bound for jax,
with one sentence, before pip runs (pip's resolver would fail with a long traceback).
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import nbformat
import tomllib

ROOT = Path(__file__).resolve().parents[1]
BADGE_IMAGE = "https://colab.research.google.com/assets/colab-badge.svg"

INSTALL_CELL = """\
# Setup: make `tpucost` importable (on Colab or a fresh kernel; does nothing when it already is).
# Inside a checkout this installs the checkout; elsewhere the package from its repository;
# TPUCOST_SOURCE (a git URL, a path or a wheel) overrides where from. A runtime that already has
# jax (Colab) keeps its own jax, jaxlib and libtpu: they are pinned to what is installed.
import importlib.metadata, importlib.util, os, pathlib, re, subprocess, sys, tempfile
REPOSITORY = "{repository}"  # [project.urls] Repository in pyproject.toml
JAX_FLOOR = "{jax_floor}"  # the oldest jax tpucost is tested with (pyproject.toml)
if importlib.util.find_spec("tpucost") is None:
    here = pathlib.Path.cwd().resolve()
    checkout = next((p for p in (here, *here.parents)
                     if (p / "pyproject.toml").is_file() and (p / "tpucost" / "__init__.py").is_file()), None)
    source = os.environ.get("TPUCOST_SOURCE") or (str(checkout) if checkout else f"git+{{REPOSITORY}}")
    if "://" in source:
        requirement = f"tpucost @ {{source}}"
    elif source.endswith(".whl"):
        requirement = f"tpucost @ {{pathlib.Path(source).resolve().as_uri()}}"
    else:
        requirement = str(pathlib.Path(source).resolve())
    keep = {{name: importlib.metadata.version(name) for name in ("jax", "jaxlib", "libtpu")
            if importlib.util.find_spec(name) is not None}}
    number = lambda v: tuple(int(p) for p in re.findall(r"\\d+", v)[:3])
    if "jax" in keep and number(keep["jax"]) < number(JAX_FLOOR):
        raise SystemExit(f"This runtime has jax {{keep['jax']}}, older than {{JAX_FLOOR}}, the oldest tpucost supports: "
                         f"pick a newer runtime version (Runtime > Change runtime type) or a fresh environment.")
    pins = pathlib.Path(tempfile.mkdtemp()) / "keep-runtime.txt"
    pins.write_text("".join(f"{{name}}=={{version}}\\n" for name, version in keep.items()))
    print("installing", requirement, "keeping", keep or "nothing")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "-c", str(pins), requirement], check=True)
    importlib.invalidate_caches()
"""


def repository_url(pyproject: Path = ROOT / "pyproject.toml") -> str:
    """``[project.urls] Repository`` of pyproject.toml, without a trailing slash."""
    urls = tomllib.loads(pyproject.read_text())["project"].get("urls", {})
    if "Repository" not in urls:
        raise SystemExit(f"{pyproject}: [project.urls] has no 'Repository'")
    return urls["Repository"].rstrip("/")


def colab_url(repository: str, notebook: str) -> str:
    """Colab's address for ``notebooks/<notebook>`` on the main branch of a GitHub repository."""
    m = re.fullmatch(r"https://github\.com/([^/]+)/([^/]+?)(?:\.git)?", repository)
    if not m:
        raise SystemExit(f"Repository URL {repository!r} is not https://github.com/OWNER/NAME")
    return (
        f"https://colab.research.google.com/github/{m.group(1)}/{m.group(2)}/blob/main/notebooks/{notebook}"
    )


def badge(repository: str, notebook: str) -> str:
    """The markdown "Open in Colab" badge of one notebook."""
    return f"[![Open In Colab]({BADGE_IMAGE})]({colab_url(repository, notebook)})"


def jax_floor(pyproject: Path = ROOT / "pyproject.toml") -> str:
    """The lower bound of ``jax`` in pyproject.toml's dependencies (``"jax>=X"`` -> ``"X"``)."""
    for requirement in tomllib.loads(pyproject.read_text())["project"]["dependencies"]:
        m = re.fullmatch(r"jax\s*>=\s*([0-9][0-9a-z.]*)", requirement.strip())
        if m:
            return m.group(1)
    raise SystemExit(f"{pyproject}: no 'jax>=X' in [project] dependencies")


def install_cell(repository: str, floor: str) -> str:
    """Source of the install cell (the notebook's first code cell)."""
    return INSTALL_CELL.format(repository=repository, jax_floor=floor)


def with_header(nb: nbformat.NotebookNode, name: str, repository: str, floor: str) -> nbformat.NotebookNode:
    """Return ``nb`` with the badge as the first line of cell 0 and the install cell as cell 1."""
    first = nb.cells[0]
    lines = [ln for ln in first.source.splitlines() if "colab-badge.svg" not in ln]
    while lines and not lines[0].strip():
        lines.pop(0)
    first.source = "\n".join([badge(repository, name), "", *lines])
    code = nb.cells[1]
    if code.cell_type != "code":
        raise SystemExit(f"{name}: cell 1 should be the install cell (a code cell)")
    code.source = install_cell(repository, floor).rstrip("\n")
    return nb


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="report notebooks that disagree; change nothing")
    args = parser.parse_args()
    repository, floor = repository_url(), jax_floor()
    stale = []
    for path in sorted((ROOT / "notebooks").glob("0*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        before = nbformat.writes(nb)
        after = nbformat.writes(with_header(nb, path.name, repository, floor))
        if before != after:
            stale.append(path.name)
            if not args.check:
                path.write_text(after)
    if args.check and stale:
        print("out of date (run python tools/notebook_header.py):", ", ".join(stale))
        return 1
    print(
        ("rewrote: " + ", ".join(stale))
        if stale and not args.check
        else "notebook headers agree with pyproject.toml"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
