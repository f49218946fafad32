"""docs/workshop.md quotes execution times from one recorded `make demo` of today's notebooks."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import project_tools
import pytest

ROOT = Path(__file__).resolve().parents[1]
workshop_times = project_tools.load("workshop_times")


def test_the_guide_shows_the_recorded_run():
    rec = json.loads(workshop_times.RECORD.read_text())
    guide = workshop_times.GUIDE.read_text()
    assert workshop_times.render(guide, rec) == guide, "run `python tools/workshop_times.py render`"
    block = guide.split(workshop_times.START)[1].split(workshop_times.END)[0]
    for n in rec["notebooks"]:  # each notebook's row, with the seconds its run record says
        assert f"| {n['notebook'][:2]} | {n['seconds']:.0f} s |" in block
    assert rec["device"] in block and "unknown" not in rec["device"]


def test_the_record_is_of_todays_notebooks():
    rec = {n["notebook"]: n for n in json.loads(workshop_times.RECORD.read_text())["notebooks"]}
    notebooks = sorted((ROOT / "notebooks").glob("0*.ipynb"))
    assert set(rec) == {p.name for p in notebooks}
    stale = [p.name for p in notebooks if rec[p.name]["code_sha256"] != workshop_times.code_hash(p)]
    assert not stale, (
        f"{stale} changed since the recorded make demo: run make demo, then tools/workshop_times.py record build"
    )
    assert not any(n["smoke"] for n in rec.values())


def test_a_record_is_refused_for_smoke_runs_and_a_code_change_is_seen(tmp_path):
    source = ROOT / "notebooks" / "01_hlo_and_kernels.ipynb"
    nb = nbformat.read(source, as_version=4)
    nb.metadata["tpucost_run"] = {
        "by": "x",
        "started": "t",
        "seconds": 1.0,
        "device": "d",
        "load_average": 0.1,
        "smoke": True,
    }
    nbformat.write(nb, tmp_path / source.name)
    with pytest.raises(SystemExit, match="smoke"):
        workshop_times.record(tmp_path)
    nb.cells[next(i for i, c in enumerate(nb.cells) if c.cell_type == "code")].source += "\n1"
    changed = tmp_path / "changed.ipynb"
    nbformat.write(nb, changed)
    assert workshop_times.code_hash(changed) != workshop_times.code_hash(source)
    prose = nbformat.read(source, as_version=4)
    prose.cells[0].source += " (prose)"  # a markdown edit keeps the record valid
    nbformat.write(prose, tmp_path / "prose.ipynb")
    assert workshop_times.code_hash(tmp_path / "prose.ipynb") == workshop_times.code_hash(source)


def test_a_long_cell_can_be_skipped_and_says_how_long_it_took():
    from tpucost import files

    rec = json.loads(workshop_times.RECORD.read_text())
    shipped = json.loads(workshop_times.LONG_CELLS.read_text())
    assert shipped["cells"] == rec["long_cells"] and shipped["started"] == rec["notebooks"][0]["started"]
    tagged = [
        (path.name, cell)
        for path in sorted((ROOT / "notebooks").glob("0*.ipynb"))
        for cell in nbformat.read(path, as_version=4).cells
        if "long" in cell.get("metadata", {}).get("tags", [])
    ]
    assert tagged  # notebook 05's tile-space searches
    for name, cell in tagged:
        assert cell.source.startswith("if SKIP_LONG_CELLS:"), name
        line = files.skipped_cell(name, cell["id"])
        seconds = shipped["cells"][f"{name}#{cell['id']}"]
        assert f"it took {seconds:.0f} s in the recorded make demo" in line and rec["device"] in line
    assert "no recorded time" in files.skipped_cell("01_hlo_and_kernels.ipynb", "no-such-cell")
