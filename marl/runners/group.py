"""The env runners of a run: one in-process runner, or N Ray actors (or, given `runner_cls`, N actors of another
class whose calls the group spreads and retries the same way: PSRO's match players, `map_calls`).

Remote work is Ray actors; waiting is `ray.get`/`ray.wait`; weights travel
through the object store, put once per version and shared by all runners.

A runner that fails -- its actor process died, or its env raised
(`EnvStepError`) -- is recreated with fresh seeds (its incarnation counts
up), given the current weights and connector state before its samples are
used, and asked again; the iteration goes on. Failures are counted in
`restarts`; past `env_runners.max_runner_restarts` the run stops with a
`RunnerFailedError` naming the runner and the last failure. An env that
returns malformed output (`EnvOutputError`) or a bad policy mapping is a bug,
not a transient fault: it is raised at once.
"""

from __future__ import annotations

import logging

from marl.envs import EnvError, EnvStepError
from marl.modules.rl_module import as_host_arrays
from marl.policies import MappingError
from marl.runners.env_runner import EnvRunner
from marl.execution.user_code import actor_options, import_hint
from marl.runners.runner_choice import runner_class

log = logging.getLogger(__name__)


class RunnerFailedError(EnvError):
    """Env runners failed more often than `env_runners.max_runner_restarts` allows."""


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def _transient(err: BaseException) -> tuple[str, BaseException]:
    """Why a runner failed, for a restart, where its call can be asked again of a replacement (its process died, or
    its env raised); an env or a policy mapping that is wrong is raised at once, one clear message, no retry."""
    import ray

    if isinstance(err, ray.exceptions.RayActorError):
        return f"its process died: {_first_line(err)}", err
    cause = getattr(err, "cause", None)
    if isinstance(cause, EnvStepError):
        return f"its env raised: {_first_line(cause)}", cause
    if isinstance(cause, (EnvError, MappingError)):
        raise cause from None
    raise err


