"""Files: atomic writes, JSON and npz read with one-line errors, and where bundled data lives.

Every file tpucost writes goes through `write_atomic` (a temporary file beside the target, synced,
then renamed onto it), so a process killed mid-write leaves the old file or none, never a torn
one. Reading JSON (`read_json`) and npz (`read_npz`, ``allow_pickle=False``: nothing is unpickled)
raises ValueError with one line naming the file, and the field where there is one; so do the
array checks `check_array` (dtype, shape, finite values) and `check_offsets` (ragged offsets).

The bundled data sets, checkpoints and experiments ship inside the package (``tpucost/bundled/``,
found with ``importlib.resources``); ``$TPUCOST_DATA_DIR`` points every default lookup at another
folder laid out the same way (`bundled_dir`). Per-device results (micro-benchmarks, calibration
corrections) are cached under ``$TPUCOST_CACHE_DIR``, else ``~/.cache/tpucost`` (`cache_dir`).
"""

from __future__ import annotations

import importlib.resources
import json
import os
import zipfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any

import numpy as np

__all__ = [
    "DATA_DIR_ENV",
    "CACHE_DIR_ENV",
    "write_atomic",
    "write_text_atomic",
    "write_json_atomic",
    "save_npz_atomic",
    "read_json",
    "read_json_object",
    "read_npz",
    "bundled_dir",
    "missing_bundled_hint",
    "skipped_cell",
    "cache_dir",
    "check_array",
    "check_offsets",
]

#: Environment variable that points the bundled-data lookups at another folder (same layout).
DATA_DIR_ENV = "TPUCOST_DATA_DIR"
#: Environment variable of the per-device cache folder.
CACHE_DIR_ENV = "TPUCOST_CACHE_DIR"


def write_atomic(path: str | os.PathLike, write: Callable[[IO[bytes]], Any]) -> Path:
    """Write a file all at once or not at all: ``write(fh)`` fills a temporary file beside
    ``path`` (opened in binary mode), which is flushed, synced and renamed onto ``path``."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def write_text_atomic(path: str | os.PathLike, text: str) -> Path:
    """`write_atomic` for text (UTF-8)."""
    return write_atomic(path, lambda fh: fh.write(text.encode("utf-8")))


def write_json_atomic(path: str | os.PathLike, value: Any, indent: int = 1) -> Path:
    """`write_atomic` of ``value`` as JSON (with a final newline)."""
    return write_text_atomic(path, json.dumps(value, indent=indent) + "\n")


def save_npz_atomic(path: str | os.PathLike, arrays: Mapping[str, np.ndarray]) -> Path:
    """`write_atomic` of ``arrays`` as a compressed npz."""
    return write_atomic(path, lambda fh: np.savez_compressed(fh, **arrays))


def read_json(path: str | os.PathLike, what: str = "") -> Any:
    """The JSON value in ``path``; ValueError with one line naming the file (and ``what`` it should be)."""
    path = Path(path)
    label = f"{what} {path}" if what else str(path)
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise FileNotFoundError(f"{label}: no such file") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ValueError(f"{label}: cannot read ({err})") from err
    except json.JSONDecodeError as err:
        raise ValueError(f"{label}: not JSON: {err}") from err


def read_json_object(path: str | os.PathLike, what: str = "") -> dict[str, Any]:
    """`read_json` of a file that must hold a JSON object."""
    value = read_json(path, what)
    if not isinstance(value, dict):
        raise ValueError(
            f"{what + ' ' if what else ''}{path}: expected a JSON object, got {type(value).__name__}"
        )
    return value


def read_npz(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """Every array of an npz file, read with ``allow_pickle=False``; ValueError naming the file
    (and the field, for an object array, which would need pickle)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    if not zipfile.is_zipfile(path):
        raise ValueError(f"{path}: not an npz (zip) file")
    out = {}
    try:
        with np.load(path, allow_pickle=False) as z:
            for field in z.files:
                try:
                    out[field] = z[field]
                except ValueError as err:  # object arrays need pickle: refused
                    raise ValueError(f"{path}: field {field!r}: {err}") from err
    except (zipfile.BadZipFile, OSError, EOFError) as err:
        raise ValueError(f"{path}: not a readable npz file: {err}") from err
    return out


