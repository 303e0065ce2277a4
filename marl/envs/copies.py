"""N independent copies of a single-agent Gymnasium env, stepped as one multi-agent env.

`copies.<Gymnasium id>` (env_config: `num_agents`, default 2; every other key goes to
`gymnasium.make`) is what RLlib builds with `make_multi_agent` for its multi-agent CartPole and
Pendulum examples: agent `agent_i` lives in copy i and never sees the others; an agent whose
copy ends drops out, and the episode ends when every copy has ended, so the episode return
summed over agents is at most N times the single-agent maximum (CartPole-v1: 500 per agent).

One difference from RLlib's: a seeded reset seeds copy i with `seed + i` (RLlib seeds every
copy with the same seed, so seeded copies would start identically).
"""

from __future__ import annotations

from typing import Any

import gymnasium

from marl.envs.base import ALL, AgentID, EnvError, InfoDict, MultiAgentEnv, ObsDict, StepResult

PREFIX = "copies."


class IndependentCopiesEnv(MultiAgentEnv):
    """`num_agents` copies of `env_id` (made with `gymnasium.make(env_id, **make_kwargs)`) as agents agent_0..."""

    def __init__(self, env_id: str, num_agents: int = 2, **make_kwargs: Any) -> None:
        if isinstance(num_agents, bool) or not isinstance(num_agents, int) or num_agents < 1:
            raise EnvError(f"env '{PREFIX}{env_id}': env_config 'num_agents' must be an integer >= 1, got {num_agents!r}")
        self.envs = [gymnasium.make(env_id, **make_kwargs) for _ in range(num_agents)]
        self.possible_agents = [f"agent_{i}" for i in range(num_agents)]
        self._copy = dict(zip(self.possible_agents, self.envs))
        self.metadata = {"name": f"{PREFIX}{env_id}", "turn_based": False}
        self._live: set[AgentID] = set()

    def observation_space(self, agent: AgentID) -> gymnasium.Space:
        return self._env(agent).observation_space

    def action_space(self, agent: AgentID) -> gymnasium.Space:
        return self._env(agent).action_space

    def _env(self, agent: AgentID) -> gymnasium.Env:
        try:
            return self._copy[agent]
        except KeyError:
            raise EnvError(f"env {self.metadata['name']!r} has no agent {agent!r}; possible agents: {self.possible_agents}") from None

    def reset(self, seed: int | None = None) -> tuple[ObsDict, InfoDict]:
        obs, infos = {}, {}
        for i, (agent, env) in enumerate(self._copy.items()):
            obs[agent], infos[agent] = env.reset(seed=None if seed is None else seed + i)
        self._live = set(self.possible_agents)
        return obs, infos

    def step(self, actions: dict[AgentID, Any]) -> StepResult:
        if set(actions) != self._live:
            raise EnvError(f"env {self.metadata['name']!r}: expected actions for {sorted(self._live)}, got {sorted(actions)}")
        obs, rewards, terminateds, truncateds, infos = {}, {}, {}, {}, {}
        for agent, action in actions.items():
            ob, reward, terminated, truncated, info = self._copy[agent].step(action)
            obs[agent], rewards[agent], infos[agent] = ob, float(reward), info
            terminateds[agent], truncateds[agent] = bool(terminated), bool(truncated)
            if terminated or truncated:
                self._live.discard(agent)
        done = not self._live
        terminateds[ALL] = truncateds[ALL] = done
        return obs, rewards, terminateds, truncateds, infos

    def np_random_source(self):
        return None  # one generator per copy: runners reset it with a fresh seed every episode instead

    def close(self) -> None:
        for env in self.envs:
            env.close()


def make_copies_env(name: str, config: dict[str, Any]) -> IndependentCopiesEnv:
    """`copies.CartPole-v1` with env_config {num_agents: 2, ...gymnasium.make kwargs}."""
    env_id = name[len(PREFIX):]
    if env_id not in gymnasium.envs.registry:
        raise EnvError(f"env {name!r}: {env_id!r} is not a Gymnasium id (e.g. copies.CartPole-v1, copies.Pendulum-v1)")
    config = dict(config)
    num_agents = config.pop("num_agents", 2)
    try:
        return IndependentCopiesEnv(env_id, num_agents, **config)
    except TypeError as err:
        raise EnvError(f"env {name!r} rejected its env_config {sorted(config)}: {err}") from None
