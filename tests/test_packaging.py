"""The two-command setup stays consistent: pins, environment.yml, Makefile, CI, README."""

from __future__ import annotations

import re
from pathlib import Path

import project_tools
import tomllib

ROOT = Path(__file__).resolve().parents[1]


def _pins(text: str) -> dict[str, str]:
    return {
        m.group(1).lower(): m.group(2)
        for m in re.finditer(r"^[\s-]*([A-Za-z0-9_.\-]+)==([^\s;#]+)", text, re.M)
    }


def test_environment_yml_pins_match_constraints():
    constraints = _pins((ROOT / "constraints.txt").read_text())
    env = _pins((ROOT / "environment.yml").read_text())
    assert env, "environment.yml pins nothing"
    for name, version in env.items():
        assert constraints.get(name) == version, (
            f"{name}: environment.yml {version} != constraints.txt {constraints.get(name)}"
        )


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
                assert not cell.outputs and cell.execution_count is None, (
                    f"{path.name} is committed with outputs"
                )
        assert "Exercises" in "".join(c.source for c in nb.cells if c.cell_type == "markdown"), path.name


def _notebook_header():
    """tools/notebook_header.py as a module."""
    return project_tools.load("notebook_header")


def test_notebook_badges_and_install_cells_come_from_project_urls():
    header = _notebook_header()
    repository = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]["Repository"]
    assert header.repository_url() == repository.rstrip("/")
    readme = (ROOT / "README.md").read_text()
    import nbformat

    for path in sorted((ROOT / "notebooks").glob("0*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        expected = header.badge(repository, path.name)
        assert nb.cells[0].source.splitlines()[0] == expected, (
            f"{path.name}: first line is not its Colab badge"
        )
        assert nb.cells[1].source == header.install_cell(repository, header.jax_floor()).rstrip("\n"), (
            f"{path.name}: install cell is stale; run python tools/notebook_header.py"
        )
        assert expected in readme, f"README has no Colab badge for {path.name}"


def _run_install_cell(monkeypatch, cwd: Path, source: str | None = None) -> tuple[list[str], str]:
    """Execute the install cell as if tpucost were missing; return pip's command and the pins file."""
    import importlib.util
    import subprocess

    header = _notebook_header()
    calls = []
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "tpucost" else real_find_spec(name, *a)
    )
    monkeypatch.setattr(subprocess, "run", lambda cmd, **kw: calls.append(cmd))
    monkeypatch.chdir(cwd)
    if source is None:
        monkeypatch.delenv("TPUCOST_SOURCE", raising=False)
    else:
        monkeypatch.setenv("TPUCOST_SOURCE", source)
    exec(
        compile(header.install_cell(header.repository_url(), header.jax_floor()), "install-cell", "exec"), {}
    )
    (cmd,) = calls
    pins = Path(cmd[cmd.index("-c") + 1]).read_text()
    return cmd, pins


def test_install_cell_installs_the_checkout_inside_it_and_the_repository_elsewhere(monkeypatch, tmp_path):
    import importlib.metadata

    cmd, pins = _run_install_cell(monkeypatch, ROOT / "notebooks")
    assert cmd[-1] == str(ROOT)
    # A runtime that already has jax (Colab) keeps its jax and jaxlib.
    assert f"jax=={importlib.metadata.version('jax')}" in pins.split()
    assert f"jaxlib=={importlib.metadata.version('jaxlib')}" in pins.split()

    cmd, _ = _run_install_cell(monkeypatch, tmp_path)
    assert cmd[-1] == f"tpucost @ git+{_notebook_header().repository_url()}"
    cmd, _ = _run_install_cell(monkeypatch, tmp_path, source=str(tmp_path / "tpucost-0.1.0-py3-none-any.whl"))
    assert cmd[-1] == f"tpucost @ file://{tmp_path}/tpucost-0.1.0-py3-none-any.whl"


def test_install_cell_refuses_a_jax_older_than_the_floor_in_one_sentence(tmp_path):
    """A runtime whose jax is older than pyproject's lower bound: one sentence, and pip never runs."""
    import subprocess
    import sys

    header = _notebook_header()
    site = tmp_path / "site"
    (site / "jax").mkdir(parents=True)
    (site / "jax" / "__init__.py").write_text("")
    (site / "jax-0.4.30.dist-info").mkdir()
    (site / "jax-0.4.30.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: jax\nVersion: 0.4.30\n"
    )
    cell = header.install_cell(header.repository_url(), header.jax_floor())
    # -S: no site-packages (no tpucost, no real jax); the fake jax 0.4.30 comes first on the path.
    run = subprocess.run(
        [sys.executable, "-S", "-c", f"import sys; sys.path.insert(0, {str(site)!r})\n{cell}"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 1 and "installing" not in run.stdout
    message = run.stderr.strip().splitlines()[-1]
    assert message.startswith("This runtime has jax 0.4.30, older than") and header.jax_floor() in message
    assert "Traceback" not in run.stderr


def _direct_dependencies() -> dict[str, str]:
    """``{name: lower bound}`` of pyproject's dependencies and extras (``"jax>=0.7.2"`` -> jax: 0.7.2;
    ``"jax[tpu]>=0.7.2"``, jax with its own extra, -> jax: 0.7.2)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    deps = project["dependencies"] + [d for extra in project["optional-dependencies"].values() for d in extra]
    out = {}
    for dep in deps:
        m = re.fullmatch(r"([A-Za-z0-9_.\-]+)(?:\[[a-z0-9,\-]+\])?>=([^,;\s]+)", dep.strip())
        assert m, f"pyproject: {dep!r} should be NAME>=LOWER (the oldest version tested)"
        out[m.group(1).lower().replace("_", "-")] = m.group(2)
    return out


def test_lower_bounds_are_the_oldest_tested_versions():
    """Each lower bound is the version of constraints-colab.txt (Colab's image), or, for a package
    Colab does not ship, that of constraints.txt: nothing older than what `make test` tests."""
    colab = {k.replace("_", "-"): v for k, v in _pins((ROOT / "constraints-colab.txt").read_text()).items()}
    for name, lower in _direct_dependencies().items():
        assert lower == colab[name], f"pyproject: {name}>={lower}, but the oldest tested is {colab[name]}"
    header = (ROOT / "constraints-colab.txt").read_text().splitlines()[:4]
    assert any("Source: googlecolab/backend-info" in line and "dated" in line for line in header)


def test_colab_constraints_are_what_the_tool_writes_from_colab_s_list(tmp_path):
    """constraints-colab.txt is tools/colab_constraints.py's output, not edited by hand: rewritten
    from its own Colab lines it comes out the same."""
    tool = project_tools.load("colab_constraints")
    text = (ROOT / "constraints-colab.txt").read_text()
    source = re.search(r"^# Source: (\S+) pip-freeze\.txt, dated (\S+)\.$", text, re.M)
    colab_part = text.split("# not on Colab (from constraints.txt):")[0]
    (tmp_path / "pip-freeze.txt").write_text(colab_part)
    assert (
        tool.colab_constraints(
            tmp_path / "pip-freeze.txt", ROOT / "constraints.txt", source.group(1), source.group(2)
        )
        == text
    )


def test_makefile_tests_both_environments():
    makefile = (ROOT / "Makefile").read_text()
    assert "-c constraints-colab.txt" in makefile and "TPUCOST_PINS=constraints-colab.txt" in makefile
    assert re.search(r"^test: test-newest test-colab$", makefile, re.M)


def _module_name(path: Path) -> str:
    """``tpucost/x.py`` -> ``x``; ``tpucost/method/tasks/x.py`` -> ``tasks.x``; ``tpucost/experiments/tiles/__init__.py`` ->
    ``tiles`` (the module map's names)."""
    parts = path.relative_to(ROOT / "tpucost").with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _package_modules() -> set[str]:
    """The module map's names of every module of the package: sub-packages' modules dotted, and a
    sub-package itself when its ``__init__`` imports something (a package that re-exports)."""
    files = [
        p
        for p in (ROOT / "tpucost").rglob("*.py")
        if p.name != "__main__.py"
        and p.parent != ROOT / "tpucost"
        or p.parent == ROOT / "tpucost"
        and p.name not in ("__init__.py", "__main__.py")
    ]
    return {_module_name(p) for p in files if p.name != "__init__.py" or "import" in _code(p)}


def _code(path: Path) -> str:
    """The source without its docstring (a docstring may mention imports)."""
    import ast

    tree = ast.parse(path.read_text())
    return "\n".join(ast.unparse(node) for node in tree.body if not isinstance(node, ast.Expr))


def _imported_name(module: str, names: list[str]) -> set[str]:
    """The map names an ``import``/``from`` of tpucost ``module`` (``"tpucost.x.y"``) refers to: the
    module itself, or for a package each imported module (``from tpucost.method.tasks import kernel``)
    or the package when the name is one its ``__init__`` re-exports
    (``from tpucost.experiments.programs import Program``)."""
    parts = module.split(".")[1:]
    package = ROOT.joinpath("tpucost", *parts)
    if not package.is_dir():
        return {".".join(parts)}
    found = set()
    for n in names:
        is_module = (package / f"{n}.py").exists() or (package / n / "__init__.py").exists()
        found.add(".".join([*parts, n]) if is_module else ".".join(parts))
    return found


def _tpucost_imports(path: Path) -> set[str]:
    """The tpucost modules a module imports (at any depth, outside `if TYPE_CHECKING:`)."""
    import ast

    tree = ast.parse(path.read_text())
    typing_only = {
        id(n)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for n in ast.walk(node)
    }
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom) and (
            node.module == "tpucost" or (node.module or "").startswith("tpucost.")
        ):
            found |= _imported_name(node.module, [a.name for a in node.names])
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("tpucost."):
                    found |= _imported_name(a.name, [])
    return found - {_module_name(path)}


def _module_map() -> list[tuple[str, set[str], str]]:
    """The rows of docs/architecture.md's module map: (module, the modules it uses, what it does)."""
    page = (ROOT / "docs" / "architecture.md").read_text()
    section = page.split("## The module map", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([\w.]+)` \| ([^|]*) \| (.*) \|$", section, re.M)
    return [(name, set(uses.split()) - {"-"}, what) for name, uses, what in rows]


def test_the_module_map_is_the_import_graph():
    rows = _module_map()
    documented = {name: uses for name, uses, _ in rows}
    order = [name for name, _, _ in rows]
    modules = _package_modules()
    assert set(documented) == modules, (
        f"the map (docs/architecture.md) lists {sorted(documented)}, package has {sorted(modules)}"
    )
    for name, uses in documented.items():
        path = ROOT / "tpucost" / f"{name.replace('.', '/')}.py"
        actual = _tpucost_imports(path if path.exists() else path.with_suffix("") / "__init__.py")
        assert uses == actual, f"the map says {name} uses {sorted(uses)}; it imports {sorted(actual)}"
        assert all(order.index(u) < order.index(name) for u in uses), f"{name} uses a module listed below it"


def _lines(paths: list[Path]) -> int:
    return sum(len(p.read_text().splitlines()) for p in paths)


def test_the_method_package_is_a_third_of_the_library_and_imports_no_experiment():
    """`tpucost.method` holds the paper's method and nothing else: at most a third of the library's
    lines, and not one import (outside ``if TYPE_CHECKING:``) of `tpucost.experiments`, the CLI or
    the notebooks' solutions."""
    method = sorted((ROOT / "tpucost" / "method").rglob("*.py"))
    library = sorted((ROOT / "tpucost").rglob("*.py"))
    assert 3 * _lines(method) <= _lines(library), (_lines(method), _lines(library))
    for path in method:
        outside = {m for m in _tpucost_imports(path) if not m.startswith("method") and "." not in m}
        outside |= {
            m for m in _tpucost_imports(path) if m.split(".")[0] in ("experiments", "cli", "solutions")
        }
        assert outside <= {"compat", "files", "tpu_host"}, (
            f"{path.relative_to(ROOT)} imports {sorted(outside)}"
        )


def _library_files() -> list[Path]:
    return sorted((ROOT / "tpucost").rglob("*.py"))


def test_modules_stay_small_and_import_at_the_top():
    """No module over 800 lines but the parser; imports at the top of a module (the exceptions: the
    package's lazy `tpucost.CostModel`, `compat`'s guarded import of a private jax module, and
    `keras_apps`' import of the optional Keras, after it has chosen Keras' JAX backend, `tpu_host`'s
    of `compat` once jax is imported (``import tpucost`` imports no jax), and
    `diffrax_models`' of the optional diffrax and Equinox)."""
    import ast

    allowed = {
        ("__init__.py", "tpucost.method.costmodel"),
        ("compat.py", "jax._src"),
        ("keras_apps.py", "keras"),
        ("tpu_host.py", "tpucost.compat"),  # only once jax is imported: `import tpucost` imports no jax
        ("tpu_host.py", "jax"),
    }
    allowed |= {("diffrax_models.py", name) for name in ("diffrax", "equinox")}
    for path in _library_files():
        text = path.read_text()
        if path.name != "hlo.py":
            assert text.count("\n") <= 800, f"{path.relative_to(ROOT)} has {text.count(chr(10))} lines"
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for inner in ast.walk(node):
                    if isinstance(inner, (ast.Import, ast.ImportFrom)):
                        name = getattr(inner, "module", None) or inner.names[0].name
                        assert (path.name, name) in allowed, (
                            f"{path.relative_to(ROOT)}: import of {name} in {node.name}()"
                        )


def test_no_module_uses_another_module_s_private_names():
    import ast

    modules = {p.stem for p in _library_files()} | {"tpucost"}
    for path in _library_files():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tpucost"):
                private = [a.name for a in node.names if a.name.startswith("_")]
                assert not private, f"{path.relative_to(ROOT)} imports {private} from {node.module}"
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and node.value.id in modules
                and node.value.id != path.stem
            ):
                raise AssertionError(f"{path.relative_to(ROOT)} uses {node.value.id}.{node.attr}")


def test_the_library_never_imports_the_lab():
    """`lab` (``python -m lab``, not in the wheel) imports tpucost; no module of tpucost imports lab
    (at any depth, ``if TYPE_CHECKING:`` included), so the wheel works without it."""
    import ast

    for path in _library_files():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            lab = [n for n in names if n == "lab" or n.startswith("lab.")]
            assert not lab, f"{path.relative_to(ROOT)} imports {lab}"


#: The commands of ``python -m tpucost``: those the notebooks, the README and the book send a learner
#: to (the research commands are ``python -m lab``'s).
CLI_COMMANDS = (
    "hlo compile trace collect data train evaluate predict calibrate suggest-tiles measure-tiles autotune"
)


def _subcommands(parser) -> dict:
    """An argparse parser's subcommands, in order: {name: its parser}."""
    import argparse

    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return sub.choices


def test_the_command_line_lists_the_book_s_commands_and_lab_the_others():
    import subprocess
    import sys

    from lab import cli as lab_cli
    from tpucost import cli

    commands = _subcommands(cli.build_parser())
    assert list(commands) == CLI_COMMANDS.split()
    assert list(_subcommands(commands["data"])) == ["stats", "noise", "overhead"]
    lab_commands = _subcommands(lab_cli.build_parser())
    assert list(lab_commands) == [
        "collect-pack",
        "data",
        "tiles-legal",
        "experiment",
        "device",
        "adapt",
        "new-families",
    ]
    assert list(_subcommands(lab_commands["data"])) == [
        "merge",
        "progress",
        "spread",
        "coverage",
        "kernel-overlap",
        "additivity",
        "packs",
    ]
    run = subprocess.run(
        [sys.executable, "-m", "tpucost", "--help"], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert "{" + CLI_COMMANDS.replace(" ", ",") + "}" in run.stdout


def test_make_bench_runs_every_benchmark():
    makefile = (ROOT / "Makefile").read_text()
    assert "for script in benchmarks/*.py" in makefile.split("bench:", 1)[1].split("\n\n", 1)[0]
    assert sorted((ROOT / "benchmarks").glob("*.py")), "benchmarks/ has no scripts"


def required_positionals(source: str) -> list[str]:
    """The positional arguments an argparse script requires: ``add_argument("name", ...)`` calls
    without ``nargs="?"`` or ``nargs="*"``."""
    import ast

    names = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "add_argument"):
            continue
        first = node.args[0] if node.args else None
        if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
            continue
        nargs = {k.arg: k.value for k in node.keywords}.get("nargs")
        optional = isinstance(nargs, ast.Constant) and nargs.value in ("?", "*")
        if not first.value.startswith("-") and not optional:
            names.append(first.value)
    return names


def test_no_benchmark_requires_an_argument():
    """`make bench` runs every script without arguments, so none may require one."""
    assert required_positionals('p.add_argument("merged")\np.add_argument("out", nargs="?")') == ["merged"]
    for script in sorted((ROOT / "benchmarks").glob("*.py")):
        assert required_positionals(script.read_text()) == [], f"{script.name} requires arguments"


def test_code_is_ruff_formatted():
    """`ruff format` was applied once; CI keeps it so (what `ruff format --check` says)."""
    import subprocess
    import sys

    dirs = [str(ROOT / d) for d in ("tpucost", "lab", "tests", "tools", "benchmarks")]
    run = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--check", *dirs], capture_output=True, text=True
    )
    assert run.returncode == 0, run.stdout[-2000:]
