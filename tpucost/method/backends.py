"""What differs between CPU, GPU and TPU, in one record per backend that every other module asks.

===========================  ==================================================================
field                        meaning
===========================  ==================================================================
``trace_planes``             prefix of the profiler planes that hold the kernel events
                             (`tpucost.method.measure` reads them)
``async_kernels``            whether a kernel's profiler event can end before its work does
                             (XLA:CPU's Eigen thunks: `tpucost.method.measure` times them to their
                             completion)
``scratchpad_bytes``         fast memory one tiled kernel's blocks should fit in: VMEM (TPU),
                             shared memory (GPU), None for the per-core L2 cache read from sysfs
                             (CPU); the tile analytical model penalises working sets above it
``block_lane``               the alignment unit of a block's minor dim (the TPU's lane width,
                             applied on every backend so that block shapes mean the same)
``pallas_interpret``         whether Pallas kernels run in interpret mode (the only mode on CPU)
``tile_lowering``            how `tpucost.experiments.tiles.build` runs a tile kernel by default: ``"pallas"``
                             (``pallas_call``) or ``"xla_loop"`` (the same body as an XLA loop
                             over the grid, `tpucost.experiments.tiles.lowering`)
``tile_size_scale``          how much larger, per dim, the tile families' sampled problems are
``compile_configurations``   the `tpucost.experiments.programs` configurations that set this backend's XLA
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
``trace_program_ids``        whether a trace's program ids are XLA's module ids (CPU), or an
                             executable's fingerprint that a module is not matched by (TPU)
===========================  ==================================================================

`backend()` gives the record of JAX's default backend (or of a name: ``"cuda"`` and ``"rocm"``
are GPU).

Compile targets
---------------
A *target* is what a program is compiled for, which need not be the device at hand: ``cpu`` (this
machine's XLA:CPU) or a TPU chip (``tpu-v4``, ``tpu-v5e``, ``tpu-v6e``), compiled without a TPU by
libtpu's deviceless compiler (the ``tpu`` extra; `tpucost.experiments.compiler`). `TARGETS` holds one `Target`
each: the libtpu topology name, JAX's device kind, and the chip's public numbers. The numbers come
from Google Cloud's TPU pages (peak bf16 FLOP/s, HBM bandwidth, MXUs per TensorCore); no page
states a clock, so ``clock_hz`` is derived from them (peak / (MXUs x MXU multiply-adds x 2)) and
says so in ``clock_source``, or is None where the pages disagree (v6e: 2 MXUs on one revision of
the page, 4 on another), and the compiler's cycle estimates then stay cycles.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import jax

__all__ = [
    "Backend",
    "BACKENDS",
    "backend",
    "scratchpad_bytes",
    "Target",
    "TARGETS",
    "DEFAULT_TPU_TARGET",
    "target",
    "tpu_target",
]


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
    #: Whether the trace's program ids are XLA's ``HloModuleProto.id`` (XLA:CPU, checked), so that a
    #: measurement can match its module by id; a TPU trace's are the executable's fingerprint
    #: (checked on a TPU v6e profile, `tpucost.method.profiles`) and a module is matched by name.
    trace_program_ids: bool = True


#: XLA:CPU's option-only configurations (`tpucost.experiments.programs.CONFIGURATIONS`).
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
        compile_configurations=(
            "tpu_no_conv_input_fusion",
            "tpu_no_conv_output_fusion",
            "tpu_no_multi_output_fusion",
        ),
        scoring_compile_options=(),
        child_process_env=(),
        tested=False,
        trace_program_ids=False,
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


@dataclasses.dataclass(frozen=True)
class Target:
    """A compile target (see the module docstring): this machine's CPU or a TPU chip.

    Attributes:
      name: ``"cpu"`` or ``"tpu-<version>"``.
      backend: the `Backend` record's name the target compiles for (``"cpu"``, ``"tpu"``).
      topology: libtpu's topology name of a one-chip slice (``"v5e:1x1"``), None for the CPU.
      device_kind: what JAX's device calls the chip (``"TPU v5 lite"``), None for the CPU.
      tensorcores: TensorCores per chip (the compiler estimates cycles of one).
      mxus: matrix units per TensorCore; mxu_size: one MXU's side (multiply-adds per cycle = side²).
      peak_bf16_flops: documented peak dense bf16 FLOP/s of the chip.
      hbm_bytes_per_s: documented HBM bandwidth of the chip.
      clock_hz: TensorCore clock used to turn estimated cycles into time, or None (unknown).
      clock_source: where ``clock_hz`` comes from, in words.
      spec_url: the public page of the chip's numbers.
    """

    name: str
    backend: str
    topology: str | None = None
    device_kind: str | None = None
    tensorcores: int = 1
    mxus: int = 0
    mxu_size: int = 0
    peak_bf16_flops: float | None = None
    hbm_bytes_per_s: float | None = None
    clock_hz: float | None = None
    clock_source: str = ""
    spec_url: str = ""
    #: Where ``clock_hz`` is unknown, the clocks the documented numbers allow, each with why.
    clock_candidates_hz: tuple[tuple[float, str], ...] = ()

    @property
    def is_tpu(self) -> bool:
        return self.backend == "tpu"


def _derived_clock(peak_flops: float, tensorcores: int, mxus: int, mxu_size: int) -> float:
    """Clock (Hz) at which ``tensorcores x mxus`` MXUs of ``mxu_size``² multiply-adds reach ``peak_flops``."""
    return peak_flops / (tensorcores * mxus * mxu_size * mxu_size * 2)


_DERIVED = "derived from the documented peak bf16 FLOP/s and MXU count (no public page states the clock)"

TARGETS: dict[str, Target] = {
    "cpu": Target("cpu", backend="cpu"),
    "tpu-v4": Target(
        "tpu-v4",
        backend="tpu",
        topology="v4:1x1x1",
        device_kind="TPU v4",
        tensorcores=2,
        mxus=4,
        mxu_size=128,
        peak_bf16_flops=275e12,
        hbm_bytes_per_s=1200e9,
        clock_hz=_derived_clock(275e12, 2, 4, 128),
        clock_source=_DERIVED + "; 1.05 GHz, as the TPU v4 paper (Jouppi et al., ISCA 2023) states",
        spec_url="https://cloud.google.com/tpu/docs/v4",
    ),
    "tpu-v5e": Target(
        "tpu-v5e",
        backend="tpu",
        topology="v5e:1x1",
        device_kind="TPU v5 lite",
        tensorcores=1,
        mxus=4,
        mxu_size=128,
        peak_bf16_flops=197e12,
        hbm_bytes_per_s=819e9,
        clock_hz=_derived_clock(197e12, 1, 4, 128),
        clock_source=_DERIVED,
        spec_url="https://cloud.google.com/tpu/docs/v5e",
    ),
    "tpu-v6e": Target(
        "tpu-v6e",
        backend="tpu",
        topology="v6e:1x1",
        device_kind="TPU v6 lite",
        tensorcores=1,
        mxus=0,  # the page says 2 MXUs in one revision and 4 in another
        mxu_size=256,
        peak_bf16_flops=918e12,
        hbm_bytes_per_s=1640e9,
        clock_hz=None,
        clock_source="unknown: the v6e page gives 2 MXUs per TensorCore in one revision and 4 in another",
        spec_url="https://cloud.google.com/tpu/docs/v6e",
        clock_candidates_hz=(
            (_derived_clock(918e12, 1, 4, 256), "4 MXUs of 256x256"),
            (_derived_clock(918e12, 1, 2, 256), "2 MXUs of 256x256"),
        ),
    ),
}
#: Colab's free TPU: a single-chip TPU v5e.
DEFAULT_TPU_TARGET = "tpu-v5e"


def target(name: str | Target | None = None) -> Target:
    """The `Target` called ``name`` (``"cpu"``, ``"tpu"`` for `DEFAULT_TPU_TARGET`, ``"tpu-v5e"``, ...);
    None: the CPU; a `Target` is returned as it is. ValueError naming the known targets for another name."""
    if isinstance(name, Target):
        return name
    key = (name or "cpu").lower()
    key = DEFAULT_TPU_TARGET if key == "tpu" else key
    if key not in TARGETS:
        raise ValueError(
            f"unknown target {name!r}; expected one of {sorted(TARGETS)} (or 'tpu' for {DEFAULT_TPU_TARGET})"
        )
    return TARGETS[key]


def tpu_target(device_kind: str) -> Target | None:
    """The TPU `Target` whose chip JAX calls ``device_kind`` (``"TPU v5 lite"`` -> tpu-v5e; a
    profile's ``"TPU v6 Lite"`` -> tpu-v6e: case aside), or None."""
    kind = device_kind.lower()
    return next((t for t in TARGETS.values() if t.is_tpu and (t.device_kind or "").lower() == kind), None)
