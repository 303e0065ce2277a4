"""The env spec (`marl.algorithms.env_spec`): resolved from one env while a config builds; nothing else makes an env
to learn a fact (the runtime, the algorithms' plans, the offline writer read the spec). Counted through creators
that record every env they make."""

from __future__ import annotations

import gymnasium as gym
import pytest

import marl
from marl.envs import make_env
from marl.envs.swarm import Swarm

MADE: list[int] = []  # worlds of each env made (a dict env: 1)


def counted_swarm(env_config, worlds, seed, device):
    MADE.append(worlds)
    return Swarm(worlds, n=3, max_steps=6, seed=seed or 0)


def counted_cartpoles(env_config):
    MADE.append(1)
    return make_env("copies.CartPole-v1", {"num_agents": 2})


marl.register_batched_env("counted_swarm", counted_swarm)
marl.register_env("counted_cartpoles", counted_cartpoles)


def built(algo: str, env: str, batched, worlds: int = 3):
    cfg = (getattr(marl, f"{algo}Config")().environment(env)
           .env_runners(num_envs_per_env_runner=worlds, rollout_fragment_length=4, batched=batched).debugging(seed=0))
    if algo in ("PPO", "MAPPO", "HAPPO", "MAT"):
        cfg.training(train_batch_size=worlds * 4 * 3, minibatch_size=worlds * 3, num_epochs=1)
    MADE.clear()
    return cfg.build()


@pytest.mark.parametrize("algo, env, batched, spec_env, runner_envs", [
    ("PPO", "counted_swarm", "auto", [3], [3]),  # a batched env's spec: one env of the runner's 3 worlds
    ("MAPPO", "counted_swarm", "auto", [3], [3]),  # + the global state's spec
    ("MAPPO", "counted_swarm", False, [3], [1, 1, 1]),  # the dict path: 3 one-world copies
    ("MASAC", "counted_swarm", False, [3], [1, 1, 1]),  # + agent groups (the mixers' agent indices)
    ("QMIX", "counted_cartpoles", False, [1], [1, 1, 1]),  # a dict env's spec: one env
    ("HAPPO", "counted_swarm", False, [3], [1, 1, 1]),  # + a policy per agent, named from the spec's agents
    ("MAT", "counted_swarm", False, [3], [1, 1, 1]),  # + the encoder's token widths from the spec's spaces
])
def test_build_makes_one_env_beside_its_runners(algo, env, batched, spec_env, runner_envs):
    algo_obj = built(algo, env, batched)
    try:
        assert MADE == spec_env + runner_envs  # the spec's env, then the in-process runner's
        spec = algo_obj.config.env_spec()
        assert spec.possible_agents == tuple(algo_obj.possible_agents) and not spec.turn_based
        assert spec.global_state["num_agents"] == len(spec.possible_agents)
        algo_obj.config.plan_for(next(iter(algo_obj.policy_specs)))  # a plan reads the spec: no env either
        assert len(MADE) == 1 + len(runner_envs)
        if env == "counted_swarm" and algo != "MAT":  # its state: the observations joined (Swarm's default), 4 per agent
            assert algo_obj.config.env_spec().global_state == {"source": "env_state", "dim": 12, "num_agents": 3,
                                                                "dtype": "float32"}
    finally:
        algo_obj.stop()


def test_cql_learns_its_action_kind_from_the_spec():
    """CQL's plan (Box: SAC's learner; Discrete: DQN's) once asked a fresh env per env config."""
    cfg = marl.CQLConfig().environment("counted_cartpoles")
    MADE.clear()
    assert not cfg.continuous() and cfg.plan_for("default_policy").module_class == cfg.default_module_class
    cfg.plan_for("default_policy")
    assert MADE == [1]


def test_the_spec_answers_what_an_env_would():
    spec = marl.PPOConfig().environment("counted_cartpoles").env_spec()
    env = make_env("copies.CartPole-v1", {"num_agents": 2})
    assert spec.possible_agents == tuple(env.possible_agents)
    assert all(spec.observation_space(a) == env.observation_space(a) and spec.action_space(a) == env.action_space(a)
               for a in env.possible_agents)
    assert not spec.acts_in_box and not spec.observes_images and spec.masked_agents == frozenset()
    assert spec.global_state == {"source": "joined_obs", "dim": 8, "num_agents": 2, "dtype": "float32"}
    assert isinstance(spec.action_space("agent_0"), gym.spaces.Discrete)


def test_a_changed_env_config_is_resolved_again():
    cfg = marl.PPOConfig().environment("counted_swarm")
    MADE.clear()
    cfg.env_spec()
    cfg.env_spec()
    assert len(MADE) == 1
    cfg.environment("counted_swarm", env_config={"unused": 1})
    cfg.env_spec()
    assert len(MADE) == 2
