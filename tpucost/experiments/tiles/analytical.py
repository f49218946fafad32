"""The tile task's analytical model: a roofline per grid step of a Pallas kernel.

Every constant is a micro-benchmark of the device at hand: the roofline of
`tpucost.method.analytical.measure_roofline` and the per-step overhead of `step_overhead_ns`.
Nothing is fitted. Table 3 puts it beside the learned tile models (`tpucost.experiments.tile_experiments`).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl

from tpucost.experiments.tiles import lowering as lowering_module
from tpucost.experiments.tiles.families import Block, TilePlan
from tpucost.experiments.tiles.problems import interpret_mode, tile_cost, tile_lowering
from tpucost.files import write_json_atomic
from tpucost.method import analytical, backends

__all__ = ["step_overhead_ns", "tile_roofline_ns", "AnalyticalTileModel"]


def _copy_kernel_s(rows: int, block_rows: int, repeats: int, lowering: str) -> float:
    """Best wall time (s) of a tiled copy of a float32[rows, 128] array in blocks of ``block_rows``,
    run by the tile ``lowering`` (`tpucost.experiments.tiles.lowering`: a Pallas kernel or an XLA loop)."""

    def body(x_ref, o_ref):
        o_ref[...] = x_ref[...]

    block = Block("x", (rows, 128), (block_rows, 128), lambda i: (i, 0), "float32")
    out = block._replace(name="out", is_output=True)
    if lowering == "xla_loop":
        plan = TilePlan((rows // block_rows,), ("parallel",), (block,), (out,), (), 0.0)
        call = lowering_module.loop_call(plan, body, jnp.float32)
    else:
        call = pl.pallas_call(
            body,
            grid=(rows // block_rows,),
            in_specs=[block.spec()],
            out_specs=out.spec(),
            out_shape=jax.ShapeDtypeStruct((rows, 128), jnp.float32),
            interpret=interpret_mode(jax.default_backend()),
        )
    return analytical.best_time_s(jax.jit(call), (jnp.ones((rows, 128), jnp.float32),), repeats)


@functools.cache
def step_overhead_ns(repeats: int = 7, lowering: str | None = None) -> float:
    """Measured cost of one grid step of a tile kernel beyond its work, in ns, under ``lowering``
    (default: the backend's, `tpucost.experiments.tiles.tile_lowering`).

    A micro-benchmark, like the roofline's: the same 256 KiB copy as 1 block and as 256 blocks of
    8 rows; the extra time per extra step is the overhead (on XLA:CPU, one iteration of the grid's
    while loop: in Pallas' interpret mode with its copies of whole operands, in the XLA loop with
    its block slices; on TPU/GPU, the pipeline's per-step cost). Measured once per device
    (`tpucost.method.device.fingerprint` id) and lowering, cached as JSON beside the roofline
    (`analytical.default_cache_path(..., name="step-overhead-<lowering>")`), and per process.
    """
    lowering = tile_lowering(None, lowering)
    backend, device_kind, device_id = analytical.this_device()
    path = analytical.default_cache_path(backend, device_kind, device_id, f"step-overhead-{lowering}")
    data = analytical.read_cache(path, {"device_id": device_id, "repeats": repeats, "lowering": lowering})
    if data is not None and isinstance(data.get("step_overhead_ns"), (int, float)):
        return float(data["step_overhead_ns"])
    one = _copy_kernel_s(2048, 2048, repeats, lowering)
    many = _copy_kernel_s(2048, 8, repeats, lowering)
    value = max(1e9 * (many - one) / 255.0, 0.0)
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {"device_id": device_id, "repeats": repeats, "lowering": lowering, "step_overhead_ns": value}
    write_json_atomic(path, {"version": analytical.CACHE_VERSION, **record})
    return value


def tile_roofline_ns(
    cost: Any, roofline: analytical.DeviceRoofline, step_ns: float, scratchpad: int
) -> float:
    """Estimated runtime of a tiled kernel from its `tpucost.experiments.tiles.TileCost`, in ns.

    ``launch + steps * (step_ns + max(flops_per_step / peak, bytes_per_step / bandwidth))``, with
    the memory term doubled when a step's working set exceeds the scratchpad (blocks spill out of
    VMEM / the cache and are fetched twice). Nothing is fitted: every constant is a micro-benchmark.
    """
    compute_s = cost.flops_per_step / roofline.peak_flops
    memory_s = (cost.bytes_in_per_step + cost.bytes_out_per_step) / roofline.bandwidth_bytes_per_s
    if cost.working_set_bytes > scratchpad:
        memory_s *= 2.0
    return roofline.launch_overhead_ns + cost.steps * (step_ns + 1e9 * max(compute_s, memory_s))


class AnalyticalTileModel:
    """The analytical tile-size model: `tile_roofline_ns` with this device's measured constants.

    Args:
      roofline: the device roofline (None: `tpucost.method.analytical.measure_roofline`, cached).
      step_ns: per-step overhead (None: `step_overhead_ns` under ``lowering``).
      scratchpad: working-set budget in bytes (None: `tpucost.method.backends.scratchpad_bytes`).
      lowering: how the kernels it predicts run (`tpucost.experiments.tiles.lowering`; None: the backend's).
    """

    def __init__(
        self,
        roofline: analytical.DeviceRoofline | None = None,
        step_ns: float | None = None,
        scratchpad: int | None = None,
        lowering: str | None = None,
    ):
        self.roofline = roofline or analytical.measure_roofline()
        self.step_ns = step_overhead_ns(lowering=lowering) if step_ns is None else float(step_ns)
        self.scratchpad = backends.scratchpad_bytes() if scratchpad is None else int(scratchpad)

    def predict_ns(
        self, family: str, shape: Sequence[int], dtype: str, configs: Sequence[dict]
    ) -> np.ndarray:
        """Estimated runtime (ns) of each configuration of one kernel, float64[len(configs)]."""
        return np.asarray(
            [
                tile_roofline_ns(
                    tile_cost(family, tuple(shape), dtype, c),
                    self.roofline,
                    self.step_ns,
                    self.scratchpad,
                )
                for c in configs
            ],
            np.float64,
        )
