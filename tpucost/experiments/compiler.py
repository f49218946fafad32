"""Compile a program for a target: this machine's CPU, or a TPU chip without a TPU.

The TPU compiler ships in libtpu (the ``tpu`` extra: ``pip install "tpucost[tpu]"``, about 700 MB)
and runs on any Linux x86 machine: JAX describes a TPU slice that is not there
(`jax.experimental.topologies`), the program's arguments become abstract arrays placed on that
slice (`jax.ShapeDtypeStruct` with a sharding), and ``jax.jit(fn).lower(...).compile()`` returns the
module the TPU would run. Nothing executes; the module is the real one: TPU layouts
(``{1,0:T(8,128)(2,1)}``), memory spaces (``S(1)``: VMEM), asynchronous ``copy-start``/``copy-done``
pairs, dots as ``convolution`` fusions, and on each top-level instruction the compiler's own
estimate of its cost in cycles (`estimated_cycles`).

* `compile_for_target(fn, args, target)` compiles and returns a `TargetProgram`: the optimized HLO
  text, its parsed module, `cost_analysis` (flops, bytes accessed, ``optimal_seconds``) and the
  versions of the compiler (`compiler_versions`);
* `tpucost.experiments.xla_estimates` reads the compiler's estimate of each kernel from the module. An estimate
  is a model's output, never a measurement.

Learners without libtpu still see what the TPU compiler makes of the notebooks' programs: those
ship compiled in ``tpucost/bundled/tpu/<name>.hlo``, each with its provenance in ``<name>.json``
(the command, the date, the versions of jax, jaxlib and libtpu, ``cost_analysis``), written by
``python tools/bundle_tpu_programs.py``; `compile_or_bundled` compiles where it can and reads the
bundled module where it cannot, and says which.

On a TPU runtime (JAX's backend is ``tpu``) a program compiles for the chip at hand only: a target
of the chip's kind (any `tpucost.method.backends.tpu_target` knows) is placed on the real device
(same compiler); another target, or a chip of a kind tpucost does not know, raises
`TpuTargetNotHere`, one sentence saying why, and `compile_or_bundled` reads the bundled module
instead. A deviceless compile is never tried there: Colab's TPU image (jax 0.7.2) ships libtpu
0.0.21.1, whose deviceless compile crashes the process (a segmentation fault in
``GetDefaultLayout``, checked). Off a TPU, the ``tpu`` extra under Colab's jax installs libtpu
0.0.23, the version ``jax[tpu]==0.7.2`` asks for. A missing libtpu raises `TpuCompilerMissing`,
whose message says which extra to install. `chip_here` names the chip at hand.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import importlib.metadata
import os
from collections.abc import Callable, Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import jax
import jaxlib
import numpy as np
from jax.experimental import topologies

from tpucost import compat
from tpucost.files import read_json_object, write_json_atomic, write_text_atomic
from tpucost.method import backends, hlo
from tpucost.method.measure import compile_fn
from tpucost.tpu_host import libtpu_installed, quiet_libtpu_startup

__all__ = [
    "INSTALL_HINT",
    "TpuCompilerMissing",
    "TpuTargetNotHere",
    "TargetProgram",
    "tpu_compiler_available",
    "require_tpu_compiler",
    "target_sharding",
    "compiler_versions",
    "chip_here",
    "why_not_here",
    "target_device",
    "abstract_arguments",
    "compile_for_target",
    "unsupported_compile_options",
    "bundled_program_path",
    "save_bundled_program",
    "load_bundled_program",
    "compile_or_bundled",
]

#: What to run to get the TPU compiler.
INSTALL_HINT = 'pip install "tpucost[tpu]" (libtpu, about 700 MB)'


class TpuCompilerMissing(RuntimeError):
    """The TPU compiler (libtpu) is not installed; the message says how to install it."""


class TpuTargetNotHere(TpuCompilerMissing):
    """On a TPU runtime, a target other than the chip at hand (or a chip tpucost does not know): the
    message says why it is not compiled for here (`why_not_here`)."""


@dataclasses.dataclass(frozen=True)
class TargetProgram:
    """A program compiled for a target.

    Attributes:
      target: the `tpucost.method.backends.Target` it was compiled for.
      text: the optimized HLO module as text (``compiled.as_text()``).
      module: ``text`` parsed by `tpucost.method.hlo.parse_module`.
      cost_analysis: the compiler's whole-program figures: ``flops``, ``transcendentals``,
      ``bytes_accessed`` and (TPU) ``optimal_seconds``, each a float or None.
      compiler: ``{"jax", "jaxlib", "libtpu"}`` versions (libtpu None on the CPU target).
    """

    target: backends.Target
    text: str
    module: hlo.Module
    cost_analysis: dict[str, float | None]
    compiler: dict[str, str | None]


def tpu_compiler_available() -> bool:
    """Whether libtpu (the TPU compiler) is installed."""
    return libtpu_installed()


def compiler_versions(target: backends.Target | str = "cpu") -> dict[str, str | None]:
    """``{"jax", "jaxlib", "libtpu"}``: the versions that compile for ``target`` (libtpu None for
    the CPU target, or when it is not installed)."""
    libtpu = None
    if backends.target(target).is_tpu:
        try:
            libtpu = importlib.metadata.version("libtpu")
        except importlib.metadata.PackageNotFoundError:
            libtpu = None
    return {"jax": jax.__version__, "jaxlib": jaxlib.__version__, "libtpu": libtpu}


def require_tpu_compiler(what: str) -> None:
    """Raise `TpuCompilerMissing` (``"<what> needs the TPU compiler: <how to install it>"``)
    unless libtpu is installed."""
    if not tpu_compiler_available():
        raise TpuCompilerMissing(f"{what} needs the TPU compiler: {INSTALL_HINT}")


def chip_here() -> backends.Target | None:
    """The TPU target of the chip this process runs on (``"TPU v6 lite"`` -> tpu-v6e), asked of JAX
    (this starts its backends); None off a TPU, or on a chip `tpucost.method.backends.TARGETS` lacks."""
    if jax.default_backend() != "tpu":
        return None
    return backends.tpu_target(jax.devices()[0].device_kind)


def why_not_here(target: backends.Target | str) -> str | None:
    """None where this process can compile for ``target``; else one sentence saying why not: on a TPU
    runtime only the chip at hand is compiled for (a deviceless compile is never tried there)."""
    target = backends.target(target)
    if not target.is_tpu or jax.default_backend() != "tpu":
        return None
    kind = jax.devices()[0].device_kind
    here = backends.tpu_target(kind)
    if here is not None and here.name == target.name:
        return None
    chip = f"a {here.name} ({kind})" if here is not None else f"{kind!r}, a kind tpucost does not know"
    return (
        f"this runtime's TPU is {chip}, so {target.name} is not compiled for here: on a TPU VM tpucost "
        "compiles for the chip at hand only, as libtpu's deviceless compile is not run beside a chip "
        "(Colab's libtpu 0.0.21.1 crashes in it); compile for another chip on a machine without a TPU"
    )


@functools.cache
def target_device(name: str) -> jax.Device:
    """The device that programs for TPU target ``name`` are placed on: this machine's TPU when it
    is one of that kind, else one chip of a described (deviceless) slice of ``target.topology``.
    Raises `TpuTargetNotHere` on a TPU runtime whose chip is another (`why_not_here`)."""
    target = backends.target(name)
    if not target.is_tpu:
        return jax.devices("cpu")[0]
    require_tpu_compiler(f"compiling for {target.name}")
    quiet_libtpu_startup()  # done at import too; again in case the variables were removed since
    if (why := why_not_here(target)) is not None:
        raise TpuTargetNotHere(why)
    if jax.default_backend() == "tpu":
        return jax.devices()[0]
    topology = topologies.get_topology_desc(
        topology_name=target.topology, platform="tpu", chips_per_host_bounds=(1, 1, 1), num_slices=1
    )
    return topology.devices[0]


def target_sharding(name: str) -> jax.sharding.NamedSharding:
    """An array placed whole (replicated) on the one device of target ``name`` (`target_device`)."""
    mesh = jax.sharding.Mesh(np.array([target_device(name)]), ("x",))
    return jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())


def abstract_arguments(args: Sequence[Any], target: backends.Target | str) -> tuple[Any, ...]:
    """``args`` as abstract arrays (shape, dtype) placed on ``target``'s device; unchanged for the CPU.

    Array leaves (anything with ``shape`` and ``dtype``) become `jax.ShapeDtypeStruct`; Python
    scalars become weakly typed scalars, as `jax.jit` traces them.
    """
    target = backends.target(target)
    if not target.is_tpu:
        return tuple(args)
    placed = target_sharding(target.name)

    def abstract(leaf: Any) -> Any:
        if hasattr(leaf, "shape") and hasattr(leaf, "dtype"):
            return jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=placed)
        if isinstance(leaf, bool | int | float | complex):
            return jax.ShapeDtypeStruct((), jax.numpy.result_type(leaf), sharding=placed, weak_type=True)
        return leaf

    return tuple(jax.tree.map(abstract, tuple(args)))


def _cost_figures(compiled: jax.stages.Compiled) -> dict[str, float | None]:
    """The whole-program figures of ``compiled.cost_analysis()`` (a dict, or a list of one under
    older jax), with tpucost's names."""
    raw = compiled.cost_analysis()
    if isinstance(raw, list | tuple):
        raw = raw[0] if raw else {}
    raw = raw or {}
    names = {"flops": "flops", "transcendentals": "transcendentals", "bytes accessed": "bytes_accessed"}
    out: dict[str, float | None] = {ours: raw.get(theirs) for theirs, ours in names.items()}
    out["optimal_seconds"] = raw.get("optimal_seconds")
    return {k: (float(v) if v is not None else None) for k, v in out.items()}


