"""SAC on Pendulum-v1: wall time and env steps to a mean episode return of -250, in-process.

    .venv/bin/python benchmarks/speed/sac_pendulum.py [--seeds 1] [--scenario scenarios/pendulum_sac.yaml] [key=value ...]

marl runs `scenarios/pendulum_sac.yaml` (train() until the return reaches -250 or
20k env steps). The same-run baseline is a minimal single-file SAC written out
below (CleanRL style: one gymnasium env, NumPy ring buffer, tanh-squashed Gaussian
actor, twin critics with Polyak targets, learned temperature, the scenario's
networks, learning rates, batch size, fragment length and updates per round), run
right after marl for each seed. The ratio of marl's time per env step to the
baseline's is marl's framework overhead (sampling, replay, graph, learner seam).
Both report the mean return of the episodes finished in each 1,000-step window,
the rule `episode_return_mean` uses. The machine is shared: compare ratios, not seconds.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

import _path  # noqa: F401  (benchmarks/ on sys.path: the shared helpers)
import _common as C

T_IMPORT = time.perf_counter()
import gymnasium as gym  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402

import marl  # noqa: E402

IMPORT_S = time.perf_counter() - T_IMPORT
TARGET_RETURN, MAX_STEPS = -250.0, 20_000


def run_marl(scenario: str, seed: int, overrides: list[str]) -> dict:
    cfg = marl.load_scenario(scenario, overrides)
    cfg.debugging(seed=seed).stopping(episode_return_mean=None, env_steps_total=None)
    t0 = time.perf_counter()
    algo = cfg.build()
    build_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    split = {"sample": 0.0, "store": 0.0, "replay": 0.0, "learn": 0.0, "sync_weights": 0.0}
    try:
        while True:
            result = algo.train()
            for key in split:
                split[key] += float(result.get(f"perf/{key}_time_s", 0.0) or 0.0)
            ret = result["episode_return_mean"]
            if (ret == ret and ret >= TARGET_RETURN) or result["env_steps_total"] >= MAX_STEPS:
                break
    finally:
        algo.stop()
    return {
        "build_s": build_s, "wall_s": time.perf_counter() - t0, "env_steps": result["env_steps_total"],
        "updates": result["counters/learner_updates"], "reached": ret == ret and ret >= TARGET_RETURN,
        **{f"{k}_s": v for k, v in split.items()},
    }


def _mlp(n_in: int, hiddens: list[int], n_out: int) -> nn.Sequential:
    layers: list[nn.Module] = []
    for h in hiddens:
        layers += [nn.Linear(n_in, h), nn.ReLU()]
        n_in = h
    return nn.Sequential(*layers, nn.Linear(n_in, n_out))


def run_plain_sac(cfg, seed: int) -> dict:
    """The baseline: SAC written out by hand with the scenario's settings."""
    t, r = cfg.training_cfg, cfg.env_runners_cfg
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    env = gym.make("Pendulum-v1")
    low, high = env.action_space.low, env.action_space.high
    hid = t.model["hiddens"]
    actor = _mlp(3, hid, 2)
    critics = nn.ModuleList([_mlp(4, hid, 1), _mlp(4, hid, 1)])
    targets = nn.ModuleList([_mlp(4, hid, 1), _mlp(4, hid, 1)])
    targets.load_state_dict(critics.state_dict())
    log_alpha = torch.zeros((), requires_grad=True)
    lr = lambda own: t.lr if own is None else own  # noqa: E731
    opt_q = torch.optim.Adam(critics.parameters(), lr=lr(t.critic_lr))
    opt_pi = torch.optim.Adam(actor.parameters(), lr=lr(t.actor_lr))
    opt_a = torch.optim.Adam([log_alpha], lr=lr(t.alpha_lr))
    target_entropy = -1.0

    def sample(obs):
        mean, log_std = actor(obs).chunk(2, -1)
        std = log_std.clamp(-20, 2).exp()
        u = mean + std * torch.randn_like(mean)
        logp = (torch.distributions.Normal(mean, std).log_prob(u) - 2 * (math.log(2) - u - F.softplus(-2 * u))).sum(-1)
        return torch.tanh(u), logp

    cap = t.replay_capacity
    b_obs, b_next = np.zeros((cap, 3), np.float32), np.zeros((cap, 3), np.float32)
    b_act, b_rew, b_done = np.zeros((cap, 1), np.float32), np.zeros(cap, np.float32), np.zeros(cap, np.float32)
    size = ptr = 0
    frag = r.rollout_fragment_length
    updates_per_round = max(1, round(t.training_intensity * frag / t.train_batch_size))
    obs, _ = env.reset(seed=seed)
    ep_ret, window, window_start = 0.0, [], 0
    steps = updates = 0
    reached = False
    t0 = time.perf_counter()
    while steps < MAX_STEPS and not reached:
        for _ in range(frag):
            with torch.no_grad():
                a, _ = sample(torch.as_tensor(obs, dtype=torch.float32).unsqueeze(0))
            a = a[0].numpy()
            nxt, rew, term, trunc, _ = env.step(low + (a + 1) * 0.5 * (high - low))
            b_obs[ptr], b_next[ptr], b_act[ptr], b_rew[ptr], b_done[ptr] = obs, nxt, a, rew, term
            ptr, size = (ptr + 1) % cap, min(size + 1, cap)
            ep_ret += rew
            obs = nxt
            if term or trunc:
                window.append(ep_ret)
                ep_ret = 0.0
                obs, _ = env.reset()
            steps += 1
        if steps - window_start >= 1000:
            if window and np.mean(window) >= TARGET_RETURN:
                reached = True
            window, window_start = [], steps
        if size < t.num_steps_sampled_before_learning_starts:
            continue
        for _ in range(updates_per_round):
            i = rng.integers(0, size, t.train_batch_size)
            o, a, no = torch.from_numpy(b_obs[i]), torch.from_numpy(b_act[i]), torch.from_numpy(b_next[i])
            rew, done = torch.from_numpy(b_rew[i]), torch.from_numpy(b_done[i])
            alpha = log_alpha.detach().exp()
            with torch.no_grad():
                na, nlogp = sample(no)
                x2 = torch.cat([no, na], -1)
                y = rew + t.gamma * (1 - done) * (torch.min(targets[0](x2), targets[1](x2)).squeeze(-1) - alpha * nlogp)
            x = torch.cat([o, a], -1)
            q_loss = sum(0.5 * (c(x).squeeze(-1) - y).pow(2).mean() for c in critics)
            opt_q.zero_grad()
            q_loss.backward()
            opt_q.step()
            pa, logp = sample(o)
            xa = torch.cat([o, pa], -1)
            pi_loss = (alpha * logp - torch.min(critics[0](xa), critics[1](xa)).squeeze(-1)).mean()
            opt_pi.zero_grad()
            pi_loss.backward()
            opt_pi.step()
            a_loss = -(log_alpha * (logp.detach() + target_entropy)).mean()
            opt_a.zero_grad()
            a_loss.backward()
            opt_a.step()
            with torch.no_grad():
                for p, tp in zip(critics.parameters(), targets.parameters()):
                    tp.lerp_(p, t.tau)
            updates += 1
    env.close()
    return {"wall_s": time.perf_counter() - t0, "env_steps": steps, "updates": updates, "reached": reached}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--scenario", default=str(C.REPO_ROOT / "scenarios" / "pendulum_sac.yaml"))
    ap.add_argument("overrides", nargs="*", help="scenario overrides, key=value")
    args = ap.parse_args()
    torch.set_num_threads(1)
    print(f"SAC Pendulum benchmark: {C.machine_line()}")
    print(f"scenario {args.scenario} {' '.join(args.overrides)}; import marl {IMPORT_S:.2f} s")
    rows, ratios, marl_runs = [], [], []
    for seed in range(args.seeds):
        m = run_marl(args.scenario, seed, args.overrides)
        b = run_plain_sac(marl.load_scenario(args.scenario, args.overrides), seed)
        marl_runs.append(m)
        ratios.append((m["wall_s"] / m["env_steps"]) / (b["wall_s"] / b["env_steps"]))
        for name, r in (("marl", m), ("single-file SAC", b)):
            rows.append([f"seed {seed} {name}", f"{r['wall_s']:.1f}", f"{r['env_steps']:,}", f"{r['updates']:,}",
                         f"{1000 * r['wall_s'] / max(1, r['updates']):.2f}", "yes" if r["reached"] else "NO"])
        C.flush()
    C.print_table(["run", "wall s", "env steps", "updates", "ms per update (incl. sampling)", f"reached {TARGET_RETURN:g}"], rows,
                  title=f"SAC Pendulum-v1 to mean return >= {TARGET_RETURN:g} (cap {MAX_STEPS:,} env steps)")
    split_rows = [[f"seed {i}"] + [f"{m[k + '_s']:.2f}" for k in ("sample", "store", "replay", "learn", "sync_weights")]
                  for i, m in enumerate(marl_runs)]
    C.print_table(["marl run", "sample s", "store s", "replay s", "learn s", "sync s"], split_rows, title="Where marl's time goes")
    print(f"\nmarl's time per env step vs the single-file SAC: median {C.median(ratios):.2f}x "
          f"(each run stops at the target, so env steps differ; see the table)")


if __name__ == "__main__":
    main()
