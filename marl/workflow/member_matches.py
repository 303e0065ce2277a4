"""Two members of a population playing each other: a member's module rebuilt from saved weights
(`MemberFactory`) and sampled matches between two modules on the dict path (`play_matches`).

Used by the league's rating matches (`marl.workflow.league_ops`) and PSRO's evaluation matches
(`marl.population`). Members act by sampling their masked action distribution: a mixed strategy is
what a poker policy is, and its greedy action would be a different (more exploitable) policy.
"""

from __future__ import annotations

import numpy as np
import torch

from marl.connectors import build_policy_module
from marl.envs import make_env
from marl.errors import ConfigError


def action_probabilities(module, obs: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """[rows, actions] probabilities of a categorical-policy module at observations `obs` with legal `mask`."""
    batch = {"obs": torch.as_tensor(np.asarray(obs, np.float32)), "action_mask": torch.as_tensor(np.asarray(mask, np.float32))}
    out = module.forward_inference(batch)
    logits = out.get("action_dist_inputs")
    if logits is None:
        raise ConfigError(f"population members need a categorical policy (a module with 'action_dist_inputs'); "
                          f"{type(module).__name__} returns {sorted(out)}")
    logits = logits.masked_fill(batch["action_mask"] < 0.5, float("-inf"))
    return torch.softmax(logits.double(), dim=-1).numpy()


class MemberFactory:
    """Builds the trained policy's module (the shape every member shares) and loads a member's weights into it."""

    def __init__(self, config, policy: str, spec):
        self.config, self.policy, self.spec = config, policy, spec

    def module(self, weights: dict):
        with torch.random.fork_rng(devices=[]):
            module = build_policy_module(self.config, self.policy, self.spec)
        module.set_state(weights)
        return module.eval()


def play_matches(config, modules: tuple, episodes: int, seed: int) -> np.ndarray:
    """[episodes, 2] returns of `modules[0]` seated as player_0 and `modules[1]` as player_1 (sampled play)."""
    env = make_env(config.environment_cfg.env, dict(config.environment_cfg.env_config), config.environment_cfg.wrappers)
    agents = list(env.possible_agents)
    if len(agents) != 2:
        raise ConfigError(f"population matches are two-player; env {config.environment_cfg.env!r} has agents {agents}")
    seat = dict(zip(agents, modules))
    rng = np.random.default_rng(seed)
    out = np.zeros((episodes, 2))
    try:
        for e in range(episodes):
            obs, _ = env.reset(seed=int(rng.integers(2**31)))
            while True:
                actions = {}
                for agent, o in obs.items():
                    probs = action_probabilities(seat[agent], *_inputs(o, seat[agent]))[0]
                    actions[agent] = int(rng.choice(len(probs), p=probs))
                obs, rewards, terms, _, _ = env.step(actions)
                for i, agent in enumerate(agents):
                    out[e, i] += rewards.get(agent, 0.0)
                if terms["__all__"]:
                    break
    finally:
        env.close()
    return out


def _inputs(obs, module) -> tuple[np.ndarray, np.ndarray]:
    """One agent's observation as a row for the module: PettingZoo's masked Dict, or a plain array (all moves legal)."""
    if isinstance(obs, dict) and "observation" in obs and "action_mask" in obs:
        return np.asarray(obs["observation"], np.float32).reshape(1, -1), np.asarray(obs["action_mask"])[None]
    if not hasattr(module.action_space, "n"):
        raise ConfigError(f"population matches need discrete actions; the policy's action space is {module.action_space}")
    return np.asarray(obs, np.float32).reshape(1, -1), np.ones((1, module.action_space.n))
