"""Env steps/s of one in-process marl EnvRunner against a random-action loop over the same envs.

    .venv/bin/python benchmarks/speed/sampling.py [--seconds 2] [--repeats 5] [--envs 8] [--fragment 128]

Both sides step 8 copies of the env created with `marl.make_env`, through the
same internal MultiAgentEnv protocol:

* random loop: each env gets a dict of random actions for the agents in its
  observation dict and is reset when `terminateds["__all__"]` or
  `truncateds["__all__"]`; the actions come from `env.action_space(agent).sample()`,
  pre-generated into a pool by default (the script prints what calling
  `.sample()` inline would cost; `--inline-actions` measures that variant);
* marl: `EnvRunner(cfg, 0).sample()` with `num_envs_per_env_runner` envs and
  `rollout_fragment_length` steps per env (policy forward pass, action
  sampling, rollout columns, episode bookkeeping, fragment bootstrap).

The two are measured interleaved in alternating chunks of equal work (one
`runner.sample()` call, then as many lockstep steps of the random loop, or
the other way round), about `2 * --seconds` per repeat and env; the ratio
marl / random is taken per repeat and the table shows the medians. The machine is shared, so expect 10-25 % noise between runs.
"""

from __future__ import annotations

import argparse
import gc
import time

import _path  # noqa: F401  (benchmarks/ on sys.path: the shared helpers)
import _common as C

import marl
from marl.runners import EnvRunner

ALL = "__all__"

SPREAD_CONFIG = {"N": 3, "max_cycles": 25, "continuous_actions": False}

# name, env id, env_config, multi-agent setup, target ratio
ENVS = [
    ("CartPole-v1", "CartPole-v1", {}, False, 0.25),
    ("simple_spread_v3 (N=3)", "mpe2.simple_spread_v3", SPREAD_CONFIG, True, 0.7),
]


def shared_policy(agent, episode):
    return "shared"


def make_config(env_id: str, env_config: dict, shared: bool, num_envs: int, fragment: int, seed: int):
    cfg = (
        marl.PPOConfig()
        .environment(env_id, env_config=dict(env_config))
        .env_runners(num_envs_per_env_runner=num_envs, rollout_fragment_length=fragment)
        .debugging(seed=seed)
    )
    if shared:
        cfg.multi_agent(policies=["shared"], policy_mapping_fn=shared_policy)
    cfg.validate()
    return cfg


