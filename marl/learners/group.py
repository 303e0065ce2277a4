"""LearnerGroup: the learner in-process (num_learners=0) or as a Ray actor (num_learners=1)."""

from __future__ import annotations

from marl.learners.learner import Learner


class LearnerGroup:
    def __init__(self, config, specs: dict):
        n = config.learners_cfg.num_learners
        if n > 1:
            raise ValueError(
                f"learners.num_learners={n}: data-parallel learners are not available yet; use 0 (in-process) or 1"
            )
        self.is_local = n == 0
        if self.is_local:
            self.local = Learner(config, specs)
            self.remote = None
        else:
            import ray

            cls = ray.remote(num_cpus=config.learners_cfg.num_cpus_per_learner)(Learner)
            self.local = None
            self.remote = cls.remote(config, specs)
            ray.get(self.remote.ping.remote())
        self.version = self._call("get_version")  # mirrored here: operators read it on every item

    def _call(self, method: str, *args):
        if self.is_local:
            return getattr(self.local, method)(*args)
        import ray

        return ray.get(getattr(self.remote, method).remote(*args))

    def update(self, batch):
        results = self._call("update", batch)
        if results:
            self.version += 1
        return results

    def update_target(self, tau: float = 1.0, policies: list[str] | None = None) -> list[str]:
        return self._call("update_target", tau, policies)

    def get_weights(self) -> dict:
        return self._call("get_weights")

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

    def stop(self) -> None:
        if self.remote is not None:
            import ray

            ray.kill(self.remote)
            self.remote = None
