"""The device descriptor: the device at hand as a few numbers a model can read, in under a minute.

A kernel's runtime depends on the device as much as on the kernel. `measure_descriptor` runs
micro-benchmarks on JAX's default device, in whatever mode the process is in (a label-mode process
called `tpucost.method.device.pin_to_one_core` before JAX started; the mode is recorded), and
returns a `DeviceDescriptor`:

* ``peak_f32_flops``, ``peak_bf16_flops``: an ``n x n`` matmul (``2 n^3`` FLOPs, default
  precision), ``n`` growing from 128 until one run takes ``budget_s / 10000`` seconds (0.5-20 ms:
  short runs, whose minimum a busy machine spoils less); the best rate over the sizes tried;
* ``bandwidth_bytes_per_s``: ``y = 0.999 y + 1`` over an f32 buffer that fits the L1, L2 or L3
  cache (half its size) or none (DRAM: four times the largest cache, 64-512 MiB), repeated
  ``r`` times inside one jitted ``fori_loop`` on a donated buffer, so neither dispatch nor
  allocation counts; 8 bytes per element and repetition (read and write), from the slope between
  ``r`` and ``2 r`` repetitions (`_stream_bandwidth`);
* ``transcendentals_per_s``: 32 chained ``exp(-x)`` over an f32 vector, fused into one kernel;
* ``dispatch_ns``: the wall time of a jitted ``x + 1`` on one element (host dispatch included);
* ``cores``, ``cpu_isa``, ``label_mode``, ``device_id``: from `tpucost.method.device.fingerprint`.

Each benchmark times the minimum of repeated runs for its share of ``budget_s`` (about half of
the budget is spent timing; compiling and choosing sizes take a few seconds more). Cache sizes come
from ``/sys/devices/system/cpu/cpu0/cache`` on XLA:CPU (the only backend-specific code), else
32 KiB, 1 MiB and 32 MiB; on a GPU or TPU the cache levels are not measured (None) and DRAM is
the device memory. `load_or_measure` caches the descriptor per device id and label mode under
`tpucost.files.cache_dir`, like `tpucost.method.analytical.measure_roofline`.

The model's input: `DeviceDescriptor.features`
----------------------------------------------
`FEATURE_NAMES` in order: log10 of the throughputs in G/s (GFLOP/s, GB/s, G exp/s), log10 of the
dispatch overhead in microseconds, 0/1 vector-extension flags, log2 of the cores, so that every
value is of order 1. Missing values take documented defaults, so features are always finite: a
bf16 peak of 0 (not measured) reads as the f32 peak, a cache level not measured (None) as the next
larger level's bandwidth (DRAM's), and any other missing or non-positive value as 0.0 (1 G/s, 1 us).
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from tpucost.files import cache_dir, read_json_object, write_json_atomic
from tpucost.method import device
from tpucost.method.analytical import DeviceRoofline
from tpucost.method.measure import wall_time_ns

__all__ = [
    "DESCRIPTOR_FILE",
    "DESCRIPTOR_VERSION",
    "LEVELS",
    "FEATURE_NAMES",
    "DeviceDescriptor",
    "cache_sizes",
    "working_sets",
    "measure_descriptor",
    "descriptor_cache_path",
    "load_or_measure",
    "read_descriptor",
    "write_descriptor",
    "descriptor_table",
    "roofline",
]

#: The most runs one micro-benchmark makes to fill its time share (`_best_time_s`).
MAX_SHARE_RUNS = 10_000
#: The descriptor's file name inside a device pack folder.
DESCRIPTOR_FILE = "descriptor.json"
#: The version of the descriptor's JSON; a cached file of another version is measured again.
DESCRIPTOR_VERSION = 1
#: The memory levels whose streaming bandwidth is measured, smallest first.
LEVELS: tuple[str, ...] = ("L1", "L2", "L3", "DRAM")
#: Cache sizes (bytes) used where the operating system does not say them.
DEFAULT_CACHE_BYTES: dict[str, int] = {"L1": 32 << 10, "L2": 1 << 20, "L3": 32 << 20}
#: Vector-extension flags of the features: feature name -> any of these `device.cpu_info` flags.
ISA_FEATURES: dict[str, tuple[str, ...]] = {
    "isa_avx2": ("avx2",),
    "isa_fma": ("fma",),
    "isa_avx512f": ("avx512f",),
    "isa_avx512_bf16": ("avx512_bf16",),
    "isa_amx": ("amx_tile", "amx_bf16", "amx_int8"),
    "isa_neon": ("asimd",),
    "isa_sve": ("sve", "sve2"),
}
#: Names of `DeviceDescriptor.features`, in order.
FEATURE_NAMES: tuple[str, ...] = (
    "log10_peak_f32_gflops",
    "log10_peak_bf16_gflops",
    *(f"log10_bandwidth_{level.lower()}_gbytes" for level in LEVELS),
    "log10_exp_per_ns",
    "log10_dispatch_us",
    *ISA_FEATURES,
    "log2_cores",
)

_MATMUL_SIZES = (128, 256, 512, 1024, 2048, 4096, 8192)
_EXP_SIZES = tuple(2**k for k in range(12, 27, 2))
_EXP_CHAIN = 32
_DRAM_BYTES = (64 << 20, 512 << 20)  # DRAM working set: 4 x the largest cache, within these bounds
_STREAM_START_BYTES = 1 << 20  # bytes moved by the first repetition count tried
_SHARES = {"dispatch": 0.03, "matmul": 0.09, "exp": 0.07, "stream": 0.05}  # of budget_s, timing


@dataclasses.dataclass(frozen=True)
class DeviceDescriptor:
    """One device's micro-benchmarked throughputs (per second) and what its fingerprint says.

    ``bandwidth_bytes_per_s`` and ``working_set_bytes`` have the keys of `LEVELS`; a level not
    measured (no such cache, or an accelerator) holds None. ``cache_bytes`` is the cache sizes
    the working sets were chosen from (keys L1-L3). A throughput of 0.0 was not measured.
    """

    device_id: str
    backend: str
    cores: int
    cpu_isa: tuple[str, ...]
    peak_f32_flops: float
    peak_bf16_flops: float
    bandwidth_bytes_per_s: dict[str, float | None]
    transcendentals_per_s: float
    dispatch_ns: float
    label_mode: str
    seconds: float
    device_kind: str = ""
    cpu_model: str = ""
    cache_bytes: dict[str, int | None] = dataclasses.field(default_factory=dict)
    working_set_bytes: dict[str, int | None] = dataclasses.field(default_factory=dict)
    jax_version: str = ""

    def features(self) -> np.ndarray:
        """float32[len(FEATURE_NAMES)]: what a model reads (module docstring: order, scale, defaults)."""
        f32 = _log10_or_zero(self.peak_f32_flops * 1e-9)
        bf16 = _log10_or_zero(self.peak_bf16_flops * 1e-9) if _positive(self.peak_bf16_flops) else f32
        bandwidth: list[float] = []
        fallback = 0.0
        for level in reversed(LEVELS):  # a missing level reads as the next larger one
            value = self.bandwidth_bytes_per_s.get(level)
            fallback = _log10_or_zero(value * 1e-9) if _positive(value) else fallback
            bandwidth.insert(0, fallback)
        isa = set(self.cpu_isa)
        flags = [float(bool(isa & set(names))) for names in ISA_FEATURES.values()]
        values = [
            f32,
            bf16,
            *bandwidth,
            _log10_or_zero(self.transcendentals_per_s * 1e-9),
            _log10_or_zero(self.dispatch_ns * 1e-3),
            *flags,
            math.log2(max(1, self.cores)),
        ]
        return np.asarray(values, dtype=np.float32)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (with ``version``); `from_dict` reads it back."""
        return {"version": DESCRIPTOR_VERSION, **dataclasses.asdict(self), "cpu_isa": list(self.cpu_isa)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], source: str = "<descriptor>") -> DeviceDescriptor:
        """The descriptor in ``d``; ValueError naming ``source`` and the field on bad input."""
        if not isinstance(d, Mapping):
            raise ValueError(f"{source}: expected a JSON object, got {type(d).__name__}")
        version = d.get("version", DESCRIPTOR_VERSION)
        if version != DESCRIPTOR_VERSION:
            raise ValueError(f"{source}: field 'version': {version!r}, expected {DESCRIPTOR_VERSION}")
        fields = _Fields(d, source)
        return cls(
            device_id=fields.text("device_id"),
            backend=fields.text("backend"),
            cores=fields.count("cores"),
            cpu_isa=fields.texts("cpu_isa"),
            peak_f32_flops=fields.number("peak_f32_flops"),
            peak_bf16_flops=fields.number("peak_bf16_flops"),
            bandwidth_bytes_per_s=fields.levels("bandwidth_bytes_per_s", LEVELS, float),
            transcendentals_per_s=fields.number("transcendentals_per_s"),
            dispatch_ns=fields.number("dispatch_ns"),
            label_mode=fields.text("label_mode"),
            seconds=fields.number("seconds"),
            device_kind=fields.text("device_kind", ""),
            cpu_model=fields.text("cpu_model", ""),
            cache_bytes=fields.levels("cache_bytes", LEVELS[:3], int, required=False),
            working_set_bytes=fields.levels("working_set_bytes", LEVELS, int, required=False),
            jax_version=fields.text("jax_version", ""),
        )


