"""Shared fixtures: HLO modules generated from `tpucost.experiments.programs`, and the HLO corpus in ../shared.

Tests that need real HLO text get the generated modules (always there: built from the package's
own program corpus, cached on disk), the GPU and TPU modules of XLA's tests in tests/data/hlo
(always there; `tests/test_hlo.py` reads them), plus, when present, the corpus of HLO files in
../shared/hlo-corpus (``TPUCOST_HLO_CORPUS`` overrides that path; point it at a missing folder
to see what a clean clone sees). No test depends on ../shared being there.
"""

from __future__ import annotations

import contextlib
import csv
import fcntl
import gzip
import hashlib
import json
import os
import resource
import time
from pathlib import Path

import numpy as np
import program_hlo
import pytest

from tpucost.experiments import kernel_experiments
from tpucost.method import features
from tpucost.method.hlo import split_modules

CORPUS = Path(
    os.environ.get("TPUCOST_HLO_CORPUS")
    or Path(__file__).resolve().parents[1].parent / "shared" / "hlo-corpus"
)


#: A kernel this long or longer is a "large" kernel of the bundled noise file: the threshold of its
#: ``p90_rel_ge5us`` (`tpucost.experiments.data.kernel_collection.measure_noise`).
LARGE_KERNEL_NS = 5_000.0


def _label_noise_p90(min_ns: float = 0.0) -> float:
    """The 90th-percentile relative difference between two measurements of one kernel in the
    bundled data set (its noise.json, written by `python -m tpucost data noise`), over the
    re-measured kernels whose stored label is at least ``min_ns``: computed from the file's rows."""
    from tpucost.experiments.data import kernel as kernel_data

    path = kernel_data.default_data_dir() / "noise.json"
    rows = json.loads(path.read_text())["rows"]
    rel = [row["rel_diff"] for row in rows if row["stored_ns"] >= min_ns]
    assert len(rel) >= 20, f"{path}: only {len(rel)} re-measured kernels of {min_ns:.0f} ns or more"
    return float(np.quantile(rel, 0.9))


#: The noise allowance of a test that compares measured times of kernels of every size (marked
#: ``quiet``): a kernel measured twice differs by up to this fraction nine times in ten (the bundled
#: noise floor, over every re-measured kernel: 22%).
LABEL_NOISE_P90 = _label_noise_p90()
#: The same for kernels of `LARGE_KERNEL_NS` (5 us) or more (18%): the allowance of a test whose
#: kernels are that long (each such test checks that they are).
LABEL_NOISE_P90_LARGE = _label_noise_p90(LARGE_KERNEL_NS)


def corpus_rows() -> list[dict[str, str]]:
    """Rows of the corpus MANIFEST.tsv, or [] when the corpus is not there."""
    manifest = CORPUS / "MANIFEST.tsv"
    if not manifest.exists():
        return []
    with manifest.open() as f:
        return list(csv.DictReader(f, delimiter="\t"))


@pytest.fixture(scope="session")
def corpus() -> list[dict[str, str]]:
    """The corpus manifest rows; [] (no skip) when the corpus is absent."""
    return corpus_rows()


# ---------------------------------------------------------------------------------------------
# HLO modules generated from tpucost.experiments.programs
# ---------------------------------------------------------------------------------------------

PROGRAMS = Path(__file__).resolve().parents[1] / "tpucost" / "experiments" / "programs"
#: Filled by the XLA cross-check in test_hlo.py, printed by `pytest_terminal_summary`.
XLA_CROSS_CHECK: dict[str, int] = {}
GENERATION: dict[str, float | int | str] = {}


def _cache_key() -> str:
    import jax
    import jaxlib

    sources = b"".join(p.read_bytes() for p in sorted(PROGRAMS.glob("*.py")))
    programs = hashlib.sha256(sources).hexdigest()[:16]
    recipe = hashlib.sha256(Path(program_hlo.__file__).read_bytes()).hexdigest()[:8]
    return f"jax{jax.__version__}-jaxlib{jaxlib.__version__}-{jax.default_backend()}-programs{programs}-recipe{recipe}"


