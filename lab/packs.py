"""Device packs: one device's kernel data set, its fingerprint, its noise floor and its descriptor.

A *device pack* is the folder ``python -m tpucost collect`` and ``python -m lab data merge`` write for one device, with
what the rest of the project needs to trust and use its labels:

====================  ===========================================================================
file                  what it holds
====================  ===========================================================================
``schema.json``       the data set's format, kernel count and shard list (`kernel_data`)
``kernels-*.npz``     the kernel records (deduplicated, one label each)
``log.jsonl``         the collection's log (one line per measured program and configuration)
``device.json``       the device fingerprint (`tpucost.method.device.fingerprint`; its ``id``
                      names the pack)
``noise.json``        the noise floor (``python -m tpucost data noise``), see below
``descriptor.json``   the device descriptor (`lab.descriptor`); optional until measured
``pack.json``         optional: the counts below, cached so that listing skips loading the kernels
====================  ===========================================================================

``noise.json`` has one of two forms. The single form is what `kernel_collection.measure_noise`
writes: one measurement, with ``median_rel_ge5us``, ``p90_rel_ge5us`` (the median and 90th
percentile of ``|remeasured - stored| / stored`` over the re-measured kernels of at least 5 us),
``n_ge5us`` (how many there were) and the per-kernel ``rows``. The start-and-end form is an
object ``{"start": {...}, "end": {...}}`` whose entries each have the single form's fields: the
noise floor measured before and after a collection. The pack's noise is the worse of the two
(`read_noise`).

The noise gate (:data:`GATE`, issue 40) admits a pack into training and headline figures when,
over at least 20 re-measured kernels of 5 us or longer, the median relative difference is at most
5% and the 90th percentile at most 25%; a pack that misses it is kept and listed, with
``passes_gate`` false.

The first pack is the bundled data set ``tpucost/bundled/kernels_cpu/`` (it keeps that path);
later ones are bundled as ``tpucost/bundled/packs/<device_id>/`` (`bundled_packs`).
``python -m lab data packs [--json]`` lists them (`list_packs`). A device has one pack
(`check_one_pack_per_device`). Measurements that are to join a device's existing pack when it is
next rebuilt (its models retrained with it) are collected in ``lab/pending/<device_id>/``
(`PENDING_DIR`): in the repository, committed as they are measured, but not a pack (not listed,
not read by any model) and, like all of the lab, not in the wheel.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from lab.descriptor import DESCRIPTOR_FILE, read_descriptor
from tpucost.experiments.data import collection
from tpucost.experiments.data import kernel as kernel_data
from tpucost.experiments.programs.families import WRITTEN_BY_OTHERS
from tpucost.files import bundled_dir, read_json_object, write_json_atomic

__all__ = [
    "NoiseGate",
    "GATE",
    "PACKS_DIR",
    "PENDING_DIR",
    "PACK_FILE",
    "NOISE_MEASUREMENTS",
    "PackNoise",
    "PackSummary",
    "read_noise",
    "passes_gate",
    "pack_counts",
    "write_pack_file",
    "bundled_packs",
    "summarize_pack",
    "list_packs",
    "pack_device_id",
    "check_one_pack_per_device",
    "is_pack_folder",
    "bundled_pack_of",
]

#: Folder under `tpucost.files.bundled_dir()` of the packs after the first: ``packs/<device_id>/``.
PACKS_DIR = "packs"
#: The folder of measurements waiting to join a device's pack (``lab/pending/<device_id>/``).
PENDING_DIR = Path(__file__).resolve().parent / "pending"
#: The cached counts of a pack (`write_pack_file`).
PACK_FILE = "pack.json"
#: The entries of a start-and-end ``noise.json``, in the order they are measured.
NOISE_MEASUREMENTS: tuple[str, ...] = ("start", "end")
#: ``measurement`` of a noise floor read from a single-form ``noise.json``.
SINGLE = "single"
PACK_FORMAT = "tpucost-pack-counts"
PACK_FORMAT_VERSION = 1
#: A pack folder's subfolder that never ships (the wheel leaves collect parts out).
PARTS = "parts"


@dataclasses.dataclass(frozen=True)
class NoiseGate:
    """The noise gate a pack must pass to be trained on and counted in headline figures.

    Attributes:
      min_ns: the gate looks at re-measured kernels of at least this label (5 us), the
      ``*_ge5us`` fields of ``noise.json``.
      max_median_rel: the largest median relative difference that passes (5%).
      max_p90_rel: the largest 90th-percentile relative difference that passes (25%).
      min_kernels: the fewest re-measured kernels of at least ``min_ns`` that a verdict needs (20).
    """

    min_ns: float = 5_000.0
    max_median_rel: float = 0.05
    max_p90_rel: float = 0.25
    min_kernels: int = 20


#: The noise gate of issue 40: kernels >= 5 us, median <= 5%, p90 <= 25%, over >= 20 kernels.
GATE = NoiseGate()


@dataclasses.dataclass(frozen=True)
class PackNoise:
    """A pack's noise floor over its re-measured kernels of at least 5 us.

    Attributes:
      median_rel_ge5us: median relative difference (None when no kernel was that long).
      p90_rel_ge5us: its 90th percentile (None likewise).
      n_ge5us: the sample size: re-measured kernels of at least 5 us.
      measurement: which measurement these figures are: ``"single"`` (the single form), or
      ``"start"`` / ``"end"`` (the worse of the start-and-end form).
    """

    median_rel_ge5us: float | None
    p90_rel_ge5us: float | None
    n_ge5us: int
    measurement: str


@dataclasses.dataclass(frozen=True)
class PackSummary:
    """What ``python -m lab data packs`` lists for one pack (`summarize_pack`).

    Attributes:
      device_id: the device fingerprint's ``id``.
      kernels: distinct kernels.
      kernels_by_others: distinct kernels that ran in at least one program of a family written by
      others (`tpucost.experiments.programs.WRITTEN_BY_OTHERS`).
      noise: the noise floor (None without ``noise.json``).
      passes_gate: whether ``noise`` passes :data:`GATE`.
      path: the pack's folder.
      cpu_model: the fingerprint's CPU model.
      cpu_isa: its vector extensions.
      jaxlib: the jaxlib that measured the pack.
      label_mode: how the labels were measured (one kernel at a time on one core, or all cores).
      has_descriptor: whether the pack has its device descriptor.
      families: distinct program families the kernels ran in.
      programs: distinct programs.
      size_bytes: bytes of the files a wheel carries (the folder, ``parts/`` aside).
    """

    device_id: str
    kernels: int
    kernels_by_others: int
    noise: PackNoise | None
    passes_gate: bool
    path: Path
    cpu_model: str | None
    cpu_isa: list[str]
    jaxlib: str | None
    label_mode: str | None
    has_descriptor: bool
    families: int
    programs: int
    size_bytes: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the fields in order, ``path`` as a string, ``noise`` as an object or null."""
        out = dataclasses.asdict(self)
        out["path"] = str(self.path)
        return out