class RandomLoop:
    """`num_envs` envs from `marl.make_env`, stepped in lockstep with random actions."""

    POOL = 4096  # pre-generated actions per (env, agent), cycled

    def __init__(self, env_id: str, env_config: dict, num_envs: int, inline: bool, seed: int):
        self.envs = [marl.make_env(env_id, dict(env_config)) for _ in range(num_envs)]
        self.obs = [env.reset(seed=seed + k)[0] for k, env in enumerate(self.envs)]
        self.inline = inline
        self.i = 0
        self.spaces = []
        self.pools = []
        for k, env in enumerate(self.envs):
            spaces = {a: env.action_space(a) for a in env.possible_agents}
            for j, space in enumerate(spaces.values()):
                space.seed(seed + 1000 * k + j)
            self.spaces.append(spaces)
            if not inline:
                self.pools.append({a: [s.sample() for _ in range(self.POOL)] for a, s in spaces.items()})

    def run(self, steps: int) -> int:
        """`steps` lockstep steps of every env; returns the env steps taken."""
        envs, obs = self.envs, self.obs
        if self.inline:
            for _ in range(steps):
                for k, env in enumerate(envs):
                    o, _r, te, tr, _ = env.step({a: env.action_space(a).sample() for a in obs[k]})
                    if te[ALL] or tr[ALL]:
                        o, _ = env.reset()
                    obs[k] = o
        else:
            pools, pool_n, i = self.pools, self.POOL, self.i
            for _ in range(steps):
                i += 1
                if i == pool_n:
                    i = 0
                for k, env in enumerate(envs):
                    pool = pools[k]
                    o, _r, te, tr, _ = env.step({a: pool[a][i] for a in obs[k]})
                    if te[ALL] or tr[ALL]:
                        o, _ = env.reset()
                    obs[k] = o
            self.i = i
        return steps * len(envs)

    def action_sample_share(self, n: int = 2000) -> tuple[float, float]:
        """(µs per `action_space(agent).sample()` call, µs per env.step with pre-generated actions)."""
        env, spaces = self.envs[0], self.spaces[0]
        agents = list(spaces)
        t0 = time.perf_counter()
        for _ in range(n):
            for a in agents:
                env.action_space(a).sample()
        sample_us = (time.perf_counter() - t0) / (n * len(agents)) * 1e6
        env_steps = self.run(n // len(self.envs) + 1)
        t0 = time.perf_counter()
        self.run(n // len(self.envs) + 1)
        step_us = (time.perf_counter() - t0) / env_steps * 1e6
        return sample_us, step_us

    def close(self) -> None:
        for env in self.envs:
            env.close()


def verdict(ratio: float, target: float) -> str:
    """PASS/FAIL, marked borderline within 5 % of the target (well inside run-to-run noise)."""
    word = "PASS" if ratio >= target else "FAIL"
    if abs(ratio / target - 1.0) < 0.05:
        word += f" (borderline: {ratio:.4f})"
    return word


def measure_pair(runner, loop, fragment: int, seconds: float, random_first: bool) -> tuple[float, float]:
    """Env steps/s of (random loop, marl runner), measured in alternating chunks of equal work.

    One chunk is one `runner.sample()` call on the marl side and the same number
    of lockstep steps (`fragment`) on the random side; chunks alternate until
    the two sides together have run `2 * seconds`, so a burst of load from
    other processes hits both sides alike.
    """
    time_r = time_m = 0.0
    steps_r = steps_m = 0
    order = [0, 1] if random_first else [1, 0]
    clock = time.perf_counter
    while time_r + time_m < 2 * seconds or not (steps_r and steps_m):
        for side in order:
            t0 = clock()
            if side == 0:
                steps_r += loop.run(fragment)
                time_r += clock() - t0
            else:
                steps_m += runner.sample().env_steps
                time_m += clock() - t0
        order.reverse()
    return steps_r / time_r, steps_m / time_m


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=2.0, help="seconds per side per repeat, on average (default 2)")
    ap.add_argument("--repeats", type=int, default=5, help="interleaved repeats per env; medians are reported (default 5)")
    ap.add_argument("--envs", type=int, default=8, help="env copies on each side (default 8)")
    ap.add_argument("--fragment", type=int, default=128, help="rollout_fragment_length of the runner (default 128)")
    ap.add_argument("--inline-actions", action="store_true", help="call action_space(agent).sample() inside the random loop")
    ap.add_argument("--only", choices=["cartpole", "spread"], help="run one env only")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--torch-acting", action="store_true",
                    help="runners act through the modules' torch passes, not their NumPy copies (marl.modules.numpy_acting)")
    args = ap.parse_args()

    envs = ENVS
    if args.only == "cartpole":
        envs = ENVS[:1]
    elif args.only == "spread":
        envs = ENVS[1:]

    print(f"sampling benchmark: {C.machine_line()}")
    print(
        f"{args.envs} envs per side, runner fragment {args.fragment} steps/env, "
        f"{args.repeats} repeats x {args.seconds:g} s per measurement, marl and random loop interleaved chunk by chunk"
    )
    t_start = time.perf_counter()

    setups = []
    for name, env_id, env_config, shared, target in envs:
        t0 = time.perf_counter()
        cfg = make_config(env_id, env_config, shared, args.envs, args.fragment, args.seed)
        if args.torch_acting:
            cfg.env_runners(numpy_acting=False)
        runner = EnvRunner(cfg, 0)
        loop = RandomLoop(env_id, env_config, args.envs, args.inline_actions, args.seed)
        # warm-up: first fragment (starts the envs, first torch calls) and a few random steps
        runner.sample()
        runner.sample()
        loop.run(200)
        sample_us, step_us = loop.action_sample_share()
        if args.inline_actions:
            note = "sampled inline"
        else:
            note = "pre-generated"
        print(
            f"  {name}: set-up {time.perf_counter() - t0:.2f} s; action_space(agent).sample() costs "
            f"{sample_us:.1f} us/agent vs {step_us:.1f} us per random-loop env step "
            f"-> random actions {note}"
        )
        setups.append((name, runner, loop, target))
    C.flush()

    results = {name: {"rand": [], "marl": [], "ratio": []} for name, *_ in setups}
    for rep in range(args.repeats):
        for name, runner, loop, _ in setups:
            gc.collect()
            r_rand, r_marl = measure_pair(runner, loop, args.fragment, args.seconds, random_first=rep % 2 == 0)
            results[name]["rand"].append(r_rand)
            results[name]["marl"].append(r_marl)
            results[name]["ratio"].append(r_marl / r_rand)
            print(f"  repeat {rep + 1}/{args.repeats} {name}: random {r_rand:,.0f}  marl {r_marl:,.0f}  ratio {r_marl / r_rand:.3f}")
            C.flush()

    rows = []
    for name, runner, loop, target in setups:
        res = results[name]
        ratio = C.median(res["ratio"])
        rows.append(
            [
                name,
                f"{C.median(res['rand']):,.0f}",
                f"{C.median(res['marl']):,.0f}",
                f"{ratio:.3f}",
                C.spread(res["ratio"]),
                f">= {target}",
                verdict(ratio, target),
            ]
        )
        runner.stop()
        loop.close()
    actions = "sampled inline" if args.inline_actions else "pre-generated"
    C.print_table(
        ["env", "random-loop env steps/s", "marl env steps/s", "ratio", "ratio min-max", "target", ""],
        rows,
        title=f"Env steps/s, one in-process EnvRunner vs random-action loop ({args.envs} envs each, "
        f"random actions {actions}; medians of {args.repeats} interleaved repeats)",
    )
    print(f"\ntotal time {time.perf_counter() - t_start:.1f} s")


if __name__ == "__main__":
    main()
