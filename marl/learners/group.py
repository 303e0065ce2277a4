"""LearnerGroup: the learner in-process (num_learners=0), as one Ray actor (1), or N data-parallel actors (N > 1).

With N > 1 (see `marl.learners.distributed`) every call that changes learner
state (update, set_weights, update_target, ...) goes to all ranks, its
arguments put once in the object store; calls that only read (get_weights,
...) go to rank 0, whose state every rank shares.
"""

from __future__ import annotations

from marl.errors import ConfigError
from marl.learners.learner import Learner
from marl.execution.user_code import actor_options, import_hint
from marl.learners.distributed import start_distributed_learners

# Calls that read learner state: answered by rank 0 alone. Anything else goes to every rank.
_READ_ONLY = frozenset({"get_weights", "get_version", "get_optimizer_state", "get_target_state", "get_state", "get_threads", "ping"})


def check_gpu_resources(config) -> None:
    """Learner actors asking for more GPUs than the Ray cluster has would wait forever: a ConfigError instead."""
    lc = config.learners_cfg
    if lc.num_gpus_per_learner <= 0:
        return
    import ray

    have = ray.cluster_resources().get("GPU", 0)
    need = lc.num_learners * lc.num_gpus_per_learner
    if need > have:
        raise ConfigError(
            f"'learners.num_learners' x 'learners.num_gpus_per_learner' = {need:g} GPUs, but the Ray cluster has "
            f"{have:g}; use fewer learners or GPUs per learner (0: learn on the CPU)"
        )


class LearnerGroup:
    def __init__(self, config, specs: dict):
        config = config.as_built()  # (made straight from an unbuilt config: its `auto` keys set, as build does)
        n = config.learners_cfg.num_learners
        self.is_local = n == 0
        if n:
            check_gpu_resources(config)
        self.replicas: list = []  # all learner actors, rank order (rank 0 is also `remote`)
        if self.is_local:
            self.local = Learner(config, specs)
            self.remote = None
        elif n == 1:
            import ray


            cls = ray.remote(num_cpus=config.learners_cfg.num_cpus_per_learner,
                             num_gpus=config.learners_cfg.num_gpus_per_learner, **actor_options(config))(Learner)
            self.local = None
            self.remote = cls.remote(config, specs)
            try:
                ray.get(self.remote.ping.remote())
            except ray.exceptions.RayActorError as err:
                raise (import_hint(err, "the learner actor") or err) from None
            self.replicas = [self.remote]
        else:
            self.local = None
            self.replicas = start_distributed_learners(config, specs, n)
            self.remote = self.replicas[0]
        self.version = self._call("get_version")  # mirrored here: operators read it on every item
        self.threads = tuple(self._call("get_threads"))  # (torch threads of the updates, why): the run says it

    def _call(self, method: str, *args):
        if self.is_local:
            return getattr(self.local, method)(*args)
        import ray

        if len(self.replicas) > 1 and method not in _READ_ONLY:
            args = tuple(ray.put(a) for a in args)  # one copy in the object store, read by every rank
            return ray.get([getattr(actor, method).remote(*args) for actor in self.replicas])[0]
        return ray.get(getattr(self.remote, method).remote(*args))

    def update(self, batch, connector_deltas=(), env_steps: int | None = None):
        """One update on `batch` (a MultiAgentBatch) -> {policy: {stat: float | per-row ndarray}}; `env_steps`: the
        run's so far (`learners.lr_multiplier`)."""
        results = self._call("update", batch, list(connector_deltas), env_steps)
        if results:
            self.version += 1
        return results

    def update_target(self, tau: float = 1.0, policies: list[str] | None = None) -> list[str]:
        return self._call("update_target", tau, policies)

    def get_weights(self, on_device: bool = False) -> dict:
        """The learner's weights (`Learner.get_weights`); `on_device` is honoured by an in-process learner only: a
        learner actor's weights reach this process through Ray, as NumPy."""
        return self.local.get_weights(on_device) if self.is_local else self._call("get_weights")

    def set_weights(self, weights: dict) -> None:
        self._call("set_weights", weights)
        self.version = weights["version"]

    def get_version(self) -> int:
        return self.version

    def get_target_state(self) -> dict:
        return self._call("get_target_state")

    def set_target_state(self, state: dict) -> None:
        self._call("set_target_state", state)

    def get_optimizer_state(self) -> dict:
        return self._call("get_optimizer_state")

    def set_optimizer_state(self, state: dict) -> None:
        self._call("set_optimizer_state", state)

    def get_state(self) -> dict:
        return self._call("get_state")

    def set_state(self, state: dict) -> None:
        self._call("set_state", state)
        self.version = state["weights"]["version"]

    def stop(self) -> None:
        if self.replicas:
            import ray

            for actor in self.replicas:
                ray.kill(actor)
            self.replicas = []
            self.remote = None
