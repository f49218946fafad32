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
``calibrate`` and notebook 02 call it first thing. On a TPU or GPU the device already runs one
kernel at a time; pinning the host process there only slows host-side work, so
:func:`pin_to_one_core` is meant for XLA:CPU.

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

import hashlib
import json
import os
import platform
import warnings
from collections.abc import Mapping
from functools import cache
from typing import Any

import jax
import jaxlib

from tpucost.compat import backend_started

__all__ = [
    "LABEL_MODE",
    "IDENTITY_FIELDS",
    "pin_to_one_core",
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


def pin_to_one_core(core: int | None = None) -> int:
    """Pin this process to one core so XLA:CPU runs one kernel at a time (the label mode).

    Call it before the first JAX computation of the process (``import jax`` is fine). Returns
    the core: ``core``, else ``$TPUCOST_LABEL_CORE`` (for processes that measure side by side,
    e.g. the test suite's workers: each on a core of its own), else the first allowed one. A
    process already limited to one core (e.g. started under ``taskset -c 0``) is left as it is.

    Raises:
        RuntimeError: JAX's backend already started on several cores (then XLA's thread pools
            are sized already and pinning would not stop kernels from overlapping), or the
            platform cannot pin (not Linux).
    """
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
        return allowed[0]
    if backend_started():
        raise RuntimeError(
            f"JAX's backend already started on {len(allowed)} cores, so kernels may still overlap: call "
            "tpucost.device.pin_to_one_core() before the first JAX computation (or restart the kernel), "
            "or start Python under `taskset -c 0`"
        )
    chosen = allowed[0] if core is None else core
    if chosen not in allowed:
        raise RuntimeError(f"core {chosen} is not one this process may use ({allowed})")
    os.sched_setaffinity(0, {chosen})
    return chosen


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
