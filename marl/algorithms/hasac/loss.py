"""HASAC's actor terms (Zhong et al. 2024, "Maximum Entropy Heterogeneous-Agent Reinforcement Learning", ICLR; HARL):
soft actor-critic with a centralised critic, each agent's own actor updated in turn, in a random order each update.

The critics and the temperature are MASAC's (`marl.algorithms.masac.loss`): twin centralised Q(s, a_1..a_n), target

    y = r + gamma (1 - d) ( min_j Q_target_j(s', a') - alpha sum_i log pi_i(a'_i|o'_i) ),   a'_i ~ pi_i(o'_i)

The actors: for a permutation i_1..i_n drawn each update, agent i_m's actor minimises

    J(pi_{i_m}) = E[ alpha log pi_{i_m}(a_{i_m}|o_{i_m}) - min_j Q_j(s, a_{i_1:m-1}, a_{i_m}, a_{i_m+1:n}) ]
    a_{i_1:m-1} ~ the actors of the agents updated before it (their new weights),
    a_{i_m} ~ pi_{i_m} (reparameterised), a_{i_m+1:n} ~ the actors not yet updated

so each agent improves against its predecessors' new policies: HASAC's sequential scheme, under which the
joint soft objective improves monotonically. The learner steps one parameter group per actor in the drawn
order (`HASACParts.update_order`), so sampling every agent's action from the actors as they stand when agent
i_m's loss runs gives exactly those actions. Discrete actions: the expectation over agent i_m's own actions
(discrete SAC), the others' as one-hot samples:

    J(pi_{i_m}) = E[ sum_a pi_{i_m}(a|o) ( alpha log pi_{i_m}(a|o) - min_j Q_j(s, a_{-i_m}, a_{i_m} = a) ) ]

A dead agent (`marl.algorithms.live_agents`) acts with the zero vector, and rows where agent i_m is dead add
nothing to its loss.
"""

from __future__ import annotations

import weakref

import torch

from marl.algorithms.live_agents import live_count, live_masks, only_live
from marl.algorithms.masac.loss import sampled_one_hots
from marl.algorithms.sac import loss as sac
from marl.algorithms.sac.loss import frozen, grouped
from marl.data import sample_batch as sb
from marl.modules.actor_q import apply_net
from marl.modules.squashed import SquashedGaussian


class ActorOutputs:
    """Each agent's raw actor outputs on one minibatch's observations, computed once per weight version of that
    actor instead of once per parameter-group step (n + 1 group losses read them: n actor steps and the
    temperature's). An update steps the groups in HASAC's order (`HASACParts.update_order`) on one minibatch;
    agent k's actor changes only in its own step, right after `actor_loss(..., k)`, so that loss drops k's
    outputs (the next reader recomputes them with the new weights) and every other agent's stay valid. Outputs
    are computed with the graph to their actor's weights where gradients are on, so agent k's own step
    backpropagates through the forward an earlier step made (its weights have not changed since). The values
    are the very forwards the losses made before this cache (same inputs, same weights, same operations):
    the update's numbers are unchanged, bit for bit (benchmarks/speed/offpolicy_update.py checks).
    Anything else that changes an actor's weights in place (`set_weights`, a checkpoint's restore) bumps the
    parameters' version counters, which `_fingerprint` compares, so such outputs are never reused (the learner's
    fused Adam kernel leaves those counters as they are: hence the explicit `stepped`)."""

    def __init__(self):
        self.obs = None
        self.outputs: dict[int, tuple[tuple, torch.Tensor]] = {}  # agent -> (fingerprint, raw outputs [B, out])

    @staticmethod
    def _fingerprint(actor) -> tuple:
        return tuple((p.data_ptr(), p._version) for p in actor.parameters())

    def get(self, module, obs: torch.Tensor, agent: int) -> torch.Tensor:
        """Agent `agent`'s raw outputs [B, out] on obs[:, agent] (obs [B, n, ...]); with the graph to its actor's
        weights when gradients are on."""
        actor = module.actors[agent]
        if torch.compiler.is_compiling():  # (`learners.compile_loss`: traced losses compute their own)
            return apply_net(actor, obs[:, agent])
        if obs is not self.obs:  # another minibatch
            self.obs, self.outputs = obs, {}
        mark = (self._fingerprint(actor), torch.is_grad_enabled())
        kept = self.outputs.get(agent)
        if kept is None or kept[0][0] != mark[0] or (mark[1] and not kept[0][1]):  # (a no-grad forward has no graph)
            kept = self.outputs[agent] = (mark, apply_net(actor, obs[:, agent]))
        return kept[1]

    def stepped(self, agent: int) -> None:
        self.outputs.pop(agent, None)

    def clear(self) -> None:
        self.obs, self.outputs = None, {}


_CACHES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # module -> its ActorOutputs


