"""Notebook 04, section 7: the paper's tile task on a real TPU.

The data: TpuGraphs' raw tile-size sweeps of 15 kernels measured on a TPU (v3 per the TpuGraphs
paper, arXiv 2308.13490; the file names no generation), the ``op_tuning_data.pb`` test file of
google-research-datasets/tpu_graphs (Apache-2.0; provenance in ``bundled/tpu_ground_truth``). It
is a ``TuningData`` message (``tuning.proto``): per kernel an ``xla.HloModuleProto`` and its runs,
each a ``TileSizeConfig`` (``kernel_bounds``, ``output_bounds``, ``input_bounds``) with an
``xla.ExecutionProfile`` (field 4 ``compute_time_ns``, the label). `load_tpu_sweeps` reads it with
the schema-less `tpucost.method.wire` and drops runs with ``error`` or ``compute_time_ns <= 1``:
752 configurations, one default run per kernel.

The bounds count layout tiles ((8, 128) for 2-D tilings, (1024) for 1-D) over an array's dims in
physical (major-to-minor) order: ``output_bounds`` block the kernel's iteration space (a
convolution's output, else its largest array of that rank whose tiled dims hold every bound),
``kernel_bounds`` a convolution's filter. With ``F`` those tiled dims and ``B`` the bounds:
``steps = prod ceil(F / B)`` over output and kernel dims together, ``block = prod B`` (tiles).

Methods, each scoring one kernel's configurations (lower = predicted faster):

* ``analytical``: `tpucost.experiments.tiles.analytical.tile_roofline_ns` of a `TileCost` built from
  the steps above, the kernel's FLOPs and bytes (`tpucost.method.analytical.kernel_cost`), whole
  (8, 128) tiles computed (a partial block pads), the filter re-read per output block and the rest
  per filter block; public TPU v3 figures per TensorCore (`TPU_V3`), nothing fitted;
* ``largest_block`` (``-log block``) and ``fewest_steps`` (``steps``): the CPU tile task's heuristics
  (`tpucost.experiments.tile_experiments.HEURISTICS`) on these block and step definitions;
* ``default``: the compiler's default first, every other configuration tied after it;
* ``random`` (seeded) and ``random_expected`` (the exact expectation: tau 0, top-k from order statistics);
* ``gnn_rank``: the project's tile model (`tpucost.method.models.TileGraphSAGE`, pairwise hinge loss)
  on the featurizer's graph of the kernel's HLO plus the 24 TpuGraphs config features, trained
  from scratch leave-one-kernel-out on the other kernels.

The 24 features are TpuGraphs' ``config_feat``: ``FeaturizeTileSizeConfig`` in
``tpu_graphs/process_data/xla/featurizers.h`` (called by
``tpu_graphs/process_data/tensorflow_ops/encode_hlo_tuning_data.cc``): for ``kernel_bounds``,
``output_bounds``, ``input_bounds`` in turn, the first 6 values (0-padded), their sum and their
product (0 for an empty list). Written here from that description (`config_features`).

Ties: configurations with equal scores keep the order of a seeded shuffle, never the file's (whose
first run is the default). Kendall's tau (`tpucost.method.metrics.ranking_metrics`, as on the CPU
split) is averaged over the kernels with >= 3 configurations of >= 2 distinct bounds: with 2 it
is +-1, and the 3 reshapes sweep one empty configuration (their runtimes differ by noise alone).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pandas as pd
from flax import nnx

from tpucost import compat
from tpucost.experiments.tiles import TileCost
from tpucost.experiments.tiles.analytical import tile_roofline_ns
from tpucost.files import bundled_dir
from tpucost.method import analytical, features, hlo, kernels, losses, metrics, models, wire

__all__ = [
    "DATA_NAME", "MEASURED_ON", "SOURCE", "CONFIG_FEATURE_NAMES", "TPU_V3", "TileRun", "TpuKernel",
    "default_path", "load_tpu_sweeps", "config_features", "method_scores", "loko_scores",
    "evaluate", "landscape",
]  # fmt: skip

DATA_NAME = "tpu_ground_truth/op_tuning_data.pb"
MEASURED_ON = "TPU (v3 per the TpuGraphs paper)"
SOURCE = (
    "google-research-datasets/tpu_graphs tpu_graphs/process_data/tensorflow_ops/testdata/op_tuning_data.pb "
    "(HEAD ddd187c), Apache-2.0"
)
_FIELDS = ("kernel_bounds", "output_bounds", "input_bounds")
CONFIG_FEATURE_NAMES = tuple(f"{f}_{s}" for f in _FIELDS for s in (*map(str, range(6)), "sum", "product"))
#: Public TPU v3 figures per TensorCore (a chip has two): bf16 peak 123 TFLOP/s and 900 GB/s HBM per
#: chip, halved; 16 MiB VMEM; a pipelined grid step's overhead about 0.35 us (the Pallas TPU guide).
TPU_V3 = analytical.DeviceRoofline(61.5e12, 61.5e12 / 4, 450e9, 0.0, "tpu", "TPU v3 (public figures)")
_STEP_NS, _VMEM = 350.0, 16 * 2**20


@dataclasses.dataclass(frozen=True)
class TileRun:
    """One measured configuration: bounds in layout tiles, ``compute_time_ns``, the default flag."""

    kernel_bounds: tuple[int, ...]
    output_bounds: tuple[int, ...]
    input_bounds: tuple[int, ...]
    runtime_ns: int
    is_default: bool


@dataclasses.dataclass
class TpuKernel:
    """One swept kernel: its HLO, the parsed kernel, the featurizer's graph, its runs (file order)."""

    name: str
    hlo_text: str
    kernel: kernels.Kernel
    graph: features.KernelGraph
    configs: list[TileRun]

    @property
    def runtimes(self) -> np.ndarray:
        return np.asarray([c.runtime_ns for c in self.configs], np.float64)

    @property
    def default_index(self) -> int:
        return next(i for i, c in enumerate(self.configs) if c.is_default)

    @property
    def distinct_configs(self) -> int:
        return len({(c.kernel_bounds, c.output_bounds, c.input_bounds) for c in self.configs})


