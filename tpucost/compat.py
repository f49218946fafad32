"""What differs between the jax/flax versions tpucost supports, in one place.

tpucost is tested on two environments (see the book's "Setup" page, docs/setup.md): the newest pins
(constraints.txt) and the versions Colab's runtime images ship (constraints-colab.txt), which are
pyproject.toml's lower bounds. Every difference between them that the code must know about is
handled here, so that no other module tests versions:

* Flax NNX containers of sub-modules. ``nnx.List`` / ``nnx.Dict`` arrived in flax 0.12; flax
  0.11 holds sub-modules in plain ``list`` / ``dict`` attributes. Both give the same parameter
  tree (``{"layers": {0: ..., 1: ...}}``), so a checkpoint written under one loads under the other.
* Whether JAX has started a backend: a private API (``jax._src.xla_bridge``), read here alone.
* The HLO text of a serialized ``HloModuleProto`` (a profile's or TpuGraphs' embedded module):
  jaxlib's private ``XlaComputation`` (present in 0.7.2 and 0.10.2), used here alone (`hlo_text`).
* XLA compile options. Each jaxlib knows its own set of ``xla_*`` options and rejects the others
  (``INVALID_ARGUMENT: No such compile option``): jaxlib 0.7.2 has no YNNPACK options
  (``xla_cpu_experimental_ynn_fusion_type``). :func:`supports_compile_options` asks the installed
  jaxlib, by compiling a one-op function with the options, and remembers the answer.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

__all__ = [
    "ModuleList",
    "ModuleDict",
    "LIBRARY_FUSION_OPTIONS",
    "library_fusions_off",
    "supports_compile_options",
    "unsupported_compile_options",
    "backend_started",
    "hlo_text",
]

#: A list of sub-modules as a module attribute: ``nnx.List`` where flax has it, else ``list``.
ModuleList = getattr(nnx, "List", list)
#: A str-keyed dict of sub-modules as a module attribute: ``nnx.Dict`` where flax has it, else ``dict``.
ModuleDict = getattr(nnx, "Dict", dict)


@functools.cache
def _option_accepted(name: str, value: str) -> bool:
    """Whether the installed jaxlib compiles a one-op function with ``{name: value}``."""
    try:
        jax.jit(lambda x: x + 1).lower(jnp.zeros(2)).compile(compiler_options={name: value})
    except Exception as err:  # XlaRuntimeError: INVALID_ARGUMENT: No such compile option: '<name>'
        if "compile option" in str(err) or "INVALID_ARGUMENT" in str(err):
            return False
        raise
    return True


def unsupported_compile_options(options: Mapping[str, Any]) -> list[str]:
    """The names in ``options`` that the installed jaxlib rejects on JAX's default backend.

    Each option is tried once per process (a compile of ``x + 1``, a few ms) with its own value.
    """
    return [name for name, value in options.items() if not _option_accepted(name, str(value))]


def supports_compile_options(options: Mapping[str, Any]) -> bool:
    """True when the installed jaxlib accepts every option in ``options``."""
    return not unsupported_compile_options(options)


#: XLA:CPU's options that choose which ops its libraries (YNNPACK, XNNPACK) fuse; ``""`` fuses none.
LIBRARY_FUSION_OPTIONS = ("xla_cpu_experimental_ynn_fusion_type", "xla_cpu_experimental_xnn_fusion_type")


def library_fusions_off() -> dict[str, str]:
    """Compile options that turn off XLA:CPU's library fusions, as far as this jaxlib has them.

    With them, dots and convolutions run as kernels of their own. A jaxlib without YNNPACK (0.7.2)
    fuses no library calls by default; its XNNPACK option is kept (it is off there already).
    """
    return {name: "" for name in LIBRARY_FUSION_OPTIONS if supports_compile_options({name: ""})}


def backend_started() -> bool:
    """Whether JAX has started a backend in this process (True when it cannot tell)."""
    try:
        from jax._src import xla_bridge  # private: jax has no public way to ask

        return bool(xla_bridge.backends_are_initialized())
    except (ImportError, AttributeError):
        return True


def hlo_text(module_proto: bytes) -> str:
    """The HLO text of a serialized ``xla.HloModuleProto``, printed by XLA itself (jaxlib's private
    ``XlaComputation``); ValueError in one line where XLA cannot read the bytes."""
    from jax._src import lib

    try:
        return lib.xla_client.XlaComputation(module_proto).as_hlo_text()
    except Exception as err:  # XLA's own error type differs between jaxlib versions
        raise ValueError(f"XLA could not read an HloModuleProto: {str(err).splitlines()[0]}") from None
