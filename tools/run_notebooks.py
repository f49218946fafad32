"""Execute notebooks/0*.ipynb in order; write executed copies and HTML to an output folder.

    python tools/run_notebooks.py --out build [--smoke] [--timeout 1200] [NOTEBOOK ...]

`make demo` runs this on the bundled default data. The notebooks in notebooks/ stay
without outputs; only the copies under --out carry them.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

ROOT = Path(__file__).resolve().parents[1]


def execute(path: Path, out_dir: Path, timeout: int) -> Path:
    """Run one notebook with its own folder as the working directory; save it executed."""
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    )
    try:
        client.execute()
    finally:
        out_dir.mkdir(parents=True, exist_ok=True)
        target = out_dir / path.name
        nbformat.write(nb, target)
    return target


def to_html(notebook: Path) -> Path:
    from nbconvert import HTMLExporter

    body, _ = HTMLExporter().from_filename(str(notebook))
    html = notebook.with_suffix(".html")
    html.write_text(body, encoding="utf-8")
    return html


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path)
    parser.add_argument("--out", type=Path, default=ROOT / "build")
    parser.add_argument("--smoke", action="store_true", help="set TPUCOST_SMOKE=1 (tiny settings)")
    parser.add_argument("--timeout", type=int, default=1800, help="seconds per cell")
    args = parser.parse_args()
    if args.smoke:
        os.environ["TPUCOST_SMOKE"] = "1"
    notebooks = args.notebooks or sorted((ROOT / "notebooks").glob("0*.ipynb"))
    for path in notebooks:
        start = time.time()
        print(f"running {path.name} ...", flush=True)
        try:
            executed = execute(path, args.out, args.timeout)
        except CellExecutionError as err:
            print(
                f"{path.name} failed; the partly executed copy is in {args.out / path.name}\n{err}",
                file=sys.stderr,
            )
            return 1
        html = to_html(executed)
        print(f"  done in {time.time() - start:.0f} s -> {executed} and {html.name}", flush=True)
    print(f"executed notebooks and HTML are in {args.out.resolve()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
