"""`marl serve SCENARIO.yaml --port 9900`: the scenario's algorithm trained from external clients' experience.

The scenario's workflow runs with its `sample` node replaced by a `serve` node
(`marl.workflow.external_ops`): a run directory, progress lines, checkpoints
and `--resume` work as for `marl train`.
"""

from __future__ import annotations

import os
from pathlib import Path

from marl import path_checks
from marl.errors import ConfigError
from marl.external.request_checks import check_host
from marl.external.server import TOKEN_ENV
from marl.execution.user_code import add_import_option, import_user_modules
from marl.workflow.external_ops import Serve
from marl.runtime.algorithm import workflow_for
from marl.algorithms import load_scenario
from marl.logging import make_run_dir
from marl.runtime.run_loop import train_run


def serving_config(config, host: str, port: int, max_body_kb: int = 1024, episode_timeout_s: float = 60.0,
                   max_episodes: int = 1000, end_grace_s: float = 5.0, on_listening=None, max_backlog_steps: int = 1):
    """The config with its workflow's one `sample` node replaced by `serve` (same edges); `on_listening(server)`
    is called once the server's socket is bound."""

    wf = workflow_for(config)
    g = wf.graph
    samples = [n for n, d in g.nodes(data=True) if d.get("op") == "sample"]
    if len(samples) != 1:
        raise ConfigError(f"marl serve replaces the workflow's one sample node; workflow '{wf.name}' has {len(samples)}")
    node = samples[0]
    outs = [(v, dict(d)) for _, v, d in g.out_edges(node, data=True)]
    g.remove_node(node)
    serve = Serve(host=host, port=port, max_body_kb=max_body_kb, episode_timeout_s=episode_timeout_s,
                  max_episodes=max_episodes, end_grace_s=end_grace_s, max_backlog_steps=max_backlog_steps)
    serve.on_listening = on_listening
    wf.add(node, serve)
    for v, d in outs:
        g.add_edge(node, v, **d)
    if config.env_runners_cfg.num_env_runners:
        config.env_runners_cfg.num_env_runners = 0  # clients sample; no runner actors
    return config.with_workflow(wf.validate())


def cmd_serve(args) -> int:
    if args.token:
        os.environ[TOKEN_ENV] = args.token
    # Everything that can refuse the start is checked before anything is printed or created.
    check_host(args.host, os.environ.get(TOKEN_ENV) or None)
    if args.max_episodes < 1 or args.end_grace < 0 or args.max_backlog < 1:
        raise ConfigError(f"--max-episodes must be >= 1 (got {args.max_episodes}), --end-grace >= 0 (got {args.end_grace}) "
                          f"and --max-backlog >= 1 (got {args.max_backlog})")
    path_checks.input_file(args.scenario, "scenario")
    if args.output:
        path_checks.output_dir(args.output, "--output", what="run directory")
    imported = import_user_modules(args.imports)
    # key=value items after options reach the command as leftovers (see marl.cli.main)
    overrides = list(args.overrides) + list(getattr(args, "extra_positionals", []))
    unknown = [item for item in overrides if "=" not in item]
    if unknown:
        raise ConfigError(f"marl serve takes one scenario file and key=value overrides, got {unknown}")
    config = load_scenario(args.scenario, overrides)
    config.user_modules = list(dict.fromkeys(config.user_modules + imported))
    echo = None if args.quiet else (lambda line: print(line, flush=True))
    run_dir = None

    def announce(server) -> None:  # only once the socket is bound: a start that fails says nothing but why
        if echo:
            echo(f"run directory: {run_dir.resolve()}")
            echo(f"serving {config.algo_name} on http://{server.host}:{server.port} "
                 f"({'token required' if server.token else 'no token: local clients only'})")

    config = serving_config(config, args.host, args.port, args.max_body_kb, args.episode_timeout,
                            args.max_episodes, args.end_grace, on_listening=announce, max_backlog_steps=args.max_backlog)
    config.validate()
    run_dir = make_run_dir(Path(args.scenario).stem + "-serve", args.output)
    try:
        train_run(config, run_dir, echo=echo)
    except Exception:
        if not any(run_dir.iterdir()):
            run_dir.rmdir()  # a server that could not start (port taken) leaves no empty run directory
        raise
    return 0


def add_parser(sub) -> None:
    serve = sub.add_parser(
        "serve", help="train a scenario from external simulators (policy server)",
        description="Start an HTTP policy server: external simulators connect with marl.external.PolicyClient "
                    "(or any HTTP client: wire format in marl/external/server.py and docs/external.md), get actions and "
                    "send rewards; the scenario's algorithm trains on their experience.",
    )
    serve.add_argument("scenario", help="scenario YAML file (its env gives the agents and spaces)")
    serve.add_argument("overrides", nargs="*", metavar="key=value", help="config overrides, e.g. stop.iterations=50")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1; any other needs a token)")
    serve.add_argument("--port", type=int, default=9900, help="port (default 9900; 0 picks a free one)")
    serve.add_argument("--token", help=f"shared secret every request must carry (or set {TOKEN_ENV})")
    serve.add_argument("--max-body-kb", type=int, default=1024, help="largest request body accepted (default 1024 KiB)")
    serve.add_argument("--episode-timeout", type=float, default=60.0, help="seconds without a request before an episode is dropped")
    serve.add_argument("--max-episodes", type=int, default=1000,
                       help="most episodes open at once, over all clients (default 1000); more get 429")
    serve.add_argument("--end-grace", type=float, default=5.0, metavar="SECONDS",
                       help="once training ends, answer new requests with 503 and the reason this long before exiting "
                            "(default 5)")
    serve.add_argument("--max-backlog", type=int, default=1, metavar="ENV_STEPS",
                       help="env steps waiting for training at which requests that add steps wait (default 1: clients run "
                            "at most one piece ahead of training, so the policy lag does not grow with the machine's load)")
    add_import_option(serve)
    serve.add_argument("--output", metavar="RUN_DIR", help="run directory (default: ./runs/<scenario>-serve-<timestamp>)")
    serve.add_argument("--quiet", action="store_true", help="print nothing")
    serve.set_defaults(fn=cmd_serve)
