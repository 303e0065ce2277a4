"""No test asserts on elapsed wall-clock time (tests/README.md, "Writing tests").

Machines are shared and differ up to 2x in speed: a test that passes on an idle machine and fails beside two
busy loops is a broken test. A test asserts what happened (events in order, counts), never how many seconds
it took. Wall-clock readings may bound a wait (`while time.monotonic() < deadline`), never be asserted on.

The check reads every test file's syntax tree: in each function, a name is a wall-clock reading if it is
assigned from an expression that calls a clock (`time.time`, `time.monotonic`, `time.perf_counter`, their
`_ns` forms) or uses another such name; no `assert` (and no `pytest.approx`/comparison inside one) may use a
clock call or such a name.

A wait's bound is `tests.bounds.HANG_S`: a literal `timeout=` (a process, thread or server wait) or deadline
(`time.monotonic() + N`) between 10 s and that bound is a wait a slow, loaded machine outlasts, and is refused
too. Below 10 s is a request's own timeout (a socket to a server already listening), not a wait for work.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.bounds import HANG_S

TESTS = Path(__file__).resolve().parent
CLOCKS = {"time", "monotonic", "perf_counter", "time_ns", "monotonic_ns", "perf_counter_ns"}


def _is_clock_call(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    f = node.func
    if isinstance(f, ast.Attribute) and f.attr in CLOCKS and isinstance(f.value, ast.Name) and f.value.id == "time":
        return True
    return isinstance(f, ast.Name) and f.id in {"monotonic", "perf_counter", "perf_counter_ns", "monotonic_ns"}


NUMERIC = {"round", "abs", "max", "min", "float", "int", "sum"}  # calls whose result is still the reading


def _uses_clock(expr: ast.AST, readings: set[str]) -> bool:
    """Whether `expr`'s value is a clock reading or arithmetic on one. A reading passed to another call or
    formatted into a string (a unique job id, a log line) is no longer a time."""
    if _is_clock_call(expr):
        return True
    if isinstance(expr, ast.Name):
        return expr.id in readings
    if isinstance(expr, ast.JoinedStr):
        return False
    if isinstance(expr, ast.Call):
        numeric = isinstance(expr.func, ast.Name) and expr.func.id in NUMERIC
        return numeric and any(_uses_clock(a, readings) for a in expr.args)
    return any(_uses_clock(child, readings) for child in ast.iter_child_nodes(expr))


def _targets(node: ast.AST) -> list[str]:
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    return [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]


def timing_assertions(source: str) -> list[int]:
    """Line numbers of asserts on wall-clock readings in `source`."""
    tree = ast.parse(source)
    lines = []
    for func in [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]:
        readings: set[str] = set()
        assigns = [n for n in ast.walk(func) if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and n.value]
        changed = True
        while changed:  # names read from a clock, or computed from such names (t1 - t0, elapsed / n)
            changed = False
            for a in assigns:
                if _uses_clock(a.value, readings):
                    new = set(_targets(a)) - readings
                    changed |= bool(new)
                    readings |= new
        lines += [n.lineno for n in ast.walk(func) if isinstance(n, ast.Assert) and _uses_clock(n.test, readings)]
    return sorted(set(lines))


def _literal(node: ast.AST) -> float | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) else None


def short_waits(source: str) -> list[int]:
    """Line numbers of literal wait bounds in `source` that a loaded machine can outlast: `timeout=N` in a call,
    or a clock reading plus N, with 10 <= N < HANG_S."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        values = []
        if isinstance(node, ast.Call):
            values = [(k.value, node) for k in node.keywords if k.arg in ("timeout", "timeout_s")]
        elif isinstance(node, ast.arguments):  # a default: def run(*args, timeout=300)
            named = node.args[len(node.args) - len(node.defaults):] + node.kwonlyargs
            defaults = list(node.defaults) + [d for d in node.kw_defaults if d is not None]
            values = [(d, d) for a, d in zip(named, defaults) if a.arg in ("timeout", "timeout_s")]
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and _is_clock_call(node.left):
            values = [(node.right, node)]
        lines += [where.lineno for value, where in values
                  if (n := _literal(value)) is not None and 10 <= n < HANG_S]
    return sorted(set(lines))


def test_the_wait_rule_finds_short_bounds_only():
    flagged = short_waits(
        "import time, subprocess\n"
        "subprocess.run(['marl'], timeout=300)\n"
        "subprocess.run(['marl'], timeout=HANG_S)\n"
        "socket.create_connection(('127.0.0.1', 1), timeout=1)\n"
        "deadline = time.monotonic() + 120\n"
        "deadline = time.monotonic() + HANG_S\n"
        "def run(*args, timeout=600):\n    pass\n"
    )
    assert flagged == [2, 5, 7]


def offences(check) -> dict[str, list[int]]:
    """file name -> the lines `check(source)` flags, for every test file with any."""
    found = {p.name: check(p.read_text()) for p in sorted(TESTS.glob("*.py"))}
    return {name: lines for name, lines in found.items() if lines}


def test_no_test_waits_less_than_the_hang_bound():
    found = offences(short_waits)
    assert not found, f"wait bounds under tests.bounds.HANG_S (a loaded machine outlasts them; use HANG_S): {found}"


def test_the_rule_finds_what_it_should():
    flagged = timing_assertions(
        "import time\n"
        "def a():\n    t0 = time.monotonic()\n    work()\n    assert time.monotonic() - t0 < 5\n"
        "def b():\n    t0 = time.perf_counter()\n    elapsed = time.perf_counter() - t0\n    assert elapsed < 1.0\n"
        "def c():\n    deadline = time.time() + 60\n    while time.time() < deadline and not done():\n        pass\n"
        "    assert done()\n"
        "def d():\n    job = f'run_{time.monotonic_ns()}'\n    logs = fetch(job)\n    assert 'ok' in logs\n"
        "def e():\n    t0 = time.time()\n    assert round(time.time() - t0, 1) <= 2\n"
    )
    # the bounded wait in c() is allowed (its assert is on the outcome), as is a reading made into an id in d()
    assert flagged == [5, 9, 21]


def test_no_test_asserts_on_wall_clock_time():
    found = offences(timing_assertions)
    assert not found, f"asserts on elapsed wall-clock time (assert order or counts instead): {found}"
