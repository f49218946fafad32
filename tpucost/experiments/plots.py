"""Figures the notebooks show: kernel graphs (`tpucost.experiments.kernel_drawing`, drawn by
`draw_kernel`), feature matrices, tables and autotuning results.

Each function draws on a matplotlib Axes (a new figure when `ax` is None) and returns it, so
notebooks stay one call per picture.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.colors import ListedColormap

from tpucost.experiments.autotune.protocol import STARTS
from tpucost.experiments.data.kernel import KernelDataset
from tpucost.experiments.kernel_drawing import draw_kernel, kernel_to_networkx
from tpucost.experiments.verdicts import ADDS_UP
from tpucost.method import metrics
from tpucost.method.autotune.search import SearchRun
from tpucost.method.features import OPCODE_VOCAB, KernelGraph
from tpucost.method.kernels import Kernel
from tpucost.method.measure import Measurement

__all__ = [
    "kernel_to_networkx",
    "draw_kernel",
    "feature_heatmap",
    "kernel_table",
    "kernel_timeline",
    "additivity_hist",
    "runtime_by",
    "opcode_frequencies",
    "kernel_sizes",
    "noise_scatter",
    "learning_curves",
    "predicted_vs_measured",
    "error_by_kind",
    "program_kernels",
    "program_estimates",
    "tile_landscape",
    "top_k_curves",
    "overhead_shares",
    "plot_speedups",
    "plot_speedup_panels",
    "plot_progress",
    "tile_verdicts",
]


def feature_heatmap(
    graph: KernelGraph,
    feature_names: Sequence[str],
    ax: plt.Axes | None = None,
    drop_zero_columns: bool = True,
) -> plt.Axes:
    """Heatmap of a kernel's node feature matrix: one row per feature (named), one column per node
    (numbered, with its opcode), so that every label reads horizontally at a legible size."""

    columns = [f"{i}: {OPCODE_VOCAB[int(op)]}" for i, op in enumerate(graph.opcodes)]
    frame = pd.DataFrame(np.asarray(graph.node_features).T, index=list(feature_names), columns=columns)
    if drop_zero_columns:
        frame = frame.loc[(frame != 0).any(axis=1)]
    if ax is None:
        _, ax = plt.subplots(figsize=(0.6 * frame.shape[1] + 4, 0.2 * frame.shape[0] + 1.5))
    sns.heatmap(
        frame,
        ax=ax,
        mask=frame == 0,  # a zero shows as the background, so small non-zero values stand out
        cmap="viridis",
        xticklabels=True,
        yticklabels=True,
        linewidths=0.3,
        linecolor="#f1f3f5",
        cbar_kws={"label": "feature value (log-scaled magnitudes; white: 0)"},
    )
    ax.set_facecolor("white")
    ax.set_title(
        f"node features of {graph.name}: {frame.shape[0]} non-zero of {len(feature_names)} features "
        f"(rows) for its {frame.shape[1]} nodes (columns); white cells are 0"
    )
    ax.set_xlabel("node: opcode")
    ax.tick_params(axis="y", labelsize=8)
    ax.tick_params(axis="x", labelsize=9, labelrotation=45)
    return ax


def kernel_table(kernels: Sequence[Kernel]) -> pd.DataFrame:
    """One row per kernel: name, kind, computation, op count, output shape, calls per run."""

    return pd.DataFrame(
        [
            {
                "kernel": k.name,
                "kind": k.kind,
                "computation": k.computation,
                "ops": sum(1 for n in k.nodes if n.opcode != "parameter"),
                "inputs": k.num_inputs,
                "output shape": str(k.instruction.shape),
                "calls/run": k.calls_per_run,
            }
            for k in kernels
        ]
    )


def _axes(ax: plt.Axes | None, figsize: tuple[float, float]) -> plt.Axes:
    if ax is None:
        _, ax = plt.subplots(figsize=figsize)
    return ax


def kernel_timeline(measurement: Measurement, ax: plt.Axes | None = None, max_rows: int = 40) -> plt.Axes:
    """Gantt chart of one whole traced run: a bar per kernel call, from its start, for its label.

    Every call of the run is drawn. A run with more distinct kernels than ``max_rows`` gives the
    ``max_rows - 1`` longest their own rows and draws the rest on one shared row, and the title
    says so.
    """
    events = list(measurement.timeline)
    total: dict[str, float] = {}
    for name, _, duration in events:
        total[name] = total.get(name, 0.0) + duration
    own_rows = sorted(total, key=total.get, reverse=True)
    other = f"other ({len(own_rows) - max_rows + 1} kernels)" if len(own_rows) > max_rows else None
    if other:
        own_rows = own_rows[: max_rows - 1]
    first_start = {}
    for name, start, _ in events:
        first_start.setdefault(name, start)
    names = sorted(own_rows, key=first_start.get) + ([other] if other else [])
    row = {name: i for i, name in enumerate(names)}
    ax = _axes(ax, (10, 0.28 * len(names) + 1.5))
    for name, start, duration in events:
        color = "#e76f51" if name in measurement.async_kernels else "#2a9d8f"
        ax.barh(row.get(name, row.get(other)), duration / 1e3, left=start / 1e3, color=color, height=0.7)
    ax.set_yticks(range(len(names)), names, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("time since the run's first kernel (us)")
    wall = min(measurement.wall_ns_per_run) / 1e3
    shown = f"all {len(events)} kernel calls of one run" + (
        f", the {len(own_rows)} longest kernels on their own rows" if other else ""
    )
    ax.set_title(
        f"{measurement.module_name} on {measurement.backend}: {shown}\n"
        f"fastest run {wall:.0f} us; labels sum to {measurement.additivity_ratio:.2f}x of it "
        f"(red: asynchronous kernels)",
        fontsize=10,
    )
    return ax


def additivity_hist(table: pd.DataFrame, ax: plt.Axes | None = None, clip: float = 2.5) -> plt.Axes:
    """Distribution of summed kernel labels / wall time per (program, configuration), by family.

    The x axis stops at ``clip``; how many pairs lie beyond it (and the largest ratio) is written
    on the figure, so one extreme pair does not squeeze the others into a corner."""

    ax = _axes(ax, (8, 0.35 * table["family"].nunique() + 1.5))
    sns.boxplot(data=table, x="additivity_ratio", y="family", ax=ax, color="#a8dadc", fliersize=2)

    ax.axvspan(*ADDS_UP, color="#2a9d8f", alpha=0.12, label=f"{ADDS_UP[0]}-{ADDS_UP[1]}: adds up")
    ax.axvline(1.0, color="#264653", lw=1)
    beyond = table["additivity_ratio"] > clip
    if beyond.any():
        ax.set_xlim(0, clip)
        ax.text(
            0.99,
            0.99,
            f"{int(beyond.sum())} pair(s) beyond {clip:g} (up to {table['additivity_ratio'].max():.1f}) not shown",
            transform=ax.transAxes,
            ha="right",
            va="top",
            fontsize=8,
        )
    ax.set_xlabel("sum of kernel labels / program wall time")
    ax.set_ylabel("program family")
    ax.set_title(f"additivity of {len(table):,} measured (program, configuration) pairs")
    ax.legend(loc="lower right")
    return ax


def runtime_by(frame: pd.DataFrame, by: str, ax: plt.Axes | None = None, top: int = 20) -> plt.Axes:
    """Kernel runtimes (log scale) grouped by a column such as "family" or "kind"."""

    order = frame[by].value_counts().index[:top]
    ax = _axes(ax, (8, 0.35 * len(order) + 1.5))
    sns.boxplot(
        data=frame[frame[by].isin(order)],
        x="runtime_ns",
        y=by,
        order=order,
        ax=ax,
        log_scale=True,
        color="#bde0fe",
        fliersize=1.5,
    )
    ax.set_xlabel("kernel runtime (ns, log scale)")
    shown = (
        f"the {len(order)} largest of {frame[by].nunique()} {by} values"
        if frame[by].nunique() > len(order)
        else f"every {by}"
    )
    ax.set_title(f"kernel runtime by {by}: {int(frame[by].isin(order).sum()):,} kernels, {shown}")
    return ax


def opcode_frequencies(dataset: KernelDataset, ax: plt.Axes | None = None, top: int = 25) -> plt.Axes:
    """How many nodes of each opcode the data set's kernels hold (parameters left out)."""

    counts = np.bincount(dataset.table.opcodes, minlength=len(OPCODE_VOCAB))
    names = np.array(OPCODE_VOCAB)
    keep = [i for i in np.argsort(-counts) if names[i] != "parameter" and counts[i] > 0][:top]
    ax = _axes(ax, (8, 0.28 * len(keep) + 1.5))
    # Dots, not bars: on a log axis a bar's length depends on where the axis starts.
    ax.hlines(names[keep], 0, counts[keep], color="#dee2e6", lw=1)
    ax.plot(counts[keep], names[keep], "o", color="#457b9d", ms=6)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlim(counts[keep].min() / 2, counts[keep].max() * 2)
    ax.grid(axis="x", which="major", color="#e9ecef")
    ax.set_xlabel("nodes (log scale)")
    shown = f"the {len(keep)} most frequent" if len(keep) == top else "every opcode"
    ax.set_title(f"opcodes over all kernel nodes ({shown}; parameters left out)")
    return ax


