"""Solutions to the exercises of notebook 01 (from a JAX program to kernels), and their self-checks.

``exercise_N`` solves exercise N and returns what it prints; ``check_N`` grades a learner's answer
against it (`tpucost.solutions.grading`). The model is notebook 01's small CNN (`SmallCNN`), built
here again so that every solution runs on its own: ``exercise_1(batch=2, image=8, channels=4)``
takes seconds on a laptop CPU.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from tpucost import compat
from tpucost.method import features, hlo, kernels
from tpucost.method.measure import compile_fn
from tpucost.solutions.grading import close, correct, not_attempted, quietly, require, wrong_answer

#: Compile options that switch off XLA:CPU's library (YNNPACK/XNNPACK) fusions: the corpus's
#: ``no_library_fusion`` configuration.
NO_LIBRARY_FUSION = compat.library_fusions_off()


class SmallCNN(nnx.Module):
    """Notebook 01's model: convolution, batch norm, ReLU, 2x2 pooling, a two-layer MLP head.

    ``window`` is the convolution's window (3x3 in the notebook; exercise 5 draws another)."""

    def __init__(self, channels: int, rngs: nnx.Rngs, pool: str = "avg", window: tuple[int, int] = (3, 3)):
        self.conv = nnx.Conv(3, channels, tuple(window), rngs=rngs)
        self.norm = nnx.BatchNorm(channels, use_running_average=True, rngs=rngs)
        self.hidden = nnx.Linear(channels, 64, rngs=rngs)
        self.out = nnx.Linear(64, 10, rngs=rngs)
        self.pool = nnx.avg_pool if pool == "avg" else nnx.max_pool

    def __call__(self, x):
        x = nnx.relu(self.norm(self.conv(x)))
        x = self.pool(x, (2, 2), strides=(2, 2)).mean(axis=(1, 2))
        return jax.nn.log_softmax(self.out(nnx.gelu(self.hidden(x))))


def compiled_hlo(
    batch: int = 8,
    image: int = 32,
    channels: int = 32,
    pool: str = "avg",
    seed: int = 0,
    compiler_options: Mapping[str, Any] | None = None,
    window: tuple[int, int] = (3, 3),
) -> str:
    """The optimized HLO text of `SmallCNN` (convolution ``window``) for a ``batch x image x image x 3`` input."""
    model = SmallCNN(channels, nnx.Rngs(seed), pool=pool, window=window)
    x = jnp.ones((batch, image, image, 3))
    return compile_fn(lambda x: model(x), (x,), compiler_options).as_text()


def _kernels(text: str) -> list[kernels.Kernel]:
    return kernels.decompose(hlo.parse_module(text))


def _signature(k: kernels.Kernel) -> tuple[str, tuple[tuple[str, int], ...]]:
    """A kernel by what it does, not its name: kind and its ops (parameters left out)."""
    ops = Counter(n.opcode for n in k.nodes if n.opcode != "parameter")
    return k.kind, tuple(sorted(ops.items()))


def exercise_1(batch: int = 8, image: int = 32, channels: int = 32) -> dict[str, Any]:
    """Average against max pooling: the kernels that change, and how their ops change.

    Both pool with one ``reduce-window`` op; its reducer (``add`` or ``maximum``) is a computation
    of its own (``to_apply``), not a node of the kernel. Average pooling then multiplies by 1/4
    (a ``multiply`` with its ``broadcast`` constant), which max pooling drops; inside a YNNPACK
    fusion, max pooling's initial value (-inf) comes in as a ``parameter``. ``opcode_difference`` is max minus avg over the kernels
    that changed.
    """
    ks = {pool: _kernels(compiled_hlo(batch, image, channels, pool)) for pool in ("avg", "max")}
    sigs = {pool: Counter(_signature(k) for k in kk) for pool, kk in ks.items()}
    changed = {
        pool: [
            k
            for k in kk
            if sigs[pool][_signature(k)] > sigs["max" if pool == "avg" else "avg"][_signature(k)]
        ]
        for pool, kk in ks.items()
    }
    ops = {pool: Counter(n.opcode for k in kk for n in k.nodes) for pool, kk in changed.items()}
    difference = {
        op: ops["max"][op] - ops["avg"][op]
        for op in sorted(set(ops["max"]) | set(ops["avg"]))
        if ops["max"][op] != ops["avg"][op]
    }
    answer = {
        "kernels": {pool: len(kk) for pool, kk in ks.items()},
        "changed_kernels": sorted(k.name for k in changed["max"]),
        "opcode_difference": difference,
    }
    print(answer)
    return answer


