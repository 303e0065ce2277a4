"""The policy server: external simulators play episodes over HTTP; their experience becomes training batches.

Wire format (JSON over HTTP; every request with `Authorization: Bearer <token>` when a token is set):

    POST /episodes                        {}                                   -> {"episode_id": "e3f1..."}
    POST /episodes/<id>/action            {"obs": {agent: [float, ...]}}       -> {"actions": {agent: int | [float]}}
    POST /episodes/<id>/rewards           {"rewards": {agent: float}}          -> {"ok": true}
    POST /episodes/<id>/end               {"obs": {agent: [...]}, "truncated": false} -> {"ok": true}
    GET  /stats                                                                -> {counter: value}

Client-side inference (`PolicyClient(..., inference="local")`) uses two more:

    GET  /weights?version=<v>             -> {"version": v, "unchanged": true} when v is the newest, else
                                             {"version": v', "agents": {agent: policy},
                                              "policies": {policy: {"module": spec, "weights": {name: tensor}}}}
    POST /episodes/<id>/steps             {"weights_version": v, "steps": [{"obs": {agent: [...]},
                                           "actions": {agent: int | [float]}, "logp": {agent: float},
                                           "vf": {agent: float}, "rewards": {agent: float}}, ...]}  -> {"ok": true}

The module spec and tensor forms are in `marl.external.wire`. `steps` are the client's own
actions in order, each with the log-probability its policy gave it (the behaviour policy PPO's
ratio and importance weights divide by) and, for algorithms that record values, the value
estimate; rewards are the step's. A batch of steps is checked whole before any of it is kept.

An error is a 4xx status with {"error": "<what is wrong>"}: 400 malformed body, unknown
agent, wrong observation size, an observation that is not finite or overflows float32; 401
missing or wrong token; 404 unknown episode id; 413 body larger than the limit; 429 too many
open episodes (`max_episodes`: end some, or wait for silent ones to be dropped).
When training has ended (its stop criteria met, or interrupted) the server finishes the
requests in progress, then answers every new one but `GET /stats` for `end_grace_s` seconds with
503 and {"error": "training has ended: <why>; ...", "ended": "<why>"} before it exits. Every refusal is counted (`external/refused/<status>`) and
nothing of the refused request reaches a batch. An episode with no request for
`episode_timeout_s` (its client died) is dropped with its rows (`external/episodes_dropped`).

Rewards logged after an action belong to that action (several calls add up). Episodes
are cut every `rollout_fragment_length` steps (bootstrapped with the value of the
observation the next action request brings) and at their end (bootstrapped when
`truncated`). Inference runs here, on the learner's newest weights, one forward pass
per policy per request.

Backlog: pieces wait in a queue until training takes them, one a record. While `max_backlog_steps` env
steps wait there, a request that would add steps (`action`, `steps`) waits for training to take some
(`external/backlog_waits` counts it) -- at most `BACKLOG_WAIT_S`, then it is served anyway, so a client
never meets its HTTP timeout. With the default, 1, clients run at most one piece ahead of what training has
taken: a batch is acted with the newest weights but for that piece, whatever the machine's load (without
the bound, clients acting while the learner trains piled up steps that trained ever later: the policy lag,
and the memory held, grew with the load). Larger values let clients run ahead while the learner trains.

aiohttp serves (it comes with ray[default], bounds request bodies itself and runs
in a thread of its own, so training keeps the main thread); the client uses httpx.

The request checks are in `marl.external.request_checks`, the HTTP layer in `marl.external.http_app`
(`ExperienceServer` inherits both); this module keeps episodes, runs inference, publishes weights and
assembles the batches.
"""

from __future__ import annotations

import math
import threading
import time
import uuid

import numpy as np
import torch

