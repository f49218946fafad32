"""What differs between CPU, GPU and TPU, in one record per backend that every other module asks.

===========================  ==================================================================
field                        meaning
===========================  ==================================================================
``trace_planes``             prefix of the profiler planes that hold the kernel events
                             (`tpucost.measure` reads them)
``async_kernels``            whether a kernel's profiler event can end before its work does
                             (XLA:CPU's Eigen thunks: `tpucost.measure` times them to their
                             completion)
``scratchpad_bytes``         fast memory one tiled kernel's blocks should fit in: VMEM (TPU),
                             shared memory (GPU), None for the per-core L2 cache read from sysfs
                             (CPU); the tile analytical model penalises working sets above it
``block_lane``               the alignment unit of a block's minor dim (the TPU's lane width,
                             applied on every backend so that block shapes mean the same)
``pallas_interpret``         whether Pallas kernels run in interpret mode (the only mode on CPU)
``tile_lowering``            how `tpucost.tiles.build` runs a tile kernel by default: ``"pallas"``
                             (``pallas_call``) or ``"xla_loop"`` (the same body as an XLA loop
                             over the grid, `tpucost.tiles.lowering`)
``tile_size_scale``          how much larger, per dim, the tile families' sampled problems are
``compile_configurations``   the `tpucost.programs` configurations that set this backend's XLA
                             compile options (offered to the corpus and the autotuner when the
                             installed jaxlib has the options: `tpucost.compat`)
``scoring_compile_options``  XLA options that make a compile cheaper without changing the
                             optimised HLO it prints (all the model reads): the autotuner's
                             program-space predictor compiles with them (CPU: LLVM at -O0,
                             without its expensive passes; none elsewhere, untested)
``child_process_env``        environment variables for a second process of the autotuner on the
                             same device (the fresh-process re-measurement, the scoring
                             worker): on GPU, no preallocation (JAX's default takes 75% of the
                             memory, which the first process holds; run on an H200)
``tested``                   whether tpucost has run on it (CPU), or is written against
                             documented behaviour (GPU, TPU)
===========================  ==================================================================

`backend()` gives the record of JAX's default backend (or of a name: ``"cuda"`` and ``"rocm"``
are GPU).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import jax

__all__ = ["Backend", "BACKENDS", "backend", "scratchpad_bytes"]


@dataclasses.dataclass(frozen=True)
class Backend:
    """The facts of one backend (see the module docstring)."""

    name: str
    trace_planes: str
    async_kernels: bool
    scratchpad_bytes: int | None
    block_lane: int
    pallas_interpret: bool
    tile_lowering: str
    tile_size_scale: int
    compile_configurations: tuple[str, ...]
    scoring_compile_options: tuple[tuple[str, object], ...]
    child_process_env: tuple[tuple[str, str], ...]
    tested: bool


#: XLA:CPU's option-only configurations (`tpucost.programs.CONFIGURATIONS`).
_CPU_CONFIGURATIONS = ("no_fusion", "no_library_fusion", "no_fusion_at_all", "ynn_dot_only")

BACKENDS: dict[str, Backend] = {
    "cpu": Backend(
        "cpu",
        trace_planes="/host:CPU",
        async_kernels=True,
        scratchpad_bytes=None,
        block_lane=128,
        pallas_interpret=True,
        tile_lowering="xla_loop",  # Pallas' interpreter copies whole operands per step (tiles.overhead)
        tile_size_scale=1,
        compile_configurations=_CPU_CONFIGURATIONS,
        # Backend code generation only: the HLO passes, and so the optimised HLO, are unchanged
        # (tests/test_autotune.py checks the text is identical for every built-in example).
        scoring_compile_options=(
            ("xla_backend_optimization_level", 0),
            ("xla_llvm_disable_expensive_passes", True),
        ),
        child_process_env=(),
        tested=True,
    ),
    # GPU: interpret mode too (the tile kernels accumulate over a sequential grid axis, which
    # Triton's parallel grid does not give); shared memory of one H100/H200 SM.
    "gpu": Backend(
        "gpu",
        trace_planes="/device:GPU:",
        async_kernels=False,
        scratchpad_bytes=228 * 2**10,
        block_lane=128,
        pallas_interpret=True,
        tile_lowering="pallas",
        tile_size_scale=1,
        compile_configurations=(),
        scoring_compile_options=(),
        child_process_env=(("XLA_PYTHON_CLIENT_PREALLOCATE", "false"),),
        tested=False,
    ),
    # TPU: Mosaic-compiled; the default scoped VMEM limit of v5e.
    "tpu": Backend(
        "tpu",
        trace_planes="/device:TPU:",
        async_kernels=False,
        scratchpad_bytes=16 * 2**20,
        block_lane=128,
        pallas_interpret=False,
        tile_lowering="pallas",
        tile_size_scale=4,
        compile_configurations=(),
        scoring_compile_options=(),
        child_process_env=(),
        tested=False,
    ),
}
_ALIASES = {"cuda": "gpu", "rocm": "gpu"}


def backend(name: str | None = None) -> Backend:
    """The record of backend ``name`` (default: ``jax.default_backend()``); ValueError for an unknown one."""
    key = (name or jax.default_backend()).lower()
    key = _ALIASES.get(key, key)
    if key not in BACKENDS:
        raise ValueError(
            f"unknown backend {name!r}; expected one of {sorted(BACKENDS)} (or {sorted(_ALIASES)})"
        )
    return BACKENDS[key]


def scratchpad_bytes(name: str | None = None) -> int:
    """Bytes of fast memory one tiled kernel works in on backend ``name``: the record's, or on CPU
    the per-core L2 cache (sysfs; 1 MiB when unknown)."""
    known = backend(name).scratchpad_bytes
    if known is not None:
        return known
    try:
        text = Path("/sys/devices/system/cpu/cpu0/cache/index2/size").read_text().strip().upper()
        scale = {"K": 2**10, "M": 2**20}.get(text[-1:], 1)
        return int(text.rstrip("KM")) * scale
    except (OSError, ValueError):
        return 2**20