def bytes_written(ks: list[kernels.Kernel]) -> int:
    """Bytes the kernels of one run write to memory: each kernel's output shape, times its calls per run."""
    return sum(k.instruction.shape.byte_size * k.calls_per_run for k in ks)


def exercise_2(batch: int = 8, image: int = 32, channels: int = 32) -> dict[str, dict[str, int]]:
    """Kernels, and the bytes they write, with XLA's fusion pass on (the default) and off
    (``xla_disable_hlo_passes=fusion``). Every kernel writes its output to memory; inside a fusion
    the intermediate values never leave registers or cache, so fusion off writes more."""
    compiled = {
        "default": _kernels(compiled_hlo(batch, image, channels)),
        "fusion_off": _kernels(
            compiled_hlo(batch, image, channels, compiler_options={"xla_disable_hlo_passes": "fusion"})
        ),
    }
    answer = {
        "kernels": {name: len(ks) for name, ks in compiled.items()},
        "bytes_written": {name: bytes_written(ks) for name, ks in compiled.items()},
    }
    print(answer)
    return answer


def richest_fusion(ks: list[kernels.Kernel]) -> kernels.Kernel:
    """The fused kernel with the most different opcodes (notebook 01 draws and featurizes it)."""
    fused = [k for k in ks if k.opcode == "fusion"] or ks
    return max(fused, key=lambda k: len({n.opcode for n in k.nodes}))


def exercise_3(
    sizes: tuple[tuple[int, int], tuple[int, int]] = ((8, 32), (16, 64)), channels: int = 32
) -> list[str]:
    """The feature columns of the kernel section 5 shows (`richest_fusion`) that change when (BATCH, IMAGE) changes."""
    first = richest_fusion(_kernels(compiled_hlo(*sizes[0], channels)))
    second = next(k for k in _kernels(compiled_hlo(*sizes[1], channels)) if k.name == first.name)
    a, b = (features.featurize(k).node_features for k in (first, second))
    if a.shape != b.shape:
        raise ValueError(
            f"kernel {first.name} has {a.shape[0]} nodes at one size and {b.shape[0]} at the other"
        )
    changed = [
        name for j, name in enumerate(features.NODE_FEATURE_NAMES) if not np.allclose(a[:, j], b[:, j])
    ]
    print(f"{len(changed)} columns change:", changed)
    return changed


def exercise_4(text: str | None = None, path: str | os.PathLike | None = None) -> dict[str, Any]:
    """Kernels of the module as the CLI counts them, then the error for a corrupted line.

    The corruption deletes the ``=`` of the ROOT instruction of the entry computation; the parser
    names the line and column (``python -m tpucost hlo FILE`` prints ``FILE:LINE:COLUMN: message``).
    With ``path``, the corrupted module is also written there (what the learner's file holds).
    """
    text = text or compiled_hlo(2, 8, 4)
    module = hlo.parse_module(text)
    lines = text.splitlines()
    entry = next(i for i, ln in enumerate(lines) if ln.startswith("ENTRY"))
    root = next(i for i in range(entry, len(lines)) if lines[i].lstrip().startswith("ROOT"))
    broken = lines.copy()
    broken[root] = broken[root].replace(" = ", " ", 1)
    if path is not None:
        Path(path).write_text("\n".join(broken) + "\n")
    try:
        hlo.parse_module("\n".join(broken))
    except hlo.HloParseError as err:
        error = {"line": err.line, "column": err.column, "message": str(err)}
    else:  # pragma: no cover - the parser accepts no such module
        raise AssertionError("the corrupted module parsed")
    answer = {"kernels": len(kernels.decompose(module)), "corrupted_line": root + 1, "error": error}
    print(answer)
    return answer


#: The sizes exercise 5's convolution window is drawn from: none is SmallCNN's 3, nor the pooling's 1 or 2.
MYSTERY_SIZES: tuple[int, ...] = (4, 5, 6, 7)


def mystery_window(seed: int = 0) -> tuple[int, int]:
    """Exercise 5's convolution window: two different sizes of `MYSTERY_SIZES`, drawn from ``seed``.

    SmallCNN's 3x3 window is known by construction, so reading it back from the features proves
    nothing; this one is known only to whoever reads it from the module."""
    first, second = np.random.default_rng(seed).choice(MYSTERY_SIZES, size=2, replace=False)
    return int(first), int(second)


