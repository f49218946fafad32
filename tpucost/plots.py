"""Figures the notebooks show: kernel graphs, feature matrices and tables.

Each function draws on a matplotlib Axes (a new figure when `ax` is None) and returns it, so
notebooks stay one call per picture.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import matplotlib.pyplot as plt
import networkx as nx
import numpy as np

if TYPE_CHECKING:
    import pandas as pd

    from tpucost.features import KernelGraph
    from tpucost.kernels import Kernel

__all__ = ["kernel_to_networkx", "draw_kernel", "feature_heatmap", "kernel_table"]


def kernel_to_networkx(kernel: Kernel) -> nx.DiGraph:
    """The kernel as a networkx DiGraph: node i has its HLO name, opcode and shape."""
    graph = nx.DiGraph(name=kernel.name)
    for i, node in enumerate(kernel.nodes):
        graph.add_node(i, name=node.name, opcode=node.opcode, shape=str(node.shape), output=i in kernel.outputs)
    graph.add_edges_from(kernel.edges)
    return graph


def _layered_positions(graph: nx.DiGraph) -> dict[int, tuple[float, float]]:
    """Producers above consumers: layer = longest path from an input."""
    layer: dict[int, int] = {}
    for node in nx.topological_sort(graph):
        preds = list(graph.predecessors(node))
        layer[node] = 1 + max((layer[p] for p in preds), default=-1)
    by_layer: dict[int, list[int]] = {}
    for node, depth in layer.items():
        by_layer.setdefault(depth, []).append(node)
    pos = {}
    for depth, nodes in by_layer.items():
        for k, node in enumerate(nodes):
            pos[node] = (k - (len(nodes) - 1) / 2, -depth)
    return pos


def draw_kernel(kernel: Kernel, ax: plt.Axes | None = None, max_label: int = 18) -> plt.Axes:
    """Draw a kernel graph: inputs (parameters) in blue, outputs in orange, edges producer -> consumer."""
    graph = kernel_to_networkx(kernel)
    if ax is None:
        width = max(6.0, 1.3 * max(len(v) for v in _rows(graph)))
        _, ax = plt.subplots(figsize=(min(width, 16), 1.1 * (len(_rows(graph)) + 1)))
    pos = _layered_positions(graph) if nx.is_directed_acyclic_graph(graph) else nx.spring_layout(graph, seed=0)
    colors = [
        "#f4a261" if data["output"] else "#8ecae6" if data["opcode"] == "parameter" else "#e9ecef"
        for _, data in graph.nodes(data=True)
    ]
    labels = {i: f"{d['opcode'][:max_label]}\n{d['shape'][:max_label]}" for i, d in graph.nodes(data=True)}
    nx.draw_networkx(graph, pos, ax=ax, labels=labels, node_color=colors, node_size=1600, font_size=7,
                     edgecolors="#495057", arrowsize=12)
    ax.set_title(f"kernel {kernel.name} ({kernel.kind}): {kernel.num_nodes} ops, {kernel.num_edges} edges")
    ax.axis("off")
    return ax


def _rows(graph: nx.DiGraph) -> list[list[int]]:
    if not nx.is_directed_acyclic_graph(graph):
        return [list(graph.nodes)]
    pos = _layered_positions(graph)
    rows: dict[float, list[int]] = {}
    for node, (_, y) in pos.items():
        rows.setdefault(y, []).append(node)
    return list(rows.values())


def feature_heatmap(
    graph: KernelGraph, feature_names: Sequence[str], ax: plt.Axes | None = None, drop_zero_columns: bool = True
) -> plt.Axes:
    """Heatmap of a kernel's node feature matrix (rows: nodes, columns: named features)."""
    import pandas as pd
    import seaborn as sns

    from tpucost.features import OPCODE_VOCAB

    rows = [f"{i}: {OPCODE_VOCAB[int(op)]}" for i, op in enumerate(graph.opcodes)]
    frame = pd.DataFrame(np.asarray(graph.node_features), index=rows, columns=list(feature_names))
    if drop_zero_columns:
        frame = frame.loc[:, (frame != 0).any(axis=0)]
    if ax is None:
        _, ax = plt.subplots(figsize=(min(0.22 * frame.shape[1] + 3, 22), 0.35 * frame.shape[0] + 2.5))
    sns.heatmap(frame, ax=ax, cmap="viridis", cbar_kws={"label": "feature value (log-scaled magnitudes)"})
    ax.set_title(f"node features of {graph.name} ({frame.shape[1]} non-zero of {len(feature_names)} columns)")
    ax.tick_params(axis="x", labelsize=6)
    return ax


def kernel_table(kernels: Sequence[Kernel]) -> pd.DataFrame:
    """One row per kernel: name, kind, computation, op count, output shape, calls per run."""
    import pandas as pd

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
