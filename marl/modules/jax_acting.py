"""Acting in JAX: the JAX form of a module's acting pass, for the compiled rollout (`marl.runners.jax_rollout`).

One description of a network serves every backend (`marl.modules.activations.mlp_description`: Linear layers and
activations by name): torch runs the module's layers, the NumPy actor (`marl.modules.numpy_acting`) its arrays,
and `JaxActor` the same layers in jax.numpy, with the NumPy actor's weights passed in as jit arguments (a weight
sync is an upload, not a recompilation). Its pass is a pure function: `act` and `values` are traced inside the
caller's jitted scan; the draws (uniform for a Categorical's Gumbel-max, normal for a Gaussian) come from the caller.
"""

from __future__ import annotations

from marl.modules.functional import MASKED_LOGIT
from marl.modules.numpy_acting import LOG_SQRT_2PI, NumpyActor


def jax_activation(name: str):
    """The JAX form of an activation of the module description (`marl.modules.activations.ACTIVATION_NAMES`)."""
    import jax

    return {"tanh": jax.numpy.tanh, "relu": jax.nn.relu, "elu": jax.nn.elu, "silu": jax.nn.silu}[name]


class JaxActor:
    """A NumpyActor's pass in JAX: `layout` (each network's layers by name), the head (Categorical, masked or not, or
    a state-independent Gaussian) and `pieces` ((kind, low, high) of the clip/unsquash pieces the env's actions pass
    through, in order: `kind.with_bounds` on JAX arrays)."""

    def __init__(self, actor: NumpyActor, masked: bool, pieces: tuple = ()):
        self.actor = actor
        self.layout = tuple(None if net is None else tuple("linear" if kind == "linear" else name for kind, name in net.layers)
                            for net in (actor.pi, actor.vf))
        self.continuous = actor.log_std_param is not None
        self.masked = masked
        self.pieces = tuple(pieces)
        self._key = None
        self.params = None

    def signature(self) -> tuple:
        """What the traced pass depends on (equal signatures: one compilation serves both)."""
        return (self.layout, self.continuous, self.masked,
                tuple((kind.__name__, low.tobytes(), high.tobytes()) for kind, low, high in self.pieces))

    def weights(self, jax) -> dict:
        """The module's current weights as JAX arrays, converted again only where a parameter changed."""
        version = self.actor.refresh()  # (the NumPy actor reads the torch weights again where one changed)
        if version != self._key:
            def linear(net) -> list:
                return [] if net is None else [[jax.numpy.asarray(s[0]), jax.numpy.asarray(s[1])] for s in net.steps
                                               if type(s) is tuple]

            self.params = {"pi": linear(self.actor.pi), "vf": linear(self.actor.vf),
                           "log_std": jax.numpy.asarray(self.actor.log_std) if self.continuous else None}
            self._key = version
        return self.params

    @staticmethod
    def _mlp(layout, params, x):
        it = iter(params)
        for kind in layout:
            if kind == "linear":
                weight, bias = next(it)
                x = x @ weight + bias
            else:
                x = jax_activation(kind)(x)
        return x

    def values(self, prm: dict, obs):
        """V(obs) for rows [R, ...] -> [R]."""
        return self._mlp(self.layout[1], prm["vf"], obs)[..., 0]

    def act(self, prm: dict, obs, mask, draw, want_values: bool) -> tuple:
        """(actions, the env's actions, log-probs, values or None) for rows [R, ...] (2-D rows: XLA's CPU dot on them is
        1.3x faster than on [W, A, D] at 1,024 worlds)."""
        import jax
        import jax.numpy as jnp

        out = self._mlp(self.layout[0], prm["pi"], obs)
        if self.continuous:  # DiagGaussian: mean + std * N(0, 1), the log-std clipped as the NumPy actor has it
            actions = out + jnp.exp(prm["log_std"]) * draw
            logp = (-0.5 * draw * draw - prm["log_std"] - LOG_SQRT_2PI).sum(-1)
            env_actions = actions
            for kind, low, high in self.pieces:  # the module->env pieces' own functions, on JAX arrays
                env_actions = kind.with_bounds(low, high)(env_actions)
        else:
            if mask is not None:
                out = jnp.where(mask < 0.5, MASKED_LOGIT, out)
            log_probs = jax.nn.log_softmax(out, axis=-1)
            actions = jnp.argmax(log_probs - jnp.log(-jnp.log(draw)), axis=-1)  # Gumbel-max (jax.random.categorical's)
            logp = jnp.take_along_axis(log_probs, actions[..., None], axis=-1)[..., 0]
            env_actions = actions
        return actions, env_actions, logp, self.values(prm, obs) if want_values else None
