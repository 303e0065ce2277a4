"""What every runner answers apart from sampling: liveness, process and node (as a Ray actor), and the
bookkeeping the runner group reads and sets (`weights_version`, `_steps_sampled`, `specs` of each runner)."""

from __future__ import annotations

import os


class ActorBasics:
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

    def get_spaces(self) -> dict:
        return {pid: (s.observation_space, s.action_space) for pid, s in self.specs.items()}
