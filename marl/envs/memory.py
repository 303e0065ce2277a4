"""Tasks that need memory: a memoryless policy cannot solve them, a recurrent one can.

- `StatelessCartPole-v1` (a Gymnasium id, registered when marl is imported): CartPole-v1
  whose observation keeps the cart position and the pole angle and drops both
  velocities, so a policy must infer them from the history.
- `marl.envs.memory` (an env module, like PettingZoo's): `RecallCue`, two agents that
  each see a random cue (one of `num_cues`) only at the first step, blank
  observations for `delay` steps after it, then a query flag; the action at the
  query step scores 1 if it names the agent's own cue. Every episode is
  `delay + 2` steps; the return of an agent is 1 (recalled) or 0, so a memoryless
  policy scores 1 / num_cues on average.

    environment: {env: marl.envs.memory, env_config: {num_cues: 4, delay: 4}}
"""

from __future__ import annotations

import gymnasium
import numpy as np

from marl.envs.base import ALL, MultiAgentEnv

STATELESS_CARTPOLE = "StatelessCartPole-v1"


class StatelessObservation(gymnasium.ObservationWrapper):
    """Keeps observation entries `keep` (CartPole: position 0 and angle 2)."""

    def __init__(self, env: gymnasium.Env, keep=(0, 2)):
        super().__init__(env)
        self.keep = list(keep)
        space = env.observation_space
        self.observation_space = gymnasium.spaces.Box(space.low[self.keep], space.high[self.keep], dtype=space.dtype)

    def observation(self, observation):
        return observation[self.keep]


def make_stateless_cartpole(**kwargs) -> gymnasium.Env:
    return StatelessObservation(gymnasium.make("CartPole-v1", **kwargs))


def register_gymnasium_ids() -> None:
    if STATELESS_CARTPOLE not in gymnasium.envs.registry:
        gymnasium.register(STATELESS_CARTPOLE, entry_point=make_stateless_cartpole)


class RecallCue(MultiAgentEnv):
    """Two agents; each must name, `delay` blank steps later, the cue it saw at its first step."""

    possible_agents = ["agent_0", "agent_1"]
    metadata = {"name": "recall_cue", "turn_based": False}

    def __init__(self, num_cues: int = 4, delay: int = 4):
        if isinstance(num_cues, bool) or not isinstance(num_cues, int) or num_cues < 2:
            raise ValueError(f"num_cues must be an integer >= 2, got {num_cues!r}")
        if isinstance(delay, bool) or not isinstance(delay, int) or delay < 0:
            raise ValueError(f"delay must be an integer >= 0, got {delay!r}")
        self.num_cues, self.delay = num_cues, delay
        # [cue one-hot, query flag]
        self.space = gymnasium.spaces.Box(0.0, 1.0, (num_cues + 1,), np.float32)
        self.actions = gymnasium.spaces.Discrete(num_cues)
        self.np_random = np.random.default_rng()
        self.t = 0
        self.cues = {}

    def observation_space(self, agent):
        return self.space

    def action_space(self, agent):
        return self.actions

    def _obs(self) -> dict:
        out = {}
        for agent in self.possible_agents:
            obs = np.zeros(self.num_cues + 1, np.float32)
            if self.t == 0:
                obs[self.cues[agent]] = 1.0
            elif self.t == self.delay + 1:
                obs[-1] = 1.0
            out[agent] = obs
        return out

    def reset(self, seed=None):
        if seed is not None:
            self.np_random = np.random.default_rng(seed)
        self.t = 0
        self.cues = {a: int(self.np_random.integers(self.num_cues)) for a in self.possible_agents}
        return self._obs(), {a: {} for a in self.possible_agents}

    def step(self, actions):
        query = self.t == self.delay + 1
        rewards = {a: float(query and int(actions[a]) == self.cues[a]) for a in self.possible_agents}
        self.t += 1
        done = query
        obs = self._obs() if not done else {a: np.zeros(self.num_cues + 1, np.float32) for a in self.possible_agents}
        terms = {a: done for a in self.possible_agents}
        truncs = {a: False for a in self.possible_agents}
        terms[ALL], truncs[ALL] = done, False
        if done:
            truncs[ALL] = True  # both flags carry __all__ = True once the episode is over (the env contract)
            truncs = {a: False for a in self.possible_agents} | {ALL: True}
        return obs, rewards, terms, truncs, {a: {} for a in self.possible_agents}


def parallel_env(**config) -> RecallCue:
    """What `environment.env: marl.envs.memory` makes (env_config: num_cues, delay)."""
    return RecallCue(**config)