# ------------------------------------------------------------------------------------- noise


def _rate(where: str, entry: Mapping[str, Any], field: str) -> float | None:
    value = entry.get(field)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{where}{field}': expected a number >= 0 or null, got {value!r}")
    return float(value)


def _noise_entry(path: Path, prefix: str, entry: Any, measurement: str) -> PackNoise:
    where = f"{path}: field '{prefix}"
    if not isinstance(entry, Mapping):
        raise ValueError(f"{where.rstrip('.')}': expected an object, got {type(entry).__name__}")
    n = entry.get("n_ge5us")
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"{where}n_ge5us': expected a count >= 0, got {n!r}")
    median, p90 = _rate(where, entry, "median_rel_ge5us"), _rate(where, entry, "p90_rel_ge5us")
    if n > 0 and (median is None or p90 is None):
        raise ValueError(f"{where}median_rel_ge5us' / 'p90_rel_ge5us': null although n_ge5us is {n}")
    return PackNoise(median, p90, n, measurement)


def _gate_ratio(noise: PackNoise, gate: NoiseGate) -> float:
    """How far a noise floor is from ``gate``'s limits (<= 1 passes; inf without enough kernels)."""
    if noise.median_rel_ge5us is None or noise.p90_rel_ge5us is None or noise.n_ge5us < gate.min_kernels:
        return math.inf
    return max(noise.median_rel_ge5us / gate.max_median_rel, noise.p90_rel_ge5us / gate.max_p90_rel)


