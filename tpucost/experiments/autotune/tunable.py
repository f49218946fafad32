"""A program to autotune and its configuration space (`load_tunable`).

A program is ``NAME(config) -> (fn, args)`` where ``config`` holds the program's own knobs (program
space) or ``{kernel: block config}`` (tile space), and ``fn(*args)`` is one step; ``"example:NAME"``
names a built-in one (`tpucost.experiments.programs.examples`), ``"FILE.py:NAME"`` the user's.

* ``"program"`` space: the program's own knobs (``NAME.space``, e.g. a `jax.checkpoint` policy per
  layer, a `lax.scan` unroll), times the backend's compile options (the knob ``"xla"``:
  `tpucost.experiments.programs.compile_option_configurations`).
* ``"tile"`` space: the block shapes of every Pallas kernel of a program built from the tile
  families (``NAME.kernels``: kernel name -> ``(family, shape, dtype)``; each kernel's knob is its
  legal block configurations, `tpucost.experiments.tiles.legal_configs`).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tpucost.experiments import programs, tiles
from tpucost.experiments.programs.examples import EXAMPLES
from tpucost.experiments.tile_experiments import largest_block_order
from tpucost.method.autotune.space import Config, Space

__all__ = ["Tunable", "load_program", "load_tunable", "default_tile_config", "heuristic_candidates"]


def load_program(spec: str) -> Callable[..., Any]:
    """``"example:NAME"`` or ``"FILE.py:NAME"`` -> the program function (not called yet).

    Raises ValueError with one line naming what is wrong (no such file, an import error, no such
    function, not callable).
    """
    spec = str(spec)
    if spec.startswith("example:"):
        name = spec.split(":", 1)[1]
        if name not in EXAMPLES:
            raise ValueError(
                f"--program {spec}: no built-in example {name!r}; known: "
                + ", ".join(f"example:{n}" for n in EXAMPLES)
            )
        return EXAMPLES[name]
    path, sep, name = spec.rpartition(":")
    if not sep or not path or not name:
        raise ValueError(f"--program {spec!r}: expected FILE.py:NAME or example:NAME")
    file = Path(path)
    if not file.is_file():
        raise ValueError(f"--program {spec}: no such file {path}")
    module_spec = importlib.util.spec_from_file_location(f"tpucost_user_{file.stem}", file)
    if module_spec is None or module_spec.loader is None:
        raise ValueError(f"--program {spec}: {path} is not a Python file")
    module = importlib.util.module_from_spec(module_spec)
    try:
        module_spec.loader.exec_module(module)
    except Exception as err:  # the user's code: report it in one line
        raise ValueError(f"--program {spec}: importing {path} failed: {type(err).__name__}: {err}") from None
    fn = getattr(module, name, None)
    if fn is None:
        raise ValueError(f"--program {spec}: {path} defines no {name!r}")
    if not callable(fn):
        raise ValueError(f"--program {spec}: {name} is not callable (expected NAME(config) -> (fn, args))")
    return fn


def default_tile_config(choices: Sequence[Mapping[str, int]]) -> dict[str, int]:
    """The "hand-written" default of one kernel: the legal configuration whose block sizes are
    closest to 128 (in log2, summed over its keys; the first such in `legal_configs` order)."""
    return dict(min(choices, key=lambda c: sum(abs(math.log2(v) - 7) for v in c.values())))


@dataclasses.dataclass(frozen=True)
class Tunable:
    """A program and its configuration space.

    ``kind``: ``"program"`` or ``"tile"``. ``build(config)`` returns ``(fn, args)`` for a full
    configuration of ``space``; `compiler_options` gives the XLA options of the ``"xla"`` knob.
    ``kernels`` (tile space): kernel name -> ``(family, shape, dtype)``.
    """

    spec: str
    kind: str
    fn: Callable[..., Any]
    space: Space
    kernels: Mapping[str, tuple[str, tuple[int, ...], str]] = dataclasses.field(default_factory=dict)

    def program_config(self, config: Mapping[str, Any]) -> Config:
        return {k: v for k, v in config.items() if not (self.kind == "program" and k == "xla")}

    def compiler_options(self, config: Mapping[str, Any]) -> dict[str, Any]:
        if self.kind != "program":
            return {}
        return dict(programs.CONFIGURATIONS[config.get("xla", "default")].compiler_options)

    def build(self, config: Mapping[str, Any]) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        self.space.key(config)
        out = self.fn(self.program_config(config))
        if not (isinstance(out, tuple) and len(out) == 2 and callable(out[0])):
            raise ValueError(f"{self.spec}: NAME(config) must return (fn, args), got {type(out).__name__}")
        return out[0], tuple(out[1])


def _check_knobs(spec: str, space: Any) -> dict[str, tuple[Any, ...]]:
    if not isinstance(space, Mapping) or not all(isinstance(k, str) for k in space):
        raise ValueError(f"--program {spec}: NAME.space must be a dict of knob name -> list of choices")
    bad = [
        k
        for k, v in space.items()
        if isinstance(v, (str, bytes)) or not isinstance(v, Sequence) or not len(v)
    ]
    if bad:
        raise ValueError(f"--program {spec}: NAME.space knobs {bad} need a non-empty list of choices")
    return {k: tuple(v) for k, v in space.items()}


def load_tunable(spec: str, space: str = "program", backend: str | None = None) -> Tunable:
    """The program of ``spec`` (`load_program`) with its ``space`` (``"program"`` or ``"tile"``).

    Program space: ``NAME.space`` (optional: without it, compile options alone) plus the knob
    ``"xla"`` (`tpucost.experiments.programs.compile_option_configurations`). Tile space: ``NAME.kernels`` (required) gives one knob
    per kernel whose choices are its legal block configurations; ``NAME.default`` (optional) the
    default, else `default_tile_config` per kernel.
    """
    fn = load_program(spec)
    if space == "program":
        knobs = _check_knobs(spec, getattr(fn, "space", {}))
        if "xla" in knobs:
            raise ValueError(
                f"--program {spec}: the knob name 'xla' is reserved for the backend's compile options"
            )
        knobs["xla"] = programs.compile_option_configurations(backend)
        return Tunable(spec, "program", fn, Space(knobs))
    if space == "tile":
        kernels = getattr(fn, "kernels", None)
        if not isinstance(kernels, Mapping) or not kernels:
            raise ValueError(
                f"--program {spec}: the tile space needs NAME.kernels, a dict of kernel name -> "
                "(family, shape, dtype) of tpucost.experiments.tiles families"
            )
        checked, knobs = {}, {}
        for name, entry in kernels.items():
            try:
                family, shape, dtype = entry
                shape = tiles.check_shape(family, shape)
                choices = tiles.legal_configs(family, shape, dtype, backend)
            except (TypeError, ValueError) as err:
                raise ValueError(f"--program {spec}: kernel {name!r}: {err}") from None
            if not choices:
                raise ValueError(
                    f"--program {spec}: kernel {name!r} ({family} {shape}) has no legal block configuration"
                )
            checked[name], knobs[name] = (family, shape, str(dtype)), tuple(choices)
        default = getattr(fn, "default", None) or {n: default_tile_config(c) for n, c in knobs.items()}
        return Tunable(spec, "tile", fn, Space(knobs, default), checked)
    raise ValueError(f"unknown space {space!r}; expected 'program' or 'tile'")


def heuristic_candidates(tunable: Tunable) -> list[Config]:
    """What a user tries without a model, in order (the heuristic arm of `tpucost.experiments.autotune`).

    Tile space: largest block first: the r-th candidate gives every kernel its r-th largest legal
    block (`tpucost.experiments.tile_experiments.largest_block_order`; a kernel with fewer keeps its smallest).
    Program space: ``NAME.heuristic``, a list of partial configurations laid over the default
    (the obvious ones: e.g. no rematerialisation, XLA's defaults); without one, the default, then
    the default under each other choice of the ``"xla"`` knob (the compile options a user would
    try before touching the program).
    """
    space = tunable.space
    if tunable.kind == "tile":
        orders = {name: largest_block_order(choices) for name, choices in space.knobs.items()}
        return [
            {name: dict(space.knobs[name][order[min(r, len(order) - 1)]]) for name, order in orders.items()}
            for r in range(max(len(o) for o in orders.values()))
        ]
    listed = getattr(tunable.fn, "heuristic", None) or [
        {},
        *({"xla": name} for name in space.knobs.get("xla", []) if name != space.default.get("xla")),
    ]
    out = []
    for partial in listed:
        config = {**space.default, **dict(partial)}
        try:
            space.key(config)
        except (KeyError, ValueError) as err:
            raise ValueError(
                f"--program {tunable.spec}: NAME.heuristic entry {dict(partial)}: {err}"
            ) from None
        out.append(config)
    return out
