"""External simulators: `marl serve SCENARIO.yaml` trains from the experience `PolicyClient`s send."""

from marl.external.client import PolicyClient, PolicyServerError, PolicyServerUnavailable

__all__ = ["PolicyClient", "PolicyServerError", "PolicyServerUnavailable"]
