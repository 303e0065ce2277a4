"""Building a policy's module from its class (None: the default, a class, or an import path) and model options,
swapping in the recurrent variant of a built-in network when `model.recurrent` asks for one."""

from __future__ import annotations

from marl.import_paths import import_object
from marl.modules.central_critic import CentralCriticMLP
from marl.modules.joint_q import JointQModule
from marl.modules.mlp import ActorCriticMLP
from marl.modules.q_mlp import QMLP
from marl.modules.recurrent import RECURRENT_KEYS, RecurrentActorCritic, RecurrentCentralCritic, recurrent_options
from marl.modules.recurrent_q import RecurrentJointQ, RecurrentQ
from marl.modules.rl_module import RLModule


def build_module(module_class, observation_space, action_space, model_config: dict | None) -> RLModule:
    """Instantiates a policy's module; `module_class` is None (default MLP), a class or 'pkg.mod:Class'."""
    cls = ActorCriticMLP if module_class is None else module_class
    if isinstance(cls, str):
        try:
            cls = import_object(cls)
        except (ImportError, AttributeError, ValueError) as err:
            raise ValueError(f"module_class '{module_class}' cannot be imported: {err}") from None
    if isinstance(cls, type):
        cls, model_config = _builtin_class(cls, model_config)
    if not (isinstance(cls, type) and issubclass(cls, RLModule)):
        raise ValueError(f"module_class {cls!r} is not a subclass of marl.RLModule")
    return cls(observation_space, action_space, model_config)


def _builtin(cls) -> bool:
    return cls.__module__.startswith("marl.modules.")


def _builtin_class(cls, model_config: dict | None):
    """A built-in memoryless module class and `model.recurrent`: the class to build, and its options."""
    model = dict(model_config or {})
    variants = {ActorCriticMLP: RecurrentActorCritic, CentralCriticMLP: RecurrentCentralCritic, JointQModule: RecurrentJointQ, QMLP: RecurrentQ}
    if not _builtin(cls) or not RECURRENT_KEYS & set(model):
        return cls, model
    kind, _, _ = recurrent_options(model)
    if kind is None:  # memoryless: the recurrent keys mean nothing to it
        return cls, {k: v for k, v in model.items() if k not in RECURRENT_KEYS}
    if cls in variants.values():
        return cls, model
    if cls not in variants:
        raise ValueError(f"model.recurrent: {kind} is not available for {cls.__name__} yet; the recurrent defaults "
                         f"are {sorted(c.__name__ for c in variants)}")
    return variants[cls], model


def model_keys(module_class, model_config: dict | None) -> frozenset[str] | None:
    """The model options the module a policy is built with reads (`MODEL_KEYS` of a built-in class, or of a
    user's class that declares it), so a typo is named before anything runs; None: it does not say."""
    cls = ActorCriticMLP if module_class is None else module_class
    if isinstance(cls, str):
        try:
            cls = import_object(cls)
        except (ImportError, AttributeError, ValueError):
            return None  # building the module names it
    if not isinstance(cls, type):
        return None
    try:
        built, _ = _builtin_class(cls, model_config)
    except ValueError:
        return None  # the recurrent checks name it
    keys = getattr(built, "MODEL_KEYS", None)
    if keys is None:
        return None
    if _builtin(cls):  # `recurrent: null` and its options: a built-in drops them
        keys = set(keys) | RECURRENT_KEYS
    return frozenset(keys)