def actor_outputs(module) -> ActorOutputs:
    cache = _CACHES.get(module)
    if cache is None:
        cache = _CACHES[module] = ActorOutputs()
    return cache


def group_outputs(module, obs: torch.Tensor, cache: ActorOutputs) -> torch.Tensor:
    """Raw outputs [B, n, out] of every agent's actor, detached (what `module.group_actor(obs)` gives)."""
    return torch.stack([cache.get(module, obs, k).detach() for k in range(obs.shape[1])], dim=1)


def _live_mean(x: torch.Tensor, alive_k: torch.Tensor | None) -> torch.Tensor:
    """Mean of per-row `x` [B] over the rows where the agent is alive."""
    if alive_k is None:
        return x.mean()
    return (x * alive_k).sum() / alive_k.sum().clamp(min=1)


def actor_loss(module, batch: dict, cfg, agent: int) -> tuple[torch.Tensor, dict]:
    """J(pi_agent) with every other agent's action drawn from its actor as it stands now (see the module doc)."""
    obs, _, _ = grouped(module, batch)
    cache = actor_outputs(module)
    try:
        return _actor_loss(module, batch, obs, agent, cache)
    finally:
        cache.stepped(agent)  # its step follows: its outputs change


def _actor_loss(module, batch: dict, obs: torch.Tensor, agent: int, cache: ActorOutputs):
    alpha = module.log_alpha.detach().exp()
    alive = live_masks(batch)[0]
    alive_k = None if alive is None else alive[:, agent].float()
    state = batch.get(sb.STATE)
    if module.continuous:
        outputs = group_outputs(module, obs, cache)  # (forwards with graphs: a later step of theirs reuses them)
        with torch.no_grad():  # (every agent's sample is drawn, the agent's own too: the random draws stay the same)
            others, _ = SquashedGaussian(outputs).rsample_with_logp()
        own, logp = SquashedGaussian(cache.get(module, obs, agent)).rsample_with_logp()
        joint = torch.cat([others[:, :agent], own[:, None], others[:, agent + 1:]], dim=1)
        with frozen(module.critic_parameters()):
            q = torch.min(torch.stack(module.q_values(obs, only_live(joint, alive), state=state)), 0).values
        loss = _live_mean(alpha * logp - q, alive_k)
        return loss, {"loss": loss, "logp_mean": _live_mean(logp.detach(), alive_k)}
    outputs = group_outputs(module, obs, cache)
    with torch.no_grad():
        probs_all = torch.log_softmax(outputs, dim=-1).exp()
        others = only_live(sampled_one_hots(probs_all), alive)  # [B, n, actions]
        q = own_action_values(module, obs, others, agent, state)  # [B, actions]
    logp = torch.log_softmax(cache.get(module, obs, agent), dim=-1)
    probs = logp.exp()
    loss = _live_mean((probs * (alpha * logp - q)).sum(-1), alive_k)
    return loss, {"loss": loss, "entropy": _live_mean(-(probs * logp).sum(-1).detach(), alive_k)}


def alpha_loss(module, batch: dict, cfg, targets: dict) -> tuple[torch.Tensor, dict]:
    """MASAC's temperature loss (`marl.algorithms.masac.loss.alpha_loss`: sac's for Box actions), on the actors'
    outputs the actor steps left (the last step of the update: the cache is emptied after it)."""
    obs, _, _ = grouped(module, batch)
    cache = actor_outputs(module)
    alive = live_masks(batch)[0]
    try:
        with torch.no_grad():
            outputs = group_outputs(module, obs, cache)
            if module.continuous:
                _, logp = SquashedGaussian(outputs).rsample_with_logp()
                entropy = -only_live(logp, alive).sum(-1)  # a one-sample estimate of the joint entropy
            else:
                logp = torch.log_softmax(outputs, dim=-1)
                entropy = only_live(-(logp.exp() * logp).sum(-1), alive).sum(-1)
    finally:
        cache.clear()
    return sac.temperature_loss(module, entropy, live_count(alive, obs.shape[1]) * sac.target_entropy(module, cfg))


def own_action_values(module, obs: torch.Tensor, joint: torch.Tensor, agent: int, state=None) -> torch.Tensor:
    """min_j Q_j(s, a_-agent, a_agent = a) [B, actions] for each of the agent's actions (one critic pass)."""
    b, n, a = joint.shape
    rows = joint[:, None].expand(b, a, n, a).clone()  # [B, own action, agents, actions]
    rows[:, :, agent, :] = torch.eye(a, device=joint.device)

    def tiled(x):
        return None if x is None else x[:, None].expand(b, a, *x.shape[1:]).reshape(b * a, *x.shape[1:])

    qs = module.q_values(tiled(obs), rows.reshape(b * a, n, a), None, tiled(state))
    return torch.min(torch.stack(qs), 0).values.view(b, a)
