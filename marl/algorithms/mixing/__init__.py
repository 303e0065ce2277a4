"""What VDN and QMIX share: the training section, the joint-Q loss, the workflow and the group layout."""

from marl.algorithms.mixing.config import MixingConfig, MixingTraining

__all__ = ["MixingConfig", "MixingTraining"]
