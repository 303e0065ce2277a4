"""MAT: grouping acting rows by env step, autoregressive acting that teacher-forced learning reproduces (Discrete,
masked, Box), the independent-decoding ablation, the team-action columns, one policy only, one iteration."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from marl import MATConfig
from marl.algorithms.mat.loss import team_actions
from marl.algorithms.mat.module import TEAM_ACTIONS, TEAM_PRESENT, MATModule, act_groups
from marl.errors import ConfigError
from marl.data import sample_batch as sb
import small_teams  # noqa: F401  (registers mat_match)

WIDTHS = [3, 3, 3]


def _module(space=gym.spaces.Discrete(4), **options):
    torch.manual_seed(0)
    return MATModule(gym.spaces.Box(-1, 1, (3,)), space, {"token_widths": WIDTHS, "embed_dim": 16, **options})


def _team(envs=5, seed=1):
    """Rows of `envs` env copies x 3 agents, the agents of each copy next to each other with one state."""
    g = torch.Generator().manual_seed(seed)
    state = torch.randn(envs, sum(WIDTHS), generator=g)
    rows = state.repeat_interleave(3, 0)
    index = torch.arange(3).repeat(envs)
    obs = torch.stack([rows[i, 3 * a:3 * a + 3] for i, a in enumerate(index.tolist())])
    return {"obs": obs, "state": rows, "agent_index": index}


def test_acting_rows_are_grouped_by_equal_state_and_distinct_agents():
    state = torch.tensor([[1.0], [1.0], [1.0], [2.0], [2.0], [2.0]])
    assert act_groups(state, torch.tensor([0, 1, 2, 0, 1, 2])).tolist() == [0, 0, 0, 1, 1, 1]
    assert act_groups(state, torch.tensor([0, 1, 0, 0, 2, 1])).tolist() == [0, 0, 1, 2, 2, 2]  # agent 0 twice: two steps


def _replayed_logp(module, batch, out):
    """log pi of the acted actions, teacher-forced on the team's actions (what the learner computes)."""
    dist = module.action_dist(out["action_dist_inputs"])
    actions = dist.sample()
    envs = len(batch["obs"]) // 3
    tensors = {**batch, sb.ACTIONS: actions, sb.EPS_ID: torch.arange(envs).repeat_interleave(3),
               sb.T: torch.zeros(len(actions), dtype=torch.long), sb.AGENT_INDEX: batch["agent_index"]}
    tensors = team_actions(module, tensors, None)
    train = module.forward_train({**tensors, "actions": actions})
    return dist.logp(actions), module.action_dist(train["action_dist_inputs"]).logp(actions), out["vf_preds"], train["vf_preds"]


