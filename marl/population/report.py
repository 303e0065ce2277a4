"""`marl league DIR`: what a saved population looks like.

DIR is a folder `PSRO.save` wrote (`population.json` beside the members' weights), or a run
directory holding one under `population/`. Written next to it:

ratings.md     members by openskill ordinal: rating, mu, sigma, Elo, games, mean score, meta-strategy weight
payoffs.png    the payoff table (row member's return against column member) and the win-rate matrix as heat maps
ratings.png    each member's openskill ordinal and Elo across PSRO epochs (the rating curves); NashConv where reported

DIR may also be the run directory of a league (`multi_agent.league`, `marl train`): the ratings come from its
checkpoint's league state, the curves from its result.jsonl (against env steps, with the league's size and
the evaluation win rate), and payoffs.png holds the win-rate matrix (a league keeps no payoff table).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from marl.checkpoint.atomic import MANIFEST
from marl.checkpoint.state_files import read_tree
from marl.policies.ratings import Ratings


def population_file(path) -> Path:
    path = Path(path)
    for candidate in (path / "population.json", path / "population" / "population.json"):
        if candidate.is_file():
            return candidate
    raise ValueError(f"{path} holds no population.json (written by PSRO.save, or under population/ of a run directory) "
                     "and no league checkpoint (checkpoint/ of a multi_agent.league run)")


def league_checkpoint(path) -> Path | None:
    """The checkpoint of a league run directory (or the checkpoint folder itself) holding the league's state."""
    for candidate in (Path(path) / "checkpoint", Path(path)):
        manifest = candidate / MANIFEST
        if manifest.is_file() and "league" in json.loads(manifest.read_text()).get("extra", {}):
            return candidate
    return None


def write_league_report(path, output=None) -> list[str]:
    """Writes ratings.md, payoffs.png and ratings.png for the population at `path`; returns their paths."""
    if league_checkpoint(path) is not None:
        return write_league_run_report(path, output)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    source = population_file(path)
    state = json.loads(source.read_text())
    out = Path(output) if output else source.parent
    out.mkdir(parents=True, exist_ok=True)
    members, meta = state["members"], state["meta"]
    if not members:
        raise ValueError(f"{source} holds an empty population (saved before its first PSRO epoch): nothing to report")
    ratings = Ratings.from_state(state["ratings"])
    weight = dict(zip(members, meta))

    table = out / "ratings.md"
    table.write_text(_ratings_table(ratings, weight))

    payoffs = np.asarray(state["payoffs"], dtype=float)
    fig, axes = plt.subplots(1, 2, figsize=(12, 5))
    limit = float(np.nanmax(np.abs(payoffs))) if payoffs.size and np.isfinite(payoffs).any() else 1.0
    _heat_map(fig, axes[0], payoffs, members, "payoff (row's return vs column)", "RdBu", (-limit, limit))
    _heat_map(fig, axes[1], ratings.win_rates(members), members, "win rate (row vs column; draws half)", "RdYlGn", (0.0, 1.0))
    heat = _save(plt, fig, out / "payoffs.png")

    history = state.get("history", [])
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.5))
    _rating_curves(axes, members, history, "psro/epoch", "PSRO epoch")
    xs = [row["psro/epoch"] for row in history if not math.isnan(row.get("psro/nash_conv", math.nan))]
    axes[2].plot(xs, [row["psro/nash_conv"] for row in history if row.get("psro/epoch") in xs], marker="o")
    axes[2].set_xlabel("PSRO epoch")
    axes[2].set_ylabel("NashConv of the meta-strategy mixture")
    axes[2].set_yscale("log")
    return [str(table), heat, _save(plt, fig, out / "ratings.png")]


def _heat_map(fig, ax, data, members: list[str], title: str, cmap: str, bounds: tuple[float, float]) -> None:
    """A members x members matrix (row against column) with the members named on both axes."""
    image = ax.imshow(data, cmap=cmap, vmin=bounds[0], vmax=bounds[1])
    ax.set_xticks(range(len(members)), members, rotation=90, fontsize=7)
    ax.set_yticks(range(len(members)), members, fontsize=7)
    ax.set_title(title)
    fig.colorbar(image, ax=ax, fraction=0.046)


