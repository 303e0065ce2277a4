"""Data-parallel learners: N=2 Ray actors with DistributedDataParallel (gloo on CPU)."""

from __future__ import annotations

import numpy as np
import pytest

import marl
from marl.learners import LearnerGroup
from marl.learners.distributed import shard_bounds
from marl.runners import EnvRunner


def cartpole(num_learners: int, minibatch_size: int = 63, popart: bool = False):
    # 4 envs x 50 steps = 200 rows; minibatches of 63 rows split 32/31 between two ranks, and the
    # last one (11 rows) 6/5: unequal slices, so the per-rank weighting is exercised too.
    return (
        marl.PPOConfig()
        .environment("CartPole-v1")
        .env_runners(num_envs_per_env_runner=4, rollout_fragment_length=50)
        .training(train_batch_size=200, minibatch_size=minibatch_size, num_epochs=2, lr=1e-3, popart=popart)
        .learners(num_learners=num_learners)
        .debugging(seed=3)
    )


def replica_weights(ray, group: LearnerGroup) -> list[dict]:
    return [w["modules"] for w in ray.get([a.get_weights.remote() for a in group.replicas])]


def assert_same_weights(a: dict, b: dict, exact: bool) -> None:
    for pid in a:
        for key in a[pid]:
            if exact:
                np.testing.assert_array_equal(a[pid][key], b[pid][key], err_msg=f"{pid}/{key}")
            else:
                np.testing.assert_allclose(a[pid][key], b[pid][key], rtol=1e-4, atol=1e-6, err_msg=f"{pid}/{key}")


def test_shard_bounds_cover_the_minibatch_once():
    for n in (1, 2, 5, 63, 64):
        for world in (1, 2, 3):
            bounds = [shard_bounds(n, r, world) for r in range(world)]
            assert bounds[0][0] == 0 and bounds[-1][1] == n
            assert all(bounds[i][1] == bounds[i + 1][0] for i in range(world - 1))
            sizes = [hi - lo for lo, hi in bounds]
            assert max(sizes) - min(sizes) <= 1


@pytest.mark.parametrize("popart", [False, True])
def test_two_learners_stay_identical_match_one_learner_and_train_ppo(ray_session, popart):
    # With PopArt each rank sees half of each minibatch's value targets: the ranks sum their moments before
    # rescaling, so both still rescale (and match one learner's rescale of the whole minibatch).
    # One algorithm (its two learner actors) for both claims: its learner group is compared with one learner on
    # its own runner's batches, then it trains.
    algo = cartpole(2, popart=popart).build()
    ddp, runner = algo.learners, algo.runners.local
    batches = [runner.sample().batch for _ in range(3)]
    single = LearnerGroup(cartpole(0, popart=popart), runner.specs)
    try:
        assert len(ddp.replicas) == 2
        start = replica_weights(ray_session, ddp)
        assert_same_weights(start[0], start[1], exact=True)
        assert_same_weights(start[0], single.get_weights()["modules"], exact=True)  # one seed, one init
        for batch in batches:
            stats_single = single.update(batch)["default_policy"]
            stats_ddp = ddp.update(batch)["default_policy"]
            rank0, rank1 = replica_weights(ray_session, ddp)
            # Averaged gradients, same optimiser steps: the replicas stay bit-identical after every update.
            assert_same_weights(rank0, rank1, exact=True)
            # And they make the update one learner makes on the whole minibatches (float rounding apart):
            # a sum instead of a mean, or an unweighted mean of unequal slices, would be far off here.
            assert_same_weights(rank0, single.get_weights()["modules"], exact=False)
            assert stats_ddp["num_sgd_steps"] == stats_single["num_sgd_steps"] == 8
            for key in ("policy_loss", "vf_loss", "entropy", "grad_norm") + (("value_std",) if popart else ()):
                assert stats_ddp[key] == pytest.approx(stats_single[key], rel=1e-3, abs=1e-5), key
            if popart:  # the scale moved off 1 (CartPole's returns): the check above compared real rescales
                assert stats_ddp["value_std"] > 2.0
        moved = any(not np.array_equal(start[0][p][k], rank0[p][k]) for p in rank0 for k in rank0[p])
        assert moved
        assert ddp.get_version() == single.get_version() == 4

        # PPO trains with the two learners: they stay identical and the runner acts with their weights.
        for _ in range(2):
            r = algo.train()
        after0, after1 = replica_weights(ray_session, ddp)
        assert_same_weights(after0, after1, exact=True)
        assert_same_weights(after0, runner.module.get_state(), exact=True)
        assert any(not np.array_equal(rank0[p][k], after0[p][k]) for p in rank0 for k in rank0[p])
        assert r["env_steps_total"] == 400 and np.isfinite(r["losses/default_policy/policy_loss"])
    finally:
        algo.stop()


def dqn_batches(config, count: int):
    """Replayed DQN minibatches (3-step transitions, replay weights) from a real runner and buffer."""
    from marl.data import MultiAgentBatch
    from marl.data import sample_batch as sb
    from marl.replay import ReplayBuffer, nstep_transitions

    runner = EnvRunner(config, 0)
    buffer = ReplayBuffer(10_000, seed=0)
    for _ in range(3):
        for pid, batch in runner.sample().batch.policy_batches.items():
            buffer.add(nstep_transitions(batch, 3, 0.99, keep=(sb.AGENT_INDEX,)))
    specs = runner.specs
    runner.stop()
    return specs, [MultiAgentBatch({pid: buffer.sample(63)[0]}, 63) for _ in range(count)]


def test_two_dqn_learners_match_one_including_per_row_td_errors(ray_session):
    def dqn(num_learners):
        return (
            marl.DQNConfig()
            .environment("CartPole-v1")
            .env_runners(num_envs_per_env_runner=4, rollout_fragment_length=32)
            .training(train_batch_size=63, n_step=3, lr=1e-3)
            .learners(num_learners=num_learners)
            .debugging(seed=5)
        )

    specs, batches = dqn_batches(dqn(0), 3)
    single = LearnerGroup(dqn(0), specs)
    ddp = LearnerGroup(dqn(2), specs)
    try:
        for batch in batches:
            s1 = single.update(batch)["default_policy"]
            s2 = ddp.update(batch)["default_policy"]
            rank0, rank1 = replica_weights(ray_session, ddp)
            assert_same_weights(rank0, rank1, exact=True)
            assert_same_weights(rank0, single.get_weights()["modules"], exact=False)
            # Each rank computed TD errors for its slice only; the gathered column is the whole minibatch's.
            assert s2["td_error"].shape == (63,)
            np.testing.assert_allclose(s2["td_error"], s1["td_error"], rtol=1e-4, atol=1e-5)
            assert s2["loss"] == pytest.approx(s1["loss"], rel=1e-3, abs=1e-6)
        single.update_target()
        ddp.update_target()  # goes to every rank
        states = ray_session.get([a.get_target_state.remote() for a in ddp.replicas]) + [single.get_target_state()]
        # {pid: {copy name: tensors}}: DQN's one copy is `target`
        t0, t1, t_single = ({pid: copies["target"] for pid, copies in state.items()} for state in states)
        assert_same_weights(t0, t1, exact=True)
        assert_same_weights(t0, t_single, exact=False)
    finally:
        ddp.stop()
