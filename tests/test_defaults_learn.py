"""A user's first try learns, for every algorithm: `marl train --algo X --env Y` with the defaults alone.

Generated from the algorithm registry: each registered algorithm declares its canonical tasks on its own
config class (`canonical_tasks`, `marl.algorithms.canonical.CanonicalTask`: env, threshold, budget, the
overrides that pose the task) and each becomes one test id here. An algorithm that declares none fails.
Online runs stop at the first iteration whose metric reaches the threshold; offline ones (BC, MARWIL, CQL)
train `budget` iterations on a recording made here and are judged greedily (20 episodes) at every 10th
iteration of the budget's second half and at its end: each must reach the threshold.

The on-policy algorithms' runs are here; the off-policy, offline and mixed ones are in
test_defaults_learn_off_policy.py, a file of its own so that `--dist loadfile` runs the two halves in parallel.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from marl.algorithms import config_from_dict
from marl.algorithms.canonical_run import run_canonical, window_mean
from marl.config.compose import algorithm_family
from marl.config.registry import discovered
from marl.data import SampleBatch
from marl.data import sample_batch as sb
from marl.offline.writer import OfflineWriter


def cases(on_policy: bool):
    """The (algorithm, task, seed) runs of the on-policy algorithms, or of all the others."""
    for name, cls in discovered().items():
        if (algorithm_family(cls) == "on_policy") != on_policy:
            continue
        tasks = cls.__dict__.get("canonical_tasks") or (None,)
        for task in tasks:
            for seed in (task.seeds if task else (None,)):
                yield pytest.param(name, task, seed, id=f"{name}-{task.env if task else 'undeclared'}-seed{seed}")


# -- recordings for the offline tasks --------------------------------------------------------------------------


def cartpole_heuristic(obs: np.ndarray) -> int:
    """Push toward the side the pole falls to: balances CartPole-v1 for 500 steps from every start tried."""
    return int(obs[2] + 0.5 * obs[3] > 0)


def pendulum_heuristic(obs: np.ndarray) -> float:
    """Pendulum-v1 (theta'' = 15 sin theta + 3 u, upright at theta = 0): PD control near the top, else full torque
    along the swing while the energy is below the upright one. Returns the [-1, 1] action a SAC actor would record
    (torque / 2); greedy it scores about -130 a episode, uniform random actions about -1200."""
    cos, sin, speed = obs
    if cos > 0.8:
        torque = -(10.0 * math.atan2(sin, cos) + 2.0 * speed)
    else:
        energy = 0.5 * speed * speed + 15.0 * (cos - 1.0)  # 0 upright at rest
        torque = 2.0 * np.sign(speed) if energy < 0 else 0.0
    return float(np.clip(torque / 2.0, -1.0, 1.0))


def cartpole_step(rng, obs, eps):
    """The heuristic's action, random with probability eps, and its log-prob under that mixture."""
    greedy = cartpole_heuristic(obs)
    action = int(rng.integers(2)) if rng.random() < eps else greedy
    return action, action, math.log(1 - eps / 2 if action == greedy else eps / 2)


def pendulum_step(rng, obs, eps):
    """The heuristic's [-1, 1] action, uniform on [-1, 1] with probability eps; no log-prob (a point mass)."""
    action = float(rng.uniform(-1.0, 1.0)) if rng.random() < eps else pendulum_heuristic(obs)
    return np.array([action], np.float32), np.array([2.0 * action], np.float32), None


