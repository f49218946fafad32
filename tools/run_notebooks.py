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
from datetime import datetime
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

ROOT = Path(__file__).resolve().parents[1]


#: Who executed a notebook, as its page's run line names it (``tpucost_run["by"]``).
BY_MAKE_DEMO = "`make demo`"


def execute(path: Path, out_dir: Path, timeout: int, device: str, by: str = BY_MAKE_DEMO) -> Path:
    """Run one notebook with its own folder as the working directory; save it executed, with
    who ran it (``by``), when, how long, where and under what load in its metadata
    (``tpucost_run``: the book shows it on the notebook's page). `tests/test_wheel.py` calls this
    too, for the notebooks it executes from the wheel (``make test`` builds its book from them)."""
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    )
    started, start = datetime.now().astimezone(), time.time()
    try:
        client.execute()
        nb.metadata["tpucost_run"] = {
            "by": by,
            "started": started.isoformat(timespec="seconds"),
            "seconds": round(time.time() - start, 1),
            "device": device,
            "load_average": round(os.getloadavg()[0], 2),
            "smoke": os.environ.get("TPUCOST_SMOKE") == "1",
        }
    finally:
        out_dir.mkdir(parents=True, exist_ok=True)
        target = out_dir / path.name
        nbformat.write(nb, target)
    return target


def longest_cells(notebook: Path, top: int = 3) -> list[tuple[float, str]]:
    """The ``top`` code cells that took longest, as (seconds, first line), from the execution
    timestamps nbclient records in each cell's metadata."""
    nb = nbformat.read(notebook, as_version=4)
    timed = []
    for cell in nb.cells:
        times = cell.get("metadata", {}).get("execution", {})
        start, end = times.get("iopub.execute_input"), times.get("shell.execute_reply")
        if cell.cell_type == "code" and start and end:
            seconds = (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()
            first = next((ln for ln in cell.source.splitlines() if ln.strip()), "")
            timed.append((seconds, first[:70]))
    return sorted(timed, reverse=True)[:top]


def to_html(notebook: Path) -> Path:
    from nbconvert import HTMLExporter

    body, _ = HTMLExporter().from_filename(str(notebook))
    html = notebook.with_suffix(".html")
    html.write_text(body, encoding="utf-8")
    return html


#: What a child process prints: this machine as `tpucost.method.device` describes it.
DEVICE_CODE = "from tpucost.method import device; print(device.describe(device.fingerprint()))"


def device_line() -> str:
    """This machine as `tpucost.method.device` describes it (in a child process: JAX stays out of
    this one). RuntimeError with the child's last error line where it cannot say: a run record
    never names "an unknown device"."""
    import subprocess

    out = subprocess.run([sys.executable, "-c", DEVICE_CODE], capture_output=True, text=True, check=False)
    if out.returncode != 0 or not out.stdout.strip():
        last = (out.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"cannot describe this device for the run record: {last}")
    return out.stdout.strip().splitlines()[-1]


def _find(path: Path) -> Path:
    """``path`` as given, or the notebook of that name under notebooks/ (``03_train_cost_model.ipynb``)."""
    return path if path.is_file() or path.parent != Path(".") else ROOT / "notebooks" / path.name


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path)
    parser.add_argument("--out", type=Path, default=ROOT / "build")
    parser.add_argument("--smoke", action="store_true", help="set TPUCOST_SMOKE=1 (tiny settings)")
    parser.add_argument("--timeout", type=int, default=1800, help="seconds per cell")
    args = parser.parse_args()
    if args.smoke:
        os.environ["TPUCOST_SMOKE"] = "1"
    notebooks = [_find(path) for path in args.notebooks] or sorted((ROOT / "notebooks").glob("0*.ipynb"))
    missing = [
        str(given) for given, path in zip(args.notebooks, notebooks, strict=False) if not path.is_file()
    ]
    if missing:
        where = ROOT / "notebooks"
        print(f"error: no such notebook: {', '.join(missing)} (here or in {where})", file=sys.stderr)
        return 2
    device = device_line()
    print(
        f"{datetime.now().astimezone():%Y-%m-%d %H:%M %Z}, load average {os.getloadavg()[0]:.2f}, on {device}"
    )
    for path in notebooks:
        start = time.time()
        print(f"running {path.name} ...", flush=True)
        try:
            executed = execute(path, args.out, args.timeout, device)
        except CellExecutionError as err:
            print(
                f"{path.name} failed; the partly executed copy is in {args.out / path.name}\n{err}",
                file=sys.stderr,
            )
            return 1
        html = to_html(executed)
        print(f"  done in {time.time() - start:.0f} s -> {executed} and {html.name}", flush=True)
        for seconds, first in longest_cells(executed):
            print(f"    {seconds:6.1f} s  {first}", flush=True)
    print(f"executed notebooks and HTML are in {args.out.resolve()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
