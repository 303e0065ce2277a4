"""A runner's checkpoint state: RNG states, in-progress episodes (how each started plus the actions since),
connector statistics and carried module states, and the replay that restores them.

`EnvRunner` inherits these methods. They are their own module because saving and replaying an episode is
a job apart from stepping envs (`marl.runners.lockstep`) and collecting rows (`marl.runners.env_runner`): they
read the runner's attributes and change none of the step loop's. A vectorised runner overrides
`_replay_episode` (`marl.runners.vector_env_runner`).
"""

from __future__ import annotations

from collections import Counter

from marl.data import Episode
from marl.runners.episode_replay import obs_digest, replay_episode


class RunnerState:
    """`get_state` / `set_state` of `EnvRunner` (mixed in; uses its envs, episodes, connectors and RNGs)."""

    def get_state(self) -> dict:
        """RNG states, in-progress episodes (reset seed + actions since), filter statistics, module states.

        Taken between `sample()` calls, when no row is waiting for its reward.
        """
        envs = []
        for k in range(self.num_envs):
            episode = self._episodes[k]
            envs.append({
                "reset_rng": self._reset_rngs[k].bit_generator.state,
                "start": self._episode_starts[k],
                "actions": list(self._replay[k]),
                "obs_digest": obs_digest(self._obs[k]),
                "episode": None if episode is None else {
                    "id": episode.id, "t": episode.t, "policy_of": dict(episode.policy_of),
                    "agent_steps": dict(episode.agent_steps),
                    "agent_returns": dict(episode.agent_returns),
                },
            })
        state = {
            "started": self._started,
            "steps_sampled": self._steps_sampled,
            "next_episode_id": self._next_episode_id,
            "torch_rng": self.torch_rng.get_state(),
            "envs": envs,
            "connectors": {pid: c.get_state() for pid, c in self.connectors.items()},
            "frozen_policies": sorted(self.frozen_policies),
        }
        if self.agent_states:  # stateful modules: each agent's carried state, so resumed episodes act as they would have
            state["module_states"] = {pid: states.get_state() for pid, states in self.agent_states.items()}
        return state

    def set_state(self, state: dict) -> None:
        """Continues from `get_state()`'s output: replays each env copy's in-progress episode.

        Env copies beyond the saved ones keep their own fresh streams (a restore
        with more env copies per runner). Weights are not part of the state: the
        next `set_weights` always loads.
        """
        self.torch_rng.set_state(state["torch_rng"])
        self._next_episode_id = int(state["next_episode_id"])
        self.frozen_policies = frozenset(state.get("frozen_policies", ()))
        self._steps_sampled = int(state.get("steps_sampled", 0))
        for pid, connector_state in state.get("connectors", {}).items():
            if pid in self.connectors:
                self.connectors[pid].set_state(connector_state)
        self.weights_version = -1
        self._finished = []
        saved = state["envs"][: self.num_envs]
        for k, env_state in enumerate(saved):
            self._reset_rngs[k].bit_generator.state = env_state["reset_rng"]
        if not state["started"]:
            self._started = False
            return
        for k, env_state in enumerate(saved):
            self._replay_episode(k, env_state)
        for pid, module_states in state.get("module_states", {}).items():
            if pid in self.agent_states:
                self.agent_states[pid].set_state(module_states)
        for k in range(len(saved), self.num_envs):
            self._reset_env(k)
        self._started = True

    def _replay_episode(self, k: int, env_state: dict) -> None:
        start, actions = env_state["start"], env_state["actions"]
        obs = replay_episode(self.envs[k], start, actions, env_state["obs_digest"], self._label(k))
        self._obs[k] = obs
        self._episode_starts[k] = start
        self._replay[k] = list(actions)
        self._pending[k] = {}
        for states in self.agent_states.values():  # set_state loads the saved ones next
            states.reset(k)
        e = env_state["episode"]
        self._episodes[k] = Episode(
            id=int(e["id"]), env_index=k, t=int(e["t"]), policy_of=dict(e["policy_of"]),
            agent_steps=Counter({a: len(v) if isinstance(v, list) else int(v) for a, v in e["agent_steps"].items()}),
            agent_returns=dict(e["agent_returns"]),
        )