def read_noise(folder: str | os.PathLike, gate: NoiseGate = GATE) -> PackNoise | None:
    """The noise floor in a pack's ``noise.json``, None when the pack has none.

    A single-form file gives its one measurement (``measurement="single"``). A start-and-end file
    gives the worse of its ``start`` and ``end`` entries (those present): the one furthest from
    ``gate``'s limits, so that the pack passes the gate only if every measurement does.

    Raises:
      ValueError: the file is not a JSON object, or a field is missing or malformed (the message
      names the file and the field).
    """
    path = Path(folder) / kernel_data.NOISE_FILE
    if not path.exists():
        return None
    value = read_json_object(path, "noise floor")
    if not any(m in value for m in NOISE_MEASUREMENTS):
        return _noise_entry(path, "", value, SINGLE)
    measured = [_noise_entry(path, f"{m}.", value[m], m) for m in NOISE_MEASUREMENTS if m in value]
    return max(measured, key=lambda noise: _gate_ratio(noise, gate))


def passes_gate(noise: PackNoise | None, gate: NoiseGate = GATE) -> bool:
    """Whether a noise floor passes ``gate``: kernels of at least 5 us within 5% at the median and
    25% at the 90th percentile, over at least 20 of them. No noise floor (None) never passes."""
    return noise is not None and _gate_ratio(noise, gate) <= 1.0


# ------------------------------------------------------------------------------------ counts


def pack_counts(ds: kernel_data.KernelDataset) -> dict[str, int]:
    """A data set's counts: ``kernels`` (distinct), ``kernels_by_others`` (those that ran in at
    least one program of a family of `WRITTEN_BY_OTHERS`, over every source of each kernel),
    ``families`` and ``programs`` (distinct, over all sources)."""
    by_others = np.isin(ds.source_family.astype(str), WRITTEN_BY_OTHERS)
    return {
        "kernels": len(ds),
        "kernels_by_others": int(len(np.unique(ds.source_kernel[by_others]))),
        "families": int(len(np.unique(ds.source_family))),
        "programs": int(len(np.unique(ds.source_program_id))),
    }


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class _Schema(NamedTuple):
    """What a pack's listing reads from ``schema.json``: shard files, kernel count, device id."""

    shards: list[str]
    kernels: int
    device_id: str | None


def _read_schema(folder: Path) -> _Schema:
    """``schema.json``'s shard files, kernel count and device id; ValueError naming a bad field."""
    path = folder / kernel_data.SCHEMA_FILE
    if not path.is_file():
        raise ValueError(f"{path}: missing (not a kernel data set, so not a pack)")
    schema = read_json_object(path, "kernel data schema")
    shards, kernels, device = schema.get("shards"), schema.get("kernels"), schema.get("device")
    if not isinstance(shards, list) or not all(
        isinstance(s, Mapping) and isinstance(s.get("file"), str) for s in shards
    ):
        raise ValueError(f"{path}: field 'shards': expected a list of objects with a 'file', got {shards!r}")
    if isinstance(kernels, bool) or not isinstance(kernels, int) or kernels < 0:
        raise ValueError(f"{path}: field 'kernels': expected a count >= 0, got {kernels!r}")
    device_id = device.get("id") if isinstance(device, Mapping) else None
    return _Schema([s["file"] for s in shards], kernels, device_id)


def _fingerprint(folder: Path, shards: Sequence[str]) -> dict[str, str]:
    """Each shard's sha256: what the cached counts were computed from."""
    for name in shards:
        if not (folder / name).is_file():
            raise ValueError(
                f"{folder / kernel_data.SCHEMA_FILE}: field 'shards': {folder / name} is missing"
            )
    return {name: _sha256(folder / name) for name in shards}