class EnvRunnerGroup:
    def __init__(self, config, first_index: int = 0, runner_cls: type | None = None):
        """`first_index` offsets the runners' worker indices (evaluation runners get their own seeds); `runner_cls`:
        the actors' class where it is not the chooser's runner (`marl.runners.matches.MatchPlayer`)."""
        self.config = config = config.as_built()
        self.first_index = first_index
        self.num_remote = config.env_runners_cfg.num_env_runners
        self.is_local = self.num_remote == 0
        # one of the four runner classes (`marl.runners.runner_choice`) unless the caller names another
        self._runner_cls = runner_cls or runner_class(config)
        self.local: EnvRunner | None = self._runner_cls(config, first_index) if self.is_local else None
        self.remote: list = []
        self.restarts = 0
        self.max_restarts = config.env_runners_cfg.max_runner_restarts
        self._incarnations = [0] * max(1, self.num_remote)  # per runner slot: restarts get fresh seeds
        self._weights_ref = None  # latest weights in the object store (for restarts)
        self._last_weights = None  # the same, for the in-process runner
        self._mapping_state = None  # the latest state a stateful mapping was sent (a league's matchmaking table)
        self._frozen = None  # the policies last set to act as frozen population members (a replacement gets them)
        self._acks: dict = {}  # set_weights calls in flight -> (runner index, actor it was sent to)
        self.in_flight: dict = {}  # map_calls' calls in flight -> (runner index, call index); tests kill one mid-call
        self.versions = [0] * self.num_remote  # weights version last sent to each runner (it acts with it next)
        # Env steps each runner slot has delivered: a replacement goes on with its exploration schedule from there.
        self.steps_sampled = [0] * max(1, self.num_remote)
        if not self.is_local:
            import ray

            options = actor_options(config)  # the user's modules, shipped through runtime_env
            self._actor_cls = ray.remote(num_cpus=config.env_runners_cfg.num_cpus_per_env_runner, **options)(self._runner_cls)
            self.remote = [self._make_actor(i) for i in range(self.num_remote)]
            try:
                ray.get([a.ping.remote() for a in self.remote])  # fail here, not mid-iteration
            except ray.exceptions.RayActorError as err:
                hint = import_hint(err, "an env runner (a Ray worker)")
                if hint is None:
                    raise
                self.stop()
                raise hint from None

    def _make_actor(self, index: int):
        import ray.util

        options = {"max_concurrency": 1}
        # On a cluster, spread runners over the nodes; inside a placement group (a Tune trial)
        # leave them to the group's bundles, which an explicit strategy would bypass.
        if ray.util.get_current_placement_group() is None:
            options["scheduling_strategy"] = "SPREAD"
        return self._actor_cls.options(**options).remote(self.config, self.first_index + index + 1, self._incarnations[index])

    # -- calls --------------------------------------------------------------
    def call_all(self, method: str, *args) -> list:
        if self.is_local:
            return [self.call_local(method, *args)]
        refs = [self.call_remote(index, method, *args) for index in range(self.num_remote)]
        return [self.get_remote(index, ref, method, *args) for index, ref in enumerate(refs)]

    def call_local(self, method: str, *args):
        """A call on the in-process runner; one whose env raised is rebuilt and asked again."""
        while True:
            try:
                return self._counted(0, method, getattr(self.local, method)(*args))
            except EnvStepError as err:
                self._count_failure(self.first_index, f"its env raised: {_first_line(err)}", err)
                self.local.stop()
                self._incarnations[0] += 1
                self.local = self._runner_cls(self.config, self.first_index, self._incarnations[0])
                self._catch_up(lambda name, *args: getattr(self.local, name)(*args), self._last_weights, 0)

    def call_remote(self, index: int, method: str, *args):
        return getattr(self.remote[index], method).remote(*args)

    def get_remote(self, index: int, ref, method: str, *args):
        """The result of `call_remote`; a runner that died or whose env raised is restarted and asked again."""
        import ray

        while True:
            try:
                return self._counted(index, method, ray.get(ref))
            except (ray.exceptions.RayActorError, ray.exceptions.RayTaskError) as err:
                self._restart(index, *_transient(err))
            ref = getattr(self.remote[index], method).remote(*args)

    def map_calls(self, method: str, calls: list[tuple]) -> list:
        """`method(*args)` for each `args` of `calls`, spread over the runners as each frees up; a call whose runner
        failed is asked again, whole, of its replacement, so each call must be a pure function of its arguments
        (a match: `marl.runners.matches`). The results in the order of `calls`."""
        if self.is_local:
            return [self.call_local(method, *args) for args in calls]
        import ray

        results, pending, idle = [None] * len(calls), list(reversed(range(len(calls)))), list(range(self.num_remote))
        self.in_flight = {}
        while pending or self.in_flight:
            while pending and idle:
                index, k = idle.pop(0), pending.pop()
                self.in_flight[self.call_remote(index, method, *calls[k])] = (index, k)
            ref = ray.wait(list(self.in_flight), num_returns=1)[0][0]
            index, k = self.in_flight.pop(ref)
            try:
                results[k] = ray.get(ref)
            except (ray.exceptions.RayActorError, ray.exceptions.RayTaskError) as err:
                self._restart(index, *_transient(err))
                pending.append(k)
            idle.append(index)
        return results

    def _counted(self, index: int, method: str, result):
        if method == "sample":
            self.steps_sampled[index] += result.env_steps
        return result

    def _count_failure(self, worker_index: int, reason: str, err: BaseException) -> None:
        self.restarts += 1
        if self.restarts > self.max_restarts:
            raise RunnerFailedError(
                f"env runner {worker_index} failed ({reason}); {self.restarts} runner failures exceed "
                f"env_runners.max_runner_restarts={self.max_restarts}"
            ) from err
        log.warning("env runner %d failed (%s); restarting it", worker_index, reason)

    def _restart(self, index: int, reason: str, err: BaseException) -> None:
        """A new actor in slot `index`, holding the current weights before anything else is asked of it."""
        import ray

        while True:
            self._count_failure(self.first_index + index + 1, reason, err)
            try:
                ray.kill(self.remote[index])  # an actor whose env raised is still alive
            except Exception:
                pass
            self._incarnations[index] += 1
            self.remote[index] = self._make_actor(index)
            self.versions[index] = 0
            try:
                call = lambda name, *args: ray.get(getattr(self.remote[index], name).remote(*args))  # noqa: E731
                self.versions[index] = self._catch_up(call, self._weights_ref, index)
                return
            except ray.exceptions.RayActorError as again:  # the replacement died too (e.g. its env cannot be made)
                reason, err = f"its replacement died: {_first_line(again)}", again

    def _catch_up(self, call, weights, index: int) -> int:
        """Brings the fresh runner in slot `index` to where the others are (`call(method, *args)` asks it): weights,
        the mapping's state, frozen policies, env steps sampled. Returns its weights version (0: none sent yet)."""
        version = 0 if weights is None else call("set_weights", weights)
        if self._mapping_state is not None:
            call("set_mapping_state", self._mapping_state)
        if self._frozen is not None:
            call("set_frozen_policies", self._frozen)
        if self.steps_sampled[index]:  # (a fresh runner starts at 0; a match player samples nothing)
            call("set_steps_sampled", self.steps_sampled[index])
        return version

    def node_ids(self) -> list[str]:
        """The Ray node id of each runner (['local'] when sampling in-process)."""
        return self.call_all("node_id")

    # -- weights ------------------------------------------------------------
    def sync_weights(self, weights: dict, indices: list[int] | None = None) -> None:
        """Sends weights to all runners (or `indices`); a no-op for runners already at this version. The modules'
        weights may be tensors on the learner's device: an in-process runner loads them from there, runner actors
        get NumPy."""
        if self.is_local:
            self._last_weights = weights
            self.local.set_weights(weights)
            return
        import ray

        self._check_acks()
        # One copy in the object store, read by every runner; as NumPy (tensors handed over on a device stop here).
        self._weights_ref = ray.put({**weights, "modules": {pid: as_host_arrays(w) for pid, w in weights["modules"].items()}})
        targets = range(self.num_remote) if indices is None else indices
        # Not waited for: a runner busy sampling applies the weights right after, before any later
        # call (actor calls run in order), and the driver goes on meanwhile.
        for i in targets:
            actor = self.remote[i]
            self._acks[actor.set_weights.remote(self._weights_ref)] = (i, actor)
            self.versions[i] = weights["version"]

    def _check_acks(self) -> None:
        """Surfaces failures of earlier weight syncs that have finished (restarting dead runners)."""
        import ray

        if not self._acks:
            return
        done, _ = ray.wait(list(self._acks), num_returns=len(self._acks), timeout=0)
        for ref in done:
            index, actor = self._acks.pop(ref)
            try:
                ray.get(ref)
            except ray.exceptions.RayActorError as err:
                if self.remote[index] is actor:  # not yet replaced by a failed sample call
                    self._restart(index, f"its process died: {_first_line(err)}", err)

    def set_mapping_state(self, state) -> None:
        """Sends every runner the policy mapping's state; a restarted runner gets it too."""
        self._mapping_state = state
        self.call_all("set_mapping_state", state)

    def set_frozen_policies(self, policy_ids) -> None:
        """Every runner's policies that act as frozen population members (`ActorBasics.set_frozen_policies`)."""
        self._frozen = sorted(set(policy_ids))
        self.call_all("set_frozen_policies", self._frozen)

    # -- checkpoints ----------------------------------------------------------
    def get_states(self) -> list[dict]:
        """Each runner's `get_state()`, in runner order."""
        return self.call_all("get_state")

    def set_states(self, states: list[dict]) -> None:
        """Gives runner i the saved state i; runners beyond the saved ones keep their fresh state."""
        for i, state in enumerate(states[: len(self.steps_sampled)]):
            self.steps_sampled[i] = int(state.get("steps_sampled", 0))
        if states and states[0].get("frozen_policies"):  # a replacement runner acts as the restored ones do
            self._frozen = list(states[0]["frozen_policies"])
        if self.is_local:
            if states:
                self.local.set_state(states[0])
            return
        n = min(len(states), self.num_remote)
        refs = [self.call_remote(i, "set_state", states[i]) for i in range(n)]
        for i, ref in enumerate(refs):
            self.get_remote(i, ref, "set_state", states[i])

    def stop(self) -> None:
        if self.local is not None:
            self.local.stop()
        if self.remote:
            import ray

            for actor in self.remote:
                try:
                    ray.kill(actor)
                except Exception:
                    pass
            self.remote = []
