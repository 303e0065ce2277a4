"""How many env steps a runner's `sample()` takes: `rollout_fragment_length`, shortened for many agents.

A fragment is `num_envs_per_env_runner x rollout_fragment_length` env steps, and
every env step brings one row per acting agent. With hundreds of agents a
default fragment (8 x 128 env steps) is 166k rows of MAgent2's battle, forty
times the train batch of an algorithm that counts its batch in agent steps
(`AlgorithmConfig.batch_in_agent_steps`). Such a runner shortens its fragment so
that one call brings about its share of a train batch, and never more rows than
the same settings bring from a single-agent env: single-agent envs, and
multi-agent ones whose rows fit, keep `rollout_fragment_length` exactly.

With `env_runners.overlap` (and `overlap_round: half_batch`, the default) one call brings at
most half of its share of a train batch, whatever the agent count: the runner samples the
second half of a batch with the weights of the update that the first half waited for, so only
half the rows lag (learning per env step then matches synchronous sampling on CartPole).
"""

from __future__ import annotations

import math


def fragment_length(config, num_agents: int) -> int:
    """The env steps per env copy of one `sample()` of a runner stepping envs of `num_agents` agents."""
    run = config.env_runners_cfg
    length, envs = run.rollout_fragment_length, run.num_envs_per_env_runner
    if not config.batch_in_agent_steps:  # the algorithm's batch is in its own unit (DQN: replayed rows)
        return length
    batch = config.training_cfg.train_batch_size  # agent steps (`AlgorithmConfig.batch_in_agent_steps`)
    agents = max(1, num_agents)
    per_runner = math.ceil(batch / max(1, run.num_env_runners))
    if run.overlap and run.overlap_round == "half_batch":
        limit = math.ceil(per_runner / 2)  # overlap: half a train batch per round (see `env_runners.overlap_round`)
    elif agents <= 1:
        return length
    else:
        limit = max(per_runner, envs * length)  # rows: a train batch's share, or what a single-agent env brings
    if envs * length * agents <= limit:
        return length
    return max(1, math.ceil(limit / (envs * agents)))