def kernel_sizes(frame: pd.DataFrame, ax: plt.Axes | None = None, bins: int = 30) -> plt.Axes:
    """Distribution of kernel sizes in nodes, on log-spaced bins whose edges sit between whole
    numbers. Sizes are integers, so such bins hold 1, 2, 3, ... sizes each; a bar's height is the
    number of kernels per size in its bin (its count divided by the sizes it holds), which keeps
    wider bins from standing out as taller ones. The bars' areas add up to the kernels."""

    ax = _axes(ax, (7, 3.5))
    largest = int(frame["n_nodes"].max())
    edges = np.unique(np.round(np.logspace(0, np.log10(largest + 1), bins))) + 0.5
    edges = np.concatenate([[0.5], edges[edges > 0.5]])
    counts, _ = np.histogram(frame["n_nodes"], bins=edges)
    sizes = np.diff(edges)  # whole numbers per bin (edges are half-integers)
    ax.bar(edges[:-1], counts / sizes, width=sizes, align="edge", color="#6d597a")
    ax.set_xscale("log")
    ax.set_yscale("log")  # the tail of large kernels stays visible
    ax.set_xlabel("nodes per kernel (log scale)")
    ax.set_ylabel("kernels per node count (log scale)")
    ax.set_title(f"kernel size: {len(frame):,} kernels, 1 to {largest} nodes")
    return ax


