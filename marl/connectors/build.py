"""From the `connectors` config section to each policy's pipelines, and the module built on them.

    connectors:
      env_to_module: [{name: frame_stack, k: 4}, {name: prev_action_reward}]
      module_to_env: []
      learner: [{name: reward_scale, scale: 0.1}]
      policies: {prey: {env_to_module: []}}   # a list given for a policy replaces the one above

A piece is named by the built-in table (`BUILTIN_PIECES`) or by an import path
`pkg.mod:Class` (a `ConnectorPiece` subclass); further keys are its settings. In Python,
a class or a piece object may stand in for the name. Implicit pieces keep today's settings
working: `env_runners.observation_filter: mean_std` puts `mean_std` first in env->module
(unless listed), `environment.unsquash_actions` / `clip_actions` end module->env.

`build_policy_module` is the one place a policy's module is built: from the space its
env->module pipeline outputs (learner, runners, config checks and `load_module` all call it).
"""

from __future__ import annotations

import difflib
import inspect

import gymnasium as gym

from marl.connectors.env_to_module import EnvToModulePipeline, FrameStack, MeanStd, PrevActionReward
from marl.connectors.learner import GAE, LearnerPipeline, RewardClip, RewardScale, StandardizeAdvantages
from marl.connectors.module_to_env import ClipActions, ModuleToEnvPipeline, UnsquashActions
from marl.connectors.piece import ConnectorPiece, RowContext
from marl.errors import ConfigError
from marl.modules.parts import has_image_parts
from marl.modules.spaces import image_space, observation_part
from marl.import_paths import import_object
from marl.modules import ActorCriticMLP, build_module
from marl.data import sample_batch as sb

PIPELINES = ("env_to_module", "module_to_env", "learner")
BUILTIN_PIECES: dict[str, dict[str, type]] = {
    "env_to_module": {"mean_std": MeanStd, "frame_stack": FrameStack, "prev_action_reward": PrevActionReward},
    "module_to_env": {"clip_actions": ClipActions, "unsquash_actions": UnsquashActions},
    "learner": {
        "reward_scale": RewardScale, "reward_clip": RewardClip, "gae": GAE, "standardize_advantages": StandardizeAdvantages,
    },
}


def piece_class(name, pipeline: str, where: str) -> type:
    """The class a piece's `name` stands for: a built-in name, an import path or a class."""
    if isinstance(name, str):
        cls = BUILTIN_PIECES[pipeline].get(name)
        if cls is None:
            if ":" not in name and "." not in name:
                near = difflib.get_close_matches(name, sorted(BUILTIN_PIECES[pipeline]), n=1)
                hint = f" (did you mean '{near[0]}'?)" if near else ""
                raise ConfigError(
                    f"'{where}.name': unknown {pipeline} piece '{name}'{hint}; built-in: {sorted(BUILTIN_PIECES[pipeline])}, "
                    "or an import path 'pkg.mod:Class'", key=str(where).split("[")[0]
                )

            try:
                cls = import_object(name)
            except (ImportError, AttributeError, ValueError) as err:
                raise ConfigError(f"'{where}.name': piece '{name}' cannot be imported: {err}") from None
    else:
        cls = name
    if not (isinstance(cls, type) and issubclass(cls, ConnectorPiece)):
        raise ConfigError(f"'{where}.name': {name!r} is not a subclass of marl.connectors.ConnectorPiece")
    return cls


def normalize_spec(spec, pipeline: str, where: str) -> dict:
    """A piece entry as {name: str | class, **settings}; a piece object becomes its class and settings."""
    builtin = {cls: name for name, cls in BUILTIN_PIECES[pipeline].items()}
    if isinstance(spec, ConnectorPiece):
        return {"name": builtin.get(type(spec), type(spec)), **spec.settings()}
    if isinstance(spec, (str, type)):
        return {"name": builtin.get(spec, spec)}
    if isinstance(spec, dict):
        if "name" not in spec:
            raise ConfigError(f"'{where}' needs a 'name' (a built-in piece or 'pkg.mod:Class'), got {spec!r}")
        name = spec["name"]
        return {**spec, "name": builtin.get(name, name) if isinstance(name, type) else name}
    raise ConfigError(
        f"'{where}' must be a piece name, {{name: ..., settings...}}, a class or a piece object; got {spec!r}"
    )


