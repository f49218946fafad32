"""The two-command setup stays consistent: pins, environment.yml, Makefile, CI, README."""

from __future__ import annotations

import re
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]


def _pins(text: str) -> dict[str, str]:
    return {m.group(1).lower(): m.group(2) for m in re.finditer(r"^[\s-]*([A-Za-z0-9_.\-]+)==([^\s;#]+)", text, re.M)}


def test_environment_yml_pins_match_constraints():
    constraints = _pins((ROOT / "constraints.txt").read_text())
    env = _pins((ROOT / "environment.yml").read_text())
    assert env, "environment.yml pins nothing"
    for name, version in env.items():
        assert constraints.get(name) == version, f"{name}: environment.yml {version} != constraints.txt {constraints.get(name)}"


def test_constraints_pin_every_direct_dependency():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    constraints = _pins((ROOT / "constraints.txt").read_text())
    deps = project["dependencies"] + [d for extra in project["optional-dependencies"].values() for d in extra]
    for dep in deps:
        name = re.match(r"[A-Za-z0-9_.\-]+", dep).group(0).lower()
        assert name in constraints, f"{name} is not pinned in constraints.txt"
        assert "==" not in dep, f"pyproject should give a range, not a pin: {dep}"


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make test" in readme and "make demo" in readme
    assert re.search(r"^make test$", ci, re.M)


def test_makefile_installs_with_constraints():
    makefile = (ROOT / "Makefile").read_text()
    assert "-c constraints.txt" in makefile
    for target in ("demo:", "test:", "lab:"):
        assert target in makefile


def test_notebooks_are_committed_without_outputs():
    import nbformat

    notebooks = sorted((ROOT / "notebooks").glob("0*.ipynb"))
    assert notebooks
    for path in notebooks:
        nb = nbformat.read(path, as_version=4)
        tags = [c.get("metadata", {}).get("tags", []) for c in nb.cells]
        assert any("parameters" in t for t in tags), f"{path.name} has no cell tagged 'parameters'"
        for cell in nb.cells:
            if cell.cell_type == "code":
                assert not cell.outputs and cell.execution_count is None, f"{path.name} is committed with outputs"
        assert "Exercises" in "".join(c.source for c in nb.cells if c.cell_type == "markdown"), path.name
