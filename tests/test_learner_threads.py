"""The learner's torch threads when `learners.num_threads` is unset: the cores it owns (`marl.execution.cores`),
never more than the run's other actors leave it; an explicit value wins; the run says what it chose."""

from __future__ import annotations

import os

import pytest
import torch

import marl
from marl.execution import cores
from marl.learners.learner import Learner
from marl.runtime.run_loop import train_run


@pytest.fixture(autouse=True)
def no_thread_budget(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)  # (a test worker's budget: conftest sets it under xdist)


def ppo(**runners):
    return marl.PPOConfig().environment("CartPole-v1").env_runners(**runners)


def test_an_in_process_run_takes_every_core_it_owns():
    assert cores.learner_threads(ppo(), cores=2) == (2, "cores owned")
    assert cores.learner_threads(ppo(), cores=16) == (16, "cores owned")


def test_runner_actors_keep_their_cpus():
    assert cores.learner_threads(ppo(num_env_runners=1), cores=2) == (1, "2 cores owned less 1 CPUs of runner actors")
    assert cores.learner_threads(ppo(num_env_runners=4, num_cpus_per_env_runner=0.5), cores=8)[0] == 6
    evaluators = ppo(num_env_runners=2).evaluation(evaluation_num_env_runners=2)
    assert cores.learner_threads(evaluators, cores=8)[0] == 4  # evaluation runners hold cores as well
    assert cores.learner_threads(ppo(num_env_runners=2, num_cpus_per_env_runner=0.75), cores=2)[0] == 1  # 0.5 left: still one
    assert cores.learner_threads(ppo(num_env_runners=8), cores=2)[0] == 1


def test_a_learner_actor_takes_the_cpus_ray_gives_it():
    actors = ppo(num_env_runners=1).learners(num_learners=2, num_cpus_per_learner=3)
    assert cores.learner_threads(actors, cores=2) == (3, "each learner actor's num_cpus_per_learner")
    assert cores.learner_threads(ppo().learners(num_learners=1, num_cpus_per_learner=0.5), cores=8)[0] == 1
    # an in-process learner inside a Ray actor (a Tune trial): that actor's CPUs, not the machine's
    assert cores.learner_threads(ppo(), cores=8, actor_cpus=1.0) == (1, "the CPUs Ray assigned this process")


def test_an_explicit_value_wins():
    assert cores.learner_threads(ppo().learners(num_threads=3), cores=1) == (3, "learners.num_threads")
    assert cores.learner_threads(ppo().learners(num_threads=1, num_learners=1, num_cpus_per_learner=4))[0] == 1
    assert cores.learner_threads(ppo(num_env_runners=1).learners(num_threads=2), cores=2)[0] == 2


def test_omp_num_threads_caps_the_cores_owned(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert cores.learner_threads(ppo(), cores=2) == (1, "OMP_NUM_THREADS=1")
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert cores.learner_threads(ppo(num_env_runners=1), cores=8) == (2, "OMP_NUM_THREADS=3 less 1 CPUs of runner actors")
    assert cores.learner_threads(ppo(), cores=2) == (2, "cores owned")  # a budget above the cores changes nothing


def test_the_cores_owned_are_the_affinity_not_the_machine_count(monkeypatch):
    if not hasattr(os, "sched_getaffinity"):
        pytest.skip("this OS does not tell a process its CPU affinity")
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    assert cores.machine_cores() == 1
    assert cores.learner_threads(ppo()) == (1, "cores owned")


def test_the_learner_updates_on_the_threads_it_chose_and_the_run_says_so(monkeypatch, tmp_path):
    monkeypatch.setattr(cores, "machine_cores", lambda: 3)  # (more threads than this machine may have: torch allows it)
    seen = []
    update_policy = Learner._update_policy

    def recording(self, pid, batch):
        seen.append(torch.get_num_threads())
        return update_policy(self, pid, batch)

    monkeypatch.setattr(Learner, "_update_policy", recording)
    before = torch.get_num_threads()
    config = (ppo(rollout_fragment_length=32).training(train_batch_size=64, minibatch_size=32, num_epochs=1)
              .stopping(iterations=2).debugging(seed=0))
    lines = []
    try:
        train_run(config, tmp_path, echo=lines.append)
        outside = torch.get_num_threads()
    finally:
        torch.set_num_threads(before)
    assert seen == [3, 3]
    assert outside != 3  # the update's threads are the update's: the in-process runner acts on its one thread
    assert "learner threads: 3 (cores owned)" in lines
