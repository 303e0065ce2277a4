"""PSRO's loop as a graph, for `marl graph --psro`: the steps of one epoch (Lanctot et al. 2017, Algorithm 1).

PSRO is a driver around a workflow rather than a node in one (each best response builds and trains an
Algorithm), so its picture is a cycle, not a DAG: the meta-game payoff table -> the meta-solver -> the
best response trained against the meta-strategy mixture (the scenario's own workflow, named with its
operators) -> the new member added -> its payoffs evaluated against every member -> the payoff table.
"""

from __future__ import annotations

import math
import os
import textwrap

import networkx as nx

from marl.population.psro import PSRO

_COLOURS = {"payoff_table": "#e3f2d0", "meta_solver": "#f3d9f7", "best_response": "#ffe1c4",
            "add_member": "#d4f0ec", "evaluate_payoffs": "#cfe8ff", "nash_conv": "#e8e8e8"}


def psro_loop(psro: PSRO, workflow) -> nx.DiGraph:
    """The loop of `psro` (its settings in the steps' labels) whose best response runs `workflow`."""
    chain = " -> ".join(nx.topological_sort(workflow.graph))
    algo = type(psro.config).__name__.removesuffix("Config")
    payoffs = (f"{psro.match_episodes} matches per pair, half in each seat" if psro.payoff_source == "matches"
               else "exact, from OpenSpiel tabular policies")
    trainer = ("OpenSpiel's exact best response" if psro.best_response == "exact"
               else f"{algo} workflow '{workflow.name}', {psro.iterations_per_epoch} iterations: {chain}")
    g = nx.DiGraph(name="psro")
    steps = [
        ("payoff_table", "meta-game payoff table", "U[i, j]: member i's mean return against member j"),
        ("meta_solver", f"meta-solver: {psro.meta_solver}", "the meta-strategy: a mixture over the members"),
        ("best_response", "best-response training against the mixture",
         f"'{psro.policy}' vs a member drawn by the meta-strategy each episode; {trainer}"),
        ("add_member", "add member", f"the trained weights, frozen as '{psro.policy}@n'"),
        ("evaluate_payoffs", "evaluate new payoffs", f"the new member vs every member ({payoffs}); Elo and openskill ratings"),
    ]
    for node, title, detail in steps:
        g.add_node(node, title=title, detail=detail)
    for (u, *_), (v, *_) in zip(steps, steps[1:] + steps[:1]):
        g.add_edge(u, v)
    g.add_node("nash_conv", title="report: NashConv", detail="of the meta-strategy mixture, exact where OpenSpiel computes it")
    g.add_edge("meta_solver", "nash_conv")
    return g


def describe_loop(g: nx.DiGraph) -> str:
    """The steps and arrows, one per line (what `marl graph --psro` prints)."""
    lines = [f"PSRO loop: {g.number_of_nodes()} steps, {g.number_of_edges()} arrows (one epoch per turn of the cycle)"]
    lines += [f"  {node}: {data['title']} ({data['detail']})" for node, data in g.nodes(data=True)]
    lines += [f"  {u} --> {v}" for u, v in g.edges()]
    return "\n".join(lines)


def draw_loop(g: nx.DiGraph, path: str | os.PathLike, title: str = "PSRO") -> str:
    """A PNG of the loop: the cycle's steps clockwise from the top, the NashConv report beside the meta-solver."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cycle = [n for n in g if n != "nash_conv"]
    pos = {n: (4.2 * math.sin(2 * math.pi * i / len(cycle)), 3.0 * math.cos(2 * math.pi * i / len(cycle)))
           for i, n in enumerate(cycle)}
    mx, my = pos["meta_solver"]
    pos["nash_conv"] = (mx + 4.4, my + 1.2)
    fig, ax = plt.subplots(figsize=(14, 9), dpi=110)
    ax.set_xlim(-8.5, 10.5)
    ax.set_ylim(-4.8, 4.6)
    ax.axis("off")
    boxes = {}
    for node, (x, y) in pos.items():
        data = g.nodes[node]
        label = data["title"] + "\n" + "\n".join(textwrap.wrap(data["detail"], 40))
        boxes[node] = ax.text(x, y, label, ha="center", va="center", fontsize=9, family="monospace", zorder=3,
                              bbox=dict(boxstyle="round,pad=0.5", facecolor=_COLOURS[node], edgecolor="#444444"))
    for u, v in g.edges():
        ax.annotate("", xy=pos[v], xytext=pos[u], zorder=2,
                    arrowprops=dict(arrowstyle="-|>", color="#333333", lw=1.4, shrinkA=2, shrinkB=2,
                                    patchA=boxes[u].get_bbox_patch(), patchB=boxes[v].get_bbox_patch(),
                                    connectionstyle="arc3,rad=-0.2" if v != "nash_conv" else "arc3,rad=0.0"))
    ax.set_title(title, fontsize=11)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return str(path)