def _rating_curves(axes, members: list[str], rows: list[dict], x_key: str, x_label: str) -> None:
    """Each member's openskill ordinal (axes[0]) and Elo (axes[1]) over `x_key` of the rows that hold them."""
    import matplotlib  # (imported where drawn: every `marl` command imports this module, few draw)

    # matplotlib's default cycle has 10 colours: a league of 11+ members would draw two members alike
    palette = [matplotlib.colormaps["tab20"](i % 20) for i in range(len(members))] if len(members) > 10 else None
    for ax, prefix, label in ((axes[0], "league/rating/", "openskill ordinal"), (axes[1], "league/elo/", "Elo")):
        for i, m in enumerate(members):
            points = [(row[x_key], row[f"{prefix}{m}"]) for row in rows if f"{prefix}{m}" in row]
            if points:
                style = {} if palette is None else {"color": palette[i], "linestyle": "-" if i < 20 else "--"}
                ax.plot(*zip(*points), marker=".", label=m, **style)
        ax.set_xlabel(x_label)
        ax.set_ylabel(label)
    if len(members) <= 12:
        axes[0].legend(fontsize=7)


def _save(plt, fig, path: Path) -> str:
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return str(path)


def _ratings_table(ratings: Ratings, weight: dict | None = None) -> str:
    head = "| member | rating (openskill mu - 3 sigma) | mu | sigma | Elo | games | mean score |"
    lines = [head + (" meta weight |" if weight is not None else ""), "| --- " * (7 + (weight is not None)) + "|"]
    for row in ratings.table():
        line = (f"| {row['member']} | {row['rating']:.2f} | {row['mu']:.2f} | {row['sigma']:.2f} | {row['elo']:.0f} | "
                f"{row['games']} | {row['score']:.3f} |")
        lines.append(line + (f" {weight.get(row['member'], 0.0):.3f} |" if weight is not None else ""))
    return "\n".join(lines) + "\n"


def write_league_run_report(path, output=None) -> list[str]:
    """ratings.md, payoffs.png (win-rate matrix) and ratings.png (curves over env steps) of a league run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    checkpoint = league_checkpoint(path)
    stem = json.loads((checkpoint / MANIFEST).read_text())["extra"]["league"]
    book = read_tree(checkpoint / "extra", stem)
    ratings = Ratings.from_state(book["ratings"])
    run_dir = checkpoint.parent if checkpoint.name == "checkpoint" else checkpoint
    out = Path(output) if output else run_dir
    out.mkdir(parents=True, exist_ok=True)
    table = out / "ratings.md"
    table.write_text(_ratings_table(ratings))

    members = [row["member"] for row in ratings.table()]
    fig, ax = plt.subplots(figsize=(7, 6))
    _heat_map(fig, ax, ratings.win_rates(members), members, "league win rate (row vs column; draws half), best rated first",
              "RdYlGn", (0.0, 1.0))
    heat = _save(plt, fig, out / "payoffs.png")

    results = run_dir / "result.jsonl"
    rows = [json.loads(line) for line in results.read_text().splitlines() if line.strip()] if results.is_file() else []
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.5))
    _rating_curves(axes, members, rows, "env_steps_total", "env steps")
    win_axis = axes[2].twinx()
    for ax, key, label, colour in ((axes[2], "league/size", "league size (snapshots held)", "tab:blue"),
                                   (win_axis, "evaluation/self_play/win_rate", "main agent's evaluation win rate", "tab:red")):
        points = [(row["env_steps_total"], row[key]) for row in rows if isinstance(row.get(key), (int, float))]
        if points:
            ax.plot(*zip(*points), marker=".", color=colour)
        ax.set_ylabel(label, color=colour)
    win_axis.set_ylim(0.0, 1.0)
    axes[2].set_xlabel("env steps")
    return [str(table), heat, _save(plt, fig, out / "ratings.png")]
