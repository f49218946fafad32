"""The analytical baseline: a roofline estimate per kernel, scaled by one coefficient per kernel kind.

The paper compares its learned model with the compiler's analytical cost model, whose per-kernel
estimates are mapped to runtimes "with one scale coefficient per kernel type, fitted from measured
programs". This module builds the same kind of baseline from what a `KernelGraph` holds:

1. `kernel_cost` reads FLOPs, transcendentals and bytes back out of the node feature columns
   (``log1p`` columns are inverted with ``expm1`` and rounded; logical dims are recovered through
   the ``layout`` columns);
2. `measure_roofline` measures a `DeviceRoofline` (peak FLOP/s, transcendentals/s, memory bandwidth,
   launch overhead) with micro-benchmarks on the current JAX backend, cached as JSON;
3. `roofline_ns` = launch overhead + max(compute time, transcendental time, memory time);
4. `AnalyticalModel` fits one multiplicative coefficient per kernel kind in log space.

Cost rules (per node of the kernel graph; a kernel's cost is the sum over its nodes)
-----------------------------------------------------------------------------------------
``out`` is the node's output elements, ``in(k)`` the elements of its k-th operand (operands are
the node's in-edges, in edge order, which follows operand order), ``window`` the product of the
window sizes (1 when there is no window).

=================================  ============================================================
opcode                             counted as
=================================  ============================================================
``dot``                            flops = 2 * out * prod(lhs contracting dim sizes)
``convolution``                    flops = 2 * out * window * (rhs kernel input-feature size,
                                   i.e. input features per group; from the lhs input-feature
                                   size / feature_group_count when the rhs is unknown)
``reduce``                         flops = sum of in(k) over the reduced inputs (the first half
                                   of the operands; the second half are init values)
``reduce-window``                  flops = out * window * (number of reduced inputs)
``select-and-scatter``             flops = in(1) (the source) * window
``sort``                           flops = out * log2(size of the sorted dim)
``fft``                            flops = 5 * out * log2(out)
elementwise arithmetic             flops = out (add, multiply, compare, select, convert,
(`ELEMENTWISE_OPS`)                maximum, clamp, bitwise ops, rng, map, ...)
transcendentals                    transcendentals = out (exponential, log, tanh, logistic,
(`TRANSCENDENTAL_OPS`)             sine, cosine, sqrt, rsqrt, power, erf, atan2, cbrt, ...)
everything else                    0 flops: data movement (copy, transpose, broadcast, reshape,
                                   slice, concatenate, pad, gather, scatter, dynamic-slice,
                                   dynamic-update-slice, iota, reverse, ...), parameters,
                                   constants, tuples, custom-calls (opaque)
=================================  ============================================================

Bytes: ``bytes_read`` = sum of the byte sizes of the kernel's ``parameter`` nodes (the kernel's
inputs, each read once); ``bytes_written`` = sum of the byte sizes of its output nodes
(``is_output``) that are not tuples. A root ``tuple`` op only groups outputs that are outputs
themselves; a tuple-shaped output of another op (a variadic ``reduce`` or ``sort`` run as a
lone kernel) has no such operands, so its summed leaves are counted. Element counts and byte
sizes of arrays of rank <= 6 are recomputed exactly from the decoded dims and element bits;
beyond rank 6 (or for tuples) the ``num_elements``/``byte_size`` columns are decoded (float32
``log1p``: about 1e-6 relative error).

Limitations: the roofline ignores caches, vector-unit shapes, padding to tiles, and fusion-internal
re-reads (an operand broadcast inside a fusion is read once); the per-kind coefficient absorbs
what is systematic, exactly like the paper's baseline.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from tpucost.files import cache_dir, write_json_atomic
from tpucost.method import device
from tpucost.method.features import NODE_FEATURE_NAMES, NUM_NODE_FEATURES, OPCODE_VOCAB, KernelGraph
from tpucost.method.measure import best_wall_time_ns, measure_kernels

__all__ = [
    "ELEMENTWISE_OPS",
    "TRANSCENDENTAL_OPS",
    "KernelCost",
    "DeviceRoofline",
    "kernel_cost",
    "default_cache_path",
    "measure_roofline",
    "this_device",
    "read_cache",
    "best_time_s",
    "roofline_ns",
    "AnalyticalModel",
]

#: Opcodes counted as one FLOP per output element.
ELEMENTWISE_OPS = frozenset(
    """abs add and clamp compare complex convert ceil count-leading-zeros divide floor imag
    is-finite map maximum minimum mulhi multiply negate not or popcnt real reduce-precision
    remainder rng rng-bit-generator round-nearest-afz round-nearest-even select shift-left
    shift-right-arithmetic shift-right-logical sign stochastic-convert subtract xor""".split()
)
#: Opcodes counted as one transcendental per output element (as XLA's HloCostAnalysis does).
TRANSCENDENTAL_OPS = frozenset(
    """acos acosh asin asinh atan2 atanh cbrt cosh cosine erf exponential exponential-minus-one
    log log-plus-one logistic power rsqrt sine sinh sqrt tan tanh""".split()
)

_COL = {name: i for i, name in enumerate(NODE_FEATURE_NAMES)}
_DIM_COLS = [_COL[f"dim{k}"] for k in range(6)]
_LAYOUT_COLS = [_COL[f"layout{k}"] for k in range(6)]
_LHS_CONTRACTING_COLS = [_COL[f"dot_lhs_contracting{k}"] for k in range(6)]
_TUPLE_OPCODE = OPCODE_VOCAB.index("tuple")


class KernelCost(NamedTuple):
    """What one kernel computes and moves (all floats, to hold huge counts)."""

    flops: float
    transcendentals: float
    bytes_read: float
    bytes_written: float

    @property
    def bytes_accessed(self) -> float:
        return self.bytes_read + self.bytes_written


def _expm1_round(x: np.ndarray) -> np.ndarray:
    return np.rint(np.expm1(np.asarray(x, dtype=np.float64)))


class _Nodes:
    """Decoded per-node quantities of one kernel graph."""

    def __init__(self, graph: KernelGraph):
        f = np.asarray(graph.node_features, dtype=np.float64)
        if f.ndim != 2 or f.shape[1] != NUM_NODE_FEATURES:
            raise ValueError(
                f"kernel_cost needs tpucost's own feature layout ({NUM_NODE_FEATURES} columns), "
                f"got node_features of shape {f.shape}"
            )
        self.f = f
        self.n = f.shape[0]
        self.opcodes = [OPCODE_VOCAB[int(o)] if 0 <= int(o) < len(OPCODE_VOCAB) else "<unknown>"
                        for o in np.asarray(graph.opcodes)]  # fmt: skip
        self.rank = np.rint(f[:, _COL["rank"]]).astype(np.int64)
        self.is_tuple = f[:, _COL["is_tuple"]] > 0.5
        self.dims_mm = _expm1_round(f[:, _DIM_COLS])  # minor to major
        bits = _expm1_round(f[:, _COL["element_bits"]])
        exact = (~self.is_tuple) & (self.rank <= 6)
        prod = np.prod(np.where(np.arange(6)[None, :] < self.rank[:, None], self.dims_mm, 1.0), axis=1)
        self.elements = np.where(exact, prod, _expm1_round(f[:, _COL["num_elements"]]))
        self.bytes = np.where(exact, np.floor((prod * bits + 7) / 8), _expm1_round(f[:, _COL["byte_size"]]))
        # operands of each node, in edge order (= operand order)
        self.operands: list[list[int]] = [[] for _ in range(self.n)]
        for s, r in zip(
            np.asarray(graph.senders).tolist(), np.asarray(graph.receivers).tolist(), strict=True
        ):
            if 0 <= r < self.n and 0 <= s < self.n:
                self.operands[r].append(s)

    def logical_dims(self, i: int) -> dict[int, float]:
        """Logical dim number -> size for node i (dims beyond the 6 kept columns are missing)."""
        rank = int(self.rank[i])
        kept = min(rank, 6)
        layout = [int(round(v)) - 1 for v in self.f[i, _LAYOUT_COLS[:kept]]]
        valid = (
            self.f[i, _COL["has_layout"]] > 0.5
            and len(set(layout)) == kept
            and all(0 <= d < rank for d in layout)
        )
        order = layout if valid else [rank - 1 - k for k in range(kept)]
        return {d: float(self.dims_mm[i, k]) for k, d in enumerate(order)}

    def window(self, i: int) -> float:
        if self.f[i, _COL["window_rank"]] < 0.5:
            return 1.0
        return max(1.0, float(_expm1_round(self.f[i, _COL["window_size_product"]])))

    def operand(self, i: int, k: int) -> int | None:
        ops = self.operands[i]
        return ops[k] if k < len(ops) else None


def _node_flops(nodes: _Nodes, i: int) -> tuple[float, float]:
    """(flops, transcendentals) of node i."""
    op = nodes.opcodes[i]
    out = float(nodes.elements[i])
    f = nodes.f[i]
    if op in TRANSCENDENTAL_OPS:
        return 0.0, out
    if op in ELEMENTWISE_OPS:
        return out, 0.0
    if op == "dot":
        lhs = nodes.operand(i, 0)
        contracting = [d for d, c in enumerate(_LHS_CONTRACTING_COLS) if f[c] > 0.5]
        k = 1.0
        if lhs is not None:
            dims = nodes.logical_dims(lhs)
            k = math.prod(dims.get(d, 1.0) for d in contracting)
        return 2.0 * out * k, 0.0
    if op == "convolution":
        per_group = 0.0
        rhs = nodes.operand(i, 1)
        kin = int(round(f[_COL["conv_kernel_in_feature_dim"]])) - 1
        if rhs is not None and kin >= 0:
            per_group = nodes.logical_dims(rhs).get(kin, 0.0)
        if per_group <= 0:
            lhs = nodes.operand(i, 0)
            fin = int(round(f[_COL["conv_input_feature_dim"]])) - 1
            groups = max(1.0, float(_expm1_round(f[_COL["feature_group_count"]])))
            if lhs is not None and fin >= 0:
                per_group = nodes.logical_dims(lhs).get(fin, 1.0) / groups
        return 2.0 * out * nodes.window(i) * max(per_group, 1.0), 0.0
    if op == "reduce":
        ops = nodes.operands[i]
        inputs = ops[: max(1, len(ops) // 2)]
        return (float(sum(nodes.elements[j] for j in inputs)) if ops else out), 0.0
    if op == "reduce-window":
        n_inputs = max(1, len(nodes.operands[i]) // 2)
        return out * nodes.window(i) * n_inputs, 0.0
    if op == "select-and-scatter":
        src = nodes.operand(i, 1)
        return (float(nodes.elements[src]) if src is not None else out) * nodes.window(i), 0.0
    if op == "sort":
        dims = nodes.logical_dims(i)
        sorted_dims = [d for d in range(6) if f[_COL[f"dimensions{d}"]] > 0.5]
        size = dims.get(sorted_dims[0], 2.0) if sorted_dims else max(dims.values(), default=2.0)
        per_leaf = out / max(1.0, float(_expm1_round(f[_COL["num_tuple_leaves"]])))
        return per_leaf * math.log2(max(2.0, size)), 0.0
    if op == "fft":
        return 5.0 * out * math.log2(max(2.0, out)), 0.0
    return 0.0, 0.0


def kernel_cost(graph: KernelGraph) -> KernelCost:
    """FLOPs, transcendentals and bytes of one kernel, decoded from its node features.

    See the module docstring for the rules. Needs tpucost's own feature layout
    (`NUM_NODE_FEATURES` columns, `OPCODE_VOCAB` ids); raises ValueError otherwise.
    """
    nodes = _Nodes(graph)
    flops = trans = 0.0
    for i in range(nodes.n):
        a, b = _node_flops(nodes, i)
        flops += a
        trans += b
    f = nodes.f
    is_param = f[:, _COL["is_parameter"]] > 0.5
    is_out = f[:, _COL["is_output"]] > 0.5
    # a tuple-shaped output counts only when it is not a grouping `tuple` op (see module docstring)
    written = is_out & (np.asarray(graph.opcodes) != _TUPLE_OPCODE)
    return KernelCost(
        flops=float(flops),
        transcendentals=float(trans),
        bytes_read=float(nodes.bytes[is_param].sum()),
        bytes_written=float(nodes.bytes[written].sum()),
    )


# ---------------------------------------------------------------------------------------------
# Device roofline
# ---------------------------------------------------------------------------------------------

#: The version of the cached measurements' JSON; a file of another version is measured again.
CACHE_VERSION = 3


@dataclasses.dataclass(frozen=True)
class DeviceRoofline:
    """Measured throughputs of one device (per second) and its per-kernel launch overhead (ns).

    ``profiled_launch_ns`` (informational; 0 when unknown) is the profiler's label of the tiny
    kernel whose wall time is ``launch_overhead_ns``; `roofline_ns` uses ``launch_overhead_ns``.
    """

    peak_flops: float
    peak_transcendentals: float
    bandwidth_bytes_per_s: float
    launch_overhead_ns: float
    backend: str = ""
    device_kind: str = ""
    profiled_launch_ns: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> DeviceRoofline:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


def default_cache_path(
    backend: str, device_kind: str, device_id: str | None = None, name: str = "roofline"
) -> Path:
    """``$TPUCOST_CACHE_DIR`` (else ``~/.cache/tpucost``) / ``<name>-<backend>-<device_kind>[-<device_id>].json``.

    ``device_id`` is `tpucost.method.device.fingerprint`'s id: it keeps apart two hosts that share a home
    directory but not a speed, and one host measured pinned to one core and on all of them.
    """
    base = cache_dir()
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", "-".join(p for p in (backend, device_kind, device_id) if p))
    return base / f"{name}-{safe}.json"


def this_device() -> tuple[str, str, str]:
    """(backend, device kind, `tpucost.method.device.fingerprint` id) of JAX's default device: the cache key."""
    return jax.default_backend(), str(jax.devices()[0].device_kind), device.fingerprint()["id"]


