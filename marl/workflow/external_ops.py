"""serve: a source of batches made of external simulators' experience (`marl serve`, `marl.external`).

    serve(host, port) --batch--> concat --> learn --> ... --> report      (the scenario's graph, sample replaced)

Building the node starts the HTTP policy server (`marl.external.server`) in a
thread; each item waits for client experience, then emits each finished piece (an
episode's rows, or a cut of one) as a batch of its own, with the weights versions its rows were acted with. Before waiting
it gives the server the learner's newest weights (inference on the server, and
what `GET /weights` sends clients that act locally). The token comes from the environment variable
named by `token_env` (never from the graph, which config.yaml records).
When the run ends, `end(reason)` has the server answer 503 with the reason for
`end_grace_s` seconds before `close()` stops it; `on_listening` (not a setting:
`marl serve` sets it) is called once the socket is bound.
"""

from __future__ import annotations

import os

from marl.data import MultiAgentBatch
from marl.data.records import BATCH, SampledBatch
from marl.execution import LocalIterator
from marl.execution import metrics as m
from marl.external.server import TOKEN_ENV, ExperienceServer
from marl.workflow.protocol import Operator


class Serve(Operator):
    op_name, consumes, produces = "serve", (), BATCH

    def __init__(self, host: str = "127.0.0.1", port: int = 9900, token_env: str = TOKEN_ENV,
                 max_body_kb: int = 1024, episode_timeout_s: float = 60.0, max_episodes: int = 1000,
                 end_grace_s: float = 5.0, max_backlog_steps: int = 1):
        if not 0 <= int(port) <= 65535:
            raise ValueError(f"serve.port must be in [0, 65535], got {port}")
        if int(max_body_kb) < 1 or float(episode_timeout_s) <= 0:
            raise ValueError("serve.max_body_kb must be >= 1 and serve.episode_timeout_s > 0")
        if int(max_episodes) < 1 or float(end_grace_s) < 0:
            raise ValueError(f"serve.max_episodes must be >= 1 (got {max_episodes}) and serve.end_grace_s >= 0 (got {end_grace_s})")
        if isinstance(max_backlog_steps, bool) or not isinstance(max_backlog_steps, int) or max_backlog_steps < 1:
            raise ValueError(f"serve.max_backlog_steps must be an int >= 1, got {max_backlog_steps!r}")
        self.host, self.port, self.token_env = str(host), int(port), str(token_env)
        self.max_backlog_steps = max_backlog_steps
        self.max_body_kb, self.episode_timeout_s = int(max_body_kb), float(episode_timeout_s)
        self.max_episodes, self.end_grace_s = int(max_episodes), float(end_grace_s)
        self.on_listening = None  # Callable[[ExperienceServer], None]
        self.server = None

    def end(self, reason: str) -> None:
        if self.server is not None:
            self.server.end(reason)

    def close(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None

    def build(self, ctx, inputs):
        self.close()
        self.server = server = ExperienceServer(  # the run's policies and agents, resolved by Algorithm
            ctx.config, ctx.policy_specs, ctx.agents_of, ctx.possible_agents, self.host, self.port, os.environ.get(self.token_env) or None,
            self.max_body_kb * 1024, self.episode_timeout_s, self.max_episodes, self.end_grace_s, self.on_listening,
            self.max_backlog_steps,
        )
        metrics, learners = ctx.metrics, ctx.learners
        server.set_weights(learners.get_weights())  # clients acting locally fetch these before the first pull
        server.start()
        counters, timer = metrics.counters, metrics.timers["serve"]

        def gen():
            finished: list = []  # episodes that ended since the last record
            while True:
                # Each record, as each iteration did: the server acts with the learner's newest weights (skipped
                # when loaded already), its counters are read, silent episodes dropped (in `take`).
                server.set_weights(learners.get_weights())
                with timer.timing():
                    while True:
                        piece, ended = server.take(wait_s=0.02)
                        with server.lock:
                            counters.update(server.counters)
                        finished.extend(ended)
                        if piece is not None:
                            break
                # One record a piece (an episode's rows, or a cut of one), so `concat` cuts each train batch within
                # one piece of its size, and the server's backlog bound (`max_backlog_steps`) counts what training
                # has not taken yet: while the learner trains, clients run at most that far ahead.
                batches, steps, versions = piece
                batch = MultiAgentBatch(batches, steps)
                record = SampledBatch(batch, finished, sorted(versions) or [server.weights_version])
                metrics.episodes.extend(finished)
                finished = []
                counters[m.ENV_STEPS_SAMPLED] += batch.env_steps
                counters[m.AGENT_STEPS_SAMPLED] += batch.agent_steps()
                for pid, n in batch.agent_steps_per_policy().items():
                    counters[f"{m.AGENT_STEPS_SAMPLED}/{pid}"] += n
                yield record

        return LocalIterator(gen, metrics, "serve")
