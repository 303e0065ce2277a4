"""The policy server's HTTP layer: an aiohttp app that routes the wire format's requests to the server's verbs,
checks the token, answers refusals as {"error": ...} with their status, and serves in a thread of its own.

Its own module because HTTP is a job apart from what the verbs do (`marl.external.server`): the verbs take
and return plain data under the server's lock, and this layer is the only one that knows aiohttp.
`ExperienceServer` inherits `HttpServing`.
"""

from __future__ import annotations

import asyncio
import hmac
import threading
import time
from typing import Self

from marl.errors import ConfigError
from marl.external.request_checks import RequestError

BACKLOG_WAIT_S = 20.0  # the longest a request waits for a backlog to shrink: below the client's 30 s HTTP timeout
BACKLOG_POLL_S = 0.002


class HttpServing:
    """`start`, `end` and `stop` of `ExperienceServer` (mixed in; serves its verbs, counters and lock)."""

    def _app(self):
        from aiohttp import web

        server = self

        @web.middleware
        async def guard(request, handler):
            try:
                if server.ended is not None and request.path != "/stats":
                    with server.lock:
                        server.count("external/refused/503")
                    return web.json_response({"error": f"training has ended: {server.ended}; this server takes no more "
                                                       "requests and exits shortly", "ended": server.ended}, status=503)
                if server.token is not None:
                    sent = request.headers.get("Authorization", "")
                    if not hmac.compare_digest(sent.encode(), f"Bearer {server.token}".encode()):
                        raise RequestError(401, "missing or wrong token: send 'Authorization: Bearer <token>'")
                return await handler(request)
            except RequestError as err:
                with server.lock:
                    server.count(f"external/refused/{err.status}")
                return web.json_response({"error": err.message}, status=err.status)
            except web.HTTPException as err:  # 413 (body over the limit), 404 (no such route), 405
                with server.lock:
                    server.count(f"external/refused/{err.status}")
                return web.json_response({"error": f"{err.reason}: {err.text}" if err.status != 413 else
                                          f"request body over the limit of {server.max_body_bytes} bytes"}, status=err.status)

        async def body_of(request):
            if not request.can_read_body:
                return {}
            try:
                return await request.json()
            except web.HTTPException:
                raise
            except Exception:  # invalid JSON or encoding
                raise RequestError(400, "body is not valid JSON") from None

        async def wait_for_backlog():
            """A request that adds steps waits while the backlog is full (the module docstring of the server)."""
            for polls in range(int(BACKLOG_WAIT_S / BACKLOG_POLL_S)):  # counted, not clocked: tests patch `time`
                with server.lock:
                    if server.ended is not None:
                        raise RequestError(503, f"training has ended: {server.ended}")
                    if not server.backlogged():
                        return
                    if not polls:
                        server.count("external/backlog_waits")
                await asyncio.sleep(BACKLOG_POLL_S)

        def verb(method, adds_steps: bool = False):
            async def handle(request):
                body = await body_of(request)
                eid = request.match_info.get("eid")
                if adds_steps:
                    await wait_for_backlog()
                with server.lock:
                    server.count("external/requests")
                    result = method(eid, body) if eid is not None else method()
                return web.json_response(result if isinstance(result, dict) else {"episode_id": result})
            return handle

        async def stats(request):
            with server.lock:
                return web.json_response({**server.counters, "weights_version": server.weights_version,
                                          "open_episodes": len(server.episodes), "ended": server.ended})

        app = web.Application(middlewares=[guard], client_max_size=self.max_body_bytes)
        app.router.add_post("/episodes", verb(lambda: server.start_episode()))
        app.router.add_post("/episodes/{eid}/action", verb(self.get_action, adds_steps=True))
        app.router.add_post("/episodes/{eid}/rewards", verb(self.log_returns))
        app.router.add_post("/episodes/{eid}/end", verb(self.end_episode))
        app.router.add_post("/episodes/{eid}/steps", verb(self.add_steps, adds_steps=True))
        app.router.add_get("/stats", stats)

        async def weights(request):
            with server.lock:
                server.count("external/requests")
                return web.json_response(server.weights(request.query.get("version")))

        app.router.add_get("/weights", weights)
        return app

    def start(self) -> Self:
        """Serves in a thread of its own; returns once listening (`self.port` is the bound port)."""
        from aiohttp import web

        ready, failure = threading.Event(), []

        def run():
            loop = self._loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            try:
                self._runner = web.AppRunner(self._app(), access_log=None)
                loop.run_until_complete(self._runner.setup())
                site = web.TCPSite(self._runner, self.host, self.port)
                loop.run_until_complete(site.start())
                self.port = site._server.sockets[0].getsockname()[1]
            except Exception as err:  # port taken, bad host: reported to the caller
                failure.append(err)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self._runner.cleanup())
            loop.close()

        self._thread = threading.Thread(target=run, name="marl-policy-server", daemon=True)
        self._thread.start()
        ready.wait()
        if failure:
            raise ConfigError(f"cannot serve on {self.host}:{self.port}: {failure[0]}")
        if self.on_listening is not None:
            self.on_listening(self)
        return self

    def end(self, reason: str) -> None:
        """Training has ended: requests in progress finish (they hold the lock), new ones get 503 with `reason`
        for `end_grace_s` seconds, so clients learn why instead of meeting a closed port."""
        if self._thread is None:
            return
        with self.lock:
            self.ended = str(reason)
        if self.end_grace_s > 0:
            try:
                time.sleep(self.end_grace_s)
            except KeyboardInterrupt:  # Ctrl-C during the grace period: stop now, still releasing everything
                pass

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
            self._loop = self._thread = None
