"""External simulators: `marl serve SCENARIO.yaml` trains from the experience `PolicyClient`s send."""

from marl.external.client import PolicyClient, PolicyServerError

__all__ = ["PolicyClient", "PolicyServerError"]
