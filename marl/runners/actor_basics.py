"""What every runner answers as a Ray actor, apart from sampling: liveness, process and node."""

from __future__ import annotations

import os


class ActorBasics:
    def ping(self) -> str:
        return "ok"

    def getpid(self) -> int:
        return os.getpid()

    def node_id(self) -> str:
        """The Ray node this runner lives on ('local' outside Ray): shows how runners spread over a cluster."""
        import ray

        return ray.get_runtime_context().get_node_id() if ray.is_initialized() else "local"
