"""An external simulator driving `marl serve`: simple_spread (3 agents) played through a PolicyClient.

    marl serve scenarios/simple_spread_serve.yaml --port 9900 &
    python examples/external_client.py --address http://127.0.0.1:9900 --episodes 500

The env runs here; every action comes from the server (or, with `--inference local`,
from the policies' weights pulled every `--update-interval` seconds), and the server
trains PPO on what this client reports. Any language works the same way: the JSON wire format is
in marl/external/server.py and docs/external.md.
"""

from __future__ import annotations

import argparse

from marl.external import PolicyClient, PolicyServerError


def play(address: str, episodes: int, token: str | None = None, seed: int = 0, wait_s: float = 60.0, stop=None,
         inference: str = "remote", update_interval_s: float = 5.0) -> list[float]:
    """Plays `episodes` episodes (fewer once the `stop` event, if given, is set); returns their returns.
    `inference="local"` acts here with weights pulled every `update_interval_s` seconds."""
    from mpe2 import simple_spread_v3

    env = simple_spread_v3.parallel_env(N=3, max_cycles=25)
    # wait_s: the server may still be starting; PolicyServerUnavailable after that long
    client = PolicyClient(address, token=token, inference=inference, update_interval_s=update_interval_s, seed=seed,
                          wait_s=wait_s)
    returns = []
    try:
        _play_episodes(client, env, episodes, seed, stop, returns)
    except PolicyServerError as err:
        if err.status != 503:
            raise
        print(f"the server stopped taking episodes: {err.message}")  # training ended (its stop criteria met)
    env.close()
    return returns


def _play_episodes(client, env, episodes: int, seed: int, stop, returns: list) -> None:
    with client:
        for i in range(episodes):
            if stop is not None and stop.is_set():
                break
            obs, _ = env.reset(seed=seed + i)
            eid = client.start_episode()
            total = 0.0
            while env.agents:
                actions = client.get_action(eid, obs)
                obs, rewards, terms, truncs, _ = env.step(actions)
                client.log_returns(eid, rewards)
                total += sum(rewards.values())
                if all(terms.values()) or all(truncs.values()):
                    client.end_episode(eid, obs, truncated=not any(terms.values()))
                    break
            returns.append(total)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--address", default="http://127.0.0.1:9900")
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--token", default=None, help="the server's token (or set MARL_SERVE_TOKEN)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--inference", choices=["remote", "local"], default="remote",
                        help="remote: the server acts on every request; local: act here with pulled weights")
    parser.add_argument("--update-interval", type=float, default=5.0, help="local inference: seconds between weight pulls")
    args = parser.parse_args()
    returns = play(args.address, args.episodes, args.token, args.seed, inference=args.inference,
                   update_interval_s=args.update_interval)
    window = returns[-50:]
    print(f"{len(returns)} episodes; mean return of the last {len(window)}: {sum(window) / len(window):.1f}")


if __name__ == "__main__":
    main()
