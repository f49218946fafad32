"""The device a label was measured on: one-core measurement mode and the device fingerprint.

A runtime label means nothing without its device. Two 2-core hosts that both call themselves
"AMD EPYC" ran the same kernels 3.6x apart, and the machine a job runs on can change from one day
to the next. This module says which device is at hand, in one dictionary that collected parts,
data sets and checkpoints carry, and puts the process in the measurement mode that defines a label.

The label mode: one kernel at a time on one core
------------------------------------------------
On XLA:CPU independent kernels may run at the same time on the intra-op thread pool (two
independent convolutions did), and a per-kernel label then contains its neighbour's time too: the
labels of a program summed to 1.4x its wall time. Pinning the process to ONE core before the CPU
backend starts makes XLA size its thread pools to one core, so kernels run one at a time, as on a
TPU, and the labels add up (1.0x on the same program). :func:`pin_to_one_core` does that; it must
run before the first JAX computation of the process (XLA sizes its pools when the backend starts;
pinning later changes nothing, checked). ``python -m tpucost collect``, ``data noise``,
``calibrate`` and notebooks 02-05 call it first thing. On a TPU or GPU the device already runs one
kernel at a time; pinning the host process there would only slow host-side work (and hand the
"spare" cores to nothing useful), so :func:`pin_to_one_core` pins on XLA:CPU only: it asks
:func:`expected_backend` first and, on an accelerator, leaves the process as it is and returns a
`Pinning` that says so (``not pinned: JAX runs on tpu``).

Which backend JAX will use, decided before it starts
-----------------------------------------------------
:func:`expected_backend` is the one place tpucost decides on which backend this process measures:
``jax.default_backend()`` once JAX's backend started; before, without starting it (starting it
would size XLA:CPU's thread pools, and on a TPU VM take the chip): ``jax_platforms``
(``JAX_PLATFORMS``), else a TPU chip (`tpucost.tpu_host.tpu_chip_here`) with libtpu installed,
else a GPU (``/dev/nvidia<n>`` with a CUDA plugin of JAX, ``/dev/kfd`` with a ROCm one), else the
CPU. The pinning and the autotuner's second processes follow it.

One process on an accelerator
-----------------------------
On a TPU VM only one process may hold the chip: a second process that starts JAX there fails
("TPU is already in use", jax#22070) or falls back to the CPU; on a GPU a second process competes
for the memory. So tpucost starts no second JAX process on an accelerator (the autotuner
re-measures, takes its noise floor and scores in the calling process there, `tpucost.experiments.autotune`),
and every child it starts on XLA:CPU gets :func:`cpu_only_env` (``JAX_PLATFORMS=cpu``) and reports
its backend, which the parent checks (:func:`same_backend`: a mismatch is refused with
`BackendMismatch`).

The fingerprint
---------------
:func:`fingerprint` returns ``{"id", "backend", "device_kind", "device_count", "cpu_model",
"cpu_isa", "cores", "jax", "jaxlib", "label_mode"}``. ``id`` is a short hash of the fields that
name the hardware (:data:`IDENTITY_FIELDS`: backend, device kind, CPU model and ISA): labels are
comparable only when their ids AND label modes are equal. ``cpu_isa`` keeps the vector extensions
that change kernel speed (AVX2, AVX-512, AMX, NEON/SVE, ...); ``cores`` is how many cores this
process may use; ``label_mode`` is :data:`LABEL_MODE` when kernels ran one at a time (one core, or
an accelerator), else ``"all cores"``. Backend-specific facts come only from JAX's device objects.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import json
import os
import platform
import warnings
from collections.abc import Mapping
from functools import cache
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import jax
import jaxlib

from tpucost import tpu_host
from tpucost.compat import backend_started

__all__ = [
    "LABEL_MODE",
    "IDENTITY_FIELDS",
    "expected_backend",
    "backend_before_start",
    "Pinning",
    "pin_to_one_core",
    "cpu_only_env",
    "BackendMismatch",
    "same_backend",
    "usable_cores",
    "cpu_info",
    "fingerprint",
    "describe",
    "differences",
    "warn_once",
]

#: How a label is measured (stored with every fingerprint).
LABEL_MODE = "one kernel at a time on one core"
#: Fields that name the hardware; the fingerprint's ``id`` hashes them.
IDENTITY_FIELDS: tuple[str, ...] = ("backend", "device_kind", "cpu_model", "cpu_isa")
#: CPU flags (as /proc/cpuinfo spells them) that change how fast kernels run.
ISA_FLAGS: tuple[str, ...] = (
    "sse4_2",
    "avx",
    "avx2",
    "fma",
    "f16c",
    "avx512f",
    "avx512bw",
    "avx512vl",
    "avx512_vnni",
    "avx512_bf16",
    "avx512_fp16",
    "amx_tile",
    "amx_bf16",
    "amx_int8",
    "asimd",
    "sve",
    "sve2",
    "bf16",
    "i8mm",
)


_warned: set[str] = set()


def warn_once(message: str, key: str | None = None, stacklevel: int = 2) -> None:
    """A one-line `UserWarning`, once per process for the same ``key`` (default: the message).

    Used for what a user should hear about the device at hand once, not at every call (a model
    trained on another machine, labels measured on several cores). ``stacklevel`` counts from the
    caller of this function, like `warnings.warn`'s.
    """
    key = message if key is None else key
    if key not in _warned:
        _warned.add(key)
        warnings.warn(message, stacklevel=stacklevel + 1)


def usable_cores() -> int:
    """Number of CPU cores this process may run on (its affinity), not the machine's total."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


