"""A picture of a workflow's DAG (matplotlib; no graphviz needed).

Nodes are laid out top to bottom by their depth in the graph (the longest
path from a source), side by side within a depth; each box shows the node's
name, operator and settings, each arrow the kind of item that flows.
"""

from __future__ import annotations

import os
import textwrap

import networkx as nx

# What each kind of edge item is, for the arrow labels (the record types: marl.data.records).
ITEM_NAMES = {
    "batch": "batch (SampledBatch)",
    "results": "results (LearnResults)",
    "stored": "stored (transitions per policy)",
    "evaluation": "evaluation (EvaluationRun)",
}

_OP_COLOURS = {
    "sample": "#cfe8ff",
    "concat": "#e3f2d0",
    "learn": "#ffe1c4",
    "sync_weights": "#f3d9f7",
    "report": "#e8e8e8",
    "store_to_replay": "#d4f0ec",
    "replay": "#d4f0ec",
    "update_priorities": "#ffe1c4",
    "update_target": "#f7e0e0",
    "concurrently": "#fff5c2",
    "evaluate": "#cfe8ff",
}


def _node_label(name: str, data: dict) -> str:
    """'name' (or 'name: op' when they differ), then the operator's settings."""
    op = data.get("op")
    head = name if name == op else f"{name}: {op}"
    params = ", ".join(f"{k}={v}" for k, v in data.get("params", {}).items())
    return "\n".join([head] + textwrap.wrap(params, 34))


def layered_positions(graph: nx.DiGraph) -> dict[str, tuple[float, float]]:
    """x: position within the node's depth (centred); y: minus the depth."""
    depth: dict[str, int] = {}
    order = list(nx.topological_sort(graph))
    for node in order:
        depth[node] = max((depth[u] + 1 for u in graph.predecessors(node)), default=0)
    # A short branch joining a long one (DQN's sample -> store) sits just above its join,
    # beside the long branch, rather than at the top with a long edge crossing it.
    for node in reversed(order):
        succ = list(graph.successors(node))
        if succ:
            depth[node] = min(depth[v] for v in succ) - 1
    layers: dict[int, list[str]] = {}
    for node, d in depth.items():
        layers.setdefault(d, []).append(node)
    pos = {}
    for d, nodes in layers.items():
        for i, node in enumerate(nodes):
            pos[node] = ((i - (len(nodes) - 1) / 2) * 3.2, -d * 1.6)
    return pos


def draw_workflow(workflow, path: str | os.PathLike, title: str | None = None) -> str:
    """Writes a PNG of the (validated) workflow's DAG to `path`; returns the path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    g = workflow.graph
    pos = layered_positions(g)
    xs = [p[0] for p in pos.values()]
    ys = [p[1] for p in pos.values()]
    width = max(6.0, (max(xs) - min(xs)) * 1.4 + 5.0)
    height = max(4.0, (max(ys) - min(ys)) * 1.1 + 2.5)
    fig, ax = plt.subplots(figsize=(width, height), dpi=110)
    ax.set_xlim(min(xs) - 2.5, max(xs) + 2.5)
    ax.set_ylim(min(ys) - 1.0, max(ys) + 1.0)
    ax.axis("off")
    boxes = {}
    for node, (x, y) in pos.items():
        data = g.nodes[node]
        boxes[node] = ax.text(
            x, y, _node_label(node, data), ha="center", va="center", fontsize=9, family="monospace",
            bbox=dict(boxstyle="round,pad=0.5", facecolor=_OP_COLOURS.get(data.get("op"), "#fff5c2"), edgecolor="#444444"),
            zorder=3,
        )
    for u, v, data in g.edges(data=True):
        # Arrows clip at the boxes' outlines (patchA/patchB), wherever the boxes are.
        ax.annotate(
            "", xy=pos[v], xytext=pos[u],
            arrowprops=dict(arrowstyle="-|>", color="#333333", lw=1.3, shrinkA=2, shrinkB=2,
                            patchA=boxes[u].get_bbox_patch(), patchB=boxes[v].get_bbox_patch(),
                            connectionstyle="arc3,rad=0.0" if pos[u][0] == pos[v][0] else "arc3,rad=0.1"),
            zorder=2,
        )
        kind = data.get("kind", "?")
        mx, my = (pos[u][0] + pos[v][0]) / 2, (pos[u][1] + pos[v][1]) / 2
        ax.text(mx + 0.12, my, ITEM_NAMES.get(kind, kind), fontsize=8, color="#1a4f8a", ha="left", va="center",
                style="italic", zorder=4, bbox=dict(boxstyle="round,pad=0.15", facecolor="white", edgecolor="none", alpha=0.85))
    ax.set_title(title or f"workflow '{workflow.name}'", fontsize=11)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return str(path)
