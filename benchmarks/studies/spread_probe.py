"""What a simple_spread policy does at points of its training: collisions and landmark coverage.

    .venv/bin/python benchmarks/studies/spread_probe.py [--scenario scenarios/simple_spread_ppo.yaml]
        [--at 16000,28000,37000,61000] [--episodes 100] [--seed 0] [overrides...]

Trains the scenario (one shared policy over the default actor-critic) and, before training and at
each `--at` env-step mark, plays `--episodes` sampled episodes with the current weights on fixed
reset seeds. It reports collisions per episode (agent pairs closer than their summed radii, per
step) and coverage (the sum over landmarks of the distance to the nearest agent at the last step),
the two terms of simple_spread's reward. It shows what a dip in the return curve consists of.
"""

from __future__ import annotations

import argparse
import importlib

import numpy as np
import torch

import _path  # noqa: F401  (benchmarks/ on sys.path: the shared helpers)
import _common as C


def probe(env, module, episodes: int) -> tuple[float, float, float]:
    """Mean collisions per episode, final coverage distance and return summed over agents."""
    rng = torch.Generator().manual_seed(0)
    collisions, coverage, returns = [], [], []
    for episode in range(episodes):
        obs, _ = env.reset(seed=10_000 + episode)
        hits, total = 0, 0.0
        while env.agents:
            batch = {"obs": torch.as_tensor(np.stack([obs[a] for a in env.agents]), dtype=torch.float32)}
            dist = module.action_dist(module.forward_inference(batch)["action_dist_inputs"])
            actions = dist.sample(rng).numpy()
            obs, rewards, _, _, _ = env.step({a: int(x) for a, x in zip(env.agents, actions)})
            total += sum(rewards.values())
            world = env.unwrapped.world
            pos = np.array([a.state.p_pos for a in world.agents])
            radii = np.array([a.size for a in world.agents])
            close = np.linalg.norm(pos[:, None] - pos[None], axis=-1) < radii[:, None] + radii[None]
            hits += int(np.triu(close, k=1).sum())
        landmarks = np.array([lm.state.p_pos for lm in world.landmarks])
        coverage.append(np.linalg.norm(landmarks[:, None] - pos[None], axis=-1).min(axis=1).sum())
        collisions.append(hits)
        returns.append(total)
    return float(np.mean(collisions)), float(np.mean(coverage)), float(np.mean(returns))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenario", default="scenarios/simple_spread_ppo.yaml")
    parser.add_argument("--at", default="16000,28000,37000,61000", help="env-step marks to probe at (comma-separated)")
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("overrides", nargs="*", help="scenario overrides, key=value")
    args = parser.parse_args()

    import marl
    from marl.modules import build_module

    marks = sorted(int(x) for x in args.at.split(","))
    overrides = [f"debugging.seed={args.seed}", f"stop.env_steps_total={marks[-1]}", *args.overrides]
    config = marl.load_scenario(C.REPO_ROOT / args.scenario, overrides)
    (pid,) = config.policy_specs()  # one shared policy
    algo = config.build()
    env = importlib.import_module(config.environment_cfg.env).parallel_env(**config.environment_cfg.env_config)
    rows = []

    def record(env_steps: int) -> None:
        agent = env.possible_agents[0]
        module = build_module(None, env.observation_space(agent), env.action_space(agent), dict(algo.config.training_cfg.model))  # (the built, resolved config)
        module.set_state(algo.get_weights()["modules"][pid])
        rows.append([f"{env_steps:,}", *[C.fmt_num(x) for x in probe(env, module, args.episodes)]])
        print(f"  probed at {env_steps:,} env steps", flush=True)

    try:
        record(0)
        for mark in marks:
            while True:
                result = algo.train()
                if result["env_steps_total"] >= mark:
                    break
            record(result["env_steps_total"])
    finally:
        algo.stop()
    print(C.machine_line())
    C.print_table(["env steps", "collisions / episode", "landmark distance at the end", "return (summed)"], rows,
                  title=f"{args.scenario}, seed {args.seed}, {args.episodes} sampled episodes per row")


if __name__ == "__main__":
    main()
