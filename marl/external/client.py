"""PolicyClient: an external simulator's side of `marl serve` (the wire format: `marl.external.server`).

    client = PolicyClient("http://127.0.0.1:9900", token=None)
    eid = client.start_episode()
    actions = client.get_action(eid, {"agent_0": obs0, "agent_1": obs1})
    client.log_returns(eid, {"agent_0": 0.5, "agent_1": -0.1})
    client.end_episode(eid, final_obs_dict, truncated=True)

Observations are lists or arrays of numbers (flattened); actions come back as
ints (Discrete) or lists of floats (Box). An error response raises
`PolicyServerError` with the server's message.

`inference="local"` acts here, with no request per step: the client pulls the
policies' weights and module specs (`GET /weights`) at most every
`update_interval_s` seconds, rebuilds each module with the server's own module
code, samples actions from it, and sends the steps it played (observations,
actions, their log-probabilities and value estimates, rewards, the weights
version) with `POST /episodes/<id>/steps` every `send_every` steps or
`send_every_s` seconds, at the episode's end, and before acting with newer weights. The server trains on them
like on its own: PPO's ratio divides by the log-probabilities sent.

`wait_s=N` waits up to N seconds for a server that is not up yet (a client started before
`marl serve` is listening): it retries with backoff, then raises `PolicyServerUnavailable`.
A server that cannot be reached later raises the same error, in one line; a server whose
training has ended answers 503 (`PolicyServerError.status`) with the reason.
"""

from __future__ import annotations

import os
import time

import numpy as np
from marl.data.spaces_json import space_from_json
from marl.external.wire import action_to_json, tensors_from_json
from marl.inference import Policy
from marl.modules import build_module
import torch


class PolicyServerError(RuntimeError):
    def __init__(self, status: int, message: str):
        super().__init__(f"policy server answered {status}: {message}")
        self.status, self.message = status, message


class PolicyServerUnavailable(ConnectionError):
    """No policy server answers at the address (not started yet, exited, or the address is wrong)."""


def _plain(d: dict) -> dict:
    return {str(k): (np.asarray(v, dtype=np.float64).reshape(-1).tolist() if not np.isscalar(v) else float(v)) for k, v in d.items()}


