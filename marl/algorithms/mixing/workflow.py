"""VDN/QMIX's iteration: DQN's two branches, storing joint (per group, per env step) transitions.

    sample --batch--> store_to_replay(joint) ------------------------------------------.
                                                                                        v
    replay --batch--> learn --> update_priorities --> update_target --> sync_weights --> concurrently --> report

Only the store differs from DQN's graph (`marl.algorithms.dqn.workflow`): the
learner's loss mixes the agents' Q values; the graph moves the same items.
"""

from __future__ import annotations

from marl.algorithms.dqn.workflow import dqn_workflow
from marl.workflow import Workflow


def mixing_workflow(config, name: str) -> Workflow:
    return dqn_workflow(config, name=name, joint=True)
