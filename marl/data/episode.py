"""The record of one multi-agent episode in one env copy.

It keeps each agent's count of env steps it acted in, the reward it collected
and its policy binding (memory per agent, not per agent step). The batch rows carry the same
episode id and step index (`eps_id`, `t`), so a centralised critic can join the
agents' rows of one env step.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


@dataclass
class Episode:
    id: int
    env_index: int
    t: int = 0  # env steps taken so far
    policy_of: dict[str, str] = field(default_factory=dict)  # agent -> policy id, bound once
    agent_steps: Counter = field(default_factory=Counter)  # agent -> env steps it acted in
    agent_returns: dict[str, float] = field(default_factory=dict)
    done: bool = False

    def bind(self, agent: str, policy_id: str) -> None:
        self.policy_of[agent] = policy_id
        self.agent_steps[agent] = 0
        self.agent_returns.setdefault(agent, 0.0)

    @property
    def total_return(self) -> float:
        return float(sum(self.agent_returns.values()))

    def policy_returns(self) -> dict[str, float]:
        """Return of each policy: the sum over the agents bound to it."""
        out: dict[str, float] = {}
        for agent, ret in self.agent_returns.items():
            pid = self.policy_of.get(agent)
            if pid is not None:
                out[pid] = out.get(pid, 0.0) + ret
        return out

    def metrics(self) -> dict:
        """What a finished episode reports: compact, picklable, no arrays."""
        return {
            "episode_id": self.id,
            "return": self.total_return,
            "length": self.t,
            "policy_returns": self.policy_returns(),
            "agent_returns": dict(self.agent_returns),
            "policy_of": dict(self.policy_of),
        }
