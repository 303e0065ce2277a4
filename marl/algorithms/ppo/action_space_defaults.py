"""PPO's defaults that depend on the env: the training keys whose default is `auto`.

A key left at `auto` is set when the config builds (`AlgorithmConfig.resolved`), from the env spec (`marl.algorithms.env_spec.EnvSpec`):
IMAGE where an agent observes images (after `environment.wrappers`, whose own `auto` resizes large frames to
42x42), else by the action spaces: BOX where every agent acts in a Box space, DISCRETE otherwise (Discrete,
MultiDiscrete, mixed). A value the user gives (a number, null) is kept as given; only `auto` is replaced.

DISCRETE is sized for CartPole (the canonical discrete task), as PPO's defaults were before this split. BOX is
RLlib's multi-agent Pendulum PPO example's settings (lambda 0.1, 6 epochs, 128-row minibatches, relu [256, 256],
value loss weight 1) at marl's 4,096-row train batch (RLlib's 8,000 rows reached -300 on
single-agent Pendulum at 221k-246k env steps, 4,096 rows at 143k-160k), with a gradient clip of 0.5 where the
example has none: RLlib's PPO adds an adaptive KL penalty that marl's does not, and without either the 192 SGD
steps of an update spiked the KL to 5.6 (seed 1) and Pendulum fell from -150 at 400k env steps to -840 at 750k;
with the clip seeds 0-3 held -147 to -165 over the last 10 iterations at 750k, approx_kl 0.01-0.08.
With the DISCRETE values two Pendulum copies missed RLlib's -600 within 250k env steps on 2 of 3 seeds (docs/results/rllib_targets/).
BOX adds PopArt value normalisation (`marl.modules.popart`): Pendulum's returns are in the hundreds, and with it
the 3-iteration mean reached -300 at 111k-123k env steps on seeds 0-2 against 143k-156k, and the last quarter of
250k held -142 to -160 against -165 to -337. DISCRETE leaves it off: its gradient clip of 0.5 was set with the
raw-scale value gradient taking most of the clipped norm, and PopArt hands that share back to the policy. IMAGE
too: on Pistonball, whose conv encoder both heads share, it did not learn in 266 iterations (seed 0, blocks of
66: -61, -9, -17, -70 against -40, 29, 735, 165).

IMAGE keeps a conv update to seconds on a CPU: a conv pass costs about a hundred times an MLP's per row, so 3
epochs of 256-row minibatches (48 SGD steps per 4,096-row batch, not DISCRETE's 640), a [256] relu head over the
conv stack that `model.conv_filters: null` sizes to the frame, and GAE lambda 0.95 for Box actions too
(BOX's 0.1 is sized for Pendulum's dense reward). Pistonball with these: benchmarks/speed/images.py --defaults (time,
memory) and --learn (against random actions).
"""

from __future__ import annotations

import copy
import json

from marl.config.checks import AUTO, section_fields

DISCRETE = {
    "gae_lambda": 0.95,
    "minibatch_size": 64,
    "num_epochs": 10,
    "vf_loss_coeff": 0.5,
    "grad_clip": 0.5,
    "model": {"hiddens": [64, 64], "activation": "tanh"},
    "popart": False,
}
BOX = {
    "gae_lambda": 0.1,
    "minibatch_size": 128,
    "num_epochs": 6,
    "vf_loss_coeff": 1.0,
    "grad_clip": 0.5,
    "model": {"hiddens": [256, 256], "activation": "relu"},
    "popart": True,
}
IMAGE = {
    "gae_lambda": 0.95,
    "minibatch_size": 256,
    "num_epochs": 3,
    "vf_loss_coeff": 0.5,
    "grad_clip": 0.5,
    "model": {"hiddens": [256], "activation": "relu"},
    "popart": False,
}


def auto_doc(text: str, key: str) -> str:
    """A key's reference text with what `auto` becomes for each kind of action space."""
    def yaml(value) -> str:
        return json.dumps(value).replace('"', "")

    return (f"{text}; auto: {yaml(DISCRETE[key])} for discrete actions, {yaml(BOX[key])} for Box, {yaml(IMAGE[key])} "
            "for image observations (marl.algorithms.ppo.action_space_defaults)")


def auto_keys(training) -> list[str]:
    """The keys of a training section still at `auto`."""
    return [name for name in section_fields(training) if isinstance(getattr(training, name), str) and getattr(training, name) == AUTO]


def resolve_auto(training, box: bool, images: bool = False) -> None:
    """Sets every `auto` key of `training` to its value for the env: IMAGE, else BOX or DISCRETE."""
    table = IMAGE if images else BOX if box else DISCRETE
    for key in auto_keys(training):
        object.__setattr__(training, key, copy.deepcopy(table[key]))