def compile_for_target(
    fn: Callable[..., Any],
    args: Sequence[Any],
    target: backends.Target | str = "cpu",
    compiler_options: Mapping[str, Any] | None = None,
) -> TargetProgram:
    """``fn(*args)`` compiled (never run) for ``target`` (a name of `tpucost.method.backends.TARGETS`).

    The CPU target compiles as everything else in tpucost does (`tpucost.method.measure.compile_fn`); a
    TPU target with libtpu on abstract arguments (`abstract_arguments`). Raises
    `TpuCompilerMissing` when a TPU target is asked for without libtpu, and jax's own error when
    the compiler rejects the program (e.g. a Pallas kernel whose blocks do not fit VMEM).
    """
    target = backends.target(target)
    if target.is_tpu:
        placed = abstract_arguments(args, target)
        options = dict(compiler_options or {}) or None
        compiled = jax.jit(fn).lower(*placed).compile(compiler_options=options)
    else:
        if jax.default_backend() != "cpu":  # on an accelerator, arguments on the host compile for XLA:CPU
            args = jax.device_put(tuple(args), jax.devices("cpu")[0])
        compiled = compile_fn(fn, args, compiler_options)
    text = compiled.as_text()
    return TargetProgram(
        target=target,
        text=text,
        module=hlo.parse_module(text, source=f"<{target.name}>"),
        cost_analysis=_cost_figures(compiled),
        compiler=compiler_versions(target),
    )


