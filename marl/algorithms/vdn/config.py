"""VDNConfig: value decomposition networks (Sunehag et al. 2018): Q_tot is the sum of the agents' Q values.

The loss and the workflow are the shared ones in `marl.algorithms.mixing`
(loss.py, workflow.py); VDN contributes only its mixer.
"""

from __future__ import annotations

from marl.algorithms.mixing import MixingConfig, MixingTraining


class VDNConfig(MixingConfig):
    algo_name = "VDN"
    training_section_cls = MixingTraining
    mixer = "vdn"