def record_episodes(folder, env_id: str, step, episodes: int, epsilons, seed: int = 0):
    """Episodes of a heuristic (`step(rng, obs, eps)`: recorded action, env action, log-prob or None), each acting
    at random with its own probability epsilon (cycled)."""
    import gymnasium as gym

    rng = np.random.default_rng(seed)
    env = gym.make(env_id)
    keys = (sb.OBS, sb.NEXT_OBS, sb.ACTIONS, sb.REWARDS, sb.TERMINATEDS, sb.TRUNCATEDS, sb.T, sb.EPS_ID, sb.ACTION_LOGP)
    cols = {k: [] for k in keys}
    ends = []
    for episode in range(episodes):
        eps = epsilons[episode % len(epsilons)]
        obs, _ = env.reset(seed=seed * 10_000 + episode)
        for t in range(env.spec.max_episode_steps):
            action, env_action, logp = step(rng, obs, eps)
            nxt, reward, terminated, truncated, _ = env.step(env_action)
            for key, value in zip(keys, (obs, nxt, action, reward, terminated, truncated, t, episode, logp)):
                cols[key].append(value)
            ends.append(terminated or truncated)
            obs = nxt
            if terminated or truncated:
                break
    env.close()
    n = len(ends)
    actions = np.asarray(cols[sb.ACTIONS])
    batch = SampleBatch({
        sb.OBS: np.asarray(cols[sb.OBS], np.float32), sb.NEXT_OBS: np.asarray(cols[sb.NEXT_OBS], np.float32),
        sb.ACTIONS: actions.astype(np.int64 if actions.ndim == 1 else np.float32),
        sb.REWARDS: np.asarray(cols[sb.REWARDS], np.float32),
        sb.TERMINATEDS: np.asarray(cols[sb.TERMINATEDS]), sb.TRUNCATEDS: np.asarray(cols[sb.TRUNCATEDS]),
        sb.SEGMENT_END: np.asarray(ends), sb.EPS_ID: np.asarray(cols[sb.EPS_ID], np.int64),
        sb.AGENT_INDEX: np.zeros(n, np.int32), sb.ENV_INDEX: np.zeros(n, np.int32),
        sb.T: np.asarray(cols[sb.T], np.int32),
        **({} if cols[sb.ACTION_LOGP][0] is None else {sb.ACTION_LOGP: np.asarray(cols[sb.ACTION_LOGP], np.float32)}),
    })
    writer = OfflineWriter(folder, ["agent_0"])
    writer.write({"default_policy": batch}, weights_version=0)
    writer.close()
    return folder


# name -> recorder(folder): what a CanonicalTask's `data` may name (benchmarks/studies/cql_pendulum.py records pendulum_mixed here too)
RECORDINGS = {
    # 20 episodes of a policy that balances the pole: 10,000 rows
    "cartpole_expert": lambda folder: record_episodes(folder, "CartPole-v1", cartpole_step, 20, [0.0]),
    # 40 episodes of mixed quality, epsilon 0 to 1: good and poor episodes side by side
    "cartpole_mixed": lambda folder: record_episodes(folder, "CartPole-v1", cartpole_step, 40, [0.0, 0.25, 0.5, 0.75, 1.0]),
    # 40 Pendulum-v1 episodes (8,000 rows), epsilon 0 to 1: returns about -130, -210, -580, -860, -1220 a level
    "pendulum_mixed": lambda folder: record_episodes(folder, "Pendulum-v1", pendulum_step, 40, [0.0, 0.25, 0.5, 0.75, 1.0]),
}


@pytest.fixture(scope="module")
def recordings(tmp_path_factory):
    made = {}

    def get(name: str):
        if name not in made:
            assert name in RECORDINGS, f"unknown recording '{name}'; this test records {sorted(RECORDINGS)}"
            made[name] = RECORDINGS[name](tmp_path_factory.mktemp(name))
        return made[name]

    return get


# -- the test ---------------------------------------------------------------------------------------------------


def offline_checks(budget: int) -> list[int]:
    """The iterations an offline run is judged at: every 10th in the second half of its budget, and the last
    (a policy that is good once and then drifts away, as offline Q-learning can, fails)."""
    return sorted({i for i in range(10, budget + 1, 10) if 2 * i >= budget} | {budget})


def run_offline(name, task, seed, data) -> dict[int, float]:
    """Greedy return (20 episodes) at each of `offline_checks(task.budget)`."""
    overrides = [*task.overrides, f"offline.input={data}", f"debugging.seed={seed}"]
    algo = config_from_dict({"algo": name, "environment": {"env": task.env}}, overrides).build()
    checks, scores = offline_checks(task.budget), {}
    try:
        for iteration in range(1, task.budget + 1):
            algo.train()
            if iteration in checks:
                scores[iteration] = algo.evaluate(num_episodes=20, explore=False)["evaluation/episode_return_mean"]
        return scores
    finally:
        algo.stop()