class PolicyClient:
    def __init__(self, address: str = "http://127.0.0.1:9900", token: str | None = None, timeout_s: float = 30.0,
                 inference: str = "remote", update_interval_s: float = 10.0, send_every: int = 64, seed: int = 0,
                 send_every_s: float = 5.0, wait_s: float = 0.0):
        import httpx

        if inference not in ("remote", "local"):
            raise ValueError(f"inference must be 'remote' (on the server) or 'local' (here), got {inference!r}")
        if update_interval_s < 0 or send_every < 1 or send_every_s <= 0 or wait_s < 0:
            raise ValueError("update_interval_s must be >= 0, send_every >= 1, send_every_s > 0 and wait_s >= 0")
        self.address = address.rstrip("/")
        token = token if token is not None else os.environ.get("MARL_SERVE_TOKEN")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(base_url=self.address, headers=headers, timeout=timeout_s)
        self.inference, self.update_interval_s, self.send_every = inference, float(update_interval_s), int(send_every)
        self.send_every_s = float(send_every_s)  # also sent this often: the server drops episodes silent too long
        self._sent_at: dict[str, float] = {}
        self.weights_version: int | None = None  # local inference: the version acting here
        self.policies: dict[str, Policy] = {}  # local inference: each policy's module, acting here
        self._policy_of: dict[str, str] = {}
        self._discrete: dict[str, bool] = {}
        self._pulled_at = -float("inf")
        self._steps: dict[str, list[dict]] = {}  # episode -> steps played, not sent yet
        self._step_version: dict[str, int] = {}
        self._rng = None
        self._seed = int(seed)
        if wait_s > 0:
            self.wait_for_server(wait_s)

    def wait_for_server(self, wait_s: float) -> None:
        """Retries `GET /stats` on connection errors, with backoff (0.05 s doubling to 1 s), for up to `wait_s`
        seconds; any answer (even 401) means a server is listening."""
        import httpx

        deadline = time.monotonic() + float(wait_s)
        delay = 0.05
        while True:
            try:
                self._http.get("/stats")
                return
            except (httpx.ConnectError, httpx.ConnectTimeout, httpx.RemoteProtocolError) as err:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise PolicyServerUnavailable(
                        f"no policy server answered at {self.address} within {wait_s:g} s ({type(err).__name__}: "
                        f"{err}): is `marl serve` running there?"
                    ) from None
                time.sleep(min(delay, left))
                delay = min(delay * 2, 1.0)

    def _request(self, method: str, path: str, **kw):
        import httpx

        try:
            return self._http.request(method, path, **kw)
        except (httpx.ConnectError, httpx.RemoteProtocolError) as err:
            raise PolicyServerUnavailable(
                f"cannot reach the policy server at {self.address} ({type(err).__name__}: {err}): it has not started "
                "yet (PolicyClient(wait_s=...) waits for it) or it has exited"
            ) from None

    def _post(self, path: str, body: dict) -> dict:
        return self._answer(self._request("POST", path, json=body))

    @staticmethod
    def _answer(response) -> dict:
        data = response.json() if response.headers.get("content-type", "").startswith("application/json") else {}
        if response.status_code >= 400:
            raise PolicyServerError(response.status_code, data.get("error", response.text))
        return data

    def start_episode(self) -> str:
        eid = self._post("/episodes", {})["episode_id"]
        if self.inference == "local":
            self._steps[eid] = []
            self._sent_at[eid] = time.monotonic()
        return eid

    def get_action(self, episode_id: str, obs: dict) -> dict:
        if self.inference == "remote":
            return self._post(f"/episodes/{episode_id}/action", {"obs": _plain(obs)})["actions"]
        if episode_id not in self._steps:
            raise PolicyServerError(404, f"unknown episode id '{episode_id}' (not started by this client, or ended)")
        self.update_weights()
        steps = self._steps[episode_id]
        due = time.monotonic() - self._sent_at[episode_id] >= self.send_every_s
        if steps and (due or len(steps) >= self.send_every or self._step_version[episode_id] != self.weights_version):
            self._send(episode_id)  # every step sent is complete (its rewards came in before this call)
        return self._act_locally(episode_id, obs)

    def _act_locally(self, episode_id: str, obs: dict) -> dict:
        plain = _plain(obs)
        unknown = [a for a in plain if a not in self._policy_of]
        if unknown:
            raise PolicyServerError(400, f"unknown agent id(s) {unknown}; this env's agents: {sorted(self._policy_of)}")
        by_policy: dict[str, list[str]] = {}
        for agent in plain:
            by_policy.setdefault(self._policy_of[agent], []).append(agent)
        step = {"obs": plain, "actions": {}, "logp": {}, "vf": {}, "rewards": {}}
        for pid, agents in by_policy.items():
            # the pass `marl.load_policy` and `Algorithm.compute_actions` run (no connectors: `marl serve` has none)
            acted = self.policies[pid].act([plain[a] for a in agents], agents, explore=True)
            for i, agent in enumerate(agents):
                step["actions"][agent] = action_to_json(acted.module_actions[i], self._discrete[pid])
                step["logp"][agent] = float(acted.logp[i])
                if acted.vf is not None:
                    step["vf"][agent] = float(acted.vf[i])
        self._steps[episode_id].append(step)
        self._step_version[episode_id] = self.weights_version
        return dict(step["actions"])

    def update_weights(self, force: bool = False) -> bool:
        """Local inference: pulls the newest weights when `update_interval_s` has passed; True if they changed."""
        if not force and time.monotonic() - self._pulled_at < self.update_interval_s:
            return False


        have = "" if self.weights_version is None else f"?version={self.weights_version}"
        data = self._answer(self._request("GET", f"/weights{have}"))
        self._pulled_at = time.monotonic()
        if data.get("unchanged"):
            return False
        if self._rng is None:
            self._rng = torch.Generator().manual_seed(self._seed)
        for pid, policy in data["policies"].items():
            if pid not in self.policies:
                spec = policy["module"]
                action_space = space_from_json(spec["action_space"])
                module = build_module(spec["module_class"], space_from_json(spec["observation_space"]), action_space, spec["model"])
                self.policies[pid] = Policy(module, policy_id=pid, generator=self._rng)
                self._discrete[pid] = action_space.shape == ()
            self.policies[pid].set_weights(tensors_from_json(policy["weights"]))
        self._policy_of = dict(data["agents"])
        self.weights_version = int(data["version"])
        return True

    def _send(self, episode_id: str) -> None:
        steps = self._steps.get(episode_id)
        if steps:
            self._steps[episode_id] = []
            self._sent_at[episode_id] = time.monotonic()
            self._post(f"/episodes/{episode_id}/steps", {"weights_version": self._step_version[episode_id], "steps": steps})

    def log_returns(self, episode_id: str, rewards: dict) -> None:
        rewards = {str(k): float(v) for k, v in rewards.items()}
        if self.inference == "remote":
            self._post(f"/episodes/{episode_id}/rewards", {"rewards": rewards})
            return
        steps = self._steps.get(episode_id)
        if steps is None:
            raise PolicyServerError(404, f"unknown episode id '{episode_id}' (not started by this client, or ended)")
        if not steps:
            raise PolicyServerError(400, f"no action in episode '{episode_id}' since the last send to credit the rewards to")
        missing = [a for a in rewards if a not in steps[-1]["actions"]]
        if missing:
            raise PolicyServerError(400, f"agent(s) {missing} did not act in the last step: no action to credit the reward to")
        last = steps[-1]["rewards"]
        for agent, r in rewards.items():
            last[agent] = last.get(agent, 0.0) + r

    def end_episode(self, episode_id: str, obs: dict | None = None, truncated: bool = False) -> None:
        if self.inference == "local":
            self._send(episode_id)
            for table in (self._steps, self._step_version, self._sent_at):
                table.pop(episode_id, None)
        self._post(f"/episodes/{episode_id}/end", {"obs": _plain(obs or {}), "truncated": bool(truncated)})

    def stats(self) -> dict:
        response = self._request("GET", "/stats")
        if response.status_code >= 400:
            raise PolicyServerError(response.status_code, response.json().get("error", response.text))
        return response.json()

    def close(self) -> None:
        self._http.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
