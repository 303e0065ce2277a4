"""Every registered algorithm x one task of each env family: `algorithm=X task=FAMILY/TASK` composes and builds
(no training), or, where the algorithm's capabilities refuse the pair, is refused with its one line.

What the capabilities refuse, read from the env (its agents' action spaces, whether it is turn-based) and the
algorithm's record, not listed by hand: an action space kind outside `Capabilities.action_spaces`, and a policy
learning from joint steps of several agents (QMIX, VDN, MASAC, ...) on a turn-based env. A family whose extra is
not installed is skipped by name. The offline algorithms (BC, MARWIL, CQL) read an empty recording of the
current schema: building reads only its files' footers.
"""

from __future__ import annotations

import importlib.util

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from marl.config.capabilities import space_kind
from marl.config.compose import compose
from marl.config.registry import discovered
from marl.errors import ConfigError
from marl.offline.schema import REQUIRED, SCHEMA_VERSION, VERSION_KEY
from marl.policies.mapping import resolve_policies

# one task of each family in marl/conf/task/<family>/, and the package its env needs
FAMILY_TASKS = {
    "gym/cartpole": "gymnasium", "mpe/simple_spread": "mpe2", "vmas/navigation": "vmas",
    "jaxmarl/simple_spread": "jaxmarl", "smax/3m": "jaxmarl", "lbf/foraging_8x8_2p_2f": "lbforaging",
    "rware/tiny_2ag": "rware", "butterfly/pistonball": "pymunk", "openspiel/kuhn_poker": "pyspiel",
    "mamujoco/halfcheetah_2x3": "gymnasium_robotics",
}
OFFLINE = {"BC", "MARWIL", "CQL"}
ALGORITHMS = sorted(a for a in discovered() if a != "MIXED")  # MIXED: tests/test_compose.py (it needs its policies)
PAIRS = [(algo, task) for algo in ALGORITHMS for task in FAMILY_TASKS]


@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    folder = tmp_path_factory.mktemp("recording")
    table = pa.table({c: pa.array([], pa.float32()) for c in REQUIRED})
    pq.write_table(table.replace_schema_metadata({VERSION_KEY: str(SCHEMA_VERSION).encode()}), folder / "empty.parquet")
    return folder


def refusal(config) -> str | None:
    """The words of the one line the algorithm's capabilities refuse this pair with; None: it must build. Read from
    the resolved config: an env that offers both action kinds (VMAS, JaxMARL's MPE) acts in the algorithm's."""
    config = config.resolved()
    spec = config.env_spec()
    specs, _ = resolve_policies(spec, config.policy_specs(), config.policy_mapping())
    for pid, policy in specs.items():
        if space_kind(policy.action_space) not in config.capabilities.action_spaces:
            return f"{config.algo_name} acts in"
        group = config.plan_for(pid).group_agent_indices
        if spec.turn_based and group is not None and len(group) > 1:
            return "is turn-based (one player moves per step)"
    return None


@pytest.mark.slow  # 171 pairs, build only
@pytest.mark.parametrize("algo, task", PAIRS, ids=[f"{a}-{t}" for a, t in PAIRS])
def test_every_algorithm_composes_with_a_task_of_each_family_and_builds(algo, task, recording, request):
    package = FAMILY_TASKS[task]
    if importlib.util.find_spec(package) is None:
        pytest.skip(f"{task}: its extra is not installed (no {package})")
    if algo in OFFLINE:
        request.getfixturevalue("ray_session")  # Ray Data reads the recording: the session's Ray, not one of its own
    # two env copies a runner: building makes them (SMAX's 128 jitted worlds took 80-100 s to build for some)
    items = [f"algorithm={algo.lower()}", f"task={task}", "loggers.tensorboard=false", "env_runners.num_envs_per_env_runner=2"]
    config = compose(None, items + ([f"offline.input={recording}"] if algo in OFFLINE else [])).config(validate=True)
    assert config.algo_name == algo
    refused = refusal(config)
    if refused is None:
        config.build().stop()
        return
    with pytest.raises(ConfigError) as err:
        config.build().stop()
    message = str(err.value)
    assert refused in message and "\n" not in message, message


def test_one_task_of_every_family():
    from marl.config.compose import group_options
    assert {t.split("/")[0] for t in FAMILY_TASKS} == {o.split("/")[0] for o in group_options("task")}


def test_the_refusals_are_read_from_the_capabilities():
    """The pairs the test expects refused are the ones the records refuse: not none, not every one."""
    td3 = compose(None, ["algorithm=td3", "task=gym/cartpole"]).config()
    assert refusal(td3) == "TD3 acts in"
    assert refusal(compose(None, ["algorithm=qmix", "task=openspiel/kuhn_poker"]).config()) is not None
    assert refusal(compose(None, ["algorithm=ppo", "task=openspiel/kuhn_poker"]).config()) is None
    assert refusal(compose(None, ["algorithm=dqn", "task=vmas/navigation"]).config()) is None  # VMAS acts Discrete for it
