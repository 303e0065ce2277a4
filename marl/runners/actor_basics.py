"""What every runner answers apart from sampling: liveness, process and node (as a Ray actor), and the
bookkeeping the runner group reads and sets (`weights_version`, `_steps_sampled`, `specs` and `module` of each
runner). The whole contract: `marl.workflow.runner_protocol`."""

from __future__ import annotations

import os

from marl.policies import MappingError


class ActorBasics:
    # Policies that act as frozen population members (`set_frozen_policies`); part of the runner's state.
    frozen_policies: frozenset = frozenset()

    def ping(self) -> str:
        return "ok"

    def getpid(self) -> int:
        return os.getpid()

    def node_id(self) -> str:
        """The Ray node this runner lives on ('local' outside Ray): shows how runners spread over a cluster."""
        import ray

        return ray.get_runtime_context().get_node_id() if ray.is_initialized() else "local"

    def set_steps_sampled(self, env_steps: int) -> None:
        """Where this runner's share of the run stands: a replacement for a failed runner is given the
        failed one's count, so exploration schedules (DQN's epsilon) go on instead of starting over."""
        self._steps_sampled = int(env_steps)

    def get_weights_version(self) -> int:
        return self.weights_version

    def get_weights(self) -> dict:
        """What `set_weights` takes: the version this runner acts with and its modules' weights."""
        return {"version": self.weights_version, "modules": self.module.get_state()}

    def get_spaces(self) -> dict:
        return {pid: (s.observation_space, s.action_space) for pid, s in self.specs.items()}

    def set_frozen_policies(self, policy_ids) -> list[str]:
        """Policies that act as frozen population members from now on: with their inference pass (no
        exploration schedule: a DQN member's epsilon is 0) and their action distribution sampled, in
        training fragments and evaluations alike -- a Q-learner's greedy action, a PPO member's mixed
        strategy: how PSRO's payoff matches play a member (`marl.population.members`). The others explore
        as the call asks. Returns the frozen ids, sorted."""
        ids = sorted(set(policy_ids))
        unknown = [pid for pid in ids if pid not in self.specs]
        if unknown:
            raise MappingError(f"set_frozen_policies: unknown policies {unknown}; this runner's are {sorted(self.specs)}")
        self.frozen_policies = frozenset(ids)
        return ids