def default_path() -> Path:
    return bundled_dir() / DATA_NAME


def _ints(msg: bytes, number: int) -> tuple[int, ...]:
    return tuple(wire.signed(v) for v in wire.packed_varints(wire.field_values(msg, number)))


def _one(msg: bytes, number: int) -> bytes:
    values = [v for v in wire.field_values(msg, number) if isinstance(v, bytes)]
    return values[-1] if values else b""


def _read(buf: bytes) -> list[TpuKernel]:
    out = []
    for i, module in enumerate(wire.field_values(buf, 1)):
        if not isinstance(module, bytes):
            raise ValueError(f"module {i} is not a message")
        text = compat.hlo_text(_one(module, 1))
        parsed = kernels.decompose(hlo.parse_module(text, source=f"module {i}"))
        if len(parsed) != 1:
            raise ValueError(f"module {i} holds {len(parsed)} kernels, expected 1")
        runs = []
        for run in wire.field_values(module, 3):
            if not isinstance(run, bytes):
                raise ValueError(f"module {i}: a run is not a message")
            tile = _one(_one(run, 1), 1)
            ns = [v for v in wire.field_values(_one(run, 4), 4) if isinstance(v, int)]
            if any(wire.field_values(run, 3)) or not ns or wire.signed(ns[-1]) <= 1:
                continue  # error = true, or no usable compute_time_ns
            bounds = [_ints(tile, n) for n in (1, 2, 3)]
            runs.append(TileRun(*bounds, wire.signed(ns[-1]), any(wire.field_values(run, 5))))
        if sum(r.is_default for r in runs) != 1:
            raise ValueError(
                f"module {i} ({parsed[0].name}) has {sum(r.is_default for r in runs)} default runs"
            )
        out.append(TpuKernel(parsed[0].name, text, parsed[0], features.featurize(parsed[0]), runs))
    if not out:
        raise ValueError("no ModuleTuningData (field 1) in it")
    return out


@functools.cache
def _load(path: str, stamp: tuple[int, int]) -> tuple[TpuKernel, ...]:
    """The file's kernels, once per path and (mtime, size)."""
    try:
        buf = Path(path).read_bytes()
    except OSError as err:
        raise ValueError(f"{path}: cannot read: {err.strerror or err}") from None
    try:
        return tuple(_read(buf))
    except Exception as err:  # any damage: one line naming the file
        first = (str(err).splitlines() or [type(err).__name__])[0]
        raise ValueError(f"{path}: not a readable TpuGraphs TuningData file: {first}") from None


