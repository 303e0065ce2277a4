"""League targets (issue 29): env steps until a league's main agent beats random play and the league has grown.

    .venv/bin/python benchmarks/studies/league_targets.py [--scenario scenarios/markov_soccer_league.yaml] [--seeds 3]
        [--max-steps 1000000] [--eval-every 25000] [--games 400] [--win-rate 0.85] [--league-size 8] [key=value ...]

Trains the scenario (`multi_agent.league`) one seed after another. Every `--eval-every` env steps the
first main agent plays `--games` games against a uniformly random legal-move player, seated first or
second at random, twice: with sampled actions (as it plays in training, and as RLlib's examples
measure it: their callbacks count the training episodes' results) and with its most likely actions
(greedy). A win is a game it wins: draws count as not won, as in RLlib's league example
(`rllib/examples/multi_agent/self_play_league_based_with_open_spiel.py`, whose callback counts
`reward == 1`). A seed has reached the target at the first evaluation where the sampled win rate
(`--greedy`: the greedy one) is >= `--win-rate` and `league/size` (filled snapshot slots; the trained members are not counted,
where RLlib's count includes them and its two random policies) is >= `--league-size`; the seed stops
there unless `--full`. RLlib's example: markov soccer, 0.85 and 8, within 2M env steps; issue 29
asks for half of that; connect four's: 0.95 within 200k (`--scenario scenarios/connect_four_league.yaml
--win-rate 0.95 --league-size 2 --max-steps 200000`). Env steps count joint steps (one per `env.step`;
in a turn-based game one player acts per step).

At the end of each seed the snapshots' ratings (openskill ordinal, mu - 3 sigma) are listed in the order
they were taken, with the number of neighbouring pairs where the later snapshot is rated lower.
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import _path  # noqa: F401  (benchmarks/ on sys.path: the shared helpers)
import _common as C

import marl


def run_seed(args, seed: int) -> tuple[dict, list[list]]:
    cfg = marl.load_scenario(args.scenario, args.overrides + ["evaluation.evaluation_interval=null"])
    cfg.debugging(seed=seed).stopping(env_steps_total=None)
    algo = cfg.build()
    curve, reached_at, first_reached, t0 = [], None, None, time.perf_counter()
    next_eval, result = args.eval_every, {"env_steps_total": 0}
    try:
        while result["env_steps_total"] < args.max_steps:
            result = algo.train()
            steps = result["env_steps_total"]
            if steps < next_eval and steps < args.max_steps:
                continue
            next_eval += args.eval_every
            sampled, greedy = (algo.evaluate(num_episodes=args.games, explore=explore, opponent="random")
                               for explore in (True, False))
            e = greedy if args.greedy else sampled
            win, draw = e["evaluation/self_play/win_rate"], e["evaluation/self_play/draw_rate"]
            other = (sampled if args.greedy else greedy)["evaluation/self_play/win_rate"]
            size = result["league/size"]
            curve.append([seed, steps, f"{win:.3f}", f"{other:.3f}", f"{draw:.3f}", size, f"{result['league/rating/main']:.1f}"])
            print(f"seed {seed}: {steps} env steps, win rate {win:.3f} ({'sampled' if args.greedy else 'greedy'} {other:.3f},"
                  f" draws {draw:.3f}), league size {size}", flush=True)
            if first_reached is None and win >= args.win_rate:
                first_reached = steps
            if reached_at is None and win >= args.win_rate and size >= args.league_size:
                reached_at = steps
                if not args.full:
                    break
        ratings = snapshot_ratings(algo.context.checkpointables["league"].ratings, cfg.league().policy)
    finally:
        algo.stop()
    return {"seed": seed, "reached_at": reached_at, "first_reached": first_reached, "steps": result["env_steps_total"],
            "win": win, "size": size, "wall_s": time.perf_counter() - t0, "ratings": ratings}, curve


def snapshot_ratings(ratings, policy: str) -> list[float]:
    """The main agent's snapshots' ratings (openskill ordinal) in the order they were taken (main.v0, main.v1, ...)."""
    names = [m for m in ratings.members if m.startswith(f"{policy}.v")]
    return [ratings.ordinal(m) for m in sorted(names, key=lambda m: int(m.rsplit(".v", 1)[1]))]


def inversions(values: list[float]) -> tuple[int, float]:
    """Neighbouring pairs where the later value is lower, and the largest such drop."""
    drops = [a - b for a, b in zip(values, values[1:]) if b < a]
    return len(drops), max(drops, default=0.0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scenario", default="scenarios/markov_soccer_league.yaml")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--max-steps", type=int, default=1_000_000)
    ap.add_argument("--eval-every", type=int, default=25_000)
    ap.add_argument("--games", type=int, default=400)
    ap.add_argument("--win-rate", type=float, default=0.85)
    ap.add_argument("--league-size", type=int, default=8)
    ap.add_argument("--greedy", action="store_true", help="evaluate the main agent's most likely actions")
    ap.add_argument("--full", action="store_true", help="train every seed to --max-steps, past the target")
    ap.add_argument("overrides", nargs="*", help="scenario overrides, key=value")
    args = ap.parse_args()
    path = Path(args.scenario).resolve() if Path(args.scenario).exists() else C.REPO_ROOT / args.scenario
    args.scenario = str(path)
    shown = path.relative_to(C.REPO_ROOT).as_posix() if path.is_relative_to(C.REPO_ROOT) else args.scenario  # as the repo names it
    print(f"League targets: {shown}, {C.machine_line()}")
    rows, curves, orders = [], [], []
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        row, curve = run_seed(args, seed)
        curves += curve
        reached = f"{row['reached_at']:,}" if row["reached_at"] is not None else f"not within {row['steps']:,}"
        first = f"{row['first_reached']:,}" if row["first_reached"] is not None else "-"
        rows.append([seed, reached, first, f"{row['win']:.3f}", row["size"], f"{row['wall_s']:.0f}"])
        crossed, drop = inversions(row["ratings"])
        orders.append([seed, len(row["ratings"]), f"{row['ratings'][0]:.1f}" if row["ratings"] else "-",
                       f"{row['ratings'][-1]:.1f}" if row["ratings"] else "-", crossed, f"{drop:.1f}"])
        C.flush()
    play, other = ("greedy", "sampled") if args.greedy else ("sampled", "greedy")
    C.print_table(["seed", f"env steps to win rate >= {args.win_rate} and size >= {args.league_size}",
                   f"first evaluation with win rate >= {args.win_rate}",
                   f"last win rate ({play}, {args.games} games)", "league size", "wall s"], rows,
                  title=f"{shown}: per seed")
    C.print_table(["seed", "env steps", f"win rate ({play})", f"win rate ({other})", f"draw rate ({play})", "league size",
                   "rating of main"], curves, title="Evaluations against random play")
    C.print_table(["seed", "snapshots", "rating of the first", "rating of the last",
                   "neighbours rated lower than the one before", "largest such drop"], orders,
                  title="Snapshots' ratings (openskill ordinal) in the order they were taken")
    reached = [r for r in rows if not str(r[1]).startswith("not")]
    print(f"\n{len(reached)}/{len(rows)} seeds reached the target within {args.max_steps:,} env steps"
          + (f" (latest at {max(int(str(r[1]).replace(',', '')) for r in reached):,})" if reached else ""))
    if any(math.isnan(float(r[3])) for r in rows):
        raise SystemExit("an evaluation returned no games")


if __name__ == "__main__":
    main()
