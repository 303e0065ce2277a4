"""IMPALAConfig: asynchronous sampling, V-trace off-policy correction."""

from __future__ import annotations

from dataclasses import dataclass

from marl.algorithms.algorithm_config import AlgorithmConfig, AlgorithmParts
from marl.algorithms.canonical import CanonicalTask
from marl.config.capabilities import ANY_SPACE, Capabilities
from marl.algorithms.impala.loss import LOSS_COLUMNS, impala_loss, vtrace_prepare
from marl.errors import ConfigError
from marl.config.checks import doc
from marl.data import sample_batch as sb
from marl.algorithms.impala.workflow import async_actor_learner_workflow


@dataclass
class IMPALATraining:
    lr: float = doc("Adam learning rate", 1e-3, min=0)
    adam_eps: float = doc("Adam epsilon", 1e-7, min=0)
    gamma: float = doc("discount factor", 0.99, min=0, max=1)
    train_batch_size: int = doc("agent steps per learner update (agent steps: rows of all policies, one per acting agent per env step; a single-agent env step is one; fragments are concatenated up to it)", 500, min=1)
    minibatch_size: int | None = doc("agent rows per SGD step; null: the whole batch", None, min=1, at_most="train_batch_size")
    num_epochs: int = doc("passes over each train batch", 1, min=1)
    vtrace_clip_rho_threshold: float = doc("rho-bar: clip of the importance ratio in the value targets", 1.0, min=0)
    vtrace_clip_c_threshold: float = doc("c-bar: clip of the trace-cutting ratio", 1.0, min=0)
    vtrace_clip_pg_rho_threshold: float = doc("clip of the importance ratio in the policy-gradient advantage", 1.0, min=0)
    vtrace_lambda: float = doc("lambda of the V-trace traces (1: the paper's V-trace)", 1.0, min=0, max=1)
    vf_loss_coeff: float = doc("value loss weight", 0.5, min=0)
    entropy_coeff: float = doc("entropy bonus weight", 0.01, min=0)
    grad_clip: float | None = doc("max global gradient norm; null: no clipping", 40.0, min=0)
    max_requests_in_flight_per_env_runner: int = doc("sample requests queued at each runner", 2, min=1)
    max_policy_lag: int | None = doc(
        "oldest sample request age in learner updates before it is waited for; null: runners x requests in flight",
        None, min=1,
    )
    broadcast_interval: int = doc("learner updates between weight syncs to the runners that produced the data", 1, min=1)
    min_env_steps_per_iteration: int = doc("env steps sampled per train() iteration", 2000, min=0)
    popart: bool = doc("PopArt value normalisation (marl.modules.popart): the default module's value head learns normalised returns, rescaled as their running mean and std move, and the value loss is in units of that std (per policy: model.popart); on by default here: with a few Adam steps per batch a raw-scale value head lags returns of ~100 (APPO, IMPALA on CartPole: explained variance ~0.01 without it)", True)
    model: dict = doc("default model options of every policy: hiddens, activation, conv_filters, ... (the reference's training.model table)", default_factory=lambda: {"hiddens": [64, 64], "activation": "tanh"})


class IMPALAParts(AlgorithmParts):
    loss_columns = LOSS_COLUMNS
    loss = staticmethod(impala_loss)
    prepare = staticmethod(vtrace_prepare)


class IMPALAConfig(AlgorithmConfig):
    algo_name = "IMPALA"
    canonical_tasks = (
        CanonicalTask("CartPole-v1", threshold=450, budget=300_000, measured="461 at 92k env steps, 13 s (training.popart; false: 462 at 203k)"),
    )
    sample_columns = frozenset({sb.ACTION_LOGP, sb.VF_PREDS, sb.BOOTSTRAP_VALUE})  # V-trace's behaviour log-probs
    training_section_cls = IMPALATraining
    capabilities = Capabilities(action_spaces=ANY_SPACE, recurrent=True, overlap=False,  # asynchronous already
                                mixed_family=None)
    batch_in_agent_steps = True  # train_batch_size counts agent steps
    model_options = ("popart",)

    def validate(self) -> None:
        super().validate()
        t = self.training_cfg  # env_runners.overlap: refused by its record (it samples asynchronously already)
        in_flight = max(1, self.env_runners_cfg.num_env_runners) * t.max_requests_in_flight_per_env_runner
        if t.max_policy_lag is not None and t.max_policy_lag < in_flight:
            raise ConfigError(
                f"'training.max_policy_lag' = {t.max_policy_lag} cannot hold with {in_flight} sample requests in flight "
                f"(env_runners.num_env_runners x training.max_requests_in_flight_per_env_runner); use >= {in_flight}"
            )

    def policy_lag_bound(self) -> int:
        """The configured bound on sampled data's age in learner updates."""
        t = self.training_cfg
        if t.max_policy_lag is not None:
            return t.max_policy_lag
        return max(1, self.env_runners_cfg.num_env_runners) * t.max_requests_in_flight_per_env_runner

    def algorithm_parts(self):
        return IMPALAParts()

    def default_workflow(self):
        return async_actor_learner_workflow(self, "impala")