def _cpu_seconds() -> float:
    """CPU time of this process and of its finished children."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


@pytest.fixture(scope="session")
def generated_hlo(request: pytest.FixtureRequest) -> list[dict[str, str]]:
    """HLO modules of `tpucost.experiments.programs` (`program_hlo.generate()`: a few hundred records with
    ``label``, ``program_id``, ``form``, ``config``, ``stage``, ``text``), cached under pytest's
    cache dir, keyed by the jax version and hashes of tpucost/experiments/programs/ and program_hlo.py:
    only the first run of a checkout pays for the compiles (about a minute)."""
    cache = getattr(request.config, "cache", None)
    path = cache.mkdir("tpucost-generated-hlo") / f"{_cache_key()}.json.gz" if cache is not None else None
    start, cpu = time.perf_counter(), _cpu_seconds()
    with exclusive(path.with_name("generate.lock")) if path is not None else contextlib.nullcontext():
        records = _read_or_generate(path)
    GENERATION["seconds"] = time.perf_counter() - start
    GENERATION["cpu_seconds"] = _cpu_seconds() - cpu
    GENERATION["modules"] = len(records)
    return records


def _read_or_generate(path: Path | None) -> list[dict[str, str]]:
    """The cached records at ``path`` when readable, else freshly generated (and cached there)."""
    records = None
    if path is not None and path.exists():
        try:
            with gzip.open(path, "rt") as f:
                records = json.load(f)
            GENERATION["source"] = f"read from {path.parent.name}/{path.name}"
        except (OSError, EOFError, ValueError):  # a damaged cache file: generate again
            records = None
    if records is None:
        records = program_hlo.generate()
        GENERATION["source"] = "generated"
        if path is not None:
            for old in path.parent.glob("*.json.gz"):  # keep one version only
                old.unlink(missing_ok=True)
            tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
            with gzip.open(tmp, "wt", compresslevel=6) as f:
                json.dump(records, f)
            tmp.replace(path)
    return records


def corpus_modules(valid_only: bool = True) -> list[tuple[str, str]]:
    """(label, text) of each module of the corpus files (valid ones only by default); [] without it."""
    out = []
    for row in corpus_rows():
        if valid_only and row["expected"] != "valid":
            continue
        for i, text in enumerate(split_modules((CORPUS / row["file"]).read_text())):
            out.append((f"{row['file']}#{i}", text))
    return out


def pytest_sessionfinish(session: pytest.Session) -> None:
    """On a pytest-xdist worker: hand the generation and cross-check counts to the controller,
    which prints the summary (`pytest_testnodedown`)."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["tpucost_generation"] = json.dumps(GENERATION)
        workeroutput["tpucost_cross_check"] = json.dumps(XLA_CROSS_CHECK)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    """On the xdist controller: collect what each worker counted (a worker that generated the
    modules wins over one that read them from the cache; cross-check counts add up)."""
    out = getattr(node, "workeroutput", {})
    generation = json.loads(out.get("tpucost_generation", "{}"))
    if generation and (not GENERATION or generation.get("source") == "generated"):
        GENERATION.clear()
        GENERATION.update(generation)
    for key, count in json.loads(out.get("tpucost_cross_check", "{}")).items():
        XLA_CROSS_CHECK[key] = XLA_CROSS_CHECK.get(key, 0) + count


def pytest_terminal_summary(terminalreporter) -> None:
    """Print how many modules were generated and how many the XLA cross-check compared."""
    if "seconds" in GENERATION:
        terminalreporter.write_line(
            f"Generated HLO modules: {GENERATION['modules']} from tpucost.experiments.programs "
            f"({GENERATION['source']}, {GENERATION['seconds']:.1f} s, CPU {GENERATION['cpu_seconds']:.1f} s)"
        )
    if XLA_CROSS_CHECK:
        g, c = XLA_CROSS_CHECK.get("generated", 0), XLA_CROSS_CHECK.get("corpus", 0)
        b = XLA_CROSS_CHECK.get("bundled", 0)
        where = CORPUS if CORPUS.exists() else f"{CORPUS}: not found"
        terminalreporter.write_line(
            f"XLA parser cross-check: {g + b + c} modules compared ({g} generated from tpucost.experiments.programs, "
            f"{b} GPU and TPU modules of tests/data/hlo, {c} from {where})"
        )


def rand_graph(
    rng: np.random.Generator, n: int, max_opcode: int = len(features.OPCODE_VOCAB)
) -> features.KernelGraph:
    """A random kernel graph: a DAG in topological order (each node consumes up to 2 earlier ones)."""
    senders, receivers = [], []
    for i in range(1, n):
        for j in rng.choice(i, size=min(i, 2), replace=False):
            senders.append(j)
            receivers.append(i)
    return features.KernelGraph(
        opcodes=rng.integers(1, max_opcode, n).astype(np.int32),
        node_features=rng.random((n, features.NUM_NODE_FEATURES)).astype(np.float32),
        senders=np.asarray(senders, np.int32),
        receivers=np.asarray(receivers, np.int32),
        name=f"k{n}",
        kind="loop",
    )