def mystery_hlo(
    batch: int = 8,
    image: int = 32,
    channels: int = 32,
    seed: int = 0,
    compiler_options: Mapping[str, Any] | None = None,
) -> str:
    """Exercise 5's module: the optimized HLO of `SmallCNN` with the convolution window `mystery_window` (``seed``)."""
    return compiled_hlo(
        batch, image, channels, compiler_options=compiler_options, window=mystery_window(seed)
    )


def convolution_node(ks: list[kernels.Kernel]) -> tuple[kernels.Kernel, int]:
    """The kernel that holds the first ``convolution`` node, and that node's index in it."""
    found = next(((k, i) for k in ks for i, n in enumerate(k.nodes) if n.opcode == "convolution"), None)
    if found is None:
        raise ValueError(f"none of the {len(ks)} kernels has a convolution node")
    return found


def exercise_5(batch: int = 8, image: int = 32, channels: int = 32, seed: int = 0) -> dict[str, Any]:
    """`mystery_hlo`'s convolution: its ``window`` attribute against its window feature columns.

    With XLA:CPU's defaults at the notebook's sizes the convolution is a node inside a YNNPACK
    fusion (kind ``kCustom``); with the library fusions off (`NO_LIBRARY_FUSION`) it is a kernel of
    its own. Either way its features are those of the ``convolution`` node. Window sizes are
    stored as ``log1p``: `np.expm1` undoes it.
    """
    answer: dict[str, Any] = {}
    for name, options in (("default", None), ("library fusions off", NO_LIBRARY_FUSION)):
        kernel, node = convolution_node(_kernels(mystery_hlo(batch, image, channels, seed, options)))
        window = kernel.nodes[node].attributes["window"]
        row = features.featurize(kernel).node_features[node]
        cols = [features.NODE_FEATURE_NAMES.index(f"window_size{d}") for d in range(window.rank)]
        answer[name] = {
            "kernel": kernel.name,
            "kind": kernel.kind,
            "window_size": tuple(window.size),
            "from_features": tuple(int(round(float(np.expm1(row[c])))) for c in cols),
        }
    print(answer)
    return answer


# ---------------------------------------------------------------------------------------------
# Self-checks: ``check_N(answer, ...)`` grades exercise N (see `tpucost.solutions.grading`)
# ---------------------------------------------------------------------------------------------


def check_1(changed_kernel: str | None, batch: int, image: int, channels: int) -> bool:
    """The name of the kernel that changes when average pooling becomes max pooling."""
    if changed_kernel is None:
        return not_attempted(1, "changed_kernel to a kernel's name (a string)")
    answer = quietly(exercise_1, batch, image, channels)
    names = {k.name for k in _kernels(compiled_hlo(batch, image, channels))}
    require(
        changed_kernel in names,
        1,
        f"{changed_kernel!r} is not a kernel of the default compile; use a name from [k.name for k in ks].",
    )
    require(
        changed_kernel in answer["changed_kernels"],
        1,
        f"{changed_kernel} is the same in both compiles. Compare the ops of each kernel "
        "(Counter(n.opcode for n in k.nodes)) between the two pooling variants.",
    )
    return correct(1, "Now look at which ops it lost or gained, and why.")


def check_2(bytes_fusion_off: int | None, batch: int, image: int, channels: int) -> bool:
    """The bytes the kernels write with XLA's fusion pass off (the sum of their output sizes)."""
    if bytes_fusion_off is None:
        return not_attempted(2, "bytes_fusion_off to the bytes the kernels write (an int)")
    answer = quietly(exercise_2, batch, image, channels)
    require(
        not close(bytes_fusion_off, answer["bytes_written"]["default"], 0.5),
        2,
        "that is the default compile's total; pass compiler_options={'xla_disable_hlo_passes': 'fusion'} "
        "to .compile().",
    )
    require(
        not close(bytes_fusion_off, answer["kernels"]["fusion_off"], 0.5),
        2,
        "that is the number of kernels; add up the size in bytes of each kernel's output "
        "(k.instruction.shape.byte_size).",
    )
    require(
        close(bytes_fusion_off, answer["bytes_written"]["fusion_off"], 0.5),
        2,
        "sum k.instruction.shape.byte_size over kernels.decompose(hlo.parse_module(text)) of the compile "
        "with the fusion pass off, at the notebook's BATCH, IMAGE and CHANNELS (bytes, not elements).",
    )
    ratio = answer["bytes_written"]["fusion_off"] / answer["bytes_written"]["default"]
    return correct(2, f"{ratio:.1f}x the default compile's bytes: where do the extra bytes come from?")