def make_piece(spec: dict, pipeline: str, where: str) -> ConnectorPiece:
    """A fresh piece from a normalised entry; bad settings are one ConfigError naming the entry."""
    cls = piece_class(spec["name"], pipeline, where)
    settings = {k: v for k, v in spec.items() if k != "name"}
    params = inspect.signature(cls.__init__).parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    allowed = [n for n, p in params.items() if n != "self" and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)]
    unknown = [k for k in settings if k not in allowed]
    if unknown and not takes_any:
        raise ConfigError(f"'{where}.{unknown[0]}': {cls.__name__} has no setting '{unknown[0]}'; its settings: {allowed}")
    try:
        return cls(**settings)
    except (TypeError, ValueError) as err:
        raise ConfigError(f"'{where}' ({cls.__name__}): {err}") from None


def check_section(section) -> None:
    """Normalises and checks every entry of a `connectors` section (building each piece once)."""
    for pipeline in PIPELINES:
        setattr(section, pipeline, _checked_list(pipeline_entries(section, pipeline), pipeline, f"connectors.{pipeline}"))
    for pid, override in (section.policies or {}).items():
        where = f"connectors.policies.{pid}"
        if not isinstance(override, dict):
            raise ConfigError(f"'{where}' must map pipelines ({list(PIPELINES)}) to lists of pieces, got {override!r}")
        for key in override:
            if key not in PIPELINES:
                raise ConfigError(f"unknown key '{where}.{key}'; valid keys: {list(PIPELINES)}")
        section.policies[pid] = {key: _checked_list(value, key, f"{where}.{key}") for key, value in override.items()}


def pipeline_entries(section, pipeline: str) -> list:
    entries = {"env_to_module": section.env_to_module, "module_to_env": section.module_to_env, "learner": section.learner}
    return entries[pipeline]


def _checked_list(entries, pipeline: str, where: str) -> list:
    if not isinstance(entries, (list, tuple)):
        raise ConfigError(f"'{where}' must be a list of pieces, got {type(entries).__name__} {entries!r}")
    out = []
    for i, entry in enumerate(entries):
        spec = normalize_spec(entry, pipeline, f"{where}[{i}]")
        make_piece(spec, pipeline, f"{where}[{i}]")
        out.append(spec)
    return out


# -- a policy's pipelines -------------------------------------------------------------------------
def piece_specs(config, policy_id: str, pipeline: str) -> list[dict]:
    """The configured entries of one policy's pipeline: its own override, else its spaces' owner's
    (a frozen self-play snapshot gets its policy's pipeline), else the section's list."""
    section = config.connectors_cfg
    policies = section.policies or {}
    owner = policy_id
    if policies and policy_id not in policies:
        spec = config.policy_specs().get(policy_id)
        owner = spec.spaces_from if spec is not None and spec.spaces_from in policies else None
    if owner in policies and pipeline in policies[owner]:
        return policies[owner][pipeline]
    return pipeline_entries(section, pipeline)


def check_policies(config) -> None:
    """`connectors.policies` names declared policies only (checked with the whole config, at validate time)."""
    declared = list(config.policy_specs())
    for pid in config.connectors_cfg.policies or {}:
        if pid not in declared:
            raise ConfigError(f"'connectors.policies' names unknown policy '{pid}'; declared: {declared}")


def _keyed(entries: list[tuple[str, ConnectorPiece]]) -> dict[str, ConnectorPiece]:
    """Pieces keyed by name ('frame_stack'; the class name for import paths), '.2', '.3' for repeats."""
    out: dict[str, ConnectorPiece] = {}
    for name, piece in entries:
        key, n = name, 1
        while key in out:
            n += 1
            key = f"{name}.{n}"
        out[key] = piece
    return out