def bundled_dir() -> Path:
    """Folder of the bundled data sets, checkpoints and experiments: ``$TPUCOST_DATA_DIR``, else
    the package's ``tpucost/bundled/`` (inside the wheel, so ``pip install`` carries it)."""
    override = os.environ.get(DATA_DIR_ENV)
    if override:
        return Path(override)
    return Path(str(importlib.resources.files("tpucost") / "bundled"))


#: Seconds of the notebooks' cells a workshop can skip (tagged ``long``) in the recorded `make demo`
#: (written by tools/workshop_times.py with docs/results/demo.json).
LONG_CELLS_FILE = "long_cells.json"


def skipped_cell(notebook: str, cell_id: str) -> str:
    """The line a notebook prints for a long cell it skipped: how long the cell took in the recorded
    `make demo`, on which device (``notebook``: ``"03_train_cost_model.ipynb"``, ``cell_id``: the
    cell's id), or that it has no record."""
    try:
        record = read_json_object(bundled_dir() / LONG_CELLS_FILE, "the recorded long cells")
    except (OSError, ValueError):
        record = {"cells": {}}
    seconds = record["cells"].get(f"{notebook}#{cell_id}")
    if seconds is None:
        return "skipped (SKIP_LONG_CELLS = True); this cell has no recorded time"
    return (
        f"skipped (SKIP_LONG_CELLS = True): it took {seconds:.0f} s in the recorded make demo "
        f"({record['started']}, on {record['device']}); set SKIP_LONG_CELLS = False to run it"
    )


def missing_bundled_hint(path: Path) -> str:
    """The sentence a default-path error ends with: where it looked and how to look elsewhere."""
    where = (
        f"${DATA_DIR_ENV}={os.environ[DATA_DIR_ENV]}"
        if os.environ.get(DATA_DIR_ENV)
        else "the installed package"
    )
    return (
        f"(looked in {path}, from {where}; set {DATA_DIR_ENV} to a folder laid out like tpucost/bundled/ "
        f"or pass a path explicitly)"
    )


def cache_dir() -> Path:
    """Where per-device results are cached: ``$TPUCOST_CACHE_DIR``, else ``~/.cache/tpucost``."""
    root = os.environ.get(CACHE_DIR_ENV)
    return Path(root) if root else Path.home() / ".cache" / "tpucost"


def check_array(path: Any, name: str, array: np.ndarray, dtype: str, shape: tuple[int | None, ...]) -> None:
    """``array`` has ``dtype`` and ``shape`` (None: any length there) and, when floating, only
    finite values; else ValueError naming ``path`` and field ``name``.

    ``dtype`` is a numpy code (``"i8"``, ``"f4"``), ``"U"`` (unicode of any width), or dtype kinds
    without a size (``"iu"``: any integer, ``"f"``: any float).
    """
    if dtype == "U" or not any(ch.isdigit() for ch in dtype):
        kinds = dtype
        if array.dtype.kind not in kinds:
            expected = "a unicode string array" if kinds == "U" else f"one of the kinds {kinds!r}"
            raise ValueError(f"{path}: field {name!r}: dtype {array.dtype}, expected {expected}")
    elif array.dtype != np.dtype(dtype):
        raise ValueError(f"{path}: field {name!r}: dtype {array.dtype}, expected {np.dtype(dtype)}")
    if array.ndim != len(shape) or any(
        s is not None and s != a for s, a in zip(shape, array.shape, strict=True)
    ):
        expected = (
            "("
            + ", ".join("n" if s is None else str(s) for s in shape)
            + ("," if len(shape) == 1 else "")
            + ")"
        )
        raise ValueError(f"{path}: field {name!r}: shape {array.shape}, expected {expected}")
    if array.dtype.kind == "f" and array.size and not np.all(np.isfinite(array)):
        raise ValueError(f"{path}: field {name!r}: non-finite values")


def check_offsets(path: Any, name: str, offsets: np.ndarray, count: int, length: int, target: str) -> None:
    """``offsets`` is int64[count + 1], non-decreasing from 0 to ``length`` (that of ``target``)."""
    check_array(path, name, offsets, "i8", (count + 1,))
    if offsets[0] != 0 or np.any(np.diff(offsets) < 0) or offsets[-1] != length:
        raise ValueError(
            f"{path}: field {name!r}: not {count + 1} non-decreasing offsets from 0 to "
            f"len({target}) = {length}"
        )
