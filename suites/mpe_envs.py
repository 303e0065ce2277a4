"""Envs the MPE suites register (imported by `imports: [mpe_envs]` in a suite file).

simple_speaker_listener_padded (needs SuperSuit: the `butterfly` extra, in `dev`): MPE's speaker-listener with SuperSuit's padding, so both agents
have the same spaces (speaker: 3 -> 11 observation floats, zeros appended; 3 -> 5 actions, the
two extra ones act as action 0). Every algorithm then trains one shared policy over both agents
(an agent-id one-hot tells them apart), which value decomposition (QMIX) needs: its agents form one
group with one Q-network.
"""

import supersuit
from mpe2 import simple_speaker_listener_v4

import marl


def padded_speaker_listener(config: dict):
    env = simple_speaker_listener_v4.parallel_env(**config)
    return supersuit.pad_action_space_v0(supersuit.pad_observations_v0(env))


marl.register_env("simple_speaker_listener_padded", padded_speaker_listener)
