"""PolicyClient: an external simulator's side of `marl serve` (the wire format: `marl.external.server`).

    client = PolicyClient("http://127.0.0.1:9900", token=None)
    eid = client.start_episode()
    actions = client.get_action(eid, {"agent_0": obs0, "agent_1": obs1})
    client.log_returns(eid, {"agent_0": 0.5, "agent_1": -0.1})
    client.end_episode(eid, final_obs_dict, truncated=True)

Observations are lists or arrays of numbers (flattened); actions come back as
ints (Discrete) or lists of floats (Box). An error response raises
`PolicyServerError` with the server's message.
"""

from __future__ import annotations

import os

import numpy as np


class PolicyServerError(RuntimeError):
    def __init__(self, status: int, message: str):
        super().__init__(f"policy server answered {status}: {message}")
        self.status, self.message = status, message


def _plain(d: dict) -> dict:
    return {str(k): (np.asarray(v, dtype=np.float64).reshape(-1).tolist() if not np.isscalar(v) else float(v)) for k, v in d.items()}


class PolicyClient:
    def __init__(self, address: str = "http://127.0.0.1:9900", token: str | None = None, timeout_s: float = 30.0):
        import httpx

        self.address = address.rstrip("/")
        token = token if token is not None else os.environ.get("MARL_SERVE_TOKEN")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(base_url=self.address, headers=headers, timeout=timeout_s)

    def _post(self, path: str, body: dict) -> dict:
        response = self._http.post(path, json=body)
        data = response.json() if response.headers.get("content-type", "").startswith("application/json") else {}
        if response.status_code >= 400:
            raise PolicyServerError(response.status_code, data.get("error", response.text))
        return data

    def start_episode(self) -> str:
        return self._post("/episodes", {})["episode_id"]

    def get_action(self, episode_id: str, obs: dict) -> dict:
        return self._post(f"/episodes/{episode_id}/action", {"obs": _plain(obs)})["actions"]

    def log_returns(self, episode_id: str, rewards: dict) -> None:
        self._post(f"/episodes/{episode_id}/rewards", {"rewards": {str(k): float(v) for k, v in rewards.items()}})

    def end_episode(self, episode_id: str, obs: dict | None = None, truncated: bool = False) -> None:
        self._post(f"/episodes/{episode_id}/end", {"obs": _plain(obs or {}), "truncated": bool(truncated)})

    def stats(self) -> dict:
        response = self._http.get("/stats")
        if response.status_code >= 400:
            raise PolicyServerError(response.status_code, response.json().get("error", response.text))
        return response.json()

    def close(self) -> None:
        self._http.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