def _pieces(config, policy_id: str, pipeline: str) -> list[tuple[str, ConnectorPiece]]:
    out = []
    for i, spec in enumerate(piece_specs(config, policy_id, pipeline)):
        name = spec["name"]
        builtin = isinstance(name, str) and name in BUILTIN_PIECES[pipeline]
        key = name if builtin else piece_class(name, pipeline, "").__name__
        out.append((key, make_piece(spec, pipeline, f"connectors.{pipeline}[{i}]")))
    return out


def keeps_image_obs(config, policy_id: str) -> bool:
    """Whether the policy's module takes image observations as they are (`RLModule.keeps_image_obs`)."""

    cls = config.plan_for(policy_id).module_class if policy_id in config.policy_specs() else config.default_module_class
    if cls is None:
        cls = ActorCriticMLP  # build_module's default
    if isinstance(cls, str):
        try:
            cls = import_object(cls)
        except (ImportError, AttributeError, ValueError):
            return False  # building the module reports it
    return bool(getattr(cls, "keeps_image_obs", False))  # not an RLModule: building it reports that


def env_to_module_pipeline(config, policy_id: str, observation_space, action_space, num_slots: int = 0):
    pieces = _pieces(config, policy_id, "env_to_module")
    keep_images = keeps_image_obs(config, policy_id)
    implicit_filter = config.env_runners_cfg.observation_filter == "mean_std"
    if keep_images and (image_space(observation_space) is not None or has_image_parts(observation_part(observation_space))):
        implicit_filter = False  # images are scaled in the module instead
    if implicit_filter and not any(isinstance(p, MeanStd) for _, p in pieces):
        pieces.insert(0, ("mean_std", MeanStd()))
    return EnvToModulePipeline(_keyed(pieces), observation_space, action_space, num_slots, keep_images)


def module_to_env_pipeline(config, policy_id: str, action_space) -> ModuleToEnvPipeline:
    pieces = _pieces(config, policy_id, "module_to_env")
    env = config.environment_cfg
    if not isinstance(action_space, gym.spaces.Box):  # clipping and unsquashing only concern Box actions
        pass
    elif config.plan_for(policy_id).unsquash_actions:
        pieces.append(("unsquash_actions", UnsquashActions()))
    elif env.clip_actions:
        pieces.append(("clip_actions", ClipActions()))
    return ModuleToEnvPipeline(_keyed(pieces), action_space)


def learner_pipeline(config, policy_id: str) -> LearnerPipeline:
    return LearnerPipeline(policy_id, _keyed(_pieces(config, policy_id, "learner")))


def build_policy_module(config, policy_id: str, spec):
    """The one place a policy's module is built: from its env->module pipeline's output space."""

    space = env_to_module_pipeline(config, policy_id, spec.observation_space, spec.action_space).output_space
    plan = config.plan_for(policy_id)
    return build_module(plan.module_class, space, spec.action_space, plan.model)