@functools.cache
def _option_accepted(target_name: str, name: str, value: str) -> bool:
    """Whether the compiler of TPU target ``target_name`` accepts option ``name`` (one-op compile)."""
    scalar = jax.ShapeDtypeStruct((8, 128), jax.numpy.float32)
    try:
        compile_for_target(lambda x: x + 1, (scalar,), target_name, {name: value})
    except Exception as err:  # the compiler's own error type differs between jaxlib versions
        if "No such compile option" in str(err):
            return False
        raise
    return True


def unsupported_compile_options(options: Mapping[str, Any], target: backends.Target | str) -> list[str]:
    """The names in ``options`` that ``target``'s compiler rejects ("No such compile option"): asked
    of libtpu for a TPU target (one small compile per option, remembered), of the installed jaxlib
    (`tpucost.compat`) for the CPU."""
    target = backends.target(target)
    if not target.is_tpu:
        return compat.unsupported_compile_options(options)
    return [name for name, value in options.items() if not _option_accepted(target.name, name, str(value))]


def bundled_program_path(name: str) -> Path:
    """``tpucost/bundled/tpu/<name>.hlo``: a notebook program compiled for a TPU in CI (its
    provenance beside it, ``<name>.json``)."""
    return Path(str(resources.files("tpucost") / "bundled" / "tpu" / f"{name}.hlo"))


