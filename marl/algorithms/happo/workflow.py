"""HAPPO's iteration: MAPPO's sampling, then one learner turn per trained policy in a random order.

    sample(sync) --batch--> concat(train_batch_size) --batch--> agent_order --batch--> learn_in_turn(0)
        --batch--> learn_in_turn(1) --batch--> ... learn_in_turn(n-1) --batch--> turns_done
        --results--> sync_weights(all) --results--> report

The chain is the paper's loop (Kuba et al. 2022, Algorithm 1): draw a permutation i_{1:n} of the agents; for
m = 1..n update agent i_m with the factor M^{i_{1:m}}, then multiply its ratios in (`turns.py`).
"""

from __future__ import annotations

from marl.algorithms.happo.turns import AgentOrder, LearnInTurn, TurnsDone
from marl.workflow import ConcatBatches, Report, SyncWeights, Workflow
from marl.workflow.graphs import sample_node


def turn_node(turn: int) -> str:
    return f"turn_{turn}"


def sequential_workflow(config, name: str, shuffle: bool = True) -> Workflow:
    """One `learn_in_turn` node per trained policy of the built config (HAPPO: one per agent)."""
    built = config.as_built()
    turns = len(built.trained_policy_ids(list(built.policy_specs())))
    wf = (
        Workflow(name)
        .add("sample", sample_node(config))
        .add("concat", ConcatBatches(min_agent_steps=config.training_cfg.train_batch_size), after="sample")
        .add("agent_order", AgentOrder(shuffle=shuffle), after="concat")
    )
    last = "agent_order"
    for turn in range(turns):
        wf.add(turn_node(turn), LearnInTurn(turn=turn), after=last)
        last = turn_node(turn)
    wf.add("turns_done", TurnsDone(), after=last)
    wf.add("sync_weights", SyncWeights(scope="all"), after="turns_done")
    return wf.add("report", Report(), after="sync_weights")


def happo_workflow(config) -> Workflow:
    return sequential_workflow(config, "happo")
