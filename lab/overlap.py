"""How much of a program the kernel data set has already seen: its kernels found in the data.

A program is *in distribution* for the kernel model when the kernels XLA cuts it into are kernels
the collection measured (same `tpucost.experiments.data.kernel.kernel_hash`: graph, shapes, backend, device
kind), and in the extreme when the model trained on them. `kernel_overlap` compiles a program
(never runs it), hashes each of its kernels as the collection does, and counts those found in a
kernel data set and in the training part of one of its splits. A hash depends on the jaxlib that
compiled the kernel (its XLA cuts programs differently), so compare a program with data collected
under the same jaxlib.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import jax

from tpucost.experiments.data import kernel as kernel_data
from tpucost.method import features, hlo, kernels
from tpucost.method.measure import compile_fn

__all__ = ["program_kernel_hashes", "kernel_overlap"]


def program_kernel_hashes(
    fn: Callable[..., Any], args: tuple[Any, ...], compiler_options: Mapping[str, Any] | None = None
) -> list[str]:
    """`kernel_data.kernel_hash` of every kernel of ``fn(*args)`` compiled for this backend (in
    the order of `tpucost.method.kernels.decompose`; a kernel run twice appears once)."""
    compiled = compile_fn(fn, args, compiler_options)
    backend, kind = jax.default_backend(), jax.devices()[0].device_kind
    module = hlo.parse_module(compiled.as_text(), source="<program>")
    return [kernel_data.kernel_hash(features.featurize(k), backend, kind) for k in kernels.decompose(module)]


def kernel_overlap(
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    dataset: kernel_data.KernelDataset | None = None,
    split: str = "random",
    compiler_options: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """``{"kernels", "in_data", "in_training", "share_in_data", "share_in_training", "jax"}`` of
    ``fn(*args)``: its distinct kernels, how many of them ``dataset`` (default: the bundled one)
    holds, and how many its ``split``'s training part holds (`kernel_data.split`, seed 0: what
    the bundled ``kernel-<split>`` model trained on)."""
    ds = kernel_data.load_dataset() if dataset is None else dataset
    hashes = set(program_kernel_hashes(fn, args, compiler_options))
    in_data = hashes & set(ds.kernel_hash.tolist())
    train = kernel_data.split(ds, split).train
    in_training = hashes & set(ds.kernel_hash[train].tolist())
    n = max(len(hashes), 1)
    return {
        "kernels": len(hashes),
        "in_data": len(in_data),
        "in_training": len(in_training),
        "share_in_data": len(in_data) / n,
        "share_in_training": len(in_training) / n,
        "jax": jax.__version__,
    }