def _positive(value: float | None) -> bool:
    return value is not None and math.isfinite(value) and value > 0


def _log10_or_zero(value: float | None) -> float:
    return math.log10(value) if _positive(value) else 0.0


class _Fields:
    """Typed reads of a descriptor's JSON fields, each failing with ``SOURCE: field 'NAME': ...``."""

    def __init__(self, d: Mapping[str, Any], source: str):
        self.d, self.source = d, source

    def _bad(self, name: str, why: str) -> ValueError:
        return ValueError(f"{self.source}: field {name!r}: {why}")

    def _get(self, name: str, default: Any = None) -> Any:
        if name not in self.d:
            if default is None:
                raise self._bad(name, "missing")
            return default
        return self.d[name]

    def text(self, name: str, default: str | None = None) -> str:
        value = self._get(name, default)
        if not isinstance(value, str):
            raise self._bad(name, f"{value!r} is not a string")
        return value

    def texts(self, name: str) -> tuple[str, ...]:
        value = self._get(name)
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            raise self._bad(name, f"{value!r} is not a list of strings")
        return tuple(value)

    def count(self, name: str) -> int:
        value = self._get(name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise self._bad(name, f"{value!r} is not a positive integer")
        return value

    def number(self, name: str, value: Any = None) -> float:
        value = self._get(name) if value is None else value
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
            or value < 0
        ):
            raise self._bad(name, f"{value!r} is not a finite number >= 0")
        return float(value)

    def levels(self, name: str, keys: Sequence[str], kind: type, required: bool = True) -> dict[str, Any]:
        value = self._get(name, None if required else {})
        if not isinstance(value, Mapping) or ((value or required) and set(value) != set(keys)):
            raise self._bad(name, f"{value!r} is not an object with the keys {list(keys)}")
        out: dict[str, Any] = {}
        for key in keys if value else ():
            item = value[key]
            if item is not None:
                item = self.number(f"{name}.{key}", item)
                item = int(item) if kind is int else item
            out[key] = item
        if required and out.get("DRAM", 0) is None:
            raise self._bad(f"{name}.DRAM", "missing (null)")
        return out


