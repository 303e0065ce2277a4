"""VDNConfig: value decomposition networks (Sunehag et al. 2018): Q_tot is the sum of the agents' Q values.

The loss and the workflow are the shared ones in `marl.algorithms.mixing`
(loss.py, workflow.py); VDN contributes only its mixer.
"""

from __future__ import annotations

from marl.algorithms.canonical import CanonicalTask
from marl.config.capabilities import DISCRETE, Capabilities
from marl.algorithms.mixing import MixingConfig, MixingTraining


class VDNConfig(MixingConfig):
    algo_name = "VDN"
    # simple_spread (3 agents, 25 steps, discrete): a random team scores about -79 summed over the agents
    canonical_tasks = (
        CanonicalTask(
            "mpe2.simple_spread_v3", threshold=-64, budget=30_000, window=3,
            measured="-63.8 (3-iteration mean) at 10k env steps, 8 s; lr 0: -101 at 30k",
        ),
    )
    training_section_cls = MixingTraining
    capabilities = Capabilities(action_spaces=DISCRETE, recurrent=True, overlap=True,
                                mixed_family=None)
    mixer = "vdn"
