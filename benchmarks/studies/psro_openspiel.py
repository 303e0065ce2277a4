"""PSRO on an OpenSpiel poker game: NashConv of the meta-strategy mixture per epoch.

Best responses by PPO (one policy for both seats, relu, fresh initialisation each epoch), payoffs exact from
the members' tabular policies (or from matches), Nash meta-solver by default. Baseline in the same run: the
untrained first member (a near-uniform random policy; uniform random scores 0.917 on kuhn_poker, 4.75 on
leduc_poker). Each row also says how good the epoch's learned best response was: its exact payoff against the
mixture it trained against, and the most any policy gains there (the previous NashConv / 2).

    python benchmarks/studies/psro_openspiel.py --game kuhn_poker --epochs 14 --iterations 20    # 0.038 at epoch 6, ~90 s
    python benchmarks/studies/psro_openspiel.py --game leduc_poker --epochs 35 --iterations 20 --meta-solver uniform  # ~10 min

Writes the population (population.json, members.safetensors) and `marl league`'s files under --out, after every
epoch; `--resume` goes on from the population under --out (its members, payoff table, meta-strategy, ratings and
history) for --epochs more epochs, as the run would have gone on had it not stopped.
"""

from __future__ import annotations

import argparse
import time

import _path  # noqa: F401  (benchmarks/ on sys.path: the shared helpers)
import _common as C

from marl.algorithms.ppo import PPOConfig
from marl.population.psro import PSRO
from marl.population.report import write_league_report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game", default="kuhn_poker")
    parser.add_argument("--epochs", type=int, default=14)
    parser.add_argument("--iterations", type=int, default=20, help="PPO iterations per best response")
    parser.add_argument("--batch", type=int, default=2048, help="PPO train_batch_size")
    parser.add_argument("--hiddens", default="128,128")
    parser.add_argument("--activation", default="relu", help="relu: tanh's best responses plateau (see docs/population.md)")
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--gae-lambda", type=float, default=1.0)
    parser.add_argument("--meta-solver", default="nash", choices=["nash", "prd", "uniform"])
    parser.add_argument("--payoffs", default="exact", choices=["exact", "matches"])
    parser.add_argument("--match-episodes", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="psro_population")
    parser.add_argument("--resume", action="store_true", help="go on from the population saved under --out")
    args = parser.parse_args()

    config = (PPOConfig().environment(f"openspiel.{args.game}")
              .env_runners(num_envs_per_env_runner=16, rollout_fragment_length=32, batch_mode="complete_episodes")
              .training(train_batch_size=args.batch, minibatch_size=256, num_epochs=4, lr=args.lr, entropy_coeff=0.0,
                        gamma=1.0, gae_lambda=args.gae_lambda)
              .multi_agent(policies={"main": {"model": {"hiddens": [int(h) for h in args.hiddens.split(",")],
                                                        "activation": args.activation}}})
              .debugging(seed=args.seed))
    psro = PSRO(config, iterations_per_epoch=args.iterations, payoffs=args.payoffs, match_episodes=args.match_episodes,
                meta_solver=args.meta_solver, warm_start=False)
    if args.resume:
        psro.restore(args.out)
        print(f"resumed: {len(psro.members)} members, {len(psro.history)} epochs from {args.out}")
    start = time.perf_counter()
    headers = ["epoch", "members", "NashConv", "BR gain vs mixture", "best possible", "env steps", "seconds"]
    print("  ".join(headers))
    rows = []
    previous = psro.history[-1].get("psro/nash_conv") if psro.history else None
    for _ in range(args.epochs):
        epoch = len(psro.history)
        meta = psro.meta.copy()
        result = psro.step()
        gain = float(psro.payoffs[-1, :-1] @ meta) if len(meta) else float("nan")
        best = previous / 2 if previous is not None else float("nan")  # symmetric two-player zero-sum: NashConv / 2
        previous = result["psro/nash_conv"]
        rows.append([epoch, result["psro/population"], f"{previous:.4f}", f"{gain:.4f}", f"{best:.4f}",
                     result["psro/best_response_env_steps"], f"{time.perf_counter() - start:.0f}"])
        print(f"{epoch:5d}  {rows[-1][1]:7d}  {previous:8.4f}  {gain:18.4f}  {best:13.4f}  {rows[-1][5]:9d}  "
              f"{rows[-1][6]:>7s}", flush=True)
        psro.save(args.out)  # every epoch: a stopped run resumes from the last one
    # the table again, for the record `python -m benchmarks psro_openspiel` keeps (the lines above are progress)
    C.print_table(headers, rows, title=f"PSRO on {args.game}: {args.meta_solver} meta-solver, {args.payoffs} payoffs, "
                                       f"{args.iterations} PPO iterations per best response, seed {args.seed}")
    for path in write_league_report(args.out):
        print(path)


if __name__ == "__main__":
    main()
