"""Drawing one kernel graph (notebook 01, section 4): `plots.draw_kernel` is this module's.

A kernel (`tpucost.method.kernels.Kernel`) becomes a networkx DiGraph, laid out in layers (each node
one row below its deepest producer) and drawn with each node's opcode and shape in its box.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import networkx as nx

from tpucost.method.kernels import Kernel

__all__ = ["kernel_to_networkx", "draw_kernel"]


def kernel_to_networkx(kernel: Kernel) -> nx.DiGraph:
    """The kernel as a networkx DiGraph: node i has its HLO name, opcode and shape."""
    graph = nx.DiGraph(name=kernel.name)
    for i, node in enumerate(kernel.nodes):
        graph.add_node(
            i, name=node.name, opcode=node.opcode, shape=str(node.shape), output=i in kernel.outputs
        )
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
    """Draw a kernel graph: inputs (parameters) in blue, outputs in orange, edges producer -> consumer.

    Each node is a box around its opcode and shape (at most ``max_label`` characters each), so the
    text stays inside its node at a readable size."""
    graph = kernel_to_networkx(kernel)
    rows = _rows(graph)
    if ax is None:
        width = max(6.0, 1.9 * max(len(v) for v in rows))
        _, ax = plt.subplots(figsize=(min(width, 18), 1.05 * (len(rows) + 1)))
    pos = (
        _layered_positions(graph) if nx.is_directed_acyclic_graph(graph) else nx.spring_layout(graph, seed=0)
    )
    colors = {
        i: "#f4a261" if data["output"] else "#8ecae6" if data["opcode"] == "parameter" else "#e9ecef"
        for i, data in graph.nodes(data=True)
    }
    nx.draw_networkx_edges(graph, pos, ax=ax, node_size=2600, arrowsize=12, edge_color="#495057")
    for i, d in graph.nodes(data=True):
        x, y = pos[i]
        ax.text(
            x,
            y,
            f"{d['opcode'][:max_label]}\n{d['shape'][:max_label]}",
            ha="center",
            va="center",
            fontsize=8,
            bbox={"boxstyle": "round,pad=0.35", "fc": colors[i], "ec": "#495057"},
            zorder=3,
        )
    xs, ys = [x for x, _ in pos.values()], [y for _, y in pos.values()]
    ax.set_xlim(min(xs) - 0.7, max(xs) + 0.7)
    ax.set_ylim(min(ys) - 0.6, max(ys) + 0.6)
    ops = sum(1 for n in kernel.nodes if n.opcode != "parameter")
    inputs = kernel.num_nodes - ops
    ax.set_title(
        f"kernel {kernel.name} ({kernel.kind}): {ops} ops + {inputs} input{'s' if inputs != 1 else ''} "
        f"(parameter nodes), {kernel.num_edges} edges"
    )
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