#: JAX platform names that are one backend here (as `tpucost.method.backends`' aliases).
_PLATFORM_ALIASES = {"cuda": "gpu", "rocm": "gpu"}


def _backend_name(platform_name: str) -> str:
    name = platform_name.strip().lower()
    return _PLATFORM_ALIASES.get(name, name)


def expected_backend() -> str:
    """The backend JAX runs on in this process, or will run on: ``"cpu"``, ``"gpu"`` or ``"tpu"``.

    The one place tpucost decides it. Once JAX's backend started, ``jax.default_backend()``;
    before, `backend_before_start` decides without starting it (see the module docstring)."""
    if backend_started():
        return _backend_name(jax.default_backend())
    return backend_before_start()


def _gpu_plugin_installed(kind: str) -> bool:
    """Whether a JAX plugin for ``kind`` (``"cuda"`` or ``"rocm"``) is installed: a module of the
    ``jax_plugins`` namespace package or an entry point of that group (how JAX finds them)."""
    found: list[str] = []
    try:
        spec = importlib.util.find_spec("jax_plugins")
        for folder in (spec.submodule_search_locations or []) if spec else []:
            found += [p.name for p in Path(folder).iterdir()]
    except (ImportError, OSError, ValueError):
        pass
    try:
        found += [f"{e.name} {e.value}" for e in entry_points(group="jax_plugins")]
    except Exception:  # a broken distribution's metadata must not stop a measurement
        pass
    return any(kind in name.lower() for name in found)


def _gpu_here(dev: Path, kind: str) -> bool:
    if kind == "cuda":
        return any(dev.glob("nvidia[0-9]*"))
    return (dev / "kfd").exists()