def load_tpu_sweeps(path: str | Path | None = None) -> list[TpuKernel]:
    """The kernels of a TpuGraphs ``TuningData`` file (default: the bundled one), in file order;
    ValueError (one line naming the file) on a damaged file."""
    path = Path(path or default_path())
    try:
        st = path.stat()
    except OSError as err:
        raise ValueError(f"{path}: cannot read: {err.strerror or err}") from None
    return list(_load(str(path), (st.st_mtime_ns, st.st_size)))


def config_features(
    kernel_bounds: tuple[int, ...], output_bounds: tuple[int, ...], input_bounds: tuple[int, ...] = ()
) -> np.ndarray:
    """TpuGraphs' 24 ``config_feat`` of one ``TileSizeConfig`` (`CONFIG_FEATURE_NAMES`), float32."""
    row: list[float] = []
    for values in (kernel_bounds, output_bounds, input_bounds):
        row += [float(v) for v in values[:6]] + [0.0] * max(0, 6 - len(values))
        row += [float(sum(values)), float(math.prod(values)) if values else 0.0]
    return np.asarray(row, np.float32)


# ------------------------------------------------------------------------- blocks, steps, analytical


def _tiled(shape: hlo.Shape) -> tuple[int, ...] | None:
    """An array's dims in physical order, the minor ones counted in its first layout tile."""
    if shape.layout is None or not shape.layout.tiles or shape.rank == 0:
        return None
    phys = [shape.dims[d] for d in reversed(shape.layout.minor_to_major)]
    tile = shape.layout.tiles[0][-len(phys) :]
    head = phys[: len(phys) - len(tile)]
    return tuple(head + [-(-d // t) if t > 0 else d for d, t in zip(phys[len(head) :], tile, strict=True)])


def _extent(k: TpuKernel, field: str) -> tuple[tuple[int, ...], int]:
    """(tiled dims, bytes) of the array ``field``'s bounds block: a convolution's output or filter
    first, else the largest array of that rank whose tiled dims hold every configuration's bounds."""
    bounds = [getattr(c, field) for c in k.configs]
    need = tuple(max(b) for b in zip(*bounds, strict=True)) if bounds and bounds[0] else ()
    if not need:
        return (), 0
    by_name = {n.name: n for n in k.kernel.nodes}
    convs = [n for n in k.kernel.nodes if n.opcode == "convolution"]
    prefer = {n.name for n in convs} if field == "output_bounds" else {n.operands[1] for n in convs}
    cands = []
    for node in by_name.values():
        for leaf in node.shape.leaves():
            t = _tiled(leaf)
            if t is not None and len(t) == len(need) and all(a >= b for a, b in zip(t, need, strict=True)):
                cands.append((node.name in prefer, leaf.num_elements, t, leaf.byte_size))
    best = max(cands, default=(False, 0, need, 0))
    return best[2], best[3]


def _grid(extent: tuple[int, ...], bounds: tuple[int, ...]) -> tuple[int, float]:
    """(steps, padded / real volume) of blocking ``extent`` by ``bounds`` (1, 1 when unbounded)."""
    if not bounds or len(bounds) != len(extent):
        return 1, 1.0
    steps = [-(-e // max(b, 1)) for e, b in zip(extent, bounds, strict=True)]
    pad = math.prod(s * b for s, b in zip(steps, bounds, strict=True)) / max(math.prod(extent), 1)
    return math.prod(steps), max(pad, 1.0)


def _shape_info(k: TpuKernel) -> dict[str, Any]:
    out, _ = _extent(k, "output_bounds")
    ker, ker_bytes = _extent(k, "kernel_bounds")
    return {"out": out, "ker": ker, "ker_bytes": ker_bytes, "cost": analytical.kernel_cost(k.graph)}


def _steps(info: dict[str, Any], c: TileRun) -> tuple[int, int, float]:
    so, pad = _grid(info["out"], c.output_bounds)
    sk, _ = _grid(info["ker"], c.kernel_bounds)
    return so, sk, pad


def _analytical_ns(info: dict[str, Any], c: TileRun) -> float:
    so, sk, pad = _steps(info, c)
    cost, ker = info["cost"], float(info["ker_bytes"])
    steps = so * sk
    written = cost.bytes_written * pad
    read = max(cost.bytes_read - ker, 0.0) * sk + ker * so
    per_in, per_out = read / steps, written / steps
    tc = TileCost((so, sk), steps, cost.flops * pad / steps, int(per_in), int(per_out),
                  int(2 * (per_in + per_out)), int(read + written), cost.flops * pad,
                  int(cost.bytes_read + cost.bytes_written))  # fmt: skip
    return tile_roofline_ns(tc, TPU_V3, _STEP_NS, _VMEM)


def method_scores(k: TpuKernel, seed: int = 0) -> dict[str, np.ndarray]:
    """Every non-learned method's scores of ``k``'s configurations (file order; lower = faster)."""
    info = _shape_info(k)
    steps = [_steps(info, c) for c in k.configs]
    block = [math.prod(c.output_bounds) * math.prod(c.kernel_bounds) for c in k.configs]
    n = len(k.configs)
    return {
        "analytical": np.asarray([_analytical_ns(info, c) for c in k.configs]),
        "largest_block": -np.log(np.asarray(block, np.float64)),
        "fewest_steps": np.asarray([so * sk for so, sk, _ in steps], np.float64),
        "default": np.where(np.arange(n) == k.default_index, 0.0, 1.0),
        "random": np.random.default_rng([seed, n]).random(n),
    }


# ---------------------------------------------------------------------- the learned rank model (LOKO)


def _rows(k: TpuKernel) -> np.ndarray:
    return np.log1p(np.stack([config_features(c.kernel_bounds, c.output_bounds, c.input_bounds)
                              for c in k.configs]))  # fmt: skip


@functools.partial(jax.jit, static_argnums=0)
def _forward(graphdef, params, rest, graph, node_mask, graph_mask, cfg, cmask):
    return nnx.merge(graphdef, params, rest)(graph, node_mask, graph_mask, cfg, cmask)


@functools.partial(jax.jit, static_argnums=(0, 1))
def _train_step(graphdef, tx, params, rest, opt_state, graph, node_mask, graph_mask, cfg, cmask, y):
    def loss_fn(p):
        s = nnx.merge(graphdef, p, rest)(graph, node_mask, graph_mask, cfg, cmask)
        per = losses.pairwise_hinge_loss(s, y, where=cmask)
        return jnp.sum(jnp.where(graph_mask, per, 0.0)) / jnp.maximum(jnp.sum(graph_mask), 1)

    loss, grads = jax.value_and_grad(loss_fn)(params)
    updates, opt_state = tx.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss


_CP, _HIDDEN, _STEPS, _LR = 64, 32, 150, 3e-3
_TX = optax.adam(_LR)


def loko_scores(ks: list[TpuKernel], seed: int = 0, steps: int = _STEPS) -> list[np.ndarray]:
    """Each kernel's scores by a tile model trained from scratch on the other kernels (those with
    >= 2 distinct configurations), pairwise hinge loss, ``steps`` Adam steps of all training kernels
    with at most 64 sampled configurations each; deterministic for a seed."""
    spec = dataclasses.replace(features.TPUCOST_FEATURES, num_config_features=len(CONFIG_FEATURE_NAMES))
    cfg = models.ModelConfig(hidden=_HIDDEN, num_layers=2, features=spec)
    sizes = features.shared_buckets([[k.graph for k in ks]])
    rows = [_rows(k) for k in ks]
    logt = [np.log(k.runtimes) for k in ks]
    out = []
    for test, k in enumerate(ks):
        train = [i for i, t in enumerate(ks) if i != test and t.distinct_configs >= 2]
        graph, gmask, nmask = features.pad_to_bucket(
            features.to_graphs_tuple([ks[i].graph for i in train]), *sizes
        )
        model = models.make_model(cfg, nnx.Rngs(seed), task="tile")
        graphdef, params, rest = nnx.split(model, nnx.Param, ...)
        opt_state = _TX.init(params)
        rng = np.random.default_rng([seed, test])
        gp = len(gmask)
        for _ in range(steps):
            x = np.zeros((gp, _CP, rows[0].shape[1]), np.float32)
            m, y = np.zeros((gp, _CP), bool), np.zeros((gp, _CP), np.float32)
            for g, i in enumerate(train):
                pick = rng.choice(len(rows[i]), min(_CP, len(rows[i])), replace=False)
                x[g, : len(pick)], m[g, : len(pick)], y[g, : len(pick)] = rows[i][pick], True, logt[i][pick]
            params, opt_state, _ = _train_step(
                graphdef, _TX, params, rest, opt_state, graph, nmask, gmask, x, m, y
            )
        graph1, gmask1, nmask1 = features.pad_to_bucket(features.to_graphs_tuple([k.graph]), *sizes)
        scores = []
        for start in range(0, len(rows[test]), _CP):
            chunk = rows[test][start : start + _CP]
            x, m = np.zeros((gp, _CP, chunk.shape[1]), np.float32), np.zeros((gp, _CP), bool)
            x[0, : len(chunk)], m[0, : len(chunk)] = chunk, True
            s = _forward(graphdef, params, rest, graph1, nmask1, gmask1, x, m)
            scores.append(np.asarray(s)[0, : len(chunk)])
        out.append(np.concatenate(scores).astype(np.float64))
    return out


# ------------------------------------------------------------------------------------------ scoring

_KS = (1, 5, 10)
_SKIPPED = {
    "gnn_rank_from_cpu": "not run: the bundled CPU tile model (checkpoints/tile-random-hinge) reads 28 "
    "configuration features of a Pallas block (block_log2_*, grid_log2_*, log2_flops_per_step, ...), not "
    "TpuGraphs' 24 bounds columns; its config encoder cannot take these configurations"
}


def _expected_random(t: np.ndarray) -> dict[str, float]:
    """Exact expected top-k slowdowns of a uniformly random order (min of a random k-subset)."""
    s, n = np.sort(t), len(t)
    out = {}
    for k in _KS:
        m = min(k, n)  # P(the i-th fastest is the fastest of m drawn) = C(n-1-i, m-1) / C(n, m)
        p = np.asarray([math.comb(n - 1 - i, m - 1) for i in range(n)], np.float64) / math.comb(n, m)
        out[f"top{k}"] = float(p @ s / s[0] - 1)
    return out


def _row(scores: list[np.ndarray], times: list[np.ndarray], tau_set: list[int]) -> dict[str, Any]:
    r = metrics.ranking_metrics(scores, times, _KS)
    tau = metrics.ranking_metrics([scores[i] for i in tau_set], [times[i] for i in tau_set], _KS)
    r["kendall_mean"], r["n_kernels_tau"] = tau["kendall_mean"], tau["n_kernels_tau"]
    r["n_configs"] = int(sum(len(t) for t in times))
    return {
        k: r[k] for k in ("kendall_mean", "top1", "top5", "top10", "n_kernels", "n_kernels_tau", "n_configs")
    }


def _all_scores(ks: list[TpuKernel], seed: int, learned: bool) -> dict[str, list[np.ndarray]]:
    per = [method_scores(k, seed) for k in ks]
    out = {name: [p[name] for p in per] for name in per[0]}
    if learned:
        out["gnn_rank"] = loko_scores(ks, seed)
    return out


def _finite(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


def _kernel_row(k: TpuKernel, in_tau: bool, scores: dict[str, np.ndarray], t: np.ndarray) -> dict[str, Any]:
    """One kernel's figures and each method's tau (None where undefined) and top-1/top-5 on it."""
    default = float(k.runtimes[k.default_index])
    faster = int(np.sum(t < default))
    per = {
        m: {"kendall": _finite(metrics.kendall_tau(s, t)), "top1": metrics.top_k_slowdown(s, t, 1),
            "top5": metrics.top_k_slowdown(s, t, 5)}
        for m, s in scores.items()
    }  # fmt: skip
    return {
        "kernel": k.name, "kind": k.kernel.kind, "n_configs": len(t), "distinct_configs": k.distinct_configs,
        "in_kendall_mean": in_tau, "default_ns": default, "best_ns": float(t.min()),
        "worst_ns": float(t.max()), "default_rank": 1 + faster, "faster_than_default": faster, "methods": per,
    }  # fmt: skip


def _intervals(rows: list[dict[str, Any]], method: str, seed: int, n: int = 2000) -> dict[str, list[float]]:
    """95% bootstrap intervals over kernels (resampled with replacement) of the mean top-1 and tau."""
    rng = np.random.default_rng(seed)
    out = {}
    for key, metric, part in (
        ("top1_ci95", "top1", rows),
        ("kendall_ci95", "kendall", [r for r in rows if r["in_kendall_mean"]]),
    ):
        v = np.asarray([r["methods"][method][metric] for r in part], np.float64)
        means = v[rng.integers(0, len(v), (n, len(v)))].mean(axis=1)
        out[key] = [float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))]
    return out


def evaluate(path: str | Path | None = None, seed: int = 0, learned: bool = True) -> dict[str, Any]:
    """Every method on every kernel of the file (module docstring): the CPU tile split's metrics
    (`tpucost.method.metrics.ranking_metrics`) per method, plus ``n_configs`` and each kernel's row."""
    ks = load_tpu_sweeps(path)
    scores = _all_scores(ks, seed, learned)
    perms = [np.random.default_rng([seed, 7, i]).permutation(len(k.configs)) for i, k in enumerate(ks)]
    times = [k.runtimes[p] for k, p in zip(ks, perms, strict=True)]
    shuffled = {m: [s[p] for s, p in zip(v, perms, strict=True)] for m, v in scores.items()}
    tau_set = [i for i, k in enumerate(ks) if len(k.configs) >= 3 and k.distinct_configs >= 2]
    methods = {m: _row(v, times, tau_set) for m, v in shuffled.items()}
    exp = [_expected_random(t) for t in times]
    methods["random_expected"] = {
        "kendall_mean": 0.0, **{f"top{k}": float(np.mean([e[f"top{k}"] for e in exp])) for k in _KS},
        "n_kernels": len(ks), "n_kernels_tau": len(tau_set), "n_configs": int(sum(len(t) for t in times)),
    }  # fmt: skip
    rows = [
        _kernel_row(k, i in tau_set, {m: v[i] for m, v in shuffled.items()}, times[i])
        for i, k in enumerate(ks)
    ]
    for m, row in methods.items():
        if m in shuffled:
            row.update(_intervals(rows, m, seed))
    return {
        "split": "tpu-v3", "measured_on": MEASURED_ON, "source": SOURCE,
        "data": str(path) if path else f"tpucost/bundled/{DATA_NAME}",
        "n_kernels": len(ks), "n_configs": int(sum(len(k.configs) for k in ks)), "seed": seed,
        "methods": methods, "skipped": dict(_SKIPPED), "per_kernel": rows,
        "definitions": {
            "top_k": "mean over kernels of min(runtime of the k best-scored) / min(runtime) - 1",
            "kendall_mean": "mean Kendall tau-b over kernels of >= 3 configurations, >= 2 distinct bounds",
            "block": "prod(output_bounds) * prod(kernel_bounds), in layout tiles",
            "steps": "prod ceil(F / B) over output and kernel dims, F the array's tiled dims, B the bounds",
            "ties": "equal scores keep a seeded shuffle's order, not the file's",
            "ci95": "2.5 and 97.5 percentiles of the mean over 2000 bootstrap resamples of the kernels",
            "gnn_rank": f"TileGraphSAGE from scratch, leave-one-kernel-out, hinge loss, {_STEPS} Adam steps",
        },
    }  # fmt: skip


def landscape(kernel_name: str = "fusion.191", path: str | Path | None = None, seed: int = 0) -> pd.DataFrame:
    """One kernel's measured configurations (fastest first) with each method's score and rank:
    ``kernel_bounds``, ``output_bounds``, ``runtime_ns``, ``is_default``, ``measured_rank``, then
    ``<method>`` (score, lower = predicted faster) and ``<method>_rank`` (1 = its first pick; ties
    share the best rank). The learned model's scores are its leave-one-kernel-out scores."""
    ks = load_tpu_sweeps(path)
    names = [k.name for k in ks]
    if kernel_name not in names:
        raise ValueError(f"no kernel {kernel_name!r}; the file has {', '.join(names)}")
    i = names.index(kernel_name)
    k = ks[i]
    scores = method_scores(k, seed)
    scores["gnn_rank"] = loko_scores(ks, seed)[i]
    df = pd.DataFrame(
        {f: [getattr(c, f) for c in k.configs] for f in ("kernel_bounds", "output_bounds", "is_default")}
    )
    df.insert(2, "runtime_ns", k.runtimes)
    df["measured_rank"] = df["runtime_ns"].rank(method="min").astype(int)
    for name, s in scores.items():
        df[name] = s
        df[f"{name}_rank"] = pd.Series(s).rank(method="min").astype(int).to_numpy()
    return df.sort_values("runtime_ns", kind="stable").reset_index(drop=True)
