"""MAPPO's iteration is PPO's graph: the centralised critic changes the data and the
module, not the schedule.

    sample(sync) --batch--> concat(train_batch_size) --batch--> learn
        --results--> sync_weights(all) --results--> report
"""

from marl.algorithms.ppo.workflow import ppo_workflow


def mappo_workflow(config):
    wf = ppo_workflow(config)
    wf.name = wf.graph.graph["name"] = "mappo"
    return wf