def save_bundled_program(
    program: TargetProgram, name: str, what: str, command: str, path: str | os.PathLike | None = None
) -> Path:
    """Write ``program`` as bundled program ``name`` (text and provenance); ``what`` says which
    program it is, ``command`` what wrote it. Returns the text's path."""
    out = Path(path) if path is not None else bundled_program_path(name)
    write_text_atomic(out, program.text)
    write_json_atomic(
        out.with_suffix(".json"),
        {
            "program": what,
            "target": program.target.name,
            "compiler": program.compiler,
            "cost_analysis": program.cost_analysis,
            "command": command,
            "date": datetime.date.today().isoformat(),
            "note": "compiled, never run: a module of the TPU compiler, and its own estimates",
        },
    )
    return out


def load_bundled_program(
    name: str, path: str | os.PathLike | None = None
) -> tuple[TargetProgram, dict[str, Any]]:
    """The bundled program ``name`` as a `TargetProgram`, and its provenance; FileNotFoundError
    naming the file when there is none."""
    text_path = Path(path) if path is not None else bundled_program_path(name)
    if not text_path.is_file():
        raise FileNotFoundError(f"no bundled TPU program {name!r} at {text_path}")
    provenance = read_json_object(text_path.with_suffix(".json"), "a bundled TPU program's provenance")
    text = text_path.read_text(encoding="utf-8")
    program = TargetProgram(
        target=backends.target(provenance["target"]),
        text=text,
        module=hlo.parse_module(text, source=str(text_path)),
        cost_analysis=dict(provenance["cost_analysis"]),
        compiler=dict(provenance["compiler"]),
    )
    return program, provenance


def compile_or_bundled(
    fn: Callable[..., Any], args: Sequence[Any], target: backends.Target | str, bundled: str
) -> tuple[TargetProgram, str]:
    """``fn(*args)`` compiled for ``target`` where it can be here (the CPU target; a TPU target with
    libtpu installed, on a TPU runtime only its own chip: `why_not_here`), else the bundled program
    ``bundled`` (the same program at the notebook's default sizes); and one sentence saying which,
    with the compiler's versions, and why not compiled here."""
    target = backends.target(target)
    if not target.is_tpu:
        why = None
    elif not tpu_compiler_available():
        why = f"to compile your own: {INSTALL_HINT}"
    else:
        why = why_not_here(target)
    if why is None:
        program = compile_for_target(fn, args, target)
        libtpu = program.compiler["libtpu"]
        return program, f"compiled here for {target.name}" + (f" by libtpu {libtpu}" if libtpu else "")
    program, provenance = load_bundled_program(bundled)
    c = provenance["compiler"]
    return program, (
        f"bundled: {provenance['program']}, compiled for {program.target.name} by libtpu {c['libtpu']} "
        f"(jax {c['jax']}) on {provenance['date']}; {why}"
    )