# ---------------------------------------------------------------------------------------------
# One tiny data set collected on this machine, and models trained on it (shared by every test
# that needs them; treat both as read-only)
# ---------------------------------------------------------------------------------------------


@contextlib.contextmanager
def exclusive(lock: Path):
    """Hold an exclusive lock on the file ``lock`` (created if needed): one process at a time."""
    lock.parent.mkdir(parents=True, exist_ok=True)
    with lock.open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def built_once(tmp_path_factory: pytest.TempPathFactory, name: str, build) -> Path:
    """A folder ``name`` that ``build(folder)`` fills once per test run: under pytest-xdist the
    workers share it (the first builds it while the others wait), so a session fixture's work is
    not repeated per worker."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        folder = tmp_path_factory.getbasetemp().parent / name
    else:
        folder = tmp_path_factory.getbasetemp() / name
    with exclusive(folder.with_name(f"{name}.lock")):
        if not (folder / ".built").exists():
            folder.mkdir(parents=True, exist_ok=True)
            build(folder)
            (folder / ".built").touch()
    return folder


@pytest.fixture(scope="session")
def bundled_kernels():
    """The bundled kernel data set, loaded once per test process (a few seconds); never modify it."""
    from tpucost.experiments.data import kernel as kernel_data

    return kernel_data.load_dataset()


@pytest.fixture(scope="session")
def tiny_kernels(tmp_path_factory):
    """Six small programs (mlp, norm_softmax) measured on this CPU, default configuration only."""
    from tpucost.experiments.data import kernel as kernel_data
    from tpucost.experiments.data import kernel_collection

    def build(out: Path) -> None:
        kernel_collection.collect(
            out,
            6,
            0,
            repeats=2,
            configurations=("default",),
            families=("mlp", "norm_softmax"),
            progress=False,
        )

    return kernel_data.load_dataset(built_once(tmp_path_factory, "tiny-kernels", build))


@pytest.fixture(scope="session")
def tiny_trained(tiny_kernels, tmp_path_factory):
    """Every method trained on `tiny_kernels` (random split, `TrainConfig.smoke()`): (model dir, report)."""
    from tpucost.method import train

    def build(out: Path) -> None:
        kernel_experiments.train_models(
            tiny_kernels, "random", out, train.TrainConfig.smoke(), progress=False
        )

    out = built_once(tmp_path_factory, "tiny-models", build)
    return out, json.loads((out / kernel_experiments.EVALUATION_FILE).read_text())


def pytest_collection_modifyitems(config, items) -> None:
    """Tests that time programs are marked ``measures`` (`make check` leaves them out): those
    marked ``quiet``, and those using the tiny data set this machine measures (`tiny_kernels`).
    A test marked ``quiet`` must say ``mark.quiet`` in its file: the Makefile's timing phases
    collect only the files that do (``QUIET_FILES``)."""
    for item in items:
        if item.get_closest_marker("quiet"):
            if "mark.quiet" not in Path(str(item.fspath)).read_text():
                raise pytest.UsageError(f"{item.nodeid} is marked quiet, but its file never says mark.quiet")
            item.add_marker(pytest.mark.measures)
        elif "tiny_kernels" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.measures)


def pytest_configure(config):
    """Tests never read or write the user's cache (rooflines, calibration corrections); each
    xdist worker's one-core processes get a core of their own (``TPUCOST_LABEL_CORE``)."""
    import os
    import tempfile

    if "TPUCOST_CACHE_DIR" not in os.environ:
        os.environ["TPUCOST_CACHE_DIR"] = tempfile.mkdtemp(prefix="tpucost-test-cache-")
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if (
        worker.startswith("gw")
        and "TPUCOST_LABEL_CORE" not in os.environ
        and hasattr(os, "sched_getaffinity")
    ):
        # Processes this worker starts that pin themselves to one core (notebooks, the label-mode
        # benchmark) pin to a core of their own, not to core 0 beside the other worker's.
        allowed = sorted(os.sched_getaffinity(0))
        os.environ["TPUCOST_LABEL_CORE"] = str(allowed[int(worker[2:]) % len(allowed)])


def pretend_another_machine(monkeypatch, cpu_model: str = "Some Other CPU") -> dict:
    """Make `tpucost.method.device.fingerprint` describe another CPU (AVX2 only, another id); returns it."""
    from tpucost.method import device

    other = dict(device.fingerprint(), cpu_model=cpu_model, cpu_isa=["avx2"])
    other["id"] = device._identity_hash(other)
    monkeypatch.setattr(device, "fingerprint", lambda: dict(other))
    return other
