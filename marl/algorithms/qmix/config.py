"""QMIXConfig: monotonic value factorisation (Rashid et al. 2018).

The mixer (`marl.modules.mixers.QMixer`) combines the agents' Q values with
non-negative weights produced by hypernetworks over the global state. The
loss and the workflow are the shared ones in `marl.algorithms.mixing`.
"""

from __future__ import annotations

from dataclasses import dataclass

from marl.algorithms.canonical import CanonicalTask
from marl.config.capabilities import DISCRETE, Capabilities
from marl.algorithms.mixing import MixingConfig, MixingTraining
from marl.config.checks import doc


@dataclass
class QMIXTraining(MixingTraining):
    mixing_embed_dim: int = doc("width of the mixing network's hidden layer", 32, min=1)
    hypernet_embed: int = doc("hidden width of the hypernetworks that produce the mixing weights", 64, min=1)


class QMIXConfig(MixingConfig):
    algo_name = "QMIX"
    # simple_spread (3 agents, 25 steps, discrete): a random team scores about -79 summed over the agents
    canonical_tasks = (
        CanonicalTask(
            "mpe2.simple_spread_v3", threshold=-64, budget=30_000, window=3,
            measured="-61.2 (3-iteration mean) at 10k env steps, 9 s; lr 0: -101 at 30k",
        ),
    )
    training_section_cls = QMIXTraining
    capabilities = Capabilities(action_spaces=DISCRETE, recurrent=True, overlap=True,
                                mixed_family=None)
    mixer = "qmix"
    model_options = MixingConfig.model_options + ("mixing_embed_dim", "hypernet_embed")
