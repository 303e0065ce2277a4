"""The dict-API runner over the worlds of one VMAS env.

`EnvRunner` steps K Python env copies one after the other. A VMAS env already holds K worlds
in torch tensors and steps them in one call, so `VectorEnvRunner` makes ONE VMAS env with
`num_envs = num_envs_per_env_runner` and gives the runner's per-copy bookkeeping (episodes,
pending rows, resets) K views of it (`marl.envs.batched_view.BatchViews`): each lockstep step first steps the whole
batch with every world's actions, then the usual per-copy loop reads each world's row of the
result. It is the fallback for what the batched path (`BatchedEnvRunner`) does not run.
"""

from __future__ import annotations

from marl.envs.batched_view import BatchViews
from marl.envs.vmas import VmasEnv
from marl.runners.env_runner import EnvRunner
from marl.runners.seeds import batch_seed


class VectorEnvRunner(EnvRunner):
    """EnvRunner over one batched VMAS env; `self.envs` are its K world views."""

    def _make_envs(self) -> list:
        env_cfg = self.config.environment_cfg
        seed = batch_seed(self.config.debugging_cfg.seed, self.worker_index, self.incarnation)
        self.batch = BatchViews(VmasEnv(env_cfg.env, dict(env_cfg.env_config), self.num_envs, seed), seeded=False)
        return list(self.batch.views)

    def _step_envs(self, actions: list[dict], collect: bool) -> int:
        # One batched step of every world; parked or retired worlds get no-op actions and their rows are not read.
        self.batch.step(actions)
        return super()._step_envs(actions, collect)

    def _replay_episode(self, k: int, env_state: dict) -> None:
        # VMAS draws resets from its own generator, not from per-copy seeds: a restored runner
        # starts world k afresh instead of replaying the episode that was in progress.
        self._reset_env(k)