from marl.connectors.build import build_policy_module
from marl.connectors.module_to_env import ActionAdapter
from marl.data import SampleBatch
from marl.data import sample_batch as sb
from marl.data.columns import assemble, columns_for
from marl.data.spaces_json import space_to_json
from marl.errors import ConfigError
from marl.external.http_app import HttpServing
from marl.external.request_checks import RequestChecks, RequestError, check_host, check_servable
from marl.external.wire import act as sample_actions
from marl.external.wire import action_to_json, class_path, tensors_to_json

TOKEN_ENV = "MARL_SERVE_TOKEN"  # where the token comes from (never the graph, which config.yaml records)


class _Episode:
    __slots__ = ("id", "number", "rows", "last_seen", "t", "agent_returns", "length", "versions")

    def __init__(self, number: int):
        self.id = uuid.uuid4().hex
        self.number = number  # the int64 eps_id of its rows
        self.rows: dict[str, dict[str, list]] = {}  # agent -> column -> values (rows not yet emitted)
        self.last_seen = time.monotonic()
        self.t: dict[str, int] = {}
        self.agent_returns: dict[str, float] = {}
        self.length = 0
        self.versions: set[int] = set()  # weights versions of the rows not yet emitted


class ExperienceServer(RequestChecks, HttpServing):  # the request checks; HTTP
    """Episodes, inference and the queue of finished pieces; the HTTP layer is `start()`'s aiohttp app."""

    def __init__(self, config, specs: dict, agents_of: dict, possible_agents: list[str], host: str = "127.0.0.1",
                 port: int = 9900, token: str | None = None, max_body_bytes: int = 1 << 20,
                 episode_timeout_s: float = 60.0, max_episodes: int = 1000, end_grace_s: float = 5.0,
                 on_listening=None, max_backlog_steps: int = 1):
        check_host(host, token)
        cfg = config
        check_servable(cfg, specs)
        self.host, self.port, self.token = host, int(port), token
        self.max_body_bytes, self.episode_timeout_s = int(max_body_bytes), float(episode_timeout_s)
        self.max_episodes, self.end_grace_s = int(max_episodes), float(end_grace_s)
        self.max_backlog_steps = int(max_backlog_steps)
        self.on_listening = on_listening  # called with the server once its socket is bound (`marl serve` says so then)
        self.ended: str | None = None  # why training ended: new requests get 503 with it
        self.fragment = cfg.env_runners_cfg.rollout_fragment_length
        self.possible_agents = list(possible_agents)
        self.agent_index = {a: i for i, a in enumerate(self.possible_agents)}
        self.policy_of = {a: pid for pid, agents in agents_of.items() for a in agents}
        self.modules = {pid: build_policy_module(cfg, pid, spec) for pid, spec in specs.items()}
        stateful = [pid for pid, module in self.modules.items() if module.get_initial_state()]
        if stateful:
            raise ConfigError(f"marl serve keeps no recurrent state per episode: policies {stateful} have stateful modules "
                              "(model.recurrent); serve them without a recurrent core")
        self.module_specs = {pid: self._module_spec(cfg, pid, spec) for pid, spec in specs.items()}
        self.action_spaces = {pid: spec.action_space for pid, spec in specs.items()}
        self._weights_json: dict | None = None  # the newest weights in wire form, built on the first request
        for module in self.modules.values():
            module.eval()
        self.obs_dim = {pid: int(np.prod(spec.observation_space.shape)) for pid, spec in specs.items()}
        self.discrete = {pid: spec.action_space.shape == () for pid, spec in specs.items()}
        self.values = {pid: sb.VF_PREDS in cfg.runner_columns(pid) for pid in specs}
        # Each policy's batch columns (the runners' schema): next observations and log-probs always (clients send
        # what they saw and the probability of what they did), values and bootstraps where the algorithm records them.
        self.columns = {pid: self._columns(pid, spec) for pid, spec in specs.items()}
        self.weights_version = -1
        self.episodes: dict[str, _Episode] = {}
        self.pieces: list[tuple[dict[str, SampleBatch], int, set]] = []  # (policy batches, env steps, weights versions)
        self.backlog_steps = 0  # env steps of the pieces waiting for training
        self.finished: list[dict] = []  # episode metrics
        self.counters: dict[str, int] = {}
        self.lock = threading.Lock()
        self.piece_ready = threading.Condition(self.lock)
        self.rng = torch.Generator().manual_seed(int(cfg.debugging_cfg.seed or 0))
        self._next_number = 1
        self._loop = self._thread = self._runner = None

    def _columns(self, pid: str, spec) -> dict:
        requested = {sb.NEXT_OBS, sb.ACTION_LOGP} | ({sb.VF_PREDS, sb.BOOTSTRAP_VALUE} if self.values[pid] else set())
        actions = ActionAdapter(spec.action_space)  # the module's action layout, as the runners record it
        return columns_for((self.obs_dim[pid],), np.float32, actions.shape, actions.dtype, requested)

    @staticmethod
    def _module_spec(cfg, pid: str, spec) -> dict | None:
        """What a client rebuilds the policy's module from (None: a space without a wire form)."""

        plan = cfg.plan_for(pid)
        try:
            return {"module_class": class_path(plan.module_class), "model": plan.model,
                    "observation_space": space_to_json(spec.observation_space),
                    "action_space": space_to_json(spec.action_space)}
        except ValueError:
            return None

    # -- state the training side reads and sets (main thread) -----------------------------------
    def count(self, key: str, n: int = 1) -> None:
        self.counters[key] = self.counters.get(key, 0) + n

    def set_weights(self, weights: dict) -> None:
        with self.lock:
            if weights["version"] != self.weights_version:
                for pid, module in self.modules.items():
                    module.set_state(weights["modules"][pid])
                self.weights_version = weights["version"]
                self._weights_json = None

    def take(self, wait_s: float) -> tuple[tuple | None, list]:
        """The oldest waiting piece (None if none came within `wait_s`) and the finished-episode metrics since the
        last call; drops episodes whose client went silent."""
        with self.lock:
            self._drop_stale()
            if not self.pieces:
                self.piece_ready.wait(wait_s)
            piece = self.pieces.pop(0) if self.pieces else None
            if piece is not None:
                self.backlog_steps -= piece[1]
            finished, self.finished = self.finished, []
            return piece, finished

    def backlogged(self) -> bool:
        """Whether a request that adds steps should wait for training to take some (under the lock)."""
        return self.backlog_steps >= self.max_backlog_steps

    def _drop_stale(self) -> None:
        now = time.monotonic()
        for eid in [e for e, ep in self.episodes.items() if now - ep.last_seen > self.episode_timeout_s]:
            del self.episodes[eid]
            self.count("external/episodes_dropped")

    # -- the verbs (server thread; each under the lock) ----------------------------------------
    def _episode(self, eid: str) -> _Episode:
        ep = self.episodes.get(eid)
        if ep is None:
            raise RequestError(404, f"unknown episode id '{eid}' (never started, already ended, or dropped after "
                                    f"{self.episode_timeout_s:g} s without requests)")
        ep.last_seen = time.monotonic()
        return ep
    def start_episode(self) -> str:
        if len(self.episodes) >= self.max_episodes:
            self._drop_stale()  # a client that died frees its episodes' places first
        if len(self.episodes) >= self.max_episodes:
            raise RequestError(429, f"{len(self.episodes)} episodes are open, the most this server keeps (max_episodes="
                                    f"{self.max_episodes}): end episodes before starting more (episodes without a "
                                    f"request for {self.episode_timeout_s:g} s are dropped)")
        ep = _Episode(self._next_number)
        self._next_number += 1
        self.episodes[ep.id] = ep
        self.count("external/episodes_started")
        return ep.id

    def _forward(self, obs: dict[str, np.ndarray]) -> dict[str, tuple]:
        """agent -> (action, logp, value) from one forward pass per policy."""
        out = {}
        by_policy: dict[str, list[str]] = {}
        for agent in obs:
            by_policy.setdefault(self.policy_of[agent], []).append(agent)
        for pid, agents in by_policy.items():
            act, logp, vf = sample_actions(self.modules[pid], np.stack([obs[a] for a in agents]), self.rng)
            vf = vf if vf is not None else np.zeros(len(agents), np.float32)
            for i, a in enumerate(agents):
                out[a] = (act[i], float(logp[i]), float(vf[i]))
        return out

    def _values(self, obs: dict[str, np.ndarray]) -> dict[str, float]:
        return {a: v for a, (_, _, v) in self._forward(obs).items()}

    def get_action(self, eid: str, body) -> dict:
        ep = self._episode(eid)
        obs = self._obs(body)
        acted = self._forward(obs)
        self._keep_step(ep, obs, acted, self.weights_version)
        self.count("external/actions", len(acted))
        return {"actions": {agent: action_to_json(act, self.discrete[self.policy_of[agent]]) for agent, (act, _, _) in acted.items()}}

    def _keep_step(self, ep: _Episode, obs: dict, acted: dict, version: int) -> None:
        """One step's rows: cut the episode first when a fragment's worth waits (bootstrapped from `obs`)."""
        if any(len(r["obs"]) >= self.fragment for r in ep.rows.values()):
            self._emit(ep, next_obs=obs, end=None)
        for agent, (act, logp, vf) in acted.items():
            rows = ep.rows.setdefault(agent, {k: [] for k in ("obs", "actions", "logp", "vf", "rewards", "t")})
            t = ep.t.get(agent, 0)
            for key, value in (("obs", obs[agent]), ("actions", act), ("logp", logp), ("vf", vf), ("rewards", 0.0), ("t", t)):
                rows[key].append(value)
            ep.t[agent] = t + 1
        ep.versions.add(int(version))
        ep.length += 1

    def weights(self, version) -> dict:
        """`GET /weights`: the newest weights and module specs, or 'unchanged' when the client has them."""

        if version is not None and str(version) == str(self.weights_version):
            return {"version": self.weights_version, "unchanged": True}
        missing = [pid for pid, spec in self.module_specs.items() if spec is None]
        if missing:
            raise RequestError(400, f"policies {missing} have spaces without a wire form (Box, Discrete, MultiDiscrete, "
                                    "MultiBinary have one): use inference on the server")
        if self._weights_json is None:
            self._weights_json = {
                "version": self.weights_version, "agents": dict(self.policy_of),
                "policies": {pid: {"module": self.module_specs[pid], "weights": tensors_to_json(module.get_state())}
                             for pid, module in self.modules.items()},
            }
        self.count("external/weights_sent")
        return self._weights_json

    def add_steps(self, eid: str, body) -> dict:
        """`POST /episodes/<id>/steps`: steps a client acted itself (`inference: local`), checked whole, then kept."""
        ep = self._episode(eid)
        steps = body.get("steps") if isinstance(body, dict) else None
        version = body.get("weights_version") if isinstance(body, dict) else None
        if not isinstance(steps, list) or not steps or isinstance(version, bool) or not isinstance(version, int):
            raise RequestError(400, "body must be a JSON object with 'weights_version': int and 'steps': "
                                    "[{obs, actions, logp, vf, rewards}, ...]")
        checked = [self._checked_step(i, step) for i, step in enumerate(steps)]
        for obs, acted, rewards in checked:
            self._keep_step(ep, obs, acted, version)
            for agent, r in rewards.items():
                ep.rows[agent]["rewards"][-1] += r
                ep.agent_returns[agent] = ep.agent_returns.get(agent, 0.0) + r
        self.count("external/local_steps", len(checked))
        self.count("external/actions", sum(len(a) for _, a, _ in checked))
        return {"ok": True}
    def log_returns(self, eid: str, body) -> dict:
        ep = self._episode(eid)
        rewards = body.get("rewards") if isinstance(body, dict) else None
        if not isinstance(rewards, dict):
            raise RequestError(400, "body must be a JSON object with 'rewards': {agent id: float}")
        unknown = [a for a in rewards if a not in self.agent_index]
        if unknown:
            raise RequestError(400, f"unknown agent id(s) {unknown}; this env's agents: {self.possible_agents}")
        checked = {}
        for agent, r in rewards.items():
            if isinstance(r, bool) or not isinstance(r, (int, float)) or not math.isfinite(r):
                raise RequestError(400, f"reward of '{agent}' must be a finite number, got {r!r}")
            if agent not in ep.rows or not ep.rows[agent]["rewards"]:
                raise RequestError(400, f"agent '{agent}' has not acted in episode '{eid}': no action to credit the reward to")
            checked[agent] = float(r)
        for agent, r in checked.items():
            ep.rows[agent]["rewards"][-1] += r
            ep.agent_returns[agent] = ep.agent_returns.get(agent, 0.0) + r
        return {"ok": True}

    def end_episode(self, eid: str, body) -> dict:
        ep = self._episode(eid)
        truncated = bool(body.get("truncated", False)) if isinstance(body, dict) else False
        obs = self._obs(body) if isinstance(body, dict) and body.get("obs") else {}
        del self.episodes[eid]
        self._emit(ep, next_obs=obs, end="truncated" if truncated else "terminated")
        returns = dict(ep.agent_returns)
        policy_returns: dict[str, float] = {}
        for agent, r in returns.items():
            policy_returns[self.policy_of[agent]] = policy_returns.get(self.policy_of[agent], 0.0) + r
        self.finished.append({"episode_id": ep.number, "return": float(sum(returns.values())), "length": ep.length,
                              "policy_returns": policy_returns, "agent_returns": returns,
                              "policy_of": {a: self.policy_of[a] for a in returns}})
        self.count("external/episodes_completed")
        return {"ok": True}

    def _emit(self, ep: _Episode, next_obs: dict, end: str | None) -> None:
        """Queues the episode's rows so far as one piece per policy; `end`: None (a cut), terminated, truncated."""
        bootstrap = self._values(next_obs) if next_obs and end != "terminated" else {}
        per_policy: dict[str, list[dict]] = {}
        steps = 0
        for agent, rows in ep.rows.items():
            n = len(rows["obs"])
            if not n:
                continue
            steps = max(steps, n)
            pid = self.policy_of[agent]
            obs = np.stack(rows["obs"])
            nxt = np.concatenate([obs[1:], next_obs.get(agent, obs[-1])[None]])
            last = np.zeros(n, bool)
            last[-1] = True
            cols = {
                sb.OBS: obs, sb.NEXT_OBS: nxt, sb.ACTIONS: np.stack(rows["actions"]), sb.REWARDS: rows["rewards"],
                sb.TERMINATEDS: last & (end == "terminated"), sb.TRUNCATEDS: last & (end == "truncated"),
                sb.SEGMENT_END: last, sb.EPS_ID: np.full(n, ep.number), sb.AGENT_INDEX: np.full(n, self.agent_index[agent]),
                sb.ENV_INDEX: np.zeros(n), sb.T: rows["t"], sb.ACTION_LOGP: rows["logp"],
            }
            if self.values[pid]:
                cols[sb.VF_PREDS] = rows["vf"]
                own = rows["vf"][-1]  # no observation reached (the agent left): its own value
                cols[sb.BOOTSTRAP_VALUE] = np.where(last, bootstrap.get(agent, own) if end != "terminated" else 0.0, 0.0)
            per_policy.setdefault(pid, []).append(assemble(self.columns[pid], cols))  # the schema's dtypes, checked
            for key in rows:
                rows[key] = []
        if per_policy:
            batches = {pid: SampleBatch.concat([SampleBatch(c) for c in parts]) for pid, parts in per_policy.items()}
            self.pieces.append((batches, steps, set(ep.versions)))
            self.backlog_steps += steps
            self.piece_ready.notify_all()
        ep.versions = set()