def write_pack_file(folder: str | os.PathLike) -> Path:
    """Compute a pack's counts (`pack_counts`, loading its kernels) and cache them in its
    ``pack.json``, with the shards' sha256 and the families counted as written by others, so that
    `summarize_pack` reuses them only while both still hold. Returns the file's path."""
    folder = Path(folder)
    counts = pack_counts(kernel_data.load_dataset(folder))
    return write_json_atomic(
        folder / PACK_FILE,
        {
            "format": PACK_FORMAT,
            "format_version": PACK_FORMAT_VERSION,
            **counts,
            "written_by_others": list(WRITTEN_BY_OTHERS),
            "shards": _fingerprint(folder, _read_schema(folder).shards),
            "command": f"python -m lab data packs --write {folder}",
        },
    )


def _cached_counts(folder: Path, shards: Sequence[str]) -> dict[str, int] | None:
    """The counts in ``pack.json`` when they were computed from these shards with today's
    `WRITTEN_BY_OTHERS`; None when there is no such file or it is stale."""
    path = folder / PACK_FILE
    if not path.exists():
        return None
    cached = read_json_object(path, "pack counts")
    if cached.get("format") != PACK_FORMAT or cached.get("format_version") != PACK_FORMAT_VERSION:
        raise ValueError(
            f"{path}: field 'format': {cached.get('format')!r} version {cached.get('format_version')!r}, "
            f"expected {PACK_FORMAT!r} version {PACK_FORMAT_VERSION}"
        )
    if cached.get("written_by_others") != list(WRITTEN_BY_OTHERS) or cached.get("shards") != _fingerprint(
        folder, shards
    ):
        return None
    counts = {}
    for field in ("kernels", "kernels_by_others", "families", "programs"):
        value = cached.get(field)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{path}: field {field!r}: expected a count >= 0, got {value!r}")
        counts[field] = value
    return counts


# ------------------------------------------------------------------------------------- packs


def bundled_packs() -> list[Path]:
    """The bundled packs' folders: the first pack ``kernels_cpu`` first, then ``packs/<device_id>/``
    sorted by name; each only if it holds a data set (``schema.json``)."""
    root = bundled_dir()
    later = (
        sorted(p for p in (root / PACKS_DIR).glob("*") if p.is_dir()) if (root / PACKS_DIR).is_dir() else []
    )
    return [p for p in (root / kernel_data.BUNDLED_NAME, *later) if (p / kernel_data.SCHEMA_FILE).is_file()]


def _device(folder: Path, schema_device_id: str | None) -> dict[str, Any]:
    path = folder / collection.DEVICE
    if not path.is_file():
        raise ValueError(f"{path}: missing (a device pack records its device fingerprint there)")
    device = read_json_object(path, "device fingerprint")
    if not isinstance(device.get("id"), str) or not device["id"]:
        raise ValueError(f"{path}: field 'id': expected the device id (a string), got {device.get('id')!r}")
    if schema_device_id is not None and schema_device_id != device["id"]:
        raise ValueError(
            f"{path}: field 'id': {device['id']!r}, but {kernel_data.SCHEMA_FILE} names device {schema_device_id!r}"
        )
    isa = device.get("cpu_isa", [])
    if not isinstance(isa, list) or not all(isinstance(x, str) for x in isa):
        raise ValueError(f"{path}: field 'cpu_isa': expected a list of strings, got {isa!r}")
    return device


def _has_descriptor(folder: Path, device_id: str) -> bool:
    """Whether the pack has a descriptor (`lab.descriptor.read_descriptor` validates it)
    of its own device; ValueError naming the file and field otherwise."""
    path = folder / DESCRIPTOR_FILE
    if not path.exists():
        return False
    descriptor = read_descriptor(path)
    if descriptor.device_id != device_id:
        raise ValueError(
            f"{path}: field 'device_id': {descriptor.device_id!r}, but the pack's "
            f"{collection.DEVICE} says {device_id!r}"
        )
    return True