def check_3(changed_columns: Any, sizes: tuple[tuple[int, int], tuple[int, int]], channels: int) -> bool:
    """The feature columns that change when BATCH and IMAGE double."""
    if changed_columns is None:
        return not_attempted(3, "changed_columns to a set of column names")
    expected = set(quietly(exercise_3, sizes, channels))
    answer = set(changed_columns)
    unknown = answer - set(features.NODE_FEATURE_NAMES)
    require(not unknown, 3, f"{sorted(unknown)} are not in features.NODE_FEATURE_NAMES.")
    require(
        answer == expected,
        3,
        f"{len(answer - expected)} of your columns do not change, and {len(expected - answer)} that "
        "change are missing. Compare the two feature matrices column by column (np.allclose).",
    )
    return correct(3)


def check_4(corrupted_file: str | os.PathLike | None, error_line: int | None, original_text: str) -> bool:
    """The line the CLI's error names, for a copy of ``original_text`` with one ``=`` deleted."""
    if corrupted_file is None or error_line is None:
        return not_attempted(4, "corrupted_file (its path) and error_line (an int)")
    path = Path(corrupted_file)
    require(path.is_file(), 4, f"there is no file {path}; save hlo_text to it first.")
    old, new = original_text.splitlines(), path.read_text().splitlines()
    require(
        len(old) == len(new),
        4,
        f"{path} has {len(new)} lines, hlo_text {len(old)}; change one line, delete none.",
    )
    differ = [i for i, (a, b) in enumerate(zip(old, new, strict=True)) if a != b]
    require(
        len(differ) == 1 and new[differ[0]].count("=") < old[differ[0]].count("="),
        4,
        f"{path} differs from hlo_text on {len(differ)} lines; delete the '=' of exactly one instruction line.",
    )
    try:
        hlo.parse_module(path.read_text())
    except hlo.HloParseError as err:
        parser_line = err.line
    else:
        raise wrong_answer(4, f"{path} still parses; delete an instruction's '='.")
    require(
        int(error_line) == parser_line,
        4,
        "read LINE from the message FILE:LINE:COLUMN: ...; lines count from 1.",
    )
    return correct(4, f"It is the line you changed ({differ[0] + 1}).")


def check_5(window_from_features: Any, batch: int, image: int, channels: int, seed: int = 0) -> bool:
    """`mystery_hlo`'s convolution window, read back from its feature columns (log1p undone).

    SmallCNN's own 3x3, the feature values themselves, the sizes in the wrong order and any other
    window fail, each with its hint."""
    if window_from_features is None:
        return not_attempted(5, "window_from_features to a tuple of ints")
    try:
        raw = np.asarray([float(v) for v in window_from_features])
    except (TypeError, ValueError):
        raise wrong_answer(
            5, "give the window as a tuple of numbers: (window_size0, window_size1)."
        ) from None
    expected = quietly(exercise_5, batch, image, channels, seed)["default"]["from_features"]
    require(len(raw) == len(expected), 5, f"give {len(expected)} sizes: (window_size0, window_size1).")
    require(
        not np.allclose(raw, np.log1p(expected)),
        5,
        "the columns hold log1p(size): undo it with np.expm1 and round to an int.",
    )
    got = tuple(int(round(v)) for v in raw)
    require(
        got != (3, 3),
        5,
        "3x3 is SmallCNN's window, known by construction; read the window of "
        "solutions.mystery_hlo(BATCH, IMAGE, CHANNELS, SEED)'s convolution.",
    )
    require(
        got != expected[::-1], 5, "the sizes are in the wrong order: window_size0 first, then window_size1."
    )
    require(
        got == expected,
        5,
        "find the node whose opcode is 'convolution' among the nodes of mystery_hlo's kernels (not the "
        "pooling's reduce-window), featurize its kernel, and read window_size0 and window_size1 of its row.",
    )
    return correct(
        5,
        f"A {got[0]}x{got[1]} window. Now compile it with library fusions off: is the convolution a kernel "
        "of its own, and are its features the same?",
    )