# -- the runner's and the learner's side ----------------------------------------------------------
class PolicyConnectors:
    """A runner's pipelines for one policy: env->module before the forward pass, module->env after it."""

    def __init__(self, config, policy_id: str, spec, num_envs: int, num_agents: int):
        self.num_agents, self.num_slots = num_agents, num_envs * num_agents
        self.env_to_module = env_to_module_pipeline(
            config, policy_id, spec.observation_space, spec.action_space, self.num_slots
        )
        self.module_to_env = module_to_env_pipeline(config, policy_id, spec.action_space)
        self.obs_dim, self.masked = self.env_to_module.obs_dim, self.env_to_module.masked
        self.obs_shape, self.obs_dtype = self.env_to_module.obs_shape, self.env_to_module.obs_dtype
        self.action_shape, self.action_dtype = self.module_to_env.shape, self.module_to_env.dtype
        self._copy_actions = bool(self.module_to_env.pieces)  # pieces get a copy: the batch keeps the sample
        # No pieces and no previous-action inputs: actions go straight to the env's types (one call per step).
        plain = not self.module_to_env.pieces and self.env_to_module._last_action is None
        self._plain_to_env = self.module_to_env.to_env if plain else None

    def rows(self, env_index, agent_index, episode_id, returns, update_stats: bool) -> RowContext:
        """The context of acting rows; `returns` () -> each row's agent return so far (read only if needed)."""
        return RowContext(
            env_index, agent_index, episode_id, self.num_agents, self.num_slots, update_stats=update_stats, returns=returns
        )

    def peek_rows(self, columns: dict, rows) -> RowContext:
        """The context of a bootstrap pass over the observations reached after sampled `rows` (collector columns)."""

        needs = self.env_to_module.needs
        return RowContext(
            columns[sb.ENV_INDEX][rows], columns[sb.AGENT_INDEX][rows], columns[sb.EPS_ID][rows],
            self.num_agents, self.num_slots,
            update_stats=False, peek=True,
            prev_action=columns[sb.ACTIONS][rows] if needs & {"prev_action", "prev_reward"} else None,
            prev_reward=columns[sb.REWARDS][rows] if needs & {"prev_action", "prev_reward"} else None,
        )

    def to_module(self, raw_obs: list, ctx: RowContext):
        return self.env_to_module(raw_obs, ctx)

    def to_env(self, actions, ctx: RowContext) -> list:
        if self._plain_to_env is not None:
            return self._plain_to_env(actions)
        self.env_to_module.record_actions(actions, ctx)
        return self.module_to_env(actions.copy() if self._copy_actions else actions, ctx)

    def pop_deltas(self) -> dict:
        return self.env_to_module.pop_deltas()

    def get_central(self) -> dict:
        return self.env_to_module.get_central()

    def set_central(self, central: dict) -> None:
        self.env_to_module.set_central(central)

    def get_state(self) -> dict:
        return {"env_to_module": self.env_to_module.get_state(), "module_to_env": self.module_to_env.get_state()}

    def set_state(self, state: dict) -> None:
        self.env_to_module.set_state(state.get("env_to_module", {}))
        self.module_to_env.set_state(state.get("module_to_env", {}))


class LearnerConnectors:
    """The learner's side: each trained policy's learner pipeline, and every policy's central
    statistics of synced env->module pieces (merged from runner deltas, sent with the weights)."""

    def __init__(self, config, specs: dict, trained: list[str]):
        synced = {pid: env_to_module_pipeline(config, pid, s.observation_space, s.action_space) for pid, s in specs.items()}
        self.synced = {pid: p for pid, p in synced.items() if p.synced}
        self.learner = {pid: learner_pipeline(config, pid) for pid in trained}

    def merge(self, deltas: list[dict]) -> None:
        """Runner deltas ({policy: {piece: delta}}, one dict per sample call), in order."""
        for by_policy in deltas:
            for pid, by_piece in by_policy.items():
                for key, delta in by_piece.items():
                    self.synced[pid].synced[key].merge_delta(delta)

    def run(self, policy_id: str, batch, algorithm_pieces=()):
        return self.learner[policy_id](batch, algorithm_pieces)

    def get_central(self) -> dict:
        return {pid: p.get_central() for pid, p in self.synced.items()}

    def set_central(self, central: dict) -> None:
        for pid, state in central.items():
            if pid in self.synced:
                pipeline = self.synced[pid]
                if "count" in state:  # schema 1 and earlier checkpoints: the mean/std filter's statistics alone
                    state = {key: state for key, p in pipeline.synced.items() if isinstance(p, MeanStd)}
                pipeline.set_central(state)

    def get_state(self) -> dict:
        return {pid: p.get_state() for pid, p in self.learner.items()}

    def set_state(self, state: dict) -> None:
        for pid, pipeline_state in state.items():
            if pid in self.learner:
                self.learner[pid].set_state(pipeline_state)
