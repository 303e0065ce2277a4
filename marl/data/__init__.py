"""Data layer: SampleBatch, MultiAgentBatch, episodes, and the records on workflow edges (`marl.data.records`)."""

from marl.data.episode import Episode
from marl.data.sample_batch import MultiAgentBatch, SampleBatch

__all__ = ["Episode", "MultiAgentBatch", "SampleBatch"]