def backend_before_start(platforms: str | None = None, dev: Path = Path("/dev")) -> str:
    """The backend JAX will start on, decided without starting it (for `expected_backend`).

    ``platforms``: JAX's ``jax_platforms`` (default: ``jax.config.jax_platforms``, which JAX read
    from ``JAX_PLATFORMS`` at import); when set, its first platform JAX can start (a CUDA one only
    with an NVIDIA device file, as JAX skips it without). Else a TPU chip's device files
    (`tpucost.tpu_host.tpu_chip_here`) with libtpu installed: ``"tpu"``; an NVIDIA GPU
    (``/dev/nvidia<n>``) or an AMD one (``/dev/kfd``) with JAX's CUDA or ROCm plugin: ``"gpu"``;
    else ``"cpu"``. ``dev``: where the device files are (tests pass a folder of their own)."""
    if platforms is None:
        platforms = jax.config.jax_platforms or ""
    listed = [p.strip().lower() for p in platforms.split(",") if p.strip()]
    for name in listed:
        if name in ("cuda", "gpu") and not _gpu_here(dev, "cuda") and not _gpu_here(dev, "rocm"):
            continue  # JAX skips a CUDA platform without a visible NVIDIA GPU
        return _backend_name(name)
    if listed:
        return "cpu"
    if tpu_host.tpu_chip_here(dev) and tpu_host.libtpu_installed():
        return "tpu"
    for kind in ("cuda", "rocm"):
        if _gpu_here(dev, kind) and _gpu_plugin_installed(kind):
            return "gpu"
    return "cpu"


@dataclasses.dataclass(frozen=True)
class Pinning:
    """What `pin_to_one_core` did: ``core`` (None: not pinned) on ``backend``.

    ``str()`` says it in words (``pinned to core 0 (XLA:CPU label mode)``, ``not pinned: JAX runs
    on tpu ...``); ``int()`` is the core (TypeError when not pinned)."""

    core: int | None
    backend: str

    @property
    def pinned(self) -> bool:
        return self.core is not None

    def __index__(self) -> int:
        if self.core is None:
            raise TypeError(f"not pinned (JAX runs on {self.backend}): there is no core")
        return self.core

    __int__ = __index__

    def __str__(self) -> str:
        if self.pinned:
            return f"pinned to core {self.core} (XLA:CPU label mode)"
        return (
            f"not pinned: JAX runs on {self.backend}, which runs one kernel at a time already "
            "(the one-core label mode is for XLA:CPU)"
        )


def pin_to_one_core(core: int | None = None) -> Pinning:
    """Pin this process to one core so XLA:CPU runs one kernel at a time (the label mode); on a
    TPU or GPU, do nothing and say so.

    Call it before the first JAX computation of the process (``import jax`` is fine). It asks
    `expected_backend` first (without starting JAX): on an accelerator it returns
    ``Pinning(None, backend)`` and leaves the process's affinity as it is. On XLA:CPU it pins to
    ``core``, else ``$TPUCOST_LABEL_CORE`` (for processes that measure side by side, e.g. the test
    suite's workers: each on a core of its own), else the first allowed one, and returns
    ``Pinning(core, "cpu")`` (``int()`` of it is the core). A process already limited to one core
    (e.g. started under ``taskset -c 0``) is left as it is. ``print()`` the result to see what
    happened.

    Raises:
        RuntimeError: on XLA:CPU, JAX's backend already started on several cores (then XLA's
            thread pools are sized already and pinning would not stop kernels from overlapping),
            or the platform cannot pin (not Linux).
    """
    backend = expected_backend()
    if backend != "cpu":
        return Pinning(None, backend)
    if not hasattr(os, "sched_setaffinity"):
        raise RuntimeError(
            "pin_to_one_core needs Linux (os.sched_setaffinity); run one program at a time instead"
        )
    allowed = sorted(os.sched_getaffinity(0))
    if core is None and os.environ.get("TPUCOST_LABEL_CORE", "").strip():
        try:
            core = int(os.environ["TPUCOST_LABEL_CORE"])
        except ValueError:
            raise RuntimeError(
                f"TPUCOST_LABEL_CORE={os.environ['TPUCOST_LABEL_CORE']!r} is not a core number ({allowed})"
            ) from None
    if len(allowed) == 1 and core in (None, allowed[0]):
        return Pinning(allowed[0], "cpu")
    if backend_started():
        raise RuntimeError(
            f"JAX's backend already started on {len(allowed)} cores, so kernels may still overlap: call "
            "tpucost.method.device.pin_to_one_core() before the first JAX computation (or restart the kernel), "
            "or start Python under `taskset -c 0`"
        )
    chosen = allowed[0] if core is None else core
    if chosen not in allowed:
        raise RuntimeError(f"core {chosen} is not one this process may use ({allowed})")
    os.sched_setaffinity(0, {chosen})
    return Pinning(chosen, "cpu")


