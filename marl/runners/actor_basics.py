"""What every runner answers apart from sampling: liveness, process and node (as a Ray actor), and the
bookkeeping the runner group reads and sets (`weights_version`, `_steps_sampled`, `specs` and `module` of each
runner). The whole contract: `marl.workflow.runner_protocol`."""

from __future__ import annotations

import os

import numpy as np
import torch
from threadpoolctl import threadpool_limits

from marl.connectors.build import build_policy_module
from marl.errors import ConfigError
from marl.modules import MultiRLModule
from marl.policies import MappingError
from marl.runners.seeds import seed_sequence


def torch_act(module, inputs: dict, rng: torch.Generator, explore: bool, frozen: bool):
    """(forward output, distribution, actions) of a module acting in torch (both paths, when not through NumPy):
    exploring, its exploration pass sampled; else its inference pass, sampled where the policy acts as a frozen
    member or its greedy action is a draw (a random baseline), else its deterministic action."""
    out = module.forward_exploration(inputs) if explore and not frozen else module.forward_inference(inputs)
    dist = module.action_dist(out["action_dist_inputs"])
    sampled = explore or frozen or module.greedy_is_sampled
    return out, dist, dist.sample(rng) if sampled else dist.deterministic_sample()


def no_values(pid: str, module) -> ConfigError:
    return ConfigError(f"policy '{pid}': its algorithm records value predictions, but module "
                       f"{type(module).__name__}.forward_exploration returned no 'vf_preds'")


class ActorBasics:
    # Policies that act as frozen population members (`set_frozen_policies`); part of the runner's state.
    frozen_policies: frozenset = frozenset()

    def _setup(self, config, worker_index: int, incarnation: int, streams: int) -> list:
        """What every runner does first: one thread (small forward passes on shared cores: threads only add latency;
        NumPy's BLAS as well), its config as built (`auto` keys set), and its seed streams from (`debugging.seed`,
        worker index, incarnation): `streams` of them, the first the runner's own (action draws, module init)."""
        torch.set_num_threads(1)
        threadpool_limits(1, user_api="blas")
        self.config, self.worker_index, self.incarnation = config.as_built(), worker_index, incarnation
        return seed_sequence(self.config.debugging_cfg.seed, worker_index, incarnation).spawn(streams)

    @staticmethod
    def _torch_seed(stream) -> int:
        return int(stream.generate_state(1, np.uint64)[0] >> np.uint64(1))

    def _build_modules(self, torch_seed: int) -> MultiRLModule:
        """Each policy's module, initialised from `torch_seed` without touching the process's generator."""
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(torch_seed)
            return MultiRLModule({pid: build_policy_module(self.config, pid, s) for pid, s in self.specs.items()})

    def _set_exploration_step(self, env_steps: int | None = None) -> None:
        """Exploration schedules at `env_steps`; by default the run's env steps, estimated from this runner's own."""
        if env_steps is None:
            env_steps = self._steps_sampled * max(1, self.config.env_runners_cfg.num_env_runners)
        for pid in self.policy_ids:
            self.module[pid].set_exploration_step(env_steps)

    def run_evaluation(self, duration: int, unit: str = "episodes", explore: bool = False, exploration_step: int = 0) -> dict:
        """Fresh episodes with the current weights; no rows kept, no filter statistics updated.

        Exploration schedules are set to `exploration_step` (the run's env steps), so sampled
        evaluation explores as training does at that point (a training runner's next `sample()`
        sets its own estimate again).

        unit="episodes": the first `duration` episodes started run to their end (short episodes are not
        favoured). unit="env_steps": steps until `duration` env steps; the episodes that finished count.
        Returns {"episodes": [metrics...], "env_steps": int}. The runner steps (`_evaluation_steps`).
        """
        if unit not in ("episodes", "env_steps"):
            raise ValueError(f"evaluation unit must be 'episodes' or 'env_steps', got {unit!r}")
        self._set_exploration_step(exploration_step)
        first = self._start_evaluation()
        episodes = unit == "episodes"
        kept: list[dict] = []
        steps = 0
        try:
            while len(kept) < duration if episodes else steps < duration:
                taken, finished = self._evaluation_steps(explore, first + duration if episodes else None,
                                                         None if episodes else duration - steps)
                steps += taken
                kept.extend(e for e in finished if not episodes or e["episode_id"] - first < duration)
        finally:
            self._end_evaluation()
        return {"episodes": kept, "env_steps": steps}

    def evaluate(self, num_episodes: int, explore: bool = False) -> list[dict]:
        """The metrics of `num_episodes` fresh episodes (see `run_evaluation`)."""
        return self.run_evaluation(num_episodes, "episodes", explore)["episodes"]

    def set_weights(self, weights: dict) -> int:
        """Loads the modules (and what `_load_weights` adds); skipped when the version is already loaded."""
        version = weights["version"]
        if version != self.weights_version:
            self.module.set_state(weights["modules"])
            self._load_weights(weights)
            self.weights_version = version
        return self.weights_version

    def _load_weights(self, weights: dict) -> None:
        """What a runner loads beside its modules (the dict path: observation-filter state)."""

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