def _size_bytes(folder: Path) -> int:
    return sum(
        f.stat().st_size for f in folder.rglob("*") if f.is_file() and f.relative_to(folder).parts[0] != PARTS
    )


def summarize_pack(folder: str | os.PathLike, use_cache: bool = True) -> PackSummary:
    """One pack's `PackSummary`. The counts come from ``pack.json`` when it matches the shards
    (``use_cache``), else from the loaded data set (seconds for tens of thousands of kernels).

    Raises:
      ValueError: a required file (``schema.json``, ``device.json``, a shard) is missing, or a file
      is malformed; the message names the file and the field.
    """
    folder = Path(folder)
    schema = _read_schema(folder)
    device = _device(folder, schema.device_id)
    counts = _cached_counts(folder, schema.shards) if use_cache else None
    if counts is None:
        try:
            counts = pack_counts(kernel_data.load_dataset(folder))
        except FileNotFoundError as err:
            raise ValueError(str(err)) from err
    if counts["kernels"] != schema.kernels:
        raise ValueError(
            f"{folder / PACK_FILE}: field 'kernels': {counts['kernels']}, "
            f"{kernel_data.SCHEMA_FILE} says {schema.kernels}"
        )
    noise = read_noise(folder)
    return PackSummary(
        device_id=device["id"],
        kernels=counts["kernels"],
        kernels_by_others=counts["kernels_by_others"],
        noise=noise,
        passes_gate=passes_gate(noise),
        path=folder,
        cpu_model=device.get("cpu_model"),
        cpu_isa=list(device.get("cpu_isa", [])),
        jaxlib=device.get("jaxlib"),
        label_mode=device.get("label_mode"),
        has_descriptor=_has_descriptor(folder, device["id"]),
        families=counts["families"],
        programs=counts["programs"],
        size_bytes=_size_bytes(folder),
    )


def list_packs(paths: Sequence[str | os.PathLike] | None = None) -> list[PackSummary]:
    """`summarize_pack` of each folder of ``paths``, or of every bundled pack (`bundled_packs`).

    Raises:
      ValueError: two of the folders hold packs of one device (`check_one_pack_per_device`).
    """
    summaries = [summarize_pack(p) for p in (bundled_packs() if paths is None else paths)]
    check_one_pack_per_device([(Path(s.path), s.device_id) for s in summaries])
    return summaries


def pack_device_id(folder: str | os.PathLike) -> str | None:
    """The device id a pack folder's ``device.json`` records; None without a ``device.json``
    (ValueError when it is malformed)."""
    if not (Path(folder) / collection.DEVICE).is_file():
        return None
    return str(_device(Path(folder), None)["id"])


def check_one_pack_per_device(folders: Sequence[tuple[Path, str | None]]) -> None:
    """Refuse (ValueError, naming both folders) two (folder, device id) pairs of one device: a
    device has one pack, so that a set of packs is a set of devices (leave-one-device-out holds
    out a device, not a folder). A None id (no ``device.json``) is left to the reader's error."""
    seen: dict[str, Path] = {}
    for folder, device_id in folders:
        if device_id is None:
            continue
        if device_id in seen and seen[device_id].resolve() != Path(folder).resolve():
            raise ValueError(
                f"{seen[device_id]} and {folder} are packs of one device ({device_id}): a device has one "
                "pack; merge them into one (`tpucost.experiments.data.kernel_collection.merge`) or leave one out"
            )
        seen[device_id] = Path(folder)


def is_pack_folder(folder: str | os.PathLike) -> bool:
    """Whether ``folder`` is where `bundled_packs` looks for a pack: the first pack's folder, or a
    folder of ``packs/`` in the bundled data."""
    root, target = bundled_dir().resolve(), Path(folder).resolve()
    return target == root / kernel_data.BUNDLED_NAME or target.parent == root / PACKS_DIR


def bundled_pack_of(device_id: str) -> Path | None:
    """The bundled pack of the device ``device_id`` (`bundled_packs`), or None."""
    for folder in bundled_packs():
        if pack_device_id(folder) == device_id:
            return folder
    return None