# ---------------------------------------------------------------------------------------------
# Cache sizes and working sets
# ---------------------------------------------------------------------------------------------


def _size_bytes(text: str) -> int | None:
    match = re.fullmatch(r"\s*(\d+)\s*([KMG]?)i?B?\s*", text, flags=re.IGNORECASE)
    if not match:
        return None
    scale = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[match.group(2).upper()]
    return int(match.group(1)) * scale


def cache_sizes(root: str | os.PathLike = "/sys/devices/system/cpu/cpu0/cache") -> dict[str, int | None]:
    """``{"L1", "L2", "L3"}`` -> bytes of CPU 0's data (or unified) caches, read from ``root``;
    `DEFAULT_CACHE_BYTES` when ``root`` says nothing, None for a level it does not list."""
    found: dict[str, int | None] = {}
    for index in sorted(Path(root).glob("index*")):
        try:
            level = int((index / "level").read_text())
            kind = (index / "type").read_text().strip()
            size = _size_bytes((index / "size").read_text())
        except (OSError, ValueError):
            continue
        if kind != "Instruction" and 1 <= level <= 3 and size:
            found[f"L{level}"] = max(size, found.get(f"L{level}") or 0)
    if not found:
        return dict(DEFAULT_CACHE_BYTES)
    return {level: found.get(level) for level in LEVELS[:3]}


