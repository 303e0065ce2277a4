"""MixedConfig (`algo: MIXED`): each policy trained by its own algorithm, from one shared sampler.

    algo: MIXED
    multi_agent:
      policies: {predator: {}, prey: {}}
      policy_mapping: {"adversary_*": predator, "*": prey}
    training:
      min_env_steps_per_iteration: 2048
      algorithms:
        predator: {algo: PPO, lr: 1.0e-3, train_batch_size: 2048}
        prey: {algo: DQN, lr: 5.0e-4, n_step: 3}

The top-level sections (environment, env_runners, multi_agent, learners,
debugging) are shared; `training.algorithms.<policy>` names the policy's
algorithm and overrides that algorithm's training keys. Any algorithm whose
record declares a `mixed_family` (`capabilities`) can train a policy here: "on_policy" ones
(PPO, MAPPO, ...) learn from the shared concatenated samples, "replay" ones
(DQN) from their own buffers. Each policy gets the
module, loss, optimiser, learner connectors, target network and replay buffer
of its own algorithm; the graph (see `workflow.py`) fans out from one sample
node to one branch per algorithm family.
"""

from __future__ import annotations

from dataclasses import dataclass

from marl.algorithms.algorithm_config import AlgorithmConfig
from marl.algorithms.canonical import CanonicalTask
from marl.config.capabilities import ANY_SPACE, MIXED_FAMILIES, Capabilities
from marl.config.registry import config_class, discovered
from marl.errors import ConfigError
from marl.config.checks import doc, update_section
from marl.algorithms.mixed.workflow import mixed_workflow

FAMILIES = MIXED_FAMILIES  # the branches of the MIXED graph (see workflow.py); a record names no other


def mixable() -> list[str]:
    """The algorithms a MIXED run can train a policy with: those whose record declares a `mixed_family`."""
    return [name for name, cls in discovered().items() if cls.capabilities.mixed_family is not None]


@dataclass
class MixedTraining:
    algorithms: dict = doc(
        "policy id -> {algo: NAME, ...that algorithm's training keys}; one entry per declared policy; "
        "NAME: an algorithm whose capabilities declare a mixed_family (PPO, MAPPO, DQN, ...)",
        default_factory=dict,
    )
    min_env_steps_per_iteration: int = doc("env steps sampled per train() iteration", 2000, min=0)


class MixedConfig(AlgorithmConfig):
    algo_name = "MIXED"
    # simple_spread, one agent trained by PPO and the other two by DQN (both families of the graph, one team
    # reward): the policies and their algorithms are what a MIXED run must be told; a random team scores about -79
    canonical_tasks = (
        CanonicalTask(
            "mpe2.simple_spread_v3", threshold=-68, budget=40_000, window=3,
            overrides=(
                "multi_agent.policies={ppo: {}, dqn: {}}",
                'multi_agent.policy_mapping={agent_0: ppo, "*": dqn}',
                "training.algorithms={ppo: {algo: PPO}, dqn: {algo: DQN}}",
            ),
            measured="-66.3 (3-iteration mean) at 25k env steps, 70 s",
        ),
    )
    training_section_cls = MixedTraining
    capabilities = Capabilities(action_spaces=ANY_SPACE, recurrent=True, overlap=False,
                                mixed_family=None,
                                note="each policy is checked against its own algorithm's record (training.algorithms)")

    # -- one policy's own algorithm ------------------------------------------------
    def algo_of(self, policy_id: str) -> str:
        entry = self.training_cfg.algorithms.get(policy_id)
        if entry is None:
            raise ConfigError(
                f"policy '{policy_id}' has no algorithm: add 'training.algorithms.{policy_id}: {{algo: PPO}}' "
                f"(one of {mixable()})"
            )
        if not isinstance(entry, dict) or "algo" not in entry:
            raise ConfigError(f"'training.algorithms.{policy_id}' must be a mapping with an 'algo' key, got {entry!r}")
        name = str(entry["algo"]).upper()
        if name not in mixable():
            raise ConfigError(
                f"'training.algorithms.{policy_id}.algo' is '{entry['algo']}'; a MIXED run can train a policy with "
                f"{mixable()} (the algorithms whose capabilities declare a mixed_family: asynchronous ones cannot share its synchronous sampler)"
            )
        return name

    def sub_config(self, policy_id: str) -> AlgorithmConfig:
        """The config of the algorithm that trains `policy_id`: shared sections plus its training overrides."""
        name = self.algo_of(policy_id)
        sub = config_class(name)()
        for section in ("environment", "env_runners", "multi_agent", "learners", "debugging", "evaluation", "stop"):
            setattr(sub, section + "_cfg", getattr(self, section + "_cfg"))
        overrides = {k: v for k, v in self.training_cfg.algorithms[policy_id].items() if k != "algo"}
        update_section(sub.training_cfg, f"training.algorithms.{policy_id}", overrides)
        sub._env_spec = self.env_spec()  # (the same env: its spec is resolved once, by this config)
        sub.resolve_auto_keys(sub.env_spec)
        sub.env_creator = self.env_creator
        return sub

    def _families(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {family: [] for family in FAMILIES}
        for pid in self.trained_policy_ids(list(self.policy_specs())):
            out[config_class(self.algo_of(pid)).capabilities.mixed_family].append(pid)
        return out

    # -- what the runtime asks of a config ---------------------------------------
    def columns_for(self, policy_id: str) -> frozenset[str]:
        """The columns the policy's own algorithm declares (DQN's next obs, MAPPO's state...): what global-state
        probing reads, before any sub-config exists (the plan's columns come from the sub-config)."""
        return config_class(self.algo_of(policy_id)).sample_columns

    def validate(self) -> None:
        super().validate()  # overlap: refused by MIXED's record
        declared = list(self.policy_specs())
        algorithms = self.training_cfg.algorithms
        unknown = [pid for pid in algorithms if pid not in declared]
        if unknown:
            raise ConfigError(f"'training.algorithms' names undeclared policies {unknown}; declared in multi_agent.policies: {declared}")
        for pid in declared:
            sub = self.sub_config(pid)
            try:
                sub.validate()
            except ConfigError as err:  # the sub-config names its keys 'training.x': say whose
                raise ConfigError(f"training.algorithms.{pid} ({sub.algo_name}): {err}") from None
        on_policy = self._families()["on_policy"]
        sizes = {pid: self.sub_config(pid).training_cfg.train_batch_size for pid in on_policy}
        if len(set(sizes.values())) > 1:
            raise ConfigError(
                f"on-policy policies of a MIXED run share one concat node: give them one train_batch_size, got {sizes}"
            )

    def _plan(self, policy_id: str):
        """The plan of the algorithm that trains the policy: its module, training section, parts, replay, ..."""
        return self.sub_config(policy_id).plan_for(policy_id)

    def algorithm_parts(self):
        raise ConfigError("a MIXED run has no single algorithm: each policy's parts come from plan_for(policy_id).parts")

    def default_workflow(self):
        return mixed_workflow(self)