@pytest.mark.parametrize("space", [gym.spaces.Discrete(4), gym.spaces.Box(-1, 1, (2,))], ids=["discrete", "box"])
def test_teacher_forced_learning_reproduces_the_log_probs_and_values_of_acting(space):
    module, batch = _module(space), _team()
    for _ in range(3):
        acted, replayed, v_act, v_train = _replayed_logp(module, batch, module.forward_exploration(batch))
        torch.testing.assert_close(acted, replayed, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(v_act, v_train, rtol=1e-5, atol=1e-5)


def test_learning_passes_each_env_step_once_and_every_row_reads_its_own_position(monkeypatch):
    """forward_train on shuffled rows equals the per-row pass (each row's own encode and decode of its env step),
    with the encoder run once per env step, not once per agent row."""
    module, batch = _module(), _team(envs=6)
    out = module.forward_exploration(batch)
    actions = module.action_dist(out["action_dist_inputs"]).sample()
    tensors = {**batch, sb.ACTIONS: actions, sb.EPS_ID: torch.arange(6).repeat_interleave(3),
               sb.T: torch.zeros(18, dtype=torch.long), sb.AGENT_INDEX: batch["agent_index"]}
    tensors = {k: v[torch.randperm(18, generator=torch.Generator().manual_seed(3))]
               for k, v in team_actions(module, tensors, None).items()}
    encoded = []
    encode = module.encode
    monkeypatch.setattr(module, "encode", lambda state: encoded.append(len(state)) or encode(state))
    train = module.forward_train({**tensors, "actions": tensors[sb.ACTIONS]})
    assert encoded == [6]
    reps, values = encode(tensors["state"])  # the per-row pass
    team, present = tensors[TEAM_ACTIONS].float(), tensors[TEAM_PRESENT].float().unsqueeze(-1)
    previous = torch.zeros_like(team)
    previous[:, 1:] = (team * present)[:, :-1]
    rows, index = torch.arange(18), tensors["agent_index"].long()
    want = module._params(module.decode(reps, previous)[rows, index], None)
    torch.testing.assert_close(train["action_dist_inputs"][:, :want.shape[1]], want, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(train["vf_preds"], values[rows, index], rtol=1e-5, atol=1e-6)


def test_an_agents_distribution_depends_on_the_earlier_agents_actions_unless_decoding_is_independent():
    batch = _team(envs=1)
    for autoregressive, depends in ((True, True), (False, False)):
        module = _module(autoregressive=autoregressive)
        second = {}
        for _ in range(60):
            out = module.forward_exploration(batch)
            first_action = int(module.action_dist(out["action_dist_inputs"]).sample()[0])
            second[first_action] = out["action_dist_inputs"][1, :4]
        assert len(second) > 1
        values = list(second.values())
        assert (not torch.allclose(values[0], values[1])) == depends


def test_masked_actions_are_never_decoded():
    module, batch = _module(), _team(envs=4)
    mask = torch.ones(12, 4)
    mask[:, 0] = 0
    mask[1::3, 1:3] = 0  # agent 1 may only take action 3
    for explore in (True, False):
        out = module._act({**batch, "action_mask": mask}, explore)
        actions = module.action_dist(out["action_dist_inputs"]).sample()
        assert (actions != 0).all() and (actions[1::3] == 3).all()


def test_team_actions_gather_each_env_steps_actions_whatever_the_row_order():
    module = _module()
    tensors = {sb.EPS_ID: torch.tensor([7, 7, 8, 7]), sb.T: torch.tensor([0, 0, 0, 1]),
               sb.AGENT_INDEX: torch.tensor([2, 0, 1, 0]), sb.ACTIONS: torch.tensor([3, 1, 2, 0])}
    out = team_actions(module, tensors, None)
    assert out[TEAM_ACTIONS].shape == (4, 3, 4)
    assert out[TEAM_ACTIONS][0].argmax(-1).tolist() == [1, 0, 3] and out[TEAM_PRESENT][0].tolist() == [1, 0, 1]
    assert out[TEAM_PRESENT][2].tolist() == [0, 1, 0] and out[TEAM_PRESENT][3].tolist() == [1, 0, 0]




def _config():
    return (MATConfig().environment("mat_match").env_runners(num_envs_per_env_runner=2, rollout_fragment_length=20)
            .training(train_batch_size=120, minibatch_size=60, model={"embed_dim": 16}).debugging(seed=0))


def test_the_encoder_reads_the_agents_observations_even_where_the_env_has_a_state():
    spec = _config().global_state_spec()
    assert spec["source"] == "joined_obs" and spec["dim"] == 6 and spec["token_widths"] == [2, 2, 2]


def test_mat_refuses_more_than_one_policy():
    config = _config().multi_agent(policies=["p0", "p1"], policy_mapping_fn={"a0": "p0", "*": "p1"})
    with pytest.raises(ConfigError, match="one policy"):
        config.build()


def test_one_iteration_trains_the_transformer():
    algo = _config().build()
    try:
        before = {k: v.copy() for k, v in algo.get_weights()["modules"]["default_policy"].items()}
        result = algo.train()
        after = algo.get_weights()["modules"]["default_policy"]
        assert result["counters/agent_steps_trained/default_policy"] >= 120
        assert not np.allclose(before["decoder.0.attn.in_proj_weight"], after["decoder.0.attn.in_proj_weight"])
    finally:
        algo.stop()