def test_pendulum_recording_mixes_good_and_poor_episodes(tmp_path):
    """pendulum_mixed holds what benchmarks/studies/cql_pendulum.py says: 8,000 rows of [-1, 1] actions, the heuristic's
    greedy episodes swinging up (return above -300 on average) and the random ones not (below -900)."""
    import pyarrow.parquet as pq

    table = pq.read_table(next(RECORDINGS["pendulum_mixed"](tmp_path).glob("*/*.parquet")))
    actions = np.asarray(table[sb.ACTIONS].combine_chunks().flatten())
    assert table.num_rows == 8000 and np.abs(actions).max() <= 1.0
    returns = np.bincount(table[sb.EPS_ID].to_numpy(), weights=table[sb.REWARDS].to_numpy())
    greedy, random = returns[0::5], returns[4::5]  # epsilon 0 and epsilon 1 episodes
    assert greedy.mean() > -300 and random.mean() < -900, (greedy.mean(), random.mean())


def test_every_algorithm_declares_where_its_defaults_learn():
    """The fast half of the slow test below: each algorithm's own class declares its tasks, well formed."""
    from marl.algorithms.canonical import CanonicalTask

    for name, cls in discovered().items():
        tasks = cls.__dict__.get("canonical_tasks")
        assert tasks, f"{cls.__qualname__} declares no canonical_tasks of its own (inherited ones do not count)"
        for task in tasks:
            assert isinstance(task, CanonicalTask), f"{name}: {task!r} is not a CanonicalTask"
            assert task.data is None or task.data in RECORDINGS, f"{name}: unknown recording '{task.data}'"
            assert task.budget > 0 and task.window >= 1 and task.seeds, f"{name}: {task}"
            # a hold is judged well past the first success: at least 3x the budget, online, over several iterations
            assert task.hold == 0 or (task.hold >= 3 * task.budget and task.data is None and task.hold_window >= 2), (
                f"{name}: hold {task.hold} (budget {task.budget}, window {task.hold_window}, data {task.data})")


def test_a_window_skips_iterations_in_which_no_episode_finished():
    """Four CartPole copies that all last 500 steps finish together, every other iteration: the iterations between
    report NaN (no episode), which must not turn a held window into a failure, nor count as a score."""
    assert window_mean([math.nan, 500.0, math.nan, 480.0]) == 490.0
    assert math.isnan(window_mean([math.nan, math.nan]))


@pytest.mark.slow
@pytest.mark.parametrize("name,task,seed", list(cases(on_policy=True)))
def test_defaults_learn_the_canonical_task(name, task, seed, request):
    check_defaults_learn(name, task, seed, request)


def check_defaults_learn(name, task, seed, request) -> None:
    assert task is not None, (
        f"{name} declares no canonical task: give {discovered()[name].__qualname__} a class-level "
        "canonical_tasks = (CanonicalTask(env, threshold, budget, ...),) (marl.algorithms.canonical)"
    )
    if task.data is not None:
        request.getfixturevalue("ray_session")  # Ray Data reads the recording
        scores = run_offline(name, task, seed, request.getfixturevalue("recordings")(task.data))
        print(f"{name} on {task.env} ({task.data}): greedy return by iteration {scores}")
        assert min(scores.values()) >= task.threshold, (
            f"{name}'s defaults on '{task.data}': greedy return by iteration {scores} (threshold {task.threshold})"
        )
    else:
        run = run_canonical(name, task, seed)
        score, steps, held = run.reached, run.steps, run.held
        print(f"{name} on {task.env}: {task.metric} {score:.1f} at {steps} env steps"
              + ("" if held is None else f"; {held:.1f} over the last {task.hold_window} iterations to {task.hold}"))
        assert score >= task.threshold, (
            f"{name}'s defaults on {task.env}: {task.metric} {score:.1f} in {steps} env steps "
            f"(threshold {task.threshold}, budget {task.budget})"
        )
        hold_at = task.threshold if task.hold_threshold is None else task.hold_threshold
        assert held is None or held >= hold_at, (
            f"{name}'s defaults on {task.env} reached {task.threshold} but did not hold {hold_at}: {task.metric} "
            f"{held:.1f} over the last {task.hold_window} iterations to {task.hold} env steps"
        )