def cpu_only_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a child process of tpucost: this one's, plus ``extra``, with
    ``JAX_PLATFORMS=cpu``, so that the child never starts JAX on an accelerator (on a TPU VM a
    second process must not touch the chip; module docstring)."""
    return {**os.environ, **dict(extra or {}), "JAX_PLATFORMS": "cpu"}


class BackendMismatch(ValueError):
    """Results measured on different backends were to be combined or compared."""


def same_backend(what: str, measured: Mapping[str, str | None]) -> str | None:
    """The one backend that measured everything in ``measured`` (``{"whose result": backend}``;
    None where a result does not record it, e.g. an older report), or `BackendMismatch`, one line
    naming which result ran where. ``what``: what was being combined, for the message."""
    seen = {who: _backend_name(b) for who, b in measured.items() if b}
    if len(set(seen.values())) > 1:
        where = ", ".join(f"{who} on {b}" for who, b in seen.items())
        raise BackendMismatch(
            f"{what}: measured on different backends ({where}); results from different backends cannot "
            "be compared or combined"
        )
    return next(iter(seen.values()), None)


@cache
def cpu_info() -> dict[str, Any]:
    """``{"cpu_model", "cpu_isa"}`` of the host CPU: model name and the speed-relevant ISA flags."""
    model, flags = platform.processor() or platform.machine(), set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip().lower()
                if key in ("model name", "cpu model") and model in (
                    "",
                    platform.machine(),
                    platform.processor(),
                ):
                    model = value.strip()
                elif key in ("flags", "features") and not flags:
                    flags = set(value.split())
    except OSError:
        pass
    return {"cpu_model": model, "cpu_isa": [f for f in ISA_FLAGS if f in flags]}


def fingerprint() -> dict[str, Any]:
    """The device at hand: JAX's default backend and device plus the host CPU (see module doc)."""
    devices = jax.devices()
    fields: dict[str, Any] = {
        "backend": jax.default_backend(),
        "device_kind": str(devices[0].device_kind),
        "device_count": len(devices),
        **cpu_info(),
        "cores": usable_cores(),
        "jax": jax.__version__,
        "jaxlib": jaxlib.__version__,
        "label_mode": LABEL_MODE if usable_cores() == 1 or jax.default_backend() != "cpu" else "all cores",
    }
    return {"id": _identity_hash(fields), **fields}


def _identity_hash(fields: Mapping[str, Any]) -> str:
    blob = json.dumps({k: fields.get(k) for k in IDENTITY_FIELDS}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def differences(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """Where two fingerprints' hardware or label mode differ, as ``"field: a != b"`` strings."""
    return [
        f"{k}: {a.get(k)!r} != {b.get(k)!r}" for k in (*IDENTITY_FIELDS, "label_mode") if a.get(k) != b.get(k)
    ]


def describe(fp: Mapping[str, Any] | None) -> str:
    """One readable line naming a device, e.g. ``cpu 'AMD EPYC 7B13' (avx2,fma), 1 core [3f2a9c01d4e7]``."""
    if not fp:
        return "an unrecorded device"
    isa = ",".join(x for x in fp.get("cpu_isa", []) if x.startswith(("avx", "amx", "sve", "asimd"))) or "-"
    where = (
        f"{fp.get('backend')} {fp.get('cpu_model')!r} ({isa}), {fp.get('cores')} core(s)"
        if fp.get("backend") == "cpu"
        else f"{fp.get('backend')} {fp.get('device_kind')!r} x{fp.get('device_count')}"
    )
    return f"{where}, jax {fp.get('jax')} [{fp.get('id')}]"
