"""The runner contract (`marl.workflow.runner_protocol`): every runner class keeps it, the chooser picks each one,
and what the contract promises holds (weights out go back in; a batched runner refuses a mapping it cannot honour)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import marl
from marl.data import sample_batch as sb
from marl.policies import MappingError
from marl.runners import actor_basics
from marl.runners.batched_runner import BatchedEnvRunner
from marl.runners.env_runner import EnvRunner
from marl.runners.jax_rollout import CompiledRolloutRunner
from marl.runners.runner_choice import runner_class
from marl.runners.vector_env_runner import VectorEnvRunner
from marl.runners import matches
from marl.workflow.runner_protocol import RUNNER_METHODS, Runner, contract_gaps

RUNNERS = [EnvRunner, VectorEnvRunner, BatchedEnvRunner, CompiledRolloutRunner]


def all_subclasses(cls) -> set:
    return set(cls.__subclasses__()).union(*(all_subclasses(c) for c in cls.__subclasses__()))


def made_by_ray(cls) -> bool:
    """The classes `ray.remote(Runner)` derives from a runner (its actor wrapper and `ActorClass(...)` handle), which
    an earlier test in the same process leaves among the runner's subclasses."""
    return "__ray_actor_class__" in vars(cls) or any(base.__name__ == "ActorClass" for base in cls.__mro__)


def test_every_runner_class_keeps_the_contract():
    # (every class built on ActorBasics in marl is a runner: a new one is checked without being listed)
    found = {c for c in all_subclasses(actor_basics.ActorBasics) if c.__module__.startswith("marl.") and not made_by_ray(c)}
    assert set(RUNNERS) <= found
    for cls in found:
        assert contract_gaps(cls) == [], cls


def test_the_check_finds_a_missing_method_and_a_changed_signature():
    class Dropped(EnvRunner):
        get_weights = None  # (a runner that lost a method)

    class Renamed(BatchedEnvRunner):
        def run_evaluation(self, episodes, unit="episodes", explore=False, exploration_step=0):  # 1st parameter renamed
            return {}

    assert contract_gaps(Dropped) == ["Dropped.get_weights is missing"]
    assert len(contract_gaps(Renamed)) == 1 and "run_evaluation" in contract_gaps(Renamed)[0]
    assert {"sample", "set_weights", "get_weights", "get_state", "set_state", "set_frozen_policies", "stop"} <= set(RUNNER_METHODS)


def test_the_chooser_picks_each_runner():
    vmas = lambda **kw: marl.PPOConfig().environment("vmas.balance", env_config={"n_agents": 2}).env_runners(**kw)  # noqa: E731
    assert runner_class(marl.PPOConfig().environment("CartPole-v1")) is EnvRunner
    assert runner_class(vmas(batched=False)) is VectorEnvRunner
    assert runner_class(vmas()) is BatchedEnvRunner
    assert runner_class(marl.PPOConfig().environment("jaxmarl.MPE_simple_spread_v3")) is CompiledRolloutRunner
    jax_stepwise = marl.PPOConfig().environment("jaxmarl.MPE_simple_spread_v3").env_runners(compiled_rollout=False)
    assert runner_class(jax_stepwise) is BatchedEnvRunner


@pytest.mark.parametrize("env, batched", [("CartPole-v1", False), ("vmas.balance", "auto")])
def test_weights_out_go_back_in(env, batched):
    """A runner's `get_weights()` loaded into another (seeded otherwise: other initial weights) makes it act the same."""
    def make(seed):
        cfg = (marl.PPOConfig().environment(env, env_config={"n_agents": 2, "max_steps": 9} if env != "CartPole-v1" else {})
               .env_runners(num_envs_per_env_runner=2, rollout_fragment_length=8, batched=batched).debugging(seed=seed))
        return runner_class(cfg)(cfg, 0)

    a, b, c = make(0), make(1), make(1)
    weights = a.get_weights()
    assert set(weights) == {"version", "modules"}
    weights["version"] = 7
    assert b.set_weights(weights) == 7 and b.get_weights_version() == 7
    assert all(isinstance(r, Runner) for r in (a, b))
    theirs, fresh = (r.sample().batch.policy_batches["default_policy"].to_numpy() for r in (b, c))
    module_a = a.module["default_policy"]

    def logp_under_a(rows):
        with torch.no_grad():
            out = module_a.forward_exploration({"obs": torch.from_numpy(rows[sb.OBS])})
            return module_a.action_dist(out["action_dist_inputs"]).logp(torch.from_numpy(rows[sb.ACTIONS])).numpy()

    # b acts with a's weights: its log-probs are a's module's; c (b's seed, its own weights) acts otherwise
    np.testing.assert_allclose(theirs[sb.ACTION_LOGP], logp_under_a(theirs), atol=1e-5)
    assert not np.allclose(fresh[sb.ACTION_LOGP], logp_under_a(fresh), atol=1e-3)
    for r in (a, b, c):
        r.stop()


def test_a_batched_runner_refuses_a_mapping_state_that_rebinds_agents():
    class Table:
        """A stateful mapping (as a league's is): its state says which policy agent_1 plays."""

        def __init__(self):
            self.second = "p1"

        def __call__(self, agent, episode):
            return "p0" if agent == "agent_0" else self.second

        def set_state(self, state):
            self.second = state

    cfg = (marl.PPOConfig().environment("vmas.balance", env_config={"n_agents": 2, "max_steps": 9})
           .multi_agent(policies=["p0", "p1"], policy_mapping=Table())
           .env_runners(num_envs_per_env_runner=2, rollout_fragment_length=8))
    runner = runner_class(cfg)(cfg, 0)
    assert isinstance(runner, BatchedEnvRunner)
    runner.set_mapping_state("p1")  # the same binding: fine
    with pytest.raises(MappingError, match=r"binds agents to policies once.*rebinds \{'agent_1': 'p0'\}.*batched: false"):
        runner.set_mapping_state("p0")
    runner.stop()


def test_match_play_is_a_runner_with_both_members_frozen_and_seeded_by_the_match(monkeypatch):
    """League and PSRO matches (`marl.runners.matches.play_matches`) are played by the runner the chooser picks, which keeps
    the contract, with the two members frozen in their seats; the match's seed alone decides its returns."""
    cfg = marl.PPOConfig().environment("openspiel.kuhn_poker").multi_agent(policies={"main": {"model": {"hiddens": [8]}}})
    trained = runner_class(cfg)(cfg, 0)
    spec, weights = trained.specs["main"], trained.get_weights()["modules"]["main"]
    trained.stop()
    played_by = []
    chooser = matches.runner_class

    def recording(config):
        cls = chooser(config)
        return lambda config, index: played_by.append(cls(config, index)) or played_by[-1]

    monkeypatch.setattr(matches, "runner_class", recording)
    returns = matches.play_matches(cfg, spec, (weights, weights), 40, seed=5)
    (runner,) = played_by
    assert isinstance(runner, Runner) and contract_gaps(type(runner)) == []
    assert runner.frozen_policies == set(matches.SEATS)
    assert returns.shape == (40, 2) and np.all(returns.sum(axis=1) == 0)  # kuhn poker: zero-sum, every game played out
    again = matches.play_matches(cfg, spec, (weights, weights), 40, seed=5)
    other = matches.play_matches(cfg, spec, (weights, weights), 40, seed=6)
    assert np.array_equal(returns, again) and not np.array_equal(returns, other)
