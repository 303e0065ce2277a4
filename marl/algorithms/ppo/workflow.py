"""PPO's iteration as a graph: synchronous sampling into minibatch SGD (`marl.workflow.graphs`).

    sample(sync) --batch--> concat(train_batch_size) --batch--> learn
        --results--> sync_weights(all) --results--> report
"""

from marl.workflow import Workflow
from marl.workflow.graphs import synchronous_workflow


def ppo_workflow(config) -> Workflow:
    return synchronous_workflow(config, "ppo")
