"""The env runners of a run: one in-process runner, or N Ray actors.

Remote work is Ray actors; waiting is `ray.get`/`ray.wait`; weights travel
through the object store, put once per version and shared by all runners. A
runner actor that dies is recreated, given the current weights before its
samples are used, and counted in `restarts`.
"""

from __future__ import annotations

import logging

from marl.runners.env_runner import EnvRunner

log = logging.getLogger(__name__)


class RunnerFailedError(RuntimeError):
    pass


class EnvRunnerGroup:
    def __init__(self, config):
        self.config = config
        self.num_remote = config.env_runners_cfg.num_env_runners
        self.is_local = self.num_remote == 0
        self.local: EnvRunner | None = EnvRunner(config, 0) if self.is_local else None
        self.remote: list = []
        self.restarts = 0
        self.max_restarts = config.env_runners_cfg.max_runner_restarts
        self._weights_ref = None  # latest weights in the object store (for restarts)
        self._acks: dict = {}  # set_weights calls in flight -> (runner index, actor it was sent to)
        self.versions = [0] * self.num_remote  # weights version last sent to each runner (it acts with it next)
        if not self.is_local:
            import ray

            self._actor_cls = ray.remote(num_cpus=config.env_runners_cfg.num_cpus_per_env_runner)(EnvRunner)
            self.remote = [self._make_actor(i) for i in range(self.num_remote)]
            ray.get([a.ping.remote() for a in self.remote])  # fail here, not mid-iteration

    def _make_actor(self, index: int):
        import ray.util

        options = {"max_concurrency": 1}
        # On a cluster, spread runners over the nodes; inside a placement group (a Tune trial)
        # leave them to the group's bundles, which an explicit strategy would bypass.
        if ray.util.get_current_placement_group() is None:
            options["scheduling_strategy"] = "SPREAD"
        return self._actor_cls.options(**options).remote(self.config, index + 1)

    # -- calls --------------------------------------------------------------
    def call_all(self, method: str, *args) -> list:
        if self.is_local:
            return [getattr(self.local, method)(*args)]
        refs = [self.call_remote(index, method, *args) for index in range(self.num_remote)]
        return [self.get_remote(index, ref, method, *args) for index, ref in enumerate(refs)]

    def call_remote(self, index: int, method: str, *args):
        return getattr(self.remote[index], method).remote(*args)

    def get_remote(self, index: int, ref, method: str, *args):
        """The result of `call_remote`; a dead runner is restarted and asked again."""
        import ray

        try:
            return ray.get(ref)
        except ray.exceptions.RayActorError as err:
            self._restart(index, err)
            return ray.get(getattr(self.remote[index], method).remote(*args))

    def _restart(self, index: int, err: Exception) -> None:
        import ray

        self.restarts += 1
        if self.restarts > self.max_restarts:
            raise RunnerFailedError(
                f"env runner {index + 1} died ({err}); {self.restarts} restarts exceed "
                f"env_runners.max_runner_restarts={self.max_restarts}"
            ) from err
        log.warning("env runner %d died (%s); restarting it", index + 1, err)
        self.remote[index] = self._make_actor(index)
        self.versions[index] = 0
        if self._weights_ref is not None:
            self.versions[index] = ray.get(self.remote[index].set_weights.remote(self._weights_ref))

    def node_ids(self) -> list[str]:
        """The Ray node id of each runner (['local'] when sampling in-process)."""
        return self.call_all("node_id")

    # -- weights ------------------------------------------------------------
    def sync_weights(self, weights: dict, indices: list[int] | None = None) -> None:
        """Sends weights to all runners (or `indices`); a no-op for runners already at this version."""
        if self.is_local:
            self.local.set_weights(weights)
            return
        import ray

        self._check_acks()
        self._weights_ref = ray.put(weights)  # one copy in the object store, read by every runner
        targets = range(self.num_remote) if indices is None else indices
        # Not waited for: a runner busy sampling applies the weights right after, before any later
        # call (actor calls run in order), and the driver goes on meanwhile.
        for i in targets:
            actor = self.remote[i]
            self._acks[actor.set_weights.remote(self._weights_ref)] = (i, actor)
            self.versions[i] = weights["version"]

    def _check_acks(self) -> None:
        """Surfaces failures of earlier weight syncs that have finished (restarting dead runners)."""
        import ray

        if not self._acks:
            return
        done, _ = ray.wait(list(self._acks), num_returns=len(self._acks), timeout=0)
        for ref in done:
            index, actor = self._acks.pop(ref)
            try:
                ray.get(ref)
            except ray.exceptions.RayActorError as err:
                if self.remote[index] is actor:  # not yet replaced by a failed sample call
                    self._restart(index, err)

    def stop(self) -> None:
        if self.local is not None:
            self.local.stop()
        if self.remote:
            import ray

            for actor in self.remote:
                try:
                    ray.kill(actor)
                except Exception:
                    pass
            self.remote = []
