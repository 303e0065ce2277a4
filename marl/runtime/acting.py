"""An Algorithm's policies acting outside training: RLlib's `compute_single_action` / `compute_actions`.

Each policy is a `marl.inference.Policy` (the same pass as `marl.load_policy` gives from a checkpoint:
env->module connectors, module, module->env connectors), built on first use and given the learner's
weights and connector statistics again whenever they changed since its last call. `compute_actions` maps
each agent id of an observation dict to its policy with the run's `multi_agent.policy_mapping`.
"""

from __future__ import annotations

from collections.abc import Mapping

from marl.connectors import PolicyConnectors, build_policy_module
from marl.inference import Policy


class ActingPolicies:
    def __init__(self, algo, max_keys: int = 1024):
        self.algo, self.max_keys = algo, max_keys
        self.mapping = algo.config.policy_mapping()
        self._policies: dict[str, Policy] = {}
        self._version: dict[str, int] = {}

    def policy(self, policy_id: str) -> Policy:
        """The policy `policy_id`, acting with the learner's current weights."""
        algo = self.algo
        if policy_id not in algo.policy_specs:
            raise KeyError(f"no policy '{policy_id}'; this algorithm has {sorted(algo.policy_specs)}")
        policy = self._policies.get(policy_id)
        if policy is None:
            config, spec = algo.config, algo.policy_specs[policy_id]
            connectors = PolicyConnectors(config, policy_id, spec, self.max_keys, 1)
            seed = config.debugging_cfg.seed
            policy = self._policies[policy_id] = Policy(
                build_policy_module(config, policy_id, spec), connectors, policy_id=policy_id,
                agents=algo.possible_agents, seed=None if seed is None else int(seed) + 104_729, max_keys=self.max_keys,
            )
        weights = algo.learners.get_weights()
        if self._version.get(policy_id) != weights["version"]:
            policy.set_weights(weights["modules"][policy_id], weights.get("connectors", {}).get(policy_id) or {})
            self._version[policy_id] = weights["version"]
        return policy

    def policy_of(self, agent_id: str) -> str:
        return self.mapping(agent_id)

    def compute_single_action(self, observation, *, policy_id: str | None = None, agent_id: str = "agent_0",
                              explore: bool = False):
        pid = policy_id if policy_id is not None else self.policy_of(agent_id)
        return self.policy(pid).compute_single_action(observation, explore=explore, key=agent_id)

    def compute_actions(self, observations: Mapping, *, explore: bool = False, new_episode: bool = False) -> dict:
        by_policy: dict[str, dict] = {}
        for agent, obs in observations.items():
            by_policy.setdefault(self.policy_of(agent), {})[agent] = obs
        actions = {}
        for pid, rows in by_policy.items():
            actions.update(self.policy(pid).compute_actions(rows, explore=explore, new_episode=new_episode))
        return {agent: actions[agent] for agent in observations}

    def reset(self) -> None:
        for policy in self._policies.values():
            policy.reset()
