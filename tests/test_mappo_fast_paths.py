"""MAPPO's cheaper paths compute exactly what they replace.

* mpe2's global state: the parallel adapter joins the observations its step returned instead of
  calling mpe2's `state()` (a second pass over every agent's observation); the arrays must be
  identical at every step, and any env that is not mpe2's own parallel env must keep `state()`.
* CentralCriticMLP: agent one-hots from rows of the identity, computed once per forward pass,
  and functional layer walks; outputs and gradients must equal the nn.Module forward with
  F.one_hot that it replaces.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from marl.envs.pettingzoo import ParallelEnvAdapter
from marl.modules.central_critic import CentralCriticMLP

mpe2 = pytest.importorskip("mpe2", reason="the mpe2 extra is not installed")


def _random_episodes(env: ParallelEnvAdapter, episodes: int, seed: int) -> int:
    steps = 0
    for episode in range(episodes):
        env.reset(seed=seed + episode)
        assert np.array_equal(env.state(), env.env.state())
        done = False
        while not done:
            actions = {a: env.action_space(a).sample() for a in env.env.agents}
            _, _, terminateds, _, _ = env.step(actions)
            fast, slow = env.state(), env.env.state()
            assert fast.dtype == slow.dtype and fast.shape == slow.shape
            assert np.array_equal(fast, slow), f"step {steps}: joined observations differ from state()"
            steps += 1
            done = terminateds["__all__"]
    return steps


@pytest.mark.parametrize("name,kwargs", [
    ("simple_spread_v3", {"N": 3}),
    ("simple_spread_v3", {"N": 4, "continuous_actions": True}),
    ("simple_tag_v3", {}),
    ("simple_world_comm_v3", {}),
])
def test_mpe2_state_is_the_joined_observations_at_every_step(name, kwargs):
    module = __import__(f"mpe2.{name}", fromlist=["parallel_env"])
    env = ParallelEnvAdapter(module.parallel_env(max_cycles=12, **kwargs))
    assert env._joins_obs
    assert _random_episodes(env, episodes=3, seed=7) == 36  # the last step of each episode included


def test_other_envs_keep_their_own_state():
    from mpe2.simple_spread import simple_spread

    class Shifted(simple_spread.raw_env):  # a scenario whose observe differs from state's parts
        def observe(self, agent):
            return super().observe(agent) + 1.0

    from pettingzoo.utils.conversions import aec_to_parallel_wrapper

    shifted = ParallelEnvAdapter(aec_to_parallel_wrapper(Shifted(N=2, max_cycles=5)))
    assert not shifted._joins_obs
    shifted.reset(seed=0)
    assert np.array_equal(shifted.state(), shifted.env.state())

    import supersuit

    # SuperSuit-wrapped (environment.wrappers): observations need not be state()'s parts any more.
    wrapped = ParallelEnvAdapter(supersuit.clip_reward_v0(mpe2.simple_spread_v3.parallel_env(N=2, max_cycles=5)))
    assert not wrapped._joins_obs
    wrapped.reset(seed=0)
    assert np.array_equal(wrapped.state(), wrapped.env.state())


def _reference_forward(module: CentralCriticMLP, batch: dict) -> dict:
    """The forward pass before the fast path: nn.Module calls and F.one_hot, once per network."""
    def with_id(x):
        one_hot = torch.nn.functional.one_hot(batch["agent_index"].long(), module.num_agents).to(x.dtype)
        return torch.cat([x, one_hot], dim=-1) if module.agent_id else x

    logits = module.pi(with_id(batch["obs"]))
    if module.continuous:
        logits = torch.cat([logits, module.log_std.expand_as(logits)], dim=-1)
    return {"action_dist_inputs": logits, "vf_preds": module.vf(with_id(batch["state"])).squeeze(-1)}


@pytest.mark.parametrize("action_space", [gym.spaces.Discrete(5), gym.spaces.Box(-1.0, 1.0, (2,))])
@pytest.mark.parametrize("agent_id", [True, False])
def test_central_critic_fast_forward_equals_module_calls(action_space, agent_id):
    torch.manual_seed(0)
    module = CentralCriticMLP(gym.spaces.Box(-10, 10, (18,)), action_space,
                              {"state_dim": 54, "num_agents": 3, "agent_id": agent_id, "hiddens": [32, 32]})
    batch = {"obs": torch.randn(64, 18), "state": torch.randn(64, 54), "agent_index": torch.randint(0, 3, (64,))}
    grads = []
    for forward in (module.forward_train, lambda b: _reference_forward(module, b)):
        module.zero_grad()
        out = forward(batch)
        (out["action_dist_inputs"].square().sum() + out["vf_preds"].pow(3).sum()).backward()
        grads.append(([p.grad.clone() for p in module.parameters()], out))
    (fast_grads, fast), (ref_grads, ref) = grads
    for key in ref:
        assert torch.equal(fast[key], ref[key]), key
    assert all(torch.equal(a, b) for a, b in zip(fast_grads, ref_grads))
    explored = module.forward_exploration(batch)
    assert torch.equal(explored["vf_preds"], ref["vf_preds"].detach())
    assert torch.equal(module.forward_inference(batch)["action_dist_inputs"], ref["action_dist_inputs"].detach())
    if agent_id:  # an index outside the agents is an error, as F.one_hot's was
        with pytest.raises((IndexError, RuntimeError)):
            module.forward_train({**batch, "agent_index": torch.full((64,), 3)})


def test_runner_states_equal_mpe2_state_while_sampling_with_an_observation_filter(monkeypatch):
    """In the runner's own flow (connectors normalising observations, resets at episode ends), every state the
    fast path hands out equals what mpe2's state() computes at that moment."""
    from marl import MAPPOConfig
    from marl.data import sample_batch as sb
    from marl.runners import EnvRunner

    checked = []
    fast_state = ParallelEnvAdapter.state

    def checking_state(self):
        fast = fast_state(self)
        assert self._joins_obs and np.array_equal(fast, self.env.state())
        checked.append(1)
        return fast

    monkeypatch.setattr(ParallelEnvAdapter, "state", checking_state)
    cfg = (
        MAPPOConfig()
        .environment("mpe2.simple_spread_v3", env_config={"N": 3, "max_cycles": 10})
        .env_runners(num_envs_per_env_runner=2, rollout_fragment_length=25, observation_filter="mean_std")
        .debugging(seed=1)
    )
    batch = EnvRunner(cfg).sample()["default_policy"]
    assert batch[sb.TRUNCATEDS].any()  # episodes ended and reset inside the fragment
    assert len(checked) >= 50