def read_cache(path: Path, expected: dict[str, Any]) -> dict[str, Any] | None:
    """The cached JSON at ``path`` when it is this cache version and matches every ``expected``
    field; None when it is missing, unreadable or stale (then the caller measures again)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("version") != CACHE_VERSION:
        return None
    return data if all(data.get(k) == v for k, v in expected.items()) else None


def best_time_s(fn: Callable, args: tuple, repeats: int) -> float:
    """Minimum wall time (s) of `repeats` calls of a jitted `fn` after a warm-up (compile) call."""
    return best_wall_time_ns(fn, args, repeats, warmup=1) * 1e-9


def _grow(
    make: Callable[[int], tuple[Callable, tuple, float]],
    sizes: Sequence[int],
    min_time: float,
    repeats: int,
    overhead_s: float,
) -> float:
    """Throughput (work / s) of the first size whose run takes >= `min_time` (else the largest)."""
    rate = 0.0
    for size in sizes:
        fn, args, work = make(size)
        t = best_time_s(fn, args, repeats)
        rate = work / max(t - overhead_s, 0.5 * t)
        if t >= min_time:
            break
    return rate


def _measure(repeats: int, min_time: float) -> DeviceRoofline:
    first = jax.devices()[0]
    tiny = jax.jit(lambda x: x + 1.0)
    one = jnp.zeros((1,), jnp.float32)
    launch_s = best_time_s(tiny, (one,), max(20, 5 * repeats))
    profiled_s = _profiled_launch_s(one, repeats)

    def matmul(n: int):
        a = jax.random.normal(jax.random.PRNGKey(0), (n, n), jnp.float32)
        return jax.jit(lambda x, y: x @ y), (a, a), 2.0 * n**3

    chain = 8

    def transcendental(n: int):
        def f(x):
            for _ in range(chain):  # stays in (0, 1]: no inf/nan fast paths
                x = jnp.exp(-x)
            return x

        return jax.jit(f), (jnp.linspace(0.0, 1.0, n, dtype=jnp.float32),), float(chain * n)

    def stream(n: int):
        return jax.jit(lambda x: x + 1.0), (jnp.zeros((n,), jnp.float32),), 8.0 * n  # read 4n + write 4n

    return DeviceRoofline(
        peak_flops=_grow(matmul, (256, 512, 1024, 2048, 4096, 8192), min_time, repeats, launch_s),
        peak_transcendentals=_grow(
            transcendental, [2**k for k in range(16, 27, 2)], min_time, repeats, launch_s
        ),
        bandwidth_bytes_per_s=_grow(stream, [2**k for k in range(18, 27, 2)], min_time, repeats, launch_s),
        launch_overhead_ns=launch_s * 1e9,
        backend=jax.default_backend(),
        device_kind=str(first.device_kind),
        profiled_launch_ns=profiled_s * 1e9,
    )


def _profiled_launch_s(x: Any, repeats: int) -> float:
    """Profiler-measured time (s) of a one-element ``x + 1`` kernel, as `tpucost.method.measure` labels
    kernels; 0.0 if profiling fails."""
    try:
        labels = measure_kernels(lambda v: v + 1.0, x, repeats=max(5, repeats)).runtime_ns
        values = [v for v in labels.values() if np.isfinite(v) and v > 0]
        return min(values) * 1e-9 if values else 0.0
    except Exception:  # noqa: BLE001 - informational only: never fail calibration for it
        return 0.0


def measure_roofline(
    cache_path: str | os.PathLike | None = None,
    force: bool = False,
    *,
    repeats: int = 5,
    min_time_s: float = 0.01,
) -> DeviceRoofline:
    """The `DeviceRoofline` of JAX's default device, measured once and cached as JSON.

    Micro-benchmarks (each the minimum of `repeats` runs after a warm-up, timed with
    ``block_until_ready``; sizes grow until a run takes `min_time_s`):

    * launch overhead: the wall time of a jitted ``x + 1`` on one element (host dispatch
      included). The same kernel's profiler label (how `tpucost.method.measure` labels kernels) is kept
      as ``profiled_launch_ns``, for information: on XLA:CPU it is ~300 ns against ~4 us of wall
      time, yet the wall time gives the better baseline (real CPU kernels carry executor
      overhead a one-element kernel does not show; the per-kind coefficient scales the rest);
    * peak FLOP/s: an ``n x n`` f32 matmul, ``2 n^3`` FLOPs;
    * transcendentals/s: 8 chained ``exp(-x)`` over an f32 vector, fused into one kernel;
    * bandwidth: ``x + 1`` over an f32 vector, ``8`` bytes moved per element.

    Throughputs divide the work by (time - launch overhead). No backend-specific code: on a TPU or
    GPU the same benchmarks run on that device (about 2-10 s on a CPU).

    Args:
      cache_path: the JSON file; default `default_cache_path` (``$TPUCOST_CACHE_DIR`` overrides
      the directory).
      force: measure again even if the cache holds this backend and device kind.
    """
    backend, device_kind, device_id = this_device()
    path = Path(cache_path) if cache_path is not None else default_cache_path(backend, device_kind, device_id)
    if not force:
        data = read_cache(path, {"backend": backend, "device_kind": device_kind, "device_id": device_id})
        if data is not None:
            try:
                return DeviceRoofline.from_dict(data)
            except TypeError:
                pass  # a field missing: measure again

    roofline = _measure(repeats, min_time_s)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(
        path,
        {
            "version": CACHE_VERSION,
            "jax_version": jax.__version__,
            "device_id": device_id,
            **roofline.to_dict(),
        },
        indent=2,
    )
    return roofline


def roofline_ns(cost: KernelCost, roofline: DeviceRoofline) -> float:
    """``launch_overhead + max(flops / peak, transcendentals / peak_t, bytes / bandwidth)`` in ns."""
    return roofline.launch_overhead_ns + 1e9 * max(
        cost.flops / roofline.peak_flops,
        cost.transcendentals / roofline.peak_transcendentals,
        cost.bytes_accessed / roofline.bandwidth_bytes_per_s,
    )


# ---------------------------------------------------------------------------------------------
# The baseline model
# ---------------------------------------------------------------------------------------------


class AnalyticalModel:
    """Roofline estimates times one coefficient per kernel kind (the paper's analytical baseline).

    ``fit`` sets, for each kind k seen in training, ``coef[k] = exp(median(log y - log est))``
    over the kernels of that kind (a median in log space: robust, and exact for a pure scale);
    ``global_coefficient`` is the same over all training kernels and serves kinds never seen.
    Fit it on the TRAIN split only: it uses nothing but what it is given.

    Args:
      roofline: the device roofline; None calibrates (or reads the cache) on first use.
    """

    def __init__(self, roofline: DeviceRoofline | None = None):
        self.roofline = roofline
        self.coefficients: dict[str, float] = {}
        self.counts: dict[str, int] = {}
        self.global_coefficient: float = 1.0
        self.fitted = False

    def _roofline(self) -> DeviceRoofline:
        if self.roofline is None:
            self.roofline = measure_roofline()
        return self.roofline

    def estimate_ns(self, graphs: Sequence[KernelGraph]) -> np.ndarray:
        """Unscaled roofline estimates (ns), one per graph (floored at 1e-3 ns)."""
        rl = self._roofline()
        est = np.asarray([roofline_ns(kernel_cost(g), rl) for g in graphs], dtype=np.float64)
        return np.maximum(est, 1e-3)

    @staticmethod
    def _kinds(graphs: Sequence[KernelGraph], kinds: Sequence[str] | np.ndarray | None) -> list[str]:
        out = [g.kind for g in graphs] if kinds is None else [str(k) for k in kinds]
        if len(out) != len(graphs):
            raise ValueError(f"got {len(out)} kinds for {len(graphs)} graphs")
        return out

    def fit(
        self,
        graphs: Sequence[KernelGraph],
        runtimes_ns: Sequence[float] | np.ndarray,
        kinds: Sequence[str] | np.ndarray | None = None,
    ) -> AnalyticalModel:
        """Fit the per-kind coefficients (kinds default to each graph's ``kind``); returns self."""
        y = np.asarray(runtimes_ns, dtype=np.float64).reshape(-1)
        if y.shape[0] != len(graphs):
            raise ValueError(f"got {y.shape[0]} runtimes for {len(graphs)} graphs")
        kind_list = self._kinds(graphs, kinds)
        ok = np.isfinite(y) & (y > 0)
        if not ok.any():
            raise ValueError("fit needs at least one positive, finite runtime")
        log_ratio = np.log(np.where(ok, y, 1.0)) - np.log(self.estimate_ns(graphs))
        self.global_coefficient = float(np.exp(np.median(log_ratio[ok])))
        by_kind: dict[str, list[float]] = {}
        for k, r, good in zip(kind_list, log_ratio.tolist(), ok.tolist(), strict=True):
            if good:
                by_kind.setdefault(k, []).append(r)
        self.coefficients = {k: float(np.exp(np.median(v))) for k, v in sorted(by_kind.items())}
        self.counts = {k: len(v) for k, v in sorted(by_kind.items())}
        self.fitted = True
        return self

    def coefficient(self, kind: str) -> float:
        """The coefficient of `kind`, or the global one for a kind not seen in training."""
        return self.coefficients.get(str(kind), self.global_coefficient)

    def predict(
        self, graphs: Sequence[KernelGraph], kinds: Sequence[str] | np.ndarray | None = None
    ) -> np.ndarray:
        """Predicted runtimes (ns), float64[len(graphs)]."""
        if not self.fitted:
            raise RuntimeError("AnalyticalModel.predict before fit")
        coef = np.asarray([self.coefficient(k) for k in self._kinds(graphs, kinds)], dtype=np.float64)
        return coef * self.estimate_ns(graphs)

    def to_json(self) -> str:
        """The fitted model (roofline, coefficients, counts) as a JSON string."""
        return json.dumps({
            "type": "AnalyticalModel",
            "version": 1,
            "roofline": None if self.roofline is None else self.roofline.to_dict(),
            "coefficients": self.coefficients,
            "counts": self.counts,
            "global_coefficient": self.global_coefficient,
            "fitted": self.fitted,
        }, indent=2)  # fmt: skip

    @classmethod
    def from_json(cls, data: str | dict[str, Any]) -> AnalyticalModel:
        """The inverse of `to_json` (accepts the string or the parsed dict)."""
        d = json.loads(data) if isinstance(data, str) else data
        if d.get("type") != "AnalyticalModel":
            raise ValueError(f"not an AnalyticalModel: type={d.get('type')!r}")
        model = cls(None if d.get("roofline") is None else DeviceRoofline.from_dict(d["roofline"]))
        model.coefficients = {str(k): float(v) for k, v in d.get("coefficients", {}).items()}
        model.counts = {str(k): int(v) for k, v in d.get("counts", {}).items()}
        model.global_coefficient = float(d.get("global_coefficient", 1.0))
        model.fitted = bool(d.get("fitted", bool(model.coefficients)))
        return model
