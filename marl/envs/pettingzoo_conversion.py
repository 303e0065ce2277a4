"""PettingZoo's AEC-to-parallel conversion, stepped without the observations it throws away.

`parallel_env()` of mpe2, butterfly and SISL is an AEC env converted by PettingZoo's
`aec_to_parallel_wrapper`. Its `step()` calls `aec_env.last()` before each agent's AEC step and
discards all five values, then observes every agent again for the result: each parallel step renders
every agent's observation twice. On full Pistonball an observation is a 457x120x3 crop of the screen,
so half the observing is wasted. `last(observe=False)` (PettingZoo's `AECEnv.last`) returns the same
flags without the observation.
"""

from __future__ import annotations

from collections import defaultdict

from pettingzoo.utils.conversions import aec_to_parallel_wrapper
from pettingzoo.utils.wrappers import BaseParallelWrapper


class ObserveOnceConversion(aec_to_parallel_wrapper):
    """`aec_to_parallel_wrapper` whose `step()` observes each agent once: upstream's step (PettingZoo
    1.27) with `last(observe=False)` for the values it discards. Everything else is upstream's, line for
    line: the cycle-order assertions, rewards summed over the cycle's AEC steps, the flag and info dicts
    copied after the cycle, the observations of the agents still present, ended agents stepped out with
    `None`. Same observations, rewards, flags and infos as upstream, step for step (tests/test_envs.py)."""

    def step(self, actions):
        rewards = defaultdict(int)
        for agent in self.aec_env.agents:
            if agent != self.aec_env.agent_selection:
                if self.aec_env.terminations[agent] or self.aec_env.truncations[agent]:
                    raise AssertionError(
                        f"expected agent {agent} got termination or truncation agent {self.aec_env.agent_selection}. "
                        "Parallel environment wrapper expects all agent death (setting an agent's self.terminations "
                        "or self.truncations entry to True) to happen only at the end of a cycle."
                    )
                raise AssertionError(
                    f"expected agent {agent} got agent {self.aec_env.agent_selection}, Parallel environment wrapper "
                    "expects agents to step in a cycle."
                )
            self.aec_env.last(observe=False)  # upstream discards last()'s values; kept for its checks
            self.aec_env.step(actions[agent])
            for agent in self.aec_env.agents:  # noqa: B020 (upstream's rebinding, harmless: the outer loop's iterator is unaffected)
                rewards[agent] += self.aec_env.rewards[agent]

        terminations = dict(**self.aec_env.terminations)
        truncations = dict(**self.aec_env.truncations)
        infos = dict(**self.aec_env.infos)
        observations = {agent: self.aec_env.observe(agent) for agent in self.aec_env.agents}
        while self.aec_env.agents and (
            self.aec_env.terminations[self.aec_env.agent_selection]
            or self.aec_env.truncations[self.aec_env.agent_selection]
        ):
            self.aec_env.step(None)

        self.agents = self.aec_env.agents
        return observations, rewards, terminations, truncations, infos


def observing_once(env):
    """`env` with its conversion observing once per agent and step (in place, as `without_guard_wrappers`:
    `make_env` built the env for its adapter alone). Only PettingZoo's own `aec_to_parallel_wrapper` is
    changed, found under any parallel wrappers (SuperSuit's, a user's); a subclass of it, which may have
    its own step(), and any other parallel env are left as they are. The class swap keeps every attribute
    the conversion holds: ObserveOnceConversion adds none."""
    conversion = env
    while isinstance(conversion, BaseParallelWrapper):
        conversion = conversion.env
    if type(conversion) is aec_to_parallel_wrapper:
        conversion.__class__ = ObserveOnceConversion
    return env
