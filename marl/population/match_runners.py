"""PSRO's evaluation matches spread over Ray actors (`psro.match_runners`), with no result lost to a dead one.

A match job is (key, member a's weights, member b's weights, episodes, seed): `play_matches` of the two
members' weights (a runner of its own, seeded by the job), a pure function of its arguments. So a job whose runner dies part-way is simply played
again, whole, on a replacement runner, and gives the very returns the dead runner would have: the payoff
table and the ratings come out as in an undisturbed run (and as in-process, `match_runners=0`). Each job's
result is kept once, by key, when its call returns; a dead runner's half-played job returns nothing.

Members' weights go to the object store once each (`MatchPool.put`) and a match runner builds the runner that
plays a job only for that job, then drops it: a population of many members holds no live networks.
A runner that fails counts against `env_runners.max_runner_restarts`, as the env runners' failures do.
"""

from __future__ import annotations

import logging

import numpy as np

from marl.population import members as mb
from marl.runners import RunnerFailedError
from marl.execution.ray_init import ensure_ray
from marl.execution.user_code import actor_options, job_runtime_env

log = logging.getLogger(__name__)


class MatchRunner:
    """A Ray actor that plays matches between two members given as weights."""

    def __init__(self, config, spec):
        self.config, self.spec = config, spec

    def ping(self) -> str:
        return "ok"

    def play(self, weights_a: dict, weights_b: dict, episodes: int, seed: int) -> np.ndarray:
        return mb.play_matches(self.config, self.spec, (weights_a, weights_b), episodes, seed)


class MatchPool:
    """`num_runners` match runners; `play(jobs)` returns every job's result, replaying those a dead runner held."""

    def __init__(self, config, spec, num_runners: int):
        import ray

        ensure_ray(runtime_env=job_runtime_env(config))
        self.config, self.spec = config, spec
        self.max_restarts = config.env_runners_cfg.max_runner_restarts
        self.restarts = 0
        self._actor_cls = ray.remote(num_cpus=config.env_runners_cfg.num_cpus_per_env_runner,
                                     **actor_options(config))(MatchRunner)
        self.runners = [self._actor_cls.remote(config, spec) for _ in range(num_runners)]
        self.in_flight: dict = {}  # call ref -> (runner index, job); read by tests that kill a runner mid-match
        ray.get([r.ping.remote() for r in self.runners])

    def put(self, weights: dict):
        """A member's weights in the object store, shared by every job that plays it."""
        import ray

        return ray.put(weights)

    def play(self, jobs: list[tuple]) -> dict:
        """{key: [episodes, 2] returns} of every job (key, weights_a, weights_b, episodes, seed)."""
        import ray

        pending, results = list(reversed(jobs)), {}
        idle = list(range(len(self.runners)))
        while pending or self.in_flight:
            while pending and idle:
                index, job = idle.pop(0), pending.pop()
                self.in_flight[self.runners[index].play.remote(*job[1:])] = (index, job)
            done, _ = ray.wait(list(self.in_flight), num_returns=1)
            index, job = self.in_flight.pop(done[0])
            try:
                returns = ray.get(done[0])
            except ray.exceptions.RayActorError as err:
                self._replace(index, err)
                pending.append(job)  # played again, whole: the same seed gives the same returns
            else:
                if job[0] in results:
                    raise RuntimeError(f"match job {job[0]!r} came back twice")  # a key is dispatched once at a time
                results[job[0]] = returns
            idle.append(index)
        return results

    def _replace(self, index: int, err: BaseException) -> None:
        import ray

        self.restarts += 1
        if self.restarts > self.max_restarts:
            raise RunnerFailedError(f"match runner {index} died ({str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__}); "
                                    f"{self.restarts} runner failures exceed env_runners.max_runner_restarts={self.max_restarts}") from err
        log.warning("match runner %d died; replacing it and playing its match again", index)
        try:
            ray.kill(self.runners[index])
        except Exception:
            pass
        self.runners[index] = self._actor_cls.remote(self.config, self.spec)

    def stop(self) -> None:
        import ray

        for runner in self.runners:
            try:
                ray.kill(runner)
            except Exception:
                pass
        self.runners, self.in_flight = [], {}