def working_sets(caches: Mapping[str, int | None]) -> dict[str, int | None]:
    """Bytes of the buffer streamed per level: half of each cache (None for a cache not there),
    and four times the largest cache for DRAM (64-512 MiB; 512 MiB with no cache known); each a
    multiple of 512 bytes (128 float32 elements)."""
    sizes: dict[str, int | None] = {level: (caches.get(level) or 0) // 2 or None for level in LEVELS[:3]}
    largest = max((c for c in caches.values() if c), default=0)
    sizes["DRAM"] = min(max(4 * largest, _DRAM_BYTES[0]), _DRAM_BYTES[1]) if largest else _DRAM_BYTES[1]
    return {k: None if v is None else max(512, v // 512 * 512) for k, v in sizes.items()}


# ---------------------------------------------------------------------------------------------
# Micro-benchmarks
# ---------------------------------------------------------------------------------------------


@dataclasses.dataclass
class _Budget:
    """How long each benchmark may time: shares of ``budget_s``, and the run length sizes grow to."""

    budget_s: float
    start: float = dataclasses.field(default_factory=time.perf_counter)

    @property
    def min_run_s(self) -> float:
        return min(max(self.budget_s / 10_000, 5e-4), 0.02)

    def share(self, name: str) -> float:
        return _SHARES[name] * self.budget_s

    def late(self) -> bool:
        return time.perf_counter() - self.start > 0.75 * self.budget_s


def _best_time_s(
    fn: Callable, args: Sequence[Any], share_s: float, min_runs: int = 3, warmup: int = 1
) -> float:
    """Minimum wall time (s) of ``fn(*args)`` over runs for ``share_s`` seconds (at least ``min_runs``,
    at most `MAX_SHARE_RUNS`), after ``warmup`` untimed runs."""
    if warmup:
        wall_time_ns(fn, *args, repeats=warmup)
    start = time.perf_counter()
    best, runs = min(wall_time_ns(fn, *args, repeats=min_runs)), min_runs
    while time.perf_counter() - start < share_s and runs < MAX_SHARE_RUNS:
        best = min(best, wall_time_ns(fn, *args, repeats=1)[0])
        runs += 1
    return 1e-9 * float(best)


def _peak_rate(
    make: Callable[[int], tuple[Callable, tuple, float]],
    sizes: Sequence[int],
    budget: _Budget,
    share_s: float,
    overhead_s: float,
) -> float:
    """The best work/s over growing sizes, up to the first whose run takes ``budget.min_run_s``
    (or the largest, or the last before time runs short); that one is timed for ``share_s``."""
    best = 0.0
    for i, size in enumerate(sizes):
        fn, args, work = make(size)
        t = _best_time_s(fn, args, 0.0)
        last = t >= budget.min_run_s or i == len(sizes) - 1 or budget.late()
        if last:
            t = min(t, _best_time_s(fn, args, share_s, warmup=0))
        best = max(best, work / max(t - overhead_s, 0.5 * t))
        if last:
            break
    return best


def _matmul(dtype: Any) -> Callable[[int], tuple[Callable, tuple, float]]:
    def make(n: int) -> tuple[Callable, tuple, float]:
        a = jnp.asarray(np.random.default_rng(0).standard_normal((n, n), dtype=np.float32), dtype=dtype)
        return jax.jit(lambda x, y: x @ y), (a, a), 2.0 * n**3

    return make


def _exp_chain(x: jax.Array) -> jax.Array:
    for _ in range(_EXP_CHAIN):  # stays in (0, 1]: no inf/nan fast paths
        x = jnp.exp(-x)
    return x


def _make_exp(n: int) -> tuple[Callable, tuple, float]:
    return jax.jit(_exp_chain), (jnp.linspace(0.0, 1.0, n, dtype=jnp.float32),), float(_EXP_CHAIN * n)


def _stream_loop(x: jax.Array, reps: jax.Array) -> jax.Array:
    return jax.lax.fori_loop(0, reps, lambda _, y: y * 0.999 + 1.0, x)


def _run_donated(stream: Callable, x: jax.Array, reps: int) -> tuple[jax.Array, float]:
    """One run of the stream on its own output (the input buffer is donated): (new buffer, seconds)."""
    start = time.perf_counter()
    x = jax.block_until_ready(stream(x, np.int32(reps)))
    return x, time.perf_counter() - start


def _stream_bandwidth(nbytes: int, budget: _Budget, dispatch_s: float) -> float:
    """Bytes/s of the in-place stream over ``nbytes`` bytes (8 per element and repetition).

    The buffer is donated, so no run allocates. ``r`` repetitions (at least 4, doubled until a
    run takes ``budget.min_run_s``) and ``2 r`` alternate; the time of one repetition is the slope
    between their minimum times, kept between ``(t_r - dispatch) / (r + 1)`` (a run that also copies
    the input once) and ``t_r / r`` (no fixed cost at all), so that noise cannot make it absurd."""
    stream = jax.jit(_stream_loop, donate_argnums=0)
    x = jnp.zeros((nbytes // 4,), jnp.float32)
    reps = max(4, math.ceil(_STREAM_START_BYTES / (2 * nbytes)))
    x, _ = _run_donated(stream, x, reps)  # compiles
    x, t1 = _run_donated(stream, x, reps)
    while t1 < budget.min_run_s and not budget.late() and reps < 2**28:
        reps *= 2
        x, t1 = _run_donated(stream, x, reps)
    t2, runs, start = math.inf, 0, time.perf_counter()
    while runs < 3 or (time.perf_counter() - start < budget.share("stream") and runs < 10_000):
        x, a = _run_donated(stream, x, reps)
        x, b = _run_donated(stream, x, 2 * reps)
        t1, t2, runs = min(t1, a), min(t2, b), runs + 1
    per_rep = min(max((t2 - t1) / reps, (t1 - dispatch_s) / (reps + 1)), t1 / reps)
    return 2.0 * nbytes / per_rep


def measure_descriptor(budget_s: float = 60.0) -> DeviceDescriptor:
    """Measure the `DeviceDescriptor` of JAX's default device now, in this process's mode.

    Spends about half of ``budget_s`` timing (module docstring), plus compiling; ``seconds``
    says how long it took. Nothing is cached: `load_or_measure` caches.
    """
    budget = _Budget(budget_s)
    fp = device.fingerprint()
    backend = fp["backend"]
    caches = cache_sizes() if backend == "cpu" else dict.fromkeys(LEVELS[:3])
    sets = working_sets(caches)
    tiny = jax.jit(lambda x: x + 1.0)
    dispatch_s = _best_time_s(tiny, (jnp.zeros((1,), jnp.float32),), budget.share("dispatch"), min_runs=20)
    share = budget.share("matmul")
    f32 = _peak_rate(_matmul(jnp.float32), _MATMUL_SIZES, budget, share, dispatch_s)
    try:
        bf16 = _peak_rate(_matmul(jnp.bfloat16), _MATMUL_SIZES, budget, share, dispatch_s)
    except RuntimeError:  # a backend without bf16 dots: not measured (features read the f32 peak)
        bf16 = 0.0
    exp = _peak_rate(_make_exp, _EXP_SIZES, budget, budget.share("exp"), dispatch_s)
    bandwidth = {
        level: None if n is None else _stream_bandwidth(n, budget, dispatch_s) for level, n in sets.items()
    }
    return DeviceDescriptor(
        device_id=fp["id"],
        backend=backend,
        cores=int(fp["cores"]),
        cpu_isa=tuple(fp["cpu_isa"]),
        peak_f32_flops=f32,
        peak_bf16_flops=bf16,
        bandwidth_bytes_per_s=bandwidth,
        transcendentals_per_s=exp,
        dispatch_ns=dispatch_s * 1e9,
        label_mode=fp["label_mode"],
        seconds=time.perf_counter() - budget.start,
        device_kind=str(fp["device_kind"]),
        cpu_model=str(fp["cpu_model"]),
        cache_bytes=caches,
        working_set_bytes=sets,
        jax_version=jax.__version__,
    )


# ---------------------------------------------------------------------------------------------
# Files and the cache
# ---------------------------------------------------------------------------------------------


def read_descriptor(path: str | os.PathLike) -> DeviceDescriptor:
    """The descriptor stored at ``path`` (a `DESCRIPTOR_FILE`); ValueError naming the file and field."""
    return DeviceDescriptor.from_dict(read_json_object(path, "device descriptor"), source=str(path))


def write_descriptor(desc: DeviceDescriptor, path: str | os.PathLike) -> None:
    """Write ``desc`` to ``path`` as JSON, atomically (its folder is created)."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, desc.to_dict(), indent=2)


def descriptor_cache_path(fp: Mapping[str, Any]) -> Path:
    """``cache_dir()/descriptor-<backend>-<device_kind>-<id>-<mode>.json`` of fingerprint ``fp``,
    ``<mode>`` being ``one-core`` in the label mode and ``all-cores`` otherwise."""
    mode = "one-core" if fp.get("label_mode") == device.LABEL_MODE else "all-cores"
    parts = (fp.get("backend"), fp.get("device_kind"), fp.get("id"), mode)
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", "-".join(str(p) for p in parts if p))
    return cache_dir() / f"descriptor-{safe}.json"


def load_or_measure(
    cache_path: str | os.PathLike | None = None, force: bool = False, *, budget_s: float = 60.0
) -> DeviceDescriptor:
    """This device's descriptor from the cache, else `measure_descriptor` (``budget_s``) and cache it.

    A cached file counts only when it holds this device's id and this process's label mode (and
    this `DESCRIPTOR_VERSION`); anything else, an unreadable file included, is measured again.

    Args:
      cache_path: the JSON file; default `descriptor_cache_path` (``$TPUCOST_CACHE_DIR`` overrides
      the folder).
      force: measure again even if the cache holds this device.
      budget_s: the measurement's budget, when it measures.
    """
    fp = device.fingerprint()
    path = Path(cache_path) if cache_path is not None else descriptor_cache_path(fp)
    if not force and path.is_file():
        try:
            cached = read_descriptor(path)
        except (OSError, ValueError):
            cached = None
        if cached is not None and (cached.device_id, cached.label_mode) == (fp["id"], fp["label_mode"]):
            return cached
    desc = measure_descriptor(budget_s)
    write_descriptor(desc, path)
    return desc


def _rate(value: float | None, unit: str) -> str:
    return "not measured" if not _positive(value) else f"{value * 1e-9:,.1f} {unit}"


def _bytes(n: int | None) -> str:
    return "-" if not n else (f"{n / (1 << 20):g} MiB" if n >= 1 << 20 else f"{n / 1024:g} KiB")


def descriptor_table(desc: DeviceDescriptor) -> str:
    """A readable table of ``desc`` (what ``python -m lab device describe`` prints)."""
    rows = [
        ("device", f"{desc.backend} {desc.cpu_model or desc.device_kind!r} [{desc.device_id}]"),
        ("cores, mode", f"{desc.cores} ({desc.label_mode})"),
        ("vector ISA", " ".join(desc.cpu_isa) or "-"),
        ("peak f32", _rate(desc.peak_f32_flops, "GFLOP/s")),
        ("peak bf16", _rate(desc.peak_bf16_flops, "GFLOP/s")),
    ]
    for level in LEVELS:
        working_set = _bytes(desc.working_set_bytes.get(level))
        rows.append(
            (f"bandwidth {level}", f"{_rate(desc.bandwidth_bytes_per_s.get(level), 'GB/s')} ({working_set})")
        )
    rows += [
        ("exp", _rate(desc.transcendentals_per_s, "G/s")),
        ("dispatch", f"{desc.dispatch_ns / 1e3:.2f} us"),
        ("measured in", f"{desc.seconds:.1f} s (jax {desc.jax_version or '?'})"),
    ]
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"{name:<{width}}  {value}" for name, value in rows)


def roofline(desc: DeviceDescriptor) -> DeviceRoofline:
    """The analytical model's roofline (`tpucost.method.analytical.DeviceRoofline`) of a measured
    descriptor: its f32 matmul peak, exp throughput, DRAM bandwidth and dispatch overhead
    (``profiled_launch_ns`` 0: unknown).

    Raises:
        ValueError: one of those throughputs was not measured (not a positive number).
    """
    peaks = {
        "peak_f32_flops": desc.peak_f32_flops,
        "transcendentals_per_s": desc.transcendentals_per_s,
        "bandwidth_bytes_per_s['DRAM']": desc.bandwidth_bytes_per_s.get("DRAM"),
    }
    for name, value in peaks.items():
        if value is None or not math.isfinite(value) or value <= 0:
            raise ValueError(f"descriptor of {desc.device_id}: {name} = {value!r}, need a positive number")
    return DeviceRoofline(
        peak_flops=float(desc.peak_f32_flops),
        peak_transcendentals=float(desc.transcendentals_per_s),
        bandwidth_bytes_per_s=float(desc.bandwidth_bytes_per_s["DRAM"]),
        launch_overhead_ns=float(desc.dispatch_ns),
        backend=desc.backend,
        device_kind=desc.device_kind,
    )