def noise_scatter(rows: Sequence[dict], ax: plt.Axes | None = None) -> plt.Axes:
    """Stored label vs the same kernel re-measured in a fresh process (log-log)."""
    ax = _axes(ax, (5, 5))
    old = np.array([r["stored_ns"] for r in rows])
    new = np.array([r["remeasured_ns"] for r in rows])
    ax.scatter(old, new, s=10, alpha=0.6, color="#264653")
    lo, hi = min(old.min(), new.min()), max(old.max(), new.max())
    ax.plot([lo, hi], [lo, hi], color="#e76f51", lw=1)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("stored label (ns)")
    ax.set_ylabel("re-measured (ns)")
    rel = np.abs(new - old) / old
    ax.set_title(f"label noise: {len(rows)} kernels re-measured, median {np.median(rel):.1%} apart")
    return ax


def learning_curves(
    histories: dict[str, dict[str, list[float]]],
    ax: plt.Axes | None = None,
    examples_per_epoch: Mapping[str, int] | None = None,
    noise_floor: float | None = None,
    title: str | None = None,
) -> plt.Axes:
    """Train and validation loss of each model (``{"gnn": {"train_loss": [...], "val_loss": [...]}}``).

    Against epochs, or, with ``examples_per_epoch`` (``{name: training kernels per epoch}``, every
    name of ``histories``), against the training kernels seen, so that runs with epochs of
    different sizes compare. ``noise_floor`` draws the loss a perfect model would still have
    (e.g. the label noise in the same units) as a horizontal line. A dot marks each run's best
    validation loss.
    """
    ax = _axes(ax, (7.5, 4.2))
    colors = ("#1d3557", "#e63946", "#2a9d8f", "#f4a261", "#6d597a", "#8d99ae")
    markers = ("o", "s", "^", "D", "v", "P")  # runs whose curves coincide stay apart by their markers
    for (name, history), color, marker in zip(histories.items(), colors, markers, strict=False):
        epochs = np.arange(1, len(history["train_loss"]) + 1, dtype=float)
        x = epochs * examples_per_epoch[name] / 1e3 if examples_per_epoch is not None else epochs
        every = max(1, len(x) // 10)
        style = {"color": color, "marker": marker, "markevery": every, "ms": 4, "mfc": "white"}
        ax.plot(x, history["train_loss"], ls="--", lw=1.2, label=f"{name} train", **style)
        ax.plot(x, history["val_loss"], lw=1.6, label=f"{name} validation", **style)
        best = int(np.argmin(history["val_loss"]))
        ax.plot(x[best], history["val_loss"][best], marker, color=color, ms=8, mec="black")
    if noise_floor is not None:
        ax.axhline(noise_floor, color="#6c757d", ls=":", lw=1.5, label="label noise (re-measured labels)")
    ax.set_yscale("log")
    if examples_per_epoch is not None:
        ax.set_xscale("log")
        ax.set_xlabel("training kernels seen (thousands, log scale)")
    else:
        ax.set_xlabel("epoch")
    ax.set_ylabel("MSE on standardised log runtime")
    if title:
        ax.set_title(title)
    ax.legend(fontsize=8)
    return ax


def predicted_vs_measured(
    predictions: dict[str, np.ndarray],
    measured: np.ndarray,
    axes: Sequence[plt.Axes] | None = None,
    hexbin: bool = True,
    title: str | None = None,
) -> Sequence[plt.Axes]:
    """Predicted against measured kernel runtimes, one log-log panel per method, on shared axes.

    Each panel's title gives the method's MAPE (mean absolute percentage error over the kernels
    shown, in %) and the share of kernels predicted within a factor of 2. The solid line is a
    perfect prediction, the dashed ones a factor of 2 off. ``hexbin`` (default) counts kernels per
    hexagonal cell on one colour scale for all panels (a scatter hides where most points lie);
    ``hexbin=False`` draws a scatter. ``title`` goes above all panels (say which kernels they show).
    """
    measured = np.asarray(measured, dtype=np.float64)
    if axes is None:
        fig, axes = plt.subplots(
            1,
            len(predictions),
            figsize=(4.3 * len(predictions) + 0.8, 4.4),
            squeeze=False,
            sharex=True,
            sharey=True,
        )
        axes = axes[0]
    else:
        fig = axes[0].figure
    preds = {name: np.asarray(p, dtype=np.float64) for name, p in predictions.items()}
    lo = min(measured.min(), *(p[p > 0].min() for p in preds.values())) / 1.5
    hi = max(measured.max(), *(p.max() for p in preds.values())) * 1.5
    cells = []
    for ax, (name, pred) in zip(axes, preds.items(), strict=True):
        ok = pred > 0
        if hexbin:
            cells.append(
                ax.hexbin(
                    measured[ok],
                    pred[ok],
                    xscale="log",
                    yscale="log",
                    bins="log",
                    mincnt=1,
                    gridsize=40,
                    cmap="viridis",
                    extent=(np.log10(lo), np.log10(hi), np.log10(lo), np.log10(hi)),
                )
            )
        else:
            ax.scatter(measured[ok], pred[ok], s=4, alpha=0.35, color="#1d3557")
        ax.plot([lo, hi], [lo, hi], color="#e63946", lw=1.5, label="perfect")
        for i, factor in enumerate((0.5, 2.0)):
            ax.plot(
                [lo, hi],
                [lo * factor, hi * factor],
                color="#e63946",
                lw=1.2,
                ls="--",
                label="2x off" if i == 0 else None,
            )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        ax.set_xlabel("measured runtime (ns)")
        within = 100 * metrics.share_within_factor(pred, measured, 2)
        mape = metrics.mape(pred, measured)
        ax.set_title(f"{name}: MAPE {mape:.0f}%, {within:.0f}% within 2x", fontsize=10)
    axes[0].set_ylabel("predicted runtime (ns)")
    axes[0].legend(loc="upper left", fontsize=8)
    if cells:
        top = max(float(np.max(c.get_array())) for c in cells)
        for c in cells:
            c.set_clim(1, top)
        fig.colorbar(cells[-1], ax=list(axes), label="kernels per cell (log scale)", fraction=0.03, pad=0.02)
    if title:
        fig.suptitle(title, fontsize=11)
    return axes


def error_by_kind(
    table: pd.DataFrame,
    ax: plt.Axes | None = None,
    top: int = 15,
    noise: float | None = None,
    title: str | None = None,
) -> plt.Axes:
    """Median absolute percentage error per kernel kind (rows of `tpucost.method.metrics.error_by_kind`).

    ``noise`` (percent) draws the label noise as a vertical line: an error near it is as good as
    a second measurement. Compare panels on one x scale (``plt.subplots(..., sharex=True)``).
    """
    frame = table.sort_values("count", ascending=False).head(top)
    ax = _axes(ax, (7, 0.35 * len(frame) + 1.5))
    ax.barh(frame.index.astype(str), frame["median_ape"], color="#457b9d")
    ax.invert_yaxis()
    ax.set_xlabel("median absolute percentage error (%)")
    ax.set_ylabel("kernel kind")
    for y, (value, count) in enumerate(zip(frame["median_ape"], frame["count"], strict=True)):
        ax.text(value, y, f"  n={count}", va="center", fontsize=7)
    if noise is not None:
        ax.axvline(noise, color="#e76f51", ls=":", lw=1.5, label=f"label noise ({noise:.1f}%)")
        ax.legend(loc="lower right", fontsize=8)
    if title:
        ax.set_title(title)
    return ax


def program_kernels(
    names: Sequence[str],
    runtimes_us: Mapping[str, Sequence[float]],
    ax: plt.Axes | None = None,
    title: str | None = None,
) -> plt.Axes:
    """One row per kernel of a program, one dot per series (e.g. predicted and measured), in us (log
    scale); a grey line joins a row's dots. Dots, not bars: on a log axis a bar's length depends on
    where the axis starts, a dot's position does not. Estimates without a measurement among them
    (a compiler's): `program_estimates`."""
    return _kernel_dots(names, runtimes_us, ax, title, "kernel runtime (us, log scale)", "osD^", True)


def program_estimates(
    names: Sequence[str],
    estimates_us: Mapping[str, Sequence[float]],
    ax: plt.Axes | None = None,
    title: str | None = None,
) -> plt.Axes:
    """`program_kernels` for models' estimates of a program's kernels (the TPU compiler's, a
    roofline), never a measurement: the axis says "estimated", the markers are open and of other
    shapes than `program_kernels`' measured and predicted dots."""
    xlabel = "estimated kernel time (us, log scale; the compiler's model or a roofline, not measured)"
    return _kernel_dots(names, estimates_us, ax, title, xlabel, "v<>p", False)


def _kernel_dots(
    names: Sequence[str],
    runtimes_us: Mapping[str, Sequence[float]],
    ax: plt.Axes | None,
    title: str | None,
    xlabel: str,
    markers: str,
    filled: bool,
) -> plt.Axes:
    series = {k: np.asarray(v, dtype=float) for k, v in runtimes_us.items()}
    ax = _axes(ax, (8, 0.3 * len(names) + 1.8))
    y = np.arange(len(names))
    values = np.vstack(list(series.values())) if series else np.full((1, len(names)), np.nan)
    finite = np.where(np.isfinite(values) & (values > 0), values, np.nan)
    with np.errstate(all="ignore"):
        low, high = np.nanmin(finite, axis=0), np.nanmax(finite, axis=0)
    ax.hlines(y, low, high, color="#dee2e6", lw=2, zorder=1)
    colors = ("#495057", "#457b9d", "#e76f51", "#2a9d8f")
    for (label, vals), color, marker in zip(series.items(), colors, markers, strict=False):
        face = color if filled else "none"
        ax.plot(vals, y, marker, color=color, mfc=face, ms=6, label=label, zorder=2, ls="none")
    ax.set_yticks(y, list(names), fontsize=7)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.grid(axis="x", which="major", color="#e9ecef")
    ax.set_xlabel(xlabel)
    ax.legend(fontsize=8, loc="lower right")
    if title:
        ax.set_title(title, fontsize=10)
    return ax


def tile_landscape(
    configs: Sequence[dict],
    runtime_ns: Sequence[float],
    x: str,
    y: str,
    ax: plt.Axes | None = None,
    title: str | None = None,
) -> plt.Axes:
    """Heatmap of one kernel's runtime (ms) over two block dims ``x`` and ``y`` (seaborn).

    Where several configurations share (x, y) (they differ in other block dims), the cell shows
    the fastest of them; empty cells are block shapes that are illegal or were not measured.
    """

    frame = pd.DataFrame(
        [{x: c[x], y: c[y], "ms": t / 1e6} for c, t in zip(configs, runtime_ns, strict=True)]
    )
    grid = frame.groupby([y, x])["ms"].min().unstack(x).sort_index(ascending=False)
    ax = _axes(ax, (6.5, 5))
    sns.heatmap(
        grid,
        annot=True,
        fmt=".2f",
        cmap="viridis_r",
        cbar_kws={"label": "runtime (ms, fastest over other dims)"},
        ax=ax,
    )
    ax.set_xlabel(f"block {x}")
    ax.set_ylabel(f"block {y}")
    ax.set_title(title or f"runtime over block shapes ({x} x {y})")
    return ax


def overhead_shares(
    steps: Sequence[int],
    shares: Mapping[str, Sequence[float]],
    ax: plt.Axes | None = None,
    title: str = "share of each configuration's runtime that the grid loop costs",
) -> plt.Axes:
    """Per-step overhead share (`tpucost.experiments.tiles.step_overhead_shares`, %) against the number of grid
    steps, one marker series per tile lowering (``shares[lowering][i]`` for configuration i)."""
    ax = _axes(ax, (7, 3.8))
    for i, (name, values) in enumerate(shares.items()):
        ax.scatter(
            steps,
            100.0 * np.asarray(values, float),
            marker="os^"[i % 3],
            facecolors="none",
            edgecolors=f"C{i}",  # open markers need an edge colour to show at all
            label=name,
        )
    ax.axhline(20.0, color="grey", linestyle=":", linewidth=1, label="20%")
    ax.set_xscale("log")
    ax.set_xlabel("grid steps of the configuration (log scale)")
    ax.set_ylabel("overhead kernel / kernel (%)")
    ax.set_title(title)
    ax.legend(title="lowering")
    return ax


def top_k_curves(
    curves: dict[str, Sequence[float]],
    ax: plt.Axes | None = None,
    title: str = "top-k slowdown on the test kernels (lower is better)",
) -> plt.Axes:
    """Mean top-k slowdown (%) against k, one line per method; ``curves[name][k-1]`` is the mean
    over kernels of the fraction for k.

    Methods that coincide (often all at 0%) stay visible: each line has its own style and an open
    marker of its own shape, the earlier lines' markers larger (so one drawn on another rings it),
    and its points are shifted sideways."""
    ax = _axes(ax, (7.5, 4))
    styles = ["-", "--", ":", "-.", (0, (3, 1, 1, 1))]
    markers = ["o", "s", "^", "D", "v", "P"]
    shift = np.linspace(-0.25, 0.25, len(curves)) if len(curves) > 1 else [0.0]
    for i, (name, values) in enumerate(curves.items()):
        ks = np.arange(1, len(values) + 1) + shift[i]
        ax.plot(
            ks,
            100.0 * np.asarray(values, dtype=float),
            linestyle=styles[i % len(styles)],
            marker=markers[i % len(markers)],
            markersize=max(10.0 - 1.5 * i, 4.0),
            markerfacecolor="none",
            markeredgewidth=1.3,
            label=name,
        )
    longest = max((len(v) for v in curves.values()), default=1)
    ax.set_xticks(range(1, longest + 1, 1 if longest <= 10 else 2))
    ax.set_xlabel("k (configurations measured, best predicted first; points shifted sideways)")
    ax.set_ylabel("mean slowdown vs the true best\n(%, symlog scale)")
    ax.set_yscale("symlog", linthresh=1.0)  # 0 stays visible; 1% .. 1000% on one axis
    ax.set_title(title)
    ax.set_ylim(bottom=-0.1)
    ax.legend()
    return ax


# ----------------------------------------------------------------------------------- autotuning


#: How each autotuning arm is drawn and named in the figures.
ARM_LABELS: dict[str, str] = {
    "device_only": "device only",
    "model_guided": "model + device",
    "random_order": "model's picks, random order",
    "heuristic": "heuristic",
}
ARM_COLORS: dict[str, str] = {
    "device_only": "tab:blue",
    "model_guided": "tab:orange",
    "random_order": "tab:green",
    "heuristic": "tab:gray",
}


def plot_speedups(
    report: Mapping[str, Any], ax: Any = None, title: str | None = None, budget: str = "device_seconds"
) -> Any:
    """The paper's Fig. 4 as bars: each arm's mean speedup over the default (error bars: min..max
    over seeds, drawn only when there are two seeds or more) from the default and from random
    starts, at equal device seconds (``budget="device_seconds"``, the paper's) or at equal wall
    time (``"wall_time"``, `tpucost.experiments.autotune.wall_time`).

    Where the report has a noise floor (``report["noise"]["spread"]`` = s, the default's slowest
    over fastest fresh-process runtime minus 1, `tpucost.experiments.autotune.measurement_noise`), a grey band
    spans 1 / (1 + s) .. 1 + s: where a speedup of the default over itself, taken from two such
    measurements, could land. Its legend reads "noise floor" and s in %."""
    ax = ax or plt.subplots(figsize=(6.5, 3.6))[1]
    section = report if budget == "device_seconds" else report["wall_time"]
    strategies = section["strategies"]
    arms = [a for a in ARM_LABELS if a in strategies]
    starts = [s for s in STARTS if s in strategies[arms[0]]]
    x = np.arange(len(starts))
    width = 0.8 / len(arms)
    several_seeds = len(report.get("seeds", [])) != 1
    for j, arm in enumerate(arms):
        entries = [strategies[arm][s] for s in starts]
        mean = np.array([e["speedup_vs_default"] for e in entries])
        err = np.array(
            [
                [m - e["speedup_spread"]["min"], e["speedup_spread"]["max"] - m]
                for m, e in zip(mean, entries, strict=True)
            ]
        ).T
        ax.bar(
            x + (j - (len(arms) - 1) / 2) * width,
            mean,
            width,
            yerr=err if several_seeds else None,
            capsize=3 if several_seeds else 0,
            color=ARM_COLORS[arm],
            label=ARM_LABELS[arm],
        )
    ax.axhline(1.0, color="k", lw=0.8)
    noise = report.get("noise", {}).get("spread")
    if noise is not None:  # the band within which a speedup cannot be told from noise
        ax.axhspan(
            1.0 / (1.0 + noise), 1.0 + noise, color="0.85", zorder=0, label=f"noise floor {100 * noise:.1f}%"
        )
    ax.set_xticks(x, [s.replace("_", " ") for s in starts])
    ax.set_ylabel("speedup over the default")
    name = "device s" if budget == "device_seconds" else "s wall time"
    ax.set_title(
        title or f"{report['program']} ({report['space']} space), {section['budget_seconds']:g} {name}"
    )
    bottom, top = ax.get_ylim()
    ax.set_ylim(bottom, top + 0.45 * (top - bottom))  # headroom: the legend sits above the bars
    ax.legend(fontsize=7, loc="upper left", ncol=2)
    return ax


def plot_speedup_panels(
    reports: Mapping[str, Mapping[str, Any]], title: str | None = None, budget: str = "device_seconds"
) -> Any:
    """`plot_speedups` for several reports side by side, one panel per program, at one ``budget``;
    panels of the same space share their y axis (program-space speedups are a few percent,
    tile-space ones 2x)."""
    fig = plt.figure(figsize=(4.6 * len(reports), 3.8))
    first_of_space: dict[str, Any] = {}
    for i, (program, r) in enumerate(reports.items()):
        ax = fig.add_subplot(1, len(reports), i + 1, sharey=first_of_space.get(r["space"]))
        first_of_space.setdefault(r["space"], ax)
        seconds = (r if budget == "device_seconds" else r["wall_time"])["budget_seconds"]
        plot_speedups(
            r, ax, title=f"{program} ({r['space']}), {len(r['seeds'])} seeds, {seconds:g} s", budget=budget
        )
        if ax is not first_of_space[r["space"]]:
            ax.set_ylabel("")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def plot_progress(
    runs: Sequence[SearchRun], default_ns: float, ax: Any = None, title: str | None = None
) -> Any:
    """Best in-search runtime so far (ms) against device seconds, one line per search (a marker per
    measured candidate; the legend outside the axes), with the
    default's fresh-process runtime ``default_ns`` as a reference line. In-search figures are single
    measurements taken minutes apart, so they are drawn as measured, not divided by a figure
    measured at another time."""
    ax = ax or plt.subplots(figsize=(6, 3.5))[1]
    colors = ARM_COLORS
    styles = {"from_default": "-", "from_random": "--"}
    seen = set()
    for r in runs:
        h = r.history
        if not h:
            continue
        label = f"{r.strategy.replace('_', ' ')}, {r.start.replace('_', ' ')}"
        ax.step(
            [0.0] + [s for s, _ in h],
            [math.nan] + [b / 1e6 for _, b in h],
            where="post",
            color=colors.get(r.strategy),
            ls=styles.get(r.start, "-"),
            marker={"device_only": "o", "model_guided": "s", "random_order": "^"}.get(r.strategy, "D"),
            markersize=5,
            markerfacecolor="none",
            alpha=0.8,
            label=None if label in seen else label,
        )
        seen.add(label)
    ax.axhline(default_ns / 1e6, color="k", lw=0.8, label="default (fresh process)")
    ax.set_xlabel("device seconds (a marker: one candidate measured)")
    ax.set_ylabel("best runtime so far (ms, in-search)")
    ax.set_title(title or "search progress")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    return ax


def tile_verdicts(rows: Sequence[Mapping[str, Any]], x: str, y: str, ax: Any = None, title: str = "") -> Any:
    """A grid of configurations over block keys ``x`` and ``y`` (each cell: the configurations
    with those two sizes), coloured by verdict: green where the rules call it legal and Mosaic
    compiles it, red where Mosaic refuses and the rules agree, and orange or purple where they
    disagree (legal but refused / illegal but compiled). Returns the matplotlib axes. (``rows``: `tpucost.experiments.tiles.mosaic.verdicts`'s.)"""
    xs = sorted({int(r["config"][x]) for r in rows})
    ys = sorted({int(r["config"][y]) for r in rows})
    kinds = ("legal, compiles", "illegal, refused", "legal, REFUSED", "illegal, compiles")
    grid = [[float("nan")] * len(xs) for _ in ys]
    for r in rows:
        kind = (
            (0 if r["compiles"] else 1)
            if bool(r["legal"]) == bool(r["compiles"])
            else (2 if r["legal"] else 3)
        )
        i, j = ys.index(int(r["config"][y])), xs.index(int(r["config"][x]))
        old = grid[i][j]
        grid[i][j] = kind if old != old or kind >= 2 else min(old, kind)  # a disagreement shows
    if ax is None:
        _, ax = plt.subplots(figsize=(1.0 + 0.55 * len(xs), 0.8 + 0.45 * len(ys)))
    cmap = ListedColormap(["#4caf50", "#e57373", "#ff9800", "#7e57c2"])
    ax.imshow(grid, cmap=cmap, vmin=0, vmax=3, origin="lower", aspect="auto")
    ax.set_xticks(range(len(xs)), [str(v) for v in xs])
    ax.set_yticks(range(len(ys)), [str(v) for v in ys])
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    ax.set_title(title or "the TPU rules' verdict beside Mosaic's")
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in cmap.colors]
    ax.legend(handles, kinds, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
    return ax
