"""Connectors: the env->module, module->env and learner pipelines (pieces: `marl.connectors.piece`)."""

from marl.connectors.build import (
    BUILTIN_PIECES,
    LearnerConnectors,
    PolicyConnectors,
    build_policy_module,
    env_to_module_pipeline,
    learner_pipeline,
    module_to_env_pipeline,
)
from marl.connectors.env_to_module import (
    EnvToModulePipeline,
    Flatten,
    FrameStack,
    MeanStd,
    MeanStdFilter,
    PrevActionReward,
)
from marl.connectors.learner import (
    GAE,
    LearnerPipeline,
    RewardClip,
    RewardScale,
    StandardizeAdvantages,
    compute_gae,
    gae_pieces,
    reverse_scan,
    standardize,
    vtrace,
)
from marl.connectors.module_to_env import ActionAdapter, ClipActions, ModuleToEnvPipeline, UnsquashActions
from marl.connectors.piece import ConnectorPiece, LearnerContext, RowContext

__all__ = [
    "ActionAdapter", "BUILTIN_PIECES", "ClipActions", "ConnectorPiece", "EnvToModulePipeline", "Flatten", "FrameStack", "GAE",
    "LearnerConnectors", "LearnerContext", "LearnerPipeline", "MeanStd", "MeanStdFilter", "ModuleToEnvPipeline",
    "PolicyConnectors", "PrevActionReward", "RewardClip", "RewardScale", "RowContext",
    "StandardizeAdvantages", "UnsquashActions", "build_policy_module", "compute_gae", "env_to_module_pipeline", "gae_pieces",
    "learner_pipeline", "module_to_env_pipeline", "reverse_scan", "standardize", "vtrace",
]
